"""Fixtures: a real server (see mysql_state.server), a store on a database of its own per
test, and plain SQL on the table for looking behind the store's back."""

from __future__ import annotations

import contextlib
import subprocess
import threading
import uuid
import warnings

import pymysql
import pytest

from mysql_state import MysqlAgentStateStore
from mysql_state.pool import parse_url
from mysql_state.server import server_url


@pytest.fixture(scope="session")
def url() -> str:
    return server_url()


def connect(url: str, **kw) -> pymysql.connections.Connection:
    kwargs, _ = parse_url(url)
    return pymysql.connect(charset="utf8mb4", autocommit=True, **kwargs, **kw)


class Raw:
    """Plain SQL on the server, outside the store."""

    def __init__(self, url: str, database: str, table: str = "agentscope_sessions") -> None:
        self.con = connect(url)
        self.database, self.table = database, table

    @property
    def t(self) -> str:
        return f"`{self.database}`.`{self.table}`"

    def query(self, sql: str, params: tuple = ()) -> list[tuple]:
        with self.con.cursor() as cur:
            cur.execute(sql.replace("{t}", self.t), params)
            return list(cur.fetchall())

    def execute(self, sql: str, params: tuple = ()) -> int:
        with self.con.cursor() as cur:
            return cur.execute(sql.replace("{t}", self.t), params)

    def com_counts(self) -> dict:
        """The server's statement counters (``Com_*``) that are not 0, but the SHOWs that read them."""
        return {r[0]: int(r[1]) for r in self.query("SHOW GLOBAL STATUS LIKE 'Com\\_%%'")
                if int(r[1]) and r[0] != "Com_show_status"}

    def counted(self, variable: str, fn) -> tuple:
        """``fn()`` and how much the server's status ``variable`` grew meanwhile, less the one
        the status query itself adds (a statement, a row sent)."""
        def count() -> int:
            return int(self.query("SHOW GLOBAL STATUS LIKE %s", (variable,))[0][1])

        before = count()
        out = fn()
        return out, count() - before - 1

    def sent(self, fn) -> tuple:
        """``fn()`` and the rows the server sent meanwhile (``Rows_sent``)."""
        return self.counted("Rows_sent", fn)

    def statements(self, fn) -> tuple:
        """``fn()`` and the statements the server received meanwhile (``Questions``)."""
        return self.counted("Questions", fn)

    def rows(self, session_id: str | None = None) -> list[tuple]:
        """(session_id, state_key, item_index, state_data, version), in key order: of one session,
        or of every caller's session (not the internal catalog and history rows: see all_rows)."""
        where, params = ("WHERE session_id = %s", (session_id,)) if session_id is not None else (
            "WHERE session_id LIKE '%%:%%'", ())
        return self.query(
            "SELECT session_id, state_key, item_index, state_data, version FROM {t} "
            f"{where} ORDER BY session_id, state_key, item_index",
            params,
        )

    def all_rows(self) -> list[tuple]:
        """Every row of the table, internal ones (catalog, history) included, in key order."""
        return self.query("SELECT session_id, state_key, item_index, state_data, version FROM {t}"
                          " ORDER BY session_id, state_key, item_index")

    def close(self) -> None:
        self.con.close()


@pytest.fixture
def database(url: str):
    """A fresh database name, dropped after the test."""
    name = "t_" + uuid.uuid4().hex[:12]
    yield name
    con = connect(url)
    with con.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
    con.close()


@pytest.fixture
def store(url: str, database: str):
    s = MysqlAgentStateStore.from_url(url, database_name=database, create_if_not_exist=True)
    yield s
    s.close()


@pytest.fixture
def raw(url: str, database: str, store):
    r = Raw(url, database)
    yield r
    r.close()


@pytest.fixture
def other(url: str, database: str, store):
    """A second store object on the same table (own pools, own caches): another worker."""
    s = MysqlAgentStateStore.from_url(url, database_name=database)
    yield s
    s.close()


