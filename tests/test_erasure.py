"""Erasure erases (issue 18, items 8, 9, 10, 15, 16): a deleted key or session takes its archived
history along, ``forget_user`` leaves no row of the user anywhere, a compaction of a list written
without our hash row (the Java store) archives what it drops, and numbers or cutoffs that would
be an SQL error or delete live sessions are refused before any SQL. Plain SQL is the truth."""

from __future__ import annotations

import datetime as dt

import pytest

from mysql_state import MysqlAgentStateStore, keys

from .conftest import java_store

USER = "alice"


@pytest.fixture
def hstore(url: str, database: str, store):
    """A store that keeps history (``keep_history=True``) on the test's database."""
    s = MysqlAgentStateStore.from_url(url, database_name=database, keep_history=True)
    yield s
    s.close()


def history_rows(raw, user: str, session: str) -> list[tuple]:
    hsid = keys.history_session(keys.pack(user, session))
    return raw.query("SELECT state_key, item_index, state_data FROM {t} WHERE session_id = %s"
                     " ORDER BY state_key, item_index", (hsid,))


def rows_of_user(raw, user: str, sessions: list[str]) -> list[tuple]:
    """Every row of the table that belongs to ``user``: data, catalog and history rows."""
    packed = [keys.pack(user, s) for s in sessions]
    hist = [keys.history_session(p) for p in packed]
    prefix = keys.user_prefix(user)
    return [r for r in raw.all_rows()
            if r[0].startswith(prefix) or r[0] in hist or (r[0] == keys.CATALOG_SESSION and r[1] in packed)]


# ---- 8: delete(user, session, key) takes the key's history along ----------------------------

def test_deleting_a_key_deletes_its_archived_history(hstore, raw) -> None:
    hstore.save_list(USER, "s1", "memory", [1, 2, 3, 4, 5])
    hstore.save_list(USER, "s1", "memory", [1, 2])  # archives 3, 4, 5
    hstore.save_list(USER, "s1", "notes", ["a", "b"])
    hstore.save_list(USER, "s1", "notes", [])  # archives a, b
    assert [h.value for h in hstore.get_history(USER, "s1", "memory")] == [3, 4, 5]
    hstore.delete(USER, "s1", "memory")
    assert hstore.get_history(USER, "s1", "memory") == []
    assert [r[0] for r in history_rows(raw, USER, "s1")] == ["notes", "notes"]  # the other key's stays
    assert [h.value for h in hstore.get_history(USER, "s1", "notes")] == ["a", "b"]


# ---- 9: the last key, whole sessions, forget_user ----------------------------------------------

def test_deleting_the_last_key_leaves_no_row_of_the_session(hstore, raw) -> None:
    hstore.save_list(USER, "s1", "memory", [1, 2, 3])
    hstore.save_list(USER, "s1", "memory", [1])
    hsid = keys.history_session(keys.pack(USER, "s1"))
    # history of a key that has no rows any more (left by an older version, or by hand)
    raw.execute("INSERT INTO {t} (session_id, state_key, item_index, state_data, version)"
                " VALUES (%s, 'gone', 0, '7', 1)", (hsid,))
    hstore.delete(USER, "s1", "memory")
    assert rows_of_user(raw, USER, ["s1"]) == []
    assert hstore.sessions(USER).items == []


def test_deleting_a_session_deletes_its_history(hstore, raw) -> None:
    hstore.save_list(USER, "s1", "memory", [1, 2, 3])
    hstore.save_list(USER, "s1", "memory", [1])
    assert history_rows(raw, USER, "s1")
    hstore.delete(USER, "s1")
    assert rows_of_user(raw, USER, ["s1"]) == []


