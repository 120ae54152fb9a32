"""AgentScope 1.0.x cases, run by tests/test_agentscope1.py inside .venv-agentscope1 (1.x and
2.x cannot share an environment). Not named test_*: the default run never imports it."""

from __future__ import annotations

import asyncio
import json
import os
import tempfile

import orjson
import pytest

import agentscope

assert agentscope.__version__.startswith("1.0"), agentscope.__version__

from agentscope.agent import ReActAgent  # noqa: E402
from agentscope.formatter import OpenAIChatFormatter  # noqa: E402
from agentscope.memory import InMemoryMemory  # noqa: E402
from agentscope.message import Msg, TextBlock, ToolUseBlock  # noqa: E402
from agentscope.module import StateModule  # noqa: E402
from agentscope.model import ChatModelBase, ChatResponse  # noqa: E402
from agentscope.session import JSONSession  # noqa: E402
from agentscope.token import CharTokenCounter  # noqa: E402
from agentscope.tool import Toolkit, ToolResponse  # noqa: E402

from mysql_state.agentscope1 import SESSION_KEY, MysqlMemory, MysqlSession  # noqa: E402
from mysql_state.aio import AsyncMysqlAgentStateStore  # noqa: E402


class Holder(StateModule):
    """A module with one registered state attribute, ``extra``."""

    def __init__(self, extra):
        super().__init__()
        self.extra = extra
        self.register_state("extra")


def run(coro):
    return asyncio.run(coro)


class ScriptedModel(ChatModelBase):
    def __init__(self, script):
        super().__init__(model_name="scripted", stream=False)
        self.script = list(script)

    async def __call__(self, messages, tools=None, tool_choice=None, structured_model=None, **kwargs):
        if structured_model is not None:
            return ChatResponse(content=[], metadata={k: f"<{k}>" for k in structured_model.model_fields})
        return ChatResponse(content=self.script.pop(0))


def add(a: int, b: int) -> ToolResponse:
    """Add two integers.

    Args:
        a (int): first
        b (int): second
    """
    return ToolResponse(content=[TextBlock(type="text", text=str(a + b))])


SCRIPT = [
    [TextBlock(type="text", text="let me add"), ToolUseBlock(type="tool_use", id="call1", name="add", input={"a": 2, "b": 3})],
    [TextBlock(type="text", text="2+3=5")],
    [TextBlock(type="text", text="bye")],
    [TextBlock(type="text", text="again")],
    [TextBlock(type="text", text="and again")],
]


def build(model, memory, compression=None):
    tk = Toolkit()
    tk.register_tool_function(add)
    kw = {"compression_config": compression} if compression else {}
    agent = ReActAgent(name="bot", sys_prompt="You are a bot.", model=model, formatter=OpenAIChatFormatter(),
                       toolkit=tk, memory=memory, **kw)
    agent.set_console_output_enabled(False)
    return agent


@pytest.fixture
def astore(url, database):
    s = AsyncMysqlAgentStateStore.from_url(url, database_name=database, create_if_not_exist=True, pool_size=2)
    yield s
    run(s.aclose())


def memory_rows(raw, sid="alice:chat-1", key="agentscope1.memory"):
    rows = raw.query("SELECT item_index, state_data, version FROM {t} WHERE session_id=%s AND state_key=%s "
                     "ORDER BY item_index", (sid, key))
    assert [r[0] for r in rows] == list(range(len(rows)))
    return [orjson.loads(r[1]) for r in rows], [r[2] for r in rows]


