"""Functions run in real child processes (multiprocessing, spawn) by the many-process tests."""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import time
from typing import Any, Iterator


def repo_turn(url: str, database: str, user: str, session: str, text: str, barrier, results) -> None:
    """Load the AgentScope state with its version, wait for the other process, save a turn."""
    from agentscope.message import UserMsg

    from mysql_state import StaleStateError
    from mysql_state.agentscope import AgentStateRepository
    from mysql_state.aio import AsyncMysqlAgentStateStore

    async def go():
        store = AsyncMysqlAgentStateStore.from_url(url, database_name=database)
        repo = AgentStateRepository(store)
        state, version = await repo.load_versioned(user, session)
        state.context.append(UserMsg(name="u", content=text))
        barrier.wait(30)
        try:
            report = await repo.save(user, session, state, expected_version=version)
            results.put(("won", text, report.version))
        except StaleStateError as exc:
            results.put(("stale", text, exc.expected, exc.stored))
        finally:
            await store.aclose()

    asyncio.run(go())


def hold_lock(url: str, database: str, seconds: float, started, release=None, released=None) -> None:
    """Hold the lease ``seconds`` (or until ``release`` is set); put the wall-clock time just
    before letting go in ``released``."""
    from mysql_state import MysqlAgentStateStore

    store = MysqlAgentStateStore.from_url(url, database_name=database)
    with store.session_lock("alice", "chat-1", timeout=10):
        started.set()
        if release is not None:
            release.wait(seconds)
        else:
            time.sleep(seconds)
        if released is not None:
            released.put(time.time())
    store.close()


def try_lock(url: str, database: str, timeout: float, results) -> None:
    from mysql_state import LockTimeoutError, MysqlAgentStateStore

    store = MysqlAgentStateStore.from_url(url, database_name=database)
    t0, began = time.monotonic(), time.time()
    try:
        with store.session_lock("alice", "chat-1", timeout=timeout):
            results.put(("got", time.monotonic() - t0, began, time.time()))
    except LockTimeoutError as exc:
        results.put(("timeout", time.monotonic() - t0, str(exc)))
    finally:
        store.close()


def pop_or_append(url: str, database: str, role: str, count: int, results) -> None:
    """``append`` appends ``count`` tagged items one by one; ``pop`` pops ``count`` times."""
    from mysql_state import MysqlAgentStateStore

    store = MysqlAgentStateStore.from_url(url, database_name=database, pool_size=2)
    got = []
    for i in range(count):
        if role == "append":
            store.append_list("u", "s", "q", [f"{role}-{i}"])
        else:
            item = store.pop_list("u", "s", "q")
            if item is not None:
                got.append(item)
    store.close()
    results.put((role, got))


def open_and_migrate(url: str, database: str, barrier, results) -> None:
    """A worker's start-up: open the store and migrate, at the same moment as the others."""
    from mysql_state import MysqlAgentStateStore

    barrier.wait(60)
    try:
        store = MysqlAgentStateStore.from_url(url, database_name=database, pool_size=2)
        try:
            results.put(("ok", [s.name for s in store.migrate()]))
        finally:
            store.close()
    except Exception as exc:  # noqa: BLE001 - reported to the test
        results.put(("error", f"{type(exc).__name__}: {exc}"))


def append_and_trim(url: str, database: str, seconds: float, started, results) -> None:
    """Append two items at a time to list ``m`` of ``u/s`` for ``seconds``, every 25th turn
    trimming it to its last 60 items (a rewrite that shrinks it); each item is ``{"i": i}`` with
    ``i`` one more than the item before it. Puts the number of writes in ``results``."""
    from mysql_state import MysqlAgentStateStore

    store = MysqlAgentStateStore.from_url(url, database_name=database)
    try:
        i = len(store.get_list("u", "s", "m"))
        started.set()
        writes, end = 0, time.monotonic() + seconds
        while time.monotonic() < end:
            store.append_list("u", "s", "m", [{"i": i}, {"i": i + 1}])
            i, writes = i + 2, writes + 1
            if writes % 25 == 0:
                store.save_list("u", "s", "m", [{"i": j} for j in range(i - 60, i)])
        results.put(writes)
    finally:
        store.close()


@contextlib.contextmanager
def appending_and_trimming(url: str, database: str, seconds: float = 3.0) -> Iterator[tuple[Any, Any]]:
    """A real process running :func:`append_and_trim` on list ``m`` of ``u/s``, started and
    past its first read: yields (the process, the queue it puts its number of writes in);
    joined on exit, where its exit code must be 0."""
    spawn = multiprocessing.get_context("spawn")
    started, results = spawn.Event(), spawn.Queue()
    proc = spawn.Process(target=append_and_trim, args=(url, database, seconds, started, results))
    proc.start()
    try:
        assert started.wait(60)
        yield proc, results
    finally:
        proc.join(30)
    assert proc.exitcode == 0


def langgraph_turns(url: str, database: str, thread: str, inbox, outbox) -> None:
    """A worker of its own (its own store and ``MysqlSaver``): run each turn number it is
    sent on ``thread`` (``test_langgraph_saver.chat_graph``), answer with it; None ends."""
    from mysql_state import MysqlAgentStateStore
    from mysql_state.langgraph import MysqlSaver

    from .test_langgraph_saver import chat_graph, turn

    store = MysqlAgentStateStore.from_url(url, database_name=database)
    try:
        graph = chat_graph(MysqlSaver(store))
        for i in iter(inbox.get, None):
            turn(graph, thread, i)
            outbox.put(i)
    finally:
        store.close()


def create_once(url: str, database: str, keys: list, mark: str, barrier, results) -> None:
    """For each key, wait for the other processes, then ``save_if_version(key, mark, 0)``
    (create only while absent); put ``(key, mark, version)`` in ``results``."""
    from mysql_state import MysqlAgentStateStore

    store = MysqlAgentStateStore.from_url(url, database_name=database)
    try:
        for key in keys:
            barrier.wait(30)
            results.put((key, mark, store.save_if_version("u", "s", key, mark, 0)))
    finally:
        store.close()


def append_new_lists(url: str, database: str, rounds: int, mark: int, barrier, results) -> None:
    """For each round, wait for the other processes, then append ``mark`` to a list that does
    not exist yet (all of them at once); put ``(round, error or None)`` in ``results``."""
    from mysql_state import MysqlAgentStateStore

    store = MysqlAgentStateStore.from_url(url, database_name=database)
    try:
        for r in range(rounds):
            barrier.wait(30)
            try:
                store.append_list("u", f"new-{r}", "m", [mark])
                results.put((r, None))
            except Exception as exc:  # noqa: BLE001 - reported to the test, which fails on it
                results.put((r, f"{type(exc).__name__}: {exc}"))
    finally:
        store.close()
