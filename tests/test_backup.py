"""Backups that restore (issue 18, items 2-5 and 17): an export is one consistent snapshot, an
import restores keys whole, is all or nothing, and refuses hostile lines naming them. Plain SQL
on the table is the truth."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import time
import uuid

import orjson
import pytest

from mysql_state import MysqlAgentStateStore, ValueTooLargeError, crypto, keys
from mysql_state.errors import ServerUnavailableError
from mysql_state.pool import DEFAULT_POOL_SIZE
from tests.conftest import Raw, connect, private_server

USER = "alice"


def fresh_store(url: str):
    """A store (and Raw) on a database of its own, to import into."""
    name = "imp_" + uuid.uuid4().hex[:10]
    return MysqlAgentStateStore.from_url(url, database_name=name, create_if_not_exist=True), Raw(url, name)


@contextlib.contextmanager
def fresh_target(url: str):
    """:func:`fresh_store`, its database dropped at the end."""
    s, r = fresh_store(url)
    try:
        yield s, r
    finally:
        s.close()
        r.close()
        con = connect(url)
        with con.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{r.database}`")
        con.close()


@pytest.fixture
def target(url: str):
    with fresh_target(url) as made:
        yield made


def key_rows(raw, user: str, session: str, key: str) -> list[tuple]:
    sid = keys.pack(user, session)
    return raw.query("SELECT state_key, item_index FROM {t} WHERE session_id = %s AND state_key IN (%s, %s)"
                     " ORDER BY state_key, item_index", (sid, key, keys.hash_key(key)))


# ---- 2: one snapshot ---------------------------------------------------------------------------

@pytest.mark.parametrize("scope", ["user", "all users", "sessions"])
def test_an_export_is_one_snapshot_while_another_store_compacts_the_list(url, database, store, target, scope):
    items = [{"i": i, "text": f"message {i}"} for i in range(2500)]
    store.save_list(USER, "s1", "memory", items)
    store.save(USER, "s1", "state", {"turn": 1})
    args = {"user": (USER,), "all users": (), "sessions": (USER, ["s1"])}[scope]
    lines = store.export(*args)
    got = [next(lines) for _ in range(1200)]  # past the first chunk, inside the second
    other = MysqlAgentStateStore.from_url(url, database_name=database)  # another pool, other connections
    try:
        other.save_list(USER, "s1", "memory", [{"summary": "all of it"}] + items[-3:])  # a compaction
        other.save(USER, "s1", "state", {"turn": 2})
        other.save(USER, "s2", "late", 1)  # a session born during the export
    finally:
        other.close()
    got += list(lines)
    assert all(json.loads(x)["session_id"] != keys.pack(USER, "s2") for x in got)
    imported, raw = target
    imported.import_rows(got)
    assert imported.get_list(USER, "s1", "memory") == items  # the list as it was when the export began
    assert imported.get(USER, "s1", "state") == {"turn": 1}
    assert [s.session_id for s in imported.sessions(USER).items] == ["s1"]


def test_an_export_abandoned_half_way_gives_its_connection_back(store) -> None:
    store.save_list(USER, "s1", "memory", list(range(2500)))
    for _ in range(DEFAULT_POOL_SIZE + 2):  # more than the pool holds: each went back
        lines = store.export(USER)
        next(lines)
        lines.close()
    assert len(list(store.export(USER))) == 2500 + 2


# ---- 3: replace restores keys whole -------------------------------------------------------------

def test_replace_of_an_older_export_restores_each_key_whole(store, raw) -> None:
    store.save_list(USER, "s1", "memory", ["a", "b", "c"])
    store.save(USER, "s1", "was_value", {"v": 1})
    store.save_list(USER, "s1", "was_list", [1, 2, 3, 4])
    old = list(store.export(USER))
    store.save_list(USER, "s1", "memory", ["a", "x", "c", "d", "e"])  # 5 items now
    store.save_list(USER, "s1", "was_value", [1, 2, 3])  # a value became a list
    store.save(USER, "s1", "was_list", "now a value")  # a list became a value
    store.save(USER, "s1", "newer", 7)  # a key the export does not hold stays
    assert store.import_rows(old, on_conflict="replace") > 0
    assert store.get_list(USER, "s1", "memory") == ["a", "b", "c"]
    assert key_rows(raw, USER, "s1", "memory") == [("memory", 0), ("memory", 1), ("memory", 2), ("memory:_hash", 0)]
    assert store.get(USER, "s1", "was_value") == {"v": 1}
    assert key_rows(raw, USER, "s1", "was_value") == [("was_value", 0)]
    assert store.get_list(USER, "s1", "was_list") == [1, 2, 3, 4]
    assert len(key_rows(raw, USER, "s1", "was_list")) == 5
    assert store.get(USER, "s1", "newer") == 7
    assert store.import_rows(old, on_conflict="replace") == 0  # twice changes nothing


def test_replace_twice_changes_nothing_when_the_session_moved_on_since_the_export(store, raw) -> None:
    """The session was active after the export (a second later, so its catalog row's
    ``updated_at`` is newer than the exported one): a replace restores the keys, keeps that
    newer activity (the catalog only widens), and a second replace changes nothing."""
    store.save_list(USER, "s1", "memory", ["a", "b", "c"])
    old = list(store.export(USER))
    time.sleep(1.1)  # DATETIME has one-second steps: the activity below is a later second
    store.save(USER, "s1", "newer", 7)
    cat = ("SELECT updated_at FROM {t} WHERE session_id = %s AND state_key = %s AND item_index = 0")
    moved = raw.query(cat, (keys.CATALOG_SESSION, keys.pack(USER, "s1")))
    assert store.import_rows(old, on_conflict="replace") == 0  # the rows are the export's already
    assert raw.query(cat, (keys.CATALOG_SESSION, keys.pack(USER, "s1"))) == moved  # not set back
    assert store.import_rows(old, on_conflict="replace") == 0
    assert store.get_list(USER, "s1", "memory") == ["a", "b", "c"]
    assert store.get(USER, "s1", "newer") == 7


def test_skip_keeps_a_key_that_exists_whole(store, raw) -> None:
    store.save_list(USER, "s1", "memory", ["a", "b", "c", "d", "e"])
    old = list(store.export(USER))
    store.save_list(USER, "s1", "memory", ["a", "b", "c"])
    store.delete(USER, "s1", "gone")
    assert store.import_rows(old) == 0  # every key exists: nothing of them is mixed in
    assert store.get_list(USER, "s1", "memory") == ["a", "b", "c"]
    assert len(key_rows(raw, USER, "s1", "memory")) == 4


# ---- 4: all or nothing ---------------------------------------------------------------------

def export_of(store, n: int, pad: str = "") -> list[str]:
    store.save_list(USER, "s1", "memory", [{"i": i, "pad": pad} if pad else {"i": i} for i in range(n)])
    store.save(USER, "s2", "v", "x")
    return list(store.export(USER))


def test_a_bad_line_after_the_first_batch_imports_nothing(store, target) -> None:
    lines = export_of(store, 2500)
    bad = len(lines) + 1
    imported, raw = target
    with pytest.raises(ValueError, match=f"line {bad}\\b"):
        imported.import_rows(lines + ["{not a row"] + lines[:5])
    assert raw.all_rows() == []
    assert imported.sessions().items == []
    assert imported.import_rows(lines) == len(lines)  # the good lines alone import whole
    assert imported.get_list(USER, "s1", "memory") == [{"i": i} for i in range(2500)]


@pytest.fixture(scope="module")
def small_packet_url():
    server = private_server("--max-allowed-packet=65536")
    yield server.url
    server.stop()


def test_a_row_over_max_allowed_packet_is_value_too_large_naming_its_line(small_packet_url) -> None:
    src = MysqlAgentStateStore.from_url(small_packet_url, database_name="src", create_if_not_exist=True)
    dst = MysqlAgentStateStore.from_url(small_packet_url, database_name="dst", create_if_not_exist=True)
    raw = Raw(small_packet_url, "dst")
    try:
        lines = export_of(src, 300, pad="p" * 300)  # several batches under a 64 KiB packet
        assert sum(len(x) for x in lines) > 3 * 32768
        big = orjson.loads(next(x for x in lines if orjson.loads(x)["state_key"] == "v"))
        big.update(state_key="huge", state_data=json.dumps("x" * 70000))
        at = len(lines) + 1
        with pytest.raises(ValueTooLargeError, match=f"line {at}\\b") as caught:
            dst.import_rows(lines + [orjson.dumps(big).decode()] + lines[:3])
        assert not isinstance(caught.value, ServerUnavailableError)
        assert raw.all_rows() == []
        assert dst.sessions().items == []
        assert dst.import_rows(lines) == len(lines)  # the store is still usable: nothing was lost
        assert dst.get_list(USER, "s1", "memory") == [{"i": i, "pad": "p" * 300} for i in range(300)]
    finally:
        raw.close()
        src.close()
        dst.close()


# ---- 5: hostile lines ------------------------------------------------------------------------

def _hostile(good: dict) -> dict:
    sid = good["session_id"]
    return {
        "negative item_index": dict(good, item_index=-1),
        "item_index past INT": dict(good, item_index=2 ** 31),
        "huge item_index": dict(good, item_index=2 ** 70),
        "session id longer than the column": dict(good, session_id=USER + ":" + "s" * 250),
        "state key longer than the column": dict(good, state_key="k" * 256),
        "state_data not JSON": dict(good, state_data="{not json"),
        "forged catalog row with an empty session": dict(good, session_id=keys.CATALOG_SESSION, state_key=USER + ":",
                                                         state_data="{}"),
        "forged catalog row without ':'": dict(good, session_id=keys.CATALOG_SESSION, state_key="phantom",
                                               state_data="{}"),
        "catalog row of a session not imported": dict(good, session_id=keys.CATALOG_SESSION,
                                                      state_key="mallory:phantom", state_data="{}"),
        "malformed history id": dict(good, session_id=keys.HISTORY_PREFIX + "abc"),
        "history of a session not imported": dict(good, session_id=keys.history_session("mallory:x")),
        "id without ':' that is not the store's": dict(good, session_id="plain"),
        "blank session of a packed id": dict(good, session_id=sid.split(":")[0] + ":  "),
        "timestamp with a UTC offset (the column keeps none)": dict(good, created_at="2026-01-01T00:00:00+05:00"),
        "hash row past row 0": dict(good, state_key=good["state_key"] + ":_hash", item_index=5),
        "hash row of a hash row": dict(good, state_key=good["state_key"] + ":_hash:_hash"),
        "a row the import holds already": dict(good, state_data='"another"'),
        # (a standards audit: without a keyring it imported, and the doctor then reported it)
        "an encrypted row that is no envelope": dict(good, state_key="sealed", state_data=crypto.PREFIX + "k1:AAAA"),
        "an encrypted row with no key id": dict(good, state_key="sealed", state_data=crypto.PREFIX + ":" + "A" * 64),
    }


@pytest.mark.parametrize("case", list(_hostile({"session_id": "u:s", "state_key": "k"})))
def test_hostile_import_lines_are_refused_naming_the_line_and_nothing_is_written(store, target, case) -> None:
    lines = export_of(store, 20)
    good = orjson.loads(next(x for x in lines if orjson.loads(x)["state_key"] == "v"))
    bad = json.dumps(_hostile(good)[case])  # (json: orjson does not write integers past 64 bits)
    imported, raw = target
    with pytest.raises(ValueError, match=f"line {len(lines) + 1}\\b"):
        imported.import_rows(lines + [bad])
    assert raw.all_rows() == []
    assert imported.sessions().items == []


def test_foreign_hash_rows_and_sealed_rows_are_not_taken_for_hostile(store, target) -> None:
    lines = export_of(store, 3)
    good = orjson.loads(next(x for x in lines if orjson.loads(x)["state_key"] == "v"))
    java_hash = dict(good, state_key="jlist:_hash", state_data="3f2a9c")  # the Java store's format
    envelope = crypto.RowCipher(crypto.Keyring({"k1": b"k" * 32}, current="k1"), "agentscope_sessions").seal(
        good["session_id"], "sealed", 0, b'{"secret": 1}').decode()
    sealed = dict(good, state_key="sealed", state_data=envelope)  # a well-formed envelope: no keyring needed
    imported, raw = target
    assert imported.import_rows(lines + [orjson.dumps(java_hash).decode(), orjson.dumps(sealed).decode()]) == len(lines) + 2
    assert raw.query("SELECT state_data FROM {t} WHERE state_key = 'jlist:_hash'") == [("3f2a9c",)]
    assert raw.query("SELECT state_data FROM {t} WHERE state_key = 'sealed'") == [(envelope,)]


def test_an_export_cut_inside_a_list_is_refused_whole_and_writes_nothing(store, target) -> None:
    """An export cut at any line boundary inside a list imported a torn list that read back
    short with no error; with "replace" it also replaced a healthy list. A cut right after the
    first item left one row and no hash row, taken for a value: "replace" then cut the stored
    list to that one item, exit 0 (audit of 2026-12-07). The hash row now comes before its
    items, so every cut inside a list leaves a hash row that counts more items than the file
    holds: refused, naming the key, and nothing is written."""
    store.save_list(USER, "s1", "memory", ["m0", "m1", "m2", "m3", "m4"])
    store.save_list(USER, "s1", "one", ["only"])
    lines = list(store.export(USER, ["s1"]))
    rows = [orjson.loads(x) for x in lines]
    assert [(r["state_key"], r["item_index"]) for r in rows[:6]] == [("memory:_hash", 0)] + [
        ("memory", i) for i in range(5)]
    imported, raw = target
    imported.save_list(USER, "s1", "memory", ["old0", "old1", "old2", "old3"])
    before = raw.all_rows()
    for cut in range(1, 6):  # the hash row and items 0..cut-2
        for mode in ("skip", "replace"):
            with pytest.raises(ValueError, match="key 'memory' of session 'alice:s1' is not whole") as err:
                imported.import_rows(lines[:cut], on_conflict=mode)
            assert "its hash row says 5 items, the import holds" in str(err.value)
            assert raw.all_rows() == before
    at = [(r["state_key"], r["item_index"]) for r in rows].index(("one:_hash", 0))
    assert [(r["state_key"], r["item_index"]) for r in rows[at:at + 2]] == [("one:_hash", 0), ("one", 0)]
    with pytest.raises(ValueError, match="key 'one' of session 'alice:s1' is not whole"):
        imported.import_rows(lines[:at + 1], on_conflict="replace")  # a one-item list cut after its hash row
    assert raw.all_rows() == before
    missing = lines[:3] + lines[4:]  # the hash row says 5, item 2 is gone
    with pytest.raises(ValueError, match="its hash row says 5 items, the import holds items \\[0, 1, 3, 4\\]"):
        imported.import_rows(missing, on_conflict="replace")
    assert raw.all_rows() == before
    assert imported.import_rows(lines, on_conflict="replace") > 0  # whole: it imports
    assert imported.get_list(USER, "s1", "memory") == ["m0", "m1", "m2", "m3", "m4"]
    imported.save_list(USER, "s1", "memory", ["old0", "old1", "old2", "old3"])
    assert imported.get_list(USER, "s1", "memory") == ["old0", "old1", "old2", "old3"]
    assert imported.import_rows(lines, on_conflict="replace") > 0  # the whole file: the list whole
    assert imported.get_list(USER, "s1", "memory") == ["m0", "m1", "m2", "m3", "m4"]


def test_a_java_list_and_an_empty_list_import_whole(url, store, target) -> None:
    """A list under another writer's hash row (the Java store's: no count in it) must have no gap;
    an empty list is its hash row alone."""
    lines = export_of(store, 3)
    good = orjson.loads(next(x for x in lines if orjson.loads(x)["state_key"] == "v"))
    java = [dict(good, state_key="jlist", item_index=i, state_data=f'"j{i}"') for i in range(3)]
    java.append(dict(good, state_key="jlist:_hash", state_data="3f2a9c"))
    store.save_list(USER, "s2", "empty", [])
    empty = [x for x in store.export(USER, ["s2"]) if orjson.loads(x)["state_key"] == "empty:_hash"]
    imported, raw = target
    assert imported.import_rows(lines + [orjson.dumps(r).decode() for r in java] + empty) == len(lines) + 5
    assert imported.get_list(USER, "s2", "jlist") == ["j0", "j1", "j2"]
    assert imported.get_list(USER, "s2", "empty") == []
    gap = [orjson.dumps(r).decode() for r in java if r["item_index"] != 1 or r["state_key"] != "jlist"]
    with fresh_target(url) as (other, oraw):
        with pytest.raises(ValueError, match="key 'jlist' of session 'alice:s2' is not whole.*a gap"):
            other.import_rows(lines + gap)
        assert oraw.all_rows() == []


@pytest.mark.parametrize("lines", [[5], [None], [{"session_id": "u:s"}], None, 7])
def test_import_lines_that_are_not_text_are_a_type_error_naming_them(store, target, lines) -> None:
    good = export_of(store, 2)
    imported, raw = target
    given = good + lines if isinstance(lines, list) else lines
    with pytest.raises(TypeError) as err:
        imported.import_rows(given)
    said = str(err.value)
    assert (f"line {len(good) + 1} is a {type(lines[0]).__name__}" in said if isinstance(lines, list)
            else f"got {type(lines).__name__}" in said), said
    assert raw.all_rows() == []


def test_a_compressed_or_binary_backup_is_refused_naming_the_line_and_the_rule(store, target, tmp_path) -> None:
    """A gzipped export given to import_rows raised a bare UnicodeDecodeError naming neither the
    line nor the rule (a standards audit; from a file opened in text mode too): a ValueError
    naming the line, saying an export is UTF-8 JSON lines to decompress first; nothing written,
    whether the lines are bytes, a text file, or str holding the escaped bytes of a binary
    stdin; and after gunzip the same file imports."""
    import gzip

    good = export_of(store, 3)
    plain = tmp_path / "rows.jsonl"
    plain.write_text("".join(line + "\n" for line in good), encoding="utf-8")
    packed = tmp_path / "rows.jsonl.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    imported, raw = target
    escaped = packed.read_bytes().decode("utf-8", "surrogateescape").splitlines(keepends=True)
    middle = good[:2] + [b"\xff\xfe not text\n"] + good[2:]  # a bad line after good ones
    for given, line in ((open(packed, "rb"), 1), (open(packed, encoding="utf-8"), 1), (escaped, 1), (middle, 3)):
        with pytest.raises(ValueError, match=f"import: line {line} is not UTF-8 text: an export is UTF-8 JSON lines"
                                             ".*decompressed first.*nothing was imported"):
            imported.import_rows(given)
        if hasattr(given, "close"):
            given.close()
    assert raw.all_rows() == []
    with gzip.open(packed, "rt", encoding="utf-8") as unpacked:
        assert imported.import_rows(unpacked) == len(good)


# ---- 17: session ids need their user ---------------------------------------------------------

def test_export_of_sessions_without_a_user_is_refused(store) -> None:
    store.save(None, "s1", "k", "anonymous")
    store.save(USER, "s1", "k", "alice's")
    with pytest.raises(ValueError, match="user_id"):
        store.export(sessions=["s1"])
    anon = [orjson.loads(x) for x in store.export(None, sessions=["s1"])]
    assert {(r["session_id"], r["state_key"]) for r in anon} == {  # its row and its catalog row
        (keys.pack(None, "s1"), "k"), (keys.CATALOG_SESSION, keys.pack(None, "s1"))}


def test_a_skip_import_beside_a_writer_creating_the_key_never_mixes_their_rows(url, store, target) -> None:
    """The "skip" lookup is a plain read: a key another writer was creating (not committed yet)
    looked absent, the import's INSERT waited for that writer, kept its rows and added the
    export's others: one list of two writers' rows, unreadable (audit of 2026-12-07). Now the
    import fails whole (ConflictError, nothing written) and, run again, leaves that key as is."""
    import threading

    from mysql_state.errors import ConflictError

    store.save_list(USER, "chat", "memory", [{"from": "backup", "i": i} for i in range(6)])
    backup = list(store.export(USER, ["chat"]))
    imported, raw = target
    writer = MysqlAgentStateStore.from_url(url, database_name=raw.database)
    begun = threading.Event()

    def live(tx) -> None:
        tx.save_list(USER, "chat", "memory", [{"from": "live", "i": i} for i in range(2)])
        begun.set()
        time.sleep(1.5)  # a transaction still open while the import runs

    t = threading.Thread(target=lambda: writer.transaction(live))
    t.start()
    try:
        assert begun.wait(10)
        with pytest.raises(ConflictError, match="nothing was imported"):
            imported.import_rows(backup, on_conflict="skip")
    finally:
        t.join()
        writer.close()
    assert imported.get_list(USER, "chat", "memory") == [{"from": "live", "i": 0}, {"from": "live", "i": 1}]
    assert len(key_rows(raw, USER, "chat", "memory")) == 3  # the writer's two items and its hash row
    imported.import_rows(backup, on_conflict="skip")  # again: the key exists, left as it is
    assert imported.get_list(USER, "chat", "memory") == [{"from": "live", "i": 0}, {"from": "live", "i": 1}]


def test_fractions_of_a_second_are_cut_not_rounded_so_a_file_imports_the_same_everywhere(store, target) -> None:
    """The columns keep whole seconds. MariaDB cuts a fraction, MySQL rounds it (23:59:59.6
    would become the next day): the import cuts it before binding, so the row it sends is the
    one MariaDB stores and MySQL stores the same. Plain SQL shows the stored times."""
    from mysql_state import transfer

    good = orjson.loads(next(x for x in export_of(store, 1) if orjson.loads(x)["state_key"] == "v"))
    line = orjson.dumps(dict(good, created_at="2026-01-01T23:59:59.600000",
                             updated_at="2026-12-31T23:59:59.999999")).decode()
    parsed = transfer.parse(line, 1)
    assert [w.isoformat() for w in parsed[5:]] == ["2026-01-01T23:59:59", "2026-12-31T23:59:59"]
    imported, raw = target
    assert imported.import_rows([line]) == 1
    assert raw.query("SELECT created_at, updated_at FROM {t} WHERE state_key = 'v'") == [
        (dt.datetime(2026, 1, 1, 23, 59, 59), dt.datetime(2026, 12, 31, 23, 59, 59))]


def test_an_export_of_damaged_keys_warns_naming_them_and_still_holds_every_row(store, raw, target) -> None:
    """An export of a table holding damaged lists streamed them with no word, and the backup
    was found unusable only when import_rows refused it whole (an operator audit). The rows
    still go out as they are; once the last line is read, a DamagedExportWarning names each
    damaged key (`.keys`: session, key, why), the ones import_rows refuses; a healthy export
    says nothing."""
    import warnings

    from mysql_state import DamagedExportWarning, MysqlStateWarning

    store.save_list(USER, "s1", "memory", ["m0", "m1", "m2", "m3"])  # loses a middle row
    store.save_list(USER, "s1", "notes", ["n0", "n1"])  # loses item 0
    store.save_list(USER, "s2", "memory", ["a", "b"])  # healthy
    store.save(USER, "s2", "plan", {"step": 1})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        healthy = list(store.export(USER))  # nothing to say
    raw.execute("DELETE FROM {t} WHERE session_id = 'alice:s1' AND state_key = 'memory' AND item_index = 2")
    raw.execute("DELETE FROM {t} WHERE session_id = 'alice:s1' AND state_key = 'notes' AND item_index = 0")
    with pytest.warns(DamagedExportWarning) as got:
        lines = list(store.export(USER))
    assert len(got) == 1 and issubclass(got[0].category, MysqlStateWarning) and got[0].filename == __file__
    with warnings.catch_warnings(record=True) as again:
        warnings.simplefilter("always")
        for _ in range(2):
            stream = store.export(USER)
            assert list(stream) == lines and [k for _, k, _ in stream.damaged] == ["memory", "notes"]
            assert next(stream, None) is None  # read past its end: said once
    assert [w.filename for w in again] == [__file__, __file__] and again[0].lineno == again[1].lineno
    found = got[0].message.keys
    assert [(sid, k) for sid, k, _ in found] == [("alice:s1", "memory"), ("alice:s1", "notes")]
    assert "its hash row says 4 items, the export holds" in found[0][2]
    assert "2 key(s) are damaged" in str(got[0].message) and "'notes'" in str(got[0].message)
    exported = sorted((r["session_id"], r["state_key"], r["item_index"]) for r in map(orjson.loads, lines))
    in_table = sorted(raw.query("SELECT session_id, state_key, item_index FROM {t} WHERE session_id LIKE 'alice:%%'"
                                " OR (session_id = '__catalog__' AND state_key LIKE 'alice:%%')"))
    assert exported == in_table and len(lines) == len(healthy) - 2  # every row, as it is
    imported, _ = target
    with pytest.raises(ValueError, match="key 'memory' of session 'alice:s1' is not whole"):
        imported.import_rows(lines)


def test_an_export_names_rows_the_import_refuses_and_holds_only_keys_without_row_0(store, raw) -> None:
    """The export's check was the import's key rule only: a row the import refuses line by
    line (an index below 0, a value that is not JSON) went out unnamed, and the import then
    refused the file (found by a review). It now applies the import's line rules too. And it
    judges a key as soon as the next key starts when its row 0 was met, so an export holds
    the current key and the keys without row 0, not every key of a session."""
    from mysql_state import DamagedExportWarning
    from mysql_state.transfer import TornKeys

    store.save_list(USER, "s1", "memory", ["m0", "m1"])
    store.save(USER, "s1", "plan", {"step": 1})
    store.save(USER, "s1", "summary", {"text": "ok"})
    raw.execute("INSERT INTO {t} (session_id, state_key, item_index, state_data, version) VALUES"
                " ('alice:s1', 'memory', -1, '\"stray\"', 1)")
    raw.execute("UPDATE {t} SET state_data = '{not json' WHERE session_id = 'alice:s1' AND state_key = 'plan'")
    with pytest.warns(DamagedExportWarning) as got:
        lines = list(store.export(USER))
    found = {(sid, k): why for sid, k, why in got[0].message.keys}
    assert set(found) == {("alice:s1", "memory"), ("alice:s1", "plan")}, found
    assert "item_index -1 is outside" in found[("alice:s1", "memory")]
    assert "is not JSON" in found[("alice:s1", "plan")]
    assert len(lines) == raw.query("SELECT COUNT(*) FROM {t} WHERE session_id = 'alice:s1'"
                                   " OR (session_id = '__catalog__' AND state_key = 'alice:s1')")[0][0]
    check = TornKeys()  # 10 000 whole keys of one session: none held once the next one starts
    for i in range(10_000):
        check.add("u:s", f"k{i:05d}", 0, "{}")
        assert len(check.held) == 1
    check.add("u:s", "late", 1, "{}")  # no row 0: held to the session's end
    check.add("u:s", "z", 0, "{}")
    assert set(check.held) == {"late", "z"}
    assert [(k, why) for _, k, why in check.finish()] == [("late", "it holds items [1]... and no hash row")]