def test_react_agent_memory_is_written_through_incrementally(url, database, astore, raw):
    async def go():
        memory = MysqlMemory(astore, session_id="chat-1", user_id="alice")
        agent = build(ScriptedModel(SCRIPT), memory)
        r = await agent(Msg("user", "what is 2+3?", "user"))
        assert r.get_text_content() == "2+3=5"
        content, versions = memory_rows(raw)
        assert content == orjson.loads(orjson.dumps(memory.state_dict()["content"]))
        assert [c[0]["role"] for c in content] == ["user", "assistant", "system", "assistant"]
        await agent(Msg("user", "thanks", "user"))
        assert memory.last_plan.kind == "append" and memory.last_plan.rows_written == 1
        content2, versions2 = memory_rows(raw)
        assert len(content2) == 6 and versions2[:4] == versions, "old rows were rewritten"

        # A new process: a new store, a new memory, a new agent; the conversation continues.
        async with AsyncMysqlAgentStateStore.from_url(url, database_name=database) as store2:
            memory2 = MysqlMemory(store2, session_id="chat-1", user_id="alice")
            assert memory2.state_dict()["content"] == []  # nothing read before first use
            assert await memory2.size() == 6
            assert memory2.state_dict() == memory.state_dict()
            agent2 = build(ScriptedModel(SCRIPT[3:]), memory2)
            await agent2(Msg("user", "once more", "user"))
            assert await memory2.size() == 8 and memory_rows(raw)[1][:6] == versions2

    run(go())


def test_compression_marks_rewrite_only_the_marked_rows(astore, raw):
    async def go():
        memory = MysqlMemory(astore, session_id="chat-1", user_id="alice")
        cfg = ReActAgent.CompressionConfig(enable=True, agent_token_counter=CharTokenCounter(),
                                           trigger_threshold=10, keep_recent=1)
        agent = build(ScriptedModel(SCRIPT), memory, cfg)
        await agent(Msg("user", "what is 2+3?", "user"))
        await agent(Msg("user", "thanks " * 20, "user"))
        content, _ = memory_rows(raw)
        marked = [i for i, (_, marks) in enumerate(content) if "compressed" in marks]
        assert marked, "the compression marked nothing"
        assert content == orjson.loads(orjson.dumps(memory.state_dict()["content"]))
        summary = raw.query("SELECT state_data FROM {t} WHERE session_id=%s AND state_key=%s",
                            ("alice:chat-1", "agentscope1.memory.summary"))
        assert json.loads(summary[0][0]) == memory._compressed_summary != ""
        # marking a message in the middle rewrites exactly that row
        _, before = memory_rows(raw)
        target = [m for m, _ in memory.content][2]
        assert await memory.update_messages_mark("pinned", msg_ids=[target.id]) == 1
        assert memory.last_plan.rows_written == 1
        _, after = memory_rows(raw)
        assert [i for i, (a, b) in enumerate(zip(before, after)) if a != b] == [2]

    run(go())


def test_same_results_as_inmemorymemory(astore, raw):
    """The same operations on InMemoryMemory and MysqlMemory: same returns, same state, and
    the table always holds that state."""

    async def go():
        ref, mem = InMemoryMemory(), MysqlMemory(astore, session_id="s", user_id="u")
        msgs = [Msg("user" if i % 2 == 0 else "bot", f"m{i}", "user" if i % 2 == 0 else "assistant") for i in range(8)]
        ops = [
            ("add", (msgs[:3],), {}),
            ("add", (msgs[3],), {"marks": "hint"}),
            ("add", (msgs[2:6],), {"marks": ["x", "y"]}),  # duplicates skipped
            ("add", (msgs[6],), {"allow_duplicates": True}),
            ("add", (msgs[6],), {"allow_duplicates": True}),
            ("add", (None,), {}),
            ("update_messages_mark", ("z",), {"old_mark": "x"}),
            ("update_messages_mark", ("c",), {"msg_ids": [msgs[0].id]}),
            ("update_messages_mark", (None,), {"old_mark": "y"}),
            ("update_messages_mark", (None,), {}),
            ("delete_by_mark", ("hint",), {}),
            ("delete_by_mark", (["z", "c"],), {}),
            ("delete", ([msgs[1].id, "nope"],), {}),
            ("update_compressed_summary", ("sum",), {}),
            ("size", (), {}),
            ("add", (msgs[7],), {}),
            ("clear", (), {}),
            ("add", (msgs[:2],), {}),
        ]
        for name, args, kw in ops:
            a = await getattr(ref, name)(*args, **kw)
            b = await getattr(mem, name)(*args, **kw)
            assert a == b, name
            assert mem.state_dict() == ref.state_dict(), name
            content, _ = memory_rows(raw, "u:s")
            assert content == orjson.loads(orjson.dumps(ref.state_dict()["content"])), name
            got = [(m.id, m.get_text_content()) for m in await mem.get_memory(prepend_summary=False)]
            assert got == [(m.id, m.get_text_content()) for m in await ref.get_memory(prepend_summary=False)], name
            texts = [m.get_text_content() for m in await mem.get_memory(exclude_mark="z")]
            assert texts == [m.get_text_content() for m in await ref.get_memory(exclude_mark="z")], name
        for bad in (lambda m: m.add(msgs[0], marks=3), lambda m: m.delete_by_mark([1])):
            with pytest.raises(TypeError):
                await bad(ref)
            with pytest.raises(TypeError):
                await bad(mem)
        again = MysqlMemory(astore, session_id="s", user_id="u")
        assert await again.size() == 2 and again.state_dict() == ref.state_dict()

    run(go())


