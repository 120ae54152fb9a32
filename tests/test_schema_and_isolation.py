"""Schema set-up, identifier validation, isolation of ids, pools and from_url."""

from __future__ import annotations

import threading
import warnings

import pymysql
import pytest
from dbutils.pooled_db import PooledDB

from mysql_state import (
    UNVERSIONED,
    MysqlAgentStateStore,
    MysqlStateWarning,
    PoolTimeoutError,
    SchemaNotFoundError,
    StaleStateError,
)
from mysql_state.pool import parse_url

from .conftest import Raw, connect, make_java_table


def pymysql_pool(url: str, **kw) -> PooledDB:
    kwargs, _ = parse_url(url)
    return PooledDB(pymysql, charset="utf8mb4", **kwargs, **kw)


# ---- schema ---------------------------------------------------------------------------------------


def test_created_table_matches_the_java_schema_with_exact_key_columns(store, url, database):
    con = connect(url)
    with con.cursor() as cur:
        cur.execute(
            "SELECT COLUMN_NAME, COLUMN_TYPE, IS_NULLABLE, COLUMN_DEFAULT, COLLATION_NAME, COLUMN_KEY"
            " FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = 'agentscope_sessions'"
            " ORDER BY ORDINAL_POSITION",
            (database,),
        )
        cols = cur.fetchall()
        cur.execute("SELECT DEFAULT_CHARACTER_SET_NAME, DEFAULT_COLLATION_NAME FROM information_schema.SCHEMATA"
                    " WHERE SCHEMA_NAME = %s", (database,))
        schema = cur.fetchone()
        cur.execute("SELECT TABLE_COLLATION FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s", (database,))
        table_collation = cur.fetchone()[0]
    con.close()
    names = [c[0] for c in cols]
    assert names == ["session_id", "state_key", "item_index", "state_data", "version", "created_at", "updated_at"]
    by = {c[0]: c for c in cols}
    assert by["session_id"][1] == "varchar(255)" and by["state_key"][1] == "varchar(255)"
    assert by["session_id"][4] in ("utf8mb4_nopad_bin", "utf8mb4_0900_bin")
    assert by["state_key"][4] == by["session_id"][4]
    assert by["item_index"][1].startswith("int") and by["version"][1].startswith("bigint")
    assert by["state_data"][1] == "longtext"
    assert [c[0] for c in cols if c[5] == "PRI"] == ["session_id", "state_key", "item_index"]
    assert schema == ("utf8mb4", "utf8mb4_unicode_ci")
    assert table_collation == "utf8mb4_unicode_ci"
    assert store.database_name == database and store.table_name == "agentscope_sessions"


def test_missing_database_or_table_raises_schema_not_found_and_creates_nothing(url, database):
    with pytest.raises(SchemaNotFoundError, match=f"database `{database}` does not exist.*CREATE DATABASE"):
        MysqlAgentStateStore.from_url(url, database_name=database)
    con = connect(url)
    with con.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{database}`")
    with pytest.raises(SchemaNotFoundError, match=f"table `{database}`.`agentscope_sessions` does not exist.*CREATE TABLE"):
        MysqlAgentStateStore.from_url(url, database_name=database)
    with con.cursor() as cur:
        cur.execute("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s", (database,))
        assert cur.fetchone()[0] == 0
    con.close()


@pytest.mark.parametrize("dropped", ["table", "database"])
def test_a_table_or_database_dropped_under_an_open_store_is_schema_not_found(url, database, dropped):
    """Error 1146/1049 in an operation made translate itself fail (a TypeError from
    SchemaNotFoundError's constructor) instead of giving the typed error."""
    s = MysqlAgentStateStore.from_url(url, database_name=database, create_if_not_exist=True)
    try:
        s.save("u", "s", "k", 1)
        con = connect(url)
        with con.cursor() as cur:
            cur.execute(f"DROP TABLE `{database}`.`agentscope_sessions`" if dropped == "table"
                        else f"DROP DATABASE `{database}`")
        con.close()
        for call in (lambda: s.get("u", "s", "k"), lambda: s.save("u", "s", "k", 2)):
            with pytest.raises(SchemaNotFoundError, match="no longer exists") as err:
                call()  # a dropped database: its table is what the qualified statements miss (1146)
            assert err.value.errno in (1146, 1049) and err.value.missing in ("table", "database")
            assert isinstance(err.value.__cause__, pymysql.MySQLError)
    finally:
        s.close()


def test_a_table_without_version_column_gets_it(url, database):
    con = connect(url)
    with con.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{database}`")
        cur.execute(
            f"CREATE TABLE `{database}`.`old` (session_id VARCHAR(255) COLLATE utf8mb4_nopad_bin NOT NULL,"
            " state_key VARCHAR(255) COLLATE utf8mb4_nopad_bin NOT NULL, item_index INT NOT NULL DEFAULT 0,"
            " state_data LONGTEXT NOT NULL, PRIMARY KEY (session_id, state_key, item_index))"
            " DEFAULT CHARSET utf8mb4"
        )
        cur.execute(f"INSERT INTO `{database}`.`old` VALUES ('u:s', 'k', 0, '1')")
    store = MysqlAgentStateStore.from_url(url, database_name=database, table_name="old")
    # the back-filled 0 is "exists, never versioned": it reads as 1 and is CAS-able with it
    assert store.get_versioned("u", "s", "k") == (1, 1)
    assert store.save_if_version("u", "s", "k", 2, 0) == -1
    assert store.save_if_version("u", "s", "k", 2, 1) == 2
    assert store.get_versioned("u", "s", "k") == (2, 2)
    store.save("u", "s", "k", 3)
    assert store.get_versioned("u", "s", "k") == (3, 3)
    store.close()
    con.close()


