"""OpenAI Agents SDK cases, run by tests/test_openai_agents.py inside .venv-openai-agents.
Not named test_*: the default run never imports it.

The behaviours of the SDK's own session suites (tests/memory/test_session.py for
SQLiteSession, tests/extensions/memory/test_sqlalchemy_session.py), written against a real
server: direct operations, limits and session settings, isolation, pop semantics, unicode and
injection-looking content, concurrency, Runner integration (run, run_sync, run_streamed)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from agents import Agent, RunConfig, Runner
from agents.memory import SessionABC, SessionSettings
from agents.testing import ScriptedModel, assistant_message

from mysql_state import MysqlAgentStateStore
from mysql_state.aio import AsyncMysqlAgentStateStore
from mysql_state.openai_agents import MysqlSession
from tests.rows_read import rows_read  # noqa: F401 - a fixture

ROOT = Path(__file__).resolve().parents[2]


def run(coro):
    return asyncio.run(coro)


def msgs(*texts: str, role: str = "user") -> list[dict]:
    return [{"role": role, "content": t} for t in texts]


@pytest.fixture
def sync_store(url: str, database: str):
    s = MysqlAgentStateStore.from_url(url, database_name=database, create_if_not_exist=True)
    yield s
    s.close()


@pytest.fixture(params=["async", "sync"])
def any_store(request, sync_store):
    """The adapter takes either store; every case runs with both."""
    return AsyncMysqlAgentStateStore(sync_store, close_store=False) if request.param == "async" else sync_store


def test_is_the_sdk_session_abc_with_its_attributes(any_store) -> None:
    session = MysqlSession("s1", any_store, user_id="alice")
    assert isinstance(session, SessionABC)
    assert session.session_id == "s1" and session.session_settings == SessionSettings()


def test_add_get_clear_and_items_round_trip_exactly(any_store) -> None:
    async def go():
        session = MysqlSession("direct", any_store)
        items = [{"role": "user", "content": "Hello"}, {"role": "assistant", "content": "Hi there!"},
                 {"type": "function_call", "call_id": "c1", "name": "add", "arguments": "{\"a\": 1}"}]
        await session.add_items(items)
        assert await session.get_items() == items
        await session.add_items([])  # a no-op, as in the SDK
        assert await session.get_items() == items
        await session.clear_session()
        assert await session.get_items() == []
    run(go())


def test_get_items_limit_is_the_latest_n_in_order(any_store) -> None:
    async def go():
        session = MysqlSession("limit", any_store)
        await session.add_items(msgs("1", "2", "3", "4"))
        assert [i["content"] for i in await session.get_items(limit=2)] == ["3", "4"]
        assert len(await session.get_items()) == 4
        assert len(await session.get_items(limit=10)) == 4
        assert await session.get_items(limit=0) == []
    run(go())


def test_session_settings_limit_is_the_default_and_an_explicit_limit_wins(sync_store, url: str, database: str) -> None:
    async def go():
        session = MysqlSession("settings", sync_store, session_settings=SessionSettings(limit=3))
        await session.add_items(msgs(*map(str, range(10))))
        assert [i["content"] for i in await session.get_items()] == ["7", "8", "9"]
        assert [i["content"] for i in await session.get_items(limit=5)] == ["5", "6", "7", "8", "9"]
        from_dict = MysqlSession.from_url("settings", url, database_name=database, session_settings={"limit": 2})
        assert from_dict.session_settings == SessionSettings(limit=2)
        assert len(await from_dict.get_items()) == 2
        await from_dict.close()
    run(go())


def test_sessions_and_users_are_isolated(any_store) -> None:
    async def go():
        a, b = MysqlSession("s", any_store, user_id="alice"), MysqlSession("s", any_store, user_id="bob")
        c = MysqlSession("s2", any_store, user_id="alice")
        await a.add_items(msgs("cats"))
        await b.add_items(msgs("dogs"))
        assert [i["content"] for i in await a.get_items()] == ["cats"]
        assert [i["content"] for i in await b.get_items()] == ["dogs"]
        assert await c.get_items() == []
        await b.clear_session()
        assert len(await a.get_items()) == 1
    run(go())


def test_unicode_and_injection_looking_content_round_trip(any_store) -> None:
    async def go():
        session = MysqlSession("weird'; DROP TABLE x; --", any_store, user_id="ü")
        items = msgs("café ☕ 你好 \U0001f600", "'; DELETE FROM agentscope_sessions; --", 'quote " back \\ slash\x00nul')
        await session.add_items(items)
        assert await session.get_items() == items
    run(go())


def test_pop_item_returns_latest_first_then_none(any_store) -> None:
    async def go():
        session = MysqlSession("pop", any_store)
        assert await session.pop_item() is None
        await session.add_items(msgs("Hello", "Hi there!", "How are you?"))
        assert (await session.pop_item())["content"] == "How are you?"
        assert [i["content"] for i in await session.get_items()] == ["Hello", "Hi there!"]
        assert (await session.pop_item())["content"] == "Hi there!"
        assert (await session.pop_item())["content"] == "Hello"
        assert await session.pop_item() is None and await session.get_items() == []
        await session.add_items(msgs("again"))  # the list keeps working after being emptied
        assert [i["content"] for i in await session.get_items()] == ["again"]
    run(go())


def test_pop_affects_only_its_session(any_store) -> None:
    async def go():
        one, two = MysqlSession("one", any_store), MysqlSession("two", any_store)
        await one.add_items(msgs("1"))
        await two.add_items(msgs("2a", "2b"))
        assert (await two.pop_item())["content"] == "2b"
        assert [i["content"] for i in await one.get_items()] == ["1"]
        assert [i["content"] for i in await two.get_items()] == ["2a"]
    run(go())


def test_concurrent_pops_from_threads_and_loops_return_each_item_once(sync_store) -> None:
    session = MysqlSession("many-pops", sync_store)
    run(session.add_items(msgs(*map(str, range(40)))))
    popped: list = []
    lock = threading.Lock()

    def worker() -> None:
        async def go():  # each thread has its own event loop
            while (item := await session.pop_item()) is not None:
                with lock:
                    popped.append(item["content"])
        asyncio.run(go())

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(popped, key=int) == [str(i) for i in range(40)]
    assert run(session.get_items()) == []


def test_concurrent_adds_from_tasks_and_threads_lose_nothing(sync_store) -> None:
    session = MysqlSession("many-adds", sync_store)

    async def adds(prefix: str) -> None:
        await asyncio.gather(*(session.add_items(msgs(f"{prefix}{i}")) for i in range(10)))

    threads = [threading.Thread(target=lambda p=p: asyncio.run(adds(p))) for p in "abc"]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    got = [i["content"] for i in run(session.get_items())]
    assert sorted(got) == sorted(f"{p}{i}" for p in "abc" for i in range(10))


def test_from_url_close_closes_only_its_own_store(sync_store, url: str, database: str) -> None:
    async def go():
        owned = MysqlSession.from_url("own", url, database_name=database, user_id="alice")
        await owned.add_items(msgs("x"))
        await owned.close()
        with pytest.raises(RuntimeError, match="closed"):
            await owned.get_items()
        shared = MysqlSession("own", sync_store, user_id="alice")
        await shared.close()  # the session is closed, the caller's store stays open
        assert [i["content"] for i in await MysqlSession("own", sync_store, user_id="alice").get_items()] == ["x"]
    run(go())


def test_bad_ids_are_refused_naming_them(sync_store) -> None:
    with pytest.raises(ValueError, match="':'"):
        MysqlSession("s", sync_store, user_id="a:b")
    with pytest.raises(ValueError, match="blank"):
        MysqlSession("  ", sync_store)
    with pytest.raises(TypeError, match="MysqlSession"):
        MysqlSession("s", object())


def test_a_turn_reads_the_window_asked_for_not_the_history(store, rows_read) -> None:
    """get_items(limit=k) reads about k rows of a 500-item history; add_items and pop_item read
    a bounded number of rows (the list's hash row, the last item), never the history."""
    session = MysqlSession("long", store, user_id="alice")
    run(session.add_items(msgs(*map(str, range(500)))))
    assert rows_read.of(session.get_items(limit=3)) <= 3 + 2
    assert rows_read.of(session.add_items(msgs("a", "b"))) <= 10
    assert rows_read.of(session.pop_item()) <= 10
    assert rows_read.of(session.get_items()) >= 501  # the control: the whole history is 501 rows


# ---- a real agent ------------------------------------------------------------------------------


def _run_sync(agent, text, **kw):
    return Runner.run_sync(agent, text, **kw)


async def _run(method: str, agent, text: str, **kw):
    if method == "run":
        return await Runner.run(agent, text, **kw)
    if method == "run_sync":  # its own loop, in a thread: the session crosses loops
        return await asyncio.to_thread(_run_sync, agent, text, **kw)
    result = Runner.run_streamed(agent, text, **kw)
    async for _ in result.stream_events():
        pass
    return result


@pytest.mark.parametrize("method", ["run", "run_sync", "run_streamed"])
def test_runner_keeps_the_conversation_and_sessions_apart(sync_store, method: str) -> None:
    async def go():
        model = ScriptedModel()
        agent = Agent(name="test", model=model)
        s1, s2 = MysqlSession(f"{method}-1", sync_store), MysqlSession(f"{method}-2", sync_store)
        model.enqueue([assistant_message("San Francisco")])
        assert (await _run(method, agent, "Where is the Golden Gate Bridge?", session=s1)).final_output == "San Francisco"
        model.enqueue([assistant_message("I like dogs")])
        await _run(method, agent, "I like dogs", session=s2)
        model.enqueue([assistant_message("California")])
        assert (await _run(method, agent, "What state is it in?", session=s1)).final_output == "California"
        seen = [str(i.get("content")) for i in model.calls[-1].input]
        assert any("Golden Gate" in s for s in seen) and not any("dogs" in s for s in seen)
        assert len(await s1.get_items()) == 4
    run(go())


def test_run_config_session_settings_override_the_sessions(sync_store) -> None:
    async def go():
        session = MysqlSession("override", sync_store, session_settings=SessionSettings(limit=100))
        await session.add_items(msgs(*(f"Turn {i}" for i in range(10))))
        model = ScriptedModel()
        model.enqueue([assistant_message("Got it")])
        await Runner.run(Agent(name="t", model=model), "New question", session=session,
                         run_config=RunConfig(session_settings=SessionSettings(limit=2)))
        history = [i for i in model.calls[-1].input if i.get("content") != "New question"]
        assert [i["content"] for i in history] == ["Turn 8", "Turn 9"]
    run(go())


def test_an_agent_keeps_its_conversation_across_a_process_restart(url: str) -> None:
    sys.path.insert(0, str(ROOT / "examples"))
    from restart_demo import check_restart

    check_restart(str(ROOT / "examples" / "openai_agents_restart.py"), url)


def test_the_modules_docstring_examples_run(url: str, database: str, monkeypatch) -> None:
    """mysql_state.openai_agents's examples (doctest) run here, in tests/doctest_run.py's namespace."""
    from tests.doctest_run import run_examples

    result = run_examples("mysql_state.openai_agents", url, database, monkeypatch)
    assert result.attempted > 0, "mysql_state.openai_agents lost its examples"
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed (see above)"


def test_sessions_on_one_sync_store_share_its_threads_and_its_queue(url: str, database: str) -> None:
    """Many sessions on one sync store: their calls queue within the store's pool size, as on
    one async store. Before, each session wrapped the store with an executor of its own: 20
    sessions at once held 20 threads waiting for 2 connections (PoolTimeoutError), and 40
    sessions kept ~8 threads each after every call."""
    store = MysqlAgentStateStore.from_url(url, database_name=database, create_if_not_exist=True,
                                          pool_size=2, pool_timeout=1)
    try:
        big = "x" * 2_000_000
        sessions = [MysqlSession(f"load-{i}", store) for i in range(20)]

        async def go():
            for _ in range(3):
                await asyncio.gather(*(s.add_items([{"role": "user", "content": big}]) for s in sessions))
            return [len(await s.get_items()) for s in sessions]

        assert run(go()) == [3] * 20
        before = threading.active_count()
        many = [MysqlSession(f"many-{i}", store) for i in range(40)]

        async def each():
            await asyncio.gather(*(s.add_items(msgs("hi")) for s in many))

        run(each())
        assert threading.active_count() - before <= 2, (before, threading.active_count())
    finally:
        store.close()


def test_a_closed_session_runs_no_call_and_leaves_a_shared_store_open(sync_store) -> None:
    """As a closed SQLiteSession: every call raises (a RuntimeError), even an empty add_items,
    which before returned without a word; a store passed in stays open for other sessions."""
    async def go():
        session, other = MysqlSession("closing", sync_store), MysqlSession("staying", sync_store)
        await session.add_items(msgs("kept"))
        await session.close()
        await session.close()  # again: nothing happens
        for call in (lambda: session.add_items([]), lambda: session.add_items(msgs("x")), session.get_items,
                     session.pop_item, session.clear_session):
            with pytest.raises(RuntimeError, match="MysqlSession 'closing' is closed"):
                await call()
        await other.add_items(msgs("fine"))
        return await other.get_items(), await MysqlSession("closing", sync_store).get_items()

    assert run(go()) == (msgs("fine"), msgs("kept"))


def test_from_url_takes_the_list_key_as_the_constructor_does(url: str, database: str, raw) -> None:
    """``from_url(..., key=...)`` names the list, as ``MysqlSession(..., key=...)`` (before:
    refused, with a hint at the unrelated ssl_key)."""
    async def go():
        session = MysqlSession.from_url("keyed", url, database_name=database, key="history", create_tables=True)
        try:
            await session.add_items(msgs("a", "b"))
            return await session.get_items()
        finally:
            await session.close()

    assert run(go()) == msgs("a", "b")
    assert raw.query("SELECT COUNT(*) FROM {t} WHERE session_id = '__anon__:keyed' AND state_key = 'history'") == [(2,)]
