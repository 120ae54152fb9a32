"""Maintenance never looks like user activity: the store's ``delete_keys(..., maintenance=True)``
(and ``tx.delete``/``tx.save``/``tx.save_list`` with ``maintenance=True``), used by
``MysqlSaver.prune``/``delete_for_runs`` and ``MysqlStore.sweep_ttl``.

Plain SQL is the truth: every row of a session is set 40 days back first; after the
maintenance, the catalog row's ``updated_at`` and version are what they were, the rows the
maintenance did not rewrite are untouched, and ``store.prune(older_than=30 days)`` still
deletes the otherwise idle thread / memory."""

from __future__ import annotations

import datetime as dt
import time

import pytest

pytest.importorskip("langgraph", reason="needs the langgraph extra (make test installs it)")

from langchain_core.messages import HumanMessage  # noqa: E402
from langgraph.graph import END, START, MessagesState, StateGraph  # noqa: E402

from mysql_state import keys  # noqa: E402
from mysql_state.langgraph import MysqlSaver, MysqlStore  # noqa: E402

CATALOG = keys.CATALOG_SESSION
MONTH = dt.timedelta(days=30)


def age(raw, sid: str, days: int = 40) -> None:
    """Every row of the session and its catalog row ``days`` back (version unchanged)."""
    raw.execute("UPDATE {t} SET updated_at = NOW() - INTERVAL %s DAY WHERE session_id = %s", (days, sid))
    raw.execute("UPDATE {t} SET updated_at = NOW() - INTERVAL %s DAY WHERE session_id = %s AND state_key = %s",
                (days, CATALOG, sid))


def catalog_row(raw, sid: str):
    return raw.query("SELECT version, updated_at FROM {t} WHERE session_id = %s AND state_key = %s", (CATALOG, sid))


def rows_with_times(raw, sid: str) -> dict:
    return {(r[0], r[1]): (r[2], r[3], r[4]) for r in raw.query(
        "SELECT state_key, item_index, state_data, version, updated_at FROM {t} WHERE session_id = %s", (sid,))}


def chat(saver):
    b = StateGraph(MessagesState)
    b.add_node("agent", lambda s: {"messages": [("ai", f"reply {len(s['messages'])}")]})
    b.add_edge(START, "agent")
    b.add_edge("agent", END)
    return b.compile(checkpointer=saver)


# ---- the store's API -----------------------------------------------------------------------------


def test_delete_keys_in_maintenance_leaves_activity_and_other_rows_as_they_were(store, raw):
    sid = keys.pack("alice", "s1")
    store.save("alice", "s1", "a", {"v": 1})
    store.save("alice", "s1", "b", {"v": 2})
    store.save_list("alice", "s1", "log", [1, 2, 3])
    store.save("alice", "s1", "keep", {"v": 3})
    age(raw, sid)
    cat, others = catalog_row(raw, sid), {k: v for k, v in rows_with_times(raw, sid).items() if k[0] == "keep"}
    assert store.delete_keys("alice", "s1", ["a", "log", "a", "absent"], maintenance=True) == 5  # a, 3 items, hash
    left = rows_with_times(raw, sid)
    assert sorted(left) == [("b", 0), ("keep", 0)]
    assert catalog_row(raw, sid) == cat
    assert {k: v for k, v in left.items() if k[0] == "keep"} == others
    assert store.prune(older_than=MONTH, user_id="alice").sessions == 1  # still idle: pruned
    assert raw.rows(sid) == [] and catalog_row(raw, sid) == []


def test_delete_keys_without_maintenance_is_activity(store, raw):
    sid = keys.pack("alice", "s2")
    store.save("alice", "s2", "a", 1)
    store.save("alice", "s2", "b", 2)
    age(raw, sid)
    before = catalog_row(raw, sid)
    assert store.delete_keys("alice", "s2", ["a"]) == 1
    after = catalog_row(raw, sid)
    assert after[0][0] > before[0][0] and after[0][1] > before[0][1]
    assert store.prune(older_than=MONTH, user_id="alice").sessions == 0
    assert store.get("alice", "s2", "b") == 2