@pytest.fixture
def driver_commits(monkeypatch) -> list:
    """Each COMMIT the driver sends on its own (``Connection.commit``), counted: a write whose
    statement carries its COMMIT in its packet sends none."""
    real, called = pymysql.connections.Connection.commit, []
    monkeypatch.setattr(pymysql.connections.Connection, "commit", lambda con: (called.append(1), real(con))[1])
    return called


# ---- what the tests did: printed at the end of the run ---------------------------------------

_REPORT: list[str] = []


@pytest.fixture(scope="session")
def report():
    """``report("...")`` adds a line to the summary printed after the run."""
    return _REPORT.append


def pytest_sessionfinish(session):
    """Under pytest-xdist, a worker hands its report lines to the controller (which prints them)."""
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["mysql_state_report"] = list(_REPORT)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """The controller's side of :func:`pytest_sessionfinish` (a hook of pytest-xdist's)."""
    _REPORT.extend(getattr(node, "workeroutput", {}).get("mysql_state_report", []))


def pytest_terminal_summary(terminalreporter):
    if _REPORT:
        terminalreporter.section("mysql-state: what the tests did")
        for line in _REPORT:
            terminalreporter.write_line(line)


# ---- running side by side (pytest-xdist, ``make test``: ``-n 2``) --------------------------------
#
# Each worker process starts its own server (``server_url`` is once per process), so a test that
# counts the server's statements sees only its own. Tests are spread one by one, but those that
# share something costly to start stay together on one worker: the Galera cluster and the
# replicated pair (session fixtures of this file), and every test of a module whose module- or
# session-scoped fixture starts a server or runs a framework's whole inner suite, or whose tests
# share module state. The grouping is this file's own scheduler (``pytest_xdist_make_scheduler``):
# xdist's ``--dist loadgroup`` groups by rewriting node ids, which pytest 9.2 ignores
# (pytest-xdist issue 1386), so under it every test went its own way.

#: Module -> the group its tests run in, on one worker.
GROUPS = {
    "test_cluster": "galera", "test_galera_store": "galera",  # one 3-node cluster (the galera fixture)
    "test_replicas_store": "replicated",  # the replicated fixture
    # run_cases: the framework's whole inner suite, once
    "test_adk": "test_adk", "test_agentscope1": "test_agentscope1", "test_openai_agents": "test_openai_agents",
    # servers of their own (module fixtures, local_server), or module state shared by its tests
    "test_backup": "test_backup", "test_faults": "test_faults", "test_sizes": "test_sizes", "test_tls": "test_tls",
    "test_hostile": "test_hostile",
}
#: Fixtures that are costly to make more than once: a test using one must be in a module of GROUPS.
GROUPED_FIXTURES = ("galera", "replicated", "local_server")


def module_of(nodeid: str) -> str:
    """``tests/test_x.py::test_y[p]`` -> ``test_x``."""
    return nodeid.split("::", 1)[0].rsplit("/", 1)[-1].removesuffix(".py")