def test_java_created_case_insensitive_table_works_and_warns_once_with_the_fix(url, database):
    con = connect(url)
    with con.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{database}`")
        cur.execute(
            f"CREATE TABLE `{database}`.`java_t` (session_id VARCHAR(255) NOT NULL, state_key VARCHAR(255) NOT NULL,"
            " item_index INT NOT NULL DEFAULT 0, state_data LONGTEXT NOT NULL, version BIGINT NOT NULL DEFAULT 0,"
            " created_at DATETIME DEFAULT CURRENT_TIMESTAMP, updated_at DATETIME DEFAULT CURRENT_TIMESTAMP ON UPDATE"
            " CURRENT_TIMESTAMP, PRIMARY KEY (session_id, state_key, item_index))"
            " DEFAULT CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci"
        )
    with pytest.warns(MysqlStateWarning, match=r"ALTER TABLE `.*`.`java_t` MODIFY session_id .*COLLATE utf8mb4_nopad_bin"):
        store = MysqlAgentStateStore.from_url(url, database_name=database, table_name="java_t")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = MysqlAgentStateStore.from_url(url, database_name=database, table_name="java_t")
    store.save_list("Alice", "s1", "memory", [1, 2])
    assert again.get_list("Alice", "s1", "memory") == [1, 2]
    store.save("alice", "x", "k", 1)
    assert store.list_session_ids("Alice") == {"s1"}  # the exact prefix filter still holds
    with pytest.raises(ValueError, match="trailing spaces"):
        store.save("u", "s ", "k", 1)
    with pytest.raises(ValueError, match="user_id 'u ' ends with a space"):
        store.save("u ", "s", "k", 1)
    # a blank user is the anonymous one (as on any table), not an id ending with a space
    store.save_list("  ", "s2", "memory", [3])
    assert store.get_list(None, "s2", "memory") == store.get_list("  ", "s2", "memory") == [3]
    assert store.list_session_ids("  ") == {"s2"}
    # the fix the warning names makes it exact
    with con.cursor() as cur:
        cur.execute(f"ALTER TABLE `{database}`.`java_t` MODIFY session_id VARCHAR(255) CHARACTER SET utf8mb4"
                    " COLLATE utf8mb4_nopad_bin NOT NULL, MODIFY state_key VARCHAR(255) CHARACTER SET utf8mb4"
                    " COLLATE utf8mb4_nopad_bin NOT NULL")
    fixed = MysqlAgentStateStore.from_url(url, database_name=database, table_name="java_t")
    assert fixed.exact_keys
    for s in (store, again, fixed):
        s.close()
    con.close()


@pytest.mark.parametrize(
    "name", ["bad name", "x;DROP TABLE t", "1abc", "a`b", "ab\n", "a" * 65, "näme", "a.b", "a'b", "-a"]
)
def test_invalid_identifiers_are_rejected_before_any_sql(url, name):
    for kw in ("database_name", "table_name"):
        with pytest.raises(ValueError, match=r"must match \^\[a-zA-Z_\]\[a-zA-Z0-9_-\]\*\$ and be at most 64"):
            MysqlAgentStateStore(object(), **{kw: name})


