"""A key is a value or a list, never both: writers of one key racing each other.

Races hold a writer mid-transaction at the driver level: a thread named ``held`` pauses just
before its first INSERT (its transaction open, the list's hash row locked) until released, so
the racing call starts in between and the INSERT lands behind its scan.
"""

from __future__ import annotations

import threading
import time

import pymysql
import pytest

from mysql_state import MysqlAgentStateStore, UNVERSIONED

from .conftest import Raw, in_thread
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


@pytest.fixture
def cold(url, database, store):
    """A writer that never saw the list (another process): it locks the hash row, then inserts."""
    s = MysqlAgentStateStore.from_url(url, database_name=database)
    yield s
    s.close()


# ---- deletes and value saves racing list writers ----------------------------------------


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


def test_a_warm_append_sends_its_commit_in_its_statement(store, raw, driver_commits):
    """The warm writer's append is ONE packet, its statement and the COMMIT: no separate COMMIT
    is sent (the driver's commit is never called), and the list is exact."""
    store.save_list("u", "s", "m", list(range(5)))
    store.get_list("u", "s", "m", offset=-1)
    called = driver_commits
    called.clear()
    before = raw.com_counts()
    assert store.append_list("u", "s", "m", [5, 6]) == 7
    after = raw.com_counts()
    assert called == []
    assert after.get("Com_commit", 0) - before.get("Com_commit", 0) == 1
    assert check_list_rows(raw, "u:s", "m") == list(range(7))


def test_a_warm_append_waiting_on_a_delete_finds_its_list_gone_and_is_exact(store, raw, url, database):
    """A delete holds the session's rows (uncommitted) while the warm writer's one-packet append
    waits on the hash row's lock; the delete commits: the append finds no hash row (it inserts
    the sentinel, which its check row refuses: error 1690, nothing committed) and appends the
    locked way to the empty list: exactly the new items, one hash row that describes them."""
    store.save_list("u", "s", "m", list(range(5)))
    store.get_list("u", "s", "m", offset=-1)  # the writer knows the hash row: the one-packet way
    holder = Raw(url, database)
    try:
        holder.execute("BEGIN")
        assert holder.execute("DELETE FROM {t} WHERE session_id = 'u:s'") == 6
        appending = in_thread(lambda: store.append_list("u", "s", "m", [5, 6]))
        time.sleep(0.3)
        assert raw.query("SELECT COUNT(*) FROM {t} WHERE session_id = 'u:s'")[0][0] == 6  # still waiting
        holder.execute("COMMIT")
        assert appending() == 2
    finally:
        holder.close()
    assert check_list_rows(raw, "u:s", "m") == [5, 6]
    assert store.get_list("u", "s", "m") == [5, 6]


def test_append_after_a_value_replaced_the_list_starts_a_new_list(store, raw):
    store.save_list("u", "s", "m", [1, 2, 3])
    store.save("u", "s", "m", "v")
    assert raw.rows("u:s") == [("u:s", "m", 0, '"v"', raw.rows("u:s")[0][4])]
    store.save_list("u", "s", "m", [7])
    assert store.get_list("u", "s", "m") == [7]
    assert check_list_rows(raw, "u:s", "m") == [7]


# ---- compare-and-set over a list ----------------------------------------------------------


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


# ---- create only while absent (save_if_version(..., 0)): one statement ----------------------


def test_create_while_absent_is_one_packet_and_writes_nothing_over_what_is_there(store, raw):
    """One packet: the check that no list is under the key (a SELECT whose error stops the
    packet), the row and the catalog row in one INSERT (no INSERT ... SELECT: MariaDB runs one
    over its own table through a temporary table), the COMMIT."""
    before = raw.com_counts()
    assert store.save_if_version("u", "s", "new", {"a": 1}, 0) == 1
    after = raw.com_counts()
    diff = {k: v - before.get(k, 0) for k, v in after.items() if v - before.get(k, 0)}
    assert diff == {"Com_select": 1, "Com_insert": 1, "Com_commit": 1}, diff
    assert [(r[1], r[2], r[3], r[4]) for r in raw.rows("u:s")] == [("new", 0, '{"a":1}', 1)]
    assert raw.query("SELECT COUNT(*) FROM {t} WHERE session_id = '__catalog__' AND state_key = 'u:s'")[0][0] == 1
    store.save_list("u", "s", "empty", [])
    store.save_list("u", "s", "list", [1, 2])
    raw.query("INSERT INTO {t} (session_id, state_key, item_index, state_data, version)"
              " VALUES ('u:s', 'java', 0, '\"j\"', 0)")  # a row the Java store wrote: version 0
    table = raw.query("SELECT * FROM {t} ORDER BY session_id, state_key, item_index")
    for key in ("new", "empty", "list", "java"):  # there: nothing written, the catalog row neither
        assert store.save_if_version("u", "s", key, "X", 0) == UNVERSIONED, key
        assert raw.query("SELECT * FROM {t} ORDER BY session_id, state_key, item_index") == table, key
    assert store.get_list("u", "s", "empty") == [] and store.get_list("u", "s", "list") == [1, 2]
    assert store.get("u", "s", "new") == {"a": 1} and store.get("u", "s", "java") == "j"


