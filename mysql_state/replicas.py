"""Reads from replicas: ``consistency="strong" | "session" | "eventual"`` per call.

* ``"strong"`` (the default): the primary, so a process always reads its own writes.
* ``"eventual"``: a replica whenever one answers (successive reads spread over the answering
  replicas), however far behind it is; the primary only when none answers.
* ``"session"``: a replica, but never older than this store's own last write to the session
  read: the replica first waits for the GTID of that commit (MariaDB ``MASTER_GTID_WAIT``,
  MySQL ``WAIT_FOR_EXECUTED_GTID_SET``) for at most ``session_wait`` seconds; the primary
  serves the read when the replica did not get there in time.

How the GTID of a commit is known: only when replicas are configured, the primary's
:class:`~mysql_state.pool.Connector` is given a :class:`Router` at construction, and calls
:meth:`Router.committed` right after each COMMIT, which reads the primary's position
(``@@global.gtid_binlog_pos`` on MariaDB, ``@@global.gtid_executed`` on MySQL: this write's
GTID and every one before it, so a write that logged nothing, an unchanged save, still waits
for what it saw) on the same connection: one round trip per write; a store without replicas has no router and pays nothing. The write's session is the
``session=`` every write passes to ``Connector.run`` (it has the packed id anyway), so a
write method added later cannot forget it: a write that names no session (``session=None``:
``transaction``, ``truncate_all_sessions``, maintenance) raises the floor every session read
waits for, which is always safe.

A write whose position is unknown (it could not be read after the COMMIT, or the write raised
:class:`~mysql_state.errors.CommitUnknownError`: it may have committed; the connector then
calls :meth:`Router.commit_unknown`) sends the "session" reads of its session to the primary
until a later write of that session records a position read after it (the primary's whole
position: at or past that commit, if it was made). One that names no session does so for every
session, until any later write records such a position.

Which replica can serve a read: one that answers and, for "session", reports within
``session_wait`` that it applied the position. The wait runs on the server in slices shorter
than the connection's ``read_timeout`` (as ``session_lock`` waits for ``GET_LOCK``), so a
``session_wait`` longer than ``read_timeout`` is never taken for a replica that stopped
answering: a wait that runs out is "not caught up" (the primary serves the read, the replica
stays in use). A replica that does not have the table or the database yet (behind their CREATE:
errors 1146, 1049) cannot serve the read either: the primary serves it.

Dependencies point one way: ``pool`` uses this module (:func:`check_consistency`, and a
router it is given); this module knows a connector only as something with ``run``.

Replicas are read-only and read with a non-admin user: only the reads above are sent to
them, on autocommit connections (no DDL, no writes, no SET, no admin statement).
"""

from __future__ import annotations

import re
import threading
import time
from collections import OrderedDict
from typing import Any, Callable, Optional, Protocol, Sequence, TypeVar, cast

from . import sql
from .errors import REPLICA_BEHIND_ERRNOS, MysqlStateError, ServerUnavailableError

__all__ = ["STRONG", "SESSION", "EVENTUAL", "CONSISTENCIES", "DEFAULT_SESSION_WAIT", "check_consistency",
           "merge_gtids", "wait_slice", "GtidLog", "Router", "Reader"]

T = TypeVar("T")
STRONG, SESSION, EVENTUAL = "strong", "session", "eventual"
CONSISTENCIES = (STRONG, SESSION, EVENTUAL)
DEFAULT_SESSION_WAIT = 5.0
#: Sessions whose last write's GTID is remembered; older ones raise the floor instead.
MAX_SESSIONS = 65536
_MARIADB_GTID = re.compile(r"^(\d+)-(\d+)-(\d+)$")
#: The GTID of a write could not be read: that session is read on the primary.
UNKNOWN = "?"
#: Seconds one server-side wait (a replica's GTID wait) lasts at most: well under the
#: connection's read timeout (and at most half of it), so that the driver never cuts a wait
#: and takes the server for one that stopped answering.
WAIT_SLICE = 5.0
#: The shortest slice, whatever the read timeout.
MIN_WAIT_SLICE = 0.1


