"""The infrastructure past one server (mysql_state.cluster), proven with plain pymysql:
a 3-node Galera cluster (synchronous multi-primary) and a primary/replica pair (MariaDB
GTID asynchronous replication). No store logic here: these are the facts the store's
cluster support will rest on.

Every test leaves the cluster as it found it (3 nodes, Synced): the cluster is one per
session (it takes ~14 s to form).
"""

from __future__ import annotations

import time
import uuid

import pymysql
import pytest

from mysql_state.pool import parse_url

ER_UNKNOWN_COM_ERROR = 1047  # "WSREP has not yet prepared node for application use"
ER_TABLEACCESS_DENIED = 1142
ER_LOCK_DEADLOCK = 1213  # Galera: certification failure / brute-force abort
ER_OPTION_PREVENTS_STATEMENT = 1290  # --read-only



def connect(url: str, **kw) -> pymysql.connections.Connection:
    kwargs, _ = parse_url(url)
    kw.setdefault("autocommit", True)
    kw.setdefault("connect_timeout", 5)
    kw.setdefault("read_timeout", 30)
    return pymysql.connect(charset="utf8mb4", **kwargs, **kw)


def q(con, sql: str, params: tuple = ()) -> list[tuple]:
    with con.cursor() as cur:
        cur.execute(sql, params)
        return list(cur.fetchall())


def causal(url: str) -> pymysql.connections.Connection:
    """A connection whose reads wait until the node has applied every write committed in the
    cluster before the read began (``wsrep_sync_wait=1``): without it a read on another
    node may run before that node has applied a write just committed elsewhere."""
    con = connect(url)
    q(con, "SET SESSION wsrep_sync_wait = 1")
    return con


@pytest.fixture
def gdb(galera):
    """A fresh database with a table ``t`` (id PK, v) on the cluster, dropped afterwards."""
    name = "t_" + uuid.uuid4().hex[:12]
    con = connect(galera.urls[0])
    q(con, f"CREATE DATABASE `{name}`")
    q(con, f"CREATE TABLE `{name}`.t (id INT PRIMARY KEY, v VARCHAR(64) NOT NULL)")
    yield name
    for i in range(3):  # leave every node running and Synced for the next test
        if not galera.nodes[i].running:
            galera.start(i)
        galera.wait_synced(i, 60)
    q(connect(galera.urls[0]), f"DROP DATABASE IF EXISTS `{name}`")
    con.close()


# ---- Galera ------------------------------------------------------------------------------------


def test_cluster_forms_with_three_synced_nodes(galera, report):
    for i, url in enumerate(galera.urls):
        con = connect(url)
        status = dict(q(con, "SHOW GLOBAL STATUS WHERE Variable_name IN ('wsrep_cluster_size', "
                             "'wsrep_local_state_comment', 'wsrep_cluster_status', 'wsrep_ready')"))
        assert status == {"wsrep_cluster_size": "3", "wsrep_local_state_comment": "Synced",
                          "wsrep_cluster_status": "Primary", "wsrep_ready": "ON"}, (i, status)
        con.close()
    assert galera.url_list == "mysql://root@" + ",".join(f"127.0.0.1:{p}" for p in galera.ports) + "/"
    report(f"galera: 3-node cluster formed in {galera.formation_seconds:.1f}s (ports {galera.ports})")


def test_row_written_on_node_1_is_read_on_nodes_2_and_3(galera, gdb):
    writer = connect(galera.urls[0])
    q(writer, f"INSERT INTO `{gdb}`.t VALUES (1, 'from node 1')")
    for url in galera.urls[1:]:
        assert q(causal(url), f"SELECT id, v FROM `{gdb}`.t") == [(1, "from node 1")]


