"""Operating the store over months (issue 12): catalog, retention, history, fork, export and
import, migrations and the doctor, metrics, and the command line over them, against the real
server."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
import time

import orjson
import pytest

from mysql_state import ALL_USERS, MysqlAgentStateStore, SessionExistsError, SessionNotFoundError
from mysql_state import catalog, metrics
from tests.conftest import Raw, connect, with_terminal_stderr
from tests.conftest import JAVA_DDL, make_java_table


def all_rows_with_times(raw: Raw) -> list[tuple]:
    return raw.query("SELECT session_id, state_key, item_index, state_data, version, created_at, updated_at"
                     " FROM {t} ORDER BY session_id, state_key, item_index")


def age(raw: Raw, sid: str, days: int) -> None:
    """Make a session look idle for ``days`` (its rows and catalog row)."""
    raw.execute("UPDATE {t} SET updated_at = NOW() - INTERVAL %s DAY, created_at = NOW() - INTERVAL %s DAY"
                " WHERE session_id = %s OR (session_id = '__catalog__' AND state_key = %s)", (days, days, sid, sid))


# ---- catalog ---------------------------------------------------------------------------------


def test_every_write_path_keeps_one_catalog_row_per_session(store, raw):
    store.save("alice", "a", "v", 1)
    store.save_list("alice", "b", "l", [1, 2, 3])
    store.append_list("alice", "c", "l", [1])
    store.save_if_version("bob", "d", "v", 1, 0)
    store.transaction(lambda tx: tx.save("bob", "e", "v", tx.get("bob", "e", "v", default=0) + 1))
    store.save_many(None, "f", values={"x": 1}, lists={"y": [1]})
    cat = raw.query("SELECT state_key, version FROM {t} WHERE session_id = '__catalog__' ORDER BY state_key")
    assert [r[0] for r in cat] == ["__anon__:f", "alice:a", "alice:b", "alice:c", "bob:d", "bob:e"]
    before = dict(cat)["alice:b"]

    def moves() -> int:
        return dict(raw.query("SELECT state_key, version FROM {t} WHERE session_id = '__catalog__'"))["alice:b"] - before

    store.save_list("alice", "b", "l", [1, 2, 3, 4])  # warm one-statement append: moved a moment ago,
    store.append_list("alice", "b", "l", [5])  # so left (at most once every catalog.TOUCH_EVERY)
    store.append_lists("alice", "b", {"l": [6]}, at={"l": 5})  # the one-statement append of several lists too
    store.append_lists("alice", "b", {"l": [7]}, values={"w": 1})  # with a value riding: it proves the session
    assert moves() == 0
    store.pop_list("alice", "b", "l")  # a locked write: always moved, so updated_at moves
    assert moves() == 1
    time.sleep(catalog.TOUCH_EVERY)
    store.append_list("alice", "b", "l", [5])  # due again
    assert moves() == 2
    time.sleep(catalog.TOUCH_EVERY)
    store.append_lists("alice", "b", {"l": [8]})  # append_lists when due: moved
    assert moves() == 3
    store.delete("alice", "a", "v")  # its last key: the catalog row goes with it
    store.delete("alice", "b")
    keys_left = [r[0] for r in raw.query("SELECT state_key FROM {t} WHERE session_id = '__catalog__'")]
    assert "alice:a" not in keys_left and "alice:b" not in keys_left and "alice:c" in keys_left
    assert store.list_session_ids("alice") == {"c"} and not store.exists("alice", "a")


def test_the_activity_time_is_at_most_the_lag_behind_and_the_doctor_agrees(store, raw):
    """Turns as fast as they come for a few seconds (one-statement appends and saves that leave
    the catalog row between two moves): its updated_at is never more than ACTIVITY_LAG behind
    the session's rows, and the doctor finds nothing to say about it."""
    store.save_many("alice", "busy", values={"state": {"n": 0}}, lists={"m": [0]})
    items, n = [0], 0
    end = time.monotonic() + 2.5 * catalog.TOUCH_EVERY
    while time.monotonic() < end:
        n += 1
        store.get_many("alice", "busy", values=["state"], lists=["m"])
        items = items + [n]
        store.save_many("alice", "busy", values={"state": {"n": n}}, lists={"m": items})
        store.append_list("alice", "busy", "m", [-n])
        store.append_lists("alice", "busy", {"m": [-n - 0.5]})
        items = items + [-n, -n - 0.5]
        (cat,), (rows,) = (raw.query("SELECT updated_at FROM {t} WHERE session_id = '__catalog__' AND state_key = 'alice:busy'"),
                           raw.query("SELECT MAX(updated_at) FROM {t} WHERE session_id = 'alice:busy'"))
        assert cat[0] >= rows[0] - catalog.ACTIVITY_LAG
    assert store.get_list("alice", "busy", "m") == items
    assert [f for f in store.doctor() if f.kind == "catalog"] == []