def check_consistency(value: Any) -> str:
    """``value`` if it is one of :data:`CONSISTENCIES`; else a ValueError naming ``consistency``."""
    if value not in CONSISTENCIES or not isinstance(value, str):
        raise ValueError(f"consistency must be one of {', '.join(map(repr, CONSISTENCIES))}, got {value!r}")
    return value


def merge_gtids(a: Optional[str], b: Optional[str]) -> Optional[str]:
    """A position at or past both ``a`` and ``b``.

    MariaDB positions (``domain-server-seqno``, comma-separated) keep the highest seqno per
    domain; MySQL GTID sets (``uuid:1-5:7,uuid2:1-3``) are united interval by interval, so a
    position recorded at every write stays as short as the primary's own ``gtid_executed``
    (joined as text, it grew by one part a write). A set this cannot read is joined as text,
    which ``WAIT_FOR_EXECUTED_GTID_SET`` accepts too.

    >>> merge_gtids("0-1-5,1-1-2", "0-1-9")
    '0-1-9,1-1-2'
    >>> merge_gtids("3e11fa47-71ca-11e1-9e33-c80aa9429562:1-100", "3E11FA47-71CA-11E1-9E33-C80AA9429562:1-101:103")
    '3e11fa47-71ca-11e1-9e33-c80aa9429562:1-101:103'
    """
    if not a or not b:
        return a or b
    if UNKNOWN in (a, b):
        return UNKNOWN
    parts = [p.strip() for p in f"{a},{b}".split(",") if p.strip()]
    found = [_MARIADB_GTID.match(p) for p in parts]
    if not all(found):
        united = _united_mysql_sets(parts)
        return united if united is not None else ",".join(dict.fromkeys(parts))
    best: dict = {}
    for m in filter(None, found):  # all of them: each matched
        domain, seqno = int(m.group(1)), int(m.group(3))
        if domain not in best or seqno > best[domain][0]:
            best[domain] = (seqno, m.group(0))
    return ",".join(best[d][1] for d in sorted(best))


#: One part of a MySQL GTID set: a server's uuid and its intervals (``1-5:7``); a tagged set
#: (MySQL 8.3+, ``uuid:tag:1-5``) does not match and is joined as text.
_MYSQL_GTID_PART = re.compile(r"^([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})"
                              r"((?::\d+(?:-\d+)?)+)$")


def _united_mysql_sets(parts: Sequence[str]) -> Optional[str]:
    """The union of MySQL GTID set parts, each uuid's intervals merged; None when a part is not
    ``uuid:interval[:interval]...``."""
    spans: dict[str, list[tuple[int, int]]] = {}
    for part in parts:
        m = _MYSQL_GTID_PART.match(part)
        if m is None:
            return None
        for interval in m.group(2)[1:].split(":"):
            low, _, high = interval.partition("-")
            spans.setdefault(m.group(1).lower(), []).append((int(low), int(high or low)))
    out = []
    for uuid in sorted(spans):
        merged: list[list[int]] = []
        for low, high in sorted(spans[uuid]):
            if merged and low <= merged[-1][1] + 1:
                merged[-1][1] = max(merged[-1][1], high)
            else:
                merged.append([low, high])
        out.append(uuid + "".join(f":{lo}" if lo == hi else f":{lo}-{hi}" for lo, hi in merged))
    return ",".join(out)


def position_read(value: Any) -> str:
    """The position a write committed at, from the primary's ``gtid_binlog_pos`` (MariaDB) or
    ``gtid_executed`` (MySQL) read right after it: empty (no binary log, or MySQL's
    ``gtid_mode=OFF``, its default) is :data:`UNKNOWN`, so that "session" reads go to the
    primary rather than to a replica that nothing tells them to wait for.

    >>> position_read("0-1-9"), position_read(""), position_read(None)
    ('0-1-9', '?', '?')
    """
    return value if isinstance(value, str) and value.strip() else UNKNOWN


def wait_slice(connection: Any, longest: float = WAIT_SLICE) -> float:
    """The seconds one server-side wait on ``connection`` may last: at most ``longest`` and
    half the driver's read timeout (pymysql's, when the connection has one), at least
    :data:`MIN_WAIT_SLICE`. A longer wait is made of several such slices.

    >>> class Connection: _read_timeout = 2.0
    >>> wait_slice(Connection())
    1.0
    """
    read_timeout = getattr(connection, "_read_timeout", None) or 2 * longest
    return min(longest, max(MIN_WAIT_SLICE, read_timeout / 2))