def test_two_memories_on_one_session_lose_nothing_of_each_other(url, database, astore, raw):
    """A review of 2026-12-06: each object rewrote the whole stored list from its own copy, so
    the second writer deleted the first one's message. Now each change is applied to what is
    stored (read first) and written as a compare-and-set: two objects on two stores, taking
    turns without reload(), both see and keep every message, as AgentScope's SQL memory."""

    async def go():
        other_store = AsyncMysqlAgentStateStore.from_url(url, database_name=database, pool_size=2)
        try:
            w1, w2 = MysqlMemory(astore, session_id="w", user_id="u"), MysqlMemory(other_store, session_id="w", user_id="u")
            await w1.add(Msg("u", "m1", "user"))
            assert await w2.size() == 1
            await w1.add(Msg("u", "from-w1", "user"))
            await w2.add(Msg("u", "from-w2", "user"))  # w2 never reloaded: it reads what is stored first
            await w1.update_messages_mark("seen", msg_ids=[(await w1.get_memory(prepend_summary=False))[0].id])
            await w2.delete_by_mark("nothing-has-it")
            for m in (w1, w2, MysqlMemory(astore, session_id="w", user_id="u")):
                assert [x.get_text_content() for x in await m.get_memory(prepend_summary=False)] == ["m1", "from-w1", "from-w2"]
            content, _ = memory_rows(raw, "u:w")
            assert [c[0]["content"] for c in content] == ["m1", "from-w1", "from-w2"] and content[0][1] == ["seen"]
        finally:
            await other_store.aclose()

    run(go())


def _add_many(url: str, database: str, who: str, n: int) -> None:
    """A process of its own adding ``n`` messages, one call each, to the shared memory."""
    async def go():
        s = AsyncMysqlAgentStateStore.from_url(url, database_name=database, pool_size=2)
        try:
            memory = MysqlMemory(s, session_id="procs", user_id="u")
            for i in range(n):
                await memory.add(Msg(who, f"{who}-{i}", "user"))
        finally:
            await s.aclose()

    run(go())


def test_two_processes_adding_to_one_memory_keep_every_message(url, database, astore, raw):
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    writers = ("a", "b", "c", "d")  # four at once: colliding writers wait apart (it used to give up)
    procs = [ctx.Process(target=_add_many, args=(url, database, who, 15)) for who in writers]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    content, _ = memory_rows(raw, "u:procs")
    texts = [c[0]["content"] for c in content]
    assert sorted(texts) == sorted(f"{who}-{i}" for who in writers for i in range(15))
    for who in writers:  # each writer's in order
        assert [t for t in texts if t.startswith(who + "-")] == [f"{who}-{i}" for i in range(15)]


def test_a_failed_add_leaves_nothing_behind(astore, raw):
    """A message that cannot be stored: the add raises, the memory is as it was (locally and in
    the table), and the next add works (it used to fail on the left-over message forever)."""

    async def go():
        m = MysqlMemory(astore, session_id="bad", user_id="u")
        await m.add(Msg("u", "ok", "user"))
        with pytest.raises(TypeError):
            await m.add(Msg("u", "bad", "user", metadata={"o": object()}))
        assert await m.size() == 1
        await m.add(Msg("u", "next", "user"))
        assert [x.get_text_content() for x in await m.get_memory(prepend_summary=False)] == ["ok", "next"]
        content, _ = memory_rows(raw, "u:bad")
        assert [c[0]["content"] for c in content] == ["ok", "next"]

    run(go())