def test_a_save_that_writes_nothing_does_not_count_as_a_move(store, raw):
    """An unchanged save writes no row, so it moves no catalog row: the one-statement write
    right after it must (else the activity time could stay where an older write left it)."""
    store.save_list("alice", "quiet", "m", [1, 2])
    raw.execute("UPDATE {t} SET updated_at = NOW() - INTERVAL 1 DAY WHERE session_id = '__catalog__'"
                " AND state_key = 'alice:quiet'")
    time.sleep(catalog.TOUCH_EVERY)
    store.save_list("alice", "quiet", "m", [1, 2])  # unchanged: nothing written
    store.save_many("alice", "quiet", lists={"m": [1, 2]})  # unchanged too
    store.save_list("alice", "quiet", "m", [1, 2, 3])  # a one-statement append
    (updated,), = raw.query("SELECT updated_at FROM {t} WHERE session_id = '__catalog__' AND state_key = 'alice:quiet'")
    assert updated > dt.datetime.now() - dt.timedelta(hours=1)


@pytest.mark.parametrize("how", ["append_list", "save_list", "save_many", "append_lists"])
def test_a_session_deleted_between_two_moves_gets_its_catalog_row_back(store, url, database, raw, how):
    """Another worker deletes the session right after this one moved its catalog row: the next
    write (not due to move it) finds its condition broken, goes the locked way and makes the
    catalog row again: never rows without one."""
    other = MysqlAgentStateStore.from_url(url, database_name=database)
    try:
        store.save_many("alice", "gone", values={"state": {"n": 0}}, lists={"m": [0]})
        store.get_many("alice", "gone", values=["state"], lists=["m"])
        other.delete("alice", "gone")
        assert raw.query("SELECT COUNT(*) FROM {t} WHERE session_id = '__catalog__' AND state_key = 'alice:gone'") == [(0,)]
        if how == "append_list":
            store.append_list("alice", "gone", "m", [1])
        elif how == "save_list":
            store.save_list("alice", "gone", "m", [0, 1])
        elif how == "append_lists":
            store.append_lists("alice", "gone", {"m": [1]})
        else:
            store.save_many("alice", "gone", values={"state": {"n": 1}})
        assert raw.query("SELECT COUNT(*) FROM {t} WHERE session_id = '__catalog__' AND state_key = 'alice:gone'") == [(1,)]
        assert "gone" in store.list_session_ids("alice")
        assert [f for f in store.doctor() if f.kind == "catalog"] == []
    finally:
        other.close()


def test_a_session_s_keys_name_an_empty_list_as_a_key(store):
    """An empty list is kept and exists: its hash row names it among the keys (it was left out,
    so a session holding one empty list showed no key)."""
    store.save_list("carol", "e", "empty", [])
    store.save("carol", "e", "v", 1)
    assert store.sessions("carol").items[0].keys == ["empty", "v"]
    store.delete("carol", "e", "v")
    assert store.sessions("carol").items[0].keys == ["empty"] and store.exists("carol", "e")