class _Position:
    """What reads of one session (or of all: the floor, or past every write) wait for: the
    merged positions of the writes known, and the number of the last write whose position is
    unknown (0: none), which sends the reads to the primary."""

    __slots__ = ("gtid", "unknown")

    def __init__(self) -> None:
        self.gtid: Optional[str] = None
        self.unknown = 0

    def add(self, gtid: Optional[str], mark: int, since: int) -> None:
        """A write's position; :data:`UNKNOWN` with ``mark``, its number. A known position
        read after the unknown write (``since``: the unknown writes counted before the read
        began) is the primary's whole position, past that write: it lifts the mark."""
        if gtid == UNKNOWN:
            self.unknown = mark
            return
        self.gtid = merge_gtids(self.gtid, gtid)
        if self.unknown and since >= self.unknown:
            self.unknown = 0

    def absorb(self, other: "_Position") -> None:
        """Wait for ``other`` too (a forgotten session folded into the floor)."""
        self.gtid = merge_gtids(self.gtid, other.gtid)
        self.unknown = max(self.unknown, other.unknown)

    @property
    def wait(self) -> Optional[str]:
        """The position to wait for; :data:`UNKNOWN`: read the primary."""
        return UNKNOWN if self.unknown else self.gtid


class GtidLog:
    """The GTID of this store's last commit per session (bounded), and the floor every
    session read waits for (writes without a session, and sessions forgotten).

    A write recorded as :data:`UNKNOWN` sends the reads of its session (of every session, for
    the floor) to the primary until a position read after it is recorded for that session (for
    the floor: by any write); see the module's docstring."""

    def __init__(self, max_sessions: int = MAX_SESSIONS) -> None:
        self._last: OrderedDict = OrderedDict()  # session -> _Position
        self._floor = _Position()
        self._all = _Position()  # past every write recorded
        self._unknowns = 0  # writes recorded as UNKNOWN so far: their marks are 1, 2, ...
        self._max = max_sessions
        self._lock = threading.Lock()

    def stamp(self) -> int:
        """Taken before a position is read, and given to :meth:`record` with it: the
        position is past every unknown write recorded before the stamp."""
        return self._unknowns

    def record(self, session: Optional[str], gtid: Optional[str], since: Optional[int] = None) -> None:
        """The position ``gtid`` (None: nothing to wait for; :data:`UNKNOWN`: read the primary)
        of a write to ``session`` (None: every session), read after :meth:`stamp` returned
        ``since`` (None: it lifts no unknown write)."""
        with self._lock:
            mark = 0
            if gtid == UNKNOWN:
                self._unknowns += 1
                mark = self._unknowns
            after = -1 if since is None else since
            self._all.add(gtid, mark, after)
            if session is None:
                self._floor.add(gtid, mark, after)
                return
            entry = self._last.pop(session, None) or _Position()
            entry.add(gtid, mark, after)
            self._last[session] = entry
            if self._floor.unknown and gtid != UNKNOWN and after >= self._floor.unknown:
                self._floor.add(gtid, 0, after)  # past the floor's unknown write: every session waits for it
            while len(self._last) > self._max:
                _, old = self._last.popitem(last=False)
                self._floor.absorb(old)

    def position(self, session: Optional[str]) -> Optional[str]:
        """What a replica must have applied before it may serve a read of ``session`` (of
        several sessions when None: past every write of this store); None: anything goes,
        :data:`UNKNOWN`: read the primary."""
        with self._lock:
            if session is None:
                return self._all.wait
            entry = self._last.get(session)
            return merge_gtids(self._floor.wait, entry.wait if entry is not None else None)


def _is_mariadb(raw: Any) -> bool:
    return "mariadb" in str(getattr(raw, "server_version", "")).lower()


_BEHIND = object()


class Reader(Protocol):
    """What the router needs of the replicas' connector: ``run(fn, what, write=False)``."""

    def run(self, fn: Callable[[Any], T], what: str, *, write: bool) -> T: ...

    def close(self) -> None: ...


