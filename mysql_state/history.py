"""History kept (``keep_history=True``): what a list save dropped (shrunk or replaced items), archived.

A save that makes a list shorter (a compaction, a truncation, a clear) or replaces any of its
stored items (a compaction into as many items, an edit) archives, in its own transaction and
server-side, every stored item from the first changed index to the old end, in item order,
under the session's history id (:func:`keys.history_session`): ``state_key`` is the list's
key, ``item_index`` the archive order, ``state_data`` the item's JSON unchanged,
``created_at`` the time it was archived. An append archives nothing. ``get_list`` never sees
these rows; deleting the key, deleting or pruning the session,
and ``forget_user`` remove them. A list written without a hash row of ours (the Java store) is
read before a shrinking save so that what it drops is archived as well.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, NamedTuple, Optional

from . import keys, sql
from .listsync import Plan
from .sql import NO_LIMIT
from .table import Table

__all__ = ["HistoryItem", "archive", "drop", "first_dropped", "read"]


class HistoryItem(NamedTuple):
    """One archived item: its value (decoded JSON) and when it was archived (server time)."""

    value: Any
    archived_at: dt.datetime


def first_dropped(plan: Plan) -> Optional[int]:
    """The first stored index a save replaces or removes (a shrink, or an edit that keeps the
    length or grows it: a compaction into a summary and as many turns); None when it archives
    nothing (an append, an unchanged list)."""
    if plan.kind == "clear":
        return 0
    if plan.kind not in ("shrink", "suffix"):
        return None
    changed = [i for i, _ in plan.upserts]
    if plan.delete_from is not None:
        changed.append(plan.delete_from)
    return min(changed) if changed else None


def archive(cur: Any, t: Table, sid: str, k: str, plan: Plan) -> None:
    """Archive what ``plan`` drops (before it is applied, in the same transaction); an
    encrypted store seals the copied rows again for their new place (a row is bound to it)."""
    start = first_dropped(plan)
    if start is None:
        return
    statements, hsid = t.statements, keys.history_session(sid)
    if t.sealer.encrypted:
        cur.execute(statements["NEXT_ARCHIVE_INDEX"], (hsid, k))
        base = int(cur.fetchone()[0])
    cur.execute(statements["ARCHIVE_ITEMS"], (hsid, k, hsid, k, start, sid, k, start))
    if t.sealer.encrypted:
        t.sealer.reseal_copied(cur, statements, sid, hsid, k, base, start - base)


def drop(cur: Any, t: Table, sid: str, k: Optional[str] = None) -> int:
    """Delete the archived items of key ``k`` of session ``sid`` (every key's when ``k`` is
    None), in the caller's transaction; returns the rows deleted. Deleting a key or a session
    erases its history: nothing of it is left where no catalog row leads."""
    hsid = keys.history_session(sid)
    if k is None:
        return cur.execute(t.q(sql.DELETE_HISTORY), (hsid,))
    return cur.execute(t.q(sql.DELETE_KEY_HISTORY), (hsid, k))


def read(db: Any, t: Table, sid: str, k: str, offset: int, limit: Optional[int]) -> list[HistoryItem]:
    """Archived items of ``k``, oldest first, from ``offset`` (>= 0), at most ``limit``
    (``db`` is the connector); sealed rows are opened by the table's sealer."""
    statement, hsid = t.q(sql.SELECT_HISTORY), keys.history_session(sid)

    def fetch(cur: Any) -> list:
        cur.execute(statement, (hsid, k, offset, NO_LIMIT if limit is None else limit))
        return cur.fetchall()

    return [HistoryItem(t.sealer.decode(hsid, k, i, data), at)
            for i, data, at in db.run(fetch, f"get_history {k!r}", write=False)]
