"""The store on a 3-node Galera cluster (the session ``galera`` fixture): writers on every
node, certification conflicts retried as whole transactions, compare-and-set with one winner
per version across nodes, a node SIGKILLed under writers (failover through the host list)
and a node cut off from quorum (1047).

Every test leaves the cluster as it found it (3 nodes, Synced). Reads that check the outcome
on each node use ``wsrep_sync_wait=1`` (causal reads), given to the store as pymysql's
``init_command``.
"""

from __future__ import annotations

import threading
import time
import uuid

import pymysql
import pytest

from mysql_state import MysqlAgentStateStore
from mysql_state.errors import CommitUnknownError, ServerUnavailableError
from mysql_state.store import UNVERSIONED

CAUSAL = "SET SESSION wsrep_sync_wait = 1"


def node_url(galera, first: int) -> str:
    """The cluster's multi-host URL with node ``first`` first, then the others in order."""
    order = [first] + [i for i in range(len(galera.nodes)) if i != first]
    return "mysql://root@" + ",".join(f"127.0.0.1:{galera.ports[i]}" for i in order) + "/"


@pytest.fixture
def gname(galera):
    """A fresh database name on the cluster; every node running and Synced afterwards."""
    name = "t_" + uuid.uuid4().hex[:12]
    yield name
    for i in range(3):
        if not galera.nodes[i].running:
            galera.start(i)
        galera.wait_synced(i, 60)
    con = galera.connect(0)
    with con.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
    con.close()


def stores(galera, name: str, **kw) -> list[MysqlAgentStateStore]:
    """One store per node (each on that node only), causal reads."""
    out = []
    for url in galera.urls:
        out.append(MysqlAgentStateStore.from_url(url, name, create_if_not_exist=True,
                                                 init_command=CAUSAL, **kw))
    return out


def rows_on(galera, i: int, name: str) -> list[tuple]:
    con = galera.connect(i)
    try:
        with con.cursor() as cur:
            cur.execute(CAUSAL)
            cur.execute(f"SELECT session_id, state_key, item_index, state_data, version "
                        f"FROM `{name}`.agentscope_sessions ORDER BY session_id, state_key, item_index")
            return list(cur.fetchall())
    finally:
        con.close()


