"""Regression tests for the defects found by trying to break the store (one test or more each).

Races hold a writer mid-transaction at the driver level: a thread named ``held`` pauses just
before its first INSERT (its transaction open, the list's hash row locked) until released, so
the racing call starts in between and the INSERT lands behind its scan.
"""

from __future__ import annotations

import math
import threading
import time

import pymysql
import pytest

from mysql_state import (
    CorruptStateError,
    MysqlAgentStateStore,
    MysqlStateError,
    UNVERSIONED,
)
from mysql_state.errors import StoreClosedError

from .conftest import Raw, make_java_table, private_server
from .test_faults import check_list_rows

# ---- a writer held mid-transaction ----------------------------------------------------------

_HOLD = {"event": None, "reached": None}
_real_execute = pymysql.cursors.Cursor.execute


def _held_execute(self, query, args=None):
    if threading.current_thread().name == "held" and query.lstrip().upper().startswith("INSERT"):
        if not _HOLD["reached"].is_set():
            _HOLD["reached"].set()
            _HOLD["event"].wait(10)
    return _real_execute(self, query, args)


@pytest.fixture
def hold(monkeypatch):
    """``hold(fn)`` runs fn in a thread paused before its first INSERT; returns the release event."""
    monkeypatch.setattr(pymysql.cursors.Cursor, "execute", _held_execute)
    threads = []

    def start(fn):
        _HOLD["event"], _HOLD["reached"] = threading.Event(), threading.Event()
        errors: list = []

        def run():
            try:
                fn()
            except BaseException as exc:  # noqa: BLE001 - re-raised by join()
                errors.append(exc)

        t = threading.Thread(target=run, name="held")
        t.start()
        assert _HOLD["reached"].wait(10), "the held writer never reached its INSERT"
        threads.append((t, errors))
        return _HOLD["event"]

    yield start
    for t, errors in threads:
        _HOLD["event"].set()
        t.join(10)
        assert not errors, errors


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


@pytest.fixture
def other(url, database, store):
    s = MysqlAgentStateStore.from_url(url, database_name=database)
    yield s
    s.close()


@pytest.fixture
def cold(url, database, store):
    """A writer that never saw the list (another process): it locks the hash row, then inserts."""
    s = MysqlAgentStateStore.from_url(url, database_name=database)
    yield s
    s.close()


# ---- 1, 2: deletes and value saves racing list writers ----------------------------------------


def test_delete_session_racing_an_append_leaves_no_orphan(store, other, cold, raw, hold):
    store.save_list("u", "s", "m", list(range(5)))
    release = hold(lambda: cold.append_list("u", "s", "m", [5, 6]))
    deleting = in_thread(lambda: other.delete("u", "s"))
    time.sleep(0.3)  # the delete is now waiting on the held writer's locks
    release.set()
    deleting()
    assert raw.rows("u:s") == []
    assert not other.exists("u", "s") and not store.exists("u", "s")


def test_delete_key_racing_a_growing_save_list_leaves_no_orphan(store, other, cold, raw, hold):
    store.save_list("u", "s", "m", list(range(5)))
    store.save("u", "s", "keep", 1)
    release = hold(lambda: cold.save_list("u", "s", "m", list(range(8))))
    deleting = in_thread(lambda: other.delete("u", "s", "m"))
    time.sleep(0.3)
    release.set()
    deleting()
    assert [r[1] for r in raw.rows("u:s")] == ["keep"]
    assert other.get_list("u", "s", "m") == []


def test_save_of_a_value_racing_an_append_leaves_a_value_only(store, other, cold, raw, hold):
    store.save_list("u", "s", "m", ["o0", "o1"])
    release = hold(lambda: cold.append_list("u", "s", "m", ["n0", "n1"]))
    saving = in_thread(lambda: other.save("u", "s", "m", {"now": "a value"}))
    time.sleep(0.3)
    release.set()
    saving()
    assert [(r[1], r[2]) for r in raw.rows("u:s")] == [("m", 0)]
    assert store.get("u", "s", "m") == {"now": "a value"}


