"""The store with a primary and a read-only replica (MariaDB GTID asynchronous replication,
the session ``replicated`` fixture): ``consistency="strong" | "session" | "eventual"``.

The replica is made to lag deterministically by pausing its SQL thread. Which server served
a read is proven by the servers' own counters (``Com_select``), and what the replica was
sent by its general log: the store reads it as the non-admin ``reader`` user only.
"""

from __future__ import annotations

import asyncio
import socket
import time
import uuid

import pymysql
import pytest

from mysql_state import MysqlAgentStateStore
from mysql_state.aio import AsyncMysqlAgentStateStore
from mysql_state.pool import parse_url


def root(url: str) -> pymysql.connections.Connection:
    kwargs, _ = parse_url(url)
    return pymysql.connect(autocommit=True, **kwargs)


def status(url: str, name: str) -> int:
    con = root(url)
    try:
        with con.cursor() as cur:
            cur.execute("SHOW GLOBAL STATUS LIKE %s", (name,))
            return int(cur.fetchone()[1])
    finally:
        con.close()


@pytest.fixture
def rstore(replicated):
    name = "t_" + uuid.uuid4().hex[:12]
    store = MysqlAgentStateStore.from_url(replicated.primary_url, name, create_if_not_exist=True,
                                          replica_urls=[replicated.replica_url], session_wait=0.5)
    yield store
    store.close()
    replicated.resume_replication()
    con = root(replicated.primary_root_url)
    with con.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
    con.close()


def counted(replicated, fn):
    """``fn()``'s result and how many SELECTs (primary, replica) it cost."""
    p, r = status(replicated.primary_root_url, "Com_select"), status(replicated.replica_root_url, "Com_select")
    out = fn()
    return out, (status(replicated.primary_root_url, "Com_select") - p,
                 status(replicated.replica_root_url, "Com_select") - r)


def test_strong_session_eventual_with_a_lagging_replica(replicated, rstore, report):
    rstore.save("u", "s", "k", "v1")
    replicated.wait_caught_up()
    replicated.pause_replication()
    rstore.save("u", "s", "k", "v2")

    value, (on_primary, on_replica) = counted(replicated, lambda: rstore.get("u", "s", "k", consistency="eventual"))
    assert value == "v1" and on_primary == 0 and on_replica == 1  # the replica, however far behind
    value, (on_primary, on_replica) = counted(replicated, lambda: rstore.get("u", "s", "k"))
    assert value == "v2" and on_primary == 1 and on_replica == 0  # strong: the primary

    fallbacks = rstore.stats.replica_fallbacks
    t0 = time.monotonic()
    value, (on_primary, on_replica) = counted(replicated, lambda: rstore.get("u", "s", "k", consistency="session"))
    waited = time.monotonic() - t0
    assert value == "v2", "session never reads older than this store's own write"
    assert 0.5 <= waited < 2.5, waited  # waited session_wait on the replica, then the primary
    assert on_primary == 1 and on_replica == 1 and rstore.stats.replica_fallbacks == fallbacks + 1

    replicated.resume_replication()
    replicated.wait_caught_up()
    value, (on_primary, on_replica) = counted(replicated, lambda: rstore.get("u", "s", "k", consistency="session"))
    assert value == "v2" and on_primary == 0 and on_replica == 2  # the wait, then the read: the replica
    report(f"replicas: eventual read the stale value from the lagging replica; session waited "
           f"{waited:.2f}s (session_wait=0.5) then read the primary; caught up, the replica served it")


def test_session_waits_only_for_this_stores_writes_to_that_session(replicated, rstore):
    rstore = MysqlAgentStateStore.from_url(replicated.primary_url, rstore.database_name,
                                           replica_urls=[replicated.replica_url], session_wait=5)
    try:
        check_session_waits_only_for_its_own_writes(replicated, rstore)
    finally:
        rstore.close()