def pytest_collection_modifyitems(config, items):
    """A test that uses a costly shared fixture outside a grouped module fails the run (it
    would make the fixture again on another worker)."""
    stray = [item.nodeid for item in items
             if module_of(item.nodeid) not in GROUPS and any(f in item.fixturenames for f in GROUPED_FIXTURES)]
    if stray:
        raise pytest.UsageError(f"tests using {GROUPED_FIXTURES} outside a module of tests/conftest.py's GROUPS: "
                                f"{stray[:5]}")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """xdist's LoadScope scheduling with this file's scopes: a grouped module's group, else each
    test on its own."""
    from xdist.scheduler import LoadScopeScheduling

    class Grouped(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:  # xdist's documented way to define the scope
            return GROUPS.get(module_of(nodeid), nodeid)

    return Grouped(config, log)


#: The table as the Java store's documented DDL makes it: case-insensitive keys, version 0.
JAVA_DDL = (
    "CREATE TABLE `{db}`.`agentscope_sessions` (session_id VARCHAR(255) NOT NULL, state_key VARCHAR(255) NOT NULL,"
    " item_index INT NOT NULL DEFAULT 0, state_data LONGTEXT NOT NULL, version BIGINT NOT NULL DEFAULT 0,"
    " created_at DATETIME DEFAULT CURRENT_TIMESTAMP, updated_at DATETIME DEFAULT CURRENT_TIMESTAMP"
    " ON UPDATE CURRENT_TIMESTAMP, PRIMARY KEY (session_id, state_key, item_index))"
    " DEFAULT CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci"
)


def make_java_table(url: str, database: str) -> None:
    """A database holding an empty table made with the Java store's DDL."""
    con = connect(url)
    with con.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{database}`")
        cur.execute(JAVA_DDL.replace("{db}", database))
    con.close()


@contextlib.contextmanager
def java_store(url: str, database: str):
    """A store and a Raw on a new table made with the Java store's DDL (its collation: the store
    warns, and works), both closed at the end."""
    make_java_table(url, database)
    raw = Raw(url, database)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        store = MysqlAgentStateStore.from_url(url, database_name=database)
    try:
        yield store, raw
    finally:
        store.close()
        raw.close()


def private_server(*args: str):
    """A throwaway server of the calling module's own, started with ``args``; skips, saying
    why, where no server binary exists (``make test`` installs one)."""
    from mysql_state.server import LocalServer, find_binary

    if find_binary("mariadbd", "mysqld") is None:
        pytest.skip(f"needs a mariadbd/mysqld binary to start a server with {' '.join(args)}")
    return LocalServer(*args)


@pytest.fixture(scope="module")
def local_server():
    """A throwaway server of this module's own, which tests may kill and restart."""
    from mysql_state.server import LocalServer, find_binary

    if find_binary("mariadbd", "mysqld") is None:
        pytest.skip("needs a mariadbd/mysqld binary to crash and restart (make test installs one)")
    server = LocalServer()
    yield server
    server.stop()


# ---- past one server: a Galera cluster and a primary/replica pair (mysql_state.cluster) ------


@pytest.fixture(scope="session")
def galera():
    """One 3-node Galera cluster per session (tests must leave all 3 nodes running and Synced).

    Skips, saying why, without galera-4/rsync/mariadbd; fails loudly, with the nodes' error
    log tails, when the cluster has not formed within 60 s."""
    from mysql_state.cluster import ClusterError, GaleraCluster, galera_missing

    why = galera_missing()
    if why:
        pytest.skip(why)
    try:
        cluster = GaleraCluster(3, timeout=60.0)
    except ClusterError as e:
        pytest.fail(f"the Galera cluster did not form within 60 s: {e}", pytrace=False)
    yield cluster
    cluster.stop()


@pytest.fixture(scope="session")
def replicated():
    """One primary + read-only replica (GTID asynchronous replication) per session."""
    from mysql_state.cluster import ClusterError, ReplicatedPair
    from mysql_state.server import find_binary

    if find_binary("mariadbd") is None:
        pytest.skip("needs mariadbd for a replicated pair (apt-get install mariadb-server)")
    try:
        pair = ReplicatedPair()
    except ClusterError as e:
        pytest.fail(f"the replicated pair did not start: {e}", pytrace=False)
    yield pair
    pair.stop()


def in_thread(fn):
    """Start fn in a thread; ``join()`` returns its result or raises its error."""
    box: dict = {}

    def run():
        try:
            box["result"] = fn()
        except BaseException as exc:  # noqa: BLE001
            box["error"] = exc

    t = threading.Thread(target=run)
    t.start()

    def join():
        t.join(20)
        assert not t.is_alive()
        if "error" in box:
            raise box["error"]
        return box.get("result")

    return join


def with_terminal_stderr(argv: list) -> subprocess.CompletedProcess:
    """Run ``argv`` with stderr on a pseudo-terminal (where a progress bar is drawn), stdout piped."""
    import os
    import pty

    master, slave = pty.openpty()
    try:
        proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=slave, stdin=subprocess.DEVNULL, text=True, timeout=120)
        os.close(slave)
        slave = -1
        chunks = []
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the terminal's other end is closed and drained
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        if slave >= 0:
            os.close(slave)
        os.close(master)
    return subprocess.CompletedProcess(argv, proc.returncode, proc.stdout, b"".join(chunks).decode(errors="replace"))