def test_forget_user_leaves_no_row_of_the_user_even_after_its_catalog_row_went(hstore, raw) -> None:
    hstore.save_list(USER, "s1", "memory", [1, 2, 3])
    hstore.save_list(USER, "s1", "memory", [1])  # history of s1
    hstore.save(USER, "s1", "extra", {"x": 1})
    hstore.delete(USER, "s1", "extra")
    hstore.save_list(USER, "s2", "memory", ["a", "b"])
    hstore.save_list(USER, "s2", "memory", [])  # history of s2
    raw.execute("DELETE FROM {t} WHERE session_id = %s AND state_key = %s",
                (keys.CATALOG_SESSION, keys.pack(USER, "s2")))  # s2's catalog row is gone
    hstore.save_list("bob", "s1", "memory", [1, 2])
    hstore.save_list("bob", "s1", "memory", [1])
    hstore.delete(USER, "s1", "memory")  # s1's last key: its catalog row goes
    assert hstore.forget_user(USER) > 0
    assert rows_of_user(raw, USER, ["s1", "s2"]) == []
    assert [h.value for h in hstore.get_history("bob", "s1", "memory")] == [2]  # others untouched
    assert hstore.get_list("bob", "s1", "memory") == [1]


# ---- 10: a compaction of a list written without our hash row archives what it drops ----------

@pytest.mark.parametrize("hash_row", [None, "java-hash-3f2a"], ids=["no hash row", "foreign hash row"])
def test_compacting_a_list_without_our_hash_row_archives_what_it_drops(hstore, raw, hash_row) -> None:
    sid = keys.pack(USER, "s1")
    items = ['{"n":0}', '{"n":1}', '{"n":2}', '{"n":3}', '{"n":4}']
    for i, text in enumerate(items):  # rows as the Java store writes them
        raw.execute("INSERT INTO {t} (session_id, state_key, item_index, state_data, version)"
                    " VALUES (%s, 'memory', %s, %s, 0)", (sid, i, text))
    if hash_row is not None:
        raw.execute("INSERT INTO {t} (session_id, state_key, item_index, state_data, version)"
                    " VALUES (%s, 'memory:_hash', 0, %s, 0)", (sid, hash_row))
    hstore.save_list(USER, "s1", "memory", [{"n": 0}, {"n": 1}])
    assert hstore.get_list(USER, "s1", "memory") == [{"n": 0}, {"n": 1}]
    assert [h.value for h in hstore.get_history(USER, "s1", "memory")] == [{"n": 2}, {"n": 3}, {"n": 4}]
    assert [r[2] for r in history_rows(raw, USER, "s1")] == items[2:]


def test_a_new_list_with_history_kept_is_still_one_full_write(hstore, raw) -> None:
    report = hstore.save_list_report(USER, "s1", "memory", [1, 2])
    assert report.kind == "rewrite"
    assert history_rows(raw, USER, "s1") == []


# ---- 15: counts that SQL cannot take are refused, naming the parameter, before any SQL --------

def test_huge_limit_and_batch_are_refused_naming_the_parameter(store, raw) -> None:
    store.save(USER, "s1", "k", 1)
    before = raw.all_rows()
    with pytest.raises(ValueError, match="limit"):
        store.sessions(limit=2 ** 64)
    with pytest.raises(ValueError, match="limit"):
        store.sessions(USER, limit=2 ** 63)
    with pytest.raises(ValueError, match="batch"):
        store.prune(dt.timedelta(0), batch=2 ** 64)
    with pytest.raises(ValueError, match="batch"):
        store.forget_user(USER, batch=2 ** 64)
    with pytest.raises(ValueError, match="limit"):
        store.sessions(limit=0)
    assert raw.all_rows() == before
    assert [s.session_id for s in store.sessions(limit=2 ** 62).items] == ["s1"]  # the largest allowed works