def check_session_waits_only_for_its_own_writes(replicated, rstore):
    """With session_wait=5, a read of "a" that waited for "b"'s write would take 5 s; one that
    did not wait takes a fraction of that even on a loaded machine."""
    rstore.save_list("u", "a", "memory", [1, 2])
    replicated.wait_caught_up()
    replicated.pause_replication()
    rstore.save_list("u", "b", "memory", [3])  # another session: "a" need not wait for it
    t0 = time.monotonic()
    (items, n, there, many), (on_primary, _) = counted(replicated, lambda: (
        rstore.get_list("u", "a", "memory", consistency="session"),
        rstore.list_length("u", "a", "memory", consistency="session"),
        rstore.exists("u", "a", consistency="session"),
        rstore.get_many("u", "a", lists=["memory"], consistency="session")))
    assert (items, n, there, many) == ([1, 2], 2, True, {"memory": [1, 2]})
    assert on_primary == 0 and time.monotonic() - t0 < 2.5
    # ... while "b" is read on the primary after the wait, and listing the user's sessions
    # waits for every write of this store
    assert rstore.get_list("u", "b", "memory", consistency="session") == [3]
    assert rstore.list_session_ids("u", consistency="session") == {"a", "b"}
    assert rstore.list_session_ids("u", consistency="eventual") == {"a"}


def test_replica_is_read_as_non_admin_with_selects_only(replicated, rstore):
    con = root(replicated.replica_root_url)
    with con.cursor() as cur:
        cur.execute("SET GLOBAL log_output = 'TABLE'")
        cur.execute("TRUNCATE mysql.general_log")
        cur.execute("SET GLOBAL general_log = 1")
    try:
        rstore.save("u", "s", "k", 1)
        rstore.save_list("u", "s", "l", [1, 2, 3])
        rstore.append_list("u", "s", "l", [4])
        rstore.delete("u", "s", "k")
        for c in ("session", "eventual"):
            rstore.get("u", "s", "k", consistency=c)
            rstore.get_list("u", "s", "l", consistency=c)
            rstore.list_session_ids("u", consistency=c)
        with con.cursor() as cur:
            cur.execute("SET GLOBAL general_log = 0")
            cur.execute("SELECT user_host, command_type, CONVERT(argument USING utf8mb4) FROM mysql.general_log")
            log = list(cur.fetchall())
    finally:
        with con.cursor() as cur:
            cur.execute("SET GLOBAL general_log = 0")
    ours = [(kind, arg) for host, kind, arg in log if "reader" in host]
    queries = [arg for kind, arg in ours if kind == "Query"]
    assert queries, "the replica served reads"
    assert not any("writer" in host for host, _, _ in log), "the primary's user never reaches the replica"
    assert all(q.lstrip(" (").upper().startswith(("SELECT", "SET NAMES")) for q in queries), queries


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_dead_replica_is_skipped_and_none_answering_means_the_primary(replicated):
    name = "t_" + uuid.uuid4().hex[:12]
    dead = f"mysql://reader:reader-pw@127.0.0.1:{_closed_port()}/"
    both = MysqlAgentStateStore.from_url(replicated.primary_url, name, create_if_not_exist=True,
                                         replica_urls=[dead, replicated.replica_url])
    only_dead = MysqlAgentStateStore.from_url(replicated.primary_url, name, replica_urls=[dead])
    try:
        both.save("u", "s", "k", "x")
        replicated.wait_caught_up()
        for _ in range(6):  # spread over both replicas: the dead one is skipped
            assert both.get("u", "s", "k", consistency="session") == "x"
        assert both.stats.replica_reads == 6 and both.stats.replica_fallbacks == 0
        assert only_dead.get("u", "s", "k", consistency="eventual") == "x"
        assert only_dead.stats.replica_fallbacks == 1 and only_dead.stats.replica_reads == 0
    finally:
        both.close()
        only_dead.close()
        con = root(replicated.primary_root_url)
        with con.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
        con.close()


