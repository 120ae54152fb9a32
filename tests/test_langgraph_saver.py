"""MysqlSaver with real LangGraph graphs on the real server; plain SQL on the table is the truth.

LangGraph's ``InMemorySaver`` runs the same scripted graphs as the oracle of what every
checkpoint must read back as (time travel, forks, edits, trims, delta channels)."""

from __future__ import annotations

import asyncio
import datetime
import json
import operator
import os
import subprocess
import sys
import threading
import uuid
from typing import Annotated

import pytest

pytest.importorskip("langgraph", reason="needs the langgraph extra (make test installs it)")

from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage  # noqa: E402
from langgraph.channels.delta import DeltaChannel  # noqa: E402
from langgraph.checkpoint.base import BaseCheckpointSaver  # noqa: E402
from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402
from langgraph.checkpoint.serde.types import ERROR, INTERRUPT  # noqa: E402
from langgraph.graph import END, START, MessagesState, StateGraph  # noqa: E402
from typing_extensions import TypedDict  # noqa: E402

from mysql_state import CorruptStateError, Keyring, MysqlAgentStateStore, StaleStateError, keys  # noqa: E402
from mysql_state.aio import AsyncMysqlAgentStateStore  # noqa: E402
from mysql_state.langgraph import MysqlSaver  # noqa: E402

from .conftest import Raw  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEMO = os.path.join(ROOT, "examples", "langgraph_demo.py")
sys.path.insert(0, os.path.join(ROOT, "examples"))

import langgraph_demo  # noqa: E402


def chat_graph(checkpointer, *, keep: int | None = None, pad: int = 200):
    """One agent node: the reply to each user message (``pad`` characters); with ``keep``,
    only the last ``keep`` messages survive each turn (trimmed with RemoveMessage)."""

    def agent(state: MessagesState) -> dict:
        msgs = state["messages"]
        reply = AIMessage(content=f"reply {len(msgs)} " + "x" * pad, id=f"ai-{len(msgs)}-{msgs[-1].id}")
        out = [reply]
        if keep is not None and len(msgs) + 1 > keep:
            out = [RemoveMessage(id=m.id) for m in msgs[: len(msgs) + 1 - keep]] + out
        return {"messages": out}

    return one_node_graph(checkpointer, agent)


def one_node_graph(checkpointer, agent):
    """``START -> agent -> END`` on ``MessagesState``."""
    b = StateGraph(MessagesState)
    b.add_node("agent", agent)
    b.add_edge(START, "agent")
    b.add_edge("agent", END)
    return b.compile(checkpointer=checkpointer)


def turn(graph, thread: str, i: int, text: str = "hello") -> dict:
    return graph.invoke({"messages": [HumanMessage(content=f"{text} {i}", id=f"h-{thread}-{i}")]},
                        {"configurable": {"thread_id": thread}})


def history(graph, thread: str) -> list[tuple]:
    """Each checkpoint's (values, next, metadata step, writes' channels) oldest first."""
    out = []
    for s in reversed(list(graph.get_state_history({"configurable": {"thread_id": thread}}))):
        values = {k: ([(m.type, m.id, m.content) for m in v] if k == "messages" else v) for k, v in s.values.items()}
        out.append((values, s.next, s.metadata.get("step"), s.metadata.get("source")))
    return out


@pytest.fixture
def saver(store):
    s = MysqlSaver(store)
    yield s
    s.close()


def log_items(raw: Raw, thread: str) -> int:
    """How many items the thread's message logs hold, by SQL."""
    return raw.query("SELECT COUNT(*) FROM {t} WHERE session_id = %s AND state_key LIKE 'log/%%'"
                     " AND state_key NOT LIKE '%%:_hash'", (keys.pack(None, thread),))[0][0]


def session_bytes(raw: Raw, user: str | None, thread: str) -> int:
    return int(raw.query("SELECT COALESCE(SUM(LENGTH(state_data)), 0) FROM {t} WHERE session_id = %s",
                         (keys.pack(user, thread),))[0][0])


# ---- processes, time travel, forks -----------------------------------------------------------


def test_interrupted_in_one_process_resumed_in_another(url, database, raw):
    thread = f"t-{uuid.uuid4().hex[:6]}"
    asked = langgraph_demo.run_phase(url, database, thread, "ask")
    assert asked["interrupt"] == [{"tool": "transfer", "args": {"to": "Bob", "amount": 20}, "question": "approve?"}]
    assert asked["next"] == ["tools"]
    resumed = langgraph_demo.run_phase(url, database, thread, "resume", "yes")
    assert resumed["pid"] != asked["pid"] and resumed["interrupt"] == [] and resumed["next"] == []
    assert resumed["messages"][-2:] == ["tool: sent 20 EUR to Bob", "ai: Done: sent 20 EUR to Bob"]
    sid = keys.pack(None, thread)
    logs = raw.query("SELECT state_key, COUNT(*) FROM {t} WHERE session_id = %s AND state_key LIKE 'log/%%'"
                     " AND state_key NOT LIKE '%%:_hash' GROUP BY state_key", (sid,))
    # the resuming process wrote only the two new messages: one log, four items
    assert [n for _, n in logs] == [4], logs


def test_time_travel_and_forks_read_back_as_langgraph_own_saver(saver, raw):
    oracle = InMemorySaver()
    for checkpointer, thread in ((saver, "tt"), (oracle, "tt")):
        graph = chat_graph(checkpointer)
        for i in range(4):
            turn(graph, thread, i)
        cfg = {"configurable": {"thread_id": thread}}
        old = [s for s in graph.get_state_history(cfg) if s.metadata["step"] == 4][0]
        # fork 1: edit a message of an old checkpoint (same id: add_messages replaces it)
        edited = graph.update_state(old.config, {"messages": [HumanMessage(content="edited", id=f"h-{thread}-1")]})
        graph.invoke({"messages": [HumanMessage(content="after edit", id="h-e")]}, edited)
        # fork 2: remove a message of an older checkpoint, then continue there
        older = [s for s in graph.get_state_history(cfg) if s.metadata["step"] == 1][0]
        removed = graph.update_state(older.config, {"messages": [RemoveMessage(id=f"h-{thread}-0")]})
        graph.invoke({"messages": [HumanMessage(content="after removal", id="h-r")]}, removed)
    mine, theirs = history(chat_graph(saver), "tt"), history(chat_graph(oracle), "tt")
    assert len(mine) == len(theirs) > 12
    assert mine == theirs
    latest = chat_graph(saver).get_state({"configurable": {"thread_id": "tt"}}).values["messages"]
    assert [m.content for m in latest][-2:] == ["after removal", latest[-1].content]
    # only what changed was written: 4 turns (8 items), the edited message (1), two more turns
    # on the forks (4); the removal wrote no item, every fork refers to the items it shares
    items = raw.query("SELECT COUNT(*) FROM {t} WHERE session_id = %s AND state_key LIKE 'log/%%'"
                      " AND state_key NOT LIKE '%%:_hash'", (keys.pack(None, "tt"),))[0][0]
    assert items == 13


def test_trimmed_conversations_and_delta_channels_match_the_oracle(saver):
    oracle = InMemorySaver()

    class DeltaState(TypedDict):
        items: Annotated[list, DeltaChannel(operator.add, snapshot_frequency=3)]
        log: Annotated[list, operator.add]

    def step(state: DeltaState) -> dict:
        n = len(state.get("items", []))
        return {"items": [f"item-{n}"], "log": [{"n": n}]}

    def delta_graph(cp):
        b = StateGraph(DeltaState)
        b.add_node("step", step)
        b.add_edge(START, "step")
        b.add_edge("step", END)
        return b.compile(checkpointer=cp)

    for cp in (saver, oracle):
        g = chat_graph(cp, keep=5)
        for i in range(9):
            turn(g, "trim", i)
        d = delta_graph(cp)
        for i in range(11):
            d.invoke({"items": [f"in-{i}"]}, {"configurable": {"thread_id": "delta"}})
    assert history(chat_graph(saver, keep=5), "trim") == history(chat_graph(oracle, keep=5), "trim")
    mine = [s.values for s in delta_graph(saver).get_state_history({"configurable": {"thread_id": "delta"}})]
    theirs = [s.values for s in delta_graph(oracle).get_state_history({"configurable": {"thread_id": "delta"}})]
    assert mine == theirs and len(mine[0]["items"]) == 22
    # the override answers as LangGraph's reference walk (get_tuple per ancestor) does
    for tup in list(saver.list({"configurable": {"thread_id": "delta", "checkpoint_ns": ""}}))[:6]:
        ours = saver.get_delta_channel_history(config=tup.config, channels=["items", "log", "nope"])
        ref = BaseCheckpointSaver.get_delta_channel_history(saver, config=tup.config, channels=["items", "log", "nope"])
        assert ours == ref


