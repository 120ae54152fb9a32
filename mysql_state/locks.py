"""Session locks: a lease on one session across processes, on one server (``GET_LOCK``).

The lock name is derived from the table and the packed session id by a digest, since a packed
id can be longer than ``GET_LOCK``'s 64 characters.

The lock lives on a connection of its own, outside the store's pools (an unpooled connection
made like the pool's, opened for the lease and closed at its end), so leases never take the
connections the work they protect needs: ``pool_size`` leases and the reads and writes inside
them all run. (A pool given to the store that cannot make such a connection, i.e. has no
``steady_connection()``, lends one of its own connections for the lease instead.)

A connection that dies releases the lock on the server, so a holder must learn of it: while a
lease is held in this thread (or task), every call of its store first checks the lock
connection (one ``COM_PING`` on it) and raises :class:`LockLostError` when it is gone, as do
:meth:`SessionLock.check` and the block's end.
"""

from __future__ import annotations

import contextvars
import hashlib
import threading
import time
from typing import Any, Optional

from . import sql
from .replicas import wait_slice
from .errors import (
    CONNECT_ERRNOS,
    LockLostError,
    LockTimeoutError,
    QueryError,
    StoreClosedError,
    errno_of,
    translating,
)

__all__ = ["SessionLock", "lock_name", "check_leases"]

LOCK_PREFIX = "mysql-state:"
#: Seconds one GET_LOCK call may wait: well under the connection's read timeout (and under
#: half of a read timeout shorter than twice this), so a wait is never taken for a dead server.
SLICE = 5.0
#: The slice of a wait someone may give up (the async form, whose task can be cancelled): it is
#: noticed within this many seconds, and the thread waiting ends.
WATCHED_SLICE = 0.5

#: The leases held in this thread (or task): checked before each call of their store.
_HELD: contextvars.ContextVar[tuple] = contextvars.ContextVar("mysql_state_leases", default=())


def lock_name(table: str, session_id: str) -> str:
    """``mysql-state:<digest of table and packed id>``, 64 characters at most.

    >>> len(lock_name("`agentscope`.`agentscope_sessions`", "alice:" + "x" * 240)) <= 64
    True
    """
    digest = hashlib.sha256(f"{table}\0{session_id}".encode("utf-8")).hexdigest()[:48]
    return LOCK_PREFIX + digest


def check_leases(connector: Any) -> None:
    """Raise :class:`LockLostError` if a lease taken on ``connector`` and held in this context
    lost its lock connection (cheap when no lease is held: one tuple read)."""
    for lease in _HELD.get():
        if lease.connector is connector and lease._entered:
            lease.check(quick=True)


