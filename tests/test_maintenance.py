"""Maintenance that must not look like activity, and a doctor that reads what it checks (issue
18, items 9 (the doctor), 11, 12, 13, 14): re-encryption and repairs keep versions and activity
times, the doctor checks sealed rows as sealed and repairs encrypted lists, finds orphaned
history, and migrations run from two processes at once. Plain SQL on the table is the truth."""

from __future__ import annotations

import contextlib
import datetime as dt
import multiprocessing
import os

import pytest

from mysql_state import CorruptStateError, MysqlAgentStateStore, MysqlStateWarning
from mysql_state.crypto import PREFIX
from mysql_state.keys import history_session

from . import procs
from .conftest import JAVA_DDL, connect

SPAWN = multiprocessing.get_context("spawn")
K1, K2 = os.urandom(32), os.urandom(32)
MSGS = [{"role": "user", "text": f"turn {i}"} for i in range(5)]
#: What the activity of a session is: every row's version and times, the catalog row's included.
ACTIVITY = ("SELECT session_id, state_key, item_index, version, created_at, updated_at FROM {t}"
            " WHERE session_id = %s OR (session_id = '__catalog__' AND state_key = %s)"
            " ORDER BY session_id, state_key, item_index")


def ring(*ids: str):
    from mysql_state import Keyring

    return Keyring({i: {"k1": K1, "k2": K2}[i] for i in ids}, current=ids[0])


@pytest.fixture
def open_store(url, database, store):
    """More stores on the test's table (``encryption=`` a ring or None), closed at the end."""
    with contextlib.ExitStack() as opened:
        yield lambda encryption=None, **kw: opened.enter_context(
            MysqlAgentStateStore.from_url(url, database_name=database, encryption=encryption, **kw))


def age(raw, sid: str, days: int = 40) -> None:
    """Make a session idle for ``days``, by hand: its rows and its catalog row."""
    raw.execute("UPDATE {t} SET created_at = NOW() - INTERVAL %s DAY, updated_at = NOW() - INTERVAL %s DAY"
                " WHERE session_id = %s OR (session_id = '__catalog__' AND state_key = %s)", (days, days, sid, sid))


def activity(raw, sid: str) -> list[tuple]:
    return raw.query(ACTIVITY, (sid, sid))


# ---- 11: re-encryption keeps activity times and versions ---------------------------------------


def test_reencrypt_keeps_activity_times_and_versions(open_store, raw):
    pytest.importorskip("cryptography", reason="encryption needs the encryption extra (make test installs it)")
    old = open_store(ring("k1"))
    for session in ("idle", "live"):
        old.save_list("u", session, "m", MSGS)
        old.save("u", session, "v", {"n": 1})
    age(raw, "u:idle")
    items, list_version = old.get_list_versioned("u", "live", "m")
    _, value_version = old.get_versioned("u", "live", "v")
    before = {sid: activity(raw, sid) for sid in ("u:idle", "u:live")}

    rotated = open_store(ring("k2", "k1"))
    assert rotated.reencrypt() == 2 * (len(MSGS) + 2)  # per session: the hash row, its items, the value
    assert all(r[3].startswith(PREFIX + "k2:") for r in raw.rows() if not r[1].endswith(":_hash"))
    assert all('"dk":"k2/list"' in r[3] for r in raw.rows() if r[1].endswith(":_hash"))
    assert {sid: activity(raw, sid) for sid in before} == before  # versions and times, catalog included

    assert rotated.prune(dt.timedelta(days=30)).sessions == 1  # the idle session is still idle
    assert raw.rows("u:idle") == [] and raw.rows("u:live") != []
    assert rotated.save_list_if_version("u", "live", "m", items + [{"t": "x"}], list_version) == list_version + 1
    assert rotated.save_if_version("u", "live", "v", {"n": 2}, value_version) == value_version + 1
    assert rotated.get_list("u", "live", "m") == items + [{"t": "x"}]


@pytest.mark.parametrize("damage", ["stray row past the end", "item row deleted", "old ciphertext put back"])
def test_reencrypt_leaves_a_damaged_list_damaged_never_renumbered_into_another_list(open_store, raw, damage):
    """reencrypt's hash-row pass renumbered whatever item rows a list had and recomputed its hash
    row: a list saved as [a, b, c] read [a, b, c, d] after it, and the doctor saw nothing. A list
    that is not whole is now left as it is (its rows sealed again in place): the read still
    raises, the doctor still reports it, and nothing of the rows is lost."""
    pytest.importorskip("cryptography", reason="encryption needs the encryption extra (make test installs it)")
    old = open_store(ring("k1"))
    if damage == "stray row past the end":  # 'd', sealed for its place, left behind a shorter list
        old.save_list("u", "s", "m", ["a", "b", "c", "d"])
        stray = raw.query("SELECT state_data FROM {t} WHERE session_id = 'u:s' AND state_key = 'm' AND item_index = 3")
        old.save_list("u", "s", "m", ["a", "b", "c"])
        raw.execute("INSERT INTO {t} (session_id, state_key, item_index, state_data) VALUES ('u:s', 'm', 3, %s)",
                    (stray[0][0],))
    else:
        old.save_list("u", "s", "m", ["a", "b", "c"])
    if damage == "item row deleted":
        raw.execute("DELETE FROM {t} WHERE session_id = 'u:s' AND state_key = 'm' AND item_index = 1")
    else:
        first = raw.query("SELECT state_data FROM {t} WHERE session_id = 'u:s' AND state_key = 'm' AND item_index = 0")
        old.save_list("u", "s", "m", ["z", "b", "c"])
        raw.execute("UPDATE {t} SET state_data = %s WHERE session_id = 'u:s' AND state_key = 'm' AND item_index = 0",
                    (first[0][0],))
    rotated = open_store(ring("k2", "k1"))
    found = [(p.kind, p.key) for p in rotated.doctor() if p.session_id == "u:s"]
    assert found, damage
    before = raw.query("SELECT item_index FROM {t} WHERE session_id = 'u:s' AND state_key = 'm' ORDER BY item_index")
    with pytest.warns(MysqlStateWarning, match="reencrypt left 1 list.*'m' of 'u:s'.*before the old key"):
        rotated.reencrypt()
    assert [(p.kind, p.key) for p in rotated.doctor() if p.session_id == "u:s"] == found
    only_k2 = open_store(ring("k2"))  # the old key gone: the list still shows, as one nothing can check
    later = [p for p in only_k2.doctor() if p.session_id == "u:s"]
    assert later and all(p.key == "m" and not p.fixed for p in later), later
    if damage == "old ciphertext put back":
        assert "under key id 'k1', which the keyring lacks" in later[0].message
    assert raw.query("SELECT item_index FROM {t} WHERE session_id = 'u:s' AND state_key = 'm'"
                     " ORDER BY item_index") == before  # nothing renumbered, nothing dropped
    if damage != "old ciphertext put back":  # (that one's shape is whole: reads check shape, the doctor content)
        with pytest.raises(CorruptStateError):
            rotated.get_list("u", "s", "m")