def test_a_checkpoint_that_leaves_a_channel_out_reads_its_value_by_version_as_the_oracle(saver, store, other):
    """LangGraph writes a DeltaChannel's snapshot once; the checkpoints after it that do not
    write the channel keep the snapshot's version and leave the value out. InMemorySaver and
    PostgresSaver load values by version, so those checkpoints read back with the snapshot;
    MysqlSaver gave them without it (audit of 2026-12-07): every load walked the ancestors,
    and delete_for_runs of the run that wrote the snapshot lost the channel. Now each such
    checkpoint refers to what its parent holds for that version: from this process's memory,
    from the parent's row in a process that never saw it, and again from the row when
    another process's prune rebuilt the log meanwhile."""
    from langgraph.checkpoint.serde.types import _DeltaSnapshot

    class S(TypedDict):
        items: Annotated[list, DeltaChannel(operator.add, snapshot_frequency=1)]
        plain: Annotated[list, operator.add]
        n: int

    def build(cp):
        b = StateGraph(S)
        b.add_node("add", lambda s: {"items": [f"x{s.get('n', 0)}"], "plain": ["p"], "n": 1})
        b.add_node("other", lambda s: {"n": s["n"] + 1})
        b.add_edge(START, "add")
        b.add_edge("add", "other")
        b.add_edge("other", END)
        return b.compile(checkpointer=cp)

    oracle = InMemorySaver()
    runs = ["11111111-1111-1111-1111-111111111111", "22222222-2222-2222-2222-222222222222"]
    for cp in (saver, oracle):
        g = build(cp)
        for run in runs:
            g.invoke({}, {"configurable": {"thread_id": "t"}, "run_id": run})
    cfg = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    mine = [t.checkpoint["channel_values"] for t in saver.list(cfg)]
    theirs = [t.checkpoint["channel_values"] for t in oracle.list(cfg)]
    assert mine == theirs and isinstance(mine[0]["items"], _DeltaSnapshot)
    cold = MysqlSaver(other)  # another worker: its puts carry over from the parent's row
    build(cold).invoke({}, {"configurable": {"thread_id": "t"}, "run_id": runs[1]})
    build(oracle).invoke({}, {"configurable": {"thread_id": "t"}, "run_id": runs[1]})
    assert [t.checkpoint["channel_values"] for t in saver.list(cfg)] == [
        t.checkpoint["channel_values"] for t in oracle.list(cfg)]
    # the run that wrote the first snapshots deleted: the channel still reads as the oracle's
    before = build(saver).get_state({"configurable": {"thread_id": "t"}}).values
    assert before == build(oracle).get_state({"configurable": {"thread_id": "t"}}).values and len(before["items"]) == 3
    saver.delete_for_runs([runs[0]])
    assert build(saver).get_state({"configurable": {"thread_id": "t"}}).values == before

    # raw: a snapshot, a new snapshot, then checkpoints that leave the channel out; another
    # process prunes (the log rebuilt under a new name) between two puts of this one
    v1, v2 = "00000000000000000000000000000001.1", "00000000000000000000000000000002.1"

    def put(cp, cid, parent, versions, values, new):
        conf = {"thread_id": "raw", "checkpoint_ns": "", **({"checkpoint_id": parent} if parent else {})}
        cp.put({"configurable": conf}, {"v": 4, "id": cid, "ts": "2026-01-01T00:00:00+00:00", "versions_seen": {},
                                        "channel_versions": versions, "channel_values": values}, {}, new)

    for cp in (saver, oracle):
        put(cp, "c1", None, {"items": v1}, {"items": _DeltaSnapshot([1, 2, 3])}, {"items": v1})
        put(cp, "c2", "c1", {"items": v2}, {"items": _DeltaSnapshot([9])}, {"items": v2})
        put(cp, "c3", "c2", {"items": v2}, {}, {})
    MysqlSaver(other).prune(["raw"], strategy="keep_latest")
    put(saver, "c4", "c3", {"items": v2}, {}, {})
    got = saver.get_tuple({"configurable": {"thread_id": "raw", "checkpoint_ns": ""}})
    assert got.checkpoint["id"] == "c4" and got.checkpoint["channel_values"] == {"items": _DeltaSnapshot([9])}


def test_delta_history_takes_a_bounded_number_of_statements(saver, store):
    class S(TypedDict):
        items: Annotated[list, DeltaChannel(operator.add, snapshot_frequency=1000)]

    b = StateGraph(S)
    b.add_node("step", lambda s: {"items": ["x"]})
    b.add_edge(START, "step")
    b.add_edge("step", END)
    g = b.compile(checkpointer=saver)
    reads, ancestors = [], []
    for depth in (10, 40):
        for i in range(depth - (10 if depth == 40 else 0)):
            g.invoke({"items": [i]}, {"configurable": {"thread_id": "deep"}})
        before = store.metrics()["reads"]
        got = saver.get_delta_channel_history(config={"configurable": {"thread_id": "deep", "checkpoint_ns": ""}},
                                              channels=["items"])
        reads.append(store.metrics()["reads"] - before)
        ancestors.append(len(list(saver.list({"configurable": {"thread_id": "deep"}}))) - 1)
        assert len(got["items"]["writes"]) > 2 * depth - 2
    # the index, the ancestors' rows a page of 64 per statement, the writes: not one per ancestor
    pages = [-(-a // 64) for a in ancestors]
    assert reads == [2 + pages[0], 2 + pages[1]] and reads[1] < ancestors[1] / 10, (reads, ancestors)


def test_prune_keep_latest_keeps_what_delta_channels_need(saver, raw):
    class S(TypedDict):
        items: Annotated[list, DeltaChannel(operator.add, snapshot_frequency=4)]

    b = StateGraph(S)
    b.add_node("step", lambda s: {"items": [len(s.get("items", []))]})
    b.add_edge(START, "step")
    b.add_edge("step", END)
    g = b.compile(checkpointer=saver)
    cfg = {"configurable": {"thread_id": "pd"}}
    for i in range(7):
        g.invoke({"items": [f"in{i}"]}, cfg)
    before = g.get_state(cfg).values
    rows_before = raw.query("SELECT COUNT(*) FROM {t} WHERE session_id = %s", (keys.pack(None, "pd"),))[0][0]
    saver.prune(["pd"], strategy="keep_latest")
    assert g.get_state(cfg).values == before and len(before["items"]) == 14
    kept = list(saver.list(cfg))
    assert 1 < len(kept) < 15  # the latest, and its ancestors back to the snapshot
    assert raw.query("SELECT COUNT(*) FROM {t} WHERE session_id = %s", (keys.pack(None, "pd"),))[0][0] < rows_before
    g.invoke({"items": ["more"]}, cfg)
    assert len(g.get_state(cfg).values["items"]) == 16


def test_prune_keep_latest_of_a_thread_whose_messages_were_all_removed(saver, raw):
    """The newest checkpoint holds the message list empty (RemoveMessage of every message):
    prune leaves the thread with an empty log (it raised ValueError, pruning nothing), the state
    reads back empty, and the graph goes on."""
    from langgraph.graph.message import REMOVE_ALL_MESSAGES

    g = chat_graph(saver)
    cfg = {"configurable": {"thread_id": "cleared"}}
    for i in range(3):
        g.invoke({"messages": [HumanMessage(content=f"hi {i}", id=f"h{i}")]}, cfg)
    g.update_state(cfg, {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES)]})
    assert g.get_state(cfg).values["messages"] == []
    sid = keys.pack(None, "cleared")
    saver.prune(["cleared"], strategy="keep_latest")
    assert g.get_state(cfg).values["messages"] == [] and len(list(saver.list(cfg))) == 1
    # no message row is left: each log of the thread is empty (its hash row only)
    logs = raw.query("SELECT state_key, COUNT(*) FROM {t} WHERE session_id = %s AND state_key LIKE 'log/%%'"
                     " GROUP BY state_key", (sid,))
    assert logs and all(k.endswith(":_hash") and n == 1 for k, n in logs)
    g.invoke({"messages": [HumanMessage(content="again", id="h9")]}, cfg)
    assert [m.content for m in g.get_state(cfg).values["messages"]][0] == "again"


def test_prune_compacts_logs_and_a_saver_that_cached_them_writes_safely(store, raw):
    a, b = MysqlSaver(store), MysqlSaver(store)  # two caches: as two processes
    ga, gb = chat_graph(a, keep=4), chat_graph(b, keep=4)
    for i in range(8):
        turn(ga, "pc", i)
    cfg = {"configurable": {"thread_id": "pc", "checkpoint_ns": ""}}
    seen = a.get_tuple(cfg)  # a now knows the log's items by identity
    sid = keys.pack(None, "pc")
    items = lambda: raw.query("SELECT COUNT(*) FROM {t} WHERE session_id = %s AND state_key LIKE 'log/%%'"  # noqa: E731
                              " AND state_key NOT LIKE '%%:_hash'", (sid,))[0][0]
    assert items() == 16
    b.prune(["pc"])
    assert items() == 4 and len(list(a.list(cfg))) == 1
    assert len(gb.get_state(cfg).values["messages"]) == 4
    # a's cache points into the log prune replaced: puts that reuse those objects, with a new
    # item and with none (a trim), must notice and write the items again, never refer to it
    msgs = seen.checkpoint["channel_values"]["messages"]
    for new in ([*msgs, AIMessage(content="after prune", id="ap")], msgs[1:]):
        version = a.get_next_version(seen.checkpoint["channel_versions"]["messages"], None)
        checkpoint = {**seen.checkpoint, "id": str(uuid.uuid4()), "channel_values": {"messages": new},
                      "channel_versions": {**seen.checkpoint["channel_versions"], "messages": version}}
        stored = a.put({"configurable": {**cfg["configurable"], "checkpoint_id": seen.config["configurable"][
            "checkpoint_id"]}}, checkpoint, {"source": "update", "step": 99}, {"messages": version})
        got = b.get_tuple(stored).checkpoint["channel_values"]["messages"]
        assert [(m.id, m.content) for m in got] == [(m.id, m.content) for m in new]
    a.close(), b.close()


def test_a_step_that_keeps_the_list_after_another_process_pruned_refers_to_the_new_log(store):
    """A put whose list channel did not change (a step that updates another channel) reused the
    reference this process stored before without checking the log: after another process's
    prune rebuilt the log under a new name, the checkpoint pointed at the deleted log and the
    thread could no longer be read (CorruptStateError), by any process."""
    from langgraph.checkpoint.base import empty_checkpoint
    from langgraph.checkpoint.base.id import uuid6

    a, b = MysqlSaver(store), MysqlSaver(store)  # two caches: as two processes
    cfg = {"configurable": {"thread_id": "reuse", "checkpoint_ns": ""}}

    def put(parent: dict, msgs: list, version: str, step: int, changed: dict) -> dict:
        checkpoint = empty_checkpoint()
        checkpoint["id"] = str(uuid6())
        checkpoint["channel_values"] = {"messages": msgs, "counter": step}
        checkpoint["channel_versions"] = {"messages": version, "counter": f"{step:032}.0"}
        return a.put(parent, checkpoint, {"source": "loop", "step": step}, changed)

    m = [HumanMessage(content=f"m{i}", id=f"m{i}") for i in range(4)]
    v1 = a.get_next_version(None, None)
    c1 = put(cfg, m, v1, 1, {"messages": v1, "counter": f"{1:032}.0"})
    v2 = a.get_next_version(v1, None)
    c2 = put(c1, m[2:], v2, 2, {"messages": v2, "counter": f"{2:032}.0"})  # a trim: the log keeps 4
    b.prune(["reuse"], strategy="keep_latest")  # the log rebuilt compact, under another name
    c3 = put(c2, m[2:], v2, 3, {"counter": f"{3:032}.0"})  # messages unchanged: the same version
    for saver in (b, a, MysqlSaver(store)):
        got = saver.get_tuple(c3).checkpoint["channel_values"]
        assert [x.content for x in got["messages"]] == ["m2", "m3"] and got["counter"] == 3
    a.close(), b.close()


