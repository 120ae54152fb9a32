"""Many processes, one session: consistent reads of several keys, versioned saves with exactly one
winner, session leases, and the primitives pop_list and transaction. Races are run with two
store objects AND with real processes (multiprocessing, spawn)."""

from __future__ import annotations

import asyncio
import multiprocessing
import threading
import time

import pymysql
import pytest

from mysql_state import (
    LockTimeoutError,
    MysqlAgentStateStore,
    StaleStateError,
    UNVERSIONED,
)
from mysql_state.aio import AsyncMysqlAgentStateStore

from . import procs
from .conftest import connect
from .test_faults import check_list_rows

SPAWN = multiprocessing.get_context("spawn")


@pytest.fixture
def other(url, database, store):
    s = MysqlAgentStateStore.from_url(url, database_name=database)
    yield s
    s.close()


class CountStatements:
    """Counts statements sent by pymysql cursors in this process."""

    def __init__(self, monkeypatch):
        self.n = 0
        real = pymysql.cursors.Cursor.execute

        def execute(cur, query, args=None):
            self.n += 1
            return real(cur, query, args)

        monkeypatch.setattr(pymysql.cursors.Cursor, "execute", execute)


# ---- get_many -----------------------------------------------------------------------------------


def test_get_many_reads_values_and_lists_in_one_statement(store, monkeypatch):
    store.save("u", "s", "summary", {"t": "x"})
    store.save_list("u", "s", "ctx", [1, 2, 3])
    store.save_list("u", "s", "empty", [])
    store.save("u", "other", "summary", "not this session")
    count = CountStatements(monkeypatch)
    got = store.get_many("u", "s", values=["summary", "missing"], lists=["ctx", "empty", "nolist"])
    assert count.n == 1
    assert got == {"summary": {"t": "x"}, "ctx": [1, 2, 3], "empty": []}
    versioned = store.get_many("u", "s", values=["summary"], lists=["ctx"], versioned=True)
    assert versioned["summary"].version == 1 and versioned["ctx"] == ([1, 2, 3], 1)
    assert store.get_many("u", "s", values=["ctx"], versioned=True)["ctx"] == (1, 1)  # row 0, the list's version
    with pytest.raises(TypeError, match="values must be a list of keys"):
        store.get_many("u", "s", values="summary")
    assert store.get_many("u", "s") == {}


def test_get_many_never_sees_half_of_a_save_many(store, other):
    stop = threading.Event()
    torn = []

    def writer():
        i = 0
        while not stop.is_set():
            i += 1
            store.save_many("u", "s", values={"rest": {"n": i}}, lists={"ctx": list(range(i % 40))})

    def reader():
        while not stop.is_set():
            got = other.get_many("u", "s", values=["rest"], lists=["ctx"])
            if got and len(got["ctx"]) != got["rest"]["n"] % 40:
                torn.append(got)

    threads = [threading.Thread(target=writer), threading.Thread(target=reader)]
    for t in threads:
        t.start()
    time.sleep(2)
    stop.set()
    for t in threads:
        t.join()
    assert not torn


# ---- versioned lists and save_many ---------------------------------------------------------------


def test_list_compare_and_set_contract(store, raw):
    assert store.get_list_versioned("u", "s", "m") == ([], 0)
    v1 = store.save_list_if_version("u", "s", "m", ["a", "b"], 0)
    assert v1 == 1
    assert store.save_list_if_version("u", "s", "m", ["x"], 0) == UNVERSIONED  # exists now
    items, version = store.get_list_versioned("u", "s", "m")
    assert (items, version) == (["a", "b"], 1)
    v2 = store.save_list_if_version("u", "s", "m", ["a", "b", "c"], version)
    assert v2 == 2
    assert store.save_list_if_version("u", "s", "m", ["stale"], version) == UNVERSIONED
    # still incremental: only the new item row was written
    assert {r[2]: r[4] for r in raw.rows("u:s") if r[1] == "m"} == {0: 1, 1: 1, 2: 1}
    assert store.save_list_if_version("u", "s", "m", ["z"], UNVERSIONED) == 3
    assert check_list_rows(raw, "u:s", "m") == ["z"]
    # a value under the key: its version is the key's version; a list CAS replaces it
    store.save("u", "s", "v", "value")
    assert store.save_list_if_version("u", "s", "v", [1], 1) == 2
    assert store.get_list_versioned("u", "s", "v") == ([1], 2)