def test_prune_with_a_datetime_keeps_a_session_written_after_it_in_the_same_second(store, raw) -> None:
    """updated_at holds whole seconds: a cutoff with a fraction (the server's NOW(6)) took a
    session written 0.1 s after it, in the same second, for idle, and deleted it."""
    import time

    def now6():
        return raw.query("SELECT NOW(6)")[0][0]

    for attempt in range(10):  # until the write lands in the cutoff's second (a loaded machine may cross it)
        while not 50_000 < now6().microsecond < 300_000:  # early in a second: the write stays in it
            time.sleep(0.01)
        cutoff = now6()
        time.sleep(0.1)
        store.save(USER, f"written-after-{attempt}", "k", 1)
        written = raw.query("SELECT updated_at FROM {t} WHERE session_id = %s", (f"{USER}:written-after-{attempt}",))
        if written[0][0] == cutoff.replace(microsecond=0):
            break
    assert written[0][0] == cutoff.replace(microsecond=0), "never wrote within the cutoff's second"
    assert store.prune(cutoff).sessions == 0 and store.exists(USER, f"written-after-{attempt}")
    time.sleep(1.1)
    assert store.prune(cutoff + dt.timedelta(seconds=1), dry_run=True).sessions >= 1  # its second is past: idle


# ---- 16: a cutoff in the future is refused like a negative duration --------------------------

def test_prune_refuses_a_cutoff_in_the_future(store, raw) -> None:
    store.save(USER, "live", "k", 1)
    before = raw.all_rows()
    server_now = raw.query("SELECT NOW()")[0][0]
    for future in (server_now + dt.timedelta(days=1), server_now + dt.timedelta(minutes=5),
                   dt.datetime.now(dt.timezone.utc) + dt.timedelta(hours=2)):
        with pytest.raises(ValueError, match="older_than"):
            store.prune(older_than=future)
        with pytest.raises(ValueError, match="older_than"):
            store.prune(older_than=future, dry_run=True)
    with pytest.raises(ValueError, match="older_than"):
        store.prune(older_than=dt.timedelta(seconds=-1))
    assert raw.all_rows() == before
    assert store.get(USER, "live", "k") == 1
    assert store.prune(older_than=server_now - dt.timedelta(days=1)).sessions == 0  # a past cutoff still works


def test_forget_user_on_the_java_table_before_migrate_leaves_no_catalog_row(url, database):
    """On the Java store's table (keys folding case and accents, before ``migrate()``) the
    user's range ``['alice:', 'alice;')`` is empty (';' sorts before ':' there): the catalog
    rows were left, and ``sessions()`` listed the erased user's sessions."""
    with java_store(url, database) as (s, raw):
        assert raw.query("SELECT 'alice:' < 'alice;' COLLATE utf8mb4_unicode_ci")[0][0] == 0
        for sid in ("secret-topic", "other"):
            s.save("alice", sid, "plan", {"secret": sid})
        s.save_list("alice", "secret-topic", "memory", ["a", "b"])
        s.save("bob", "keep", "plan", 1)
        s.save("alicia", "keep", "plan", 1)  # a user whose name starts the same way: kept
        assert s.forget_user("alice") > 0
        left = raw.query("SELECT session_id, state_key FROM {t} WHERE session_id LIKE 'alice:%%'"
                         " OR state_key LIKE 'alice:%%' OR session_id LIKE '%%alice:%%'")
        assert left == [], left
        assert [i.session_id for i in s.sessions(user_id="alice").items] == []
        assert sorted(r[0] for r in raw.query("SELECT DISTINCT session_id FROM {t} WHERE session_id <> '__catalog__'")) \
            == ["alicia:keep", "bob:keep"]
        assert s.get("alicia", "keep", "plan") == 1