def test_unknown_consistency_is_a_value_error_before_any_connection(rstore):
    rstore.close()  # a closed store opens no connection: the ValueError comes first
    calls = [lambda c: rstore.get("u", "s", "k", consistency=c),
             lambda c: rstore.get_list("u", "s", "k", consistency=c),
             lambda c: rstore.get_many("u", "s", values=["k"], consistency=c),
             lambda c: rstore.list_length("u", "s", "k", consistency=c),
             lambda c: rstore.list_session_ids("u", consistency=c),
             lambda c: rstore.exists("u", "s", consistency=c)]
    for call in calls:
        for bad in ("STRONG", "linearizable", None, 1):
            with pytest.raises(ValueError, match="consistency"):
                call(bad)


def test_async_store_forwards_replica_urls(replicated):
    name = "t_" + uuid.uuid4().hex[:12]

    async def main():
        async with AsyncMysqlAgentStateStore.from_url(replicated.primary_url, name, create_if_not_exist=True,
                                                      replica_urls=[replicated.replica_url]) as store:
            await store.save("u", "s", "k", 7)
            assert await store.get("u", "s", "k", consistency="session") == 7
            assert store.stats.replica_reads == 1

    try:
        asyncio.run(main())
    finally:
        con = root(replicated.primary_root_url)
        with con.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
        con.close()


def test_every_write_names_its_session_and_nothing_is_patched(replicated, rstore):
    """Read-your-writes without monkeypatching: each write passes its session to the connector.
    With the replica paused, a write to session "a" makes "session" reads of "a" wait (then the
    primary), while "b" (caught up) is still read on the replica at once: had a write named no
    session, it would have raised the floor for every session and "b" would wait too."""
    store_class = type(rstore)
    assert not any(name in vars(rstore) for name, v in vars(store_class).items() if callable(v)), \
        "a method of the store was replaced on the instance"
    rstore.save("u", "b", "k", "b0")
    rstore.save_list("u", "a", "l", [1])
    rstore.save("u", "a", "v", 0)
    replicated.wait_caught_up()
    replicated.pause_replication()
    writes = {
        "save": lambda: rstore.save("u", "a", "v", 1),
        "save_if_version": lambda: rstore.save_if_version("u", "a", "v", 2, -1),
        "save_list": lambda: rstore.save_list("u", "a", "l", [1, 2]),
        "save_list_report": lambda: rstore.save_list_report("u", "a", "l", [1, 2, 3]),
        "save_list_if_version": lambda: rstore.save_list_if_version("u", "a", "l", [1, 2, 3, 4], -1),
        "save_many": lambda: rstore.save_many("u", "a", values={"v": 3}, lists={"l": [5]}),
        "append_list": lambda: rstore.append_list("u", "a", "l", [6]),
        "pop_list": lambda: rstore.pop_list("u", "a", "l"),
        "delete": lambda: rstore.delete("u", "a", "v"),
    }
    for name, write in writes.items():
        write()
        b, (on_primary, _) = counted(replicated, lambda: rstore.get("u", "b", "k", consistency="session"))
        assert b == "b0" and on_primary == 0, f"{name} named no session: every session read waited"
    assert rstore.get_list("u", "a", "l", consistency="session") == [5]  # "a" read its own writes
    assert rstore.get("u", "a", "v", consistency="session") is None
    # a write of every session (a transaction names none) raises the floor: "b" waits too
    rstore.transaction(lambda tx: tx.save("u", "c", "k", 1))
    b, (on_primary, _) = counted(replicated, lambda: rstore.get("u", "b", "k", consistency="session"))
    assert b == "b0" and on_primary == 1