def test_delete_keys_of_a_sessions_last_keys_removes_its_catalog_row(store, raw):
    sid = keys.pack(None, "s3")
    store.save(None, "s3", "a", 1)
    store.save_list(None, "s3", "l", ["x"])
    assert store.delete_keys(None, "s3", ("a", "l"), maintenance=True) == 3
    assert raw.rows(sid) == [] and catalog_row(raw, sid) == []
    assert store.delete_keys(None, "s3", []) == 0


def test_tx_writes_in_maintenance_leave_the_catalog_row(store, raw):
    sid = keys.pack("bob", "s4")
    store.save("bob", "s4", "v", 1)
    store.save_list("bob", "s4", "l", [1])
    store.save("bob", "s4", "d", 0)
    age(raw, sid)
    cat = catalog_row(raw, sid)
    v_before = raw.query("SELECT version FROM {t} WHERE session_id = %s AND state_key = 'v'", (sid,))[0][0]

    def fn(tx):
        tx.save("bob", "s4", "v", 2, maintenance=True)
        tx.save_list("bob", "s4", "l", [1, 2], maintenance=True)
        tx.delete("bob", "s4", "d", maintenance=True)
        return tx.delete_keys("bob", "s4", ["nothing"], maintenance=True)

    assert store.transaction(fn) == 0
    assert catalog_row(raw, sid) == cat
    assert store.get("bob", "s4", "v") == 2 and store.get_list("bob", "s4", "l") == [1, 2]
    assert store.get("bob", "s4", "d") is None
    # the row rewritten has a new version (its content changed: a compare-and-set sees it)
    assert raw.query("SELECT version FROM {t} WHERE session_id = %s AND state_key = 'v'", (sid,))[0][0] > v_before
    assert store.prune(older_than=MONTH, user_id="bob").sessions == 1


def test_bad_arguments_are_refused_before_any_sql(store, raw):
    store.save("alice", "s5", "a", 1)
    before = raw.all_rows()
    for call, err in [
        (lambda: store.delete_keys("alice", "s5", "a"), TypeError),  # one str: its characters
        (lambda: store.delete_keys("alice", "s5", ["a"], maintenance=1), TypeError),
        (lambda: store.delete_keys("alice", "s5", ["a"], maintenance="yes"), TypeError),
        (lambda: store.delete_keys("alice", "s5", ["a", None]), TypeError),
        (lambda: store.delete_keys("alice", "s5", ["a", "x:_hash"]), ValueError),
        (lambda: store.delete_keys("alice", "s5", ["a", ""]), ValueError),
        (lambda: store.delete_keys("alice", "", ["a"]), ValueError),
        (lambda: store.delete_keys("alice", "s5", ["a", "k" * 300]), ValueError),
        (lambda: store.transaction(lambda tx: tx.delete("alice", "s5", "a", maintenance=None)), TypeError),
        (lambda: store.transaction(lambda tx: tx.delete_keys("alice", "s5", ["a"], maintenance=0)), TypeError),
        (lambda: store.transaction(lambda tx: tx.save("alice", "s5", "a", 2, maintenance="no")), TypeError),
    ]:
        with pytest.raises(err):
            call()
    assert raw.all_rows() == before
    with pytest.raises(TypeError, match="maintenance must be a bool"):
        store.delete_keys("alice", "s5", ["a"], maintenance=1)


# ---- the saver and the memory store use it -------------------------------------------------------