def test_hyphenated_names_work_for_real_and_blank_means_default(url, database):
    name = database.replace("_", "-")
    store = MysqlAgentStateStore.from_url(url, database_name=name, table_name="my-table", create_if_not_exist=True)
    try:
        store.save_list("u", "s", "k", [1, 2, 3])
        raw = Raw(url, name, "my-table")
        assert len(raw.rows()) == 4
        raw.execute(f"DROP DATABASE `{name}`")
        raw.close()
    finally:
        store.close()
    s = MysqlAgentStateStore.from_url(url, database_name="  ", table_name="", create_if_not_exist=True)
    assert (s.database_name, s.table_name) == ("agentscope", "agentscope_sessions")
    s.close()


# ---- isolation ------------------------------------------------------------------------------------


def test_ids_are_exact_case_and_trailing_space_sensitive(store, raw):
    variants = [("Alice", "s1", "k"), ("alice", "s1", "k"), ("alice", "S1", "k"), ("alice", "s1", "K"),
                ("alice", "s1 ", "k"), ("alice", "s1", "k "), ("alice ", "s1", "k"), ("ALİCE", "s1", "k")]
    for i, (u, s, k) in enumerate(variants):
        store.save(u, s, k, i)
        store.save_list(u, s, k + "-list", [i, i])
    for i, (u, s, k) in enumerate(variants):
        assert store.get(u, s, k) == i
        assert store.get_list(u, s, k + "-list") == [i, i]
    assert len(raw.rows()) == len(variants) * 4
    assert store.list_session_ids("alice") == {"s1", "S1", "s1 "}
    assert store.list_session_ids("Alice") == {"s1"}
    store.delete("alice", "s1")
    assert store.get("Alice", "s1", "k") == 0 and store.get("alice", "S1", "k") == 2


BAD_IDS = [
    (("a:b", "s", "k"), ValueError, "contains ':'"),
    (("__anon__", "s", "k"), ValueError, "reserved for anonymous"),
    (("u", "", "k"), ValueError, "blank"),
    (("u", "   ", "k"), ValueError, "blank"),
    (("u", "s", ""), ValueError, "blank"),
    (("u", "s", "k:_hash"), ValueError, "reserved for list hash rows"),
    (("u", "s" * 254, "k"), ValueError, "at most 255"),
    (("u", "s", "k" * 256), ValueError, "at most 2(55|49)"),
    (("u\ud800", "s", "k"), ValueError, "lone surrogate"),
    (("u", "s\udfff", "k"), ValueError, "lone surrogate"),
    ((1, "s", "k"), TypeError, "user_id must be a str"),
    (("u", None, "k"), TypeError, "session_id must be a str"),
    (("u", "s", b"k"), TypeError, "key must be a str"),
]


@pytest.mark.parametrize("ids,exc,message", BAD_IDS)
def test_bad_ids_raise_clear_errors_and_write_nothing(store, raw, ids, exc, message):
    u, s, k = ids
    calls = [
        lambda: store.save(u, s, k, 1),
        lambda: store.save_list(u, s, k, [1]),
        lambda: store.append_list(u, s, k, [1]),
        lambda: store.get(u, s, k),
        lambda: store.get_list(u, s, k),
        lambda: store.save_if_version(u, s, k, 1, 0),
        lambda: store.delete(u, s, k),
    ]
    for call in calls:
        with pytest.raises(exc, match=message):
            call()
    assert raw.rows() == []


def test_list_key_must_leave_room_for_its_hash_key(store):
    store.save("u", "s", "k" * 255, 1)  # a single value may use all 255
    assert store.get("u", "s", "k" * 255) == 1
    with pytest.raises(ValueError, match="list key.*at most 249"):
        store.save_list("u", "s", "k" * 250, [1])
    store.save_list("u", "s", "k" * 249, [1])
    assert store.get_list("u", "s", "k" * 249) == [1]


def test_sql_payloads_are_data(store, raw):
    evil = "x'); DROP TABLE agentscope_sessions; --"
    store.save(evil.replace(":", ""), evil, evil, {evil: evil})
    store.save_list("u", evil, "`k`", [evil, "\\", "\x00", "%_"])
    assert store.get(evil.replace(":", ""), evil, evil) == {evil: evil}
    assert store.get_list("u", evil, "`k`") == [evil, "\\", "\x00", "%_"]
    assert len(raw.rows()) == 6  # one value, four items, one hash row