def test_same_row_updated_on_two_nodes_one_commit_fails_with_1213(galera, gdb):
    q(connect(galera.urls[0]), f"INSERT INTO `{gdb}`.t VALUES (1, 'start')")
    a, b = connect(galera.urls[0], autocommit=False), connect(galera.urls[1], autocommit=False)
    q(causal(galera.urls[1]), f"SELECT * FROM `{gdb}`.t")  # node 2 has the row
    q(a, "BEGIN")
    q(b, "BEGIN")
    # Each node locks only its own copy of the row: neither update waits for the other.
    q(a, f"UPDATE `{gdb}`.t SET v = 'a' WHERE id = 1")
    q(b, f"UPDATE `{gdb}`.t SET v = 'b' WHERE id = 1")
    a.commit()  # the first to commit wins certification
    with pytest.raises(pymysql.err.OperationalError) as raised:
        b.commit()  # the loser learns it only here, at COMMIT
    assert raised.value.args[0] == ER_LOCK_DEADLOCK
    assert any(f.name == "commit" for f in raised.traceback), "raised by commit()"
    b.rollback()
    for url in galera.urls:
        assert q(causal(url), f"SELECT v FROM `{gdb}`.t WHERE id = 1") == [("a",)]


def test_killed_node_others_go_on_and_it_rejoins_with_every_row(galera, gdb, report):
    cons = [connect(galera.urls[0]), connect(galera.urls[1])]
    q(cons[0], f"INSERT INTO `{gdb}`.t VALUES (0, 'before')")
    galera.kill(2)
    t0 = time.monotonic()
    worst = 0.0
    for k in range(1, 41):  # writes on the two survivors, alternately
        t = time.monotonic()
        q(cons[k % 2], f"INSERT INTO `{gdb}`.t VALUES (%s, 'while node 3 was down')", (k,))
        worst = max(worst, time.monotonic() - t)
    took = time.monotonic() - t0
    for i in (0, 1):
        assert galera.status(i)["wsrep_cluster_size"] == "2"
    t0 = time.monotonic()
    galera.start(2)
    rejoin = time.monotonic() - t0
    status = galera.wait_synced(2, 10)
    assert status["wsrep_cluster_size"] == "3"
    rows = q(causal(galera.urls[2]), f"SELECT id FROM `{gdb}`.t ORDER BY id")
    assert rows == [(k,) for k in range(41)]
    report(f"galera: node 3 SIGKILLed: 40 writes on nodes 1-2 took {took:.1f}s (longest {worst:.2f}s, "
           f"until the dead node was evicted); restart + rejoin (IST) took {rejoin:.1f}s")


def test_node_cut_off_from_quorum_answers_1047(galera, gdb):
    q(connect(galera.urls[0]), f"INSERT INTO `{gdb}`.t VALUES (1, 'x')")
    galera.isolate(2)
    try:
        con = connect(galera.urls[2])  # connecting still works ...
        with pytest.raises(pymysql.err.OperationalError) as raised:
            q(con, f"SELECT * FROM `{gdb}`.t")  # ... but no statement on data
        assert raised.value.args[0] == ER_UNKNOWN_COM_ERROR, raised.value
        assert "WSREP has not yet prepared node" in raised.value.args[1]
        # the majority (nodes 1 and 2) stays primary and writable
        q(connect(galera.urls[0]), f"INSERT INTO `{gdb}`.t VALUES (2, 'y')")
        assert galera.status(0)["wsrep_cluster_size"] == "2"
    finally:
        galera.rejoin(2)
    assert q(causal(galera.urls[2]), f"SELECT id FROM `{gdb}`.t ORDER BY id") == [(1,), (2,)]


def test_get_lock_is_node_local(galera):
    """GET_LOCK is not replicated: the same name is granted on two nodes at once, so it
    cannot serve as a cluster-wide mutex."""
    name = "mysql-state-" + uuid.uuid4().hex
    a, b = connect(galera.urls[0]), connect(galera.urls[1])
    c = connect(galera.urls[0])
    try:
        assert q(a, "SELECT GET_LOCK(%s, 0)", (name,)) == [(1,)]
        assert q(c, "SELECT GET_LOCK(%s, 0)", (name,)) == [(0,)]  # taken, on node 1
        t = time.monotonic()
        assert q(b, "SELECT GET_LOCK(%s, 5)", (name,)) == [(1,)]  # free, on node 2
        assert time.monotonic() - t < 1.0, "did not wait"
    finally:
        for con in (a, b, c):
            q(con, "SELECT RELEASE_ALL_LOCKS()")