@pytest.mark.parametrize("maintenance", ["keep_latest", "delete_thread"])
def test_a_step_after_another_process_rebuilt_three_list_logs_writes_them_all_anew(store, maintenance):
    """A state with three list channels. Another process prunes the thread (every log rebuilt
    compact under a new name) or deletes it; this process's next step found the rebuilt logs
    one at a time, an attempt each, and gave up (RuntimeError "the list logs kept being
    rebuilt"), at every retry after a delete. Now one attempt finds them all."""

    class S(TypedDict):
        messages: Annotated[list, operator.add]
        docs: Annotated[list, operator.add]
        notes: Annotated[list, operator.add]

    def step(state: S) -> dict:
        n = len(state.get("messages", []))
        return {"messages": [f"m{n}"], "docs": [f"d{n}"], "notes": [f"n{n}"]}

    b = StateGraph(S)
    b.add_node("step", step)
    b.add_edge(START, "step")
    b.add_edge("step", END)
    a, other = MysqlSaver(store), MysqlSaver(store)  # two caches: as two processes
    ga, gb = b.compile(checkpointer=a), b.compile(checkpointer=other)
    cfg = {"configurable": {"thread_id": f"three-{maintenance}"}}
    for i in range(3):
        ga.invoke({"messages": [f"in{i}"], "docs": [], "notes": []}, cfg)
    gb.get_state(cfg)
    if maintenance == "keep_latest":
        other.prune([cfg["configurable"]["thread_id"]], strategy="keep_latest")
        before = ga.get_state(cfg).values
    else:
        other.delete_thread(cfg["configurable"]["thread_id"])
        before = {"messages": [], "docs": [], "notes": []}
    # this process goes on from the checkpoint it knows (update_state: a put of its own objects)
    ga.update_state(cfg, {"messages": ["again"], "docs": ["again"], "notes": ["again"]}, as_node="step")
    after = gb.get_state(cfg).values
    assert after == {k: v + ["again"] for k, v in before.items()}
    ga.invoke({"messages": ["last"], "docs": [], "notes": []}, cfg)
    assert gb.get_state(cfg).values["notes"][-1].startswith("n")


def test_a_read_racing_another_process_s_prune_reads_again_never_damage(store, monkeypatch):
    """get_tuple and list read the checkpoint row, then its log, in two statements: another
    process's prune between them (the log rebuilt under a new name, the old one deleted) made
    the read raise CorruptStateError for a healthy thread. The read goes again."""
    writer, reader, pruner = MysqlSaver(store), MysqlSaver(store), MysqlSaver(store)
    graph = chat_graph(writer, keep=4)
    cfg = {"configurable": {"thread_id": "race", "checkpoint_ns": ""}}
    for i in range(5):
        turn(graph, "race", i)
    expected = [(m.id, m.content) for m in graph.get_state(cfg).values["messages"]]
    real_get, fired = reader.store.get, []

    def get(user, thread, key, *args, **kwargs):  # the row read: the prune lands before the log is
        out = real_get(user, thread, key, *args, **kwargs)
        if key.startswith("cp/") and not fired:
            fired.append(True)  # first: the prune reads through the same (shared) store
            pruner.prune(["race"], strategy="keep_latest")
        return out

    monkeypatch.setattr(reader.store, "get", get)
    got = reader.get_tuple(cfg).checkpoint["channel_values"]["messages"]
    assert fired and [(m.id, m.content) for m in got] == expected
    monkeypatch.undo()
    for i in range(5, 8):
        turn(graph, "race", i)
    real_many, fired = reader.store.get_many, []

    def get_many(user, thread, *args, **kwargs):  # list() reads its rows by get_many
        out = real_many(user, thread, *args, **kwargs)
        if not fired and any(k.startswith("cp/") for k in kwargs.get("values", args[0] if args else ())):
            fired.append(True)
            pruner.prune(["race"], strategy="keep_latest")
        return out

    monkeypatch.setattr(reader.store, "get_many", get_many)
    listed = list(reader.list(cfg))
    assert fired and len(listed) >= 1
    newest = [(m.id, m.content) for m in listed[0].checkpoint["channel_values"]["messages"]]
    assert newest == [(m.id, m.content) for m in graph.get_state(cfg).values["messages"]]
    for s in (writer, reader, pruner):
        s.close()


def test_ainvoke_several_threads_at_once_from_several_event_loops(store):
    astore = AsyncMysqlAgentStateStore(store, close_store=False)
    saver = MysqlSaver(astore)
    graph = chat_graph(saver)

    async def one(thread: str, turns: int) -> list:
        for i in range(turns):
            await graph.ainvoke({"messages": [HumanMessage(content=f"{thread} {i}", id=f"{thread}-{i}")]},
                                {"configurable": {"thread_id": thread}})
        return (await graph.aget_state({"configurable": {"thread_id": thread}})).values["messages"]

    async def many(prefix: str) -> list:
        return await asyncio.gather(*(one(f"{prefix}-{k}", 4) for k in range(5)))

    results: dict = {}
    loops = [threading.Thread(target=lambda p=p: results.__setitem__(p, asyncio.run(many(p)))) for p in "ab"]
    for t in loops:
        t.start()
    for t in loops:
        t.join(120)
    for p in "ab":
        for k, msgs in enumerate(results[p]):
            thread = f"{p}-{k}"
            assert [m.content for m in msgs if m.type == "human"] == [f"{thread} {i}" for i in range(4)]
            assert len(msgs) == 8
    assert {f"{p}-{k}" for p in "ab" for k in range(5)} <= store.list_session_ids(None)
    saver.close()
    asyncio.run(astore.aclose())


# ---- storage ---------------------------------------------------------------------------------


def test_stored_bytes_grow_linearly_with_the_conversation(saver, raw, report):
    graph = chat_graph(saver, pad=300)
    sizes, done = {}, 0
    for mark in (15, 30, 60, 90):
        while done < mark:
            turn(graph, "long", done, "a user message of some length " * 3)
            done += 1
        sizes[mark] = session_bytes(raw, None, "long")
    per_turn = [(sizes[30] - sizes[15]) / 15, (sizes[60] - sizes[30]) / 30, (sizes[90] - sizes[60]) / 30]
    assert max(per_turn) <= 1.2 * min(per_turn), (sizes, per_turn)
    # every message is stored once: the log holds 2 items per turn
    logs = raw.query("SELECT COUNT(*) FROM {t} WHERE session_id = %s AND state_key LIKE 'log/%%'"
                     " AND state_key NOT LIKE '%%:_hash'", (keys.pack(None, "long"),))[0][0]
    assert logs == 180
    report(f"LangGraph thread bytes after 15/30/60/90 turns: {sizes[15]}/{sizes[30]}/{sizes[60]}/{sizes[90]} "
           f"(per turn {per_turn[0]:.0f}, {per_turn[1]:.0f}, {per_turn[2]:.0f})")


def test_keys_hold_any_langgraph_names(saver, raw):
    ns = "outer:" + "é/:_hash|" * 40
    cfg = {"configurable": {"thread_id": "names", "checkpoint_ns": ns}}
    checkpoint = {"v": 1, "id": "1f0-" + "z" * 30, "ts": "2026-01-01T00:00:00+00:00", "channel_values": {
        "ch/with:odd names:_hash": [1, {"a": b"\x00"}], "x" * 300: {"big": "y" * 1000}},
        "channel_versions": {"ch/with:odd names:_hash": "1.0", "x" * 300: "1.0"}, "versions_seen": {}}
    stored = saver.put(cfg, checkpoint, {"source": "input", "step": -1}, dict(checkpoint["channel_versions"]))
    saver.put_writes(stored, [("c" * 400, "v"), (ERROR, "boom"), (INTERRUPT, {"q": 1})], "task-1", "p")
    saver.put_writes(stored, [("c" * 400, "second"), (ERROR, "boom again")], "task-1", "p")
    got = saver.get_tuple(stored)
    assert got.checkpoint["channel_values"] == checkpoint["channel_values"]
    assert got.config["configurable"]["checkpoint_ns"] == ns
    # LangGraph's write indexes: a regular write kept once (the first), a special one replaced
    assert sorted((c, v) for _, c, v in got.pending_writes) == sorted(
        [("c" * 400, "v"), (ERROR, "boom again"), (INTERRUPT, {"q": 1})])
    for key, in raw.query("SELECT state_key FROM {t} WHERE session_id = %s", (keys.pack(None, "names"),)):
        assert len(key) <= 255 and key.isascii()
        assert not key.endswith(":_hash") or ":" not in key[:-6]


def test_a_step_is_two_packets_each_carrying_its_commit(saver, raw, driver_commits):
    """put: the log's new message, the index entry and the checkpoint row written together in
    ONE statement (the hash rows this process wrote last, checked in it), after the check that
    the row's key holds no list, with its COMMIT: one packet; put_writes: its new key created in
    ONE INSERT after the check that no list's hash row is there, with its COMMIT: one packet.
    The driver sends no COMMIT of its own."""
    called = driver_commits
    msgs = [HumanMessage(content=f"m{i}", id=f"m{i}") for i in range(50)]
    conf, version = {"thread_id": "steps", "checkpoint_ns": ""}, None
    for k in range(4):
        msgs = msgs + [AIMessage(content=f"step {k}", id=f"s{k}")]
        version = saver.get_next_version(version, None)
        ck = {"v": 4, "id": f"1f{k:034d}", "ts": "",
              "channel_values": {"messages": msgs}, "channel_versions": {"messages": version}, "versions_seen": {}}
        before, called[:] = raw.com_counts(), []
        stored = saver.put({"configurable": conf}, ck, {"source": "loop", "step": k}, {"messages": version})
        saver.put_writes(stored, [("messages", [msgs[-1]])], f"task-{k}")
        after = raw.com_counts()
        conf = stored["configurable"]
    diff = {k: v - before.get(k, 0) for k, v in after.items() if v - before.get(k, 0)}
    assert diff == {"Com_select": 2, "Com_insert": 2, "Com_commit": 2}, diff
    assert called == []
    got = saver.get_tuple({"configurable": {"thread_id": "steps", "checkpoint_ns": ""}})
    assert [m.content for m in got.checkpoint["channel_values"]["messages"]] == [m.content for m in msgs]
    assert [w[2] for w in got.pending_writes] == [[msgs[-1]]]
    assert saver.store.doctor() == []


