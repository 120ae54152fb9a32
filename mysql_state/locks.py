"""Session locks: a lease on one session across processes, on one server (``GET_LOCK``).

The lock name is derived from the table and the packed session id by a digest, since a packed
id can be longer than ``GET_LOCK``'s 64 characters. The lock lives on one pooled connection,
held for the block and returned (or closed, if anything went wrong) at its end; a connection
that dies releases the lock on the server.
"""

from __future__ import annotations

import hashlib
import time
from typing import Any, Optional

from . import sql
from .errors import LockTimeoutError, QueryError, errno_of, translate

__all__ = ["SessionLock", "lock_name"]

LOCK_PREFIX = "mysql-state:"
#: Seconds one GET_LOCK call may wait: well under the connection's read timeout.
SLICE = 5.0


def lock_name(table: str, session_id: str) -> str:
    """``mysql-state:<digest of table and packed id>``, 64 characters at most.

    >>> len(lock_name("`agentscope`.`agentscope_sessions`", "alice:" + "x" * 240)) <= 64
    True
    """
    digest = hashlib.sha256(f"{table}\0{session_id}".encode("utf-8")).hexdigest()[:48]
    return LOCK_PREFIX + digest


class SessionLock:
    """``with store.session_lock(user, session, timeout=10):`` (see the store's method)."""

    def __init__(self, connector: Any, name: str, session_id: str, timeout: Optional[float]) -> None:
        self._connector, self.name, self.session_id, self.timeout = connector, name, session_id, timeout
        self._held: Any = None
        self._raw: Any = None

    def __enter__(self) -> "SessionLock":
        what = f"session_lock {self.session_id!r}"
        held = self._connector.hold(what)
        raw = held.__enter__()
        try:
            self._acquire(raw, what)
        except BaseException as exc:
            held.__exit__(type(exc), exc, exc.__traceback__)
            raise
        self._held, self._raw = held, raw
        return self

    def _acquire(self, raw: Any, what: str) -> None:
        deadline = None if self.timeout is None else time.monotonic() + self.timeout
        with raw.cursor() as cur:
            while True:
                wait = SLICE if deadline is None else max(0.0, min(SLICE, deadline - time.monotonic()))
                try:
                    cur.execute(sql.GET_LOCK, (self.name, wait))
                    got = cur.fetchone()[0]
                except Exception as exc:
                    if errno_of(exc) is None:
                        raise
                    raise translate(exc, what) from exc
                if got == 1:
                    return
                if got is None:
                    raise QueryError(f"{what}: GET_LOCK returned NULL (the server could not take the lock)")
                if deadline is not None and time.monotonic() >= deadline:
                    raise LockTimeoutError(
                        f"session {self.session_id!r} is locked by another run: not acquired within "
                        f"{self.timeout}s"
                    )

    def __exit__(self, *exc: object) -> None:
        held, raw = self._held, self._raw
        self._held = self._raw = None
        if held is None:
            return
        failed = None
        try:
            with raw.cursor() as cur:
                cur.execute(sql.RELEASE_LOCK, (self.name,))
                cur.fetchone()
        except BaseException as e:  # noqa: BLE001 - the connection is closed below, which frees the lock
            failed = e
        held.__exit__(type(failed) if failed else None, failed, None)
