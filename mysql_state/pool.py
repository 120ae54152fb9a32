"""Connections: checkout with a bounded wait, one transaction per write, retries by error number.

DBUtils traps this module designs around:

* ``with pool.connection()`` does not commit: every write here ends in an explicit COMMIT
  (or ROLLBACK), so a connection always goes back with no open transaction.
* Outside ``begin()`` DBUtils silently re-runs a failed statement on a new connection (a write
  applied twice, or half a transaction committed on another connection). Statements here go
  to the raw driver connection (``dbapi_connection``), which DBUtils documents as outside
  its failover; the store retries whole transactions itself, by error number.
* ``blocking=True`` waits forever for a free connection: a store-owned pool is guarded by a
  semaphore with ``pool_timeout``; a given pool that raises ``TooManyConnections`` is polled
  until ``pool_timeout``.
"""

from __future__ import annotations

import contextlib
import random
import threading
import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Optional, Protocol, TypeVar

import pymysql
from dbutils.pooled_db import TooManyConnections
from pymysql.constants import CLIENT

from . import sql
from .checks import check_int, check_seconds
from .errors import (
    CONNECT_ERRNOS,
    CONNECTION_ERRNOS,
    OPEN_ERRNOS,
    REPLICATION_FAILED_ERRNOS,
    RETRYABLE_LOCK_ERRNOS,
    UNAVAILABLE_ERRNOS,
    DUPLICATE_KEY,
    CommitUnknownError,
    MysqlStateWarning,
    caller_stacklevel,
    PoolTimeoutError,
    ServerUnavailableError,
    StoreClosedError,
    errno_of,
    is_driver_error,
    tls_failure,
    translate,
    translating,
)
from . import url as _url
from .hosts import Host, HostPools, host_name
from .replicas import Router, check_consistency
from .url import parse_url  # noqa: F401 - re-exported: it lived here before url.py

T = TypeVar("T")
#: Retried as a whole transaction: deadlock, lock wait timeout, and the duplicate key of a
#: lost race to create a list's hash row (see list_write.create_hash_row).
RETRYABLE_WRITE_ERRNOS = RETRYABLE_LOCK_ERRNOS | {DUPLICATE_KEY}

DEFAULT_POOL_SIZE = 8
DEFAULT_POOL_TIMEOUT = 10.0
DEFAULT_CONNECT_TIMEOUT = 5.0
DEFAULT_READ_TIMEOUT = 30.0
DEFAULT_WRITE_TIMEOUT = 30.0
DEFAULT_RETRIES = 8  # lock conflicts (1213, 1205): whole-transaction retries
RECONNECTS = 2  # failed re-connects (server down) before ServerUnavailableError
STALE_RETRIES = 3  # connections found dead at first use (each retry re-opens a fresh one)


@dataclass
class Stats:
    """Counters a test or benchmark can read: what the store retried and why. ``lock_retries``
    counts every transaction run again for a conflict: lock conflicts (1213, 1205) and lost
    creation races (1062), each also in ``retries_by_errno``. The store's threads count through
    :meth:`add` (under a lock: no increment is lost); ``retries`` is a consistent copy."""

    lock_retries: int = 0
    reconnects: int = 0
    transactions: int = 0
    retries_by_errno: dict = field(default_factory=dict)  # e.g. {1213: 3, 1062: 5}
    replica_reads: int = 0  # reads a replica served (consistency "eventual"/"session")
    replica_fallbacks: int = 0  # such reads the primary served (no replica answered, or behind)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, counter: str, errno: Optional[int] = None) -> None:
        """One more of ``counter`` (a field's name); with ``errno``, one more retry for it.

        >>> s = Stats(); s.add("lock_retries", 1213); (s.lock_retries, s.retries_by_errno)
        (1, {1213: 1})
        """
        with self.lock:
            setattr(self, counter, getattr(self, counter) + 1)
            if errno is not None:
                self.retries_by_errno[errno] = self.retries_by_errno.get(errno, 0) + 1

    def retries(self) -> dict[int, int]:
        """``retries_by_errno`` copied under the lock (a thread may be adding to it)."""
        with self.lock:
            return {int(k): v for k, v in self.retries_by_errno.items()}