def test_a_turn_of_a_graph_is_one_packet_per_put_and_per_put_writes(saver, raw, driver_commits):
    """In a real graph, every call that writes is one packet carrying its COMMIT, the input
    step's put included (its message log gets no new item, only its length checked: that put
    used to go the locked way, 3 round trips, the costliest call of a turn)."""
    graph = chat_graph(saver)
    calls: list[str] = []
    put, put_writes = saver.put, saver.put_writes
    saver.put = lambda *a: (calls.append("put"), put(*a))[1]
    saver.put_writes = lambda *a: (calls.append("put_writes"), put_writes(*a))[1]
    for i in range(3):
        turn(graph, "packets", i)
    calls.clear()
    driver_commits.clear()
    before = raw.com_counts()
    turn(graph, "packets", 3)
    after = raw.com_counts()
    diff = {k: v - before.get(k, 0) for k, v in after.items() if v - before.get(k, 0)}
    assert calls.count("put") == 3 and calls.count("put_writes") == 2, calls
    assert driver_commits == []
    assert diff.get("Com_commit") == len(calls), (diff, calls)
    assert [m.content for m in graph.get_state({"configurable": {"thread_id": "packets"}}).values["messages"]][-2:] == [
        "hello 3", "reply 7 " + "x" * 200]


def _counted_turn(saver, raw, driver_commits, thread: str, i: int) -> tuple[list, dict]:
    """One turn of a chat graph on ``saver``: its write calls, and the server's Com_* counts."""
    graph = chat_graph(saver)
    calls: list[str] = []
    put, put_writes = saver.put, saver.put_writes
    saver.put = lambda *a: (calls.append("put"), put(*a))[1]
    saver.put_writes = lambda *a: (calls.append("put_writes"), put_writes(*a))[1]
    driver_commits.clear()
    before = raw.com_counts()
    turn(graph, thread, i)
    after = raw.com_counts()
    return calls, {k: v - before.get(k, 0) for k, v in after.items() if v - before.get(k, 0)}


def test_the_first_step_after_a_load_by_a_fresh_process_is_one_packet_and_old_indexes_read(store, raw, driver_commits):
    """A process that never saw the thread loads it and goes on: every write call is one packet
    (the load told it the index's length, from its last entry's position). A thread whose index
    entries have no position (written before 2026-12-07) reads alike; the first step after a
    load takes the slower way once (it cannot know the length) and writes the position, so the
    next fresh process is back to one packet; the index stays sorted and whole."""
    for i in range(3):
        turn(chat_graph(MysqlSaver(store)), "fresh", i)
    calls, diff = _counted_turn(MysqlSaver(store), raw, driver_commits, "fresh", 3)
    assert driver_commits == [] and diff.get("Com_commit") == len(calls) == 5, (diff, calls)

    for i in range(3):
        turn(chat_graph(MysqlSaver(store)), "old-index", i)
    entries = store.get_list(None, "old-index", "ix/~")
    store.save_list(None, "old-index", "ix/~", [e[:2] for e in entries])  # as written before positions
    calls, diff = _counted_turn(MysqlSaver(store), raw, driver_commits, "old-index", 3)
    assert diff.get("Com_commit") == len(calls) == 5, (diff, calls)
    calls, diff = _counted_turn(MysqlSaver(store), raw, driver_commits, "old-index", 4)
    assert driver_commits == [] and diff.get("Com_commit") == len(calls) == 5, (diff, calls)
    entries = store.get_list(None, "old-index", "ix/~")
    ids = [e[0] for e in entries]
    assert ids == sorted(set(ids)) and len(ids) == 15
    assert [len(e) for e in entries] == [2] * 9 + [3] * 6 and [e[2] for e in entries[9:]] == list(range(9, 15))
    g = chat_graph(MysqlSaver(store))
    history = list(g.get_state_history({"configurable": {"thread_id": "old-index"}}))
    assert len(history) == 15 and history[0].values["messages"][-1].content.startswith("reply 9")


def test_a_load_by_the_process_that_stored_the_thread_is_sent_only_the_new_messages(saver, store, raw, url, database):
    """The load at the start of a turn reads the whole message log: from the process that
    stored and loaded it before, the store sends only the items after those its last load
    saw (the rest proven unchanged on the server); a fresh process, an older checkpoint, a
    log another process appended to: each read back as LangGraph's own saver has it."""
    graph, oracle = chat_graph(saver), chat_graph(InMemorySaver())
    for i in range(30):  # 60 messages: a log long enough to be kept
        turn(graph, "since", i)
        turn(oracle, "since", i)
    cfg = {"configurable": {"thread_id": "since", "checkpoint_ns": ""}}
    saver.get_tuple(cfg)
    turn(graph, "since", 30)
    turn(oracle, "since", 30)
    got, sent = raw.sent(lambda: saver.get_tuple(cfg))
    assert sent < 12, sent  # the index's tail, the checkpoint row, the new messages, the hash row
    want = oracle.get_state({"configurable": {"thread_id": "since"}}).values["messages"]
    assert got.checkpoint["channel_values"]["messages"] == want and len(want) == 62
    other_store = MysqlAgentStateStore.from_url(url, database_name=database)
    try:
        other = MysqlSaver(other_store)
        assert other.get_tuple(cfg).checkpoint["channel_values"]["messages"] == want
        turn(chat_graph(other), "since", 31)  # another process appends to the log
        turn(oracle, "since", 31)
    finally:
        other_store.close()
    assert history(graph, "since") == history(oracle, "since")  # every checkpoint, older ones too
    want = oracle.get_state({"configurable": {"thread_id": "since"}}).values["messages"]
    assert saver.get_tuple(cfg).checkpoint["channel_values"]["messages"] == want and len(want) == 64


def test_two_processes_taking_turns_on_one_thread(url, database, store, raw):
    """The production path: a conversation's turns land on two workers in turn (real
    processes, a store and a saver each). Each worker's load is sent only what the other
    added, each put writes only the new messages, and every checkpoint reads back as
    LangGraph's own saver has it."""
    import multiprocessing

    from . import procs

    spawn = multiprocessing.get_context("spawn")
    inbox, outbox = spawn.Queue(), spawn.Queue()
    worker = spawn.Process(target=procs.langgraph_turns, args=(url, database, "procs", inbox, outbox))
    worker.start()
    graph, oracle = chat_graph(MysqlSaver(store)), chat_graph(InMemorySaver())
    cfg = {"configurable": {"thread_id": "procs", "checkpoint_ns": ""}}
    try:
        for i in range(40):
            if i % 2:
                inbox.put(i)
                assert outbox.get(timeout=120) == i
            else:
                turn(graph, "procs", i)
            turn(oracle, "procs", i)
        inbox.put(41)  # the other worker's turn, then this one's load of it
        assert outbox.get(timeout=120) == 41
        turn(oracle, "procs", 41)
        got, sent = raw.sent(lambda: graph.checkpointer.get_tuple(cfg))
        # the index's tail, the checkpoint row, the two new messages, the hash rows: not the 82 messages
        assert sent < 20, sent
    finally:
        inbox.put(None)
        worker.join(60)
    assert worker.exitcode == 0
    want = oracle.get_state({"configurable": {"thread_id": "procs"}}).values["messages"]
    assert got.checkpoint["channel_values"]["messages"] == want and len(want) == 82
    assert history(graph, "procs") == history(oracle, "procs")
    assert log_items(raw, "procs") == 82  # each message written once, by the worker that made it


def test_two_savers_appending_to_one_thread_each_read_back_exactly(store, raw):
    """Each saver takes the log to be as long as it last saw it; when the other appended
    meanwhile, the compare-and-set of the length fails and the put reads the length instead."""
    a, b = MysqlSaver(store), MysqlSaver(store)
    ga, gb = chat_graph(a), chat_graph(b)
    for i in range(6):
        turn(ga if i % 2 == 0 else gb, "two", i)
    cfg = {"configurable": {"thread_id": "two"}}
    want = [f"hello {i}" for i in range(6)]
    for g in (ga, gb):
        assert [m.content for m in g.get_state(cfg).values["messages"] if m.type == "human"] == want
    oracle = chat_graph(InMemorySaver())
    for i in range(6):
        turn(oracle, "two", i)
    assert history(ga, "two") == history(oracle, "two")
    # a knows the log as it is now; b appends to it; a's put (a fork of what a read) finds the
    # log longer than it knew, and refers to the items where they are
    cfg = {"configurable": {"thread_id": "two", "checkpoint_ns": ""}}
    seen = a.get_tuple(cfg)
    turn(gb, "two", 6)
    msgs = [*seen.checkpoint["channel_values"]["messages"], AIMessage(content="from a", id="fa")]
    version = a.get_next_version(seen.checkpoint["channel_versions"]["messages"], None)
    checkpoint = {**seen.checkpoint, "id": str(uuid.uuid4()), "channel_values": {"messages": msgs},
                  "channel_versions": {**seen.checkpoint["channel_versions"], "messages": version}}
    stored = a.put(seen.config, checkpoint, {"source": "update", "step": 99}, {"messages": version})
    for s in (a, b):
        got = s.get_tuple(stored).checkpoint["channel_values"]["messages"]
        assert [(m.id, m.content) for m in got] == [(m.id, m.content) for m in msgs]
    assert len(gb.get_state({"configurable": {"thread_id": "two"}}).values["messages"]) in (14, 13)
    assert store.doctor() == []
    a.close(), b.close()