def test_get_many_gives_every_list_its_own_version(store, raw):
    """Every list after the first in lists= read as version 1 (its hash row's version was not
    read), so a compare-and-set with it was refused or checked against the wrong number."""
    for items in ([1, 2], [1, 2, 3], [1, 9, 3]):
        store.save_list("u", "s", "m", items)
    store.save_list("u", "s", "x", ["a"])
    store.save_list("u", "s", "e", [])
    store.save_list("u", "s", "e", [])  # unchanged: still version 1
    stored = dict(raw.query("SELECT state_key, version FROM {t} WHERE session_id = 'u:s' AND state_key LIKE '%%:_hash'"))
    assert stored == {"m:_hash": 3, "x:_hash": 1, "e:_hash": 1}
    for lists in (["m"], ["x", "m"], ["x", "e", "m"], ["e", "m", "x"]):
        got = store.get_many("u", "s", lists=lists, versioned=True)
        assert {k: v.version for k, v in got.items()} == {k: stored[k + ":_hash"] for k in lists}, lists
        assert got["m"].value == [1, 9, 3]
    version = store.get_many("u", "s", lists=["x", "m"], versioned=True)["m"].version
    assert store.save_list_if_version("u", "s", "m", [1, 9, 3, 4], version) == 4


def test_save_many_with_expected_versions_is_all_or_nothing(store, raw):
    plans = store.save_many("u", "s", values={"rest": 1}, lists={"ctx": [1]}, expected_versions={"rest": 0, "ctx": 0})
    assert plans.versions == {"rest": 1, "ctx": 1}
    before = raw.rows("u:s")
    with pytest.raises(StaleStateError) as err:
        store.save_many("u", "s", values={"rest": 2}, lists={"ctx": [1, 2]}, expected_versions={"rest": 0})
    assert (err.value.key, err.value.expected, err.value.stored) == ("rest", 0, 1)
    assert "rest" in str(err.value) and "expected version 0" in str(err.value)
    with pytest.raises(StaleStateError) as err:
        store.save_many("u", "s", values={"rest": 2}, lists={"ctx": [1, 2]}, expected_versions={"ctx": 5, "rest": 1})
    assert err.value.key == "ctx"
    assert raw.rows("u:s") == before  # nothing written, the list's new item neither
    assert store.get_list("u", "s", "ctx") == [1]
    plans = store.save_many("u", "s", values={"rest": 2}, lists={"ctx": [1, 2]}, expected_versions={"rest": 1, "ctx": 1})
    assert plans.versions == {"rest": 2, "ctx": 2}
    with pytest.raises(ValueError, match="not saved"):
        store.save_many("u", "s", values={"rest": 3}, expected_versions={"nope": 1})


def test_two_stores_save_the_same_loaded_state_exactly_one_wins(store, other, raw):
    store.save_many("u", "s", values={"rest": {"turn": 0}}, lists={"ctx": ["hi"]})
    a = store.get_many("u", "s", values=["rest"], lists=["ctx"], versioned=True)
    b = other.get_many("u", "s", values=["rest"], lists=["ctx"], versioned=True)
    expected = {"rest": a["rest"].version}
    store.save_many("u", "s", values={"rest": {"turn": 1}}, lists={"ctx": ["hi", "from a"]}, expected_versions=expected)
    with pytest.raises(StaleStateError):
        other.save_many("u", "s", values={"rest": {"turn": 1}}, lists={"ctx": ["hi", "from b"]},
                        expected_versions={"rest": b["rest"].version})
    assert store.get_many("u", "s", values=["rest"], lists=["ctx"]) == {"rest": {"turn": 1}, "ctx": ["hi", "from a"]}
    assert check_list_rows(raw, "u:s", "ctx") == ["hi", "from a"]


# ---- the AgentScope repository, two real processes ---------------------------------------------