def test_saver_prune_and_delete_for_runs_are_not_activity(store, raw):
    saver = MysqlSaver(store, user_id="carol")
    g = chat(saver)
    for thread in ("idle-p", "idle-r"):
        for i in range(3):
            g.invoke({"messages": [HumanMessage(content=f"hi {i}", id=f"h{i}")]},
                     {"configurable": {"thread_id": thread}, "metadata": {"run_id": f"run-{i}"}})
    sids = {t: keys.pack("carol", t) for t in ("idle-p", "idle-r")}
    for sid in sids.values():
        age(raw, sid)
    cats = {t: catalog_row(raw, sid) for t, sid in sids.items()}
    rows_p = rows_with_times(raw, sids["idle-p"])
    saver.prune(["idle-p"], strategy="keep_latest")
    after_p = rows_with_times(raw, sids["idle-p"])
    assert len(after_p) < len(rows_p)  # it pruned
    assert catalog_row(raw, sids["idle-p"]) == cats["idle-p"]
    # what prune kept and did not rewrite is untouched (rows it rewrote compact got new versions)
    untouched = [k for k in after_p if k in rows_p and after_p[k][0] == rows_p[k][0]]
    assert untouched and all(after_p[k] == rows_p[k] for k in untouched)
    assert g.get_state({"configurable": {"thread_id": "idle-p"}}).values["messages"][-1].content == "reply 5"
    rows_r = rows_with_times(raw, sids["idle-r"])
    saver.delete_for_runs(["run-2"])
    after_r = rows_with_times(raw, sids["idle-r"])
    assert len(after_r) < len(rows_r)
    assert catalog_row(raw, sids["idle-r"]) == cats["idle-r"]
    # the rows prune rewrote carry the thread's activity time, not now: the doctor finds nothing
    # (it took them for writes the catalog missed, and its fix made the idle thread active)
    assert [p for p in store.doctor() if p.session_id in sids.values()] == []
    assert [p for p in store.doctor(fix=True) if p.session_id in sids.values()] == []
    assert catalog_row(raw, sids["idle-p"]) == cats["idle-p"]
    report = store.prune(older_than=MONTH, user_id="carol")
    assert report.sessions == 2 and store.list_session_ids("carol") == set()
    saver.close()


def test_memory_sweep_is_not_activity(store, raw):
    memory = MysqlStore(store, user_id="dave")
    sid = keys.pack("dave", "langgraph-store")
    memory.put(("n",), "short", {"v": 1}, ttl=0.5 / 60)
    memory.put(("n",), "stays", {"v": 2})
    memory.put(("m",), "gone", {"v": 3}, ttl=0.5 / 60)
    memory.put(("o",), "other", {"v": 4})
    time.sleep(1.0)
    age(raw, sid)
    cat, before = catalog_row(raw, sid), rows_with_times(raw, sid)
    assert memory.sweep_ttl() == 2
    after = rows_with_times(raw, sid)
    assert catalog_row(raw, sid) == cat
    rewritten = {k for k in after if after[k] != before.get(k)}
    assert rewritten == {("in..", 0)}  # the namespace marker's item count, nothing else
    assert {k: after[k] for k in after if k not in rewritten} == {k: before[k] for k in after if k not in rewritten}
    assert [i.key for i in memory.search(())] == ["stays", "other"]
    assert store.prune(older_than=MONTH, user_id="dave").sessions == 1  # idle since the user's last put
    assert memory.search(()) == []