def test_tx_append_lists_appends_to_several_lists_as_append_list_does(store, raw):
    store.save_list("alice", "s", "a", [1, 2])
    store.save_list("alice", "s", "b", ["x"])
    got = store.transaction(lambda tx: tx.append_lists("alice", "s", {"a": [3], "b": ["y", "z"], "new": [0], "c": []}))
    assert got == {"a": 3, "b": 3, "new": 1, "c": 0}
    assert store.get_many("alice", "s", lists=["a", "b", "new"]) == {"a": [1, 2, 3], "b": ["x", "y", "z"], "new": [0]}
    assert store.doctor() == []  # every hash row says what its rows are
    with pytest.raises(TypeError, match="appends must be a mapping"):
        store.transaction(lambda tx: tx.append_lists("alice", "s", [("a", [1])]))
    with pytest.raises(TypeError):
        store.transaction(lambda tx: tx.append_lists("alice", "s", {"a": "not a list of items"}))
    assert store.get_list("alice", "s", "a") == [1, 2, 3]
    # values beside, in the same statement: a new one, one replaced, one that was a list
    store.save("alice", "s", "v", {"old": 1})
    store.save_list("alice", "s", "was-list", [7, 8])
    raw.execute("UPDATE {t} SET version = 0 WHERE session_id = 'alice:s' AND state_key = 'v'")  # as Java leaves it
    got = store.transaction(lambda tx: tx.append_lists("alice", "s", {"a": [4]}, at={"a": 3},
                                                       values={"v": {"new": 2}, "n": 1, "was-list": "value"}))
    assert got == {"a": 4}
    assert store.get_many("alice", "s", values=["v", "n", "was-list"], lists=["a"], versioned=True) == {
        "v": ({"new": 2}, 2), "n": (1, 1), "was-list": ("value", 2), "a": ([1, 2, 3, 4], 3)}
    # a compare-and-set of the length: another length raises before anything is written
    before = raw.all_rows()
    with pytest.raises(StaleStateError):
        store.transaction(lambda tx: tx.append_lists("alice", "s", {"a": [5], "b": ["w"]}, at={"a": 3},
                                                     values={"n": 2}))
    with pytest.raises(StaleStateError):  # a new list is of length 0
        store.transaction(lambda tx: tx.append_lists("alice", "s", {"fresh": [1]}, at={"fresh": 1}))
    for bad in ({"a": -1}, {"a": True}, {"a": "3"}):
        with pytest.raises((TypeError, ValueError), match="at"):  # -1: a ValueError, the others TypeErrors
            store.transaction(lambda tx: tx.append_lists("alice", "s", {"a": [5]}, at=bad))
    with pytest.raises(ValueError, match="not appended to"):
        store.transaction(lambda tx: tx.append_lists("alice", "s", {"a": [5]}, at={"zz": 0}))
    with pytest.raises(ValueError, match="both as a list"):
        store.transaction(lambda tx: tx.append_lists("alice", "s", {"a": [5]}, values={"a": 1}))
    assert raw.all_rows() == before
    assert store.doctor() == []


def test_bad_input_is_refused_before_any_sql(saver, raw):
    with pytest.raises(ValueError, match="blank"):
        saver.put({"configurable": {"thread_id": "  ", "checkpoint_ns": ""}},
                  {"v": 1, "id": "1", "ts": "", "channel_values": {}, "channel_versions": {}, "versions_seen": {}}, {}, {})
    with pytest.raises(TypeError, match="not one str"):
        saver.prune("thread-1")
    with pytest.raises(ValueError, match="unknown prune strategy 'all'"):
        saver.prune(["thread-1"], strategy="all")
    with pytest.raises(TypeError, match="not one str"):
        saver.delete_for_runs("run-1")
    with pytest.raises(TypeError, match="MysqlAgentStateStore"):
        MysqlSaver(object())
    with pytest.raises(ValueError, match="':'"):
        MysqlSaver(saver.store, user_id="a:b")
    assert raw.query("SELECT COUNT(*) FROM {t} WHERE session_id LIKE '%%:%%'")[0][0] == 0


def test_the_memory_stores_session_is_no_thread(store, raw):
    """A saver and a MysqlStore of one user share the store: the memory's session is refused as
    a thread id, and listing or deleting the saver's threads never reaches the memory."""
    from mysql_state.langgraph import MysqlStore

    memory = MysqlStore(store)
    memory.put(("prefs",), "lang", {"v": "fr"})
    saver = MysqlSaver(store)
    graph = chat_graph(saver)
    turn(graph, "t1", 0)
    before = raw.rows("__anon__:langgraph-store")
    with pytest.raises(ValueError, match="'langgraph-store' is reserved"):
        turn(graph, "langgraph-store", 0)
    with pytest.raises(ValueError, match="reserved"):
        saver.delete_thread("langgraph-store")
    assert {c.config["configurable"]["thread_id"] for c in saver.list(None)} == {"t1"}
    saver.delete_for_runs(["no-such-run"])
    assert raw.rows("__anon__:langgraph-store") == before and memory.get(("prefs",), "lang").value == {"v": "fr"}


# ---- the operator's tools over LangGraph threads --------------------------------------------


def test_sessions_catalog_export_import_and_forget_user_cover_threads(url, database, store, raw):
    saver = MysqlSaver(store, user_id="alice")
    graph = chat_graph(saver)
    for thread in ("t1", "t2"):
        for i in range(3):
            turn(graph, thread, i)
    page = store.sessions("alice")
    assert {s.session_id for s in page.items} == {"t1", "t2"} and all(len(s.keys) > 3 for s in page.items)
    assert store.list_session_ids("alice") == {"t1", "t2"}
    assert store.doctor() == []
    lines = list(store.export("alice"))
    other = database + "_copy"
    copy = MysqlAgentStateStore.from_url(url, database_name=other, create_if_not_exist=True)
    try:
        assert copy.import_rows(lines) == len(lines)
        copied = chat_graph(MysqlSaver(copy, user_id="alice"))
        assert history(copied, "t1") == history(graph, "t1")
        turn(copied, "t1", 3)  # the imported thread goes on
        assert len(copied.get_state({"configurable": {"thread_id": "t1"}}).values["messages"]) == 8
    finally:
        Raw(url, other).execute(f"DROP DATABASE `{other}`")
        copy.close()
    removed = store.forget_user("alice")
    assert removed > 0 and saver.get_tuple({"configurable": {"thread_id": "t1"}}) is None
    assert raw.query("SELECT COUNT(*) FROM {t} WHERE session_id LIKE 'alice:%%'")[0][0] == 0
    saver.close()


def test_encryption_at_rest_hides_message_text(url, database, raw):
    secret = "SECRET-BANANA-42"
    for encryption, thread in ((None, "plain"), (Keyring({"k1": os.urandom(32)}, current="k1"), "sealed")):
        with MysqlSaver.from_url(url, database_name=database, create_if_not_exist=True,
                                 encryption=encryption) as saver:
            graph = chat_graph(saver)
            turn(graph, thread, 0, secret)
            turn(graph, thread, 1, secret)
            got = graph.get_state({"configurable": {"thread_id": thread}}).values["messages"]
            assert [m.content for m in got if m.type == "human"] == [f"{secret} 0", f"{secret} 1"]
        leaked = raw.query("SELECT COUNT(*) FROM {t} WHERE session_id = %s AND state_data LIKE %s",
                           (keys.pack(None, thread), f"%{secret}%"))[0][0]
        if encryption is None:
            assert leaked > 0  # rows are readable JSON: the text is there without a keyring
        else:
            assert leaked == 0
    with pytest.raises(Exception, match="(?i)decrypt|keyring|sealed"):
        with MysqlSaver.from_url(url, database_name=database) as blind:
            blind.get_tuple({"configurable": {"thread_id": "sealed"}})


def test_the_demo_runs(url):
    done = subprocess.run([sys.executable, DEMO, "--database", "lgdemo_" + uuid.uuid4().hex[:8]],
                          env=dict(os.environ, MYSQL_URL=url), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "resumed with 'yes'" in done.stdout and "Cancelled" in done.stdout and "SESSION" in done.stdout


def test_the_docs_examples_run(url, database):
    """Every python block of docs/langgraph.md, run as a script against the test server."""
    import re

    with open(os.path.join(ROOT, "docs", "langgraph.md")) as f:
        blocks = re.findall(r"```python\n(.*?)```", f.read(), re.S)
    assert len(blocks) >= 2
    for code in blocks:
        code = code.replace('database_name="agentscope"', f'database_name="{database}"')
        done = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, MYSQL_URL=url), cwd=ROOT,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, code + done.stdout + done.stderr


# ---- items edited in place -------------------------------------------------------------------


def editing_graph(checkpointer):
    """A node that edits messages of the state IN PLACE (the same objects) at some turns, then
    returns a reply (a new version of the list) or, once, nothing (the same version)."""

    def agent(state: MessagesState) -> dict:
        msgs = state["messages"]
        n = len(msgs)
        if n == 3:  # turn 1: the first user message's text, and a nested dict of the first reply
            msgs[0].content = "edited in place"
            msgs[1].additional_kwargs["note"] = {"k": [1]}
        elif n == 5:  # turn 2: deeper, and a value whose type only changes (1 == True)
            msgs[1].additional_kwargs["note"]["k"].append(2)
            msgs[2].additional_kwargs["flag"] = 1
        elif n == 7:  # turn 3: 1 -> True; and a message the fast fingerprint cannot read
            msgs[2].additional_kwargs["flag"] = True
            msgs[3].additional_kwargs["at"] = datetime.datetime(2026, 12, 3, 18, 0)
        elif n == 9:  # turn 4: the datetime one edited again
            msgs[3].additional_kwargs["at"] = datetime.datetime(2026, 12, 4, 9, 30)
        elif n == 11:  # turn 5: edited, but no update of the channel: no new version
            msgs[4].content = "edited, never returned"
            return {}
        return {"messages": [AIMessage(content=f"reply {n}", id=f"ai-{n}")]}

    return one_node_graph(checkpointer, agent)


def full_history(graph, thread: str) -> list:
    """Every checkpoint's messages, whole (content and every kwarg), oldest first."""
    return [[(m.type, m.id, m.content, m.additional_kwargs) for m in s.values.get("messages", [])]
            for s in reversed(list(graph.get_state_history({"configurable": {"thread_id": thread}})))]


def test_messages_edited_in_place_between_steps_are_stored_as_edited(store, raw):
    """The saver does not serialise again a message it stored or read (each invoke starts by
    reading the thread: the node edits objects the saver decoded); an object edited in place
    since (its text, a nested dict, a value's type only, a message the fast fingerprint cannot
    read) is not taken for unchanged: it is written as a new item, and every earlier
    checkpoint still reads the old one."""
    oracle = InMemorySaver()
    saver = MysqlSaver(store)
    for checkpointer in (saver, oracle):
        graph = editing_graph(checkpointer)
        for i in range(7):  # "sync": each checkpoint stored before the next node edits its objects
            graph.invoke({"messages": [HumanMessage(content=f"hello {i}", id=f"h-edits-{i}")]},
                         {"configurable": {"thread_id": "edits"}}, durability="sync")
    fresh = MysqlSaver(store)  # nothing cached: what the table holds
    mine, theirs = full_history(editing_graph(fresh), "edits"), full_history(editing_graph(oracle), "edits")
    assert len(mine) == len(theirs) > 20
    assert mine == theirs
    last = mine[-1]
    assert last[0][2] == "edited in place" and last[1][3] == {"note": {"k": [1, 2]}}
    assert last[2][3]["flag"] is True and last[3][3]["at"] == datetime.datetime(2026, 12, 4, 9, 30)
    assert last[4][2] == "hello 2"  # edited without a new version: not stored, as in LangGraph's savers
    # plain SQL: the log holds the original texts and each edited copy, nothing more:
    # 7 users + 6 replies (turn 5 returned none), and 7 edited copies (2 + 2 + 2 + 1, turns 1-4)
    sid = keys.pack(None, "edits")
    rows = [r[0] for r in raw.query("SELECT state_data FROM {t} WHERE session_id = %s AND state_key LIKE 'log/%%'"
                                    " AND state_key NOT LIKE '%%:_hash' ORDER BY item_index", (sid,))]
    assert len(rows) == 7 + 6 + 7, len(rows)
    assert sum("edited in place" in r for r in rows) == 1 and sum('"hello 0"' in r for r in rows) == 1
    assert not any("never returned" in r for r in rows)
    saver.close()
    fresh.close()