def test_a_warm_one_statement_append_racing_a_delete_is_whole_or_gone(store, other, raw, monkeypatch):
    """The warm writer appends in ONE statement; paused right after it (locks held), a delete
    waits for its COMMIT and then removes everything."""
    store.save_list("u", "s", "m", list(range(5)))
    reached, release = threading.Event(), threading.Event()
    real = pymysql.connections.Connection.commit

    def held_commit(con):
        if threading.current_thread().name == "held":
            reached.set()
            release.wait(10)
        return real(con)

    monkeypatch.setattr(pymysql.connections.Connection, "commit", held_commit)
    writer = threading.Thread(target=lambda: store.append_list("u", "s", "m", [5, 6]), name="held")
    writer.start()
    assert reached.wait(10)
    deleting = in_thread(lambda: other.delete("u", "s"))
    time.sleep(0.3)
    release.set()
    writer.join(10)
    deleting()
    assert raw.rows("u:s") == []


def test_append_after_a_value_replaced_the_list_starts_a_new_list(store, raw):
    store.save_list("u", "s", "m", [1, 2, 3])
    store.save("u", "s", "m", "v")
    assert raw.rows("u:s") == [("u:s", "m", 0, '"v"', raw.rows("u:s")[0][4])]
    store.save_list("u", "s", "m", [7])
    assert store.get_list("u", "s", "m") == [7]
    assert check_list_rows(raw, "u:s", "m") == [7]


# ---- 3: compare-and-set over a list ----------------------------------------------------------


def test_save_if_version_over_a_list_replaces_the_whole_list(store, raw):
    store.save_list("u", "s", "k", ["a", "b"])
    value, version = store.get_versioned("u", "s", "k")
    assert value == "a" and version >= 1  # row 0, as the Java store reads it, and the list's version
    assert store.get("u", "s", "k") == "a"
    assert store.save_if_version("u", "s", "k", "X", 0) == UNVERSIONED  # not absent
    assert store.save_if_version("u", "s", "k", "X", version + 7) == UNVERSIONED
    assert raw.rows("u:s")[-1][1] == "k:_hash"  # nothing changed
    new = store.save_if_version("u", "s", "k", "X", version)
    assert new > version
    assert [(r[1], r[2], r[3]) for r in raw.rows("u:s")] == [("k", 0, '"X"')]
    assert store.get_versioned("u", "s", "k") == ("X", new)
    # a list saved again is exactly that list, not "unchanged" over a value
    assert store.save_list_report("u", "s", "k", ["a", "b"]).kind == "rewrite"
    assert check_list_rows(raw, "u:s", "k") == ["a", "b"]


def test_versions_keep_growing_across_value_and_list(store):
    v1 = store.save_if_version("u", "s", "k", 1, 0)
    v2 = store.save_if_version("u", "s", "k", 2, v1)
    assert (v1, v2) == (1, 2)
    store.save_list("u", "s", "k", [1, 2])
    store.save("u", "s", "k", 3)
    assert store.get_versioned("u", "s", "k").version > v2


# ---- 4: a list with a missing item row --------------------------------------------------------


@pytest.mark.parametrize("lost", [1, 3])
def test_a_missing_item_row_is_a_typed_error_and_a_full_save_repairs_it(url, database, store, raw, lost):
    store.save_list("u", "s", "m", ["a", "b", "c", "d"])
    raw.execute("DELETE FROM {t} WHERE session_id='u:s' AND state_key='m' AND item_index=%s", (lost,))
    with pytest.raises(CorruptStateError) as err:
        store.get_list("u", "s", "m")
    assert err.value.session_id == "u:s" and err.value.key == "m" and "4 items" in str(err.value)
    with pytest.raises(CorruptStateError):
        store.get_list("u", "s", "m", offset=-4)
    assert store.list_length("u", "s", "m") == 4  # and get_list refuses to disagree with it
    fresh = MysqlAgentStateStore.from_url(url, database_name=database)
    try:
        plan = fresh.save_list_report("u", "s", "m", ["a", "b", "c", "d"])
        assert plan.kind == "rewrite"
        assert check_list_rows(raw, "u:s", "m") == ["a", "b", "c", "d"]
        assert fresh.get_list("u", "s", "m") == ["a", "b", "c", "d"]
    finally:
        fresh.close()


