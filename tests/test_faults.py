"""Server faults: crashes, lost connections, a COMMIT whose answer never arrives, outages."""

from __future__ import annotations

import random
import threading
import time

import pymysql
import pytest

from mysql_state import (
    UNVERSIONED,
    CommitUnknownError,
    MysqlAgentStateStore,
    MysqlStateError,
    ServerUnavailableError,
)
from mysql_state.errors import StoreClosedError
from mysql_state.listsync import ListHash, verify

from .conftest import Raw, connect, in_thread, private_server
from .faultproxy import FaultProxy


def check_list_rows(raw: Raw, sid: str, key: str) -> list:
    """Rows of a list are exactly 0..n-1 and the hash row matches them; returns the items."""
    import orjson

    # one statement, one snapshot: two reads could see a commit land between them
    rows = raw.query("SELECT state_key, item_index, state_data FROM {t} WHERE session_id=%s AND state_key IN (%s, %s)"
                     " ORDER BY state_key, item_index", (sid, key, key + ":_hash"))
    items = [(r[1], r[2]) for r in rows if r[0] == key]
    hash_rows = [(r[2],) for r in rows if r[0] == key + ":_hash"]
    assert [r[0] for r in items] == list(range(len(items)))
    assert len(hash_rows) == 1
    stored = ListHash.parse(hash_rows[0][0])
    assert stored is not None and verify(stored, [r[1].encode() for r in items])
    return [orjson.loads(r[1]) for r in items]


@pytest.fixture
def proxied(url, database):
    """A store whose connections go through a FaultProxy to the shared test server."""
    from mysql_state.pool import parse_url

    kwargs, _ = parse_url(url)
    proxy = FaultProxy(kwargs.get("host", "127.0.0.1"), kwargs.get("port", 3306))
    user = kwargs["user"] + (":" + kwargs["password"] if kwargs["password"] else "")
    store = MysqlAgentStateStore.from_url(f"mysql://{user}@127.0.0.1:{proxy.port}/", database_name=database,
                                          create_if_not_exist=True, pool_size=4)
    yield store, proxy
    store.close()
    proxy.close()


def test_reads_and_uncommitted_writes_survive_dropped_connections(proxied, raw, report):
    store, proxy = proxied
    store.save_list("u", "s", "m", [1, 2, 3])
    cuts = 0
    for i in range(10):
        cuts += proxy.cut_all()  # every pooled connection dies while idle
        assert store.get_list("u", "s", "m")[:3] == [1, 2, 3]
        cuts += proxy.cut_all()
        assert store.append_list("u", "s", "m", [i]) == 4 + i
    assert check_list_rows(raw, "u:s", "m") == [1, 2, 3] + list(range(10))
    assert store.stats.reconnects >= 10
    report(f"faults: {cuts} idle connections cut, {store.stats.reconnects} transparent reconnects, "
           "no write lost or repeated")


@pytest.mark.parametrize("when", ["before", "after"])
def test_a_commit_whose_outcome_is_unknown_is_reported_never_repeated(proxied, raw, when, report):
    store, proxy = proxied
    store.save_list("u", "s", "m", ["a"])
    proxy.cut_on_commit = when
    with pytest.raises(CommitUnknownError, match="during COMMIT"):
        store.append_list("u", "s", "m", ["b"])
    assert proxy.commits_cut == 1
    expected = ["a"] if when == "before" else ["a", "b"]  # "after": the server did commit, once
    assert settled(lambda: check_list_rows(raw, "u:s", "m"), expected) == expected
    assert store.get_list("u", "s", "m") == expected
    store.save_list("u", "s", "m", ["a", "b", "c"])  # the store works on
    assert check_list_rows(raw, "u:s", "m") == ["a", "b", "c"]
    report(f"faults: COMMIT cut {when} reaching the server -> CommitUnknownError, stored {expected} exactly")


def settled(read, expected, timeout: float = 5.0):
    """``read()`` once it gives ``expected``, or what it gives after ``timeout`` seconds: a
    packet cut just after it reached the server may still be running when the client is told
    the connection is gone, so a read at once can come before its COMMIT."""
    deadline = time.monotonic() + timeout
    got = read()
    while got != expected and time.monotonic() < deadline:
        time.sleep(0.01)
        got = read()
    return got