def test_a_trim_after_a_load_writes_only_the_new_messages(store, raw):
    """A turn that trims the conversation (RemoveMessage) is no extension of what its load
    read, so the put walks it item by item: the items the load read are known by identity
    with their states as read (taken when the put needs them), so only the new messages are
    written, and a message edited in place since the load is written again."""
    g = chat_graph(MysqlSaver(store))
    for i in range(20):
        turn(g, "trim-after-load", i)
    assert log_items(raw, "trim-after-load") == 40

    def trimming(edit: bool):
        def agent(state: MessagesState) -> dict:
            msgs = state["messages"]
            if edit:
                msgs[-5].content = "edited in place"
            return {"messages": [RemoveMessage(id=m.id) for m in msgs[:10]] + [AIMessage(content="trimmed", id=f"t-{len(msgs)}")]}
        return one_node_graph(MysqlSaver(store), agent)  # a new process: it knows the thread by its load

    cfg = {"configurable": {"thread_id": "trim-after-load"}}
    turn(trimming(False), "trim-after-load", 20)
    assert log_items(raw, "trim-after-load") == 42  # the user's message and the reply
    turn(trimming(True), "trim-after-load", 21)
    assert log_items(raw, "trim-after-load") == 45  # and the message edited in place
    got = chat_graph(MysqlSaver(store)).get_state(cfg).values["messages"]
    assert len(got) == 33 - 10 + 2 - 1 and got[-1].content == "trimmed"
    assert [m.content for m in got].count("edited in place") == 1 and got[-6].content == "edited in place"


def test_a_long_thread_step_appends_only_its_new_items(saver, raw):
    """Each step of a long thread writes only the new message (the version that extends the
    last one is taken from its ranges), and every checkpoint reads back whole."""
    graph = chat_graph(saver, pad=50)
    for i in range(60):
        turn(graph, "long-tail", i)
    sid = keys.pack(None, "long-tail")
    assert log_items(raw, "long-tail") == 120
    turn(graph, "long-tail", 60)
    assert log_items(raw, "long-tail") == 122
    refs = [json.loads(r[0])["lists"]["messages"] for r in raw.query(
        "SELECT state_data FROM {t} WHERE session_id = %s AND state_key LIKE 'cp/%%'", (sid,))
        if "messages" in json.loads(r[0])["lists"]]
    assert max(len(ref["r"]) for ref in refs) == 1  # one range each: [0, n)
    oracle = InMemorySaver()
    og = chat_graph(oracle, pad=50)
    for i in range(61):
        turn(og, "long-tail", i)
    assert history(graph, "long-tail") == history(og, "long-tail")


def test_check_edits_off_takes_the_same_object_for_unchanged(store, raw):
    """``check_edits = False`` (for graphs that never edit state objects in place): an object
    the saver remembers is taken for unchanged, edited or not, and nothing is written for it."""
    saver = MysqlSaver(store)
    saver.check_edits = False
    graph = editing_graph(saver)
    for i in range(2):  # the second turn edits two messages in place
        graph.invoke({"messages": [HumanMessage(content=f"hello {i}", id=f"h-off-{i}")]},
                     {"configurable": {"thread_id": "edits-off"}}, durability="sync")
    rows = raw.query("SELECT state_data FROM {t} WHERE session_id = %s AND state_key LIKE 'log/%%'"
                     " AND state_key NOT LIKE '%%:_hash'", (keys.pack(None, "edits-off"),))
    assert len(rows) == 2 + 2  # the users' and the replies: no edited copy
    assert not any("edited in place" in r[0] for r in rows)
    fresh = MysqlSaver(store)
    latest = fresh.get_tuple({"configurable": {"thread_id": "edits-off"}}).checkpoint["channel_values"]["messages"]
    assert latest[0].content == "hello 0"  # stored as it was: what check_edits = True prevents
    saver.close()
    fresh.close()


def test_check_edits_turned_on_after_a_load_it_was_off_for(store):
    """A saver that loaded a thread with ``check_edits = False`` kept no states of its items
    (nothing to compare with); ``check_edits`` turned on (an instance attribute, langgraph.md)
    before a put of that list: the put read those states and raised TypeError (found by typing
    the package). The items are now taken as not known to be unchanged: written again."""
    conf = {"configurable": {"thread_id": "edits-toggled"}}
    writer = MysqlSaver(store)
    graph = chat_graph(writer, pad=5)
    for i in range(2):
        turn(graph, "edits-toggled", i)
    writer.close()
    saver = MysqlSaver(store)
    saver.check_edits = False
    seen = saver.get_tuple(conf)  # the load: the items remembered, their states not taken
    saver.check_edits = True
    msgs = seen.checkpoint["channel_values"]["messages"]
    msgs[0].content = "edited in place"
    new = [*msgs, HumanMessage(content="after the toggle", id="toggled")]
    version = saver.get_next_version(seen.checkpoint["channel_versions"]["messages"], None)
    checkpoint = {**seen.checkpoint, "id": str(uuid.uuid4()), "channel_values": {"messages": new},
                  "channel_versions": {**seen.checkpoint["channel_versions"], "messages": version}}
    stored = saver.put(seen.config, checkpoint, {"source": "update", "step": 99}, {"messages": version})
    fresh = MysqlSaver(store)
    got = fresh.get_tuple(stored).checkpoint["channel_values"]["messages"]
    assert [(m.id, m.content) for m in got] == [(m.id, m.content) for m in new]  # the edit stored too
    saver.close(), fresh.close()


def test_a_corrupt_message_row_is_a_typed_error_naming_its_log(saver, raw):
    """The items of a version are decoded together (one serializer call); a row that does not
    decode is still found and named: CorruptStateError, never a wrong list or "no state"."""
    graph = chat_graph(saver)
    for i in range(3):
        turn(graph, "corrupt", i)
    sid = keys.pack(None, "corrupt")
    key, index = raw.query("SELECT state_key, item_index FROM {t} WHERE session_id = %s AND state_key LIKE 'log/%%'"
                           " AND state_key NOT LIKE '%%:_hash' ORDER BY item_index LIMIT 1 OFFSET 2", (sid,))[0]
    raw.execute("UPDATE {t} SET state_data = %s WHERE session_id = %s AND state_key = %s AND item_index = %s",
                ('{"t": "msgpack", "v": {"~b": 12}}', sid, key, index))  # a tree, not one to_row writes
    with pytest.raises(CorruptStateError, match="log/") as caught:
        MysqlSaver(saver.store).get_tuple({"configurable": {"thread_id": "corrupt"}})
    assert key in str(caught.value) and sid in str(caught.value)


# ---- copy_thread and prune(strategy="delete"), by name ------------------------------------------


def _ck(n: int) -> str:
    return f"1f0{n:05x}-0000-6000-8000-{n:012x}"


def _hand_put(savers, thread: str, n: int, parent, step: int) -> None:
    """The same hand-made checkpoint ``n`` (child of ``parent``) put by each saver given."""
    from langgraph.checkpoint.base import empty_checkpoint

    for s in savers:
        cp = empty_checkpoint()
        cp["id"], cp["channel_values"], cp["channel_versions"] = _ck(n), {}, {}
        conf = {"thread_id": thread, "checkpoint_ns": ""}
        if parent is not None:
            conf["checkpoint_id"] = _ck(parent)
        s.put({"configurable": conf}, cp, {"step": step}, {})


def test_a_checkpoint_put_twice_is_listed_once_and_put_again_takes_its_new_parent(store):
    """Two savers that both know the newest checkpoint put the same new id (as a put retried
    after its COMMIT's answer was lost does): the index held it twice, and list() gave it
    twice, in place of another checkpoint under a limit. And the newest checkpoint put again
    with another parent: the row took the new parent but the index kept the old one, which
    get_delta_channel_history walked. Compared with LangGraph's InMemorySaver."""
    a, b, mem = MysqlSaver(store), MysqlSaver(store), InMemorySaver()
    conf = {"configurable": {"thread_id": "twice", "checkpoint_ns": ""}}
    _hand_put([a, mem], "twice", 1, None, 0)
    b.get_tuple(conf)  # both savers know checkpoint 1 as the newest
    _hand_put([a, mem], "twice", 2, 1, 1)
    _hand_put([b], "twice", 2, 1, 1)
    ids = lambda s, **kw: [t.config["configurable"]["checkpoint_id"] for t in s.list(conf, **kw)]  # noqa: E731
    assert ids(a) == ids(mem) == [_ck(2), _ck(1)]
    assert ids(a, limit=2) == [_ck(2), _ck(1)]

    conf = {"configurable": {"thread_id": "reparented", "checkpoint_ns": ""}}
    for n in (1, 2):
        _hand_put([a, mem], "reparented", n, n - 1 if n > 1 else None, n)
        for s in (a, mem):
            s.put_writes({"configurable": {**conf["configurable"], "checkpoint_id": _ck(n)}},
                         [("c", f"write at {n}")], f"task{n}")
    _hand_put([a, mem], "reparented", 10, 2, 10)
    _hand_put([a, mem], "reparented", 10, 1, 10)  # the newest again, another parent
    for s in (a, mem):
        assert s.get_tuple(conf).parent_config["configurable"]["checkpoint_id"] == _ck(1)
        history = s.get_delta_channel_history(config=conf, channels=["c"])
        assert [w[2] for w in history["c"]["writes"]] == ["write at 1"]