def test_windows_still_read_when_the_damage_is_elsewhere(store, raw):
    store.save_list("u", "s", "m", list(range(10)))
    raw.execute("DELETE FROM {t} WHERE session_id='u:s' AND state_key='m' AND item_index=2")
    assert store.get_list("u", "s", "m", offset=5, limit=3) == [5, 6, 7]
    assert store.get_list("u", "s", "m", offset=-3) == [7, 8, 9]
    with pytest.raises(CorruptStateError):
        store.get_list("u", "s", "m", offset=1, limit=3)


# ---- 5, 6: values that would change silently --------------------------------------------------


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_nan_and_infinities_are_refused_naming_the_key_and_item(store, raw, bad):
    with pytest.raises(ValueError, match="key 'k'"):
        store.save("u", "s", "k", {"x": [1, bad]})
    with pytest.raises(ValueError, match="item 1 of list 'm'"):
        store.save_list("u", "s", "m", [{"ok": None}, {"score": bad}])
    with pytest.raises(ValueError, match="item 0 of list 'm'"):
        store.append_list("u", "s", "m", [bad])
    with pytest.raises(ValueError, match="key 'v'"):
        store.save_many("u", "s", values={"v": bad}, lists={"l": [1]})
    assert raw.rows("u:s") == []
    store.save_list("u", "s", "m", [None, {"a": None}, 1.5])  # null itself is fine
    assert store.get_list("u", "s", "m") == [None, {"a": None}, 1.5]


def test_a_nan_in_a_changed_item_of_a_warm_list_is_refused(store, raw):
    store.save_list("u", "s", "m", [{"a": None}, {"b": 1}])
    with pytest.raises(ValueError, match="item 1 of list 'm'"):
        store.save_list("u", "s", "m", [{"a": None}, {"b": math.nan}])
    assert store.get_list("u", "s", "m") == [{"a": None}, {"b": 1}]


@pytest.mark.parametrize("bad", [{"a": 1}, "abc", b"abc", 5])
def test_a_mapping_str_or_bytes_is_not_a_list(store, raw, bad):
    with pytest.raises(TypeError, match="items must be a list"):
        store.append_list("u", "s", "m", bad)
    with pytest.raises(TypeError, match="values must be a list"):
        store.save_list("u", "s", "m", bad)
    assert raw.rows("u:s") == []
    assert store.append_list("u", "s", "m", (x for x in [1, 2])) == 2  # other iterables still work


# ---- 7: unreadable rows -----------------------------------------------------------------------


def test_unreadable_rows_raise_corrupt_state_naming_the_row(store, raw):
    store.save("u", "s", "v", {"a": 1})
    store.save_list("u", "s", "m", [1, 2, 3])
    raw.execute("UPDATE {t} SET state_data='{\"a\": 1' WHERE state_key='v'")
    raw.execute("UPDATE {t} SET state_data='[1,' WHERE state_key='m' AND item_index=2")
    with pytest.raises(CorruptStateError) as err:
        store.get("u", "s", "v")
    assert (err.value.session_id, err.value.key, err.value.index) == ("u:s", "v", 0)
    assert isinstance(err.value, MysqlStateError)
    with pytest.raises(CorruptStateError) as err:
        store.get_list("u", "s", "m")
    assert (err.value.key, err.value.index) == ("m", 2) and "item_index 2" in str(err.value)
    assert store.get_list("u", "s", "m", limit=2) == [1, 2]


# ---- 8: idle connections closed by the server -------------------------------------------------


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


# ---- 9: an interrupt between a statement and its reply ----------------------------------------


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


# ---- 10: use after close ----------------------------------------------------------------------