# ---- pools ----------------------------------------------------------------------------------------


def in_transaction(con) -> bool:
    with con.cursor() as cur:
        cur.execute("SELECT COUNT(*) FROM information_schema.INNODB_TRX WHERE trx_mysql_thread_id = CONNECTION_ID()")
        return cur.fetchone()[0] > 0


@pytest.mark.parametrize("autocommit", [False, True])
def test_given_pool_gets_connections_back_clean_and_is_never_closed(url, database, autocommit):
    pool = pymysql_pool(url, maxconnections=1, blocking=False, autocommit=autocommit)
    store = MysqlAgentStateStore(pool, database_name=database, create_if_not_exist=True)
    store.save_list("u", "s", "k", [1, 2])
    store.append_list("u", "s", "k", [3])
    assert store.get_list("u", "s", "k") == [1, 2, 3]
    assert store.list_length("u", "s", "k") == 3
    # committed: another connection sees it (with pool.connection() alone would not commit)
    other = Raw(url, database)
    assert len(other.rows()) == 4
    other.close()
    store.close()
    con = pool.connection()  # the pool still works after store.close()
    raw = con.dbapi_connection
    assert raw.get_autocommit() is autocommit
    assert not in_transaction(raw)
    con.close()
    pool.close()


def test_an_exhausted_pool_raises_pool_timeout_instead_of_waiting_forever(url, database):
    pool = pymysql_pool(url, maxconnections=1, blocking=False)
    store = MysqlAgentStateStore(pool, database_name=database, create_if_not_exist=True, pool_timeout=0.3)
    held = pool.connection()
    with pytest.raises(PoolTimeoutError, match="pool_timeout=0.3"):
        store.get("u", "s", "k")
    held.close()
    assert store.get("u", "s", "k") is None
    pool.close()


def test_owned_pool_bounds_the_wait_too(url, database):
    store = MysqlAgentStateStore.from_url(url, database_name=database, create_if_not_exist=True,
                                          pool_size=1, pool_timeout=0.3)
    inside = threading.Event()
    release = threading.Event()

    def slow(cur):
        inside.set()
        release.wait(5)
        cur.execute("SELECT 1")

    t = threading.Thread(target=lambda: store._db.run(slow, "slow", write=True))
    t.start()
    inside.wait(5)
    with pytest.raises(PoolTimeoutError):
        store.save("u", "s", "k", 1)
    release.set()
    t.join()
    store.save("u", "s", "k", 1)
    assert store.get("u", "s", "k") == 1
    store.close()


def test_blocking_pool_warns(url, database):
    pool = pymysql_pool(url, maxconnections=2, blocking=True)
    with pytest.warns(MysqlStateWarning, match="blocking=True"):
        MysqlAgentStateStore(pool, database_name=database, create_if_not_exist=True)
    pool.close()


def test_from_url_database_in_path_and_database_name_wins(url, database):
    base = url.rstrip("/")
    s = MysqlAgentStateStore.from_url(f"{base}/{database}", create_if_not_exist=True)
    assert s.database_name == database
    s.close()
    s = MysqlAgentStateStore.from_url(f"{base}/ignored_db", database_name=database)
    assert s.database_name == database
    s.close()
    with pytest.raises(ValueError, match="mysql://"):
        MysqlAgentStateStore.from_url("postgres://x/y")


def test_from_url_unix_socket(database):
    from mysql_state import server

    local = server._CACHE.get("server")
    if local is None:
        pytest.skip("MYSQL_URL/Docker server in use: no local socket to test (runs with the throwaway server)")
    s = MysqlAgentStateStore.from_url(f"mysql://root@localhost/{database}?unix_socket={local.socket}",
                                      create_if_not_exist=True)
    s.save("u", "s", "k", "via socket")
    assert s.get("u", "s", "k") == "via socket"
    s.close()


def test_value_written_by_one_store_is_read_by_the_java_query(store, raw):
    items = [{"n": i} for i in range(3)]
    store.save_list("u", "s", "memory", items)
    # exactly the Java store's getList query
    got = raw.query("SELECT state_data FROM {t} WHERE session_id = %s AND state_key = %s ORDER BY item_index",
                    ("u:s", "memory"))
    assert [r[0] for r in got] == ['{"n":0}', '{"n":1}', '{"n":2}']