def test_a_session_save_is_all_or_nothing_and_names_with_dots_keep_apart(astore, raw):
    """A review of 2026-12-06: a save whose module state cannot be stored (NaN) wrote the new
    memory and kept the old state (a mixed load). Now one transaction: nothing of it. And a
    module named "a.b" and the memory "b" inside module "a" got one list key."""
    from agentscope.module import StateModule

    class Counter(StateModule):
        def __init__(self, n):
            super().__init__()
            self.cnt = n
            self.register_state("cnt")

    class Holder(StateModule):
        def __init__(self, memory):
            super().__init__()
            self.b = memory

    async def go():
        session = MysqlSession(astore)
        mem, counter = InMemoryMemory(), Counter(1)
        await mem.add([Msg("u", "x", "user"), Msg("u", "y", "user")])
        await session.save_session_state("torn", user_id="u", memory=mem, counter=counter)
        before = raw.rows("u:torn")
        await mem.add(Msg("u", "z", "user"))
        counter.cnt = float("nan")
        with pytest.raises(ValueError, match="nan"):
            await session.save_session_state("torn", user_id="u", memory=mem, counter=counter)
        assert raw.rows("u:torn") == before  # nothing of the failed save
        mem2, counter2 = InMemoryMemory(), Counter(0)
        await session.load_session_state("torn", user_id="u", memory=mem2, counter=counter2)
        assert [m.get_text_content() for m in await mem2.get_memory()] == ["x", "y"] and counter2.cnt == 1

        top, inner = InMemoryMemory(), InMemoryMemory()
        await top.add(Msg("u", "top-level a.b", "user"))
        await inner.add(Msg("u", "inside holder", "user"))
        await session.save_session_state("dots", user_id="u", **{"a.b": top, "a": Holder(inner)})
        top2, inner2 = InMemoryMemory(), InMemoryMemory()
        await session.load_session_state("dots", user_id="u", **{"a.b": top2, "a": Holder(inner2)})
        assert [m.get_text_content() for m in await top2.get_memory()] == ["top-level a.b"]
        assert [m.get_text_content() for m in await inner2.get_memory()] == ["inside holder"]

    run(go())


def test_session_behaves_like_jsonsession(astore, raw):
    async def go():
        with tempfile.TemporaryDirectory() as d:
            js, ms = JSONSession(save_dir=d), MysqlSession(astore)
            agent = build(ScriptedModel(SCRIPT), InMemoryMemory())
            await agent(Msg("user", "what is 2+3?", "user"))
            for s in (js, ms):
                await s.save_session_state("chat-1", user_id="alice", agent=agent)
            with open(os.path.join(d, "alice_chat-1.json")) as f:
                on_disk = json.load(f)
            for s in (js, ms):
                fresh = build(ScriptedModel([]), InMemoryMemory())
                await s.load_session_state("chat-1", user_id="alice", agent=fresh)
                assert fresh.state_dict() == agent.state_dict() == on_disk["agent"]
            # the memory is a list: one row per message, and the session value refers to it
            content, versions = memory_rows(raw, key=SESSION_KEY + ".agent.memory")
            assert content == on_disk["agent"]["memory"]["content"] and len(content) == 4
            await agent(Msg("user", "thanks", "user"))
            await ms.save_session_state("chat-1", user_id="alice", agent=agent)
            content2, versions2 = memory_rows(raw, key=SESSION_KEY + ".agent.memory")
            assert len(content2) == 6 and versions2[:4] == versions, "a save rewrote old messages"
            # a missing session
            for s in (js, ms):
                fresh = build(ScriptedModel([]), InMemoryMemory())
                await s.load_session_state("nope", user_id="alice", agent=fresh)  # allow_not_exist: no-op
                assert fresh.state_dict()["memory"]["content"] == []
                with pytest.raises(ValueError):
                    await s.load_session_state("nope", user_id="alice", allow_not_exist=False, agent=fresh)
            # user "" is its own namespace, as JSONSession's file name
            with pytest.raises(ValueError):
                await ms.load_session_state("chat-1", allow_not_exist=False, agent=fresh)
            # a save replaces the modules saved before (JSONSession rewrites the file)
            other = InMemoryMemory()
            await other.add(Msg("user", "solo", "user"))
            for s in (js, ms):
                await s.save_session_state("chat-1", user_id="alice", notes=other)
            for s in (js, ms):
                fresh = build(ScriptedModel([]), InMemoryMemory())
                mem = InMemoryMemory()
                await s.load_session_state("chat-1", user_id="alice", agent=fresh, notes=mem)
                assert fresh.state_dict()["memory"]["content"] == [] and await mem.size() == 1
            keys = {r[1] for r in raw.rows("alice:chat-1")}
            assert keys == {SESSION_KEY, SESSION_KEY + ".notes", SESSION_KEY + ".notes:_hash"}

    run(go())