def test_sessions_pages_newest_first_with_counts(store, raw):
    for i in range(7):
        store.save_list("alice", f"s{i}", "memory", [{"i": j} for j in range(i + 1)])
        store.save("alice", f"s{i}", "summary", "x" * i)
        age(raw, f"alice:s{i}", 10 - i)  # s6 newest
    store.save(None, "anon", "k", 1)
    store.save("bob", "b1", "k", 1)
    page = store.sessions("alice", limit=3)
    assert [s.session_id for s in page.items] == ["s6", "s5", "s4"] and page.next_cursor
    info = page.items[0]
    assert info.user_id == "alice" and info.keys == ["memory", "summary"]
    assert info.rows == len(raw.rows("alice:s6")) == 9
    assert info.bytes == sum(len(r[3].encode()) for r in raw.rows("alice:s6"))
    assert info.updated_at < dt.datetime.now() - dt.timedelta(days=3)
    page2 = store.sessions("alice", limit=3, cursor=page.next_cursor)
    page3 = store.sessions("alice", limit=3, cursor=page2.next_cursor)
    assert [s.session_id for s in page2.items + page3.items] == ["s3", "s2", "s1", "s0"]
    assert page3.next_cursor is None
    everyone = store.sessions(ALL_USERS, limit=100)
    assert {(s.user_id, s.session_id) for s in everyone.items[:2]} == {(None, "anon"), ("bob", "b1")}
    assert len(everyone.items) == 9 and everyone.next_cursor is None
    assert [s.session_id for s in store.sessions(None).items] == ["anon"]
    old = store.sessions(updated_before=dt.datetime.now() - dt.timedelta(days=7.5), limit=100)
    assert [s.session_id for s in old.items] == ["s2", "s1", "s0"]
    recent = store.sessions("alice", updated_after=dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=5.5))
    assert [s.session_id for s in recent.items] == ["s6", "s5"]
    with pytest.raises(ValueError, match="cursor"):
        store.sessions(cursor="garbage")


def test_internal_rows_are_invisible_to_callers(store, raw):
    store.save("u", "s", "k", 1)
    assert store.list_session_ids("u") == {"s"}
    assert store.truncate_all_sessions() == 1 and raw.all_rows() == []


# ---- fork ------------------------------------------------------------------------------------


def test_fork_copies_every_row_server_side_and_refuses_overwrite(store, raw):
    store.save_list("alice", "main", "memory", [{"i": i} for i in range(5)])
    store.save("alice", "main", "summary", "s")
    n = store.fork("alice", "main", "branch")
    assert n == len(raw.rows("alice:main")) == 7
    assert [r[1:] for r in raw.rows("alice:branch")] == [r[1:] for r in raw.rows("alice:main")]
    store.append_list("alice", "branch", "memory", [{"i": 5}])  # independent
    assert len(store.get_list("alice", "main", "memory")) == 5
    assert store.get_list("alice", "branch", "memory")[-1] == {"i": 5}
    assert store.fork("alice", "main", "anon-copy", new_user_id=None) == 7
    assert store.get("None" and None, "anon-copy", "summary") == "s"
    with pytest.raises(SessionExistsError):
        store.fork("alice", "main", "branch")
    with pytest.raises(SessionNotFoundError):
        store.fork("alice", "nope", "x")
    assert {s.session_id for s in store.sessions().items} == {"main", "branch", "anon-copy"}


# ---- export / import -------------------------------------------------------------------------


def test_export_import_reproduces_every_row_byte_for_byte(store, raw, url, database):
    store.save_list("alice", "a", "memory", [{"t": "héllo\n'\"\\"}, {"n": 1}])
    store.save("alice", "a", "v", {"x": [1, 2]})
    store.save("bob", "b", "v", 2)
    store.save_list(None, "c", "l", [])
    age(raw, "bob:b", 3)
    lines = list(store.export())
    assert all(set(orjson.loads(x)) == {"session_id", "state_key", "item_index", "state_data", "version",
                                         "created_at", "updated_at"} for x in lines)
    other = MysqlAgentStateStore.from_url(url, database_name=database, table_name="copy", create_if_not_exist=True)
    try:
        assert other.import_rows(lines) == len(lines)
        copy = Raw(url, database, "copy")
        assert all_rows_with_times(copy) == all_rows_with_times(raw)
        assert other.import_rows(lines) == 0 and other.import_rows(lines, on_conflict="replace") == 0
        assert all_rows_with_times(copy) == all_rows_with_times(raw)
        assert other.get_list("alice", "a", "memory") == store.get_list("alice", "a", "memory")
        assert other.doctor() == []
        copy.close()
        one = list(store.export("alice"))
        assert {orjson.loads(x)["session_id"] for x in one} == {"alice:a", "__catalog__"}
        assert {orjson.loads(x)["session_id"] for x in store.export("bob", sessions=["b"])} == {"bob:b", "__catalog__"}
    finally:
        other.close()