class Observer(Protocol):
    """What a :class:`Connector` tells whoever watches it (``Connector(..., observer=...)``;
    the store's :class:`~mysql_state.metrics.Metrics` is one). Both are called on the calling
    thread, must be cheap and must not raise."""

    def checked_out(self, seconds: float) -> None:
        """A pooled connection was obtained (or not) after waiting ``seconds``."""

    def ran(self, what: str, write: bool, seconds: float, error: Optional[BaseException]) -> None:
        """One :meth:`Connector.run` ended after ``seconds``: ``what`` names the operation
        (its first word is the operation's name), ``error`` what it raised (None: it
        returned), including errors raised by ``fn`` itself (e.g. a row that does not decode)."""


class Connector:
    """Runs a function on a raw DB-API connection, inside a transaction for writes.

    ``read_pool`` (optional) is used for reads: the store-owned one has autocommit on, so a
    read is exactly one round trip. ``router`` (a :class:`~mysql_state.replicas.Router`, only
    with replicas) serves reads that are not ``"strong"`` and records each write's GTID for
    the session the write names; ``observer`` (an :class:`Observer`) is told the time of
    each call and each checkout.
    """

    def __init__(
        self,
        pool: Any,
        *,
        read_pool: Any = None,
        owned: bool = False,
        pool_size: Optional[int] = None,
        pool_timeout: float = DEFAULT_POOL_TIMEOUT,
        retries: int = DEFAULT_RETRIES,
        name: str = "the store",
        hosts: Optional[HostPools] = None,
        reconnects: int = RECONNECTS,
        router: Optional[Router] = None,
        observer: Optional["Observer"] = None,
        guard: Optional[Callable[["Connector", str, bool], None]] = None,
    ) -> None:
        check_seconds("pool_timeout", pool_timeout)
        check_int("retries", retries, 0)
        if pool_size is not None:
            check_int("pool_size", pool_size, 1)
        if hosts is None:
            if pool is None or not callable(getattr(pool, "connection", None)):
                raise TypeError(
                    f"pool must have a .connection() method returning a DB-API connection "
                    f"(e.g. a DBUtils PooledDB), got {type(pool).__name__}"
                )
            hosts = HostPools([Host(pool, read_pool or pool, "the server")])
        #: The host list (one host unless several were given), in order of preference.
        self.hosts = hosts
        self.pool = hosts.first.pool
        self.read_pool = hosts.first.read_pool
        self.owned = owned
        self.pool_timeout = pool_timeout
        self.retries = retries
        self.reconnects = reconnects
        self.stats = Stats()
        self.closed = False
        self.name = name
        #: Routes reads that opt out of "strong" consistency, and is told the GTID of each
        #: COMMIT with the session written (a replicas.Router); None without replicas, so a
        #: store without replicas pays nothing.
        self.router = router
        #: Told how long each call and each checkout took (see :class:`Observer`), or None.
        self.observer = observer
        #: Called as ``guard(connector, what, write)`` before every call, to refuse one by
        #: raising (the store's refuses a write inside its own transaction's fn, and calls in a
        #: lost lease: :func:`mysql_state.transaction.guard`).
        self.guard = guard
        self._pools = hosts.pools()
        self._limits = {}
        pool = self.pool
        if pool_size:
            for p in self._pools:
                self._limits[id(p)] = threading.BoundedSemaphore(pool_size)
        elif getattr(pool, "_blocking", False) and getattr(pool, "_maxconnections", 0):
            warnings.warn(
                "the given PooledDB has blocking=True: a checkout may wait forever when it is "
                "exhausted; create it with blocking=False so the store can bound the wait "
                f"(pool_timeout={pool_timeout}s)",
                MysqlStateWarning,
                stacklevel=caller_stacklevel(),
            )

    # ---- checkout --------------------------------------------------------------------------

    def _checkout(self, pool: Any, what: str) -> Any:
        if self.observer is None:
            return self._wait_for(pool, what)
        start = time.perf_counter()
        try:
            return self._wait_for(pool, what)
        finally:
            self.observer.checked_out(time.perf_counter() - start)

    def _wait_for(self, pool: Any, what: str) -> Any:
        deadline = time.monotonic() + self.pool_timeout
        sem = self._limits.get(id(pool))
        if sem is not None and not sem.acquire(timeout=self.pool_timeout):
            raise PoolTimeoutError(
                f"{what}: no pooled connection became free within pool_timeout={self.pool_timeout}s"
            )
        try:
            delay = 0.001
            while True:
                try:
                    return pool.connection()
                except Exception as exc:  # noqa: BLE001 - sorted below
                    if isinstance(exc, TooManyConnections):
                        if time.monotonic() + delay > deadline:
                            raise PoolTimeoutError(
                                f"{what}: the pool stayed exhausted for pool_timeout="
                                f"{self.pool_timeout}s"
                            ) from exc
                        time.sleep(delay)
                        delay = min(delay * 2, 0.05)
                        continue
                    if is_driver_error(exc):
                        _drop_idle_cache_context(exc)
                        raise translate(exc, what) from exc
                    raise
        except BaseException:
            if sem is not None:
                sem.release()
            raise

    def _checkin(self, pool: Any, con: Any, broken: bool) -> None:
        sem = self._limits.get(id(pool))
        try:
            if broken:
                _drop(_raw(con), False)
            con.close()
        except Exception:  # noqa: BLE001 - returning a dead connection must not mask the error
            pass
        finally:
            if sem is not None:
                sem.release()

    # ---- running ---------------------------------------------------------------------------

    def run(
        self,
        fn: Callable[[Any], T],
        what: str,
        *,
        write: bool,
        lock_retry: bool = True,
        consistency: str = "strong",
        session: Optional[str] = None,
    ) -> T:
        """Run ``fn(cursor)`` with retries; a write is one transaction ending in COMMIT.

        ``session`` is the packed session id the call reads or writes; None: several or every
        session (a whole-table write, ``transaction``). A write names it so that, with
        replicas, "session" reads of that session wait for this commit.

        Retried: lock conflicts (1213, 1205, also when COMMIT returns them: a Galera
        certification failure) and a lost creation race (1062) for writes with
        ``lock_retry``, and a lost connection whenever nothing was committed yet. A lost
        connection is re-opened in place, so however many idle connections the server cut
        (``wait_timeout``, a proxy's idle timeout), the retry runs on a fresh one; a host that
        does not answer (refused, or 1047: a Galera node without quorum) is left for the next
        host of the list (:mod:`mysql_state.hosts`), as is one whose replication of the
        transaction failed before COMMIT (1180: a Galera node that left the primary component
        while a statement sent a streaming-replication fragment). A connection lost during
        COMMIT, and a COMMIT that failed with 1180, raise :class:`CommitUnknownError` and are
        never retried; with replicas, "session" reads of the write's session then go to the
        primary until a later write of it records its GTID.

        A read with ``consistency`` other than ``"strong"`` may go to a replica
        (:mod:`mysql_state.replicas`). A transaction that wrote nothing (only SELECT, SHOW
        and SET were sent) whose COMMIT fails is never "unknown": it moves on like a read.
        """
        if self.guard is not None:
            self.guard(self, what, write)
        if self.observer is None:
            return self._run(fn, what, write, lock_retry, consistency, session)
        start = time.perf_counter()
        error: Optional[BaseException] = None
        try:
            return self._run(fn, what, write, lock_retry, consistency, session)
        except Exception as exc:  # an interrupt (KeyboardInterrupt, a cancelled thread) is no error
            error = exc
            raise
        finally:
            self.observer.ran(what, write, time.perf_counter() - start, error)

    def _run(self, fn: Callable[[Any], T], what: str, write: bool, lock_retry: bool, consistency: str,
             session: Optional[str]) -> T:
        if consistency != "strong":
            check_consistency(consistency)
            if self.router is not None and not write:
                primary = lambda f: self._run(f, what, False, lock_retry, "strong", session)  # noqa: E731
                return self.router.read(fn, what, consistency, session, primary, self.stats)
        if self.closed:
            raise StoreClosedError(f"{what}: {self.name} is closed; it opens no new connection")
        way = _Failover(self.hosts, self.reconnects)
        host, pool, con = self._open(way, write, what)
        attempt = stale = 0
        broken = False
        try:
            while True:
                attempt += 1
                raw = _raw(con)
                flight = _Flight()
                restore_autocommit = False
                try:
                    _reconnect_if_closed(raw)
                    auto = _get_autocommit(raw)
                    if write and auto:
                        raw.autocommit(False)
                        restore_autocommit = True
                    cur = _Cursor(raw.cursor(), flight)
                    if write:
                        self._isolate(raw, cur)
                    result = fn(cur)
                    flight.on = True
                    if write:
                        flight.committing = True
                        if not (flight.committed or flight.ended):  # else the call's statements ended it
                            raw.commit()
                        self.stats.add("transactions")
                        if self.router is not None:
                            flight.committing = False
                            self.router.committed(raw, session)  # never raises: it records what it could
                    elif not auto:
                        raw.rollback()  # end the read snapshot: no open transaction goes back
                    if restore_autocommit:
                        raw.autocommit(True)
                    flight.on = False
                    self.hosts.mark_up(host)
                    return result
                except BaseException as exc:
                    driver = is_driver_error(exc)
                    errno = errno_of(exc)  # None for anything but the driver's
                    lost = errno in CONNECTION_ERRNOS and tls_failure(exc) is None
                    unready = errno in UNAVAILABLE_ERRNOS  # the host answers but cannot serve
                    # 1180: replicating the transaction failed (a Galera node that left the
                    # primary component); before COMMIT nothing was committed (errors.py)
                    unreplicated = errno in REPLICATION_FAILED_ERRNOS
                    # A statement sent whose reply was not read (an interrupt, a cancelled
                    # thread): the protocol state is unknown, so the connection is dropped.
                    unknown = flight.on and not driver
                    if lost or unready or unknown or not isinstance(exc, Exception):
                        _drop(raw, restore_autocommit)
                    else:
                        try:
                            raw.rollback()
                            if restore_autocommit:
                                raw.autocommit(True)
                        except BaseException:  # noqa: BLE001 - cannot roll back: drop it
                            _drop(raw, restore_autocommit)
                    if not driver:
                        raise
                    if (lost or unready or unreplicated) and flight.committing and flight.wrote:
                        if self.router is not None:
                            self.router.commit_unknown(session)  # its "session" reads: the primary
                        why = (f"the server failed the COMMIT (error {errno}: {exc.args[-1]}); on Galera the "
                               "rest of the cluster may have committed it" if unreplicated else
                               f"the connection was lost during COMMIT (error {errno})")
                        raise CommitUnknownError(
                            f"{what}: {why}; the write may or may not be stored, read it back before "
                            "repeating it",
                            errno,
                        ) from exc
                    timed_out = isinstance(exc.__context__, TimeoutError)
                    # A host that stopped answering (frozen: no reply within read_timeout) with
                    # nothing committed: the next host of the list, without another round
                    # (each try on a frozen host costs read_timeout); alone, the error.
                    # A replica list (skip_down) marks even its last host down: the read goes
                    # to the primary, and the next reads skip that replica for its back-off.
                    frozen = lost and timed_out and (way.has_next or self.hosts.skip_down)
                    if unready or unreplicated or frozen or (lost and not timed_out and errno in CONNECT_ERRNOS):
                        # This host does not answer: the next one of the list (the same one,
                        # after a back-off, when it is the only one).
                        if way.failed(reround=not frozen):
                            self.stats.add("reconnects")
                            if way.host is not host:
                                self._checkin(pool, con, True)
                                con = None
                                host, pool, con = self._open(way, write, what)
                            continue
                    elif lost and not timed_out:
                        stale += 1  # a connection cut while idle: re-opened in place
                        if stale <= STALE_RETRIES:
                            self.stats.add("reconnects")
                            continue
                    if write and lock_retry and errno in RETRYABLE_WRITE_ERRNOS and attempt <= self.retries:
                        self.stats.add("lock_retries", errno)
                        _backoff(attempt, 0.005)
                        continue
                    broken = lost or unready
                    raise translate(exc, what) from exc
        finally:
            if con is not None:
                self._checkin(pool, con, broken)

    def _open(self, way: "_Failover", write: bool, what: str) -> tuple[Host, Any, Any]:
        """A pooled connection to the first host of ``way`` that answers (host, pool, conn).

        A host whose connection cannot be made (refused, or lost or timed out during the
        handshake: a host that accepts but does not answer) is marked down and the next one
        tried; when none is left, the last host's ServerUnavailableError is raised.
        """
        while True:
            host = way.host
            if host is None:
                raise ServerUnavailableError(f"{what}: no host of {self.name} answers")
            pool = host.pool if write else host.read_pool
            try:
                return host, pool, self._checkout(pool, what)
            except ServerUnavailableError as exc:
                if exc.errno not in OPEN_ERRNOS or not way.failed(reround=False):
                    raise

    @contextlib.contextmanager
    def hold(self, what: str) -> Iterator[Any]:
        """A driver connection (autocommit on) kept by the caller for a while, e.g. to hold a
        session lock; it goes back to the pool at the end, closed if anything went wrong."""
        if self.closed:
            raise StoreClosedError(f"{what}: {self.name} is closed; it opens no new connection")
        host, pool, con = self._open(_Failover(self.hosts, 0), False, what)
        broken = True
        try:
            raw = _raw(con)
            with translating(what):
                _reconnect_if_closed(raw)
            yield raw
            broken = False
        finally:
            self._checkin(pool, con, broken)

    def _isolate(self, raw: Any, cur: Any) -> None:
        """READ COMMITTED for this write (see sql.READ_COMMITTED_SESSION for why), and on a
        connection the store owns, row-lock waits shorter than its read timeout (sql.CAP_LOCK_WAIT)."""
        if not self.owned:  # leave a given pool's sessions as they are: this transaction only
            cur.execute(sql.READ_COMMITTED_NEXT)
            return
        thread = raw.thread_id() if hasattr(raw, "thread_id") else None
        if getattr(raw, "isolated_thread", None) != thread or thread is None:
            cur.execute(sql.READ_COMMITTED_SESSION)
            cap = getattr(raw, "lock_wait_seconds", None)
            if cap is not None:
                cur.execute(sql.CAP_LOCK_WAIT, (cap, cap))
            raw.isolated_thread = thread  # a reconnect gets a new thread id: set it again

    def close(self) -> None:
        self.closed = True
        if self.router is not None:
            self.router.close()
        if self.owned:
            for p in self._pools:
                p.close()