def test_a_session_load_sees_one_save_whole_while_another_saves(url, database, astore):
    """load_session_state read the state, then each memory by a statement of its own: a save
    landing in between gave a state made of two saves (a module of one, a memory of the other)."""
    from agentscope.module import StateModule

    class Tag(StateModule):
        def __init__(self) -> None:
            super().__init__()
            self.tag = ""
            self.register_state("tag")

    async def go():
        writer = AsyncMysqlAgentStateStore.from_url(url, database_name=database, pool_size=2)
        states = {}
        for tag, n in (("A", 2), ("B", 5)):
            memory, module = InMemoryMemory(), Tag()
            module.tag = tag
            await memory.add([Msg("u", f"{tag}{i}", "user") for i in range(n)])
            states[tag] = (memory, module)
        saving, reading = MysqlSession(writer), MysqlSession(astore)
        await saving.save_session_state("torn", user_id="u", memory=states["A"][0], tag=states["A"][1])
        stop = False

        async def save_in_turn():
            i = 0
            while not stop:
                memory, module = states["AB"[i % 2]]
                i += 1
                await saving.save_session_state("torn", user_id="u", memory=memory, tag=module)
            return i

        task = asyncio.create_task(save_in_turn())
        seen = set()
        try:
            for _ in range(150):
                memory, module = InMemoryMemory(), Tag()
                await reading.load_session_state("torn", user_id="u", memory=memory, tag=module)
                tags = {m.content[0] for m, _ in memory.content}
                assert tags == {module.tag}, (module.tag, [m.content for m, _ in memory.content])
                seen.add(module.tag)
        finally:
            stop = True
            saves = await task
            await writer.aclose()
        assert saves > 10 and seen == {"A", "B"}, (saves, seen)

    run(go())


def test_session_with_mysql_memory_agent(astore, raw):
    """MysqlMemory inside a session: its state dict is saved and loaded like InMemoryMemory's."""

    async def go():
        agent = build(ScriptedModel(SCRIPT), MysqlMemory(astore, session_id="chat-1", user_id="alice"))
        await agent(Msg("user", "what is 2+3?", "user"))
        ms = MysqlSession(astore)
        await ms.save_session_state("chat-2", user_id="alice", agent=agent)
        memory = MysqlMemory(astore, session_id="chat-3", user_id="alice")
        fresh = build(ScriptedModel([]), memory)
        await ms.load_session_state("chat-2", user_id="alice", agent=fresh)
        assert fresh.state_dict() == agent.state_dict()
        await memory.flush()
        assert memory_rows(raw, "alice:chat-3")[0] == memory_rows(raw, "alice:chat-1")[0]

    run(go())