def test_one_user_s_calls_on_the_java_table_before_migrate_never_take_another_user_s_rows(url, database):
    """On the Java store's table (keys folding case) a user's LIKE also matched "Alice" for
    "alice": ``export("alice")`` carried Alice's rows, ``prune(user_id="alice")`` deleted her
    sessions, and ``sessions("alice", limit=1)`` gave an empty page without a cursor (her rows
    filled the page, then were dropped)."""
    import json

    with java_store(url, database) as (s, raw):
        s.save("alice", "a1", "plan", {"owner": "alice"})
        s.save("alice", "a2", "plan", {"owner": "alice"})
        raw.execute("UPDATE {t} SET updated_at = updated_at - INTERVAL 1 HOUR")
        s.save("Alice", "b1", "plan", {"owner": "Alice"})
        s.save("Alice", "b2", "plan", {"owner": "Alice"})
        ids = lambda lines: sorted({(r["session_id"], r["state_key"]) for r in map(json.loads, lines)})  # noqa: E731
        assert ids(s.export("alice")) == [("__catalog__", "alice:a1"), ("__catalog__", "alice:a2"),
                                          ("alice:a1", "plan"), ("alice:a2", "plan")]
        pages, cursor = [], None
        while True:
            page = s.sessions("alice", limit=1, cursor=cursor)
            pages.append([i.session_id for i in page.items])
            cursor = page.next_cursor
            if cursor is None:
                break
        assert sorted(sum(pages, [])) == ["a1", "a2"] and all(len(p) == 1 for p in pages[:2]), pages
        before = raw.all_rows()
        assert s.prune(dt.timedelta(0), user_id="alice", dry_run=True).sessions == 2
        assert raw.all_rows() == before
        assert s.prune(dt.timedelta(0), user_id="alice").sessions == 2
        left = sorted({r[0] for r in raw.query("SELECT session_id FROM {t} WHERE session_id <> '__catalog__'")})
        assert left == ["Alice:b1", "Alice:b2"]
        assert s.get("Alice", "b1", "plan") == {"owner": "Alice"}


def test_forget_user_while_the_user_is_still_written_leaves_no_torn_session(url, database, store, raw) -> None:
    """A write of the user landing while forget_user ran (after its data batches, before its
    catalog batch) left that session with rows and no catalog row: sessions() and prune never
    saw it again. Each session is erased or left whole; once the writer stops, erasure is total."""
    import threading

    for i in range(40):
        store.save_list(USER, f"s{i}", "memory", [{"i": j} for j in range(5)])
    writer = MysqlAgentStateStore.from_url(url, database_name=database)
    stop = threading.Event()

    def write() -> None:
        n = 0
        while not stop.is_set():
            writer.append_list(USER, f"s{n % 40}", "memory", [{"live": n}])
            n += 1

    thread = threading.Thread(target=write)
    thread.start()
    try:
        for _ in range(3):
            store.forget_user(USER, batch=7)
            data = {r[0] for r in raw.query("SELECT DISTINCT session_id FROM {t} WHERE session_id LIKE 'alice:%%'")}
            listed = {r[0] for r in raw.query("SELECT state_key FROM {t} WHERE session_id = '__catalog__'"
                                              " AND state_key LIKE 'alice:%%'")}
            assert data <= listed, f"sessions with rows and no catalog row: {sorted(data - listed)}"
    finally:
        stop.set()
        thread.join()
        writer.close()
    store.forget_user(USER)
    assert raw.query("SELECT COUNT(*) FROM {t} WHERE session_id LIKE 'alice:%%' OR state_key LIKE 'alice:%%'") == [(0,)]


def test_forget_user_and_delete_on_the_java_table_leave_sessions_spelled_with_other_cases(url, database):
    """On the Java store's table (keys folding case and accents), deleting the session
    'alice:s1' by its id also matched 'Alice:s1' and 'alicé:s1', other users' sessions: each
    session goes by its id compared as bytes too."""
    with java_store(url, database) as (s, raw):
        for user, key in (("alice", "a"), ("Alice", "b"), ("alicé", "c")):  # one key each: no PK clash
            raw.execute("INSERT INTO {t} (session_id, state_key, item_index, state_data) VALUES (%s, %s, 0, '1')",
                        (f"{user}:s1", key))
        raw.execute("INSERT INTO {t} (session_id, state_key, item_index, state_data) VALUES ('bob:x', 'k', 0, '1')")
        assert s.forget_user("alice") == 1
        left = sorted(r[0] for r in raw.query("SELECT CAST(session_id AS BINARY) FROM {t}"))
        assert left == sorted(x.encode() for x in ("Alice:s1", "alicé:s1", "bob:x")), left
        s.delete("Alice", "s1")
        left = sorted(r[0] for r in raw.query("SELECT CAST(session_id AS BINARY) FROM {t}"))
        assert left == sorted(x.encode() for x in ("alicé:s1", "bob:x")), left