class _Failover:
    """One call's way through the host list: which host now, and how many rounds so far."""

    __slots__ = ("hosts", "order", "at", "rounds", "limit")

    def __init__(self, hosts: HostPools, limit: int) -> None:
        self.hosts, self.limit = hosts, limit
        self.order = hosts.order()
        self.at = self.rounds = 0

    @property
    def host(self) -> Optional[Host]:
        return self.order[self.at] if self.at < len(self.order) else None

    @property
    def has_next(self) -> bool:
        """Whether a host of this round is left after the current one."""
        return self.at + 1 < len(self.order)

    def failed(self, reround: bool = True) -> bool:
        """The current host did not answer: mark it down and move to the next one; after a
        whole round, back off and start again (at most ``limit`` more rounds, and only when
        ``reround``). False when there is nothing left to try."""
        self.hosts.mark_down(self.order[self.at])
        self.at += 1
        if self.at < len(self.order):
            return True
        self.rounds += 1
        if not reround or self.rounds > self.limit:
            return False
        _backoff(self.rounds, 0.05)
        self.order, self.at = self.hosts.order(), 0
        return bool(self.order)


#: Statements that change no row (first word): a transaction of only these wrote nothing.
_READ_ONLY_WORDS = ("SELECT", "SHOW", "SET")