def test_a_session_read_after_a_write_that_changed_nothing_is_not_older_than_it(replicated, rstore):
    """The floor a session read waits for was the connection's @@last_gtid: a write that logs
    no event (a save of the list another store had just saved, a delete of what another had
    deleted) left none, and the read went to the lagging replica: older than what this store
    had just saved. The floor is the primary's position once the write committed."""
    other = MysqlAgentStateStore.from_url(replicated.primary_url, rstore.database_name)
    try:
        rstore.save_list("u", "s", "m", ["old"])
        rstore.save("u", "s", "k", "old")
        replicated.wait_caught_up()
        replicated.pause_replication()
        other.save_list("u", "s", "m", ["new1", "new2"])
        other.delete("u", "s", "k")
        report = rstore.save_list_report("u", "s", "m", ["new1", "new2"])
        assert report.kind == "unchanged"
        assert rstore.get_list("u", "s", "m", consistency="session") == ["new1", "new2"]
        rstore.delete("u", "s", "k")  # nothing left to delete
        assert rstore.get("u", "s", "k", consistency="session") is None
    finally:
        other.close()


def test_a_hung_replica_is_left_for_its_back_off_after_one_timeout(replicated):
    """A replica that stops answering (SIGSTOP) cost every session and eventual read a timeout
    (read_timeout the first time, connect_timeout each time after): with one replica it was
    never marked down. It is, after the first timeout: the next reads go to the primary at once."""
    import signal

    name = "t_" + uuid.uuid4().hex[:12]
    store = MysqlAgentStateStore.from_url(replicated.primary_url, name, create_if_not_exist=True,
                                          replica_urls=[replicated.replica_url], session_wait=0.5,
                                          read_timeout=2, connect_timeout=2)
    try:
        store.save("u", "s", "k", "x")
        replicated.wait_caught_up()
        assert store.get("u", "s", "k", consistency="eventual") == "x"  # a pooled replica connection
        replicated.replica.proc.send_signal(signal.SIGSTOP)
        try:
            t0 = time.monotonic()
            assert store.get("u", "s", "k", consistency="session") == "x"
            first = time.monotonic() - t0
            t0 = time.monotonic()
            for consistency in ("session", "eventual", "session"):
                assert store.get("u", "s", "k", consistency=consistency) == "x"
            after = time.monotonic() - t0
        finally:
            replicated.replica.proc.send_signal(signal.SIGCONT)
        assert first < 4 and after < 1.0, (first, after)
        assert store.stats.replica_fallbacks >= 4
    finally:
        store.close()
        con = root(replicated.primary_root_url)
        with con.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
        con.close()


def _drop_database(replicated, name: str) -> None:
    con = root(replicated.primary_root_url)
    with con.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
    con.close()


def test_a_session_read_after_a_commit_of_unknown_outcome_is_never_older_than_it(replicated):
    """Audit R1: a write cut just after the server received its COMMIT raises
    CommitUnknownError, and it did commit; the next "session" read of that session was served
    by the lagging replica: older than what this store had just stored. Now such a write sends
    the session's "session" reads to the primary (other sessions are unaffected) until a later
    write of the session records its GTID."""
    from mysql_state import CommitUnknownError

    from .faultproxy import FaultProxy

    name = "t_" + uuid.uuid4().hex[:12]
    proxy = FaultProxy("127.0.0.1", replicated.primary.port)
    via_proxy = replicated.primary_url.replace(f":{replicated.primary.port}/", f":{proxy.port}/")
    store = MysqlAgentStateStore.from_url(via_proxy, name, create_if_not_exist=True,
                                          replica_urls=[replicated.replica_url], session_wait=0.5)
    try:
        store.save("u", "s", "k", "v1")
        store.save("u", "other", "k", "o1")
        replicated.wait_caught_up()
        replicated.pause_replication()
        proxy.cut_on_commit = "after"  # the server commits; the store never hears back
        with pytest.raises(CommitUnknownError):
            store.save("u", "s", "k", "v2")
        assert proxy.commits_cut == 1
        value, (on_primary, on_replica) = counted(replicated, lambda: store.get("u", "s", "k", consistency="session"))
        assert value == "v2", "a session read older than this store's own (committed) write"
        assert (on_primary, on_replica) == (1, 0)  # straight to the primary: no wait on the replica
        value, (on_primary, _) = counted(replicated, lambda: store.get("u", "other", "k", consistency="session"))
        assert value == "o1" and on_primary == 0  # another session: the replica still serves it

        replicated.resume_replication()
        replicated.wait_caught_up()  # caught up, but nobody read the unknown write's GTID:
        _, (on_primary, _) = counted(replicated, lambda: store.get("u", "s", "k", consistency="session"))
        assert on_primary == 1  # ... still the primary
        store.save("u", "s", "k", "v3")  # a later write of the session records a GTID
        replicated.wait_caught_up()
        value, (on_primary, on_replica) = counted(replicated, lambda: store.get("u", "s", "k", consistency="session"))
        assert value == "v3" and on_primary == 0 and on_replica == 2  # the wait, then the read
    finally:
        replicated.resume_replication()
        store.close()
        proxy.close()
        _drop_database(replicated, name)


