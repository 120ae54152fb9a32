"""History kept (``keep_history=True``): what a shrinking list save dropped, archived.

A save that makes a list shorter (a compaction, a truncation, a clear) archives, in its own
transaction and server-side, every stored item from the first changed index to the old end,
in item order, under the session's history id (:func:`keys.history_session`): ``state_key``
is the list's key, ``item_index`` the archive order, ``state_data`` the item's JSON unchanged,
``created_at`` the time it was archived. A save that keeps or grows the length archives
nothing. ``get_list`` never sees these rows; deleting the key, deleting or pruning the session,
and ``forget_user`` remove them. A list written without a hash row of ours (the Java store) is
read before a shrinking save so that what it drops is archived as well.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Callable, NamedTuple, Optional

from . import keys, serde
from .listsync import Plan

__all__ = ["HistoryItem", "archive", "drop", "first_dropped", "read"]

#: Archived items of one key, oldest first (a window as get_list's).
SELECT_HISTORY = (
    "SELECT item_index, state_data, created_at FROM {t} WHERE session_id = %s AND state_key = %s"
    " ORDER BY item_index LIMIT %s, %s"
)


DELETE_KEY_HISTORY = "DELETE FROM {t} WHERE session_id = %s AND state_key = %s"
DELETE_HISTORY = "DELETE FROM {t} WHERE session_id = %s"


class HistoryItem(NamedTuple):
    """One archived item: its value (decoded JSON) and when it was archived (server time)."""

    value: Any
    archived_at: dt.datetime


def first_dropped(plan: Plan) -> Optional[int]:
    """The first stored index a shrinking save replaces or removes; None when it archives nothing."""
    if plan.kind == "clear":
        return 0
    if plan.kind != "shrink":
        return None
    changed = [i for i, _ in plan.upserts]
    if plan.delete_from is not None:
        changed.append(plan.delete_from)
    return min(changed) if changed else None


def archive(cur: Any, statements: dict, sid: str, k: str, plan: Plan,
            reseal: Optional[Callable[[Any, str, str, str, int, int], None]] = None) -> None:
    """Archive what ``plan`` drops (before it is applied, in the same transaction).

    ``reseal(cur, from_sid, to_sid, key, first_new_index, index_shift)`` re-encrypts the
    copied rows for their new place (an encrypted store: a row is bound to its place).
    """
    start = first_dropped(plan)
    if start is None:
        return
    hsid = keys.history_session(sid)
    if reseal is not None:
        cur.execute(statements["NEXT_ARCHIVE_INDEX"], (hsid, k))
        base = int(cur.fetchone()[0])
    cur.execute(statements["ARCHIVE_ITEMS"], (hsid, k, hsid, k, start, sid, k, start))
    if reseal is not None:
        reseal(cur, sid, hsid, k, base, start - base)


def drop(cur: Any, q: Callable[[str], str], sid: str, k: Optional[str] = None) -> int:
    """Delete the archived items of key ``k`` of session ``sid`` (every key's when ``k`` is
    None), in the caller's transaction; returns the rows deleted. Deleting a key or a session
    erases its history: nothing of it is left where no catalog row leads."""
    hsid = keys.history_session(sid)
    if k is None:
        return cur.execute(q(DELETE_HISTORY), (hsid,))
    return cur.execute(q(DELETE_KEY_HISTORY), (hsid, k))


def read(run: Callable[[Callable[[Any], Any]], Any], q: Callable[[str], str], sid: str, k: str,
         offset: int, limit: Optional[int], no_limit: int,
         decode: Optional[Callable[[str, str, int, Any], Any]] = None) -> list[HistoryItem]:
    """Archived items of ``k``, oldest first, from ``offset`` (>= 0), at most ``limit``;
    ``decode(session, key, index, text)`` opens encrypted rows."""
    statement = q(SELECT_HISTORY)

    def fetch(cur: Any) -> list:
        cur.execute(statement, (keys.history_session(sid), k, offset, no_limit if limit is None else limit))
        return cur.fetchall()

    hsid = keys.history_session(sid)
    if decode is None:
        return [HistoryItem(serde.decode_row(data, None, sid, k, i), at) for i, data, at in run(fetch)]
    return [HistoryItem(decode(hsid, k, i, data), at) for i, data, at in run(fetch)]