def test_forget_user_on_the_java_table_finds_sessions_spelled_like_another_user_s(url, database):
    """The user's sessions were listed by a DISTINCT over the folding collation: of 'Alice:s1'
    and 'alice:s1' it gave one spelling (maybe Alice's, then dropped by the exact prefix), and of
    four spellings of one session id it gave one a round, so some were never erased."""
    with java_store(url, database) as (s, raw):
        s.save("Alice", "s1", "a", "Alice's")
        s.save("alice", "s1", "b", "alice's secret")
        for i, sid in enumerate(("ab", "Ab", "aB", "AB")):
            s.save("carol", sid, f"x{i}", sid)
        s.forget_user("alice")
        s.forget_user("carol")
        left = raw.query("SELECT CAST(session_id AS BINARY), state_key FROM {t} WHERE session_id <> '__catalog__'")
        assert left == [(b"Alice:s1", "a")], left
        assert s.list_session_ids("carol") == set()


def test_forget_user_refuses_a_blank_id_rather_than_erase_the_anonymous_user(store, raw) -> None:
    """Elsewhere a blank user id names the anonymous user; in forget_user an empty variable
    would then erase every anonymous session (audit of 2026-12-07): refused, nothing erased."""
    store.save(None, "a", "k", 1)
    store.save("", "b", "k", 2)
    before = raw.all_rows()
    for blank in ("", "   "):
        with pytest.raises(ValueError, match="blank; pass None"):
            store.forget_user(blank)
    assert raw.all_rows() == before
    assert store.forget_user(None) > 0 and store.list_session_ids(None) == set()


def test_prune_refuses_a_blank_user_rather_than_prune_the_anonymous_user(store, raw) -> None:
    """prune(user_id="") took the blank id for the anonymous user and pruned its sessions: a
    script passing an unset variable (``os.environ.get("TENANT", "")``) deleted anonymous
    users' data (a standards audit). Refused as forget_user refuses it, nothing deleted; None
    still names the anonymous user."""
    import datetime as dt

    store.save(None, "anon-s", "k", 1)
    raw.execute("UPDATE {t} SET updated_at = '2020-01-01 00:00:00'")
    before = raw.all_rows()
    for blank in ("", " ", "\t", "\u3000"):
        for dry_run in (True, False):
            with pytest.raises(ValueError, match=r"prune: user_id .* is blank; pass None .* nothing was pruned"):
                store.prune(dt.timedelta(days=30), user_id=blank, dry_run=dry_run)
    assert raw.all_rows() == before
    assert store.prune(dt.timedelta(days=30), user_id=None).sessions == 1
    assert store.list_session_ids(None) == set()


