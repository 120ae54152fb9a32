"""The AgentScope 2.x adapter with the real framework, offline: a scripted ChatModelBase, a
real tool, turns, a reply paused for confirmation and resumed by a new agent (on a new store,
as after a process restart), and a compression. After each step the stored state equals
``agent.state`` exactly, and the table shows that the write was proportional to the change."""

from __future__ import annotations

import asyncio
import json

import orjson
import pytest

agentscope = pytest.importorskip("agentscope", minversion="2.0", reason="the agentscope extra (2.x) is not installed")

from agentscope.agent import Agent, ContextConfig, InjectionConfig  # noqa: E402
from agentscope.credential import CredentialBase  # noqa: E402
from agentscope.event import ConfirmResult, RequireUserConfirmEvent, UserConfirmResultEvent  # noqa: E402
from agentscope.formatter import OpenAIChatFormatter  # noqa: E402
from agentscope.message import TextBlock, ToolCallBlock, UserMsg  # noqa: E402
from agentscope.model import ChatModelBase, ChatResponse, ChatUsage  # noqa: E402
from agentscope.permission import PermissionBehavior, PermissionDecision  # noqa: E402
from agentscope.state import AgentState  # noqa: E402
from agentscope.tool import FunctionTool, Toolkit  # noqa: E402

from mysql_state.agentscope import CONTEXT_KEY, STATE_KEY, AgentStateRepository  # noqa: E402
from mysql_state.aio import AsyncMysqlAgentStateStore  # noqa: E402
from mysql_state.errors import StoreClosedError  # noqa: E402

SUMMARY_FIELDS = ("task_overview", "current_state", "important_discoveries", "next_steps", "context_to_preserve")


class ScriptedModel(ChatModelBase):
    """An offline chat model: each call returns the next scripted list of blocks."""

    def __init__(self, script: list[list], context_size: int = 32768) -> None:
        super().__init__(
            credential=CredentialBase(),
            model="scripted",
            parameters=ChatModelBase.Parameters(),
            stream=False,
            max_retries=0,
            context_size=context_size,
        )
        self.formatter = OpenAIChatFormatter()
        self.script = list(script)
        self.compressions = 0

    async def _call_api(self, model_name, messages, tools=None, tool_choice=None, **kwargs) -> ChatResponse:
        names = [t["function"]["name"] for t in (tools or [])]
        if names == ["generate_structured_output"]:
            self.compressions += 1
            summary = {k: f"{k} #{self.compressions}" for k in SUMMARY_FIELDS}
            return ChatResponse(
                content=[ToolCallBlock(id=f"cmp{self.compressions}", name="generate_structured_output",
                                       input=json.dumps(summary))],
                is_last=True,
                usage=ChatUsage(input_tokens=10, output_tokens=5, time=0.0),
            )
        return ChatResponse(content=self.script.pop(0), is_last=True,
                            usage=ChatUsage(input_tokens=3, output_tokens=2, time=0.0))


CALLS: list[tuple[int, int]] = []


def add(a: int, b: int) -> str:
    """Add two integers.

    Args:
        a (int): the first
        b (int): the second
    """
    CALLS.append((a, b))
    return str(a + b)


def toolkit() -> Toolkit:
    allow = PermissionDecision(behavior=PermissionBehavior.ALLOW, message="ok")
    return Toolkit(tools=[FunctionTool(add, permission=allow), FunctionTool(add, name="add_ask")])


def make_agent(model: ScriptedModel, state: AgentState) -> Agent:
    return Agent(
        name="bot",
        system_prompt="You are a calculator.",
        model=model,
        toolkit=toolkit(),
        state=state,
        injection_config=InjectionConfig(inject_runtime_state=False),
    )


def dump(state: AgentState) -> dict:
    return state.model_dump(mode="json")


def run(coro):
    return asyncio.run(coro)


@pytest.fixture
def astore(url, database):
    s = AsyncMysqlAgentStateStore.from_url(url, database_name=database, create_if_not_exist=True, pool_size=4)
    yield s
    run(s.aclose())


def table(raw, sid: str = "alice:chat-1"):
    """(message dicts by item_index, {index: version}, rest-of-state dict) from plain SQL."""
    rows = raw.query(
        "SELECT item_index, state_data, version FROM {t} WHERE session_id=%s AND state_key=%s ORDER BY item_index",
        (sid, CONTEXT_KEY),
    )
    assert [r[0] for r in rows] == list(range(len(rows)))
    rest = raw.query("SELECT state_data FROM {t} WHERE session_id=%s AND state_key=%s", (sid, STATE_KEY))
    return [orjson.loads(r[1]) for r in rows], {r[0]: r[2] for r in rows}, (orjson.loads(rest[0][0]) if rest else None)