def test_doctor_fix_never_renumbers_a_thread_s_log_into_other_messages(store, raw):
    """A LangGraph message log that lost a middle row: the checkpoints that refer to it raise a
    typed error. doctor(fix=True) renumbered the log's rows, so those checkpoints read other
    messages, shifted, with no error, and the doctor then said healthy. Now it reports the log,
    leaves its rows as they are, and the reads still raise."""
    from mysql_state import CorruptStateError

    saver = MysqlSaver(store, user_id="dora")
    g = chat(saver)
    conf = {"configurable": {"thread_id": "t"}}
    for i in range(3):
        g.invoke({"messages": [HumanMessage(content=f"hi {i}", id=f"h{i}")]}, conf)
    sid = keys.pack("dora", "t")
    log = raw.query("SELECT DISTINCT state_key FROM {t} WHERE session_id = %s AND state_key LIKE 'log/%%'"
                    " AND state_key NOT LIKE '%%:_hash'", (sid,))[0][0]
    raw.execute("DELETE FROM {t} WHERE session_id = %s AND state_key = %s AND item_index = 1", (sid, log))
    before = raw.query("SELECT item_index FROM {t} WHERE session_id = %s AND state_key = %s ORDER BY item_index",
                       (sid, log))
    with pytest.raises(CorruptStateError):
        list(g.get_state_history(conf))
    fixed = [p for p in store.doctor(fix=True) if p.session_id == sid]
    assert [(p.key, p.fixed) for p in fixed] == [(log, False)] and "not fixed" in fixed[0].message, fixed
    assert raw.query("SELECT item_index FROM {t} WHERE session_id = %s AND state_key = %s ORDER BY item_index",
                     (sid, log)) == before
    with pytest.raises(CorruptStateError):
        list(g.get_state_history(conf))
    assert [p.key for p in store.doctor() if p.session_id == sid] == [log]
    saver.close()


# ---- progress of the saver's prune and the memory's sweep ----------------------------------------


def checkpoints(raw, user: str) -> dict:
    """``{thread: checkpoint rows}`` of ``user``'s sessions, by plain SQL."""
    return {sid.split(":", 1)[1]: n for sid, n in raw.query(
        "SELECT session_id, COUNT(*) FROM {t} WHERE session_id LIKE %s AND state_key LIKE 'cp/%%'"
        " GROUP BY session_id", (user + ":%",))}


def test_saver_prune_reports_the_threads_pruned_of_those_given_and_sends_nothing_more(store, raw):
    """``progress(done, total)`` before the first thread, then after each thread's transaction
    (``"delete"``: after its one): ``done`` the threads pruned, ``total`` those given. Two sets
    of threads alike, one pruned with a callback: the same statements."""
    import asyncio
    import threading

    saver = MysqlSaver(store, user_id="erin")
    g = chat(saver)
    threads = [f"{side}{i}" for side in "ab" for i in range(4)] + ["kept"]
    for thread in threads:
        for i in range(3):
            g.invoke({"messages": [HumanMessage(content=f"hi {i}", id=f"h{i}")]}, {"configurable": {"thread_id": thread}})
    assert checkpoints(raw, "erin") == {t: 9 for t in threads}  # 3 invocations of 3 checkpoints each
    _, sent = raw.statements(lambda: saver.prune([f"a{i}" for i in range(4)]))
    calls: list = []
    _, sent_with_progress = raw.statements(
        lambda: saver.prune([f"b{i}" for i in range(4)], progress=lambda done, total: calls.append((done, total))))
    assert calls == [(0, 4), (1, 4), (2, 4), (3, 4), (4, 4)]
    assert sent_with_progress == sent
    assert checkpoints(raw, "erin") == {**{t: 1 for t in threads}, "kept": 9}
    assert g.get_state({"configurable": {"thread_id": "b3"}}).values["messages"][-1].content == "reply 5"
    calls.clear()
    saver.prune(["a0", "b0"], strategy="delete", progress=lambda *a: calls.append(a))
    assert calls == [(0, 2), (2, 2)] and "a0" not in checkpoints(raw, "erin") and "b0" not in checkpoints(raw, "erin")
    calls.clear()
    saver.prune([], progress=lambda *a: calls.append(a))
    assert calls == [(0, 0)]
    seen: list = []
    asyncio.run(saver.aprune(["kept"], progress=lambda *a: seen.append((threading.current_thread() is
                                                                          threading.main_thread(), *a))))
    assert seen == [(False, 0, 1), (False, 1, 1)] and checkpoints(raw, "erin")["kept"] == 1  # in the worker thread
    before = raw.com_counts()
    with pytest.raises(TypeError, match="progress must be a callable, got str: 'bar'"):
        saver.prune(["a1"], progress="bar")

    async def later(done, total):
        pass

    with pytest.raises(TypeError, match="progress must be a plain function"):
        asyncio.run(saver.aprune(["a1"], progress=later))
    assert raw.com_counts() == before  # refused before any statement
    saver.close()