def test_a_replica_behind_the_create_of_the_table_leaves_the_read_to_the_primary(replicated):
    """Audit R2: a replica that has not applied the CREATE of a new store's table answered
    "eventual" reads with 1146, raised as SchemaNotFoundError ("dropped while the store was
    open"). A replica without the table cannot serve the read: the primary serves it."""
    name = "t_" + uuid.uuid4().hex[:12]
    replicated.pause_replication()  # the replica will not see the CREATE DATABASE / TABLE
    store = MysqlAgentStateStore.from_url(replicated.primary_url, name, create_if_not_exist=True,
                                          replica_urls=[replicated.replica_url], session_wait=0.3)
    try:
        store.save("u", "s", "k", "x")
        store.save_list("u", "s", "l", [1, 2])
        assert store.get("u", "s", "k", consistency="eventual") == "x"
        assert store.get_list("u", "s", "l", consistency="eventual") == [1, 2]
        assert store.get_many("u", "s", values=["k"], lists=["l"], consistency="eventual") == {"k": "x", "l": [1, 2]}
        assert store.list_length("u", "s", "l", consistency="eventual") == 2
        assert store.exists("u", "s", consistency="eventual")
        assert store.list_session_ids("u", consistency="eventual") == {"s"}
        assert store.stats.replica_reads == 0 and store.stats.replica_fallbacks == 6
        replicated.resume_replication()
        replicated.wait_caught_up()
        value, (on_primary, on_replica) = counted(replicated, lambda: store.get("u", "s", "k", consistency="eventual"))
        assert value == "x" and (on_primary, on_replica) == (0, 1)  # it has the table now: it serves
    finally:
        replicated.resume_replication()
        store.close()
        _drop_database(replicated, name)