class Router:
    """Sends reads to the primary or the replicas by consistency (see the module docstring).

    ``replicas`` runs reads on the replicas (a :class:`~mysql_state.pool.Connector` over their
    host list). The primary's connector is given this router at construction: it calls
    :meth:`read` for reads that are not ``"strong"`` and :meth:`committed` after each COMMIT.
    """

    def __init__(self, replicas: Reader, session_wait: float = DEFAULT_SESSION_WAIT,
                 max_sessions: int = MAX_SESSIONS) -> None:
        self.replicas, self.session_wait = replicas, session_wait
        self.log = GtidLog(max_sessions)

    # ---- writes --------------------------------------------------------------------------------

    def committed(self, raw: Any, session: Optional[str]) -> None:
        """Read and record the GTID of the commit just made on ``raw`` for ``session`` (the
        packed id the write named; None: every session). Never raises: a GTID that could not
        be read sends that session's "session" reads to the primary."""
        statement = sql.LAST_GTID_MARIADB if _is_mariadb(raw) else sql.LAST_GTID_MYSQL
        since = self.log.stamp()
        try:
            with raw.cursor() as cur:
                cur.execute(statement)
                row = cur.fetchone()
            gtid = position_read(row[0] if row else None)
        except Exception:  # noqa: BLE001 - the write is committed; only its GTID is unknown
            gtid = UNKNOWN
            force = getattr(raw, "_force_close", None)
            if force is not None:
                try:
                    force()  # its state is unknown: the next use re-opens it
                except Exception:  # noqa: BLE001
                    pass
        self.log.record(session, gtid, since)

    def commit_unknown(self, session: Optional[str]) -> None:
        """A write to ``session`` (None: every session) raised CommitUnknownError: it may have
        committed, at a position nobody read, so "session" reads of it go to the primary until
        a later write of it records a position (of any session, for None). Never raises."""
        self.log.record(session, UNKNOWN)

    # ---- reads ---------------------------------------------------------------------------------

    def read(self, fn: Callable[[Any], T], what: str, consistency: str, session: Optional[str],
             primary: Callable[[Callable[[Any], T]], T], stats: Any) -> T:
        """``fn(cursor)`` on a replica when ``consistency`` allows it, else ``primary(fn)`` (the
        primary's connector running it); ``stats`` counts ``replica_reads`` and
        ``replica_fallbacks``."""
        wait = self.log.position(session) if consistency == SESSION else None
        if wait == UNKNOWN:
            stats.add("replica_fallbacks")
            return primary(fn)
        if wait is None:
            run = fn
        else:
            limit = self.session_wait

            def run(cur: Any) -> Any:
                statement = sql.GTID_WAIT_MARIADB if _is_mariadb(cur.connection) else sql.GTID_WAIT_MYSQL
                step = wait_slice(cur.connection)
                deadline = time.monotonic() + limit
                left = limit
                while True:  # in slices shorter than read_timeout: the driver never cuts a wait
                    # never 0 seconds: MySQL's WAIT_FOR_EXECUTED_GTID_SET would wait forever
                    cur.execute(statement, (wait, max(MIN_WAIT_SLICE, min(step, left))))
                    row = cur.fetchone()
                    if not row or row[0] is None:
                        return _BEHIND  # not a replica (NULL)
                    if int(row[0]) == 0:
                        return fn(cur)
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return _BEHIND  # timed out (-1 / 1): answering, but not caught up
        result: object  # fn's result (a T), or _BEHIND
        try:
            result = self.replicas.run(run, what, write=False)
        except ServerUnavailableError:
            result = _BEHIND  # no replica answers
        except MysqlStateError as exc:
            if exc.errno not in REPLICA_BEHIND_ERRNOS:
                raise
            result = _BEHIND  # the replica has not applied the CREATE (or a migration's ALTER) yet
        if result is _BEHIND:
            stats.add("replica_fallbacks")
            return primary(fn)
        stats.add("replica_reads")
        return cast(T, result)  # not _BEHIND: what fn returned

    def close(self) -> None:
        self.replicas.close()