# ---- the reserved suffix on a case-insensitive table --------------------------------------



@pytest.fixture
def java_table(url, database):
    make_java_table(url, database)
    with pytest.warns(Warning):
        store = MysqlAgentStateStore.from_url(url, database_name=database)
    raw = Raw(url, database)
    yield store, raw
    raw.close()
    store.close()


def test_hash_suffix_in_any_case_is_refused_on_a_case_insensitive_table(java_table):
    store, raw = java_table
    store.save_list("u", "s", "memory", [1, 2])
    for key in ("memory:_HASH", "memory:_Hash", "memory:_hásh"):
        with pytest.raises(ValueError, match="reserved for list hash rows"):
            store.save("u", "s", key, {"x": 1})
        with pytest.raises(ValueError, match="reserved"):
            store.get("u", "s", key)
    assert store.get_list("u", "s", "memory") == [1, 2]
    assert len(raw.rows("u:s")) == 3


def test_hash_suffix_case_variants_are_ordinary_keys_on_an_exact_table(store):
    store.save("u", "s", "memory:_HASH", 1)
    store.save_list("u", "s", "memory", [1])
    assert store.get("u", "s", "memory:_HASH") == 1


# ---- compare-and-set on a table whose version column was added ----------------------------


def test_cas_on_rows_written_without_a_version(java_table):
    store, raw = java_table
    # rows as the Java store (or a table that got the column later) leaves them: version 0
    raw.execute("INSERT INTO {t} (session_id, state_key, item_index, state_data) VALUES ('u:s','plan',0,'{\"a\":1}')")
    assert store.get_versioned("u", "s", "plan") == ({"a": 1}, 1)
    assert store.save_if_version("u", "s", "plan", {"a": 2}, 0) == UNVERSIONED
    assert store.save_if_version("u", "s", "plan", {"a": 2}, 1) == 2
    assert store.save_if_version("u", "s", "plan", {"a": 3}, 1) == UNVERSIONED
    assert store.get_versioned("u", "s", "plan") == ({"a": 2}, 2)
    # a writer that does not know the column inserts later: still version >= 1, still CAS-able
    raw.execute("INSERT INTO {t} (session_id, state_key, item_index, state_data) VALUES ('u:s','late',0,'1')")
    value, version = store.get_versioned("u", "s", "late")
    assert (value, version) == (1, 1)
    assert store.save_if_version("u", "s", "late", 2, version) == 2
    assert raw.query("SELECT version FROM {t} WHERE state_key='late'") == [(2,)]


@pytest.mark.parametrize("how", ["save_list_if_version", "save_list_report", "save_many"])
def test_a_list_compare_and_set_sees_a_java_list_save_that_left_the_version(java_table, how):
    """The Java store's list save inserts its items and rewrites the hash row's text, not its
    version (its ``saveHash``; seen with the real Java store): a compare-and-set with the
    version read before it succeeded and wrote over the Java store's turn. The hash row is not
    the one this process read: stale, nothing written; read again, it goes through."""
    store, raw = java_table
    store.save_list("u", "s", "memory", ["a", "b"])
    items, version = store.get_list_versioned("u", "s", "memory")
    # the Java store's turn: its item, and its own hash string in place of this store's hash row
    raw.execute("INSERT INTO {t} (session_id, state_key, item_index, state_data, version)"
                " VALUES ('u:s', 'memory', 2, '\"java-turn\"', 0)")
    raw.execute("UPDATE {t} SET state_data = '3f2a9c' WHERE session_id = 'u:s' AND state_key = 'memory:_hash'")
    before = raw.rows("u:s")

    def cas(values, expected):
        if how == "save_list_if_version":
            return store.save_list_if_version("u", "s", "memory", values, expected)
        try:
            if how == "save_list_report":
                return store.save_list_report("u", "s", "memory", values, expected_version=expected).version
            return store.save_many("u", "s", lists={"memory": values}, expected_versions={"memory": expected})[
                "memory"].version
        except StaleStateError:
            return UNVERSIONED

    assert cas(items + ["py-turn"], version) == UNVERSIONED
    assert raw.rows("u:s") == before
    items, version = store.get_list_versioned("u", "s", "memory")  # read again: the Java turn
    assert items == ["a", "b", "java-turn"]
    assert cas(items + ["py-turn"], version) == version + 1
    assert store.get_list("u", "s", "memory") == ["a", "b", "java-turn", "py-turn"]