# ---- primary + replica (asynchronous GTID replication) ----------------------------------------


@pytest.fixture
def rdb(replicated):
    name = "t_" + uuid.uuid4().hex[:12]
    con = connect(replicated.primary_url)  # the non-admin writer
    q(con, f"CREATE DATABASE `{name}`")
    q(con, f"CREATE TABLE `{name}`.t (id INT PRIMARY KEY, v VARCHAR(64) NOT NULL)")
    yield name
    replicated.resume_replication()
    q(connect(replicated.primary_root_url), f"DROP DATABASE IF EXISTS `{name}`")
    con.close()


def gtid_wait(replicated, gtid: str, timeout: float) -> int:
    return q(connect(replicated.replica_url), "SELECT MASTER_GTID_WAIT(%s, %s)", (gtid, timeout))[0][0]


def test_write_on_primary_appears_on_replica(replicated, rdb):
    q(connect(replicated.primary_url), f"INSERT INTO `{rdb}`.t VALUES (1, 'replicated')")
    deadline = time.monotonic() + 10
    reader = connect(replicated.replica_url)
    while q(reader, f"SELECT v FROM `{rdb}`.t") != [("replicated",)]:
        assert time.monotonic() < deadline, "row not on the replica within 10 s"
        time.sleep(0.05)


def test_master_gtid_wait_0_when_caught_up_and_minus_1_while_paused(replicated, rdb):
    writer = connect(replicated.primary_url, autocommit=False)
    q(writer, f"INSERT INTO `{rdb}`.t VALUES (1, 'one')")
    writer.commit()
    gtid = q(writer, "SELECT @@last_gtid")[0][0]  # this session's last commit
    assert gtid and gtid == q(writer, "SELECT @@gtid_binlog_pos")[0][0]
    assert gtid_wait(replicated, gtid, 10) == 0
    reader = connect(replicated.replica_url)
    assert q(reader, f"SELECT v FROM `{rdb}`.t") == [("one",)]

    replicated.pause_replication()
    q(writer, f"INSERT INTO `{rdb}`.t VALUES (2, 'two')")
    writer.commit()
    gtid2 = q(writer, "SELECT @@last_gtid")[0][0]
    t = time.monotonic()
    assert gtid_wait(replicated, gtid2, 0.5) == -1  # timed out: the replica lags
    assert time.monotonic() - t >= 0.4
    assert q(reader, f"SELECT id FROM `{rdb}`.t ORDER BY id") == [(1,)]
    assert gtid_wait(replicated, gtid, 0) == 0  # an older position is still reached

    replicated.resume_replication()
    assert gtid_wait(replicated, gtid2, 10) == 0
    assert q(reader, f"SELECT id FROM `{rdb}`.t ORDER BY id") == [(1,), (2,)]


def test_reader_cannot_write_on_replica(replicated, rdb):
    replicated.wait_caught_up()
    reader = connect(replicated.replica_url)
    with pytest.raises(pymysql.err.OperationalError) as raised:
        q(reader, f"INSERT INTO `{rdb}`.t VALUES (9, 'no')")
    assert raised.value.args[0] in (ER_OPTION_PREVENTS_STATEMENT, ER_TABLEACCESS_DENIED)
    # and the writer account, lacking READ_ONLY ADMIN/SUPER, is refused by --read-only there
    kwargs, _ = parse_url(replicated.primary_url)
    writer_on_replica = pymysql.connect(host="127.0.0.1", port=replicated.replica.port,
                                        user=kwargs["user"], password=kwargs["password"], autocommit=True)
    with pytest.raises(pymysql.err.OperationalError) as raised:
        q(writer_on_replica, f"INSERT INTO `{rdb}`.t VALUES (9, 'no')")
    assert raised.value.args[0] == ER_OPTION_PREVENTS_STATEMENT
    assert q(reader, f"SELECT COUNT(*) FROM `{rdb}`.t WHERE id = 9") == [(0,)]