def test_create_while_absent_sends_its_commit_in_the_statements_packet(store, raw, driver_commits):
    """``save_if_version(..., 0)`` is the whole transaction: its one statement carries the
    COMMIT (the driver's commit is never called); a key that is there commits nothing."""
    called = driver_commits
    assert store.save_if_version("u", "s", "k", {"a": 1}, 0) == 1
    assert store.save_if_version("u", "s", "k", {"a": 2}, 0) == UNVERSIONED
    assert called == []
    assert raw.query("SELECT state_data, version FROM {t} WHERE session_id = 'u:s' AND state_key = 'k'") \
        == [('{"a":1}', 1)]


def test_a_create_racing_a_creator_that_commits_first_writes_nothing(store, raw, url, database):
    """Another transaction inserted the key's row 0 and holds it: the one-packet create waits on
    it; that transaction commits, so the create meets the duplicate branch, which fails before
    its COMMIT: UNVERSIONED, the other's row as it was, the catalog row not touched by us."""
    holder = Raw(url, database)
    try:
        holder.execute("BEGIN")
        holder.execute("INSERT INTO {t} (session_id, state_key, item_index, state_data, version)"
                       " VALUES ('u:s', 'k', 0, '\"theirs\"', 1)")
        creating = in_thread(lambda: store.save_if_version("u", "s", "k", "ours", 0))
        time.sleep(0.3)
        holder.execute("COMMIT")
        assert creating() == UNVERSIONED
    finally:
        holder.close()
    assert raw.query("SELECT state_data, version FROM {t} WHERE session_id = 'u:s'") == [('"theirs"', 1)]
    assert raw.query("SELECT COUNT(*) FROM {t} WHERE session_id = '__catalog__' AND state_key = 'u:s'")[0][0] == 0
    assert store.save_if_version("u", "s", "k", "ours", 1) == 2  # the store goes on, on a good connection
    assert store.get("u", "s", "k") == "ours"


def test_processes_creating_one_key_at_once_leave_one_winner(url, database, store, raw):
    """Four real processes (a store each) create the same keys at the same moment: for each
    key exactly one gets version 1, the others UNVERSIONED, and the row holds the winner's."""
    import multiprocessing

    from . import procs

    spawn = multiprocessing.get_context("spawn")
    keys = [f"k{i}" for i in range(8)]
    barrier, results = spawn.Barrier(4), spawn.Queue()
    ps = [spawn.Process(target=procs.create_once, args=(url, database, keys, f"p{j}", barrier, results))
          for j in range(4)]
    for p in ps:
        p.start()
    got = [results.get(timeout=120) for _ in range(4 * len(keys))]
    for p in ps:
        p.join(60)
        assert p.exitcode == 0
    for key in keys:
        outcome = sorted((version, mark) for k, mark, version in got if k == key)
        assert [v for v, _ in outcome] == [UNVERSIONED] * 3 + [1], (key, outcome)
        winner = outcome[-1][1]
        assert raw.query("SELECT state_data, version FROM {t} WHERE session_id = 'u:s' AND state_key = %s", (key,)) \
            == [(f'"{winner}"', 1)]


def test_processes_appending_to_a_list_that_does_not_exist_yet_all_land(url, database, store, raw):
    """Three real processes append at the same moment to a list nobody made yet (as after a
    delete, a prune or an erasure of a session still written): an append that found no hash
    row, then the items another had just committed, took row 0 alone for a single value and
    raised WrongTypeError. Every append lands, each list has one item per process."""
    import multiprocessing

    from . import procs

    spawn = multiprocessing.get_context("spawn")
    rounds = 60
    barrier, results = spawn.Barrier(3), spawn.Queue()
    ps = [spawn.Process(target=procs.append_new_lists, args=(url, database, rounds, j, barrier, results))
          for j in range(3)]
    for p in ps:
        p.start()
    got = [results.get(timeout=120) for _ in range(3 * rounds)]
    for p in ps:
        p.join(60)
        assert p.exitcode == 0
    assert [e for _, e in got if e is not None] == []
    for r in range(rounds):
        assert sorted(check_list_rows(raw, "u:new-%d" % r, "m")) == [0, 1, 2], r