# ---- 12: a repair is not activity: fix, then check, is clean -----------------------------------


def test_doctor_fix_then_doctor_is_clean_on_an_idle_session(store, raw):
    store.save_list("u", "s", "m", [1, 2, 3])
    store.save_list("u", "s", "n", [1, 2])
    store.save_list("u", "s", "o", [1, 2])
    raw.execute("UPDATE {t} SET item_index = 7 WHERE session_id = 'u:s' AND state_key = 'm' AND item_index = 2")
    raw.execute("UPDATE {t} SET state_data = '5' WHERE session_id = 'u:s' AND state_key = 'n' AND item_index = 1")
    raw.execute("DELETE FROM {t} WHERE session_id = 'u:s' AND state_key = 'o:_hash'")
    age(raw, "u:s")
    catalog_before = raw.query("SELECT updated_at FROM {t} WHERE session_id = '__catalog__' AND state_key = 'u:s'")
    versions_before = raw.query("SELECT state_key, version FROM {t} WHERE session_id = 'u:s' AND state_key IN"
                                " ('m:_hash', 'n:_hash', 'o', 'o:_hash') AND item_index = 0 ORDER BY state_key")
    fixed = store.doctor(fix=True)
    assert sorted(p.kind for p in fixed) == ["hash_row", "list_rows", "no_hash_row"] and all(p.fixed for p in fixed)
    assert store.doctor() == []
    assert raw.query("SELECT updated_at FROM {t} WHERE session_id = '__catalog__' AND state_key = 'u:s'") == catalog_before
    newest = raw.query("SELECT MAX(updated_at) FROM {t} WHERE session_id = 'u:s'")[0][0]
    assert newest <= catalog_before[0][0]
    # the hash rows keep their versions; the new one of 'o' takes its row 0's
    assert raw.query("SELECT state_key, version FROM {t} WHERE session_id = 'u:s' AND state_key IN"
                     " ('m:_hash', 'n:_hash', 'o:_hash') AND item_index = 0 ORDER BY state_key") == [
        ("m:_hash", versions_before[0][1]), ("n:_hash", versions_before[1][1]), ("o:_hash", versions_before[2][1])]
    assert store.get_list("u", "s", "m") == [1, 2, 3] and store.get_list("u", "s", "n") == [1, 5]
    assert store.get_list("u", "s", "o") == [1, 2]
    assert store.prune(dt.timedelta(days=30), dry_run=True).sessions == 1


# ---- 13: the doctor of an encrypted table -------------------------------------------------------