ONE_PACKET_WRITES = {  # (set-up, the write whose packet carries its COMMIT)
    "append_lists": (lambda s: s.append_lists("u", "s", {"a": [1], "b": [2]}),
                     lambda s: s.append_lists("u", "s", {"a": [3], "b": [4]}, values={"v": "new"})),
    "save_if_version(..., 0)": (lambda s: s.save("u", "s", "x", 0),
                                lambda s: s.save_if_version("u", "s", "v", "new", 0)),
    "save_many (values riding)": (lambda s: s.save_many("u", "s", values={"v": "old"}, lists={"a": [1]}),
                                  lambda s: s.save_many("u", "s", values={"v": "new"}, lists={"a": [1, 3]})),
}


@pytest.mark.parametrize("when", ["before", "after"])
@pytest.mark.parametrize("call", sorted(ONE_PACKET_WRITES))
def test_a_one_packet_write_whose_commit_is_cut_is_reported_never_repeated(proxied, raw, when, call):
    """The statement and its COMMIT in one packet, the connection cut just before or just
    after it reaches the server: CommitUnknownError, never a second attempt; the table holds
    exactly the state before the call ("before") or after it ("after"), nothing in between."""
    store, proxy = proxied
    set_up, write = ONE_PACKET_WRITES[call]
    set_up(store)
    before = raw.rows("u:s")
    proxy.cut_on_commit = when
    with pytest.raises(CommitUnknownError):
        write(store)
    assert proxy.commits_cut == 1
    if when == "before":
        assert raw.rows("u:s") == before
    else:  # committed, once
        assert settled(lambda: raw.query("SELECT state_data FROM {t} WHERE session_id = 'u:s' AND state_key = 'v'"),
                       [('"new"',)]) == [('"new"',)]
        if call != "save_if_version(..., 0)":
            assert check_list_rows(raw, "u:s", "a") == [1, 3]
    for key in ("a", "b"):
        if raw.query("SELECT COUNT(*) FROM {t} WHERE session_id = 'u:s' AND state_key = %s", (key + ":_hash",))[0][0]:
            check_list_rows(raw, "u:s", key)
    assert raw.query("SELECT COUNT(*) FROM {t} WHERE state_data IN ('', '-')")[0][0] == 0  # no sentinel left
    assert store.append_lists("u", "s", {"a": [9]})["a"] >= 1  # the store works on


def test_killed_connections_are_replaced(store, raw, url):
    store.save("u", "s", "k", 1)
    store.get("u", "s", "k")
    admin = connect(url)
    with admin.cursor() as cur:
        cur.execute("SELECT ID FROM information_schema.PROCESSLIST WHERE ID <> CONNECTION_ID() AND USER = 'root'"
                    " AND COMMAND = 'Sleep'")
        ids = [r[0] for r in cur.fetchall() if r[0] != raw.con.thread_id()]
        for i in ids:
            cur.execute(f"KILL CONNECTION {int(i)}")
    admin.close()
    assert ids
    assert store.get("u", "s", "k") == 1
    store.save("u", "s", "k", 2)
    assert store.get_versioned("u", "s", "k") == (2, 2)


def test_wait_timeout_disconnects_are_transparent(url, database):
    store = MysqlAgentStateStore.from_url(url, database_name=database, create_if_not_exist=True,
                                          init_command="SET SESSION wait_timeout = 1")
    store.save_list("u", "s", "m", [1])
    assert store.get_list("u", "s", "m") == [1]  # both pools now hold a connection
    time.sleep(2.5)  # the server closes the idle pooled connections
    assert store.get_list("u", "s", "m") == [1]
    time.sleep(2.5)
    assert store.append_list("u", "s", "m", [2]) == 2
    assert store.stats.reconnects >= 2
    store.close()


def test_outage_fails_fast_with_a_clear_error_and_the_same_store_recovers(local_server, report):
    store = MysqlAgentStateStore.from_url(local_server.url, database_name="outage", create_if_not_exist=True,
                                          connect_timeout=2)
    store.save_list("u", "s", "m", [1, 2])
    local_server.kill()
    timings = []
    for call in (lambda: store.get_list("u", "s", "m"), lambda: store.save("u", "s", "k", 1),
                 lambda: store.append_list("u", "s", "m", [3]), lambda: store.exists("u", "s")):
        start = time.monotonic()
        with pytest.raises(ServerUnavailableError, match="unreachable"):
            call()
        timings.append(time.monotonic() - start)
    assert max(timings) < 10
    local_server.start()
    assert store.get_list("u", "s", "m") == [1, 2]
    assert store.append_list("u", "s", "m", [3]) == 3
    store.close()
    report(f"faults: server down -> ServerUnavailableError in at most {max(timings):.2f}s; recovered after restart")