def test_prune_on_the_java_table_takes_one_user_s_session_not_another_spelling_of_it(url, database):
    """prune(user_id="alice") deleted 'Alice:s1' with 'alice:s1' (same session name, another
    user): its deletes compared the ids with the table's folding collation, where delete and
    forget_user compare bytes too."""
    with java_store(url, database) as (s, raw):
        s.save("alice", "s1", "a", "alice's")
        s.save("Alice", "s1", "b", "SECRET-of-Alice")
        raw.execute("UPDATE {t} SET updated_at = updated_at - INTERVAL 1 HOUR")
        assert s.prune(dt.timedelta(minutes=1), user_id="alice", dry_run=True) == (1, 1)  # its one row, not hers
        assert s.prune(dt.timedelta(minutes=1), user_id="alice").sessions == 1
        # (the two spellings share one catalog row on this table: its key folds case; migrate() ends that)
        left = sorted((r[0], r[1]) for r in raw.query("SELECT CAST(session_id AS BINARY), CAST(state_key AS BINARY)"
                                                     " FROM {t} WHERE session_id <> '__catalog__'"))
        assert left == [(b"Alice:s1", b"b")], left
        assert s.get("Alice", "s1", "b") == "SECRET-of-Alice"


def test_the_user_id_the_command_line_writes_for_the_anonymous_user_is_reserved(store, raw):
    """The API took "-" as a user; the CLI reads "-" as the anonymous user, so `forget-user
    --user -` erased the anonymous user's sessions and left user "-"'s, and `sessions` showed
    both as "-". Now "-" is refused where every id is checked, nothing written."""
    with pytest.raises(ValueError, match="'-' is reserved"):
        store.save("-", "chat", "v", "SECRET")
    with pytest.raises(ValueError, match="'-' is reserved"):
        store.forget_user("-")
    assert raw.all_rows() == []


# ---- forget_user's progress: sessions erased, of those found, after each batch ------------------


def test_forget_user_reports_the_sessions_erased_of_those_found_and_sends_nothing_more(store, raw) -> None:
    """``progress(done, total)`` once the user's sessions are found, then after each batch:
    ``done`` the sessions erased, ``total`` those found (the last call: done == total). Two users
    of the same shape, one erased with a callback: the same statements."""
    for user in (USER, "bob"):
        for i in range(7):
            store.save_list(user, f"s{i}", "m", [1, 2])  # 2 items, the hash row, the catalog row
    store.save("carol", "s0", "k", 1)
    assert store.forget_user("dave") == 0  # the connections both calls use, opened before they are counted
    removed, sent = raw.statements(lambda: store.forget_user("bob", batch=3))
    calls: list = []
    with_progress, sent_with_progress = raw.statements(
        lambda: store.forget_user(USER, batch=3, progress=lambda done, total: calls.append((done, total))))
    assert removed == with_progress == 7 * 4
    assert calls == [(0, 7), (3, 7), (6, 7), (7, 7)]
    assert sent_with_progress == sent
    assert rows_of_user(raw, USER, [f"s{i}" for i in range(7)]) == [] and {r[0] for r in raw.rows()} == {"carol:s0"}
    calls.clear()
    assert store.forget_user(USER, progress=lambda *a: calls.append(a)) == 0 and calls == [(0, 0)]  # none found


def test_a_progress_callback_that_raises_stops_forget_user_with_whole_sessions_left(store, raw) -> None:
    """The callback's error is the call's; the batches before it stay erased, every other
    session is whole (its rows and its catalog row), and a run again erases the rest."""
    for i in range(7):
        store.save_list(USER, f"s{i}", "m", [1, 2])

    def stop(done: int, total: int) -> None:
        if done:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        store.forget_user(USER, batch=3, progress=stop)
    left = [f"s{i}" for i in range(3, 7)]
    assert store.list_session_ids(USER) == set(left)  # s0..s2, the first batch, are gone
    assert len(rows_of_user(raw, USER, [f"s{i}" for i in range(7)])) == 4 * len(left)
    for s in left:  # whole: its 3 rows, its catalog row
        assert len(raw.rows(keys.pack(USER, s))) == 3, s
        assert raw.query("SELECT COUNT(*) FROM {t} WHERE session_id = %s AND state_key = %s",
                         (keys.CATALOG_SESSION, keys.pack(USER, s))) == [(1,)], s
    assert store.forget_user(USER) == 4 * len(left) and rows_of_user(raw, USER, left) == []
    assert store.doctor() == []