def test_a_progress_callback_that_raises_stops_the_saver_s_prune_with_each_thread_whole(store, raw):
    """The callback's error is the call's; the threads before it stay pruned (each in its own
    transaction), the rest are as they were, and a prune run again finishes."""
    saver = MysqlSaver(store, user_id="fred")
    g = chat(saver)
    threads = [f"t{i}" for i in range(4)]
    for thread in threads:
        for i in range(2):
            g.invoke({"messages": [HumanMessage(content=f"hi {i}", id=f"h{i}")]}, {"configurable": {"thread_id": thread}})

    def stop(done: int, total: int) -> None:
        if done == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        saver.prune(threads, progress=stop)
    assert checkpoints(raw, "fred") == {"t0": 1, "t1": 1, "t2": 6, "t3": 6}
    saver.prune(threads)
    assert checkpoints(raw, "fred") == {t: 1 for t in threads}
    assert [g.get_state({"configurable": {"thread_id": t}}).values["messages"][-1].content for t in threads] == [
        "reply 3"] * 4
    saver.close()


def test_memory_sweep_reports_the_items_removed_of_those_expired_and_sends_nothing_more(store, raw):
    """``progress(done, total)`` once the expired items are found, then after each batch:
    ``done`` the items removed (the last call's is the result), ``total`` those found expired.
    Two memories alike, one swept with a callback: the same statements. A callback that raises
    stops the sweep there, the batches before it removed; the next sweep removes the rest."""
    import asyncio

    memories = {user: MysqlStore(store, user_id=user) for user in ("warm", "quiet", "told", "stopped", "async")}
    for memory in memories.values():
        for i in range(7):
            memory.put(("n",), f"gone{i}", {"v": i}, ttl=0.5 / 60)
        memory.put(("n",), "stays", {"v": 0})
    time.sleep(1.0)

    def items(user: str) -> list:
        """The item rows of the memory, by plain SQL."""
        from mysql_state.langgraph._memory_layout import ITEMS, item_key

        stored = {k for (k,) in raw.query("SELECT state_key FROM {t} WHERE session_id = %s",
                                          (keys.pack(user, "langgraph-store"),))}
        return sorted(stored & {item_key(ITEMS, ("n",), k) for k in [f"gone{i}" for i in range(7)] + ["stays"]})

    assert len(items("told")) == 8
    assert memories["warm"].sweep_ttl(batch=3) == 7  # the connections both calls use, opened before they are counted
    removed, sent = raw.statements(lambda: memories["quiet"].sweep_ttl(batch=3))
    calls: list = []
    told, sent_with_progress = raw.statements(
        lambda: memories["told"].sweep_ttl(batch=3, progress=lambda done, total: calls.append((done, total))))
    assert removed == told == 7 and calls == [(0, 7), (3, 7), (6, 7), (7, 7)]
    assert sent_with_progress == sent
    assert len(items("told")) == 1 and [i.key for i in memories["told"].search(("n",))] == ["stays"]
    calls.clear()
    assert memories["told"].sweep_ttl(progress=lambda *a: calls.append(a)) == 0 and calls == [(0, 0)]

    def stop(done: int, total: int) -> None:
        if done:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        memories["stopped"].sweep_ttl(batch=3, progress=stop)
    assert len(items("stopped")) == 5  # 3 removed, the 4 left expired and the one that stays
    assert memories["stopped"].sweep_ttl() == 4 and len(items("stopped")) == 1
    seen: list = []
    assert asyncio.run(memories["async"].asweep_ttl(batch=5, progress=lambda *a: seen.append(a))) == 7
    assert seen == [(0, 7), (5, 7), (7, 7)]
    with pytest.raises(TypeError, match="progress must be a callable, got int: 5"):
        memories["async"].sweep_ttl(progress=5)