def _writes(query: str) -> bool:
    """Whether ``query`` may change a row (anything but SELECT, SHOW, SET): conservative."""
    word = query.lstrip(" \t\r\n(").split(None, 1)
    return not word or word[0].upper() not in _READ_ONLY_WORDS


class _Flight:
    """Whether a statement (or COMMIT) was sent and its reply not yet read, and whether this
    transaction sent any statement that may write."""

    __slots__ = ("on", "committing", "wrote", "committed", "ended")

    def __init__(self) -> None:
        self.on = False
        self.committing = False
        self.wrote = False
        self.committed = False  # the call's statement carried the COMMIT (execute_commit)
        self.ended = False  # the call rolled its transaction back, whole (execute_rollback)


#: pymysql's server status bit of a session running with ``NO_BACKSLASH_ESCAPES``.
_NO_BACKSLASH_ESCAPES = 512


class _Cursor:
    """A driver cursor that records when a statement is in flight (see :class:`_Flight`), and
    binds its parameters itself (:func:`sql.bind`: the same literals as pymysql's, without
    its per-character escaping) on a utf8mb4 connection; any other charset: the driver's."""

    __slots__ = ("_cur", "_flight", "_con")

    def __init__(self, cur: Any, flight: _Flight) -> None:
        self._cur, self._flight = cur, flight
        con = getattr(cur, "connection", None)
        self._con = con if getattr(con, "encoding", None) == "utf8" and hasattr(con, "escape") else None

    def execute(self, query: str, args: Any = None) -> int:
        if not self._flight.wrote and _writes(query):
            self._flight.wrote = True
        query, args = self._bound(query, args)
        self._flight.on = True
        n = self._cur.execute(query, args)
        self._flight.on = False
        return n

    def _bound(self, query: str, args: Any) -> tuple[str, Any]:
        """``query`` with its parameters bound by :func:`sql.bind` where it can (args None
        then), else as given, for the driver."""
        con = self._con
        if con is not None and args is not None and type(args) in (tuple, list):
            try:
                return sql.bind(query, args, not con.server_status & _NO_BACKSLASH_ESCAPES, con.escape), None
            except (TypeError, ValueError):  # a placeholder mismatch: the driver names it
                pass
        return query, args

    def _literal(self, query: str, args: Any) -> str:
        """``query`` with its parameters in it, as sent."""
        query, args = self._bound(query, args)
        return query if args is None else self._cur.mogrify(query, args)

    @property
    def commits(self) -> bool:
        """Whether :meth:`execute_commit` may be used: a store's own write connection, which
        takes several statements a packet, in a transaction that wrote nothing yet."""
        con = self._cur.connection
        return (not self._flight.wrote and not self._flight.committed and not con.get_autocommit()
                and bool(getattr(con, "client_flag", 0) & CLIENT.MULTI_STATEMENTS))

    def execute_commit(self, query: str, args: Any = None, before: Optional[tuple[str, Any]] = None) -> tuple[int, int]:
        """``query`` and COMMIT in ONE round trip; ``(the LAST_INSERT_ID the statement set,
        the rows it changed)``. ``before``: a statement ``(sql, args)`` sent first in the same
        packet (a check whose error stops the packet; its result is not kept).

        Only on a connection where :attr:`commits`. When the statement fails with a server
        error, the server stops the packet before its COMMIT: the error is raised, nothing is
        committed, and the transaction (the failed statement undone) stays open. A connection
        lost from the moment the packet is sent leaves the COMMIT unknown, as a lost COMMIT."""
        query = self._literal(query, args)
        if before is not None:
            query = self._literal(*before) + ";\n" + query
        flight = self._flight
        closed = getattr(self._cur.connection, "closed_by_peer", None)
        if closed is not None and closed():  # dropped while idle: nothing sent, re-opened and retried
            raise pymysql.err.OperationalError(2006, "MySQL server has gone away (closed while idle)")
        flight.wrote = flight.on = flight.committing = True
        try:
            self._cur.execute(query + sql.AND_COMMIT)
            if before is not None:
                self._cur.nextset()  # the statement's own result (its error is raised here)
        except Exception as exc:
            if is_driver_error(exc) and errno_of(exc) not in CONNECTION_ERRNOS:
                flight.on = flight.committing = False  # the server stopped before the COMMIT
            raise
        got = (int(self._cur.lastrowid or 0), int(self._cur.rowcount or 0))
        self._cur.nextset()  # the COMMIT's reply (a Galera certification failure is raised here)
        flight.on = False
        flight.committed = True
        return got

    def execute_rollback(self) -> None:
        """ROLLBACK, and the call's transaction ends with it: the call changed nothing (a
        one-packet write whose condition failed) and sends nothing more; no COMMIT follows."""
        self.execute(sql.ROLLBACK)
        self._flight.ended = True

    def fetchone(self) -> Any:
        return self._cur.fetchone()

    def fetchall(self) -> Any:
        return self._cur.fetchall()

    @property
    def lastrowid(self) -> Any:
        return self._cur.lastrowid

    @property
    def connection(self) -> Any:
        return self._cur.connection

    @property
    def rowcount(self) -> int:
        return self._cur.rowcount