def test_use_after_close_is_refused_naming_the_store(url, database):
    store = MysqlAgentStateStore.from_url(url, database_name=database, create_if_not_exist=True)
    store.save("u", "s", "k", 1)
    store.close()
    for call in (lambda: store.get("u", "s", "k"), lambda: store.save("u", "s", "k", 2),
                 lambda: store.append_list("u", "s", "m", [1])):
        with pytest.raises(StoreClosedError, match=f"`{database}`.`agentscope_sessions`.*closed"):
            call()
    assert issubclass(StoreClosedError, MysqlStateError) and issubclass(StoreClosedError, RuntimeError)


# ---- 11: batches sized by the bytes actually sent ---------------------------------------------


@pytest.fixture(scope="module")
def small_packet_url():
    server = private_server("--max-allowed-packet=65536")
    yield server.url
    server.stop()


def test_batches_count_the_escaping_of_ids(small_packet_url):
    store = MysqlAgentStateStore.from_url(small_packet_url, database_name="esc", create_if_not_exist=True)
    raw = Raw(small_packet_url, "esc")
    try:
        user, session, key = "u\\'\"", "s" + "\\'" * 100, "k" + "'\\\n" * 70
        items = [{"i": i, "t": "x" * 880} for i in range(200)]
        store.save_list(user, session, key, items)
        assert store.append_list(user, session, key, items[:100]) == 300
        sid = f"{user}:{session}"
        assert check_list_rows(raw, sid, key) == items + items[:100]
    finally:
        raw.close()
        store.close()


# ---- 12: the reserved suffix on a case-insensitive table --------------------------------------



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


# ---- 13, 14: arguments ------------------------------------------------------------------------


def test_huge_offsets_and_limits_are_answered_without_sql_errors(store):
    store.save_list("u", "s", "m", list(range(5)))
    assert store.get_list("u", "s", "m", offset=-(2**64)) == list(range(5))
    assert store.get_list("u", "s", "m", limit=2**64) == list(range(5))
    assert store.get_list("u", "s", "m", offset=2**64) == []
    assert store.get_list("u", "s", "m", offset=-(2**64), limit=2) == [0, 1]


@pytest.mark.parametrize("option, bad, error", [
    ("pool_size", -1, ValueError), ("pool_size", 0, ValueError), ("pool_size", "8", TypeError),
    ("pool_timeout", 0, ValueError), ("pool_timeout", -1.0, ValueError), ("retries", -1, ValueError),
    ("snapshot_bytes", -5, ValueError), ("connect_timeout", 0, ValueError), ("read_timeout", "x", TypeError),
    ("write_timeout", float("nan"), ValueError),
])
def test_bad_options_are_refused_naming_the_option(url, option, bad, error):
    with pytest.raises(error, match=option):
        MysqlAgentStateStore.from_url(url, **{option: bad})


def test_missing_keys_are_refused_before_any_connection(store, raw):
    before = store.stats.transactions
    calls = {
        "save": lambda: store.save("u", "s", None, 1),
        "get": lambda: store.get("u", "s", None),
        "save_list": lambda: store.save_list("u", "s", None, [1]),
        "append_list": lambda: store.append_list("u", "s", None, [1]),
        "get_list": lambda: store.get_list("u", "s", None),
        "list_length": lambda: store.list_length("u", "s", None),
        "save_if_version": lambda: store.save_if_version("u", "s", None, 1, 0),
        "get_versioned": lambda: store.get_versioned("u", "s", None),
    }
    for name, call in calls.items():
        with pytest.raises(TypeError, match="key must be a str"):
            call()
    with pytest.raises(TypeError, match="expected_version"):
        store.save_if_version("u", "s", "k", 1, None)
    with pytest.raises(TypeError, match="offset"):
        store.get_list("u", "s", "m", offset=None)
    with pytest.raises(TypeError, match="values must be a mapping"):
        store.save_many("u", "s", values=[1])
    assert store.stats.transactions == before and raw.rows() == []


# ---- 15: compare-and-set on a table whose version column was added ----------------------------


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