def test_two_processes_load_and_save_one_session_exactly_one_wins(url, database, store, raw):
    agentscope = pytest.importorskip("agentscope", reason="the AgentScope 2.x extra is part of make test")
    from mysql_state.agentscope import AgentStateRepository

    async def seed():
        repo = AgentStateRepository(AsyncMysqlAgentStateStore(store, close_store=False))
        state, version = await repo.load_versioned("alice", "chat-1")
        assert version == 0
        report = await repo.save("alice", "chat-1", state, expected_version=0)
        assert report.version == 1

    asyncio.run(seed())
    barrier, results = SPAWN.Barrier(2), SPAWN.Queue()
    ps = [SPAWN.Process(target=procs.repo_turn, args=(url, database, "alice", "chat-1", t, barrier, results))
          for t in ("from A", "from B")]
    for p in ps:
        p.start()
    outcomes = [results.get(timeout=120) for _ in ps]
    for p in ps:
        p.join(60)
    won = [o for o in outcomes if o[0] == "won"]
    stale = [o for o in outcomes if o[0] == "stale"]
    assert len(won) == 1 and len(stale) == 1, outcomes
    assert won[0][2] == 2 and stale[0][2:] == (1, 2)

    async def check():
        repo = AgentStateRepository(AsyncMysqlAgentStateStore(store, close_store=False))
        state, version = await repo.load_versioned("alice", "chat-1")
        assert version == 2
        assert [m.content[0].text for m in state.context] == [won[0][1]]  # exactly the winner's state

    asyncio.run(check())
    assert agentscope is not None


# ---- session_lock ----------------------------------------------------------------------------------


def test_session_lock_two_processes_wait_or_time_out(url, database, store):
    """A second process times out on a held lease; a third waits and gets it only after the
    holder let go (wall-clock order of the two processes' events, not a duration guess)."""
    started, release, released, results = SPAWN.Event(), SPAWN.Event(), SPAWN.Queue(), SPAWN.Queue()
    holder = SPAWN.Process(target=procs.hold_lock, args=(url, database, 60.0, started, release, released))
    holder.start()
    assert started.wait(60)
    quick = SPAWN.Process(target=procs.try_lock, args=(url, database, 0.3, results))
    quick.start()
    outcome = results.get(timeout=60)
    assert outcome[0] == "timeout" and 0.25 <= outcome[1] < 1.9, outcome
    assert "'alice:chat-1'" in outcome[2] and "0.3s" in outcome[2]
    patient = SPAWN.Process(target=procs.try_lock, args=(url, database, 60, results))
    patient.start()
    deadline = time.monotonic() + 60
    while not raw_lock_waiters(url) and time.monotonic() < deadline:  # the patient is waiting on it
        time.sleep(0.05)
    assert raw_lock_waiters(url), "the third process never waited for the lease"
    assert results.empty()  # it is waiting, not holding
    release.set()
    let_go = released.get(timeout=60)
    outcome = results.get(timeout=60)
    assert outcome[0] == "got", outcome
    assert outcome[2] < let_go <= outcome[3], (outcome, let_go)  # began before, got it after the holder let go
    for p in (holder, quick, patient):
        p.join(30)


def raw_lock_waiters(url: str) -> int:
    """Connections of the server waiting in GET_LOCK right now (plain SQL)."""
    con = connect(url)
    try:
        with con.cursor() as cur:
            cur.execute("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE 'SELECT GET_LOCK%'"
                        " AND ID <> CONNECTION_ID()")
            return int(cur.fetchone()[0])
    finally:
        con.close()


def test_session_lock_two_store_objects_and_async(store, other):
    with store.session_lock("u", "s", timeout=5):
        with pytest.raises(LockTimeoutError):
            with other.session_lock("u", "s", timeout=0.2):
                pass
        with other.session_lock("u", "other-session", timeout=0.2):
            pass  # another session is not locked
    with other.session_lock("u", "s", timeout=0.2):
        pass  # released at the end of the block
    long_id = "x" * 240
    with store.session_lock("u", long_id):
        pass

    async def go():
        astore = AsyncMysqlAgentStateStore(other, close_store=False)
        async with astore.session_lock("u", "s", timeout=2):
            with pytest.raises(LockTimeoutError):
                with store.session_lock("u", "s", timeout=0.2):
                    pass
        await astore.aclose()

    asyncio.run(go())
    with pytest.raises(ValueError, match="timeout"):
        store.session_lock("u", "s", timeout=-1)