def _drop_idle_cache_context(exc: BaseException) -> None:
    """DBUtils opens a connection while it handles its empty idle cache's IndexError, so every
    connect error's chain ends in an ``IndexError('pop from empty list')`` that is no part of
    it: hidden from the chain a traceback shows (the error itself is unchanged)."""
    seen = 0
    link: Optional[BaseException] = exc  # the error, then its cause or context, and so on
    while link is not None and seen < 16:
        if isinstance(link.__context__, IndexError) and link.__cause__ is None:
            link.__suppress_context__ = True
            return
        link, seen = link.__cause__ or link.__context__, seen + 1


def _drop(raw: Any, restore_autocommit: bool) -> None:
    """Close a driver connection whose state is unknown; the next use re-opens it in place."""
    if restore_autocommit and hasattr(raw, "autocommit_mode"):
        raw.autocommit_mode = True  # a re-open must restore the pool's mode
    force = getattr(raw, "_force_close", None)
    try:
        if force is not None:
            force()  # no COM_QUIT on a socket whose protocol state is unknown
        else:
            raw.close()
    except Exception:  # noqa: BLE001 - already gone
        pass


def _backoff(attempt: int, base: float) -> None:
    """Bounded, jittered exponential backoff."""
    time.sleep(random.uniform(0, min(1.0, base * (2 ** (attempt - 1)))))