def test_the_modules_docstring_examples_run(url: str, database: str, monkeypatch) -> None:
    """mysql_state.agentscope1's examples (doctest) run here, in tests/doctest_run.py's namespace
    plus ``model`` (an offline chat model that answers "hello")."""
    from tests.doctest_run import run_examples

    extras = lambda _url: {"model": ScriptedModel([[TextBlock(type="text", text="hello")]])}  # noqa: E731
    result = run_examples("mysql_state.agentscope1", url, database, monkeypatch, extras)
    assert result.attempted > 0, "mysql_state.agentscope1 lost its examples"
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed (see above)"


def test_a_messages_invocation_id_is_kept_as_inmemorymemory_keeps_it(astore, raw):
    """Msg.to_dict() leaves out invocation_id (a ReActAgent sets it to the model response's id);
    the memory is read again at every call, so it was gone right after the write (audit of
    2026-12-07). It is kept in the row, read back by Msg.from_dict, in this process and a new one."""
    async def go():
        m = MysqlMemory(astore, session_id="inv", user_id="u")
        await m.add(Msg("assistant", "hi", "assistant", invocation_id="resp_1"))
        await m.add(Msg("u", "plain", "user"))
        assert [x.invocation_id for x in await m.get_memory(prepend_summary=False)] == ["resp_1", None]
        fresh = MysqlMemory(astore, session_id="inv", user_id="u")
        assert [x.invocation_id for x in await fresh.get_memory(prepend_summary=False)] == ["resp_1", None]

    run(go())
    content, _ = memory_rows(raw, "u:inv")
    assert content[0][0]["invocation_id"] == "resp_1" and "invocation_id" not in content[1][0]


def test_a_modules_dict_that_looks_like_a_memory_reference_loads_back_as_it_was(astore):
    """A module state holding {"__mysql_state_list__": <a memory's list key>} loaded back as
    that memory's messages (audit of 2026-12-07): such a dict is saved escaped, and loads back
    unchanged, as JSONSession gives it."""
    async def go():
        session, memory = MysqlSession(astore), InMemoryMemory()
        await memory.add(Msg("u", "x", "user"))
        key = session.key + ".memory"
        tricky = {"a": {"__mysql_state_list__": key}, "b": {"__mysql_state_escaped__": {"c": 1}}, "d": [1]}
        await session.save_session_state("look", user_id="u", memory=memory, h=Holder(tricky))
        memory2, h2 = InMemoryMemory(), Holder(None)
        await session.load_session_state("look", user_id="u", memory=memory2, h=h2)
        assert h2.extra == tricky
        assert [m.get_text_content() for m in await memory2.get_memory()] == ["x"]

    run(go())


def test_marker_like_dicts_beside_a_memorys_content_load_back_as_jsonsession_gives_them(astore):
    """A state dict shaped like a memory (``content`` + ``_compressed_summary``) had its other
    keys saved unescaped (audit of 2026-12-07): a marker-like dict there loaded back as another
    memory's messages, or unwrapped. Now they are lifted as any dict's keys are."""
    async def go():
        with tempfile.TemporaryDirectory() as d:
            js, ms = JSONSession(save_dir=d), MysqlSession(astore)
            other = InMemoryMemory()
            await other.add(Msg("u", "secret note", "user"))
            shaped = {"content": [], "_compressed_summary": "",
                      "ref": {"__mysql_state_list__": ms.key + ".notes"}, "esc": {"__mysql_state_escaped__": {"k": "v"}}}
            for s in (js, ms):
                await s.save_session_state("shaped", user_id="u", notes=other, h=Holder(shaped))
            got = {}
            for name, s in (("json", js), ("mysql", ms)):
                h, notes = Holder(None), InMemoryMemory()
                await s.load_session_state("shaped", user_id="u", notes=notes, h=h)
                got[name] = (h.extra, [m.get_text_content() for m in await notes.get_memory()])
            assert got["mysql"] == got["json"] == (shaped, ["secret note"])

    run(go())