async def assert_stored(repo: AgentStateRepository, raw, state: AgentState) -> None:
    loaded = await repo.load("alice", "chat-1")
    assert dump(loaded) == dump(state)
    messages, _, rest = table(raw)
    expected = dump(state)
    assert messages == expected.pop("context"), "one row per message, in order"
    assert rest == expected, "everything else as one value"


def test_turns_pause_resume_and_compression_persist_exactly_and_incrementally(url, database, astore, raw):
    CALLS.clear()
    script = [
        [TextBlock(text="let me add"), ToolCallBlock(id="call1", name="add", input='{"a": 2, "b": 3}')],
        [TextBlock(text="2+3=5")],
        [TextBlock(text="you are welcome")],
        [TextBlock(text="asking first"), ToolCallBlock(id="call2", name="add_ask", input='{"a": 1, "b": 1}')],
        [TextBlock(text="1+1=2")],
        [TextBlock(text="after compression")],
    ]
    repo = AgentStateRepository(astore)

    async def go():
        # A session nobody saved: a fresh state, and no row written by loading it.
        state = await repo.load("alice", "chat-1")
        assert state.summary == "" and state.middle_context == {}
        assert state.session_id == "chat-1" and state.context == [] and raw.rows() == []
        model = ScriptedModel(script)
        agent = make_agent(model, state)

        # Turn 1, streamed and saved after every event: a real tool call. The reply is one
        # assistant message that grows in place (tool call, tool result, final text), so after
        # the first save each save writes at most that one row.
        saves = []
        async for evt in agent.reply_stream(UserMsg("alice", "what is 2+3?")):
            saves.append(await repo.save("alice", "chat-1", agent.state))
            await assert_stored(repo, raw, agent.state)
        assert CALLS == [(2, 3)]
        assert [b.type for b in agent.state.context[-1].content] == ["text", "tool_call", "tool_result", "text"]
        assert len(agent.state.context) == 2
        first = next(s for s in saves if s.context.kind != "unchanged")
        assert (first.context.kind, first.context.rows_written) == ("rewrite", 1)
        later = [s for s in saves[saves.index(first) + 1 :] if s.context.kind != "unchanged"]
        assert later and later[0].context.kind == "append", [str(s) for s in saves]
        grew = [s for s in later[1:]]
        assert len(grew) >= 1 and all((s.context.kind, s.context.rows_written) == ("suffix", 1) for s in grew), [
            str(s) for s in saves
        ]
        _, versions1, _ = table(raw)
        assert versions1[0] == 1, "the user message was written once"

        # Turn 2: two new messages appended; the old rows are not touched.
        await agent.reply(UserMsg("alice", "thanks"))
        r2 = await repo.save("alice", "chat-1", agent.state)
        assert (r2.context.kind, r2.context.rows_written, r2.messages) == ("append", 2, 4)
        await assert_stored(repo, raw, agent.state)
        _, versions2, _ = table(raw)
        assert {i: versions2[i] for i in versions1} == versions1, "rows 0-1 were rewritten"

        # Turn 3: the ask-tool pauses the reply for confirmation.
        paused = None
        async for evt in agent.reply_stream(UserMsg("alice", "and 1+1, carefully?")):
            if isinstance(evt, RequireUserConfirmEvent):
                paused = evt
        assert paused is not None and [tc.id for tc in paused.tool_calls] == ["call2"]
        r3 = await repo.save("alice", "chat-1", agent.state)
        assert (r3.context.kind, r3.context.rows_written) == ("append", 2)
        await assert_stored(repo, raw, agent.state)
        assert [tc.id for tc in agent.state.get_awaiting_tool_calls("bot")] == ["call2"]
        assert CALLS == [(2, 3)], "the ask-tool must not run before confirmation"
        paused_id = agent.state.context[-1].id
        assert agent.state.reply_id == paused_id
        n_before_resume = len(agent.state.context)
        _, versions_paused, _ = table(raw)
        return model, paused, paused_id, n_before_resume, versions_paused

    model, paused, paused_id, n, versions_paused = run(go())

    # "Process restart": a new store (no snapshot cache), a new repository, a new agent.
    async def resume():
        async with AsyncMysqlAgentStateStore.from_url(url, database_name=database) as store2:
            repo2 = AgentStateRepository(store2)
            state2 = await repo2.load("alice", "chat-1")
            assert [tc.id for tc in state2.get_awaiting_tool_calls("bot")] == ["call2"]
            agent2 = make_agent(ScriptedModel(model.script), state2)
            await agent2.reply(UserConfirmResultEvent(
                reply_id=paused.reply_id,
                confirm_results=[ConfirmResult(confirmed=True, tool_call=paused.tool_calls[0])],
            ))
            assert CALLS == [(2, 3), (1, 1)]
            assert len(agent2.state.context) == n and agent2.state.context[-1].id == paused_id
            assert [b.type for b in agent2.state.context[-1].content][-2:] == ["tool_result", "text"]
            r = await repo2.save("alice", "chat-1", agent2.state)
            # the resumed reply grew under the same id: that one row, found by comparing content
            assert (r.context.kind, r.context.rows_written) == ("suffix", 1), str(r)
            await assert_stored(repo2, raw, agent2.state)
            _, versions, _ = table(raw)
            changed = {i for i in versions if versions[i] != versions_paused.get(i)}
            assert changed == {n - 1}

            # Compression: a small context window makes the next turn summarize the history.
            agent2.model.context_size = 200
            agent2.context_config = ContextConfig(trigger_ratio=0.5, reserve_ratio=0.2)
            before = [m.id for m in agent2.state.context]
            await agent2.reply(UserMsg("alice", "now summarize please"))
            after = [m.id for m in agent2.state.context]
            assert agent2.model.compressions >= 1 and str(agent2.state.summary).startswith("<system-info>")
            assert len(after) < len(before) + 2, (before, after)
            r = await repo2.save("alice", "chat-1", agent2.state)
            assert r.context.rows_written <= len(after) and r.context.delete_from == len(after), str(r)
            print("compression:", len(before), "->", len(after), "messages;", r)
            await assert_stored(repo2, raw, agent2.state)
            messages, versions, rest = table(raw)
            assert len(messages) == len(after) and rest["summary"] == agent2.state.summary
            # Nothing of the dropped messages remains in the table.
            dropped = set(before) - set(after)
            assert dropped and not dropped & {m["id"] for m in messages}

    run(resume())