def test_a_doctor_without_the_keyring_says_what_it_could_not_check(open_store, raw, url, database):
    """A doctor without the keyring checks sealed rows by their envelope's form only (their
    content, and their lists against their hash rows, it cannot open), and answered "healthy"
    as if it had checked them: it now says how many it could not check, in a warning (the
    CLI's one stderr line); the findings and the exit code stay what they were."""
    pytest.importorskip("cryptography", reason="encryption needs the encryption extra (make test installs it)")
    import subprocess
    import sys
    import warnings

    s = open_store(ring("k1"), keep_history=True)
    s.save_list("u", "s", "m", MSGS)
    s.save_list("u", "s", "m", MSGS[:2])  # three items archived, sealed
    s.save("u", "s", "v", {"secret": 1})
    sealed = raw.query("SELECT COUNT(*) FROM {t} WHERE state_data LIKE %s AND state_key NOT LIKE %s",
                       (PREFIX + "%", "%:\\_hash"))[0][0]
    assert sealed == 6  # 2 items, 3 archived items, 1 value
    with pytest.warns(MysqlStateWarning, match=f"doctor checked {sealed} encrypted row\\(s\\) by their envelope's "
                                               "form only: this store has no keyring") as got:
        assert open_store(None).doctor() == []
    assert len(got) == 1 and got[0].filename == __file__  # it points at the caller's line
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # with the keyring: every row opened, nothing to say
        assert s.doctor() == []
    env = {k: v for k, v in os.environ.items() if k != "MYSQL_STATE_KEYS"}
    done = subprocess.run([sys.executable, "-m", "mysql_state", "--url", url, "--database", database, "doctor"],
                          capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0 and done.stdout.strip() == "healthy", done.stdout + done.stderr
    assert done.stderr.splitlines() == [f"mysql-state: warning: doctor checked {sealed} encrypted row(s) by their "
                                        "envelope's form only: this store has no keyring (encryption=...), so their "
                                        "content, and the lists they are items of against their hash rows, were not "
                                        "checked; run the doctor with the keyring to check them"]


def test_doctor_on_a_healthy_encrypted_table_is_clean(open_store, raw, url, database):
    pytest.importorskip("cryptography", reason="encryption needs the encryption extra (make test installs it)")
    from .test_ops import cli

    s = open_store(ring("k1"), keep_history=True)
    s.save_list("u", "s", "m", MSGS)
    s.save_list("u", "s", "m", MSGS[:2])  # archives three items, sealed for their place
    s.save("u", "s", "v", {"secret": 1})
    assert any(r[0] == history_session("u:s") for r in raw.all_rows())
    assert s.doctor() == []  # with the keyring: every sealed row opened
    assert open_store(None).doctor() == []  # without it: the envelopes' form
    done = cli(url, database, "doctor")
    assert done.returncode == 0 and done.stdout.strip() == "healthy", done.stdout + done.stderr

    raw.execute("UPDATE {t} SET state_data = CONCAT(LEFT(state_data, 10), '!!'), updated_at = updated_at"
                " WHERE session_id = 'u:s'"
                " AND state_key = 'v'")
    assert [p.kind for p in s.doctor()] == ["sealed"]
    assert [p.kind for p in open_store(None).doctor()] == ["sealed"]


def test_doctor_fix_repairs_an_encrypted_list(open_store, raw):
    pytest.importorskip("cryptography", reason="encryption needs the encryption extra (make test installs it)")
    s = open_store(ring("k1"))
    s.save_list("u", "s", "m", MSGS[:3])
    s.save_list("u", "s", "n", MSGS[:2])
    s.save_list("u", "s", "p", MSGS[:3])
    raw.execute("UPDATE {t} SET item_index = 7 WHERE session_id = 'u:s' AND state_key = 'm' AND item_index = 2")
    raw.execute("UPDATE {t} SET state_data = '5' WHERE session_id = 'u:s' AND state_key = 'n' AND item_index = 1")
    raw.execute("DELETE FROM {t} WHERE session_id = 'u:s' AND state_key = 'p' AND item_index = 1")
    damaged = raw.all_rows()
    plain = open_store(None)
    unfixed = plain.doctor(fix=True)  # no keyring: found, not repaired, nothing written
    assert sorted(p.kind for p in unfixed) == ["list_rows", "list_rows"] and not any(p.fixed for p in unfixed)
    assert all("not fixed" in p.message for p in unfixed) and raw.all_rows() == damaged
    assert {p.kind for p in s.doctor()} == {"list_rows", "hash_row"}
    fixed = s.doctor(fix=True)
    assert sorted((p.kind, p.key, p.fixed) for p in fixed) == [("hash_row", "n", True), ("list_rows", "m", True),
                                                               ("list_rows", "p", False)], fixed
    # 'p' lost its item 1: renumbering its rows would make [a, c] of [a, b, c], a list nobody saved
    # (a typed error made a wrong answer); it stays reported, its read a typed error
    assert "not fixed" in next(p.message for p in fixed if p.key == "p")
    assert [(p.kind, p.key) for p in s.doctor()] == [("list_rows", "p")]
    with pytest.raises(CorruptStateError):
        s.get_list("u", "s", "p")
    assert s.get_list("u", "s", "m") == MSGS[:3]  # its row at a wrong index: the hash row proves it, in order
    assert s.get_list("u", "s", "n") == [MSGS[0], 5]
    assert all(r[3].startswith(PREFIX + "k1:") for r in raw.rows("u:s") if not r[1].endswith(":_hash"))
    assert s.save_list_report("u", "s", "m", MSGS[:3]).kind == "unchanged"


# ---- 9 (the doctor): orphaned history ----------------------------------------------------------


def test_doctor_reports_and_removes_orphaned_history(url, database, raw):
    s = MysqlAgentStateStore.from_url(url, database_name=database, keep_history=True)
    try:
        for session in ("gone", "kept"):
            s.save_list("u", session, "m", MSGS)
            s.save_list("u", session, "m", MSGS[:1])  # archives four items
        gone, kept = history_session("u:gone"), history_session("u:kept")
        # erased the way an old release did: data and catalog rows, the history left behind
        raw.execute("DELETE FROM {t} WHERE session_id = 'u:gone' OR (session_id = '__catalog__' AND state_key = 'u:gone')")
        found = s.doctor()
        assert [(p.kind, p.session_id) for p in found] == [("orphaned_history", gone)]
        assert "orphaned history" in found[0].message and not found[0].fixed
        fixed = s.doctor(fix=True)
        assert [(p.kind, p.fixed) for p in fixed] == [("orphaned_history", True)]
        assert raw.query("SELECT COUNT(*) FROM {t} WHERE session_id = %s", (gone,)) == [(0,)]
        assert raw.query("SELECT COUNT(*) FROM {t} WHERE session_id = %s", (kept,)) == [(4,)]
        assert s.doctor() == []
        assert [h.value for h in s.get_history("u", "kept", "m")] == MSGS[1:]
    finally:
        s.close()


# ---- 14: two workers migrating at once ---------------------------------------------------------

#: The Java store's table before it had a version column: the store adds it at open, migrate the
#: rest (exact keys, the version back-fill, the activity index, the catalog).
OLD_DDL = JAVA_DDL.replace(" version BIGINT NOT NULL DEFAULT 0,", "")


@pytest.mark.parametrize("round", range(2))
@pytest.mark.parametrize("table", ["java", "without_version"])
def test_two_processes_migrating_at_once_both_succeed(url, database, table, round):
    con = connect(url)
    with con.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{database}`")
        cur.execute((JAVA_DDL if table == "java" else OLD_DDL).replace("{db}", database))
        values = ", ".join(f"('u:s{i % 50}', 'k{i}', 0, '{{\"i\": {i}}}')" for i in range(2000))
        cur.execute(f"INSERT INTO `{database}`.agentscope_sessions (session_id, state_key, item_index, state_data)"
                    f" VALUES {values}")
    con.close()
    barrier, results = SPAWN.Barrier(2), SPAWN.Queue()
    workers = [SPAWN.Process(target=procs.open_and_migrate, args=(url, database, barrier, results)) for _ in range(2)]
    for w in workers:
        w.start()
    got = [results.get(timeout=120) for _ in workers]
    for w in workers:
        w.join(30)
    assert [g[0] for g in got] == ["ok", "ok"], got
    assert {"0001_exact_key_collation", "0003_activity_index", "0004_session_catalog"} <= set(got[0][1]) | set(got[1][1])
    with MysqlAgentStateStore.from_url(url, database_name=database) as s:
        assert s.migrate(dry_run=True) == [] and s.doctor() == []
        assert s.exact_keys and len(s.sessions(limit=100).items) == 50
        assert s.get("u", "s7", "k7") == {"i": 7}


def test_doctor_on_a_healthy_table_being_written_finds_nothing(store, raw, url, database):
    """The doctor's scan reads the table in chunks of 2 000 rows, by separate statements: a list
    cut by a chunk's end and written in between read as "its hash row disagrees with its items",
    and fix=True rewrote it. A session found in doubt is read again whole, in one statement."""
    import threading
    import time

    for i in range(120):
        store.save_list("u", f"s{i:03}", "m", [{"i": i, "j": j, "pad": "p" * 40} for j in range(40)])
    stop = threading.Event()
    writers = [MysqlAgentStateStore.from_url(url, database_name=database) for _ in range(2)]

    def write(w: MysqlAgentStateStore, seed: int) -> None:
        n = seed
        while not stop.is_set():
            n += 1
            w.save_list("u", f"s{n % 120:03}", "m", [{"i": n, "j": j, "pad": "w" * 40} for j in range(40)])

    threads = [threading.Thread(target=write, args=(w, k * 1000)) for k, w in enumerate(writers)]
    for t in threads:
        t.start()
    found, runs = [], 0
    try:
        deadline = time.monotonic() + 6
        while time.monotonic() < deadline:
            found += [p.message for p in store.doctor(fix=runs % 2 == 1)]
            runs += 1
    finally:
        stop.set()
        for t in threads:
            t.join()
        for w in writers:
            w.close()
    assert runs >= 4 and found == [], found[:3]
    assert store.doctor() == []


# ---- the doctor and migrate on damage an audit found (2026-12-07) --------------------------------


def test_migrate_refuses_to_split_keys_that_differ_only_by_case_and_says_how(url, database):
    """On the Java DDL's case-insensitive table, a list this store wrote as 'alice:s1' and the
    Java store grew as 'Alice:s1' is one key; exact key columns would split it into two short
    lists (with the Java store's hash row, one read back silently short). migrate (and its dry
    run, and doctor) refuse, naming the keys, nothing changed; one spelling, then it migrates."""
    from mysql_state import MigrationError

    from .conftest import java_store

    with java_store(url, database) as (s, raw):
        raw.execute("INSERT INTO {t} (session_id, state_key, item_index, state_data) VALUES"
                    " ('alice:s1', 'memory', 0, '\"j0\"'), ('alice:s1', 'memory', 1, '\"j1\"'),"
                    " ('Alice:s1', 'memory', 2, '\"j2\"'), ('alice:s1', 'memory:_hash', 0, '3f2a9c'),"
                    " ('bob:s2 ', 'plan', 0, '1')")
        assert s.get_list("alice", "s1", "memory") == ["j0", "j1", "j2"]
        before = raw.query("SELECT COLLATION_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s"
                           " AND TABLE_NAME = 'agentscope_sessions' AND COLUMN_NAME = 'session_id'", (database,))
        for dry in (True, False):
            with pytest.raises(MigrationError, match="spelt in more than one way") as info:
                s.migrate(dry_run=dry)
            assert "session 'Alice:s1' / 'alice:s1'" in str(info.value) and "Nothing was changed" in str(info.value)
        found = [p for p in s.doctor(fix=True) if p.kind == "collation"]
        assert len(found) == 1 and not found[0].fixed and "not fixed" in found[0].message, found
        assert raw.query("SELECT COLLATION_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s"
                         " AND TABLE_NAME = 'agentscope_sessions' AND COLUMN_NAME = 'session_id'", (database,)) == before
        # The way out operating.md gives: one spelling each, the activity time kept.
        raw.execute("UPDATE {t} SET session_id = 'alice:s1', updated_at = updated_at WHERE session_id = 'alice:s1'")
        raw.execute("UPDATE {t} SET session_id = 'bob:s2', updated_at = updated_at WHERE session_id = 'bob:s2'")
        with pytest.raises(MigrationError, match="session 'bob:s2', whose catalog row .* spells it 'bob:s2 '"):
            s.migrate()  # the doctor run above made the catalog row 'bob:s2 ': the rows no longer spell it so
        raw.execute("UPDATE {t} SET state_key = 'bob:s2', updated_at = updated_at WHERE session_id = '__catalog__'"
                    " AND state_key = 'bob:s2'")
        assert [step.name for step in s.migrate()][0] == "0001_exact_key_collation"
        assert s.get_list("alice", "s1", "memory") == ["j0", "j1", "j2"]
        assert s.migrate() == [] and s.doctor() == []  # the catalog too, built once the ids compare exactly


def test_the_documented_way_out_keeps_history_and_activity_and_migrate_then_needs_nothing(url, database):
    """operating.md's procedure for a session spelt two ways: this store wrote 'alice:s1' (its
    catalog row, its archived history), the Java store grew the list as 'Alice:s1'. Keeping
    the catalog row's spelling with the documented UPDATE keeps the history and the idle time;
    migrate then runs every step it needs, the catalog's included, and a second one nothing."""
    from .conftest import java_store

    with java_store(url, database) as (s, raw):
        keeper = MysqlAgentStateStore.from_url(url, database_name=database, keep_history=True)
        try:
            keeper.save_list("alice", "s1", "memory", ["a", "b", "c"])
            keeper.save_list("alice", "s1", "memory", ["a"])  # two items archived
        finally:
            keeper.close()
        raw.execute("INSERT INTO {t} (session_id, state_key, item_index, state_data) VALUES ('Alice:s1', 'memory', 1,"
                    " '\"j\"')")
        raw.execute("UPDATE {t} SET created_at = NOW() - INTERVAL 40 DAY, updated_at = NOW() - INTERVAL 40 DAY")
        kept = raw.query("SELECT state_key FROM {t} WHERE session_id = '__catalog__' AND state_key = 'alice:s1'")
        assert kept == [("alice:s1",)]
        raw.execute("UPDATE {t} SET session_id = %s, updated_at = updated_at WHERE session_id = %s", (kept[0][0],) * 2)
        applied = [step.name for step in s.migrate()]
        assert applied[0] == "0001_exact_key_collation" and s.migrate() == []
        assert [h.value for h in s.get_history("alice", "s1", "memory")] == ["b", "c"]
        assert s.prune(dt.timedelta(days=30), dry_run=True).sessions == 1  # still idle


@pytest.mark.parametrize("case", ["a value under another spelling of the session", "a hash row under another "
                                  "spelling of its key", "an accent", "a catalog row spelling the session otherwise"])
def test_migrate_refuses_every_split_a_review_found(url, database, case):
    """A session spelt two ways across keys (its value would read as missing, under another
    user), and a list's hash row under another spelling of its key (the list would lose it),
    passed the first check, which grouped (session, key) only."""
    from mysql_state import MigrationError

    from .conftest import java_store

    rows = {"a value under another spelling of the session": [("alice:s1", "memory", 0, '"m"'),
                                                               ("Alice:s1", "plan", 0, '{"p": 1}')],
            "a hash row under another spelling of its key": [("alice:s1", "memory", 0, '"m"'),
                                                             ("alice:s1", "Memory:_hash", 0, "3f2a9c")],
            "an accent": [("alice:s1", "memory", 0, '"m"'), ("alice:s1", "mémory", 1, '"n"')],
            # this store wrote 'alice:s1' (its catalog row, its history), the Java store wrote it again as 'Alice:s1'
            "a catalog row spelling the session otherwise": [("__catalog__", "alice:s1", 0, "{}"),
                                                             ("Alice:s1", "memory", 0, '"m"')]}[case]
    said = {"a value under another spelling of the session": "session 'Alice:s1' / 'alice:s1'",
            "a catalog row spelling the session otherwise": "session 'Alice:s1', whose catalog row (and archived "
                                                            "history) spells it 'alice:s1'"}.get(case,
                                                                                                "of session 'alice:s1'")
    with java_store(url, database) as (s, raw):
        for r in rows:
            raw.execute("INSERT INTO {t} (session_id, state_key, item_index, state_data) VALUES (%s, %s, %s, %s)", r)
        with pytest.raises(MigrationError, match="spelt in more than one way") as info:
            s.migrate()
        assert said in str(info.value), str(info.value)
        assert s.get("alice", "s1", "plan") == ({"p": 1} if "value" in case else None)


def test_doctor_finds_and_repairs_a_cut_short_hash_row_of_this_store(store, raw):
    store.save_list("u", "s", "m", [1, 2, 3])
    raw.execute("UPDATE {t} SET state_data = LEFT(state_data, 40) WHERE session_id = 'u:s' AND state_key = 'm:_hash'")
    with pytest.raises(CorruptStateError, match="hash row cannot be read"):
        store.get_list("u", "s", "m")
    found = store.doctor()
    assert [(p.kind, p.key, p.fixed) for p in found] == [("hash_row", "m", False)], found
    assert "cannot be read" in found[0].message
    assert [(p.kind, p.fixed) for p in store.doctor(fix=True)] == [("hash_row", True)]
    assert store.get_list("u", "s", "m") == [1, 2, 3] and store.doctor() == []
    # cut short AND a row lost: what is left of the hash row says 3 items, 2 are stored: the fix
    # would make [1, 2] of [1, 2, 3] (a list nobody saved) out of a typed error; not fixed
    raw.execute("UPDATE {t} SET state_data = LEFT(state_data, 40) WHERE session_id = 'u:s' AND state_key = 'm:_hash'")
    raw.execute("DELETE FROM {t} WHERE session_id = 'u:s' AND state_key = 'm' AND item_index = 2")
    found = store.doctor(fix=True)
    assert [(p.kind, p.fixed) for p in found] == [("hash_row", False)] and "says 3 items" in found[0].message, found
    with pytest.raises(CorruptStateError):
        store.get_list("u", "s", "m")


@pytest.mark.parametrize("stray", [3, 10, -1])
def test_doctor_moves_rows_its_hash_row_does_not_count_to_history_never_into_the_list(store, raw, stray):
    """A row outside the items the hash row proves was renumbered into the list by --fix: a
    typed error became a list nobody saved. Now it is set aside in the key's history."""
    store.save_list("u", "s", "m", [1, 2, 3])
    raw.execute("INSERT INTO {t} (session_id, state_key, item_index, state_data) VALUES ('u:s', 'm', %s, '99')",
                (stray,))
    with pytest.raises(CorruptStateError):
        store.get_list("u", "s", "m")
    found = store.doctor()
    assert [(p.kind, p.key) for p in found] == [("list_rows", "m")] and f"[{stray}]" in found[0].message, found
    before = activity(raw, "u:s")
    fixed = store.doctor(fix=True)
    assert fixed[0].fixed and "moved to the key's history" in fixed[0].message, fixed
    assert store.get_list("u", "s", "m") == [1, 2, 3]
    assert [h.value for h in store.get_history("u", "s", "m")] == [99]
    assert activity(raw, "u:s") == [r for r in before if r[1:3] != ("m", stray)] and store.doctor() == []


def test_doctor_names_the_rows_it_renumbers_when_nothing_proves_which_are_the_list(store, raw):
    store.save_list("u", "s", "m", [1, 2, 3])
    raw.execute("UPDATE {t} SET item_index = 7 WHERE session_id = 'u:s' AND state_key = 'm' AND item_index = 1")
    found = store.doctor()
    assert [(p.kind, p.key) for p in found] == [("list_rows", "m")] and "[0, 2, 7]" in found[0].message, found


def test_catalog_rows_an_import_would_refuse_are_found_and_fixed_keeping_the_activity_time(store, raw):
    store.save("u", "s", "k", 1)
    store.save("u", "t", "k", 2)
    raw.execute("UPDATE {t} SET state_data = '{\"x\": 1}', updated_at = updated_at WHERE session_id = '__catalog__'"
                " AND state_key = 'u:s'")
    raw.execute("INSERT INTO {t} (session_id, state_key, item_index, state_data) VALUES ('__catalog__', 'u:t', 1, '{}')")
    when = raw.query("SELECT updated_at FROM {t} WHERE session_id = '__catalog__' AND state_key = 'u:s'")
    with pytest.raises(ValueError, match="a catalog row must be"):
        store.import_rows(list(store.export()))
    found = store.doctor()
    assert sorted((p.kind, p.session_id) for p in found) == [("catalog", "u:s"), ("catalog", "u:t")], found
    assert all("would not import" in p.message for p in found)
    assert all(p.fixed for p in store.doctor(fix=True))
    assert raw.query("SELECT updated_at FROM {t} WHERE session_id = '__catalog__' AND state_key = 'u:s'") == when
    assert store.doctor() == []
    lines = list(store.export())
    store.truncate_all_sessions()
    store.import_rows(lines)
    assert store.get("u", "s", "k") == 1 and store.get("u", "t", "k") == 2


def test_a_catalog_row_without_an_activity_time_is_named_so_and_fixed(store, raw):
    store.save("u", "s", "k", 1)
    raw.execute("UPDATE {t} SET updated_at = NULL WHERE session_id = '__catalog__' AND state_key = 'u:s'")
    found = store.doctor()
    assert len(found) == 1 and "no activity time (updated_at is NULL)" in found[0].message, found
    assert store.doctor(fix=True)[0].fixed
    assert raw.query("SELECT updated_at IS NOT NULL FROM {t} WHERE session_id = '__catalog__' AND state_key = 'u:s'") == [(1,)]
    assert store.doctor() == []


def test_history_of_a_session_deleted_while_the_doctor_ran_is_not_orphaned(url, database, raw, monkeypatch):
    """The scan saw the history rows, the session was deleted (its history with it) before the
    scan reached its rows: it reported 'orphaned history' and '(fixed: deleted)' for rows
    already gone."""
    from mysql_state import migrations

    s = MysqlAgentStateStore.from_url(url, database_name=database, keep_history=True)
    try:
        s.save_list("m", "aa", "k", [1, 2, 3])  # rows the scan reads between the history rows and u:zz
        real = migrations.scan

        def scan_then_delete(ctx, between=None):
            for sid, rows in real(ctx, between):
                yield sid, rows
                if sid.startswith("__history__"):
                    s.delete("u", "zz")  # the session and its history go, mid-scan
        monkeypatch.setattr(migrations, "scan", scan_then_delete)
        monkeypatch.setattr(migrations, "CHUNK", 2)  # the scan's reads: the delete comes between two
        for fix in (False, True):
            s.save_list("u", "zz", "m", MSGS)
            s.save_list("u", "zz", "m", MSGS[:1])
            assert [p for p in s.doctor(fix=fix) if p.kind == "orphaned_history"] == []
    finally:
        s.close()


def test_a_sealed_stray_row_copied_from_another_index_is_set_aside_too(open_store, raw):
    """Item 0 of an encrypted list copied by hand to index -1: the doctor opened it where it was
    sealed (as any row moved in order), but the move to history opened it at -1 and failed, so
    the list stayed unreadable."""
    pytest.importorskip("cryptography", reason="encryption needs the encryption extra (make test installs it)")
    s = open_store(ring("k1"))
    s.save_list("u", "s", "m", ["a", "b", "c"])
    raw.execute("INSERT INTO {t} (session_id, state_key, item_index, state_data) SELECT session_id, state_key, -1,"
                " state_data FROM {t} WHERE session_id = 'u:s' AND state_key = 'm' AND item_index = 0")
    fixed = s.doctor(fix=True)
    assert [(p.kind, p.fixed) for p in fixed] == [("list_rows", True)], fixed
    assert s.get_list("u", "s", "m") == ["a", "b", "c"] and [h.value for h in s.get_history("u", "s", "m")] == ["a"]
    assert s.doctor() == []


def test_doctor_names_rows_that_are_not_the_stores_and_leaves_them(store, raw):
    """Rows whose session_id is neither a packed '<user>:<session>' id nor an internal one were
    left out of every export (exit 0) and no doctor said so (found by an operator audit)."""
    store.save("alice", "s0", "plan", 1)
    raw.execute("INSERT INTO {t} (session_id, state_key, item_index, state_data, version)"
                " VALUES ('alices0', 'k', 0, '1', 1), ('alices0', 'k2', 0, '2', 1)")
    for fix in (False, True):
        found = [p for p in store.doctor(fix=fix) if p.kind == "foreign"]
        assert [(p.session_id, p.fixed) for p in found] == [("alices0", False)]
        assert "2 row(s) of session id 'alices0'" in found[0].message
    assert raw.query("SELECT COUNT(*) FROM {t} WHERE session_id = 'alices0'") == [(2,)]  # left as they are


def test_doctor_sets_back_a_catalog_time_ahead_of_the_servers_clock(store, raw):
    """A catalog row whose activity time was set into the future (by hand) made its session
    look active for ever: prune never took it, and no doctor said so (found by an operator
    audit). Now a finding, and the fix sets it back to the session's last write."""
    import datetime as dt

    store.save("bob", "s0", "plan", 1)
    raw.execute("UPDATE {t} SET updated_at = NOW() - INTERVAL 40 DAY WHERE session_id = 'bob:s0'")
    raw.execute("UPDATE {t} SET updated_at = '2030-01-01 00:00:00' WHERE session_id = '__catalog__'"
                " AND state_key = 'bob:s0'")
    found = [p for p in store.doctor() if p.session_id == "bob:s0"]
    assert [p.kind for p in found] == ["catalog"] and "after the server's clock" in found[0].message
    assert store.prune(dt.timedelta(days=30), user_id="bob", dry_run=True).sessions == 0  # looks active
    assert [p.fixed for p in store.doctor(fix=True) if p.session_id == "bob:s0"] == [True]
    (row_time,), = raw.query("SELECT updated_at FROM {t} WHERE session_id = 'bob:s0'")
    assert raw.query("SELECT updated_at FROM {t} WHERE session_id = '__catalog__' AND state_key = 'bob:s0'") == [
        (row_time,)]
    assert [p for p in store.doctor() if p.session_id == "bob:s0"] == []
    assert store.prune(dt.timedelta(days=30), user_id="bob").sessions == 1  # idle again, as it is


# ---- the doctor's progress: sessions checked, after each chunk of its scan ----------------------


def test_doctor_reports_the_sessions_checked_after_each_chunk_and_sends_nothing_more(store, raw, monkeypatch):
    """``progress(done, None)`` once the schema is checked, after each chunk the scan reads (the
    sessions it completed checked), and once the catalog and history are: ``done`` the
    ``<user>:<session>`` sessions checked. The callback adds no statement."""
    from mysql_state import migrations

    for i in range(5):
        store.save_list("u", f"s{i}", "m", [1, 2, 3])  # 4 rows each, and 5 catalog rows (sorted first)
    monkeypatch.setattr(migrations, "CHUNK", 6)
    assert raw.query("SELECT COUNT(*) FROM {t}") == [(25,)]  # 5 chunks: 6, 6, 6, 6, 1 rows
    assert store.doctor() == []  # the connections both calls use, opened before they are counted
    found, sent = raw.statements(lambda: store.doctor())
    calls: list = []
    again, sent_with_progress = raw.statements(lambda: store.doctor(progress=lambda *a: calls.append(a)))
    assert found == again == []
    # chunk 1 ends in u:s0 (the catalog rows are not sessions), 2 in u:s1, 3 in u:s3, 4 in u:s4
    assert calls == [(0, None), (0, None), (1, None), (3, None), (4, None), (5, None)]
    assert sent_with_progress == sent
    calls.clear()
    assert store.doctor(True, progress=lambda *a: calls.append(a)) == [] and calls[-1] == (5, None)  # fix positional


def test_a_progress_callback_that_raises_stops_the_doctor_and_keeps_the_repairs_made(store, raw, monkeypatch):
    """The callback's error is the call's (no findings returned); a repair made before it stays
    (each is committed as it is made), none after it is made, and a doctor run again finds and
    repairs the rest."""
    from mysql_state import migrations

    for i in range(5):
        store.save_list("u", f"s{i}", "m", [1, 2, 3])
    for sid in ("u:s0", "u:s4"):
        raw.execute("DELETE FROM {t} WHERE session_id = %s AND state_key = 'm:_hash'", (sid,))
    monkeypatch.setattr(migrations, "CHUNK", 6)

    def stop(done: int, total: None) -> None:
        if done:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        store.doctor(fix=True, progress=stop)
    hash_rows = "SELECT session_id FROM {t} WHERE state_key = 'm:_hash' ORDER BY session_id"
    assert raw.query(hash_rows) == [("u:s0",), ("u:s1",), ("u:s2",), ("u:s3",)]  # u:s0 repaired, u:s4 not reached
    assert [(p.kind, p.session_id) for p in store.doctor()] == [("no_hash_row", "u:s4")]
    assert [p.fixed for p in store.doctor(fix=True)] == [True] and store.doctor() == []
    assert [store.get_list("u", f"s{i}", "m") for i in range(5)] == [[1, 2, 3]] * 5


# ---- migrate's progress: rows migrated, after each batch of the back-fill and the catalog build --


def java_sessions(raw, n: int) -> None:
    """``n`` sessions ``u:s<i>`` of 3 rows each, as the Java store writes them: version 0, no catalog row."""
    values = ", ".join(f"('u:s{i}', 'k{k}', 0, '{k}')" for i in range(n) for k in range(3))
    raw.execute("INSERT INTO {t} (session_id, state_key, item_index, state_data) VALUES " + values)


def test_migrate_reports_the_rows_migrated_after_each_batch_and_sends_nothing_more(url, database, monkeypatch):
    """``progress(done, None)`` once the steps to apply are known, then after each statement of
    the version back-fill and each batch of the catalog build: ``done`` the rows migrated, the
    rows given a version, then a catalog row per session. Two Java tables alike, one migrated
    with a callback: the same statements. Nothing to apply, or a dry run: no call."""
    from mysql_state import migrations, sql

    from .conftest import Raw, java_store

    monkeypatch.setattr(sql, "BACKFILL_VERSION", sql.BACKFILL_VERSION.replace("LIMIT 10000", "LIMIT 8"))
    monkeypatch.setattr(migrations, "CATALOG_BATCH", 3)
    with java_store(url, database) as (s, raw), contextlib.ExitStack() as opened:
        raw.execute(JAVA_DDL.replace("{db}", database).replace("agentscope_sessions", "twin"))  # its twin
        quiet_raw = opened.enter_context(contextlib.closing(Raw(url, database, "twin")))
        with pytest.warns(MysqlStateWarning):  # the Java table's collation
            quiet = opened.enter_context(MysqlAgentStateStore.from_url(url, database_name=database, table_name="twin"))
        java_sessions(raw, 7)
        java_sessions(quiet_raw, 7)
        steps, sent = raw.statements(lambda: quiet.migrate())
        calls: list = []
        applied, sent_with_progress = raw.statements(lambda: s.migrate(progress=lambda *a: calls.append(a)))
        assert [step.name for step in applied] == [step.name for step in steps] == migrations.STEPS
        # the 21 rows given a version, 8 a statement; then the 7 catalog rows, 3 sessions a batch
        assert calls == [(0, None), (8, None), (16, None), (21, None), (24, None), (27, None), (28, None)]
        assert sent_with_progress == sent
        assert raw.query("SELECT version, COUNT(*) FROM {t} GROUP BY version") == [(1, 28)]
        assert raw.query("SELECT COUNT(*) FROM {t} WHERE session_id = '__catalog__'") == [(7,)]
        calls.clear()
        assert s.migrate(progress=lambda *a: calls.append(a)) == [] and calls == []
        raw.execute("UPDATE {t} SET version = 0, updated_at = updated_at WHERE session_id = 'u:s1'")
        assert [step.name for step in s.migrate(True, progress=lambda *a: calls.append(a))] == [
            "0002_version_column"] and calls == []  # a dry run: nothing done, nothing reported
        assert s.migrate(progress=lambda *a: calls.append(a)) and calls == [(0, None), (3, None)]
        before = raw.com_counts()
        with pytest.raises(TypeError, match="progress must be a callable, got str: 'bar'"):
            s.migrate(progress="bar")
        assert raw.com_counts() == before  # refused before any statement


def test_a_progress_callback_that_raises_stops_migrate_and_a_run_again_does_the_rest(url, database, monkeypatch):
    """The callback's error is the call's; the back-fill's statements before it stay committed,
    the step it was in is not recorded, the store knows the keys are exact (the step before
    it made them so), and a migration run again applies what is left, then nothing."""
    from mysql_state import sql

    from .conftest import java_store

    monkeypatch.setattr(sql, "BACKFILL_VERSION", sql.BACKFILL_VERSION.replace("LIMIT 10000", "LIMIT 8"))
    with java_store(url, database) as (s, raw):
        java_sessions(raw, 7)
        assert not s.exact_keys

        def stop(done: int, total: None) -> None:
            if done >= 16:
                raise KeyboardInterrupt

        with pytest.raises(KeyboardInterrupt):
            s.migrate(progress=stop)
        assert raw.query("SELECT version, COUNT(*) FROM {t} GROUP BY version ORDER BY version") == [(0, 5), (1, 16)]
        assert raw.query(f"SELECT step FROM `{database}`.mysql_state_migrations") == [("0001_exact_key_collation",)]
        assert raw.query("SELECT COUNT(*) FROM {t} WHERE session_id = '__catalog__'") == [(0,)]
        assert s.exact_keys  # learnt from the table, as after a migration that ends
        calls: list = []
        assert [step.name for step in s.migrate(progress=lambda *a: calls.append(a))] == [
            "0002_version_column", "0003_activity_index", "0004_session_catalog"]
        assert calls == [(0, None), (5, None), (12, None)]  # the 5 rows left, then the 7 catalog rows
        assert raw.query("SELECT version, COUNT(*) FROM {t} GROUP BY version") == [(1, 28)]
        assert s.migrate() == [] and s.doctor() == []
        assert s.get("u", "s6", "k2") == 2 and len(s.sessions(limit=10).items) == 7
