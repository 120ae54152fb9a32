"""AsyncMysqlAgentStateStore: the sync store's operations as coroutines.

pymysql and DBUtils are synchronous, so every call runs the *sync* store's method in a
bounded thread pool (one thread per pooled connection) via ``loop.run_in_executor``: one
implementation of the logic, and the event loop never waits on the network.

The twin cannot drift: each coroutine is generated from the sync method it runs
(:func:`mirror`), with that method's very signature (names, kinds, defaults, annotations;
the coroutine's result is what the sync method returns) and docstring; nothing is retyped
here. :meth:`AsyncMysqlAgentStateStore.export` is an async iterator that streams the sync
store's export a chunk of lines per worker-thread hop.

Cancellation: cancelling the awaiting task never interrupts the thread. An operation that a
thread already started finishes its transaction (commit or rollback) and returns its
connection to the pool, and only then does the cancellation reach the awaiting task; one
still queued is dropped before it starts. A list is therefore never half-written, no
connection leaks, and a write that was cancelled never lands after the caller's next one.

>>> async def main():
...     async with await AsyncMysqlAgentStateStore.open(url, create_if_not_exist=True) as astore:
...         await astore.save_list("alice", "async-1", "memory", messages)
...         return await astore.get_list("alice", "async-1", "memory")
>>> asyncio.run(main())
[{'role': 'user', 'text': 'hi'}, {'role': 'assistant', 'text': 'hello'}]
"""

from __future__ import annotations

import asyncio
import inspect
import contextvars
import functools
import itertools
import threading
import warnings
from concurrent.futures import ThreadPoolExecutor
from typing import Any, AsyncIterator, Callable, Concatenate, Coroutine, Optional, ParamSpec, Sequence, TypeVar

from .catalog import ALL_USERS
from .errors import LockTimeoutError, StoreClosedError, caller_stacklevel
from .pool import DEFAULT_POOL_SIZE, Stats
from .locks import SessionLock
from .store import MysqlAgentStateStore

__all__ = ["AsyncMysqlAgentStateStore", "AsyncSessionLock", "ATTRIBUTES", "OPERATIONS", "mirror", "mirror_attribute",
           "run_in"]

T = TypeVar("T")
P = ParamSpec("P")

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
    "append_lists",
    "pop_list",
    "get_list",
    "get_list_versioned",
    "get_many",
    "get_prefix",
    "transaction",
    "list_length",
    "key_kind",
    "exists",
    "delete",
    "delete_keys",
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
#: The sync store's attributes (docs/api.md), each read through here from the wrapped store.
ATTRIBUTES = ("database_name", "table_name", "exact_keys", "max_allowed_packet", "keep_history", "encryption",
              "pool_size", "pool_timeout", "supports_versioning")
#: Sync methods that read this process's memory only (no connection): awaited, they run on the
#: loop at once, whatever the threads are doing (a metrics scrape while the database is slow).
IN_MEMORY = frozenset({"metrics"})
#: Lines of an export fetched per worker-thread hop (the sync export reads 1000 rows a chunk).
EXPORT_LINES_PER_HOP = 1000


def mirror(method: Callable[Concatenate[MysqlAgentStateStore, P], T]
           ) -> Callable[Concatenate["AsyncMysqlAgentStateStore", P], Coroutine[Any, Any, T]]:
    """The coroutine twin of the sync store method ``method``: same name, same signature and
    annotations (for ``inspect``, ``typing.get_type_hints`` and static type checkers alike: the
    parameters are ``method``'s, the result is awaited), the sync docstring; awaiting it runs
    ``method`` on the wrapped store in a worker thread."""
    name = method.__name__

    async def coroutine(self: "AsyncMysqlAgentStateStore", *args: P.args, **kwargs: P.kwargs) -> T:
        return await self._run(getattr(self.sync, name), *args, **kwargs)

    coroutine.__name__ = name
    coroutine.__qualname__ = f"AsyncMysqlAgentStateStore.{name}"
    coroutine.__module__ = __name__
    sig = inspect.signature(method)
    coroutine.__signature__ = sig  # type: ignore[attr-defined]
    coroutine.__annotations__ = dict(method.__annotations__)
    coroutine.__wrapped__ = method  # type: ignore[attr-defined]  # get_type_hints resolves names in store.py
    required = ", ".join(p.name for p in list(sig.parameters.values())[1:]
                         if p.default is p.empty and p.kind is p.POSITIONAL_OR_KEYWORD)
    coroutine.__doc__ = (f":meth:`MysqlAgentStateStore.{name}` as a coroutine, run in a worker thread: "
                         f"``await astore.{name}({required})``.\n\n"
                         f"The sync method's documentation (its examples call the sync store):\n\n"
                         f"{inspect.getdoc(method) or ''}")
    return coroutine