class SessionLock:
    """``with store.session_lock(user, session, timeout=10):`` (see the store's method).

    ``check()`` raises :class:`LockLostError` once the lease is lost; the store's calls inside
    the block do the same. Not re-entrant.

    >>> with store.session_lock("alice", "lock-1", timeout=5) as lease:
    ...     store.save("alice", "lock-1", "plan", {"step": 1})  # checked against the lease first
    ...     lease.held
    True
    >>> lease.held, lease
    (False, <SessionLock 'alice:lock-1' not held>)
    """

    def __init__(self, connector: Any, name: str, session_id: str, timeout: Optional[float]) -> None:
        self.connector, self.name, self.session_id, self.timeout = connector, name, session_id, timeout
        self._con: Any = None  # what closes the lock connection (unpooled, or a pooled hold)
        self._raw: Any = None  # the driver connection holding the lock
        self._pooled = False
        self._entered = False  # inside the block (lost or not)
        self._lost = False
        self._reported = False
        self._use = threading.Lock()  # one statement at a time on the lock connection
        #: Set (by the async form, when its task is cancelled) to make a waiting acquire give up.
        self.abandoned: Optional[threading.Event] = None

    def __repr__(self) -> str:
        state = "lost" if self._lost else "held" if self._raw is not None else "not held"
        return f"<SessionLock {self.session_id!r} {state}>"

    @property
    def held(self) -> bool:
        """True between a successful enter and the end of the block, while not lost.

        >>> lease = store.session_lock("alice", "lock-held-1")
        >>> lease.held
        False
        >>> with lease:
        ...     lease.held
        True
        """
        return self._raw is not None and not self._lost

    # ---- acquire ---------------------------------------------------------------------------

    def __enter__(self) -> "SessionLock":
        self.acquire()
        self.watch()
        return self

    def watch(self) -> None:
        """Have the store's calls made in this thread (or task) check the lease first: the
        ``with`` block does it; an async wrapper that acquires in a worker thread calls it on
        the event loop, so the task's calls check it.

        >>> lease = store.session_lock("alice", "lock-watch-1")
        >>> lease.acquire(); lease.watch()  # what ``with`` does on enter
        >>> store.exists("alice", "lock-watch-1")  # this call checked the lease first
        False
        >>> lease.unwatch(); lease.release()  # what ``with`` does on exit
        """
        _HELD.set(tuple(lease for lease in _HELD.get() if lease._entered and lease is not self) + (self,))

    def acquire(self) -> None:
        """Take the lock (waiting up to ``timeout``) on a connection of its own; a lock another
        run holds past ``timeout`` raises :class:`LockTimeoutError`.

        >>> first, second = store.session_lock("alice", "lock-acquire-1"), store.session_lock(
        ...     "alice", "lock-acquire-1", timeout=0.2)
        >>> first.acquire()
        >>> second.acquire()
        Traceback (most recent call last):
        ...
        mysql_state.errors.LockTimeoutError: session 'alice:lock-acquire-1' is locked by another run: not acquired within 0.2s
        >>> first.release(); second.acquire(); second.release()
        """
        if self._raw is not None:
            raise RuntimeError(f"session_lock {self.session_id!r} is already held by this object (not re-entrant)")
        what = f"session_lock {self.session_id!r}"
        con, raw, pooled = self._connect(what)
        try:
            self._acquire(raw, what)
        except BaseException as exc:
            self._close(con, pooled, exc)
            raise
        self._con, self._raw, self._pooled = con, raw, pooled
        self._lost = self._reported = False
        self._entered = True

    def _connect(self, what: str) -> tuple[Any, Any, bool]:
        """A connection for the lock: unpooled to the first host that answers, else (a given
        pool without ``steady_connection``) one held from the store's pool."""
        c = self.connector
        if c.closed:
            raise StoreClosedError(f"{what}: {c.name} is closed; it opens no new connection")
        last: Optional[BaseException] = None  # the last host's refusal (a driver error)
        for host in c.hosts.order():
            make = getattr(host.read_pool, "steady_connection", None)
            if make is None:
                held = c.hold(what)
                return held, held.__enter__(), True
            try:
                con = make()
            except Exception as exc:  # noqa: BLE001 - a host that refuses: the next one
                if errno_of(exc) not in CONNECT_ERRNOS:
                    with translating(what):
                        raise
                c.hosts.mark_down(host)
                last = exc
                continue
            raw = getattr(con, "dbapi_connection", con)
            try:
                with translating(what):
                    raw.autocommit(True)
            except BaseException:
                con.close()
                raise
            return con, raw, False
        if last is not None:
            with translating(what):
                raise last
        raise QueryError(f"{what}: {c.name} has no host to take the lock on")

    def _acquire(self, raw: Any, what: str) -> None:
        deadline = None if self.timeout is None else time.monotonic() + self.timeout
        # under the driver's read timeout, as a replica's GTID wait (replicas.wait_slice)
        slice_ = wait_slice(raw, SLICE if self.abandoned is None else WATCHED_SLICE)
        with raw.cursor() as cur:
            while True:
                if self.abandoned is not None and self.abandoned.is_set():
                    raise LockTimeoutError(f"session {self.session_id!r}: the wait for its lock was given up")
                wait = slice_ if deadline is None else max(0.0, min(slice_, deadline - time.monotonic()))
                with translating(what):
                    cur.execute(sql.GET_LOCK, (self.name, wait))
                    got = cur.fetchone()[0]
                if got == 1:
                    return
                if got is None:
                    raise QueryError(f"{what}: GET_LOCK returned NULL (the server could not take the lock)")
                if deadline is not None and time.monotonic() >= deadline:
                    raise LockTimeoutError(
                        f"session {self.session_id!r} is locked by another run: not acquired within "
                        f"{self.timeout}s"
                    )

    # ---- check -----------------------------------------------------------------------------

    def check(self, quick: bool = False) -> None:
        """Raise :class:`LockLostError` unless the lease still holds the lock.

        The full check asks the server whether this connection holds the lock
        (``IS_USED_LOCK``); ``quick`` (what the store's calls do) only pings the lock
        connection: a live connection keeps its locks, a dead one has released them.

        >>> with store.session_lock("alice", "lock-check-1") as lease:
        ...     lease.check()  # nothing raised: the lock is still this lease's
        """
        if self._lost:
            self._reported = True
            raise self._lost_error()
        raw = self._raw
        if raw is None:
            raise RuntimeError(f"session_lock {self.session_id!r} is not held (use it as `with store.session_lock(...)`)")
        try:
            with self._use:
                if quick:
                    raw.ping(False)
                    mine = True
                else:
                    with raw.cursor() as cur:
                        cur.execute(sql.LOCK_IS_MINE, (self.name,))
                        row = cur.fetchone()
                    mine = bool(row and row[0] == 1)
        except Exception as exc:  # noqa: BLE001 - any failure of the lock connection loses the lock
            self._lose()
            self._reported = True
            raise self._lost_error() from exc
        if not mine:
            self._lose()
            self._reported = True
            raise self._lost_error()

    def _lost_error(self) -> LockLostError:
        return LockLostError(
            f"session_lock {self.session_id!r}: the lease was lost (its lock connection died, so the "
            "server released the lock); another run may hold it: stop the work of this lease"
        )

    def _lose(self) -> None:
        self._lost = True
        try:
            self._raw.close()
        except Exception:  # noqa: BLE001 - already gone
            pass

    # ---- release ---------------------------------------------------------------------------

    def unwatch(self) -> None:
        """Undo :meth:`watch` in this thread (or task) (see :meth:`watch`'s example)."""
        _HELD.set(tuple(lease for lease in _HELD.get() if lease is not self and lease._entered))

    def __exit__(self, exc_type: Any = None, exc: Any = None, tb: Any = None) -> None:
        self.unwatch()
        self.release(exc_type is not None)

    def release(self, failing: bool = False) -> None:
        """Release the lock and close its connection. A lease found lost raises
        :class:`LockLostError` here, unless that was already reported or ``failing`` (the
        block is ending with an error of its own, which this must not mask).

        >>> lease = store.session_lock("alice", "lock-release-1")
        >>> lease.acquire(); lease.release()
        >>> lease.held
        False
        """
        con, raw, pooled, lost = self._con, self._raw, self._pooled, self._lost
        self._con = self._raw = None
        self._entered = False
        if raw is None:
            return
        failed: Optional[BaseException] = None
        released = False
        if not lost:
            try:
                with self._use, raw.cursor() as cur:
                    cur.execute(sql.RELEASE_LOCK, (self.name,))
                    released = cur.fetchone()[0] == 1
            except BaseException as e:  # noqa: BLE001 - the connection is closed below, which frees the lock
                failed = e
        self._close(con, pooled, failed if failed is not None or released else LockLostError("lost"))
        if not released and not self._reported and not failing:
            self._lost, self._reported = True, True
            raise self._lost_error() from failed

    @staticmethod
    def _close(con: Any, pooled: bool, failed: Optional[BaseException]) -> None:
        """Close the lock connection (a pooled hold goes back, dropped if anything failed)."""
        if pooled:
            con.__exit__(type(failed) if failed else None, failed, None)
            return
        try:
            con.close()
        except Exception:  # noqa: BLE001 - closing frees the lock on the server either way
            pass
