"""Retention: ``prune`` deletes whole sessions with no write since a cutoff.

Candidates come from the catalog by ``updated_at`` (the index ``by_activity``), ``batch`` at a
time; each batch is one short transaction that locks the sessions' rows as ``delete`` does
(waiting for writers in flight), re-checks under the catalog rows' locks that each session is
still idle since the cutoff (its catalog row, and its rows' own times: the catalog row may lag
the last write by up to ``catalog.ACTIVITY_LAG``, and the Java store's writes never move it;
maintenance that rewrites rows of an idle session gives them the pinned activity time, so it
does not make the session active), and deletes it with its history and catalog row. A session written during the prune is skipped,
never half-deleted; an interrupted prune leaves whole sessions only, and running it again ends
where one uninterrupted run would.
"""

from __future__ import annotations

import datetime as dt
import functools
from typing import Any, Callable, NamedTuple, Optional

from . import catalog, keys, sql
from .table import Table

__all__ = ["PruneReport", "prune", "cutoff"]


class PruneReport(NamedTuple):
    """What a prune deleted (or, with ``dry_run``, would delete): sessions, and their rows
    (history included; catalog rows not counted)."""

    sessions: int
    rows: int


def cutoff(run: Callable[..., Any], older_than: Any) -> dt.datetime:
    """The cutoff as the server's naive local time: now minus a timedelta, or a datetime
    (an aware one is converted with the server's offset from UTC). A negative duration and a
    datetime after the server's now are refused (ValueError naming older_than)."""
    if isinstance(older_than, dt.timedelta):
        if older_than < dt.timedelta(0):
            raise ValueError(f"older_than must not be negative, got {older_than}")
        secs = int(older_than.total_seconds())
        return run(lambda cur: (cur.execute(sql.SERVER_CUTOFF, (secs,)), cur.fetchone()[0])[1], "prune", write=False)
    if isinstance(older_than, dt.datetime):
        # updated_at holds whole seconds (a write at 12:00:00.6 reads 12:00:00): a cutoff with a
        # fraction would take it for older; cut to the second, a session of that second is kept
        when = to_server_time(run, older_than).replace(microsecond=0)
        now = run(lambda cur: (cur.execute(sql.SERVER_NOW), cur.fetchone()[0])[1], "server clock", write=False)
        if when > now:
            raise ValueError(f"older_than {older_than} is in the future (the server's time is {now:%Y-%m-%d %H:%M:%S}):"
                             " every session, live ones included, would be idle since then")
        return when
    raise TypeError(f"older_than must be a timedelta or a datetime, got {type(older_than).__name__}: {older_than!r}")


def to_server_time(run: Callable[..., Any], when: dt.datetime) -> dt.datetime:
    """``when`` as the server's naive local time (naive datetimes are taken as already so)."""
    if when.tzinfo is None:
        return when
    offset = run(lambda cur: (cur.execute(sql.SERVER_UTC_OFFSET), cur.fetchone()[0])[1], "server clock", write=False)
    return when.astimezone(dt.timezone.utc).replace(tzinfo=None) + dt.timedelta(seconds=int(offset))


def prune(db: Any, t: Table, user_id: Any, when: dt.datetime,
          dry_run: bool, batch: int, progress: Optional[Callable[[int, int], None]] = None) -> PruneReport:
    """Delete (or count) the sessions idle since ``when``; see the module doc."""
    run, q, exact = functools.partial(db.run, session=None), t.q, t.exact_keys  # batches of many sessions
    of_user = catalog.prefix_of(user_id)
    prefix = of_user or ""
    count_sql, count_args = sql.prune_count(of_user, exact, when)
    count_sql = q(count_sql)
    total = run(lambda cur: (cur.execute(count_sql, count_args), cur.fetchone()[0])[1], "prune", write=False)
    done_sessions = done_rows = 0
    last: Optional[tuple] = None
    if progress is not None:
        progress(0, int(total))
    while True:
        statement, args = sql.prune_candidates(of_user, exact, when, last, batch)
        statement = q(statement)
        found = run(lambda cur: (cur.execute(statement, args), cur.fetchall())[1], "prune", write=False)
        if not found:
            break
        last = found[-1]
        sids = [r[0] for r in found if r[0].startswith(prefix) and keys.is_packed(r[0])]
        if sids:
            n_sessions, n_rows = run(lambda cur: _batch(cur, q, sids, when, dry_run, exact), "prune",
                                     write=not dry_run)
            done_sessions += n_sessions
            done_rows += n_rows
        if progress is not None:
            progress(done_sessions, int(total))
        if len(found) < batch:
            break
    return PruneReport(done_sessions, done_rows)


def _batch(cur: Any, q: Callable[[str], str], sids: list[str], when: dt.datetime, dry_run: bool,
           exact: bool) -> tuple[int, int]:
    """One batch in one transaction: lock, re-check idleness, delete; (sessions, rows). On a
    table whose key columns fold case (``exact`` False), only the ids asked for, byte for byte:
    ``alice:s`` never takes ``Alice:s`` (another user) with it."""
    if not dry_run:
        cur.execute(q(sql.with_ids(sql.PRUNE_LOCK_SESSIONS, len(sids))), sids)  # as delete(): wait for writers
    idle_sql = sql.PRUNE_IDLE if dry_run else sql.PRUNE_STILL_IDLE  # the catalog row (and the rows, in the lag)
    cur.execute(q(sql.with_ids(idle_sql, len(sids))), (keys.CATALOG_SESSION, *sids, when, when))
    asked = set(sids)
    idle = [r[0] for r in cur.fetchall() if r[0] in asked]
    if not idle:
        return 0, 0
    ids = idle + [keys.history_session(s) for s in idle]
    if dry_run:
        statement, params = sql.with_ids_exact(sql.PRUNE_COUNT_ROWS, "session_id", ids, exact)
        cur.execute(q(statement), params)
        return len(idle), int(cur.fetchone()[0])
    statement, params = sql.with_ids_exact(sql.PRUNE_DELETE_ROWS, "session_id", ids, exact)
    rows = cur.execute(q(statement), params)
    statement, params = sql.with_ids_exact(sql.PRUNE_DELETE_CATALOG, "state_key", idle, exact, (keys.CATALOG_SESSION,))
    cur.execute(q(statement), params)
    return len(idle), rows