def _raw(con: Any) -> Any:
    """The driver connection under a DBUtils wrapper (outside DBUtils' silent failover)."""
    try:
        return con.dbapi_connection
    except AttributeError:
        return con


def _get_autocommit(raw: Any) -> bool:
    get = getattr(raw, "get_autocommit", None)
    if get is not None:
        return bool(get())
    return bool(getattr(raw, "autocommit", False) is True)


def _reconnect_if_closed(raw: Any) -> None:
    """A pymysql connection whose socket died earlier reconnects in place (no round trip if open)."""
    if getattr(raw, "_sock", True) is None and hasattr(raw, "connect"):
        try:
            raw.connect()
        except Exception as exc:  # noqa: BLE001
            if is_driver_error(exc):
                raise
            raise ServerUnavailableError(f"could not reconnect: {exc}") from exc


# ---- from_url ---------------------------------------------------------------------------------


def make_pools(
    url: str,
    *,
    pool_size: int = DEFAULT_POOL_SIZE,
    connect_timeout: Optional[float] = None,
    read_timeout: Optional[float] = None,
    write_timeout: Optional[float] = None,
    host_index: int = 0,
    reads_only: bool = False,
    **connect_kwargs: Any,
) -> tuple[Any, Any, Optional[str]]:
    """Two PooledDBs of pymysql connections (utf8mb4) to host ``host_index`` of the URL:
    writes (autocommit off), reads (on); ``reads_only`` (a replica): the read pool only,
    ``(None, read_pool, database)``. A timeout given here wins over the URL's, which wins over
    the default (``DEFAULT_CONNECT_TIMEOUT``, ...).

    Connections are not pinged at checkout nor rolled back at check-in (each costs a round trip
    per call): a dead one is detected by its error and reconnected in place, and every call
    ends its own transaction. TLS (``ssl_mode``, ``ssl_ca``, ...) and the host come from
    :func:`mysql_state.url.connect_args`; connections are made by :func:`mysql_state.url.connect`,
    which enforces ``ssl_mode``. :func:`make_host_pools` makes them for every host of the list.
    """
    from dbutils.pooled_db import PooledDB

    check_int("pool_size", pool_size, 1)
    kwargs, database = _url.connect_args(url, host_index, **connect_kwargs)  # keywords win over the URL
    for name, value, default in (("connect_timeout", connect_timeout, DEFAULT_CONNECT_TIMEOUT),
                                 ("read_timeout", read_timeout, DEFAULT_READ_TIMEOUT),
                                 ("write_timeout", write_timeout, DEFAULT_WRITE_TIMEOUT)):
        if value is not None:  # a keyword wins over the URL's ?connect_timeout=..., as TLS keywords do
            kwargs[name] = check_seconds(name, value)
        else:
            kwargs.setdefault(name, default)
    kwargs["charset"] = "utf8mb4"
    # reset=False: DBUtils would send a ROLLBACK at every check-in; every call here ends its
    # transaction itself (COMMIT, or ROLLBACK on error), so that round trip buys nothing.
    common = dict(maxconnections=pool_size, maxcached=pool_size, blocking=True, ping=0, reset=False)
    # The write connections take several statements a packet: a one-statement write and its
    # COMMIT go in one round trip (_Cursor.execute_commit). Every statement this store sends is
    # built from its own constants and checked names, its values bound as literals.
    writes = dict(kwargs, client_flag=kwargs.get("client_flag", 0) | CLIENT.MULTI_STATEMENTS)
    write_pool = None if reads_only else PooledDB(_url.connect, **common, autocommit=False, **writes)
    read_pool = PooledDB(_url.connect, **common, autocommit=True, **kwargs)
    return write_pool, read_pool, database


def make_host_pools(url: str, *, reads_only: bool = False, **options: Any) -> tuple[HostPools, Optional[str]]:
    """:func:`make_pools` for every host of ``url`` (``h1:3306,h2:3306,...``), in the URL's
    order of preference, as a :class:`~mysql_state.hosts.HostPools`; and the URL's database.
    ``reads_only`` (replicas): read pools only, spread over, and a host in back-off skipped."""
    parsed = _url.parse(url)
    hosts, database = [], None
    for i in range(len(parsed.hosts)):
        write_pool, read_pool, database = make_pools(url, host_index=i, reads_only=reads_only, **options)
        name = host_name(parsed.kwargs(i))
        hosts.append(Host(write_pool if write_pool is not None else read_pool, read_pool, name))
    return HostPools(hosts, skip_down=reads_only, spread=reads_only), database