def test_the_newest_checkpoint_is_the_greatest_id_when_another_saver_put_a_greater_one_meanwhile(store, raw):
    """Saver B puts a checkpoint whose id is greater than those saver A goes on to put (ids are
    not in order across writers: another host's clock ahead). A's usual step appended its
    entries to the index blindly, so after four of them the greatest id was no longer among
    the index's last four entries and get_tuple without an id returned A's. Now A's step
    appends only to an index as long as A knows it; else its entry goes where it keeps the
    index sorted. The index, read by SQL, stays sorted."""
    a, b, mem = MysqlSaver(store), MysqlSaver(store), InMemorySaver()
    conf = {"configurable": {"thread_id": "ahead", "checkpoint_ns": ""}}
    _hand_put([a, mem], "ahead", 10, None, 0)
    b.get_tuple(conf)
    _hand_put([b, mem], "ahead", 1000, 10, 1)  # B: an id far ahead
    for i in range(4):  # A goes on from what it knows: ids greater than 10, smaller than 1000
        _hand_put([a, mem], "ahead", 11 + i, 10 + i, 2 + i)
    for s in (a, b, MysqlSaver(store), mem):
        assert s.get_tuple(conf).config["configurable"]["checkpoint_id"] == _ck(1000)
    ids = [t.config["configurable"]["checkpoint_id"] for t in a.list(conf)]
    assert ids == [t.config["configurable"]["checkpoint_id"] for t in mem.list(conf)]
    index = [json.loads(r[0])[0] for r in raw.query(
        "SELECT state_data FROM {t} WHERE session_id = %s AND state_key = 'ix/~' ORDER BY item_index",
        (keys.pack(None, "ahead"),))]
    assert index == sorted(index) and len(index) == 6


def test_a_put_naming_the_version_it_read_refers_to_the_stored_list_in_any_process(store):
    """A message edited in place and put again under the version it was read with (a node
    that edits and returns no update of the channel) is not stored, as LangGraph's savers
    store a channel once per version: also by a process that only read that version (a thread
    resumed elsewhere), which stored the edited message."""
    from langgraph.checkpoint.base import empty_checkpoint

    w, mem = MysqlSaver(store), InMemorySaver()
    v1 = w.get_next_version(None, None)
    conf = {"configurable": {"thread_id": "same-version", "checkpoint_ns": ""}}

    def put(s, n: int, parent, messages) -> None:
        cp = empty_checkpoint()
        cp["id"], cp["channel_values"], cp["channel_versions"] = _ck(n), {"messages": messages}, {"messages": v1}
        c = {"configurable": {**conf["configurable"], **({"checkpoint_id": _ck(parent)} if parent else {})}}
        s.put(c, cp, {"step": n}, {"messages": v1} if parent is None else {})

    for s in (w, mem):
        put(s, 1, None, [HumanMessage(content="hi", id="h1"), AIMessage(content="hello", id="a1")])
    resumed = MysqlSaver(store)  # another process: it only reads the version
    for s in (resumed, mem):
        loaded = s.get_tuple(conf).checkpoint["channel_values"]["messages"]
        loaded[1].content = "edited in place"
        put(s, 2, 1, loaded)
    for s in (w, MysqlSaver(store), mem):
        assert [m.content for m in s.get_tuple(conf).checkpoint["channel_values"]["messages"]] == ["hi", "hello"]


def test_the_index_stays_sorted_when_another_process_prunes_then_puts_back_to_the_same_length(url, database, store):
    """Saver A knows the index (newest c11, 2 entries). Another process, its clock ahead,
    prunes the thread (1 entry) and puts c1000 (2 entries again): the length A knows, another
    index. A's steps appended after c1000, the index went unsorted and the newest read was
    A's last id. The index's hash row is not the one A last wrote: A's step goes the way that
    keeps the index sorted."""
    a = MysqlSaver(store)
    with MysqlSaver.from_url(url, database_name=database) as b:  # its own store: another process
        _hand_put([a], "aba", 10, None, 0)
        _hand_put([a], "aba", 11, 10, 1)
        b.prune(["aba"], strategy="keep_latest")
        _hand_put([b], "aba", 1000, 11, 2)
        for i in range(5):
            _hand_put([a], "aba", 12 + i, 11 + i, 3 + i)
        conf = {"configurable": {"thread_id": "aba", "checkpoint_ns": ""}}
        for s in (a, b, MysqlSaver(store)):
            assert s.get_tuple(conf).config["configurable"]["checkpoint_id"] == _ck(1000)
        ids = [e[0] for e in store.get_list(None, "aba", "ix/~")]
        assert ids == sorted(ids) == [_ck(n) for n in (11, 12, 13, 14, 15, 16, 1000)]


def test_a_step_on_a_thread_deleted_and_copied_onto_by_another_process_refers_to_its_own_messages(url, database,
                                                                                                  store):
    """A holds thread T2 (a copy of T1) and goes on with its own message. Another process
    deletes T2 and copies T1, which went on differently, onto it: the log comes back under the
    same name and as long as A knows it. A's next step referred to the copy's message where
    its own was (silently another conversation). The log's hash row is not the one A last
    wrote: A writes its messages anew. Compared with InMemorySaver."""
    from langgraph.checkpoint.base import empty_checkpoint

    a, mem = MysqlSaver(store), InMemorySaver()
    v = iter(range(1, 100))
    version = lambda: a.get_next_version(next(v) - 1 or None, None)  # noqa: E731

    def put(s, thread: str, n: int, parent, messages, ver) -> None:
        cp = empty_checkpoint()
        cp["id"], cp["channel_values"], cp["channel_versions"] = _ck(n), {"messages": list(messages)}, {"messages": ver}
        c = {"thread_id": thread, "checkpoint_ns": "", **({"checkpoint_id": _ck(parent)} if parent else {})}
        s.put({"configurable": c}, cp, {"step": n}, {"messages": ver})

    m0, m1 = HumanMessage(content="m0", id="m0"), AIMessage(content="m1", id="m1")
    v1 = version()
    put(a, "T1", 1, None, [m0, m1], v1)
    a.copy_thread("T1", "T2")
    put(mem, "T2", 1, None, [m0, m1], v1)
    loaded = a.get_tuple({"configurable": {"thread_id": "T2", "checkpoint_ns": ""}}).checkpoint["channel_values"]["messages"]
    mine = loaded + [AIMessage(content="x2, T2's own", id="x2")]
    v2 = version()
    for s in (a, mem):
        put(s, "T2", 2, 1, mine, v2)
    v3 = version()
    put(a, "T1", 3, 1, [m0, m1, AIMessage(content="y2, T1's", id="y2")], v3)
    with MysqlSaver.from_url(url, database_name=database) as b:  # another process
        b.delete_thread("T2")
        b.copy_thread("T1", "T2")
    mem.delete_thread("T2")
    put(mem, "T2", 1, None, [m0, m1], v1)
    put(mem, "T2", 3, 1, [m0, m1, AIMessage(content="y2, T1's", id="y2")], v3)
    v4 = version()
    for s in (a, mem):
        put(s, "T2", 4, 3, mine + [HumanMessage(content="z3", id="z3")], v4)
    conf = {"configurable": {"thread_id": "T2", "checkpoint_ns": "", "checkpoint_id": _ck(4)}}
    got = [m.content for m in MysqlSaver(store).get_tuple(conf).checkpoint["channel_values"]["messages"]]
    assert got == [m.content for m in mem.get_tuple(conf).checkpoint["channel_values"]["messages"]]
    assert got == ["m0", "m1", "x2, T2's own", "z3"]


@pytest.mark.parametrize("channels, ahead", [(3, False), (1, True), (3, True)])
def test_copied_onto_with_several_lists_and_by_the_transaction_way(url, database, store, channels, ahead):
    """The case above with three list channels (each attempt found one log rewritten, and the
    put gave up), and with a checkpoint of another process whose id is ahead of A's (A's steps
    then go the transaction way, whose appends checked lengths only and referred to the copy's
    messages). Compared with InMemorySaver."""
    from langgraph.checkpoint.base import empty_checkpoint

    a, mem = MysqlSaver(store), InMemorySaver()
    names = [f"l{i}" for i in range(channels)]
    n_version = iter(range(1, 100))
    version = lambda: a.get_next_version(next(n_version) - 1 or None, None)  # noqa: E731

    def put(s, thread: str, n: int, parent, lists: dict, ver) -> None:
        cp = empty_checkpoint()
        cp["id"], cp["channel_values"] = _ck(n), {c: list(v) for c, v in lists.items()}
        cp["channel_versions"] = {c: ver for c in lists}
        c = {"thread_id": thread, "checkpoint_ns": "", **({"checkpoint_id": _ck(parent)} if parent else {})}
        s.put({"configurable": c}, cp, {"step": n}, {c: ver for c in lists})

    def load(s, thread: str) -> dict:
        return s.get_tuple({"configurable": {"thread_id": thread, "checkpoint_ns": ""}}).checkpoint["channel_values"]

    base = {c: [HumanMessage(content=f"{c}-0", id=f"{c}0"), AIMessage(content=f"{c}-1", id=f"{c}1")] for c in names}
    v1 = version()
    put(a, "T1", 1, None, base, v1)
    a.copy_thread("T1", "T2")
    put(mem, "T2", 1, None, base, v1)
    parent = 1
    with MysqlSaver.from_url(url, database_name=database) as b:  # another process, its clock ahead
        if ahead:
            vb = version()
            seen = load(b, "T2")
            theirs = {c: seen[c] + [AIMessage(content=f"{c}: B's", id=f"{c}b")] for c in names}
            for s in (b, mem):
                put(s, "T2", 1000, 1, theirs, vb)
            parent = 1000
        seen = load(a, "T2")
        mine = {c: seen[c] + [AIMessage(content=f"{c}: T2's own", id=f"{c}x")] for c in names}
        v2 = version()
        for s in (a, mem):
            put(s, "T2", 2, parent, mine, v2)
        v3 = version()
        t1 = {c: base[c] + [AIMessage(content=f"{c}: T1's", id=f"{c}y"), AIMessage(content=f"{c}: T1's too", id=f"{c}w")]
              for c in names}
        if not ahead:
            t1 = {c: v[:3] for c, v in t1.items()}  # as long as A knows T2's logs
        put(a, "T1", 3, 1, t1, v3)
        b.delete_thread("T2")
        b.copy_thread("T1", "T2")
    mem.delete_thread("T2")
    put(mem, "T2", 1, None, base, v1)
    put(mem, "T2", 3, 1, t1, v3)
    v4 = version()
    nxt = {c: mine[c] + [HumanMessage(content=f"{c}-z", id=f"{c}z")] for c in names}
    for s in (a, mem):
        put(s, "T2", 4, 2, nxt, v4)
    conf = {"configurable": {"thread_id": "T2", "checkpoint_ns": "", "checkpoint_id": _ck(4)}}
    got = {c: [m.content for m in v] for c, v in MysqlSaver(store).get_tuple(conf).checkpoint["channel_values"].items()}
    want = {c: [m.content for m in v] for c, v in mem.get_tuple(conf).checkpoint["channel_values"].items()}
    assert got == want and got["l0"][-2:] == ["l0: T2's own", "l0-z"]