# ---- prune -----------------------------------------------------------------------------------


def test_prune_dry_run_then_interrupted_then_again_equals_one_run(store, raw):
    for i in range(12):
        store.save_list("u", f"old{i}", "m", [1, 2])
        age(raw, f"u:old{i}", 40)
    store.save("u", "fresh", "k", 1)
    store.save("v", "old", "k", 1)
    age(raw, "v:old", 40)
    before = raw.all_rows()
    assert store.prune(dt.timedelta(days=30), dry_run=True) == (13, 37)
    assert raw.all_rows() == before
    calls = []

    def stop(done: int, total: int) -> None:
        calls.append((done, total))
        if done >= 5:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        store.prune(dt.timedelta(days=30), user_id="u", batch=5, progress=stop)
    assert calls == [(0, 12), (5, 12)] and len(store.list_session_ids("u")) == 8
    report = store.prune(dt.timedelta(days=30), batch=5)
    assert report.sessions == 8 and store.list_session_ids("u") == {"fresh"} and store.list_session_ids("v") == set()
    assert [r[1] for r in raw.all_rows() if r[0] == "__catalog__"] == ["u:fresh"]
    assert store.doctor() == []


def test_prune_skips_a_session_written_since(store, raw):
    store.save("u", "s", "k", 1)
    age(raw, "u:s", 40)
    store.save("u", "s", "k2", 2)  # written: the catalog row is fresh again
    assert store.prune(dt.timedelta(days=30)) == (0, 0) and len(raw.rows("u:s")) == 2


@pytest.mark.parametrize("dry_run", [True, False])
def test_prune_keeps_a_session_whose_catalog_row_lags_its_last_write(store, raw, dry_run):
    """The one-statement writes move a session's catalog row at most once a second, so it may
    say the session is older than it is (up to catalog.ACTIVITY_LAG), and the Java store,
    writing the same table, never moves it: a session with a row written since the cutoff is
    kept however old its catalog row (it was deleted, its Java turn with it, when the catalog
    row was more than the lag older than the cutoff). The times are set with plain SQL (the
    cutoff 5 s back: the lagging catalog row 6 s back, inside ACTIVITY_LAG of it; the Java
    session's 60 s back). Maintenance never leaves a row newer than the catalog row
    (test_langgraph_maintenance: a saver's prune and a TTL sweep, then the store's prune)."""
    assert catalog.ACTIVITY_LAG >= dt.timedelta(seconds=2)
    for s in ("lagging", "idle", "java"):
        store.save("u", s, "k", 1)
    raw.execute("UPDATE {t} SET updated_at = NOW() - INTERVAL 6 SECOND WHERE session_id = '__catalog__'"
                " AND state_key IN ('u:lagging', 'u:idle')")
    raw.execute("UPDATE {t} SET updated_at = NOW() - INTERVAL 60 SECOND WHERE session_id = '__catalog__'"
                " AND state_key = 'u:java'")
    raw.execute("UPDATE {t} SET updated_at = NOW() - INTERVAL 60 SECOND WHERE session_id = 'u:java'")
    # the Java store's turn: its INSERT and its hash row, the catalog row left as it was
    raw.execute("INSERT INTO {t} (session_id, state_key, item_index, state_data, version)"
                " VALUES ('u:java', 'memory', 0, '{\"role\": \"user\"}', 0)")
    raw.execute("UPDATE {t} SET updated_at = NOW() - INTERVAL 10 SECOND WHERE session_id = 'u:idle'")
    assert store.prune(dt.timedelta(seconds=5), user_id="u", dry_run=dry_run) == (1, 1)  # idle only
    left = {r[0] for r in raw.query("SELECT DISTINCT session_id FROM {t} WHERE session_id LIKE %s", ("u:%",))}
    assert left == ({"u:lagging", "u:idle", "u:java"} if dry_run else {"u:lagging", "u:java"})
    assert store.get("u", "lagging", "k") == 1
    assert len(raw.rows("u:java")) == 2


# ---- history ---------------------------------------------------------------------------------