# ---- pop_list ------------------------------------------------------------------------------------


def test_pop_list_keeps_the_hash_row_exact(store, other, raw):
    assert store.pop_list("u", "s", "q") is None
    store.save_list("u", "s", "q", [{"a": 1}, "b", 3])
    assert store.pop_list("u", "s", "q") == 3
    assert check_list_rows(raw, "u:s", "q") == [{"a": 1}, "b"]
    assert other.save_list_report("u", "s", "q", [{"a": 1}, "b", "c"]).kind == "append"  # cold, trusts the hash
    assert [store.pop_list("u", "s", "q") for _ in range(4)] == ["c", "b", {"a": 1}, None]
    assert check_list_rows(raw, "u:s", "q") == []
    assert store.append_list("u", "s", "q", [1]) == 1


def test_pop_and_append_from_two_processes_lose_nothing_and_pop_nothing_twice(url, database, store, raw):
    store.save_list("u", "s", "q", [f"seed-{i}" for i in range(30)])
    results = SPAWN.Queue()
    ps = [SPAWN.Process(target=procs.pop_or_append, args=(url, database, role, 40, results))
          for role in ("append", "pop", "pop")]
    for p in ps:
        p.start()
    outcomes = [results.get(timeout=120) for _ in ps]
    for p in ps:
        p.join(60)
    popped = [x for role, got in outcomes if role == "pop" for x in got]
    left = check_list_rows(raw, "u:s", "q")
    everything = [f"seed-{i}" for i in range(30)] + [f"append-{i}" for i in range(40)]
    assert len(popped) == len(set(popped))  # never popped twice
    assert sorted(popped + left) == sorted(everything)  # never lost


# ---- transaction -----------------------------------------------------------------------------------


def test_transaction_read_modify_write_loses_no_update(store, other, raw):
    def bump(tx):
        n = tx.get("u", "s", "counter", default=0)
        tx.save("u", "s", "counter", n + 1)
        items = tx.get_list("u", "s", "log")
        tx.save_list("u", "s", "log", items + [n + 1])
        return n + 1

    errors = []

    def worker(s):
        try:
            for _ in range(15):
                s.transaction(bump)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(s,)) for s in (store, other, store, other)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert store.get("u", "s", "counter") == 60
    assert check_list_rows(raw, "u:s", "log") == list(range(1, 61))


def test_transaction_is_all_or_nothing_across_sessions(store, raw):
    store.save_list("u", "a", "q", [1, 2])

    def move_then_fail(tx):
        item = tx.get_list("u", "a", "q")[-1]
        tx.save_list("u", "a", "q", tx.get_list("u", "a", "q")[:-1])
        tx.append_list("u", "b", "q", [item])
        assert tx.list_length("u", "b", "q") == 1
        raise RuntimeError("changed my mind")

    with pytest.raises(RuntimeError, match="changed my mind"):
        store.transaction(move_then_fail)
    assert store.get_list("u", "a", "q") == [1, 2] and not store.exists("u", "b")

    def move(tx):
        items = tx.get_list("u", "a", "q")
        tx.save_list("u", "a", "q", items[:-1])
        tx.append_list("u", "b", "q", items[-1:])
        tx.delete("u", "a", "gone")
        return items[-1]

    assert store.transaction(move) == 2
    assert check_list_rows(raw, "u:a", "q") == [1] and check_list_rows(raw, "u:b", "q") == [2]
    with pytest.raises(TypeError, match="fn must be a callable"):
        store.transaction(None)

    async def go():
        astore = AsyncMysqlAgentStateStore(store, close_store=False)
        got = await astore.transaction(lambda tx: tx.get_list("u", "b", "q"))
        await astore.aclose()
        return got

    assert asyncio.run(go()) == [2]
