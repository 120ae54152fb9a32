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

Dependencies point one way: ``pool`` uses this module (:func:`check_consistency`, and a
router it is given); this module knows a connector only as something with ``run``.

Replicas are read-only and read with a non-admin user: only the reads above are sent to
them, on autocommit connections (no DDL, no writes, no SET, no admin statement).
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from typing import Any, Callable, Optional, Protocol, TypeVar

from . import sql
from .errors import ServerUnavailableError

__all__ = ["STRONG", "SESSION", "EVENTUAL", "CONSISTENCIES", "DEFAULT_SESSION_WAIT", "check_consistency",
           "merge_gtids", "GtidLog", "Router", "Reader"]

T = TypeVar("T")
STRONG, SESSION, EVENTUAL = "strong", "session", "eventual"
CONSISTENCIES = (STRONG, SESSION, EVENTUAL)
DEFAULT_SESSION_WAIT = 5.0
#: Sessions whose last write's GTID is remembered; older ones raise the floor instead.
MAX_SESSIONS = 65536
_MARIADB_GTID = re.compile(r"^(\d+)-(\d+)-(\d+)$")
#: The GTID of a write could not be read: that session is read on the primary.
UNKNOWN = "?"


def check_consistency(value: Any) -> str:
    """``value`` if it is one of :data:`CONSISTENCIES`; else a ValueError naming ``consistency``."""
    if value not in CONSISTENCIES or not isinstance(value, str):
        raise ValueError(f"consistency must be one of {', '.join(map(repr, CONSISTENCIES))}, got {value!r}")
    return value


def merge_gtids(a: Optional[str], b: Optional[str]) -> Optional[str]:
    """A position at or past both ``a`` and ``b``.

    MariaDB positions (``domain-server-seqno``, comma-separated) keep the highest seqno per
    domain; MySQL GTID sets are united by joining them (which ``WAIT_FOR_EXECUTED_GTID_SET``
    accepts).

    >>> merge_gtids("0-1-5,1-1-2", "0-1-9")
    '0-1-9,1-1-2'
    """
    if not a or not b:
        return a or b
    if UNKNOWN in (a, b):
        return UNKNOWN
    parts = [p.strip() for p in f"{a},{b}".split(",") if p.strip()]
    found = [_MARIADB_GTID.match(p) for p in parts]
    if not all(found):
        return ",".join(dict.fromkeys(parts))
    best: dict = {}
    for m in found:
        domain, seqno = int(m.group(1)), int(m.group(3))
        if domain not in best or seqno > best[domain][0]:
            best[domain] = (seqno, m.group(0))
    return ",".join(best[d][1] for d in sorted(best))


class GtidLog:
    """The GTID of this store's last commit per session (bounded), and the floor every
    session read waits for (writes without a session, and sessions forgotten)."""

    def __init__(self, max_sessions: int = MAX_SESSIONS) -> None:
        self._last: OrderedDict = OrderedDict()
        self._floor: Optional[str] = None
        self._all: Optional[str] = None  # past every write recorded
        self._max = max_sessions
        self._lock = threading.Lock()

    def record(self, session: Optional[str], gtid: Optional[str]) -> None:
        with self._lock:
            self._all = merge_gtids(self._all, gtid)
            if session is None:
                self._floor = merge_gtids(self._floor, gtid)
                return
            self._last[session] = merge_gtids(self._last.pop(session, None), gtid)
            while len(self._last) > self._max:
                _, old = self._last.popitem(last=False)
                self._floor = merge_gtids(self._floor, old)

    def position(self, session: Optional[str]) -> Optional[str]:
        """What a replica must have applied before it may serve a read of ``session`` (of
        several sessions when None: past every write of this store); None: anything goes,
        :data:`UNKNOWN`: read the primary."""
        with self._lock:
            if session is None:
                return self._all
            return merge_gtids(self._floor, self._last.get(session))


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
        try:
            with raw.cursor() as cur:
                cur.execute(statement)
                row = cur.fetchone()
            gtid = (row[0] or None) if row else None
        except Exception:  # noqa: BLE001 - the write is committed; only its GTID is unknown
            gtid = UNKNOWN
            force = getattr(raw, "_force_close", None)
            if force is not None:
                try:
                    force()  # its state is unknown: the next use re-opens it
                except Exception:  # noqa: BLE001
                    pass
        self.log.record(session, gtid)

    # ---- reads ---------------------------------------------------------------------------------

    def read(self, fn: Callable[[Any], T], what: str, consistency: str, session: Optional[str],
             primary: Callable[[Callable[[Any], T]], T], stats: Any) -> T:
        """``fn(cursor)`` on a replica when ``consistency`` allows it, else ``primary(fn)`` (the
        primary's connector running it); ``stats`` counts ``replica_reads`` and
        ``replica_fallbacks``."""
        wait = self.log.position(session) if consistency == SESSION else None
        if wait == UNKNOWN:
            stats.replica_fallbacks += 1
            return primary(fn)
        if wait is None:
            run = fn
        else:
            limit = self.session_wait

            def run(cur: Any) -> Any:
                mariadb = _is_mariadb(cur.connection)
                cur.execute(sql.GTID_WAIT_MARIADB if mariadb else sql.GTID_WAIT_MYSQL, (wait, limit))
                row = cur.fetchone()
                if not row or row[0] is None or int(row[0]) != 0:
                    return _BEHIND  # timed out (-1 / 1) or not a replica (NULL)
                return fn(cur)
        try:
            result = self.replicas.run(run, what, write=False)
        except ServerUnavailableError:
            result = _BEHIND  # no replica answers
        if result is _BEHIND:
            stats.replica_fallbacks += 1
            return primary(fn)
        stats.replica_reads += 1
        return result

    def close(self) -> None:
        self.replicas.close()