def test_keep_history_archives_what_shrinking_saves_drop(url, database, raw):
    with MysqlAgentStateStore.from_url(url, database_name=database, keep_history=True) as store:
        items = [{"i": i} for i in range(6)]
        store.save_list("u", "s", "m", items)
        store.save_list("u", "s", "m", items + [{"i": 6}])  # growth archives nothing
        store.save_list("u", "s", "m", [{"i": 0}, {"i": 1}, {"summary": 1}])  # compaction
        assert [h.value for h in store.get_history("u", "s", "m")] == [{"i": i} for i in range(2, 7)]
        store.save_list("u", "s", "m", [])  # a clear
        hist = store.get_history("u", "s", "m")
        assert [h.value for h in hist][5:] == [{"i": 0}, {"i": 1}, {"summary": 1}]
        assert isinstance(hist[0].archived_at, dt.datetime)
        assert [h.value for h in store.get_history("u", "s", "m", offset=6, limit=1)] == [{"i": 1}]
        assert store.get_list("u", "s", "m") == []
        assert store.metrics()["saves"]["shrink"] == 1 and store.metrics()["saves"]["clear"] == 1
        info = store.sessions("u").items[0]
        assert info.rows == len(raw.rows("u:s")) + 8
        assert store.fork("u", "s", "t") == 9 and len(store.get_history("u", "t", "m")) == 8
        store.delete("u", "s")
        assert store.get_history("u", "s", "m") == [] and len(store.get_history("u", "t", "m")) == 8


def test_a_compaction_that_keeps_the_length_archives_what_it_replaced(url, database, raw):
    """[t0..t3] -> [summary, t3, new, ok] keeps 4 items: it saved as a "suffix" and archived
    nothing, where the same compaction one item shorter archived t0..t3 (audit of 2026-12-07).
    Every stored item from the first one changed is archived, from a warm and a cold process;
    an append, and a cold save of the list as it is, archive nothing."""
    turns = [{"t": i} for i in range(4)]
    with MysqlAgentStateStore.from_url(url, database_name=database, keep_history=True) as store:
        store.save_list("u", "s", "m", turns)
        report = store.save_list_report("u", "s", "m", [{"summary": 1}, turns[3], {"t": "new"}, {"t": "ok"}])
        assert report.kind == "suffix"
        assert [h.value for h in store.get_history("u", "s", "m")] == turns
        store.append_list("u", "s", "m", [{"t": "more"}])
        assert len(store.get_history("u", "s", "m")) == 4
        last = store.get_list("u", "s", "m")
        with MysqlAgentStateStore.from_url(url, database_name=database, keep_history=True) as cold:
            cold.save_list("u", "s", "m", last)  # as it is: nothing dropped
            assert len(cold.get_history("u", "s", "m")) == 4
            cold.save_list("u", "s", "m", last[:-1] + [{"t": "edited"}])  # the last item edited
            assert [h.value for h in cold.get_history("u", "s", "m")][4:] == [{"t": "more"}]
    assert raw.query("SELECT COUNT(*) FROM {t} WHERE session_id LIKE '__history__%%'")[0][0] == 5


# ---- migrations and the doctor ---------------------------------------------------------------