def test_compression_is_found_from_content_not_from_summary(astore, raw):
    """The context replaced by a shorter one while ``summary`` stays the same (the framework's
    truncation fallback), and ``summary`` changed while the context did not."""
    repo = AgentStateRepository(astore)

    async def go():
        state = AgentState(session_id="chat-1")
        state.context = [UserMsg("alice", f"message {i}") for i in range(6)]
        state.summary = "old summary"
        assert (await repo.save("alice", "chat-1", state)).context.rows_written == 6
        # truncation without a new summary: keep the last two
        state.context = [m.model_copy(deep=True) for m in state.context[-2:]]
        r = await repo.save("alice", "chat-1", state)
        assert (r.context.kind, r.context.rows_written) == ("shrink", 2)
        await assert_stored(repo, raw, state)
        assert len(table(raw)[0]) == 2
        # a new summary only: the message rows are untouched
        state.summary = [TextBlock(text="a structured summary")]
        r = await repo.save("alice", "chat-1", state)
        assert (r.context.kind, r.context.rows_written) == ("unchanged", 0)
        await assert_stored(repo, raw, state)
        # a boundary message shortened under the same id
        first = state.context[0]
        state.context[0] = first.model_copy(update={"content": [TextBlock(text="mess…")]})
        r = await repo.save("alice", "chat-1", state)
        assert (r.context.kind, r.context.rows_written) == ("suffix", 1)
        await assert_stored(repo, raw, state)
        assert table(raw)[0][0]["id"] == first.id
        # an edit in the middle of a long context writes that one row
        state.context = [UserMsg("alice", f"m{i}") for i in range(50)]
        await repo.save("alice", "chat-1", state)
        state.context[25] = state.context[25].model_copy(update={"metadata": {"edited": True}})
        r = await repo.save("alice", "chat-1", state)
        assert (r.context.kind, r.context.rows_written) == ("suffix", 1)
        await assert_stored(repo, raw, state)
        # cleared
        state.context = []
        r = await repo.save("alice", "chat-1", state)
        assert r.context.kind == "clear" and table(raw)[0] == []
        await assert_stored(repo, raw, state)

    run(go())