def test_sigkill_during_a_stream_of_list_saves_leaves_only_whole_lists(local_server, report):
    store = MysqlAgentStateStore.from_url(local_server.url, database_name="crash", create_if_not_exist=True,
                                          connect_timeout=2)
    keys = [("u1", "s", "m"), ("u2", "s", "m"), ("u3", "t", "ctx")]
    attempted: dict = {k: [[]] for k in keys}  # every list ever passed to save_list (all complete)
    stop = threading.Event()
    errors: list = []
    outcomes: dict = {}
    rng = random.Random(7)

    def writer(k) -> None:
        current: list = []
        while not stop.is_set():
            nxt = [dict(x) for x in current]
            op = rng.random()
            if op < 0.5 or not nxt:
                nxt += [{"i": len(nxt), "text": "x" * rng.randint(10, 3000)} for _ in range(rng.randint(1, 20))]
            elif op < 0.7:
                nxt[-1]["text"] += "grown"
            elif op < 0.85:
                nxt[rng.randrange(len(nxt))]["edit"] = rng.random()
            else:
                nxt = nxt[: rng.randrange(len(nxt))]
            attempted[k].append(nxt)
            try:
                store.save_list(*k, nxt)
                current = nxt
            except (ServerUnavailableError, CommitUnknownError) as exc:
                outcomes[type(exc).__name__] = outcomes.get(type(exc).__name__, 0) + 1
                time.sleep(0.05)
            except Exception as exc:  # noqa: BLE001 - anything else fails the test below
                errors.append(exc)

    threads = [threading.Thread(target=writer, args=(k,)) for k in keys]
    [t.start() for t in threads]
    kills = 0
    for _ in range(3):
        time.sleep(rng.uniform(0.3, 0.8))
        local_server.kill()
        kills += 1
        time.sleep(0.2)
        local_server.start()
    time.sleep(0.3)
    stop.set()
    [t.join() for t in threads]
    assert not errors, errors
    raw = Raw(local_server.url, "crash")
    for k in keys:
        stored = check_list_rows(raw, f"{k[0]}:{k[1]}", k[2]) if raw.query(
            "SELECT 1 FROM {t} WHERE session_id=%s AND state_key=%s", (f"{k[0]}:{k[1]}", k[2] + ":_hash")) else []
        assert stored in attempted[k]
        final = stored + [{"after": "restart"}]
        store.save_list(*k, final)  # the same store object works again
        assert store.get_list(*k) == final
    raw.close()
    store.close()
    writes = sum(len(v) - 1 for v in attempted.values())
    report(f"faults: {kills} SIGKILLs during {writes} save_list calls on {len(keys)} lists: "
           f"every list whole afterwards, hash rows consistent (errors seen by writers: {outcomes})")


def test_save_many_is_all_or_nothing_when_its_commit_never_arrives(proxied, raw):
    store, proxy = proxied
    store.save_many("u", "s", values={"summary": "old"}, lists={"context": ["a"]})
    before = raw.rows()
    proxy.cut_on_commit = "before"
    with pytest.raises(CommitUnknownError):
        store.save_many("u", "s", values={"summary": "new"}, lists={"context": ["a", "b"]})
    assert raw.rows() == before  # neither the list nor the value: one transaction, rolled back
    assert store.get("u", "s", "summary") == "old" and store.get_list("u", "s", "context") == ["a"]


# ---- idle connections closed by the server -------------------------------------------------


@pytest.fixture(scope="module")
def short_wait_server():
    server = private_server("--wait-timeout=2")
    yield server
    server.stop()