def test_java_table_migrates_and_the_doctor_passes(url, database):
    con = connect(url)
    with con.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{database}`")
        cur.execute(JAVA_DDL.replace("{db}", database))
        t = f"`{database}`.`agentscope_sessions`"
        for i in range(3):  # rows as the Java store writes them: version 0, its own hash string
            cur.execute(f"INSERT INTO {t} (session_id, state_key, item_index, state_data) VALUES (%s,%s,%s,%s)",
                        ("alice:j", "memory", i, orjson.dumps({"i": i}).decode()))
        cur.execute(f"INSERT INTO {t} (session_id, state_key, item_index, state_data) VALUES"
                    " ('alice:j','memory:_hash',0,'1a2b3c'), ('alice:j','summary',0,'\"s\"')")
    con.close()
    with pytest.warns(Warning):
        store = MysqlAgentStateStore.from_url(url, database_name=database)
    try:
        plan = store.migrate(dry_run=True)
        assert [s.name for s in plan] == ["0001_exact_key_collation", "0002_version_column",
                                          "0003_activity_index", "0004_session_catalog"]
        assert "ALTER TABLE" in plan[0].sql
        assert [s.name for s in store.migrate()] == [s.name for s in plan]
        assert store.migrate() == [] and store.doctor() == []
        assert store.get_list("alice", "j", "memory") == [{"i": 0}, {"i": 1}, {"i": 2}]
        assert store.get("alice", "j", "summary") == "s"
        assert [s.session_id for s in store.sessions("alice").items] == ["j"]
        store.append_list("alice", "j", "memory", [{"i": 3}])
        assert store.doctor() == []
    finally:
        store.close()


def test_a_migrate_dry_run_shows_only_what_it_would_run(store, raw):
    """The Java store writing rows (version 0) into a table that has the version column: the
    dry run names the backfill only (not an ALTER the table does not need, which would fail if
    run by hand), and migrate runs just that."""
    store.save("alice", "s", "k", 1)
    raw.execute("INSERT INTO {t} (session_id, state_key, item_index, state_data, version)"
                " VALUES ('alice:j', 'summary', 0, '\"s\"', 0)")
    plan = {p.name: p.sql for p in store.migrate(dry_run=True)}  # and the new session's catalog row
    assert set(plan) == {"0002_version_column", "0004_session_catalog"}
    assert "ALTER" not in plan["0002_version_column"].upper() and "UPDATE" in plan["0002_version_column"].upper()
    assert {p.name for p in store.migrate()} == set(plan)
    assert raw.query("SELECT version FROM {t} WHERE session_id = 'alice:j'") == [(1,)]
    assert store.migrate(dry_run=True) == []


def test_the_doctor_finds_nothing_wrong_with_a_table_being_written(store, url, database, raw):
    """A review of 2026-12-06: the doctor's scan reads the catalog rows first and the sessions'
    rows seconds later (it is not one snapshot), so sessions made while it ran looked like
    "no catalog row" (157 phantom findings at 100 000 rows). It now looks again, in one
    snapshot, at what the scan doubted: a healthy table being written is healthy."""
    import threading

    for i in range(200):  # rows the scan reads after the catalog rows ('__catalog__' sorts first)
        store.save_list("bulk", f"s{i}", "m", [{"i": j, "text": "x" * 200} for j in range(60)])
    stop, made = threading.Event(), []

    def writer() -> None:
        with MysqlAgentStateStore.from_url(url, database_name=database) as w:
            n = 0
            while not stop.is_set():
                n += 1
                w.save("zed", f"new-{n}", "summary", {"n": n})  # new sessions, read last by the scan
                w.append_list("bulk", f"s{n % 200}", "m", [{"i": -n}])
                made.append(n)

    t = threading.Thread(target=writer)
    t.start()
    found = []
    try:
        while len(found) < 3 or (len(made) < 40 and len(found) < 20):  # scans with the writer running through
            found.append([f.message for f in store.doctor()])
    finally:
        stop.set()
        t.join()
    assert len(made) >= 40
    assert found == [[]] * len(found), found
    raw.execute("UPDATE {t} SET updated_at = NOW() - INTERVAL 1 DAY WHERE session_id = '__catalog__' AND state_key = 'zed:new-1'")
    assert [f.kind for f in store.doctor()] == ["catalog"]  # a real one is still found


def test_doctor_finds_and_fixes(store, raw):
    store.save_list("u", "s", "m", [1, 2, 3])
    store.save_list("u", "s", "n", [1, 2])
    raw.execute("UPDATE {t} SET item_index = 7 WHERE session_id = 'u:s' AND state_key = 'm' AND item_index = 2")
    raw.execute("UPDATE {t} SET state_data = '5' WHERE session_id = 'u:s' AND state_key = 'n' AND item_index = 1")
    raw.execute("INSERT INTO {t} (session_id, state_key, item_index, state_data) VALUES ('j:x', 'k', 0, '{bad')")
    raw.execute("INSERT INTO {t} (session_id, state_key, item_index, state_data) VALUES ('__catalog__', 'j:gone', 0, '{}')")
    found = store.doctor()
    assert {p.kind for p in found} == {"list_rows", "hash_row", "json", "catalog"}
    assert all(p.message for p in found) and not any(p.fixed for p in found)
    fixed = store.doctor(fix=True)
    assert [p.kind for p in fixed if not p.fixed] == ["json"]
    assert store.get_list("u", "s", "m") == [1, 2, 3] and store.get_list("u", "s", "n") == [1, 5]
    assert [p.kind for p in store.doctor()] == ["json"]


# ---- metrics ---------------------------------------------------------------------------------


def test_metrics_count_saves_reads_and_conflicts(store):
    store.save_list("u", "s", "m", [1, 2])
    store.append_list("u", "s", "m", [3])
    store.save_list("u", "s", "m", [1, 2, 3, 4])
    store.save_list("u", "s", "m", [9, 2, 3, 4])
    store.save_list("u", "s", "m", [9])
    store.save("u", "s", "v", 1)
    assert store.save_if_version("u", "s", "v", 2, 5) == -1
    store.get_list("u", "s", "m")
    m = store.metrics()
    # the first save of a new list is a "rewrite" (written whole: no hash row yet)
    assert m["saves"] == {"unchanged": 0, "append": 2, "suffix": 1, "shrink": 1, "rewrite": 1, "clear": 0, "value": 1}
    assert m["stale_conflicts"] == 1 and m["reads"] >= 1 and m["rows_written"] >= 6
    assert m["latency"]["get_list"]["count"] == 1 and m["pool_wait_seconds"] >= 0


def test_prometheus_names(store):
    prometheus_client = pytest.importorskip("prometheus_client")
    registry = prometheus_client.CollectorRegistry()
    metrics.register(store, registry)
    store.save_list("u", "s", "m", [1, 2])
    store.save_list("u", "s", "m", [1])
    label = f"{store.database_name}.{store.table_name}"
    assert registry.get_sample_value("mysql_state_saves_total", {"store": label, "kind": "shrink"}) == 1.0


# ---- the command line ------------------------------------------------------------------------


def cli(url: str, database: str, *args: str, stdin: str | None = None, env: dict | None = None
        ) -> subprocess.CompletedProcess:
    """The command as a subprocess; the global options after the command (they may go either side)."""
    return subprocess.run([sys.executable, "-m", "mysql_state", *args, "--url", url, "--database", database],
                          capture_output=True, text=True, timeout=120, input=stdin, env=env)


def test_cli_sessions_show_rm_fork(store, raw, url, database):
    store.save_list("alice", "c1", "memory", [{"i": i} for i in range(5)])
    store.save("alice", "c1", "summary", "s")
    store.save(None, "anon", "k", 1)
    out = cli(url, database, "sessions", "--user", "alice")
    assert out.returncode == 0 and out.stdout.splitlines()[0].split() == ["USER", "SESSION", "KEYS", "ROWS", "BYTES", "UPDATED"]
    assert out.stdout.splitlines()[1].split()[:5] == ["alice", "c1", "2", "7", str(sum(len(r[3]) for r in raw.rows("alice:c1")))]
    page = orjson.loads(cli(url, database, "--json", "sessions").stdout)
    assert {(s["user_id"], s["session_id"]) for s in page["items"]} == {("alice", "c1"), (None, "anon")}
    assert orjson.loads(cli(url, database, "sessions", "--user", "-", "--json").stdout)["items"][0]["session_id"] == "anon"
    assert cli(url, database, "sessions", "--older-than", "30d", "--json").stdout.strip().startswith('{"items":[]')
    tail = cli(url, database, "show", "--user", "alice", "c1", "memory", "--tail", "2")
    assert [orjson.loads(x) for x in tail.stdout.splitlines()] == [{"i": 3}, {"i": 4}]
    assert orjson.loads(cli(url, database, "show", "--user", "alice", "c1", "summary", "--json").stdout) == "s"
    assert "memory" in cli(url, database, "show", "--user", "alice", "c1").stdout
    for missing in (("nope",), ("c1", "nokey")):
        bad = cli(url, database, "show", "--user", "alice", *missing)
        assert bad.returncode == 1 and missing[-1] in bad.stderr and "Traceback" not in bad.stderr  # 1: not found
        assert len(bad.stderr.strip().splitlines()) == 1
    done = cli(url, database, "fork", "--user", "alice", "c1", "c2")
    assert done.returncode == 0 and "copied 7 rows" in done.stdout and len(raw.rows("alice:c2")) == 7
    assert cli(url, database, "fork", "--user", "alice", "c1", "c2").returncode == 2
    assert cli(url, database, "rm", "--user", "alice", "c2").returncode == 2  # needs --yes
    assert cli(url, database, "rm", "--user", "alice", "c2", "--yes").returncode == 0 and raw.rows("alice:c2") == []
    assert cli(url, database, "rm", "--user", "alice", "c1", "summary").returncode == 0
    assert store.get("alice", "c1", "summary") is None


def test_cli_prune_export_import_doctor_migrate_stats(store, raw, url, database):
    for i in range(4):
        store.save_list("u", f"s{i}", "m", [i, i + 1])
    age(raw, "u:s0", 40)
    age(raw, "u:s1", 40)
    dry = cli(url, database, "prune", "--older-than", "30d", "--dry-run")
    assert dry.returncode == 0 and "would delete 2 sessions (6 rows)" in dry.stdout and len(raw.rows()) == 12
    assert cli(url, database, "prune", "--older-than", "30d").returncode == 2  # needs --yes
    done = with_terminal_stderr([sys.executable, "-m", "mysql_state", "prune", "--older-than", "30d", "--yes",
                                 "--url", url, "--database", database])
    assert done.returncode == 0 and "deleted 2 sessions" in done.stdout and "2/2" in done.stderr  # progress drawn
    assert store.list_session_ids("u") == {"s2", "s3"}
    exported = cli(url, database, "export")
    assert exported.returncode == 0 and len(exported.stdout.splitlines()) == len(raw.all_rows())
    # import into a fresh table of the same database
    MysqlAgentStateStore.from_url(url, database_name=database, table_name="t2", create_if_not_exist=True).close()
    imp = subprocess.run([sys.executable, "-m", "mysql_state", "--url", url, "--database", database, "--table", "t2",
                          "import"], input=exported.stdout, capture_output=True, text=True, timeout=120)
    assert imp.returncode == 0 and f"{len(raw.all_rows())} rows written" in imp.stdout
    copy = Raw(url, database, "t2")
    assert all_rows_with_times(copy) == all_rows_with_times(raw)
    copy.close()
    assert cli(url, database, "doctor").stdout.strip() == "healthy"
    assert cli(url, database, "migrate", "--dry-run").stdout.strip() == "nothing to do: the schema is current"
    raw.execute("INSERT INTO {t} (session_id, state_key, item_index, state_data) VALUES ('j:x', 'k', 0, '1')")
    sick = cli(url, database, "doctor")
    assert sick.returncode == 1 and "no catalog row" in sick.stdout
    assert cli(url, database, "doctor", "--fix").returncode == 0 and cli(url, database, "doctor").returncode == 0
    stats = orjson.loads(cli(url, database, "stats", "--json").stdout)
    assert stats["sessions"] == 3 and stats["rows"] == len(raw.rows()) and "saves" in stats["metrics"]
    assert "largest sessions" in cli(url, database, "stats").stdout


def test_cli_migrate_prints_the_sql_and_errors_are_one_line(url, database):
    make_java_table(url, database)
    plan = cli(url, database, "migrate", "--dry-run")
    assert plan.returncode == 0 and "ALTER TABLE" in plan.stdout and "0003_activity_index" in plan.stdout
    assert "0003_activity_index" in cli(url, database, "migrate").stdout
    assert "nothing to do" in cli(url, database, "migrate").stdout
    bad = cli("mysql://root:s3cret@127.0.0.1:1/", database, "sessions")
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and "s3cret" not in bad.stderr


def test_cli_server_start_status_stop(tmp_path):
    from mysql_state.server import find_binary

    if find_binary("mariadbd", "mysqld") is None:
        pytest.skip("needs a mariadbd/mysqld binary")
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    env.pop("MYSQL_URL", None)
    run = lambda *a: subprocess.run([sys.executable, "-m", "mysql_state", *a], capture_output=True,  # noqa: E731
                                    text=True, timeout=120, env=env)
    assert run("server", "status").returncode == 1
    try:
        started = run("server", "start")
        assert started.returncode == 0 and started.stdout.startswith("mysql://")
        assert run("server", "status").stdout.startswith("running")
        made = run("--database", "d1", "sessions", "--json")  # the embedded server: database and table made
        assert made.returncode == 0 and orjson.loads(made.stdout) == {"items": [], "next_cursor": None}
        assert run("--database", "mysql", "--table", "db", "doctor").returncode in (0, 1)
    finally:
        assert run("server", "stop").stdout.strip() in ("stopped", "not running")
    assert run("server", "status").returncode == 1
