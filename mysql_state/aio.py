"""AsyncMysqlAgentStateStore: the sync store's operations as coroutines.

pymysql and DBUtils are synchronous, so every call runs the *sync* store's method in a
bounded thread pool (one thread per pooled connection) via ``loop.run_in_executor``: one
implementation of the logic, and the event loop never waits on the network.

Cancellation: cancelling the awaiting task never interrupts the thread. An operation that a
thread already started finishes its transaction (commit or rollback) and returns its
connection to the pool; one still queued is dropped before it starts. A list is therefore
never half-written, and no connection leaks.

>>> async with AsyncMysqlAgentStateStore.from_url(url, create_if_not_exist=True) as store:
...     await store.save_list("alice", "chat-1", "memory", messages)  # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import inspect
import contextvars
import functools
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Mapping, Optional, Sequence, TypeVar

from .listsync import Plan
from .pool import DEFAULT_POOL_SIZE, Stats
from .locks import SessionLock
from .catalog import ALL_USERS, SessionPage
from .retention import PruneReport
from .store import _SAME_USER, MysqlAgentStateStore, SavedMany, VersionedState
from .transaction import Transaction

__all__ = ["AsyncMysqlAgentStateStore", "AsyncSessionLock"]

T = TypeVar("T")

#: The sync store's public operations, each mirrored here as a coroutine (checked by a test).
OPERATIONS = (
    "save",
    "get",
    "get_versioned",
    "save_if_version",
    "save_list",
    "save_list_report",
    "save_many",
    "save_list_if_version",
    "append_list",
    "pop_list",
    "get_list",
    "get_list_versioned",
    "get_many",
    "get_prefix",
    "transaction",
    "list_length",
    "exists",
    "delete",
    "list_session_ids",
    "truncate_all_sessions",
    "forget_user",
    "reencrypt",
    "sessions",
    "get_history",
    "fork",
    "export",
    "import_rows",
    "prune",
    "migrate",
    "doctor",
    "metrics",
)


class AsyncMysqlAgentStateStore:
    """An asyncio front for :class:`MysqlAgentStateStore`: same methods, same errors.

    ``max_workers`` bounds the threads (default: the store's pool size), so calls beyond it
    queue in the executor instead of holding a thread that waits for a connection.
    ``aclose()`` (or ``async with``) waits for running operations, then closes the wrapped
    store unless ``close_store=False``.

    >>> store = AsyncMysqlAgentStateStore(MysqlAgentStateStore.from_url(url))  # doctest: +SKIP
    >>> await store.save("alice", "chat-1", "plan", {"step": 1})  # doctest: +SKIP
    >>> await store.aclose()  # doctest: +SKIP
    """

    def __init__(
        self,
        store: MysqlAgentStateStore,
        *,
        max_workers: Optional[int] = None,
        close_store: bool = True,
    ) -> None:
        if not isinstance(store, MysqlAgentStateStore):
            raise TypeError(f"store must be a MysqlAgentStateStore, got {type(store).__name__}")
        size = max_workers or store.pool_size or DEFAULT_POOL_SIZE
        if not isinstance(size, int) or size < 1:
            raise ValueError(f"max_workers must be a positive int, got {max_workers!r}")
        self.sync = store
        self.max_workers = size
        self._close_store = close_store
        self._executor = ThreadPoolExecutor(max_workers=size, thread_name_prefix="mysql-state")
        self._closed = False

    @classmethod
    def from_url(cls, url: str, *args: Any, **kwargs: Any) -> "AsyncMysqlAgentStateStore":
        """A store with its own pools and ``pool_size`` threads; arguments as the sync one's
        (forwarded unchanged, so the two cannot drift).

        It connects (and creates the table) right away, so call it where blocking briefly is
        fine, e.g. at start-up; :meth:`aclose` closes everything.

        >>> store = AsyncMysqlAgentStateStore.from_url(url, create_if_not_exist=True)  # doctest: +SKIP
        """
        sync = MysqlAgentStateStore.from_url(url, *args, **kwargs)
        return cls(sync, max_workers=sync.pool_size)

    from_url.__func__.__signature__ = inspect.signature(  # type: ignore[attr-defined]
        MysqlAgentStateStore.from_url.__func__  # type: ignore[attr-defined]
    ).replace(return_annotation="AsyncMysqlAgentStateStore")

    @classmethod
    async def open(cls, url: str, *args: Any, **kwargs: Any) -> "AsyncMysqlAgentStateStore":
        """:meth:`from_url` without blocking the loop (it connects in a thread).

        >>> store = await AsyncMysqlAgentStateStore.open(url, create_if_not_exist=True)  # doctest: +SKIP
        """
        return await asyncio.to_thread(cls.from_url, url, *args, **kwargs)

    # ---- the one mechanism -----------------------------------------------------------------

    async def _run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        if self._closed:
            raise RuntimeError("this AsyncMysqlAgentStateStore is closed")
        ctx = contextvars.copy_context()
        call = functools.partial(ctx.run, fn, *args, **kwargs)
        return await asyncio.get_running_loop().run_in_executor(self._executor, call)

    # ---- single values -----------------------------------------------------------------------

    async def save(self, user_id: Optional[str], session_id: str, key: str, value: Any) -> None:
        """Store one value at ``key`` (see :meth:`MysqlAgentStateStore.save`).

        >>> await store.save("alice", "chat-1", "summary", {"text": "talked about MySQL"})  # doctest: +SKIP
        """
        return await self._run(self.sync.save, user_id, session_id, key, value)

    async def get(
        self,
        user_id: Optional[str],
        session_id: str,
        key: str,
        type: Optional[type] = None,
        default: Any = None,
        *,
        consistency: str = "strong",
    ) -> Any:
        """The value at ``key`` (an instance of ``type`` when given), or ``default``;
        ``consistency`` as for the sync store (``"strong"``, ``"session"``, ``"eventual"``).

        >>> await store.get("alice", "chat-1", "summary")  # doctest: +SKIP
        {'text': 'talked about MySQL'}
        """
        return await self._run(self.sync.get, user_id, session_id, key, type, default, consistency=consistency)

    async def get_versioned(
        self, user_id: Optional[str], session_id: str, key: str, type: Optional[type] = None, *,
        consistency: str = "strong",
    ) -> VersionedState:
        """The value and its version; ``(None, 0)`` when absent.

        >>> value, version = await store.get_versioned("alice", "chat-1", "plan")  # doctest: +SKIP
        """
        return await self._run(self.sync.get_versioned, user_id, session_id, key, type, consistency=consistency)

    async def save_if_version(
        self, user_id: Optional[str], session_id: str, key: str, value: Any, expected_version: int
    ) -> int:
        """Compare-and-set; the new version, or ``UNVERSIONED`` (-1) when nothing was written.

        >>> v = await store.save_if_version("alice", "chat-1", "plan", {"step": 1}, 0)  # doctest: +SKIP
        """
        return await self._run(self.sync.save_if_version, user_id, session_id, key, value, expected_version)

    # ---- lists ---------------------------------------------------------------------------------

    async def save_list(self, user_id: Optional[str], session_id: str, key: str, values: Sequence[Any]) -> None:
        """Store the whole list, writing only the items that changed (one transaction).

        >>> await store.save_list("alice", "chat-1", "memory", messages)  # doctest: +SKIP
        """
        return await self._run(self.sync.save_list, user_id, session_id, key, values)

    async def save_list_report(
        self, user_id: Optional[str], session_id: str, key: str, values: Sequence[Any]
    ) -> Plan:
        """:meth:`save_list`, returning what it wrote (``kind``, ``rows_written``).

        >>> (await store.save_list_report("alice", "chat-1", "memory", messages)).kind  # doctest: +SKIP
        'append'
        """
        return await self._run(self.sync.save_list_report, user_id, session_id, key, values)

    async def save_many(
        self,
        user_id: Optional[str],
        session_id: str,
        values: Optional[Mapping[str, Any]] = None,
        lists: Optional[Mapping[str, Sequence[Any]]] = None,
        *,
        expected_versions: Optional[Mapping[str, int]] = None,
    ) -> SavedMany:
        """Several values and lists of one session in one transaction; returns the lists' plans
        (new versions in ``.versions``); ``expected_versions`` makes it a compare-and-set.

        >>> await store.save_many("alice", "chat-1", values={"summary": s}, lists={"context": msgs})  # doctest: +SKIP
        """
        return await self._run(self.sync.save_many, user_id, session_id, values, lists,
                               expected_versions=expected_versions)

    async def save_list_if_version(
        self, user_id: Optional[str], session_id: str, key: str, values: Sequence[Any], expected_version: int
    ) -> int:
        """:meth:`save_list` as a compare-and-set; the new version, or ``UNVERSIONED``.

        >>> items, v = await store.get_list_versioned("alice", "chat-1", "memory")  # doctest: +SKIP
        >>> await store.save_list_if_version("alice", "chat-1", "memory", items + [m], v)  # doctest: +SKIP
        """
        return await self._run(self.sync.save_list_if_version, user_id, session_id, key, values, expected_version)

    async def pop_list(self, user_id: Optional[str], session_id: str, key: str, type: Optional[type] = None) -> Any:
        """Remove and return the last item, atomically (None when empty).

        >>> await store.pop_list("alice", "chat-1", "memory")  # doctest: +SKIP
        """
        return await self._run(self.sync.pop_list, user_id, session_id, key, type)

    async def get_list_versioned(
        self, user_id: Optional[str], session_id: str, key: str, type: Optional[type] = None, *,
        consistency: str = "strong",
    ) -> VersionedState:
        """The whole list and its version in one statement; ``([], 0)`` when absent.

        >>> items, version = await store.get_list_versioned("alice", "chat-1", "memory")  # doctest: +SKIP
        """
        return await self._run(self.sync.get_list_versioned, user_id, session_id, key, type,
                               consistency=consistency)

    async def get_many(
        self,
        user_id: Optional[str],
        session_id: str,
        values: Sequence[str] = (),
        lists: Sequence[str] = (),
        *,
        versioned: bool = False,
        consistency: str = "strong",
    ) -> dict[str, Any]:
        """Values and whole lists of one session in one statement (one snapshot).

        >>> await store.get_many("alice", "chat-1", values=["summary"], lists=["context"])  # doctest: +SKIP
        """
        return await self._run(self.sync.get_many, user_id, session_id, values, lists, versioned=versioned,
                               consistency=consistency)

    async def get_prefix(
        self, user_id: Optional[str], session_id: str, prefix: str = "", *, versioned: bool = False,
        consistency: str = "strong",
    ) -> dict[str, Any]:
        """Every single value of one session whose key starts with ``prefix``, in one statement.

        >>> await store.get_prefix("alice", "chat-1", "plan/")  # doctest: +SKIP
        """
        return await self._run(self.sync.get_prefix, user_id, session_id, prefix, versioned=versioned,
                               consistency=consistency)

    async def transaction(self, fn: Callable[[Transaction], T]) -> T:
        """Run the synchronous ``fn(tx)`` in one database transaction, in a worker thread.

        >>> await store.transaction(lambda tx: tx.save("alice", "chat-1", "k", 1))  # doctest: +SKIP
        """
        return await self._run(self.sync.transaction, fn)

    async def forget_user(self, user_id: Optional[str], *, batch: int = 500) -> int:
        """Erase every row of a user's sessions, in bounded batches; returns the rows removed.

        >>> await store.forget_user("alice")  # doctest: +SKIP
        """
        return await self._run(self.sync.forget_user, user_id, batch=batch)

    async def reencrypt(self, *, batch: int = 500) -> int:
        """Rewrite every row not under the keyring's current key; returns the rows rewritten.

        >>> await store.reencrypt()  # doctest: +SKIP
        """
        return await self._run(self.sync.reencrypt, batch=batch)

    def session_lock(
        self, user_id: Optional[str], session_id: str, timeout: Optional[float] = 10
    ) -> "AsyncSessionLock":
        """``async with store.session_lock(user, session, timeout=10):``, a lease on one session
        across processes (see :meth:`MysqlAgentStateStore.session_lock`).

        >>> async with store.session_lock("alice", "chat-1"):  # doctest: +SKIP
        ...     ...
        """
        return AsyncSessionLock(self, self.sync.session_lock(user_id, session_id, timeout))

    async def append_list(self, user_id: Optional[str], session_id: str, key: str, items: Sequence[Any]) -> int:
        """Add ``items`` after the end of the list; returns the new length.

        >>> await store.append_list("alice", "chat-1", "memory", [reply])  # doctest: +SKIP
        12
        """
        return await self._run(self.sync.append_list, user_id, session_id, key, items)

    async def get_list(
        self,
        user_id: Optional[str],
        session_id: str,
        key: str,
        type: Optional[type] = None,
        *,
        offset: int = 0,
        limit: Optional[int] = None,
        consistency: str = "strong",
    ) -> list:
        """The list's items in order; ``offset``/``limit`` read a window (negative: from the end).

        >>> await store.get_list("alice", "chat-1", "memory", offset=-50)  # doctest: +SKIP
        """
        return await self._run(self.sync.get_list, user_id, session_id, key, type, offset=offset, limit=limit,
                               consistency=consistency)

    async def list_length(self, user_id: Optional[str], session_id: str, key: str, *,
                          consistency: str = "strong") -> int:
        """Number of items in the list.

        >>> await store.list_length("alice", "chat-1", "memory")  # doctest: +SKIP
        12
        """
        return await self._run(self.sync.list_length, user_id, session_id, key, consistency=consistency)

    # ---- sessions ------------------------------------------------------------------------------

    async def exists(self, user_id: Optional[str], session_id: str, *, consistency: str = "strong") -> bool:
        """True while the session has any row.

        >>> await store.exists("alice", "chat-1")  # doctest: +SKIP
        True
        """
        return await self._run(self.sync.exists, user_id, session_id, consistency=consistency)

    async def delete(self, user_id: Optional[str], session_id: str, key: Optional[str] = None) -> None:
        """Delete the whole session, or one key.

        >>> await store.delete("alice", "chat-1")  # doctest: +SKIP
        """
        return await self._run(self.sync.delete, user_id, session_id, key)

    async def list_session_ids(self, user_id: Optional[str], *, consistency: str = "strong") -> set[str]:
        """The session ids of one user (None: anonymous sessions).

        >>> await store.list_session_ids("alice")  # doctest: +SKIP
        {'chat-1'}
        """
        return await self._run(self.sync.list_session_ids, user_id, consistency=consistency)

    async def truncate_all_sessions(self) -> int:
        """Remove every row; returns how many there were.

        >>> await store.truncate_all_sessions()  # doctest: +SKIP
        42
        """
        return await self._run(self.sync.truncate_all_sessions)

    # ---- operating the store (see the sync store for each) -------------------------------------

    async def sessions(self, user_id: Any = ALL_USERS, *, updated_before: Optional[Any] = None,
                       updated_after: Optional[Any] = None, limit: int = 100, cursor: Optional[str] = None) -> SessionPage:
        """A page of sessions, newest activity first (:meth:`MysqlAgentStateStore.sessions`).

        >>> page = await store.sessions("alice", limit=20)  # doctest: +SKIP
        """
        return await self._run(self.sync.sessions, user_id, updated_before=updated_before,
                               updated_after=updated_after, limit=limit, cursor=cursor)

    async def get_history(self, user_id: Optional[str], session_id: str, key: str, *, offset: int = 0,
                          limit: Optional[int] = None) -> list:
        """Archived items of a list, oldest first (:meth:`MysqlAgentStateStore.get_history`).

        >>> await store.get_history("alice", "chat-1", "memory")  # doctest: +SKIP
        """
        return await self._run(self.sync.get_history, user_id, session_id, key, offset=offset, limit=limit)

    async def fork(self, user_id: Optional[str], session_id: str, new_session_id: str, *,
                   new_user_id: Any = _SAME_USER) -> int:
        """Copy a session server-side (:meth:`MysqlAgentStateStore.fork`).

        >>> await store.fork("alice", "chat-1", "chat-1-branch")  # doctest: +SKIP
        """
        return await self._run(self.sync.fork, user_id, session_id, new_session_id, new_user_id=new_user_id)

    async def export(self, user_id: Any = ALL_USERS, sessions: Optional[Sequence[str]] = None) -> list:
        """The lines of :meth:`MysqlAgentStateStore.export`, collected in a thread (for a
        stream in constant memory, iterate the sync store's ``export`` in a thread).

        >>> lines = await store.export("alice")  # doctest: +SKIP
        """
        return await self._run(lambda: list(self.sync.export(user_id, sessions)))

    async def import_rows(self, lines: Any, *, on_conflict: str = "skip",
                          progress: Optional[Callable[[int], None]] = None) -> int:
        """Rows of an export written back (:meth:`MysqlAgentStateStore.import_rows`).

        >>> await store.import_rows(lines)  # doctest: +SKIP
        """
        return await self._run(self.sync.import_rows, lines, on_conflict=on_conflict, progress=progress)

    async def prune(self, older_than: Any, *, user_id: Any = ALL_USERS, dry_run: bool = False, batch: int = 500,
                    progress: Optional[Callable[[int, int], None]] = None) -> PruneReport:
        """Delete idle sessions (:meth:`MysqlAgentStateStore.prune`).

        >>> await store.prune(timedelta(days=30))  # doctest: +SKIP
        """
        return await self._run(self.sync.prune, older_than, user_id=user_id, dry_run=dry_run, batch=batch,
                               progress=progress)

    async def migrate(self, dry_run: bool = False) -> list:
        """Apply the schema steps needed (:meth:`MysqlAgentStateStore.migrate`).

        >>> await store.migrate(dry_run=True)  # doctest: +SKIP
        """
        return await self._run(self.sync.migrate, dry_run)

    async def doctor(self, fix: bool = False) -> list:
        """Check (and with ``fix`` repair) the table (:meth:`MysqlAgentStateStore.doctor`).

        >>> await store.doctor()  # doctest: +SKIP
        """
        return await self._run(self.sync.doctor, fix)

    async def metrics(self) -> dict:
        """The counters of the wrapped store (:meth:`MysqlAgentStateStore.metrics`).

        >>> (await store.metrics())["saves"]  # doctest: +SKIP
        """
        return self.sync.metrics()

    # ---- lifecycle -----------------------------------------------------------------------------

    @property
    def stats(self) -> Stats:
        """The sync store's counters (retries, reconnects, transactions)."""
        return self.sync.stats

    async def aclose(self) -> None:
        """Wait for running operations, stop the threads, close the wrapped store.

        Idempotent.

        >>> await store.aclose()  # doctest: +SKIP
        """
        if self._closed:
            return
        self._closed = True
        await asyncio.to_thread(self._shutdown)

    close = aclose  # the sync store's name, as a coroutine

    def _shutdown(self) -> None:
        self._executor.shutdown(wait=True)
        if self._close_store:
            self.sync.close()

    async def __aenter__(self) -> "AsyncMysqlAgentStateStore":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class AsyncSessionLock:
    """The ``async with`` form of :class:`SessionLock`: acquire and release run in the store's
    worker threads, so the loop never waits on ``GET_LOCK``."""

    def __init__(self, store: AsyncMysqlAgentStateStore, lock: SessionLock) -> None:
        self._store, self._lock = store, lock

    async def __aenter__(self) -> "AsyncSessionLock":
        await self._store._run(self._lock.__enter__)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._store._run(self._lock.__exit__, None, None, None)