def test_idle_connections_cut_by_wait_timeout_are_replaced(short_wait_server):
    store = MysqlAgentStateStore.from_url(short_wait_server.url, database_name="idle", create_if_not_exist=True,
                                          pool_size=4)
    try:
        for round_ in range(2):
            barrier = threading.Barrier(4)

            def burst(i):
                barrier.wait()
                store.save("u", f"s{i}", "k", i)
                store.get_list("u", f"s{i}", "m")

            joins = [in_thread(lambda i=i: burst(i)) for i in range(4)]
            for j in joins:
                j()
            time.sleep(3.5)  # every pooled connection is now closed by the server
            assert store.get("u", "s1", "k") == 1
            store.save("u", "s2", "k", 22 + round_)
            assert store.append_list("u", "s3", "m", [round_]) == round_ + 1
        assert store.stats.reconnects >= 2
    finally:
        store.close()


# ---- an interrupt between a statement and its reply ----------------------------------------


def test_an_interrupted_call_does_not_poison_its_connection(store, raw, monkeypatch):
    store.save_list("u", "s", "m", ["a"])
    store.save_if_version("u", "s", "v", "v1", 0)
    real = pymysql.connections.Connection._read_query_result
    armed = {"on": True}

    def interrupted(self, *a, **kw):
        if armed["on"]:
            armed["on"] = False
            raise KeyboardInterrupt  # the statement reached the server; its reply is never read
        return real(self, *a, **kw)

    monkeypatch.setattr(pymysql.connections.Connection, "_read_query_result", interrupted)
    with pytest.raises(KeyboardInterrupt):
        store.save_if_version("u", "s", "v", "v2", 1)
    monkeypatch.setattr(pymysql.connections.Connection, "_read_query_result", real)
    # every later call gets a connection whose replies match its statements
    for _ in range(3):
        v = store.get_versioned("u", "s", "v").version
        assert store.save_if_version("u", "s", "v", f"after{v}", v) == v + 1
        assert store.save_if_version("u", "s", "v", "stale", v) == UNVERSIONED
    assert store.get("u", "s", "v") == f"after{v}"
    store.save_list("u", "s", "m", ["a", "b"])
    assert store.append_list("u", "s", "m", ["c"]) == 3
    assert check_list_rows(raw, "u:s", "m") == ["a", "b", "c"]


# ---- use after close ----------------------------------------------------------------------


def test_use_after_close_is_refused_naming_the_store(url, database):
    store = MysqlAgentStateStore.from_url(url, database_name=database, create_if_not_exist=True)
    store.save("u", "s", "k", 1)
    store.close()
    for call in (lambda: store.get("u", "s", "k"), lambda: store.save("u", "s", "k", 2),
                 lambda: store.append_list("u", "s", "m", [1])):
        with pytest.raises(StoreClosedError, match=f"`{database}`.`agentscope_sessions`.*closed"):
            call()
    assert issubclass(StoreClosedError, MysqlStateError) and issubclass(StoreClosedError, RuntimeError)


def test_after_a_restart_a_reconnected_session_is_set_up_again_even_under_its_old_thread_id(local_server):
    """The pool sets a write connection's session up (READ COMMITTED, the lock-wait cap) once
    per server thread id; a restarted server numbers its threads from 1 again, so a connection
    reopened in place could get its old id back and be taken as set up: the cap was gone, and a
    write held up by a row lock longer than read_timeout met the driver's timeout again. Every
    reconnect is set up again now: the wait ends in 1205, retried, the write stored once."""
    store = MysqlAgentStateStore.from_url(local_server.url, database_name="restarted", create_if_not_exist=True,
                                          connect_timeout=2, read_timeout=4, pool_size=1)
    try:
        store.save_list("u", "s", "m", ["a"])
        local_server.kill()
        local_server.start()
        store.save_list("u", "s", "m", ["a", "b"])  # reconnected in place (its thread id may be the old one)
        holder = connect(local_server.url)
        holder.autocommit(False)
        with holder.cursor() as cur:
            cur.execute("SELECT * FROM `restarted`.agentscope_sessions WHERE session_id = 'u:s' FOR UPDATE")
        timer = threading.Timer(6, holder.commit)
        timer.start()
        assert store.append_list("u", "s", "m", ["c"]) == 3  # not CommitUnknownError after read_timeout
        timer.join()
        holder.close()
        assert store.stats.retries_by_errno.get(1205, 0) >= 2 and store.get_list("u", "s", "m") == ["a", "b", "c"]
    finally:
        store.close()