def test_a_replica_behind_the_alter_that_adds_the_version_column_leaves_the_read_to_the_primary(replicated):
    """An older table (the Java store's: no version column) gets the column when a store opens
    it, on the primary; a replica that had not applied that ALTER answered "eventual" reads
    with error 1054 (unknown column), raised to the caller. The primary serves them now."""
    name = "t_" + uuid.uuid4().hex[:12]
    con = root(replicated.primary_root_url)
    with con.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{name}` DEFAULT CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci")
        cur.execute(f"CREATE TABLE `{name}`.agentscope_sessions (session_id VARCHAR(255) NOT NULL,"
                    " state_key VARCHAR(255) NOT NULL, item_index INT NOT NULL DEFAULT 0, state_data LONGTEXT NOT NULL,"
                    " created_at DATETIME DEFAULT CURRENT_TIMESTAMP, updated_at DATETIME DEFAULT CURRENT_TIMESTAMP"
                    " ON UPDATE CURRENT_TIMESTAMP, PRIMARY KEY (session_id, state_key, item_index))"
                    " DEFAULT CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci")
        cur.execute(f"INSERT INTO `{name}`.agentscope_sessions (session_id, state_key, item_index, state_data)"
                    " VALUES ('u:s', 'v', 0, '1')")
    con.close()
    replicated.wait_caught_up()
    replicated.pause_replication()  # the replica will not see the ALTER the store makes
    store = MysqlAgentStateStore.from_url(replicated.primary_url, name, replica_urls=[replicated.replica_url],
                                          session_wait=0.3)
    try:
        assert store.get("u", "s", "v", consistency="eventual") == 1
        assert store.get_versioned("u", "s", "v", consistency="eventual").value == 1
        assert store.get_many("u", "s", values=["v"], consistency="eventual") == {"v": 1}
        assert store.stats.replica_fallbacks >= 3
    finally:
        replicated.resume_replication()
        store.close()
        _drop_database(replicated, name)


def test_an_eventual_read_from_a_lagging_replica_does_not_refuse_this_processs_next_compare_and_set(replicated, rstore):
    """A replica's older copy of a list became this process's hint with no version, and the
    next compare-and-set at the version this process had itself written was refused (the hint,
    older, was taken for a rewrite). The hint keeps the version the replica showed."""
    from mysql_state import UNVERSIONED

    v1 = rstore.save_list_if_version("u", "s", "l", ["a"], 0)
    v2 = rstore.save_list_if_version("u", "s", "m", ["a"], 0)
    replicated.wait_caught_up()
    replicated.pause_replication()
    v1 = rstore.save_list_if_version("u", "s", "l", ["a", "b"], v1)
    v2 = rstore.save_list_if_version("u", "s", "m", ["a", "b"], v2)
    assert rstore.get_list_versioned("u", "s", "l", consistency="eventual").value == ["a"]  # behind
    assert rstore.get_many("u", "s", lists=["m"], consistency="eventual") == {"m": ["a"]}
    assert rstore.save_list_if_version("u", "s", "l", ["a", "b", "c"], v1) == v1 + 1
    assert rstore.save_list_if_version("u", "s", "m", ["a", "b", "c"], v2) == v2 + 1
    other = MysqlAgentStateStore.from_url(replicated.primary_url, rstore.table.database)
    try:  # a real rewrite behind this process's back is still refused
        other.save_list("u", "s", "l", ["x", "y", "z"])
        assert rstore.save_list_if_version("u", "s", "l", ["a"], v1 + 1) == UNVERSIONED
    finally:
        other.close()


def test_a_session_wait_longer_than_read_timeout_is_not_a_dead_replica(replicated):
    """Audit R3: with session_wait > read_timeout, the replica's MASTER_GTID_WAIT was cut by
    the driver's read_timeout: the read waited read_timeout, not session_wait, and the replica
    was marked down as a frozen host, so the next "eventual" reads went to the primary. The
    wait now runs in slices below read_timeout; one that runs out means "not caught up"."""
    name = "t_" + uuid.uuid4().hex[:12]
    store = MysqlAgentStateStore.from_url(replicated.primary_url, name, create_if_not_exist=True,
                                          replica_urls=[replicated.replica_url], session_wait=2,
                                          read_timeout=1)
    try:
        store.save("u", "s", "k", 1)
        replicated.wait_caught_up()
        replicated.pause_replication()
        store.save("u", "s", "k", 2)
        t0 = time.monotonic()
        assert store.get("u", "s", "k", consistency="session") == 2  # the primary, after the wait
        waited = time.monotonic() - t0
        assert 2 <= waited < 3.5, f"waited {waited:.2f}s: session_wait is 2 s, read_timeout 1 s"
        value, (on_primary, on_replica) = counted(replicated, lambda: store.get("u", "s", "k", consistency="eventual"))
        assert value == 1 and (on_primary, on_replica) == (0, 1), "the lagging replica answers: it serves"
        assert store.stats.replica_reads == 1 and store.stats.replica_fallbacks == 1
    finally:
        replicated.resume_replication()
        store.close()
        _drop_database(replicated, name)
