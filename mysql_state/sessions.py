"""The session engine: existence, deletes of keys and sessions, a user's sessions, erasure.

Deletes first lock what they delete (under READ COMMITTED a DELETE skips rows a writer in
flight inserted), so nothing a concurrent writer writes is left behind. Every session's
catalog row follows its rows: touched by a write, gone with the session's last row.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator, Optional, Sequence

from . import history, keys, sql
from .table import Table

__all__ = ["touch", "exists", "delete_session", "delete_key", "delete_keys", "activity_pinned", "read_session_ids",
           "session_ids", "forget_user", "truncate"]


def touch(cur: Any, t: Table, sid: str) -> None:
    """Mark the session active in its catalog row (paths with no upsert to carry it)."""
    cur.execute(t.statements["CATALOG_TOUCH"], (sid,))


def exists(cur: Any, t: Table, sid: str) -> bool:
    """Whether the session has any row."""
    cur.execute(t.statements["SESSION_EXISTS"], (sid,))
    return cur.fetchone() is not None


def delete_session(cur: Any, t: Table, sid: str) -> int:
    """Delete the session's rows, history and catalog row; returns the rows deleted. On a table
    whose keys fold case (the Java store's, before migrate()) the id is also compared as
    bytes: another user's session spelled with other cases stays."""
    cur.execute(t.statements["LOCK_SESSION"], (sid,))
    ids = (sid, keys.history_session(sid), sid)
    if t.exact_keys:
        return cur.execute(t.statements["DELETE_SESSION"], ids)
    return cur.execute(t.statements["DELETE_SESSION_BYTES"], ids + ids)


def delete_key(cur: Any, t: Table, sid: str, k: str, *, touch: bool = True) -> int:
    """Delete one key (a list with its hash row, its archived history); the catalog row is
    touched (unless ``touch`` is false: maintenance), or goes with the session's last row;
    returns the rows deleted (values, items and hash rows)."""
    return delete_keys(cur, t, sid, [k], touch=touch)


def delete_keys(cur: Any, t: Table, sid: str, ks: Sequence[str], *, touch: bool = True) -> int:
    """Delete keys of one session (each a value, or a list with its hash row, and their
    archived history) in the caller's transaction; returns the rows deleted (values, items
    and hash rows; history not counted).

    Then the session's catalog row is touched (its activity moves) when a row went, or, with
    ``touch`` false (maintenance: a sweep, a prune), left as it is; a delete of keys that are
    not there writes nothing (it is no activity); with the session's last row it goes."""
    s = t.statements
    removed = archived = 0
    for k in ks:
        hk = keys.hash_key(k)
        cur.execute(s["LOCK_HASH_ROW"], (sid, hk))  # waits for a list writer
        removed += cur.execute(s["DELETE_KEY"], (sid, k, hk))
        archived += history.drop(cur, t, sid, k)  # the key's archived items go with it
    if exists(cur, t, sid):
        if touch and (removed or archived):
            cur.execute(s["CATALOG_TOUCH"], (sid,))  # as touch() does
    else:  # the last key: the session goes whole (history of keys no longer there too)
        cur.execute(s["CATALOG_DELETE"], (sid,))
        history.drop(cur, t, sid)
    return removed


@contextlib.contextmanager
def activity_pinned(cur: Any, t: Table, sid: str, key: Optional[str] = None) -> Iterator[None]:
    """Writes inside leave the session's activity as it was (maintenance: a prune that
    rewrites what it keeps): the catalog row is locked and read first, and its version and
    ``updated_at`` put back after, in the caller's transaction; the rows of ``key`` written
    inside take that ``updated_at`` too (not now: the doctor would take them for a write the
    catalog missed). They get new versions (their content changed: a compare-and-set must
    see it)."""
    cur.execute(t.statements["CATALOG_PIN"], (sid,))
    pinned = cur.fetchone()
    yield
    if pinned is not None:
        cur.execute(t.statements["CATALOG_RESTORE"], (pinned[0], pinned[1], sid))
        if key is not None and pinned[1] is not None:
            cur.execute(t.statements["MAINTENANCE_BACK_DATE"], (pinned[1], sid, key, keys.hash_key(key), pinned[1]))


def read_session_ids(cur: Any, t: Table, prefix: str) -> set[str]:
    """The packed ids starting with a user's ``prefix`` (the exact prefix tested, so a table
    whose collation is not exact is guarded too)."""
    template, params = sql.sessions_of_user(prefix, t.exact_keys)
    cur.execute(sql.render(template, t.quoted), params)
    ids = (r[0].decode("utf-8") if isinstance(r[0], (bytes, bytearray)) else r[0] for r in cur.fetchall())
    return {sid for sid in ids if sid.startswith(prefix)}


def session_ids(cur: Any, t: Table, prefix: str) -> set[str]:
    """The session ids (unpacked) of the user whose packed prefix is ``prefix``."""
    return {sid[len(prefix):] for sid in read_session_ids(cur, t, prefix)}


#: Rounds of forget_user while the user's sessions are still written to (see forget_user).
FORGET_ROUNDS = 3


def forget_user(db: Any, t: Table, prefix: str, batch: int, what: str,
                progress: Optional[Callable[[int, Optional[int]], None]] = None) -> int:
    """Erase every row of a user (``prefix``): each session whole, as :func:`delete_session`
    deletes one (its rows locked first, so a writer of it waits; its data rows, history and
    catalog row in one transaction), ``batch`` sessions at most a transaction; sessions
    known by their catalog row only go too. Safe to re-run; returns the rows removed. ``db``
    is the connector: this runs many transactions.

    A write of the user during the call makes its session again, whole: the call goes round
    again (at most ``FORGET_ROUNDS`` times), then leaves a session still being written as it
    is (whole: deleted sessions never leave part of a list or a session without its catalog
    row behind, which rows deleted by ranges across sessions did).

    ``progress(done, total)``: once the user's sessions are known, then after each batch (each
    committed): ``done`` the sessions erased so far, ``total`` the sessions found (a later
    round adds the sessions it finds), the counts the erasure keeps anyway; the last call has
    ``done == total``. A callback that raises stops the erasure there, the batches before it
    committed (each session whole): run it again to finish."""
    statement, params = sql.user_sessions_by_catalog(prefix, t.exact_keys)  # ranges, or (folding keys) LIKE
    by_catalog = (t.q(statement), params)

    def sessions_of(cur: Any) -> set[str]:  # from the catalog and from the data rows
        cur.execute(*by_catalog)
        return {r[0] for r in cur.fetchall() if r[0].startswith(prefix)} | read_session_ids(cur, t, prefix)

    removed = done = total = 0
    for round_ in range(FORGET_ROUNDS):
        sids = sorted(db.run(sessions_of, what, write=False))
        total += len(sids)
        if progress is not None and (sids or round_ == 0):
            progress(done, total)
        if not sids:
            break
        for i in range(0, len(sids), batch):
            part = sids[i:i + batch]
            removed += db.run(lambda cur: sum(delete_session(cur, t, sid) for sid in part), what, write=True,
                              session=None)
            done += len(part)
            if progress is not None:
                progress(done, total)
    return removed


def truncate(cur: Any, t: Table) -> int:
    """Remove every row (``TRUNCATE TABLE``); returns how many callers' rows there were."""
    cur.execute(t.statements["COUNT_ROWS"])
    count = int(cur.fetchone()[0])
    cur.execute(t.statements["TRUNCATE"])
    return count
