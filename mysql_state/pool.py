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
from typing import Any, Callable, Iterator, Optional, TypeVar

import pymysql

from . import sql
from .errors import (
    CONNECT_ERRNOS,
    CONNECTION_ERRNOS,
    RETRYABLE_LOCK_ERRNOS,
    DUPLICATE_KEY,
    CommitUnknownError,
    MysqlStateWarning,
    PoolTimeoutError,
    ServerUnavailableError,
    StoreClosedError,
    errno_of,
    tls_failure,
    translate,
)
from . import url as _url
from .url import parse_url  # noqa: F401 - re-exported: it lived here before url.py

T = TypeVar("T")
#: Retried as a whole transaction: deadlock, lock wait timeout, and the duplicate key of a
#: lost race to create a list's hash row (see MysqlAgentStateStore._write_list).
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
    """Counters a test or benchmark can read: what the store retried and why."""

    lock_retries: int = 0
    reconnects: int = 0
    transactions: int = 0
    retries_by_errno: dict = field(default_factory=dict)  # e.g. {1213: 3, 1062: 5}


def _is_driver_error(exc: BaseException) -> bool:
    return isinstance(exc, pymysql.err.Error)


class Connector:
    """Runs a function on a raw DB-API connection, inside a transaction for writes.

    ``read_pool`` (optional) is used for reads: the store-owned one has autocommit on, so a
    read is exactly one round trip.
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
    ) -> None:
        check_seconds("pool_timeout", pool_timeout)
        check_int("retries", retries, 0)
        if pool_size is not None:
            check_int("pool_size", pool_size, 1)
        if pool is None or not callable(getattr(pool, "connection", None)):
            raise TypeError(
                f"pool must have a .connection() method returning a DB-API connection "
                f"(e.g. a DBUtils PooledDB), got {type(pool).__name__}"
            )
        self.pool = pool
        self.read_pool = read_pool or pool
        self.owned = owned
        self.pool_timeout = pool_timeout
        self.retries = retries
        self.stats = Stats()
        self.closed = False
        self.name = name
        self._pools = list({id(pool): pool, id(self.read_pool): self.read_pool}.values())
        self._limits = {}
        if pool_size:
            for p in self._pools:
                self._limits[id(p)] = threading.BoundedSemaphore(pool_size)
        elif getattr(pool, "_blocking", False) and getattr(pool, "_maxconnections", 0):
            warnings.warn(
                "the given PooledDB has blocking=True: a checkout may wait forever when it is "
                "exhausted; create it with blocking=False so the store can bound the wait "
                f"(pool_timeout={pool_timeout}s)",
                MysqlStateWarning,
                stacklevel=3,
            )

    # ---- checkout --------------------------------------------------------------------------

    def _checkout(self, pool: Any, what: str) -> Any:
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
                    if type(exc).__name__ in ("TooManyConnectionsError", "TooManyConnections"):
                        if time.monotonic() + delay > deadline:
                            raise PoolTimeoutError(
                                f"{what}: the pool stayed exhausted for pool_timeout="
                                f"{self.pool_timeout}s"
                            ) from exc
                        time.sleep(delay)
                        delay = min(delay * 2, 0.05)
                        continue
                    if _is_driver_error(exc):
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

    def run(self, fn: Callable[[Any], T], what: str, *, write: bool, lock_retry: bool = True) -> T:
        """Run ``fn(cursor)`` with retries; a write is one transaction ending in COMMIT.

        Retried: lock conflicts (1213, 1205) and a lost creation race (1062) for writes with
        ``lock_retry``, and a lost connection whenever nothing was committed yet. A lost
        connection is re-opened in place, so however many idle connections the server cut
        (``wait_timeout``, a proxy's idle timeout), the retry runs on a fresh one. A connection
        lost during COMMIT raises :class:`CommitUnknownError` and is never retried.
        """
        if self.closed:
            raise StoreClosedError(f"{what}: {self.name} is closed; it opens no new connection")
        pool = self.pool if write else self.read_pool
        attempt = down = stale = 0
        con = self._checkout(pool, what)
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
                        raw.commit()
                        self.stats.transactions += 1
                    elif not auto:
                        raw.rollback()  # end the read snapshot: no open transaction goes back
                    if restore_autocommit:
                        raw.autocommit(True)
                    flight.on = False
                    return result
                except BaseException as exc:
                    driver = _is_driver_error(exc)
                    errno = errno_of(exc) if driver else None
                    lost = errno in CONNECTION_ERRNOS and tls_failure(exc) is None
                    # A statement sent whose reply was not read (an interrupt, a cancelled
                    # thread): the protocol state is unknown, so the connection is dropped.
                    unknown = flight.on and not driver
                    if lost or unknown or not isinstance(exc, Exception):
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
                    if lost and flight.committing:
                        raise CommitUnknownError(
                            f"{what}: the connection was lost during COMMIT (error {errno}); the write "
                            "may or may not be stored, read it back before repeating it",
                            errno,
                        ) from exc
                    timed_out = isinstance(exc.__context__, TimeoutError)
                    if lost and not timed_out:
                        connect_failed = errno in CONNECT_ERRNOS
                        down += connect_failed
                        stale += not connect_failed
                        if down <= RECONNECTS and stale <= STALE_RETRIES:
                            self.stats.reconnects += 1
                            if connect_failed:
                                _backoff(down, 0.05)
                            continue  # re-opened in place at the top of the loop
                    if write and lock_retry and errno in RETRYABLE_WRITE_ERRNOS and attempt <= self.retries:
                        self.stats.lock_retries += 1
                        self.stats.retries_by_errno[errno] = self.stats.retries_by_errno.get(errno, 0) + 1
                        _backoff(attempt, 0.005)
                        continue
                    broken = lost
                    raise translate(exc, what) from exc
        finally:
            self._checkin(pool, con, broken)

    @contextlib.contextmanager
    def hold(self, what: str) -> Iterator[Any]:
        """A driver connection (autocommit on) kept by the caller for a while, e.g. to hold a
        session lock; it goes back to the pool at the end, closed if anything went wrong."""
        if self.closed:
            raise StoreClosedError(f"{what}: {self.name} is closed; it opens no new connection")
        con = self._checkout(self.read_pool, what)
        broken = True
        try:
            raw = _raw(con)
            try:
                _reconnect_if_closed(raw)
            except Exception as exc:
                if _is_driver_error(exc):
                    raise translate(exc, what) from exc
                raise
            yield raw
            broken = False
        finally:
            self._checkin(self.read_pool, con, broken)

    def _isolate(self, raw: Any, cur: Any) -> None:
        """READ COMMITTED for this write (see sql.READ_COMMITTED_SESSION for why)."""
        if not self.owned:  # leave a given pool's sessions as they are: this transaction only
            cur.execute(sql.READ_COMMITTED_NEXT)
            return
        thread = raw.thread_id() if hasattr(raw, "thread_id") else None
        if getattr(raw, "_mysql_state_isolated", None) != thread or thread is None:
            cur.execute(sql.READ_COMMITTED_SESSION)
            raw._mysql_state_isolated = thread  # a reconnect gets a new thread id: set it again

    def close(self) -> None:
        self.closed = True
        if self.owned:
            for p in self._pools:
                p.close()


def check_int(name: str, value: Any, minimum: int) -> int:
    """An option that must be an int of at least ``minimum``; the error names it."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}: {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return value


def check_seconds(name: str, value: Any) -> float:
    """A positive, finite number of seconds; the error names the option."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number of seconds, got {type(value).__name__}: {value!r}")
    if not 0 < value < float("inf"):
        raise ValueError(f"{name} must be a positive, finite number of seconds, got {value!r}")
    return float(value)


class _Flight:
    """Whether a statement (or COMMIT) was sent and its reply not yet read."""

    __slots__ = ("on", "committing")

    def __init__(self) -> None:
        self.on = False
        self.committing = False


class _Cursor:
    """A driver cursor that records when a statement is in flight (see :class:`_Flight`)."""

    __slots__ = ("_cur", "_flight")

    def __init__(self, cur: Any, flight: _Flight) -> None:
        self._cur, self._flight = cur, flight

    def execute(self, query: str, args: Any = None) -> int:
        self._flight.on = True
        n = self._cur.execute(query, args)
        self._flight.on = False
        return n

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
            if _is_driver_error(exc):
                raise
            raise ServerUnavailableError(f"could not reconnect: {exc}") from exc


# ---- from_url ---------------------------------------------------------------------------------


def make_pools(
    url: str,
    *,
    pool_size: int = DEFAULT_POOL_SIZE,
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
    read_timeout: float = DEFAULT_READ_TIMEOUT,
    write_timeout: float = DEFAULT_WRITE_TIMEOUT,
    **connect_kwargs: Any,
) -> tuple[Any, Any, Optional[str]]:
    """Two PooledDBs of pymysql connections (utf8mb4): writes (autocommit off), reads (on).

    Connections are not pinged at checkout nor rolled back at check-in (each costs a round trip
    per call): a dead one is detected by its error and reconnected in place, and every call
    ends its own transaction. TLS (``ssl_mode``, ``ssl_ca``, ...) and the host come from
    :func:`mysql_state.url.connect_args`; connections are made by :func:`mysql_state.url.connect`,
    which enforces ``ssl_mode``. Only the URL's first host is used.
    """
    from dbutils.pooled_db import PooledDB

    check_int("pool_size", pool_size, 1)
    for name, value in (("connect_timeout", connect_timeout), ("read_timeout", read_timeout),
                        ("write_timeout", write_timeout)):
        check_seconds(name, value)
    kwargs, database = _url.connect_args(url, **connect_kwargs)  # keywords win over the URL
    kwargs.setdefault("connect_timeout", connect_timeout)
    kwargs.setdefault("read_timeout", read_timeout)
    kwargs.setdefault("write_timeout", write_timeout)
    kwargs["charset"] = "utf8mb4"
    # reset=False: DBUtils would send a ROLLBACK at every check-in; every call here ends its
    # transaction itself (COMMIT, or ROLLBACK on error), so that round trip buys nothing.
    common = dict(maxconnections=pool_size, maxcached=pool_size, blocking=True, ping=0, reset=False)
    write_pool = PooledDB(_url.connect, **common, autocommit=False, **kwargs)
    read_pool = PooledDB(_url.connect, **common, autocommit=True, **kwargs)
    return write_pool, read_pool, database