def test_copy_thread_copies_every_checkpoint_and_the_copy_lives_on_its_own(saver, raw):
    g = chat_graph(saver)
    for i in range(3):
        turn(g, "cp-src", i)
    src = history(g, "cp-src")
    saver.copy_thread("cp-src", "cp-dst")
    assert history(g, "cp-dst") == src  # every checkpoint, as the source's
    rows = lambda t: raw.query("SELECT COUNT(*) FROM {t} WHERE session_id = %s", (keys.pack(None, t),))[0][0]  # noqa: E731
    assert rows("cp-dst") == rows("cp-src") > 0
    turn(g, "cp-dst", 9)  # the copy goes on; the source does not move
    assert history(g, "cp-src") == src and len(history(g, "cp-dst")) > len(src)
    saver.delete_thread("cp-src")
    assert rows("cp-src") == 0 and saver.get_tuple({"configurable": {"thread_id": "cp-src"}}) is None
    last = g.get_state({"configurable": {"thread_id": "cp-dst"}}).values["messages"]
    assert [m.content for m in last][-2:] == ["hello 9", last[-1].content] and len(last) == 8


def test_copy_thread_onto_an_existing_thread_writes_nothing_and_of_nothing_copies_nothing(saver, raw):
    from mysql_state import SessionExistsError

    g = chat_graph(saver)
    turn(g, "cx-a", 0)
    turn(g, "cx-b", 0)
    before = raw.query("SELECT state_key, item_index, state_data FROM {t} WHERE session_id = %s ORDER BY 1, 2",
                       (keys.pack(None, "cx-b"),))
    with pytest.raises(SessionExistsError):
        saver.copy_thread("cx-a", "cx-b")
    assert raw.query("SELECT state_key, item_index, state_data FROM {t} WHERE session_id = %s ORDER BY 1, 2",
                     (keys.pack(None, "cx-b"),)) == before
    saver.copy_thread("cx-none", "cx-new")
    assert raw.query("SELECT COUNT(*) FROM {t} WHERE session_id = %s", (keys.pack(None, "cx-new"),))[0][0] == 0


def test_prune_delete_removes_the_threads_whole_and_leaves_the_others(saver, raw):
    g = chat_graph(saver)
    for t in ("pr-1", "pr-2", "pr-keep"):
        turn(g, t, 0)
        turn(g, t, 1)
    keep = history(g, "pr-keep")
    saver.prune(["pr-1", "pr-2"], strategy="delete")
    for t in ("pr-1", "pr-2"):
        assert raw.query("SELECT COUNT(*) FROM {t} WHERE session_id = %s", (keys.pack(None, t),))[0][0] == 0
        assert saver.get_tuple({"configurable": {"thread_id": t}}) is None
    assert history(g, "pr-keep") == keep
    assert raw.query("SELECT COUNT(*) FROM {t} WHERE session_id = %s", (keys.pack(None, "pr-keep"),))[0][0] > 0


def test_a_bytearray_in_a_list_channel_is_stored_and_read_back(store):
    """A bytearray item crashed put (its serialised form, a bytearray, is unhashable), and so
    did a load of a thread that held one (audit of 2026-12-07): both as InMemorySaver."""

    class S(TypedDict):
        items: Annotated[list, operator.add]

    def build(saver):
        g = StateGraph(S)
        g.add_node("n", lambda s: {"items": [bytearray(b"from node"), b"raw"]})
        g.add_edge(START, "n")
        return g.compile(checkpointer=saver)

    cfg = {"configurable": {"thread_id": "bytes"}}
    want = build(InMemorySaver()).invoke({"items": [b"x"]}, cfg)
    assert build(MysqlSaver(store)).invoke({"items": [b"x"]}, cfg) == want
    assert build(MysqlSaver(store)).get_state(cfg).values == want  # a new saver: the load
    plain = MysqlSaver(store)
    plain.check_edits = False  # written without fingerprints: the load still makes them
    build(plain).invoke({"items": [b"y"]}, {"configurable": {"thread_id": "bytes-2"}})
    assert build(MysqlSaver(store)).get_state({"configurable": {"thread_id": "bytes-2"}}).values == {
        "items": [b"y", bytearray(b"from node"), b"raw"]}


def test_the_last_special_write_wins_whatever_the_writers_clock(store, monkeypatch):
    """A task's calls were ordered by each process's clock (the row key): a process whose clock
    ran behind wrote an interrupt that sorted before the stale one it replaced, and the stale
    one was read (audit of 2026-12-07). A special write now has one row per (task, index),
    written over: the last committed wins. (A regular write made twice for one task keeps the
    first by the writers' clocks: langgraph.md.)"""
    import time as time_module

    a, b = MysqlSaver(store), MysqlSaver(store)
    conf = {"thread_id": "skew", "checkpoint_ns": ""}
    ck = {"v": 4, "id": "1f" + "0" * 34, "ts": "", "channel_values": {}, "channel_versions": {}, "versions_seen": {}}
    stored = a.put({"configurable": conf}, ck, {"source": "loop", "step": 0}, {})
    a.put_writes(stored, [("__interrupt__", "first question"), ("out", 1)], "task-1")
    real = time_module.time_ns
    monkeypatch.setattr(time_module, "time_ns", lambda: real() - 60 * 10**9)  # b's clock: a minute behind
    b.put_writes(stored, [("__interrupt__", "second question"), ("out", 2)], "task-1")
    monkeypatch.setattr(time_module, "time_ns", real)
    for reader in (a, b, MysqlSaver(store)):
        got = reader.get_tuple({"configurable": conf})
        assert [w[2] for w in got.pending_writes if w[1] == "__interrupt__"] == ["second question"]
        assert len([w for w in got.pending_writes if w[1] == "out"]) == 1  # one per (task, index)


def test_a_checkpoint_row_the_index_lists_and_the_table_lost_is_damage_not_no_state(saver, raw):
    """A checkpoint row deleted behind the saver's back while the thread's index still lists
    it: get_tuple answered None (a new conversation) and list left it out silently (audit of
    2026-12-07). A row deleted with its index entry (delete_thread) is no checkpoint, as is an
    id no checkpoint has."""
    graph = chat_graph(saver)
    for i in range(3):
        turn(graph, "lost", i)
    cfg = {"configurable": {"thread_id": "lost", "checkpoint_ns": ""}}
    newest = saver.get_tuple(cfg).config["configurable"]["checkpoint_id"]
    older = [t.config["configurable"]["checkpoint_id"] for t in saver.list(cfg)][3]
    raw.execute("DELETE FROM {t} WHERE session_id = %s AND state_key = %s",
                (keys.pack(None, "lost"), f"cp/~/{older}"))
    with pytest.raises(CorruptStateError, match="missing, but the thread's index lists it"):
        list(saver.list(cfg))
    assert saver.get_tuple(cfg).config["configurable"]["checkpoint_id"] == newest  # the newest is there
    raw.execute("DELETE FROM {t} WHERE session_id = %s AND state_key = %s",
                (keys.pack(None, "lost"), f"cp/~/{newest}"))
    for read in (lambda: saver.get_tuple(cfg), lambda: MysqlSaver(saver.store).get_tuple(cfg),
                 lambda: graph.get_state({"configurable": {"thread_id": "lost"}})):
        with pytest.raises(CorruptStateError, match="missing"):
            read()
    assert saver.get_tuple({"configurable": {"thread_id": "lost", "checkpoint_ns": "", "checkpoint_id": "1f-none"}}) is None
    saver.delete_thread("lost")
    assert saver.get_tuple(cfg) is None and list(saver.list(cfg)) == []


class _SlowSaver(MysqlSaver):
    """A saver whose put takes a while: a cancellation lands while it runs."""

    def put(self, config, checkpoint, metadata, new_versions):
        import time

        time.sleep(0.4)
        return super().put(config, checkpoint, metadata, new_versions)


def test_a_cancelled_aput_ends_before_the_cancellation_reaches_the_caller_and_a_closed_saver_says_so(store):
    """As the async store's operations: a put cancelled while it runs is finished (stored or
    not) when the caller sees the cancellation, so the caller's next write never lands before
    it; before, the coroutine returned at once while the put ran on. A closed saver raises the
    library's StoreClosedError, as the async store does, not a bare RuntimeError."""
    import time

    from langgraph.checkpoint.base import empty_checkpoint

    from mysql_state import StoreClosedError

    s = _SlowSaver(store)
    cp = empty_checkpoint()
    cp["id"], cp["channel_values"], cp["channel_versions"] = _ck(1), {}, {}
    conf = {"configurable": {"thread_id": "cancelled", "checkpoint_ns": ""}}

    async def go() -> float:
        task = asyncio.create_task(s.aput(conf, cp, {"step": 0}, {}))
        await asyncio.sleep(0.1)  # the put is running in its thread
        task.cancel()
        started = time.monotonic()
        with pytest.raises(asyncio.CancelledError):
            await task
        return time.monotonic() - started

    waited = asyncio.run(go())
    assert waited >= 0.2, waited  # it waited for the put to end
    assert MysqlSaver(store).get_tuple(conf).checkpoint["id"] == _ck(1)  # and the put was stored
    s.close()
    with pytest.raises(StoreClosedError, match="MysqlSaver is closed"):
        asyncio.run(s.aget_tuple(conf))


def test_each_async_method_takes_the_sync_methods_parameters():
    """The saver's async twins are written by hand (LangGraph names them): each must take its
    sync method's parameters exactly (names, kinds, defaults, hints), so the two cannot drift."""
    import inspect

    from mysql_state.langgraph import MysqlSaver

    names = ["get_tuple", "list", "put", "put_writes", "delete_thread", "delete_for_runs", "copy_thread", "prune",
             "get_delta_channel_history"]
    for name in names:
        sync, twin = inspect.signature(getattr(MysqlSaver, name)), inspect.signature(getattr(MysqlSaver, "a" + name))
        assert list(sync.parameters.values()) == list(twin.parameters.values()), name
    overridden = {n[1:] for n, v in vars(MysqlSaver).items() if n.startswith("a") and callable(v) and n[1:] in vars(MysqlSaver)}
    assert overridden == set(names), overridden ^ set(names)