def test_values_json_has_no_type_for_are_refused_as_jsonsession_refuses_them(astore, raw):
    """orjson writes a datetime or a UUID as a string, so they read back as strings (audit of
    2026-12-07); JSONSession's json.dumps refuses them. Now refused too, naming the module or
    the message and the type; nothing is written, the memory is as it was."""
    import datetime
    import uuid

    from agentscope.module import StateModule

    class Holder(StateModule):
        """A module whose state_dict is its own (register_state would refuse the datetime
        itself, before any session sees it)."""

        def __init__(self, extra):
            super().__init__()
            self.extra = extra

        def state_dict(self):
            return {"extra": self.extra}

        def load_state_dict(self, state, strict=True):
            self.extra = state["extra"]

    async def go():
        session = MysqlSession(astore)
        await session.save_session_state("typed", user_id="u", h=Holder({"n": 1}))
        before = raw.rows("u:typed")
        for bad in (datetime.datetime(2020, 1, 2, 3, 4, 5), datetime.date(2020, 1, 2), uuid.UUID(int=5)):
            with tempfile.TemporaryDirectory() as d, pytest.raises(TypeError):
                await JSONSession(save_dir=d).save_session_state("typed", user_id="u", h=Holder({"at": [bad]}))
            with pytest.raises(TypeError, match=rf"module 'h' of session 'typed' holds a {type(bad).__name__}, "
                                                r"which JSON has no type for .*nothing was written"):
                await session.save_session_state("typed", user_id="u", h=Holder({"at": [bad]}))
            assert raw.rows("u:typed") == before

        m = MysqlMemory(astore, session_id="typed-mem", user_id="u")
        await m.add(Msg("u", "ok", "user"))
        msg = Msg("u", "stamped", "user", metadata={"at": datetime.datetime(2020, 1, 2)})
        with pytest.raises(TypeError, match=rf"MysqlMemory.add: message {msg.id!r} holds a datetime"):
            await m.add(msg)
        assert [x.get_text_content() for x in await m.get_memory(prepend_summary=False)] == ["ok"]
        assert len(memory_rows(raw, "u:typed-mem")[0]) == 1

        source = InMemoryMemory()
        await source.add(msg)  # InMemoryMemory holds any object; a stored memory cannot
        loaded = MysqlMemory(astore, session_id="typed-load", user_id="u")
        loaded.load_state_dict(source.state_dict())
        with pytest.raises(TypeError, match="holds a datetime"):
            await loaded.flush()
        assert raw.rows("u:typed-load") == []

    run(go())


@pytest.mark.parametrize("damage", ["lists emptied", "states not a map", "state null", "the memory list gone"])
def test_a_session_state_of_another_shape_is_damage_and_loads_nothing(astore, raw, damage):
    """A session row whose lists or states were changed by hand, one holding null, or one whose
    memory list was deleted loaded an empty memory without a word, and the next save wrote the
    intact list over with it (found by an adapter audit). Now CorruptStateError, nothing loaded."""
    from mysql_state import CorruptStateError

    async def go():
        session = MysqlSession(astore)
        mem = InMemoryMemory()
        await mem.add([Msg("u", "x", "user"), Msg("u", "y", "user")])
        await session.save_session_state("shape", user_id="u", memory=mem)
        sid = "u:shape"
        if damage == "lists emptied":
            raw.execute("UPDATE {t} SET state_data = JSON_SET(state_data, '$.lists', JSON_ARRAY())"
                        " WHERE session_id = %s AND state_key = %s", (sid, SESSION_KEY))
        elif damage == "states not a map":
            raw.execute("UPDATE {t} SET state_data = JSON_SET(state_data, '$.states', JSON_ARRAY(1))"
                        " WHERE session_id = %s AND state_key = %s", (sid, SESSION_KEY))
        elif damage == "state null":
            raw.execute("UPDATE {t} SET state_data = 'null' WHERE session_id = %s AND state_key = %s",
                        (sid, SESSION_KEY))
        else:
            raw.execute("DELETE FROM {t} WHERE session_id = %s AND state_key <> %s", (sid, SESSION_KEY))
        fresh = InMemoryMemory()
        with pytest.raises(CorruptStateError, match="session 'u:shape'"):
            await MysqlSession(astore).load_session_state("shape", user_id="u", memory=fresh)
        assert await fresh.size() == 0  # nothing loaded into the module

    run(go())