def test_sessions_are_separate_and_delete_removes_only_the_repository_keys(astore, raw):
    repo = AgentStateRepository(astore)

    async def go():
        a = AgentState(session_id="chat-1", context=[UserMsg("alice", "hi")])
        b = AgentState(session_id="chat-2", context=[UserMsg("alice", "yo"), UserMsg("alice", "there")])
        await repo.save("alice", "chat-1", a)
        await repo.save("alice", "chat-2", b)
        await repo.save("bob", "chat-1", AgentState(session_id="chat-1"))
        await astore.save("alice", "chat-1", "my-own-key", {"keep": True})
        assert await repo.list_sessions("alice") == {"chat-1", "chat-2"}
        assert dump(await repo.load("alice", "chat-2")) == dump(b)
        assert (await repo.load("bob", "chat-1")).context == []
        assert await repo.exists("alice", "chat-1")
        await repo.delete("alice", "chat-1")
        assert not await repo.exists("alice", "chat-1")
        fresh = await repo.load("alice", "chat-1")
        assert fresh.session_id == "chat-1" and fresh.context == []
        assert [r[1] for r in raw.rows("alice:chat-1")] == ["my-own-key"]
        assert dump(await repo.load("alice", "chat-2")) == dump(b)
        with pytest.raises(TypeError):
            await repo.save("alice", "chat-1", {"context": []})

    run(go())


def test_a_sync_store_is_accepted_and_left_open(store, raw):
    repo = AgentStateRepository(store)
    state = AgentState(session_id="s", context=[UserMsg("u", "hello")])
    run(repo.save("u", "s", state))
    assert dump(run(repo.load("u", "s"))) == dump(state)
    assert store.list_length("u", "s", CONTEXT_KEY) == 1