def run_threads(targets: list) -> list:
    """Run each callable in its own thread; re-raise the first failure."""
    errors: list = []

    def wrap(fn):
        def inner():
            try:
                fn()
            except BaseException as e:  # noqa: BLE001 - reported below
                errors.append(e)
        return inner

    threads = [threading.Thread(target=wrap(t)) for t in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    if errors:
        raise errors[0]
    return errors


def test_certification_conflict_1213_at_commit_is_retried_as_a_whole(galera, gname):
    s = stores(galera, gname)
    try:
        s[0].save("u", "s", "k", "start")
        both_open = threading.Barrier(2)
        attempts = {0: 0, 1: 0}

        def writer(i: int):
            def fn(tx):
                attempts[i] += 1
                tx.save("u", "s", "k", f"node{i}")
                if attempts[i] == 1:
                    both_open.wait(10)  # both transactions hold their node-local row lock
                return attempts[i]
            return lambda: s[i].transaction(fn)

        run_threads([writer(0), writer(1)])
        retried = [i for i in (0, 1) if s[i].stats.retries_by_errno.get(1213)]
        assert len(retried) == 1 and attempts[retried[0]] >= 2, (attempts, [x.stats for x in s])
        loser = retried[0]
        for node in s:  # the retried transaction committed last
            assert node.get("u", "s", "k") == f"node{loser}"
    finally:
        for x in s:
            x.close()


def test_writers_on_every_node_lists_whole_everywhere(galera, gname, report):
    s = stores(galera, gname)
    steps = 30
    try:
        def own_session(i: int):
            def run():
                items: list = []
                for j in range(steps):
                    items.append({"w": i, "j": j})
                    s[i].save_list("u", f"own-{i}", "memory", items)
                    s[i].append_list("u", f"own-{i}", "log", [j])
            return run

        def shared(i: int):  # nodes 0 and 1 save the same list, each its own whole lists
            def run():
                for j in range(1, steps + 1):
                    s[i].save_list("u", "shared", "memory", [f"w{i}-{k}" for k in range(j)])
            return run

        t0 = time.monotonic()
        run_threads([own_session(i) for i in range(3)] + [shared(0), shared(1)])
        took = time.monotonic() - t0
        for node in range(3):
            for i in range(3):
                assert s[node].get_list("u", f"own-{i}", "memory") == [{"w": i, "j": j} for j in range(steps)]
                assert s[node].get_list("u", f"own-{i}", "log") == list(range(steps))
            got = s[node].get_list("u", "shared", "memory")
            assert got and any(got == [f"w{w}-{k}" for k in range(len(got))] for w in (0, 1)), got
        assert rows_on(galera, 0, gname) == rows_on(galera, 1, gname) == rows_on(galera, 2, gname)
        retries = {}
        for x in s:
            for errno, n in x.stats.retries_by_errno.items():
                retries[errno] = retries.get(errno, 0) + n
        report(f"galera store: 5 writers on 3 nodes, {5 * steps} list saves + {3 * steps} appends in "
               f"{took:.1f}s; retried by errno: {retries}")
    finally:
        for x in s:
            x.close()


def test_compare_and_set_one_winner_per_version_across_nodes(galera, gname):
    s = stores(galera, gname)
    rounds = 8
    try:
        for kind in ("value", "list"):
            key = f"cas-{kind}"
            for r in range(rounds):
                start = threading.Barrier(3)
                results: dict = {}

                def racer(i: int, r=r, start=start, results=results, key=key, kind=kind):
                    def run():
                        if kind == "value":
                            _, v = s[i].get_versioned("u", "s", key)
                            start.wait(10)
                            results[i] = (v, s[i].save_if_version("u", "s", key, {"by": i, "r": r}, v))
                        else:
                            items, v = s[i].get_list_versioned("u", "s", key)
                            start.wait(10)
                            results[i] = (v, s[i].save_list_if_version("u", "s", key, items + [[i, r]], v))
                    return run

                run_threads([racer(i) for i in range(3)])
                assert len({v for v, _ in results.values()}) == 1, results  # all read one version
                winners = [i for i, (v, new) in results.items() if new != UNVERSIONED]
                assert len(winners) == 1, (kind, r, results)
                assert results[winners[0]][1] == r + 1
            for node in range(3):
                if kind == "value":
                    assert s[node].get_versioned("u", "s", key).version == rounds
                else:
                    items, v = s[node].get_list_versioned("u", "s", key)
                    assert v == rounds and [x[1] for x in items] == list(range(rounds))
    finally:
        for x in s:
            x.close()


def test_node_killed_under_writers_failover_and_rejoin(galera, gname, report):
    """Writers on nodes 0 and 1 (a store each) and one on a store whose host list starts
    with node 2; node 2 is SIGKILLed while they write."""
    plain = [MysqlAgentStateStore.from_url(galera.urls[i], gname, create_if_not_exist=True, init_command=CAUSAL)
             for i in (0, 1)]
    listed = MysqlAgentStateStore.from_url(node_url(galera, 2), gname, create_if_not_exist=True,
                                           init_command=CAUSAL)
    writers = {"n0": plain[0], "n1": plain[1], "list": listed}
    done = {w: [] for w in writers}  # items acknowledged
    unknown = {w: [] for w in writers}  # CommitUnknownError: stored or not
    stamps = {w: [] for w in writers}
    stop = threading.Event()
    killed_at = [0.0]

    def writer(w: str):
        def run():
            j = 0
            while not stop.is_set():
                try:
                    writers[w].append_list("u", w, "log", [j])
                    done[w].append(j)
                    stamps[w].append(time.monotonic())
                except CommitUnknownError:
                    unknown[w].append(j)
                j += 1
        return run

    try:
        assert port_of(listed) == galera.ports[2]
        threads = [threading.Thread(target=writer(w)) for w in writers]
        for t in threads:
            t.start()
        time.sleep(1.0)
        killed_at[0] = time.monotonic()
        galera.kill(2)
        time.sleep(8.0)  # eviction (~3-4 s: suspect_timeout 3 s), then writing on
        stop.set()
        for t in threads:
            t.join(60)
        after = {w: sum(t > killed_at[0] + 5 for t in stamps[w]) for w in writers}
        assert all(n > 0 for n in after.values()), ("writers went on after the pause", after)
        pause = max(b - a for w in writers for a, b in zip(stamps[w], stamps[w][1:]))
        assert listed.stats.reconnects >= 1
        for w in writers:  # every acknowledged item once, in order; unknown ones maybe
            got = plain[0].get_list("u", w, "log")
            assert [x for x in got if x not in unknown[w]] == done[w], w
            assert len(set(got)) == len(got)
        t0 = time.monotonic()
        galera.start(2)
        rejoin = time.monotonic() - t0
        assert rows_on(galera, 2, gname) == rows_on(galera, 0, gname)
        # the preferred host is used again for new connections once its back-off is over
        deadline = time.monotonic() + 12
        while port_of(listed) != galera.ports[2]:
            assert time.monotonic() < deadline, "the recovered first host was not used again"
            time.sleep(0.5)
        report(f"galera store: node SIGKILLed under 3 writers: longest pause {pause:.2f}s, the store "
               f"whose first host died failed over ({listed.stats.reconnects} reconnects, "
               f"{sum(map(len, unknown.values()))} CommitUnknownError); rejoin {rejoin:.1f}s, every row there")
    finally:
        stop.set()
        for x in writers.values():
            x.close()


def port_of(store: MysqlAgentStateStore) -> int:
    """The port of the server that serves this store's reads now (a real query)."""
    return store._db.run(lambda cur: (cur.execute("SELECT @@port"), cur.fetchone()[0])[1], "port", write=False)


def test_isolated_node_only_host_unavailable_list_moves_on(galera, gname):
    alone = MysqlAgentStateStore.from_url(galera.urls[2], gname, create_if_not_exist=True)
    listed = MysqlAgentStateStore.from_url(node_url(galera, 2), gname, create_if_not_exist=True,
                                           init_command=CAUSAL)
    try:
        alone.save("u", "s", "k", "before")
        galera.isolate(2)
        try:
            with pytest.raises(ServerUnavailableError) as raised:
                alone.get("u", "s", "k")
            assert raised.value.errno == 1047
            assert isinstance(raised.value.__cause__, pymysql.err.Error)
            with pytest.raises(ServerUnavailableError):
                alone.save("u", "s", "k", "during")
            listed.save("u", "s", "k", "during")  # on node 0: 1047 means "next host"
            assert listed.get("u", "s", "k") == "during"
            assert port_of(listed) != galera.ports[2]
        finally:
            galera.rejoin(2)
        assert alone.get("u", "s", "k") == "during"
    finally:
        alone.close()
        listed.close()


def test_from_url_moves_on_when_the_first_host_lost_quorum(galera, gname):
    """Issue 18 item 20: node 2 isolated (non-primary) answers the read-only set-up's COMMIT
    with 1047; a transaction that wrote nothing is never "unknown": the next host serves."""
    seed = MysqlAgentStateStore.from_url(galera.urls[0], gname, create_if_not_exist=True)
    seed.close()
    galera.isolate(2)
    try:
        for create in (False, True):  # the read-only set-up, and the one that runs DDL
            # no causal reads here: a non-primary node answers wsrep_sync_wait with 1205
            store = MysqlAgentStateStore.from_url(node_url(galera, 2), gname, create_if_not_exist=create)
            try:
                assert port_of(store) != galera.ports[2]
                store.save("u", "s", "k", create)
                assert store.get("u", "s", "k") is create
            finally:
                store.close()
    finally:
        galera.rejoin(2)


def test_a_node_leaving_the_primary_component_during_commit_1180_is_commit_unknown(galera, gname, report):
    """Audit R4: a writer whose node leaves the primary component while it replicates the
    COMMIT gets error 1180 ("Error while appending streaming replication fragment (provider
    status: Not connected to Primary Component)": MariaDB words every failed certification
    so). It was a QueryError, and the writer stopped. At COMMIT the write set may have been
    ordered by the rest of the cluster before the node left it, so it is CommitUnknownError,
    never repeated (errors.py; 1180 before COMMIT is retried: tests/test_failover.py); the
    store's next write moves on to the next host.

    Node 0 is cut off (``gmcast.isolate=1``) just before the writes: it stays Primary, taking
    statements, until it notices its peers are gone (evs.suspect_timeout), so each COMMIT's
    replication is in flight when the node leaves the primary component."""
    stores = [MysqlAgentStateStore.from_url(node_url(galera, 0), gname, create_if_not_exist=True)
              for _ in range(2)]
    outcome: dict = {}
    try:
        stores[0].save_list("u", "a", "log", [0])
        stores[1].save("u", "v", "k", "before")
        assert port_of(stores[0]) == port_of(stores[1]) == galera.ports[0]
        con = galera.connect(0)
        with con.cursor() as cur:
            cur.execute("SET GLOBAL wsrep_provider_options = 'gmcast.isolate=1'")
        con.close()
        t0 = time.monotonic()

        def call(label, fn):
            def run():
                try:
                    outcome[label] = ("ok", None)
                    fn()
                except Exception as e:  # noqa: BLE001 - checked below
                    outcome[label] = (type(e).__name__, getattr(e, "errno", None))
                outcome[label] += (time.monotonic() - t0,)
            return run

        run_threads([call("append", lambda: stores[0].append_list("u", "a", "log", [1])),  # one packet
                     call("save", lambda: stores[1].transaction(  # its own COMMIT
                         lambda tx: (tx.save("u", "v", "k", "during"), tx.save("u", "v", "j", 1))))])
        status = galera.status(0)
        assert status["wsrep_cluster_status"] != "Primary", status  # node 0 did leave
        for label in ("append", "save"):
            assert outcome[label][:2] == ("CommitUnknownError", 1180), outcome
            assert outcome[label][2] > 1.0, ("in flight until node 0 left", outcome)
        for s in stores:
            assert s.stats.reconnects == 0 and s.stats.lock_retries == 0  # tried once, never repeated
        stores[0].append_list("u", "a", "log", [2])  # the writer goes on: node 0 answers 1047, node 1 serves
        assert port_of(stores[0]) != galera.ports[0]
    finally:
        galera.rejoin(0)
        for s in stores:
            s.close()
    for i in range(3):
        assert rows_on(galera, i, gname) == rows_on(galera, 0, gname)
    check = MysqlAgentStateStore.from_url(galera.urls[1], gname, init_command=CAUSAL)
    try:
        assert check.get_list("u", "a", "log") in ([0, 2], [0, 1, 2])  # unknown: either, never twice
        assert check.get_many("u", "v", values=["k", "j"]) in ({"k": "before"}, {"k": "during", "j": 1})  # all or none
    finally:
        check.close()
    report(f"galera store: node cut off during COMMIT: CommitUnknownError (1180) after "
           f"{outcome['append'][2]:.1f}s, the next write went on on another node")