def mirror_attribute(name: str) -> property:
    """A read-only property giving the wrapped sync store's attribute ``name`` (a plain read,
    no thread hop: the attributes are set when the store opens)."""
    return property(lambda self: getattr(self.sync, name),
                    doc=f"The sync store's ``{name}`` (:class:`MysqlAgentStateStore`).")


class AsyncMysqlAgentStateStore:
    """An asyncio front for :class:`MysqlAgentStateStore`: same methods, same errors.

    ``max_workers`` bounds the threads (default: the store's pool size), so calls beyond it
    queue in the executor instead of holding a thread that waits for a connection: a burst is
    served in turn, never refused, and ``pool_timeout`` bounds only a running call's wait for a
    connection. The queue has no bound of its own: bound a call's whole wait with
    ``asyncio.wait_for`` (a call still queued when it times out is dropped, never run; one
    running ends first, committed or rolled back).
    ``aclose()`` (or ``async with``) waits for running operations, then closes the wrapped
    store unless ``close_store=False``.

    >>> astore = AsyncMysqlAgentStateStore(store, close_store=False)
    >>> asyncio.run(astore.save("alice", "async-2", "plan", {"step": 1}))
    >>> asyncio.run(astore.get_versioned("alice", "async-2", "plan"))
    VersionedState(value={'step': 1}, version=1)
    >>> asyncio.run(astore.aclose())  # store stays open (close_store=False)
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
        if max_workers is not None and (not isinstance(max_workers, int) or isinstance(max_workers, bool)):
            raise TypeError(f"max_workers must be a positive int or None, got {type(max_workers).__name__}: "
                            f"{max_workers!r}")
        if max_workers is not None and max_workers < 1:
            raise ValueError(f"max_workers must be a positive int or None (the store's pool size), got {max_workers!r}")
        if not isinstance(close_store, bool):
            raise TypeError(f"close_store must be a bool, got {type(close_store).__name__}: {close_store!r}")
        size = max_workers or store.pool_size or DEFAULT_POOL_SIZE
        self.sync = store
        self.max_workers = size
        self._close_store = close_store
        self._executor = ThreadPoolExecutor(max_workers=size, thread_name_prefix="mysql-state")
        self._closed = False
        self._shut = threading.Event()  # set once aclose has closed everything
        #: The ``abandoned`` events of the session locks whose acquire is waiting: aclose sets
        #: them, so a closed store leaves no wait behind and hands out no lock.
        self._lock_waits: set[threading.Event] = set()

    @classmethod
    def from_url(cls, url: str, *args: Any, **kwargs: Any) -> "AsyncMysqlAgentStateStore":
        """A store with its own pools and ``pool_size`` threads; arguments as the sync one's
        (forwarded unchanged, so the two cannot drift).

        It connects (and creates the table) right away, so call it where blocking briefly is
        fine, e.g. at start-up; :meth:`aclose` closes everything.

        >>> astore = AsyncMysqlAgentStateStore.from_url(url, create_if_not_exist=True)
        >>> asyncio.run(astore.exists("alice", "async-from-url"))
        False
        >>> asyncio.run(astore.aclose())
        """
        sync = MysqlAgentStateStore.from_url(url, *args, **kwargs)
        return cls(sync, max_workers=sync.pool_size)

    from_url.__func__.__signature__ = inspect.signature(  # type: ignore[attr-defined]
        MysqlAgentStateStore.from_url.__func__  # type: ignore[attr-defined]
    ).replace(return_annotation="AsyncMysqlAgentStateStore")

    @classmethod
    async def open(cls, url: str, *args: Any, **kwargs: Any) -> "AsyncMysqlAgentStateStore":
        """:meth:`from_url` without blocking the loop (it connects in a thread).

        >>> async def main():
        ...     astore = await AsyncMysqlAgentStateStore.open(url, create_if_not_exist=True)
        ...     try:
        ...         return await astore.list_length("alice", "async-open", "memory")
        ...     finally:
        ...         await astore.aclose()
        >>> asyncio.run(main())
        0
        """
        making = asyncio.ensure_future(asyncio.to_thread(cls.from_url, url, *args, **kwargs))
        try:
            return await asyncio.shield(making)
        except asyncio.CancelledError:  # the store made meanwhile is nobody's: closed when it is ready
            making.add_done_callback(_close_unwanted)
            raise

    # ---- the one mechanism -----------------------------------------------------------------

    async def _run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        if self._closed:
            if self._close_store and self._shut.is_set():
                # Closed with the store it wrapped: the sync store, closed, opens no connection,
                # so its method runs here and answers as it would (its argument errors first,
                # then StoreClosedError; metrics() still counts): the twin cannot drift.
                return fn(*args, **kwargs)
            raise StoreClosedError("this AsyncMysqlAgentStateStore is closed (aclose was called); "
                                   "it runs no new operation")
        if fn.__name__ in IN_MEMORY:
            return fn(*args, **kwargs)
        return await run_in(self._executor, fn, *args, **kwargs)

    # ---- the operations: generated from the sync store (see mirror) ------------------------

    save = mirror(MysqlAgentStateStore.save)
    get = mirror(MysqlAgentStateStore.get)
    get_versioned = mirror(MysqlAgentStateStore.get_versioned)
    save_if_version = mirror(MysqlAgentStateStore.save_if_version)
    save_list = mirror(MysqlAgentStateStore.save_list)
    save_list_report = mirror(MysqlAgentStateStore.save_list_report)
    save_many = mirror(MysqlAgentStateStore.save_many)
    save_list_if_version = mirror(MysqlAgentStateStore.save_list_if_version)
    append_list = mirror(MysqlAgentStateStore.append_list)
    append_lists = mirror(MysqlAgentStateStore.append_lists)
    pop_list = mirror(MysqlAgentStateStore.pop_list)
    get_list = mirror(MysqlAgentStateStore.get_list)
    get_list_versioned = mirror(MysqlAgentStateStore.get_list_versioned)
    get_many = mirror(MysqlAgentStateStore.get_many)
    get_prefix = mirror(MysqlAgentStateStore.get_prefix)
    transaction = mirror(MysqlAgentStateStore.transaction)  # fn(tx) is synchronous, run in the thread
    list_length = mirror(MysqlAgentStateStore.list_length)
    key_kind = mirror(MysqlAgentStateStore.key_kind)
    exists = mirror(MysqlAgentStateStore.exists)
    delete = mirror(MysqlAgentStateStore.delete)
    delete_keys = mirror(MysqlAgentStateStore.delete_keys)
    list_session_ids = mirror(MysqlAgentStateStore.list_session_ids)
    truncate_all_sessions = mirror(MysqlAgentStateStore.truncate_all_sessions)
    forget_user = mirror(MysqlAgentStateStore.forget_user)
    reencrypt = mirror(MysqlAgentStateStore.reencrypt)
    sessions = mirror(MysqlAgentStateStore.sessions)
    get_history = mirror(MysqlAgentStateStore.get_history)
    fork = mirror(MysqlAgentStateStore.fork)
    import_rows = mirror(MysqlAgentStateStore.import_rows)
    prune = mirror(MysqlAgentStateStore.prune)
    migrate = mirror(MysqlAgentStateStore.migrate)
    doctor = mirror(MysqlAgentStateStore.doctor)
    metrics = mirror(MysqlAgentStateStore.metrics)

    # ---- the attributes: read from the sync store (see mirror_attribute) ----------------------

    database_name = mirror_attribute("database_name")
    table_name = mirror_attribute("table_name")
    exact_keys = mirror_attribute("exact_keys")
    max_allowed_packet = mirror_attribute("max_allowed_packet")
    keep_history = mirror_attribute("keep_history")
    encryption = mirror_attribute("encryption")
    pool_size = mirror_attribute("pool_size")
    pool_timeout = mirror_attribute("pool_timeout")
    supports_versioning = mirror_attribute("supports_versioning")

    async def export(self, user_id: Any = ALL_USERS, sessions: Optional[Sequence[str]] = None) -> AsyncIterator[str]:
        """``async for line in store.export(...)``: the lines of
        :meth:`MysqlAgentStateStore.export`, streamed (the sync export advanced in a worker
        thread, :data:`EXPORT_LINES_PER_HOP` lines per hop), in constant memory. The arguments
        are checked (the sync store's errors) when the iteration starts; stopping early
        (``break``, ``aclose()``) closes the sync export.

        >>> store.save("gina", "async-export", "plan", {"step": 1})
        >>> async def lines():
        ...     return [line async for line in astore.export("gina", ["async-export"])]
        >>> len(asyncio.run(lines()))  # the row and its catalog row
        2
        """
        lines = await self._run(lambda: self.sync.export(user_id, sessions))
        lines.warn = False  # its warning is issued here, where the caller's loop is, not in a worker thread
        hop: Optional[asyncio.Future] = None
        try:
            while True:
                if self._closed:  # closed meanwhile: the export stops, as every operation does
                    raise StoreClosedError("this AsyncMysqlAgentStateStore was closed (aclose was called) "
                                           "while the export was read; it runs no new operation")
                # shielded: a cancelled consumer leaves the hop running in its thread, and the
                # export is closed only once that hop is over (never while a thread reads it)
                hop = asyncio.ensure_future(self._run(lambda: list(itertools.islice(lines, EXPORT_LINES_PER_HOP))))
                chunk = await asyncio.shield(hop)
                for line in chunk:
                    yield line
                if len(chunk) < EXPORT_LINES_PER_HOP:
                    damaged = lines.warning()
                    if damaged is not None:
                        warnings.warn(damaged, stacklevel=caller_stacklevel())
                    return
        finally:
            if hop is not None and not hop.done():
                await asyncio.wait([hop])
                if not hop.cancelled():
                    hop.exception()  # retrieved: the consumer's cancellation is what is raised
            close = getattr(lines, "close", None)
            if close is not None:  # a consumer that stopped early: end the sync export's read
                await asyncio.get_running_loop().run_in_executor(None, close)

    export.__signature__ = inspect.signature(MysqlAgentStateStore.export).replace(  # type: ignore[attr-defined]
        return_annotation="AsyncIterator[str]")

    def session_lock(self, *args: Any, **kwargs: Any) -> "AsyncSessionLock":
        """``async with store.session_lock(user, session, timeout=10):``, a lease on one session
        across processes (see :meth:`MysqlAgentStateStore.session_lock`).

        >>> async def turn():
        ...     async with astore.session_lock("alice", "async-lock", timeout=5):
        ...         await astore.save("alice", "async-lock", "turn", 1)
        ...     return await astore.get("alice", "async-lock", "turn")
        >>> asyncio.run(turn())
        1
        """
        return AsyncSessionLock(self, self.sync.session_lock(*args, **kwargs))  # its arguments, checked there

    session_lock.__signature__ = inspect.signature(MysqlAgentStateStore.session_lock).replace(  # type: ignore[attr-defined]
        return_annotation="AsyncSessionLock")

    # ---- lifecycle -----------------------------------------------------------------------------

    @property
    def stats(self) -> Stats:
        """The sync store's counters (retries, reconnects, transactions): the same object, read
        with no thread hop, so it counts the calls made either way.

        >>> astore.stats is store.stats
        True
        >>> before = astore.stats.transactions
        >>> asyncio.run(astore.transaction(lambda tx: tx.save("alice", "async-stats-1", "plan", {"step": 1})))
        >>> astore.stats.transactions - before
        1
        """
        return self.sync.stats

    async def aclose(self) -> None:
        """Wait for running operations, stop the threads, close the wrapped store.

        Idempotent.

        >>> twin = AsyncMysqlAgentStateStore(store, close_store=False)
        >>> asyncio.run(twin.aclose())
        >>> asyncio.run(twin.aclose())  # again: nothing happens
        """
        if self._closed:
            await asyncio.to_thread(self._shut.wait)  # one already under way: closed when it is
            return
        self._closed = True
        for waiting in list(self._lock_waits):  # a session_lock still waiting gives up (StoreClosedError)
            waiting.set()
        await asyncio.to_thread(self._shutdown)

    close = aclose  # the sync store's name, as a coroutine

    def _shutdown(self) -> None:
        try:
            self._executor.shutdown(wait=True)
            if self._close_store:
                self.sync.close()
        finally:
            self._shut.set()

    async def __aenter__(self) -> "AsyncMysqlAgentStateStore":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


async def run_in(executor: ThreadPoolExecutor, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)`` on a thread of ``executor`` (with the caller's context
    variables), awaited without blocking the loop: how every async operation of this library
    runs its sync twin (the store's, and the adapters' that keep a thread pool of their own).
    A cancelled call that is still queued never runs; one already running reaches the caller's
    cancellation only once it has ended (committed or rolled back), so a write cancelled, then
    followed by another, never lands after it (as the SDKs' own sessions wait for their writes).
    A call waits in the executor's queue for a thread without a bound of its own: the caller's
    ``asyncio.wait_for`` bounds it (a call still queued when it times out is dropped, not run).

    >>> import asyncio
    >>> with ThreadPoolExecutor(1) as pool:
    ...     asyncio.run(run_in(pool, sum, [1, 2, 3]))
    6
    """
    ctx = contextvars.copy_context()
    started = executor.submit(functools.partial(ctx.run, fn, *args, **kwargs))
    done = asyncio.wrap_future(started)
    try:
        return await asyncio.shield(done)
    except asyncio.CancelledError:
        if started.cancel():  # still queued: dropped, it never runs
            raise
        await _to_its_end(done)
        raise


async def _to_its_end(fut: "asyncio.Future[Any]") -> None:
    """Wait until ``fut`` is done, whatever cancellations the waiting task gets meanwhile (the
    caller re-raises its own); its outcome is retrieved and dropped: nobody awaits it now."""
    while not fut.done():
        try:
            await asyncio.shield(fut)
        except asyncio.CancelledError:
            continue
        except Exception:  # noqa: BLE001 - the cancellation is what the task gets
            break
    if not fut.cancelled():
        fut.exception()  # retrieved: no "exception was never retrieved" warning


def _close_unwanted(making: "asyncio.Future[AsyncMysqlAgentStateStore]") -> None:
    """Close, in a thread of its own, the store an :meth:`AsyncMysqlAgentStateStore.open`
    whose caller was cancelled made anyway."""
    if making.cancelled() or making.exception() is not None:
        return
    made = making.result()

    def close() -> None:
        made._executor.shutdown(wait=False)
        made.sync.close()

    threading.Thread(target=close, name="mysql-state-close", daemon=True).start()


def _in_own_thread(fn: Callable[..., T], *args: Any) -> "asyncio.Future[T]":
    """A future of ``fn(*args)`` run in a daemon thread of its own (with this task's context),
    for the lock's waits and releases, which must not wait in the store's worker queue."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future = loop.create_future()
    ctx = contextvars.copy_context()

    def settle(outcome: Callable[[], None]) -> None:
        if not done.done():
            outcome()

    def run() -> None:
        try:
            result = ctx.run(fn, *args)
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting task
            error = exc
            try:
                loop.call_soon_threadsafe(settle, lambda: done.set_exception(error))
            except RuntimeError:  # the loop is closed: nobody awaits it any more
                pass
            return
        try:
            loop.call_soon_threadsafe(settle, lambda: done.set_result(result))
        except RuntimeError:
            pass

    threading.Thread(target=run, name="mysql-state-lock", daemon=True).start()
    return done


class AsyncSessionLock:
    """The ``async with`` form of :class:`SessionLock`: acquire and release run in the store's
    worker threads, so the loop never waits on ``GET_LOCK``; the lease is watched in the task
    itself, so every store call the task makes inside the block checks it first (a lost lease
    raises :class:`~mysql_state.errors.LockLostError` at the next call)."""

    def __init__(self, store: AsyncMysqlAgentStateStore, lock: SessionLock) -> None:
        self._store, self._lock = store, lock

    async def __aenter__(self) -> "AsyncSessionLock":
        if self._store._closed:
            raise StoreClosedError("this AsyncMysqlAgentStateStore is closed (aclose was called); "
                                   "it takes no new lock")
        abandoned = threading.Event()
        lock = self._lock
        lock.abandoned = abandoned  # a waiting acquire gives up within WATCHED_SLICE once set

        def acquire() -> bool:
            lock.acquire()
            if abandoned.is_set():  # the task stopped waiting meanwhile: the lock goes back at once
                lock.release(True)
                return False
            return True

        # In a thread of its own, not one of the store's workers: the task holding the lock
        # needs those for its calls inside the block, and waiters must not take them all.
        # Shielded: a cancelled task sets ``abandoned``, so the wait ends; whichever of the two
        # sees the other last gives a lock taken for nobody back (never kept, never twice).
        waiting = _in_own_thread(acquire)
        closed = StoreClosedError("this AsyncMysqlAgentStateStore was closed (aclose was called) while the "
                                  "session lock was awaited; it takes no new lock")
        self._store._lock_waits.add(abandoned)
        try:
            taken = await asyncio.shield(waiting)
        except asyncio.CancelledError:
            abandoned.set()
            waiting.add_done_callback(self._give_back)
            raise
        except LockTimeoutError:
            if self._store._closed:  # the wait was given up by aclose
                raise closed from None
            raise
        finally:
            self._store._lock_waits.discard(abandoned)
        if not taken:  # taken as aclose gave the wait up: given back at once (acquire)
            raise closed
        self._lock.watch()  # in this task's context, which each _run call copies
        return self

    def _give_back(self, waiting: "asyncio.Future[bool]") -> None:
        """The acquire of a cancelled ``async with`` ended: a lock it took before it could see
        the cancellation is released (in a thread of its own: the store may be closing)."""
        if not waiting.cancelled() and waiting.exception() is None and waiting.result():
            threading.Thread(target=self._lock.release, args=(True,), name="mysql-state-lock-release",
                             daemon=True).start()

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self._lock.unwatch()
        # In a thread of its own (the store may be closed, its workers busy) and awaited to its
        # end even when the task is cancelled meanwhile: the lock is never kept.
        released = _in_own_thread(self._lock.release, exc_type is not None)
        try:
            await asyncio.shield(released)
        except asyncio.CancelledError:
            await _to_its_end(released)
            raise

    @property
    def name(self) -> str:
        """The server-side lock name (see :class:`SessionLock`)."""
        return self._lock.name

    async def check(self) -> None:
        """Raise :class:`~mysql_state.errors.LockLostError` unless the lease still holds the lock
        (the full check of :meth:`SessionLock.check`, run in a worker thread).

        >>> async def turn():
        ...     async with astore.session_lock("alice", "async-lock-check-1", timeout=5) as lease:
        ...         await lease.check()  # nothing raised: the lock is still this lease's
        ...         return "checked"
        >>> asyncio.run(turn())
        'checked'
        """
        await self._store._run(self._lock.check)