def test_core_imports_without_agentscope(tmp_path):
    """``import mysql_state`` must not pull agentscope in (the adapters are extras)."""
    import subprocess
    import sys

    code = (
        "import sys, builtins\n"
        "real = builtins.__import__\n"
        "def guard(name, *a, **k):\n"
        "    if name.split('.')[0] == 'agentscope': raise ImportError('blocked: ' + name)\n"
        "    return real(name, *a, **k)\n"
        "builtins.__import__ = guard\n"
        "import mysql_state, mysql_state.aio\n"
        "try:\n"
        "    import mysql_state.agentscope\n"
        "except ImportError as e:\n"
        "    print('adapter:', e)\n"
        "print('core ok', 'agentscope' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "core ok False" in out.stdout
    assert "pip install 'mysql-state[agentscope]'" in out.stdout


# ---- agentscope.app storage ----------------------------------------------------------------------


@pytest.fixture
def app_db(url, database):
    """A second database on the same server for AgentScope's own app tables (aiomysql)."""
    pytest.importorskip("sqlalchemy", reason="agentscope[storage-sql] is not installed")
    pytest.importorskip("aiomysql", reason="aiomysql (the app storage's async driver) is not installed")
    from mysql_state.pool import parse_url

    from .conftest import connect

    name = database + "_app"
    con = connect(url)
    with con.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{name}`")
    kw, _ = parse_url(url)
    auth = kw.get("user", "root") + (f":{kw['password']}" if kw.get("password") else "")
    yield f"mysql+aiomysql://{auth}@{kw.get('host', '127.0.0.1')}:{kw.get('port', 3306)}/{name}", name
    with con.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
    con.close()


def test_app_storage_keeps_session_state_in_the_store(astore, raw, app_db):
    from agentscope.app.storage import AsyncSQLAlchemyStorage, SessionConfig, StorageBase

    from mysql_state.agentscope import MysqlStateAppStorage

    app_url, app_name = app_db
    CALLS.clear()

    def payload_state(session_id: str) -> dict:
        rows = raw.query(f"SELECT payload FROM `{app_name}`.`sessions` WHERE id=%s", (session_id,))
        return orjson.loads(rows[0][0])["state"]

    async def go():
        storage = MysqlStateAppStorage(app_url, astore)
        assert isinstance(storage, AsyncSQLAlchemyStorage) and isinstance(storage, StorageBase)
        async with storage:
            rec = await storage.upsert_session("alice", "agent-1", SessionConfig(workspace_id="w1"))
            sid = f"alice:{rec.id}"
            assert raw.rows(sid), "a new session has its (fresh) state in the store"

            # What the chat service does per turn: load the record, run the agent, persist.
            got = await storage.get_session("alice", "agent-1", rec.id)
            got.state.session_id = rec.id
            agent = make_agent(ScriptedModel([
                [ToolCallBlock(id="c1", name="add", input='{"a": 4, "b": 5}')],
                [TextBlock(text="9")],
                [TextBlock(text="ok")],
            ]), got.state)
            await agent.reply(UserMsg("alice", "4+5?"))
            await storage.update_session_state("alice", "agent-1", rec.id, agent.state)
            assert CALLS == [(4, 5)]
            messages, _, _ = table(raw, sid)
            assert messages == dump(agent.state)["context"] and len(messages) == 2
            assert payload_state(rec.id)["context"] == [], "the SQL payload keeps only a stub"

            # Next turn on a record read back from the storage: only the new rows are written.
            again = await storage.get_session("alice", "agent-1", rec.id)
            assert dump(again.state) == dump(agent.state)
            agent = make_agent(agent.model, again.state)
            await agent.reply(UserMsg("alice", "thanks"))
            before = raw.query("SELECT item_index, version FROM {t} WHERE session_id=%s AND state_key=%s",
                               (sid, CONTEXT_KEY))
            await storage.update_session_state("alice", "agent-1", rec.id, agent.state)
            after = dict(raw.query("SELECT item_index, version FROM {t} WHERE session_id=%s AND state_key=%s",
                                   (sid, CONTEXT_KEY)))
            assert {i: after[i] for i, _ in before} == dict(before) and len(after) == 4

            # A config-only upsert (rename) keeps the state; listings are hydrated.
            await storage.upsert_session("alice", "agent-1", SessionConfig(workspace_id="w1", name="renamed"),
                                         session_id=rec.id)
            listed = await storage.list_sessions("alice", "agent-1")
            assert [r.id for r in listed] == [rec.id] and dump(listed[0].state) == dump(agent.state)
            assert listed[0].config.name == "renamed"

            # A turn moves the record's updated_at, as AgentScope's own storage does.
            stamped = (await storage.get_session("alice", "agent-1", rec.id)).updated_at
            await asyncio.sleep(1.1)
            await storage.update_session_state("alice", "agent-1", rec.id, agent.state)
            assert (await storage.get_session("alice", "agent-1", rec.id)).updated_at > stamped
            assert payload_state(rec.id)["context"] == [], "still a stub"

            # An id the store refuses writes nothing, not a row whose state can never be stored.
            rows_before = raw.query(f"SELECT COUNT(*) FROM `{app_name}`.`sessions`")
            with pytest.raises(ValueError, match="contains ':'"):
                await storage.upsert_session("org:alice", "agent-1", SessionConfig(workspace_id="w1"))
            assert raw.query(f"SELECT COUNT(*) FROM `{app_name}`.`sessions`") == rows_before

            # Owner scoping is the parent's; a missing session is a KeyError, as in the parent.
            assert await storage.get_session("mallory", "agent-1", rec.id) is None
            with pytest.raises(KeyError):
                await storage.update_session_state("alice", "agent-1", "no-such-session", agent.state)

            # A session created with a state (a borrow); then deleting the agent cascades.
            other = await storage.upsert_session("alice", "agent-1", SessionConfig(workspace_id="w1"),
                                                 state=agent.state)
            assert dump((await storage.get_session("alice", "agent-1", other.id)).state) == dump(agent.state)
            assert await astore.list_session_ids("alice") == {rec.id, other.id}
            assert await storage.delete_session("alice", "agent-1", rec.id)
            assert raw.rows(sid) == []
            await storage.delete_agent("alice", "agent-1")
            assert raw.rows() == [], "the cascade removed the other session's state too"

    run(go())


def test_app_storage_deletes_a_state_only_when_the_deletion_commits(astore, raw, app_db):
    """A session's state was deleted from the store inside the SQL transaction that deleted its
    row, before AgentScope's COMMIT: a cascade that failed and rolled back kept the row and
    lost the state. The state goes when the deletion commits."""
    from agentscope.app.storage import SessionConfig

    from mysql_state.agentscope import MysqlStateAppStorage

    app_url, app_name = app_db

    async def go():
        async with MysqlStateAppStorage(app_url, astore) as storage:
            rec = await storage.upsert_session("alice", "agent-1", SessionConfig(workspace_id="w1"))
            sid = f"alice:{rec.id}"
            assert raw.rows(sid)
            async with storage._session() as sess:  # a cascade that fails after the delete
                assert await storage._delete_session_impl(sess, "alice", "agent-1", rec.id)
                await sess.rollback()
            assert raw.rows(sid), "the state went with a deletion that was rolled back"
            assert await storage.get_session("alice", "agent-1", rec.id) is not None
            with pytest.raises(RuntimeError):
                async with storage._session() as sess:  # an error before COMMIT: closed, rolled back
                    await storage._delete_session_impl(sess, "alice", "agent-1", rec.id)
                    raise RuntimeError("the cascade failed")
            assert raw.rows(sid) and await storage.get_session("alice", "agent-1", rec.id) is not None
            assert await storage.delete_session("alice", "agent-1", rec.id)  # committed: both go
            assert raw.rows(sid) == [] and await storage.get_session("alice", "agent-1", rec.id) is None

    run(go())


def test_app_storage_upsert_writes_nothing_when_the_state_cannot_be_stored(url, database, astore, raw, app_db):
    """upsert_session wrote the row (a new session, or a new config) before the state: a state
    the store refuses, or a store that is down, left a session without its state or a config
    half applied (audit of 2026-12-07). AgentScope's storage writes one row: all or nothing.
    The state now goes first."""
    from agentscope.app.storage import SessionConfig

    from mysql_state.agentscope import MysqlStateAppStorage

    app_url, app_name = app_db
    bad = AgentState(summary="a lone surrogate \ud800")

    def session_rows() -> list:
        return raw.query(f"SELECT id, payload FROM `{app_name}`.`sessions` ORDER BY id")

    async def go():
        async with MysqlStateAppStorage(app_url, astore) as storage:
            with pytest.raises(TypeError, match="surrogates"):
                await storage.upsert_session("alice", "ag", SessionConfig(workspace_id="w"), bad, "new-1")
            assert session_rows() == [] and raw.rows() == []
            await storage.upsert_session("alice", "ag", SessionConfig(workspace_id="w-old"),
                                         AgentState(summary="old"), "old-1")
            rows, states = session_rows(), raw.rows()
            with pytest.raises(TypeError, match="surrogates"):
                await storage.upsert_session("alice", "ag", SessionConfig(workspace_id="w-new"), bad, "old-1")
            assert session_rows() == rows and raw.rows() == states
            got = await storage.get_session("alice", "ag", "old-1")
            assert got.config.workspace_id == "w-old" and got.state.summary == "old"

        down = AsyncMysqlAgentStateStore.from_url(url, database_name=database)
        await down.aclose()
        async with MysqlStateAppStorage(app_url, down) as storage:
            with pytest.raises(StoreClosedError):
                await storage.upsert_session("alice", "ag", SessionConfig(workspace_id="w"))
            with pytest.raises(StoreClosedError):
                await storage.upsert_session("alice", "ag", SessionConfig(workspace_id="w-new"),
                                             AgentState(summary="new"), "old-1")
        assert session_rows() == rows and raw.rows() == states

    run(go())


def test_app_storage_a_recreated_session_never_comes_back_with_a_deleted_ones_state(url, database, astore, raw,
                                                                                   app_db):
    """A deleted session's state outlived its row (a turn's save racing the deletion, or a
    store down while the row was deleted) and a session created again under the same id came
    back holding the deleted conversation (audit of 2026-12-07). A new session now starts from
    the state given or a fresh one; a turn on a session deleted under it leaves no state; a
    deletion retried once the store is back deletes what the failed one left; and an empty
    session id makes a new session, as in AgentScope's storages."""
    from agentscope.app.storage import SessionConfig

    from mysql_state.agentscope import MysqlStateAppStorage

    app_url, app_name = app_db
    secret = AgentState(summary="turn", context=[UserMsg("alice", "secret")])

    def texts(state: AgentState) -> list:
        return [b.text for m in state.context for b in m.content]

    async def go():
        async with MysqlStateAppStorage(app_url, astore) as storage:
            rec = await storage.upsert_session("alice", "ag", SessionConfig(workspace_id="w"), session_id="")
            assert rec.id and await astore.list_session_ids("alice") == {rec.id}

            # a turn and a deletion at once, many times: no state outlives its row, and the
            # session made again under that id starts fresh
            for i in range(30):
                sid = f"race-{i}"
                await storage.upsert_session("alice", "ag", SessionConfig(workspace_id="w"), None, sid)

                async def turn(i=i, sid=sid):
                    await asyncio.sleep(0.0005 * (i % 7))
                    await storage.update_session_state("alice", "ag", sid, secret)

                await asyncio.gather(turn(), storage.delete_session("alice", "ag", sid), return_exceptions=True)
                assert raw.rows(f"alice:{sid}") == [], f"{sid}: a state outlived its session's row"
                again = await storage.upsert_session("alice", "ag", SessionConfig(workspace_id="w"), None, sid)
                assert texts(again.state) == []
                assert texts(await AgentStateRepository(astore).load("alice", sid)) == []

            # a state left behind (what a deletion with the store down leaves) is not adopted
            await AgentStateRepository(astore).save("alice", "orphan-1", secret)
            rec = await storage.upsert_session("alice", "ag", SessionConfig(workspace_id="w"), None, "orphan-1")
            assert texts(rec.state) == [] and texts(await AgentStateRepository(astore).load("alice", "orphan-1")) == []

            # the store down during a deletion: the row goes, the call raises; retried with the
            # store back, the deletion deletes the state it left
            await storage.upsert_session("alice", "ag", SessionConfig(workspace_id="w"), secret, "chat-9")
        down = AsyncMysqlAgentStateStore.from_url(url, database_name=database)
        await down.aclose()
        async with MysqlStateAppStorage(app_url, down) as storage:
            with pytest.raises(StoreClosedError):
                await storage.delete_session("alice", "ag", "chat-9")
        assert texts(await AgentStateRepository(astore).load("alice", "chat-9")) == ["secret"]
        async with MysqlStateAppStorage(app_url, astore) as storage:
            assert await storage.delete_session("alice", "ag", "chat-9") is False  # the row was gone
            assert raw.rows("alice:chat-9") == []

    run(go())


def test_create_app_runs_on_the_storage(astore, raw, app_db, tmp_path):
    """``create_app(storage=...)`` builds the FastAPI app, and its lifespan opens our storage
    (AgentScope's tables appear in the app database) and closes it."""
    pytest.importorskip("fastapi", reason="agentscope's service extra (fastapi) is not installed")
    from agentscope.app import create_app
    from agentscope.app.message_bus import InMemoryMessageBus
    from agentscope.app.storage import SessionConfig
    from agentscope.app.workspace_manager import LocalWorkspaceManager

    from mysql_state.agentscope import MysqlStateAppStorage

    app_url, app_name = app_db
    storage = MysqlStateAppStorage(app_url, astore)
    app = create_app(storage=storage, message_bus=InMemoryMessageBus(),
                     workspace_manager=LocalWorkspaceManager(str(tmp_path)),
                     enable_index_worker=False, enable_channel_worker=False, enable_scheduler=False)

    async def go():
        async with app.router.lifespan_context(app):
            tables = {r[0] for r in raw.query(
                "SELECT table_name FROM information_schema.tables WHERE table_schema=%s", (app_name,))}
            assert "sessions" in tables
            rec = await storage.upsert_session("alice", "a", SessionConfig(workspace_id="w"),
                                               state=AgentState(session_id="x", context=[UserMsg("alice", "hi")]))
            assert [m["content"][0]["text"] for m in table(raw, f"alice:{rec.id}")[0]] == ["hi"]

    run(go())


def test_repository_round_trips_load_one_save_two(astore, raw, url, database):
    """load is ONE statement (get_many); a turn's save is 2, from any worker that loaded: ONE
    statement, the list's append conditioned on the hash row the load read with the state row
    riding in it conditioned on the version and text the load read, and the COMMIT; with or
    without expected_version (issue 21; it was 4, and 7 after another worker's save, then 3)."""
    repo = AgentStateRepository(astore)
    other = AsyncMysqlAgentStateStore.from_url(url, database_name=database, pool_size=2)
    repo2 = AgentStateRepository(other)

    def questions() -> int:
        return int(raw.query("SHOW GLOBAL STATUS LIKE 'Questions'")[0][1])

    async def counted(coro):
        before = questions()
        out = await coro
        return out, questions() - before - 1

    async def go():
        state = AgentState(session_id="chat-1")
        state.context = [UserMsg("alice", f"m{i}") for i in range(10)]
        await repo.save("alice", "chat-1", state)
        await repo.load("alice", "chat-1")  # the read pool's connection is open
        (loaded, version), n = await counted(repo.load_versioned("alice", "chat-1"))
        assert n == 1 and version == 1
        state.context.append(UserMsg("alice", "next"))
        report, n = await counted(repo.save("alice", "chat-1", state, expected_version=version))
        assert n == 2 and report.context.kind == "append" and report.version == 2
        state.context.append(UserMsg("alice", "after"))
        report, n = await counted(repo.save("alice", "chat-1", state))
        assert n == 2 and report.version == 3
        await repo2.load("alice", "chat-1")  # the other worker's connections are open
        for turn in range(4):  # two workers taking turns: each loads, then saves
            worker = (repo2, repo)[turn % 2]
            (loaded, version), n = await counted(worker.load_versioned("alice", "chat-1"))
            assert n == 1 and version == 3 + turn and loaded.context == state.context
            loaded.context.append(UserMsg("alice", f"turn {turn}"))
            report, n = await counted(worker.save("alice", "chat-1", loaded))
            assert n == 2 and report.context.kind == "append" and report.version == 4 + turn
            state = loaded
        assert [m["content"][0]["text"] for m in table(raw)[0]][-4:] == [f"turn {i}" for i in range(4)]
        await other.aclose()

    run(go())


@pytest.mark.parametrize("lost", ["state row", "context rows"])
def test_half_a_state_lost_behind_the_stores_back_is_damage_not_a_state(astore, raw, lost):
    """A save writes the state row and the context list in one transaction; with one of them
    deleted by hand, load gave the other with defaults for the rest (summary '', version 0, or
    an empty context) as if whole (audit of 2026-12-07). Now CorruptStateError naming the key."""
    from mysql_state import CorruptStateError

    repo = AgentStateRepository(astore)

    async def go():
        state = await repo.load("alice", "half")
        state.context.append(UserMsg("alice", "hi"))
        state.summary = "greeted"
        await repo.save("alice", "half", state)
        empty = await repo.load("alice", "empty")  # a state saved with no message reads back
        await repo.save("alice", "empty", empty)
        assert (await repo.load("alice", "empty")).context == []
        if lost == "state row":
            raw.execute("DELETE FROM {t} WHERE session_id = 'alice:half' AND state_key = %s", (STATE_KEY,))
        else:
            raw.execute("DELETE FROM {t} WHERE session_id = 'alice:half' AND state_key IN (%s, %s)",
                        (CONTEXT_KEY, CONTEXT_KEY + ":_hash"))
        with pytest.raises(CorruptStateError, match="half there") as caught:
            await repo.load_versioned("alice", "half")
        assert caught.value.key == (STATE_KEY if lost == "state row" else CONTEXT_KEY)

    asyncio.run(go())


@pytest.mark.parametrize("damage", ["state null", "state a list", "context item not a message", "message role gone"])
def test_a_state_of_another_shape_is_damage_named_never_a_default_or_a_validation_error(astore, raw, damage):
    """A state row holding null, [] or 0 read as a default state (whose next save wrote the
    defaults over the rest), and a context item of another shape raised pydantic's
    ValidationError naming neither the session nor the key (found by an adapter audit)."""
    from mysql_state import CorruptStateError

    repo = AgentStateRepository(astore)

    async def go():
        state = await repo.load("alice", "shape")
        state.context += [UserMsg("alice", "hi"), UserMsg("alice", "again")]
        state.summary = "greeted"
        await repo.save("alice", "shape", state)
        if damage == "state null":
            raw.execute("UPDATE {t} SET state_data = 'null' WHERE session_id = 'alice:shape' AND state_key = %s",
                        (STATE_KEY,))
        elif damage == "state a list":
            raw.execute("UPDATE {t} SET state_data = '[1, 2]' WHERE session_id = 'alice:shape' AND state_key = %s",
                        (STATE_KEY,))
        elif damage == "context item not a message":
            raw.execute("UPDATE {t} SET state_data = '42' WHERE session_id = 'alice:shape' AND state_key = %s"
                        " AND item_index = 1", (CONTEXT_KEY,))
        else:
            raw.execute("UPDATE {t} SET state_data = JSON_REMOVE(state_data, '$.role') WHERE session_id = 'alice:shape'"
                        " AND state_key = %s AND item_index = 1", (CONTEXT_KEY,))
        with pytest.raises(CorruptStateError, match="session 'alice:shape'") as caught:
            await repo.load_versioned("alice", "shape")
        assert caught.value.key == (STATE_KEY if damage.startswith("state") else CONTEXT_KEY)

    asyncio.run(go())


def test_app_storage_never_hands_out_the_stub_state_of_a_session_whose_state_row_is_gone(astore, raw, app_db):
    """get_session asked exists() (the state row only) and gave the stub state when that row was
    lost while the context was there: the next update_session_state wrote the context over with
    the stub's (found by an adapter audit). Now CorruptStateError, and the context stays."""
    from agentscope.app.storage import SessionConfig

    from mysql_state import CorruptStateError
    from mysql_state.agentscope import MysqlStateAppStorage

    app_url, _ = app_db

    async def go():
        async with MysqlStateAppStorage(app_url, astore) as storage:
            rec = await storage.upsert_session("alice", "agent-half", SessionConfig(workspace_id="w1"))
            state = (await storage.get_session("alice", "agent-half", rec.id)).state
            state.context += [UserMsg("alice", "one"), UserMsg("alice", "two")]
            await storage.update_session_state("alice", "agent-half", rec.id, state)
            sid = f"alice:{rec.id}"
            raw.execute("DELETE FROM {t} WHERE session_id = %s AND state_key = %s", (sid, STATE_KEY))
            before = raw.query("SELECT item_index, state_data FROM {t} WHERE session_id = %s AND state_key = %s"
                               " ORDER BY item_index", (sid, CONTEXT_KEY))
            assert len(before) == 2
        async with MysqlStateAppStorage(app_url, astore) as fresh:  # another process
            for call in (lambda: fresh.get_session("alice", "agent-half", rec.id),
                         lambda: fresh.list_sessions("alice", "agent-half")):
                with pytest.raises(CorruptStateError, match="half there"):
                    await call()
        assert raw.query("SELECT item_index, state_data FROM {t} WHERE session_id = %s AND state_key = %s"
                         " ORDER BY item_index", (sid, CONTEXT_KEY)) == before

    asyncio.run(go())
