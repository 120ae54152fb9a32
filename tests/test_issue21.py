"""Issue 21: the production paths at their round-trip limits, and exact whatever happens between
a read and the write it guides.

Statements are counted by the server (``Questions``). Every guess this process keeps (the hash
row a read saw, the value row a read saw, "another worker writes this list") is checked by the
write it guides, under the row's lock: a stale guess costs a fallback, never a wrong row. The
rows are checked with plain SQL after every race (``check_list_rows``: items 0..n-1 and a hash
row that describes exactly them)."""

from __future__ import annotations

import hashlib

import orjson
import pytest

from mysql_state import MysqlAgentStateStore, listsync
from mysql_state.listsync import HASH_FORMAT, digests

from .conftest import Raw
from .test_cold_saves import msg
from .test_faults import check_list_rows


@pytest.fixture
def other(url, database, store):
    """A second worker: a store object of its own (own pools, own caches), connections open."""
    s = MysqlAgentStateStore.from_url(url, database_name=database)
    s.save("u", "warm-up", "x", 1)
    s.exists("u", "warm-up")
    yield s
    s.close()


def hash_row(raw: Raw, key: str = "m", sid: str = "u:s") -> dict:
    return orjson.loads(raw.query("SELECT state_data FROM {t} WHERE session_id=%s AND state_key=%s",
                                  (sid, key + ":_hash"))[0][0])


# ---- two workers taking turns ----------------------------------------------------------------


def test_two_workers_alternating_save_in_two_statements(store, other, raw):
    """Each save is the next turn by the worker that did not save the one before, with no read
    in between: its one statement is accepted when the stored hash row describes its own last
    list or that list followed by the other worker's turn (n and digest sum), so it writes only
    its own new items: the write and the COMMIT, like the warm path."""
    items = [msg(i) for i in range(300)]
    store.save("u", "s", "x", 1)
    store.save_list("u", "s", "m", items)
    counts, written = [], []
    for turn in range(8):
        items = items + [msg(300 + 2 * turn), msg(301 + 2 * turn)]
        worker = (other, store)[turn % 2]
        plan, n = raw.statements(lambda: worker.save_list_report("u", "s", "m", items))
        counts.append(n)
        written.append((plan.kind, list(plan.indexes)))
        assert check_list_rows(raw, "u:s", "m") == items
    assert counts == [3] + [2] * 7, counts  # other never saw it (3): then always 2
    assert written == [("append", [300 + 2 * t, 301 + 2 * t]) for t in range(8)]  # only its own turn
    assert hash_row(raw)["n"] == 316
    version = raw.query("SELECT version FROM {t} WHERE session_id='u:s' AND state_key='m:_hash'")[0][0]
    assert version == 9  # one per save


def test_a_worker_back_in_turn_writes_only_its_own_items(store, other, raw):
    items = [msg(i) for i in range(50)]
    store.save_list("u", "s", "m", items)
    items = items + [msg(50)]
    other.save_list("u", "s", "m", items)
    theirs = raw.query("SELECT state_data, updated_at FROM {t} WHERE session_id='u:s' AND state_key='m' AND item_index=50")
    items = items + [msg(51)]
    plan, n = raw.statements(lambda: store.save_list_report("u", "s", "m", items))
    assert n == 2 and list(plan.indexes) == [51]
    assert raw.query("SELECT state_data, updated_at FROM {t} WHERE session_id='u:s' AND state_key='m'"
                     " AND item_index=50") == theirs  # the other worker's row is left as it was stored
    items = items + [msg(52)]
    assert raw.statements(lambda: store.save_list("u", "s", "m", items))[1] == 2  # warm
    assert check_list_rows(raw, "u:s", "m") == items


def test_a_worker_whose_list_diverged_goes_the_locked_way_then_speculates_again(store, other, raw):
    """The other worker edited an item this worker's list does not have: the one statement is
    refused by the stored hash row (the statement, its undo), the locked save (lock, read the
    stored items after the checkpoint, where the edit is; write, COMMIT) writes exactly this
    worker's list (last writer wins); the next save goes the locked way at once (3) and finds
    its own row: warm again (2)."""
    items = [msg(i) for i in range(200)]
    store.save_list("u", "s", "m", items)
    edited = list(items)
    edited[150] = msg(150, "edited by the other worker")
    other.save_list("u", "s", "m", edited + [msg(200)])
    counts = []
    for turn in range(3):
        items = items + [msg(300 + turn)]
        counts.append(raw.statements(lambda: store.save_list("u", "s", "m", items))[1])
        assert check_list_rows(raw, "u:s", "m") == items
    assert counts == [6, 3, 2], counts


def test_a_worker_far_behind_checks_the_checkpoint_from_what_it_hashed(store, other, raw, monkeypatch):
    """More items of its own than one statement accepts stored states for (``sql.MAX_PICKS``)
    after the other worker's turn: refused, then the locked way, which checks the stored
    checkpoint by extending the hasher state this worker kept, not by hashing the prefix."""
    from mysql_state import sql

    seeded = []
    real = listsync.seed_of

    def counting(*a):
        got = real(*a)
        seeded.append(got is not None)
        return got

    monkeypatch.setattr(listsync, "seed_of", counting)
    items = [msg(i) for i in range(300)]
    store.save_list("u", "s", "m", items)
    items = items + [msg(300), msg(301)]
    other.save_list("u", "s", "m", items)
    items = items + [msg(400 + i) for i in range(sql.MAX_PICKS + 2)]
    assert raw.statements(lambda: store.save_list("u", "s", "m", items))[1] == 5
    assert seeded == [True]
    assert check_list_rows(raw, "u:s", "m") == items


@pytest.mark.parametrize("how", ["alternating save", "warm save", "append_list"])
def test_a_stray_row_where_a_new_item_goes_is_never_taken_for_it(store, other, raw, how):
    """A row left at the index a new item takes (written by hand, or by another program) is
    written over by the one-statement save or append, never kept and read back as the item
    (it was, on the warm paths, before)."""
    items = [msg(i) for i in range(10)]
    store.save_list("u", "s", "m", items)
    if how == "alternating save":
        items = items + [msg(10)]
        other.save_list("u", "s", "m", items)
    at = len(items)
    raw.execute("INSERT INTO {t} (session_id, state_key, item_index, state_data, version)"
                " VALUES ('u:s', 'm', %s, '\"stray\"', 1)", (at,))
    if how == "append_list":
        store.append_list("u", "s", "m", [msg(at)])
        items = items + [msg(at)]
    else:
        items = items + [msg(at)]
        assert raw.statements(lambda: store.save_list("u", "s", "m", items))[1] == 2
    assert check_list_rows(raw, "u:s", "m") == items
    assert store.get_list("u", "s", "m") == items


def test_a_worker_that_read_the_list_saves_in_two_statements(store, other, raw):
    """A read since this worker's last write (an agent loads its conversation, then saves the
    turn) is planned against and conditioned on: one statement and the COMMIT."""
    items = [msg(i) for i in range(200)]
    store.save_list("u", "s", "m", items)
    for turn in range(4):
        worker = (other, store)[turn % 2]
        read, _ = raw.statements(lambda: worker.get_list("u", "s", "m"))
        assert read == items
        items = items + [msg(200 + turn)]
        plan, n = raw.statements(lambda: worker.save_list_report("u", "s", "m", items))
        assert n == 2 and plan.kind == "append"
        assert check_list_rows(raw, "u:s", "m") == items


# ---- a guess made stale between the read and the write ---------------------------------------


def _stale_by(kind: str, store, raw: Raw, items: list) -> list:
    """Change the list behind the reader's back; what the list is afterwards."""
    if kind == "append":
        store.append_list("u", "s", "m", [msg(900)])
        return items + [msg(900)]
    if kind == "pop":
        store.pop_list("u", "s", "m")
        return items[:-1]
    if kind == "edit":
        changed = list(items)
        changed[3] = msg(3, "edited by the other worker")
        store.save_list("u", "s", "m", changed)
        return changed
    if kind == "value":  # the key now holds a single value
        store.save("u", "s", "m", {"a": "value"})
        return []
    if kind == "java":  # the Java store rewrites the hash row in its own format, version unchanged
        raw.execute("UPDATE {t} SET state_data=%s WHERE session_id='u:s' AND state_key='m:_hash'",
                    ('{"java":"hash"}',))
        return items
    if kind == "deleted":
        store.delete("u", "s", "m")
        return []
    raise AssertionError(kind)


@pytest.mark.parametrize("guess", ["read", "snapshot"])
@pytest.mark.parametrize("kind", ["append", "pop", "edit", "value", "java", "deleted"])
def test_a_save_guided_by_a_stale_guess_is_still_exact(store, other, raw, kind, guess):
    """The other worker's guess is the hash row it read (``read``) or the list it saved last,
    with no read in between (``snapshot``); the list changed behind its back since."""
    items = [msg(i) for i in range(40)]
    if guess == "read":
        store.save_list("u", "s", "m", items)
        assert other.get_list("u", "s", "m") == items  # the other worker's guess: this hash row
    else:
        other.save_list("u", "s", "m", items)
    _stale_by(kind, store, raw, items)
    mine = items + [msg(40), msg(41)]
    other.save_list("u", "s", "m", mine)  # last writer wins: exactly its list
    assert check_list_rows(raw, "u:s", "m") == mine
    assert other.get_list("u", "s", "m") == mine == store.get_list("u", "s", "m")


# ---- the AgentScope turn's value row ---------------------------------------------------------


def test_a_value_read_by_get_many_is_written_in_one_statement(store, other, raw):
    store.save_many("u", "s", values={"state": {"n": 0}}, lists={"m": [msg(0)]})
    for turn in range(4):
        worker = (other, store)[turn % 2]
        found = worker.get_many("u", "s", values=["state"], lists=["m"], versioned=True)
        assert found["state"].value == {"n": turn}
        saved, n = raw.statements(lambda: worker.save_many("u", "s", values={"state": {"n": turn + 1}}))
        assert n == 2 and saved.versions["state"] == found["state"].version + 1  # the write, COMMIT
    rows = raw.query("SELECT state_data, version FROM {t} WHERE session_id='u:s' AND state_key='state'")
    assert [(orjson.loads(rows[0][0]), rows[0][1])] == [({"n": 4}, 5)]


def _value_stale_by(kind: str, store, raw: Raw) -> None:
    if kind == "java":  # a Java store release before its version column: row 0 written, the version not moved
        raw.execute("UPDATE {t} SET state_data='\"from java\"' WHERE session_id='u:s' AND state_key='state'")
    elif kind == "saved":
        store.save("u", "s", "state", {"by": "the other worker"})
    elif kind == "deleted":
        store.delete("u", "s", "state")
    elif kind == "empty list":  # deleted, then an empty list under the key (a hash row, no row 0)
        store.delete("u", "s", "state")
        store.save_list("u", "s", "state", [])
    elif kind == "list":
        store.save_list("u", "s", "state", [msg(0), msg(1), msg(2)])
    else:
        raise AssertionError(kind)


@pytest.mark.parametrize("kind", ["java", "saved", "deleted", "empty list", "list"])
def test_a_value_guided_by_a_stale_read_is_still_exact(store, other, raw, kind):
    store.save("u", "s", "state", {"n": 0})
    seen = other.get_many("u", "s", values=["state"], versioned=True)["state"]  # the guess: (1, its digest)
    assert (seen.value, seen.version) == ({"n": 0}, 1)
    _value_stale_by(kind, store, raw)
    before = max([r[0] for r in raw.query(
        "SELECT GREATEST(version, 1) FROM {t} WHERE session_id='u:s' AND state_key IN ('state', 'state:_hash')"
        " AND item_index = 0")] or [0])
    saved = other.save_many("u", "s", values={"state": {"n": 1}})
    rows = raw.query("SELECT state_key, item_index, state_data, version FROM {t}"
                     " WHERE session_id='u:s' AND state_key LIKE 'state%%' ORDER BY state_key, item_index")
    assert [(r[0], r[1], orjson.loads(r[2])) for r in rows] == [("state", 0, {"n": 1})]  # nothing of a list left
    assert rows[0][3] == saved.versions["state"] == before + 1  # one past what it replaced
    assert store.get("u", "s", "state") == {"n": 1}


def test_save_many_with_expected_version_from_get_many_is_one_statement_or_stale(store, other, raw):
    store.save("u", "s", "state", {"n": 0})
    seen = other.get_many("u", "s", values=["state"], versioned=True)["state"]
    _, n = raw.statements(lambda: other.save_many("u", "s", values={"state": {"n": 1}},
                                                   expected_versions={"state": seen.version}))
    assert n == 2
    from mysql_state import StaleStateError

    store.save("u", "s", "state", {"n": "theirs"})
    with pytest.raises(StaleStateError):
        other.save_many("u", "s", values={"state": {"n": 2}}, expected_versions={"state": seen.version + 1})
    assert store.get("u", "s", "state") == {"n": "theirs"}


# ---- the hash row format: v3 written, v2 read and upgraded ------------------------------------


def _v2_text(items: list) -> str:
    datas = [orjson.dumps(x) for x in items]
    p = len(datas) - 1
    prefix = b",".join(datas[:p])
    return orjson.dumps({"fmt": "mysql-state/list-v2", "n": len(datas), "sum": format(sum(digests(datas)) % (1 << 128), "032x"),
                         "p": p, "plen": len(prefix), "ph": hashlib.sha256(prefix).hexdigest(),
                         "psum": format(sum(digests(datas[:p])) % (1 << 128), "032x")}).decode()


@pytest.mark.parametrize("then", ["save_list", "append_list", "unchanged save"])
def test_a_v2_hash_row_is_read_then_written_as_v3(store, other, raw, url, database, then):
    """A row the previous release wrote (SHA-256 checkpoint) is checked with SHA-256 by a
    process that never saw the list, and the write that follows makes it v3."""
    items = [msg(i) for i in range(30)]
    store.save_list("u", "s", "m", items)
    raw.execute("UPDATE {t} SET state_data=%s WHERE state_key='m:_hash'", (_v2_text(items),))
    if then == "save_list":
        items = items + [msg(30)]
        plan = other.save_list_report("u", "s", "m", items)
        assert (plan.kind, list(plan.indexes)) == ("append", [30])  # the v2 checkpoint held
    elif then == "append_list":
        other.get_list("u", "s", "m")
        other.append_list("u", "s", "m", [msg(30)])
        items = items + [msg(30)]
    else:
        other.save_list("u", "s", "m", items)
    row = hash_row(raw)
    assert row["fmt"] == HASH_FORMAT == "mysql-state/list-v3"
    assert check_list_rows(raw, "u:s", "m") == items
    more = items + [msg(99)]
    third = MysqlAgentStateStore.from_url(url, database_name=database)  # never saw it: trusts the v3 row
    try:
        assert third.save_list_report("u", "s", "m", more).kind == "append"
    finally:
        third.close()
    assert check_list_rows(raw, "u:s", "m") == more


# ---- encrypted whole-list reads: the server decodes the base64 -----------------------------------


def test_an_encrypted_list_reads_plain_rows_old_keys_and_the_current_one(url, database, store, raw):
    import os

    from mysql_state import Keyring

    k1, k2 = os.urandom(32), os.urandom(32)
    store.save_list("u", "s", "m", [msg(0), msg(1)])  # plain rows, from before encryption
    one = MysqlAgentStateStore.from_url(url, database_name=database, encryption=Keyring({"k1": k1}, current="k1"))
    two = MysqlAgentStateStore.from_url(url, database_name=database,
                                        encryption=Keyring({"k2": k2, "k1": k1}, current="k2"))
    try:
        one.append_list("u", "s", "m", [msg(2), msg(3)])
        two.append_list("u", "s", "m", [msg(4)])
        rows = raw.query("SELECT item_index, LEFT(state_data, 10) FROM {t} WHERE state_key='m' ORDER BY item_index")
        assert [r[1].startswith("\x1eenc1:k2:") for r in rows] == [False, False, False, False, True]
        assert two.get_list("u", "s", "m") == [msg(i) for i in range(5)]
        assert two.get_list_versioned("u", "s", "m").version == hash_row_version(raw)
    finally:
        one.close()
        two.close()


def hash_row_version(raw: Raw) -> int:
    return raw.query("SELECT version FROM {t} WHERE session_id='u:s' AND state_key='m:_hash'")[0][0]


@pytest.mark.parametrize("damage", ["ciphertext", "truncated", "moved"])
def test_a_damaged_sealed_row_in_a_whole_list_read_is_a_decryption_error(url, database, store, raw, damage):
    import os

    from mysql_state import DecryptionError, Keyring

    ring = Keyring({"k1": os.urandom(32)}, current="k1")
    enc = MysqlAgentStateStore.from_url(url, database_name=database, encryption=ring)
    try:
        enc.save_list("u", "s", "m", [msg(i) for i in range(5)])
        text = raw.query("SELECT state_data FROM {t} WHERE state_key='m' AND item_index=2")[0][0]
        if damage == "ciphertext":
            body = text[len("\x1eenc1:k1:"):]
            flipped = body[:20] + ("A" if body[20] != "A" else "B") + body[21:]
            raw.execute("UPDATE {t} SET state_data=%s WHERE state_key='m' AND item_index=2", ("\x1eenc1:k1:" + flipped,))
        elif damage == "truncated":
            raw.execute("UPDATE {t} SET state_data=%s WHERE state_key='m' AND item_index=2", (text[:-8],))
        else:  # item 3's row copied to index 2: bound to its place, it does not open there
            three = raw.query("SELECT state_data FROM {t} WHERE state_key='m' AND item_index=3")[0][0]
            raw.execute("UPDATE {t} SET state_data=%s WHERE state_key='m' AND item_index=2", (three,))
        fresh = MysqlAgentStateStore.from_url(url, database_name=database, encryption=ring)
        try:
            with pytest.raises(DecryptionError) as info:
                fresh.get_list("u", "s", "m")
            assert (info.value.session_id, info.value.key, info.value.index) == ("u:s", "m", 2)
        finally:
            fresh.close()
    finally:
        enc.close()


# ---- whole-list reads in both shapes check the rows against the hash row -----------------------


@pytest.mark.parametrize("n", [5, 300])
def test_a_whole_read_of_a_short_or_long_list_finds_a_missing_row(store, raw, n):
    """A list known to be long is read in the one-column shape (the hash row marked with the
    lowest and highest index), a short one with the index column: either finds a row gone."""
    from mysql_state import CorruptStateError

    items = [msg(i) for i in range(n)]
    store.save_list("u", "s", "m", items)
    assert store.get_list("u", "s", "m") == items  # (the length is now known)
    assert store.get_list("u", "s", "m", offset=1, limit=2) == items[1:3]  # a window: its own shape
    assert store.get_list("u", "s", "m", offset=-2) == items[-2:]
    assert store.get_list_versioned("u", "s", "m").version == hash_row_version(raw)
    raw.execute("DELETE FROM {t} WHERE state_key='m' AND item_index=%s", (n // 2,))
    with pytest.raises(CorruptStateError):
        store.get_list("u", "s", "m")
    raw.execute("DELETE FROM {t} WHERE state_key='m:_hash'")  # no hash row: still not 0..n-1
    for read in (lambda: store.get_list("u", "s", "m"), lambda: store.get_many("u", "s", lists=["m"]),
                 lambda: store.get_many("u", "s", lists=["z", "m"]), lambda: store.get_list("u", "s", "m", offset=1)):
        with pytest.raises(CorruptStateError, match="no hash row"):
            read()
    raw.execute("UPDATE {t} SET item_index = item_index - 1 WHERE state_key='m' AND item_index > %s"
                " ORDER BY item_index", (n // 2,))  # the rows renumbered 0..n-2: a list again
    rest = items[: n // 2] + items[n // 2 + 1:]
    assert store.get_list("u", "s", "m") == rest == store.get_many("u", "s", lists=["z", "m"])["m"]


LONG = 300
WINDOWS = [(0, 300), (0, 200), (50, 200), (150, None), (250, 100), (299, 500), (300, 200), (400, 200), (1, None)]


@pytest.mark.parametrize("offset,limit", WINDOWS)
@pytest.mark.parametrize("who", ["the writer", "another process"])
def test_a_long_window_reads_exactly_its_items_in_one_statement(store, other, raw, offset, limit, who):
    """A window of more than list_read.SHORT_WINDOW items (as far as the length last seen, or the
    limit, tells) is read in the one-column shape: the same items as the indexed shape, one
    statement, from the process that wrote the list and from one that never saw it."""
    items = [msg(i) for i in range(LONG)]
    store.save_list("u", "s", "m", items)
    reader = store if who == "the writer" else other
    reader.exists("u", "warm-up")  # its read pool's connection open
    got, count = raw.statements(lambda: reader.get_list("u", "s", "m", offset=offset, limit=limit))
    assert got == items[offset:None if limit is None else offset + limit]
    assert count == 1


TAILS = [(-33, None), (-40, None), (-40, 5), (-299, None), (-300, 2), (-301, None), (-1000, None)]


@pytest.mark.parametrize("offset,limit", TAILS)
@pytest.mark.parametrize("who", ["the writer", "another process"])
def test_a_tail_reads_exactly_its_items_in_one_statement(store, other, raw, offset, limit, who):
    """A tail of more than list_read.SHORT_WINDOW items is read in the one-column shape (the
    items above the list's highest index minus the count): the same items, one statement."""
    items = [msg(i) for i in range(LONG)]
    store.save_list("u", "s", "m", items)
    reader = store if who == "the writer" else other
    reader.exists("u", "warm-up")
    got, count = raw.statements(lambda: reader.get_list("u", "s", "m", offset=offset, limit=limit))
    want = items[max(0, LONG + offset):]
    assert got == (want if limit is None else want[:limit])
    assert count == 1


@pytest.mark.parametrize("damage", ["a row inside", "a stray row past the end", "a negative index", "no hash row"])
def test_a_long_tail_over_damage_is_read_again_with_the_indexes(store, raw, damage):
    """As for windows: what the one-column tail cannot prove is read again with the indexes."""
    from mysql_state import CorruptStateError

    items = [msg(i) for i in range(LONG)]
    store.save_list("u", "s", "m", items)
    store.get_list("u", "s", "m")
    if damage == "a row inside":
        raw.execute("DELETE FROM {t} WHERE state_key='m' AND item_index=290")
        with pytest.raises(CorruptStateError):
            store.get_list("u", "s", "m", offset=-40)
    elif damage == "no hash row":  # a list as the Java store leaves it
        raw.execute("DELETE FROM {t} WHERE state_key='m:_hash'")
        assert raw.statements(lambda: store.get_list("u", "s", "m", offset=-40)) == (items[-40:], 2)
    else:
        index = 310 if damage == "a stray row past the end" else -1
        raw.execute("INSERT INTO {t} (session_id, state_key, item_index, state_data, version)"
                    " VALUES ('u:s', 'm', %s, '1', 1)", (index,))
        if index > 0:
            with pytest.raises(CorruptStateError):
                store.get_list("u", "s", "m", offset=-40)
        else:  # below the tail, which proves itself; a tail longer than the list takes it in
            assert raw.statements(lambda: store.get_list("u", "s", "m", offset=-40)) == (items[-40:], 1)
            with pytest.raises(CorruptStateError):
                store.get_list("u", "s", "m", offset=-400)


@pytest.mark.parametrize("damage", ["a row inside", "a stray row past the end", "no hash row"])
def test_a_long_window_over_damage_is_read_again_with_the_indexes(store, raw, damage):
    """The one-column window proves its rows by their count, the hash row's length and the
    list's highest index; when they do not prove it, the window is read again with the indexes
    (a second statement, which is how this test sees that the one-column shape ran), and that
    read says what it always said: the damage, or the items of a list without a hash row."""
    from mysql_state import CorruptStateError

    items = [msg(i) for i in range(LONG)]
    store.save_list("u", "s", "m", items)
    store.get_list("u", "s", "m")  # the length is known (windows are long by it), connections open
    if damage == "a row inside":
        raw.execute("DELETE FROM {t} WHERE state_key='m' AND item_index=120")
        with pytest.raises(CorruptStateError):
            store.get_list("u", "s", "m", offset=0, limit=200)
        assert raw.statements(lambda: store.get_list("u", "s", "m", offset=130, limit=170))[1] == 1
    elif damage == "a stray row past the end":
        raw.execute("INSERT INTO {t} (session_id, state_key, item_index, state_data, version)"
                    " VALUES ('u:s', 'm', 310, '\"stray\"', 1)")
        with pytest.raises(CorruptStateError):
            store.get_list("u", "s", "m", offset=100, limit=300)  # the stray row is in the window
        got, count = raw.statements(lambda: store.get_list("u", "s", "m", offset=0, limit=200))
        assert got == items[:200] and count == 1  # outside a window that ends before n: no doubt
        got, count = raw.statements(lambda: store.get_list("u", "s", "m", offset=250, limit=50))
        assert got == items[250:] and count == 1
        with pytest.raises(CorruptStateError):
            store.get_list("u", "s", "m", offset=150)  # to the end: the stray row is in it
    else:
        raw.execute("DELETE FROM {t} WHERE state_key='m:_hash'")  # a list as the Java store leaves it
        got, count = raw.statements(lambda: store.get_list("u", "s", "m", offset=10, limit=200))
        assert got == items[10:210] and count == 2


def test_windows_and_tails_read_beside_a_writer_process_are_whole_runs(url, database, store):
    """Another process appends and trims the list while this one reads windows and tails in
    both shapes: every read is a run of consecutive items (one statement, one snapshot), and
    none is taken for damage."""
    from . import procs

    store.save_list("u", "s", "m", [{"i": j} for j in range(100)])
    with procs.appending_and_trimming(url, database) as (writer, results):
        reads = 0
        while writer.is_alive():
            for window in ({"offset": -50}, {"offset": -5}, {"offset": 0, "limit": 40}, {"offset": 10, "limit": 100}):
                got = [x["i"] for x in store.get_list("u", "s", "m", **window)]
                assert got == list(range(got[0], got[0] + len(got))), (window, got)
                reads += 1
        assert results.get(timeout=30) > 10 and reads > 100


def test_a_long_encrypted_window_opens_each_row_at_its_own_index(url, database, raw):
    """Sealed rows are bound to their index: a window or a tail read in one column opens them
    from its first index, and a row moved inside it is a DecryptionError naming its index."""
    import os

    from mysql_state import DecryptionError, Keyring

    enc = MysqlAgentStateStore.from_url(url, database_name=database,
                                        encryption=Keyring({"k1": os.urandom(32)}, current="k1"))
    try:
        items = [msg(i) for i in range(LONG)]
        enc.save_list("u", "s", "m", items)
        assert enc.get_list("u", "s", "m", offset=70, limit=200) == items[70:270]
        assert enc.get_list("u", "s", "m", offset=-200) == items[100:]
        row = raw.query("SELECT state_data FROM {t} WHERE state_key='m' AND item_index=151")[0][0]
        raw.execute("UPDATE {t} SET state_data=%s WHERE state_key='m' AND item_index=150", (row,))
        for window in ({"offset": 70, "limit": 200}, {"offset": -200}):
            with pytest.raises(DecryptionError) as info:
                enc.get_list("u", "s", "m", **window)
            assert info.value.index == 150
    finally:
        enc.close()


def test_save_many_of_two_lists_keeps_the_first_when_the_second_changed_behind_its_back(store, other, raw):
    """A missed one-statement write rolls back its transaction: only the transaction's first
    list may speculate, or the lists written before it would be lost (they were, before)."""
    store.save_many("u", "s", lists={"a": [msg(0)], "b": [msg(0)]})
    other.append_list("u", "s", "b", [msg(1)])  # b changed behind the store's back
    saved = store.save_many("u", "s", lists={"a": [msg(0), msg(1)], "b": [msg(0), msg(1), msg(2)]})
    assert check_list_rows(raw, "u:s", "a") == [msg(0), msg(1)]
    assert check_list_rows(raw, "u:s", "b") == [msg(0), msg(1), msg(2)]
    assert saved["a"].kind == "append" and store.get_list("u", "s", "a") == [msg(0), msg(1)]


# ---- the turn's value rides in the list's statement (one statement a save) --------------------


def _turn(worker, turn: int, items: list) -> tuple:
    """One AgentScope-style turn by ``worker``: load both, then save the value and the longer list."""
    found = worker.get_many("u", "s", values=["state", "plan"], lists=["m"], versioned=True)
    items = items + [msg(turn)]
    saved, n = store_raw[0].statements(lambda: worker.save_many(
        "u", "s", values={"state": {"n": turn}, "plan": [turn]}, lists={"m": items}))
    return found, saved, n, items


store_raw: list = []


def _rows_of(raw: Raw, key: str) -> list:
    return [(r[0], orjson.loads(r[1]), r[2]) for r in raw.query(
        "SELECT item_index, state_data, version FROM {t} WHERE session_id='u:s' AND state_key=%s ORDER BY item_index",
        (key,))]


def test_a_turn_by_either_worker_is_one_statement_and_the_commit_in_one_packet(store, other, raw, driver_commits):
    called = driver_commits
    store_raw[:] = [raw]
    items = [msg(0)]
    store.save_many("u", "s", values={"state": {"n": 0}, "plan": [0]}, lists={"m": items})
    for turn in range(1, 7):
        called.clear()
        found, saved, n, items = _turn((other, store)[turn % 2], turn, items)
        assert n == 2, turn  # the list's append with both values riding, and its COMMIT
        assert called == [], turn  # ... in the statement's packet
        assert saved.versions["state"] == found["state"].version + 1
        assert saved.versions["plan"] == found["plan"].version + 1
    assert _rows_of(raw, "state") == [(0, {"n": 6}, 7)] and _rows_of(raw, "plan") == [(0, [6], 7)]
    assert store.get_list("u", "s", "m") == items
    assert check_list_rows(raw, "u:s", "m") == items


@pytest.mark.parametrize("kind", ["java", "saved", "deleted", "empty list", "list"])
@pytest.mark.parametrize("which", ["state", "plan"])
def test_a_riding_value_changed_behind_its_back_undoes_the_whole_statement(store, other, raw, kind, which):
    """The list's append would hold but one value row is not what the worker saw: nothing of
    the statement stays (the list's items included), and the locked way writes it all exactly."""
    store.save_many("u", "s", values={"state": {"n": 0}, "plan": [0]}, lists={"m": [msg(0)]})
    other.get_many("u", "s", values=["state", "plan"], lists=["m"], versioned=True)
    if which == "state":
        _value_stale_by(kind, store, raw)
    else:  # the same damage on the second value
        {"java": lambda: raw.execute("UPDATE {t} SET state_data='\"from java\"' WHERE session_id='u:s'"
                                     " AND state_key='plan'"),
         "saved": lambda: store.save("u", "s", "plan", ["theirs"]),
         "deleted": lambda: store.delete("u", "s", "plan"),
         "empty list": lambda: (store.delete("u", "s", "plan"), store.save_list("u", "s", "plan", [])),
         "list": lambda: store.save_list("u", "s", "plan", [1, 2, 3])}[kind]()
    saved, n = raw.statements(lambda: other.save_many("u", "s", values={"state": {"n": 1}, "plan": [1]},
                                                       lists={"m": [msg(0), msg(1)]}))
    assert n > 2  # the one statement missed: rolled back, then the locked way
    assert _rows_of(raw, "state")[0][:2] == (0, {"n": 1}) and _rows_of(raw, "plan")[0][:2] == (0, [1])
    assert raw.query("SELECT COUNT(*) FROM {t} WHERE session_id='u:s' AND state_key IN ('state:_hash', 'plan:_hash')"
                     ) == [(0,)]  # nothing of a list left under a value
    assert store.get_list("u", "s", "m") == [msg(0), msg(1)]
    assert check_list_rows(raw, "u:s", "m") == [msg(0), msg(1)]
    assert saved.versions[which] == _rows_of(raw, which)[0][2]


def test_a_compare_and_set_with_riding_values_is_all_or_nothing(store, other, raw):
    from mysql_state import StaleStateError

    store.save_many("u", "s", values={"state": {"n": 0}}, lists={"m": [msg(0)]})
    seen = other.get_many("u", "s", values=["state"], lists=["m"], versioned=True)
    _, n = raw.statements(lambda: other.save_many("u", "s", values={"state": {"n": 1}}, lists={"m": [msg(0), msg(1)]},
                                                   expected_versions={"state": seen["state"].version}))
    assert n == 2
    store.save("u", "s", "state", {"n": "theirs"})  # version 3 now; other's guess says 2
    with pytest.raises(StaleStateError):
        other.save_many("u", "s", values={"state": {"n": 2}}, lists={"m": [msg(0), msg(1), msg(2)]},
                        expected_versions={"state": 2})
    assert store.get("u", "s", "state") == {"n": "theirs"}
    assert store.get_list("u", "s", "m") == [msg(0), msg(1)]  # the append went with the value: undone
    assert check_list_rows(raw, "u:s", "m") == [msg(0), msg(1)]


def test_values_ride_in_an_encrypted_list_statement_too(url, database, raw):
    from mysql_state import Keyring
    from mysql_state.crypto import PREFIX

    ring = Keyring({"k1": b"k" * 32}, current="k1")
    with MysqlAgentStateStore.from_url(url, database_name=database, encryption=ring) as a, \
            MysqlAgentStateStore.from_url(url, database_name=database, encryption=ring) as b:
        a.save_many("u", "s", values={"state": {"n": 0}}, lists={"m": [msg(0)]})
        items = [msg(0)]
        for turn in range(1, 5):
            w = (b, a)[turn % 2]
            w.get_many("u", "s", values=["state"], lists=["m"], versioned=True)
            items = items + [msg(turn)]
            _, n = raw.statements(lambda: w.save_many("u", "s", values={"state": {"n": turn}}, lists={"m": items}))
            assert n == 2
        assert a.get("u", "s", "state") == {"n": 4} and b.get_list("u", "s", "m") == items
        assert raw.query("SELECT state_data FROM {t} WHERE session_id='u:s' AND state_key='state'")[0][0].startswith(PREFIX)


# ---- what the process keeps ------------------------------------------------------------------


def test_an_item_kept_after_an_append_holds_its_own_size_not_the_encoders_buffer(store, raw):
    """orjson hands back its output in a buffer reserved at 8-13x its length; the snapshot that
    follows the appends keeps each new item until the next save, so it keeps a copy of the
    item's own size (serde.compact). 300 appends of a ~530-byte item: kept, they held ~8 KB
    each; the memory that stays must be about the items' bytes."""
    import tracemalloc

    item = {"role": "user", "content": "x" * 500}
    store.save_list("u", "s", "m", [item])  # the snapshot appends extend
    store.append_list("u", "s", "m", [item])
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(300):
            store.append_list("u", "s", "m", [item])
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown / 300 < 1500, f"{grown / 300:.0f} bytes kept per appended item of {len(orjson.dumps(item))}"
    assert raw.query("SELECT COUNT(*) FROM {t} WHERE session_id='u:s' AND state_key='m'")[0][0] == 302
    assert check_list_rows(raw, "u:s", "m") == [item] * 302
    assert store.get_list("u", "s", "m") == [item] * 302


def test_the_snapshot_of_a_short_list_holds_about_its_json_not_the_encoders_buffer(url, database, raw):
    """A saved list's snapshot (what makes the next save cheap) keeps the list's JSON; for a
    short list that JSON is copied out of orjson's reservation (64 KB for 5 KB here), so the
    memory the snapshots take is near what ``snapshot_bytes`` counts."""
    import tracemalloc

    store = MysqlAgentStateStore.from_url(url, database_name=database, snapshot_bytes=1 << 30)
    try:
        lists = [[{"role": "user", "content": f"{s}-{i} " + "x" * 500} for i in range(10)] for s in range(200)]
        store.save_list("u", "warm-up", "m", lists[0])
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            for s, items in enumerate(lists):
                store.save_list("u", f"s{s}", "m", items)
            grown = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
        json_bytes = sum(len(orjson.dumps(items)) for items in lists)
        assert grown < 2.5 * json_bytes, f"{grown / json_bytes:.1f}x the lists' JSON kept"
        assert raw.query("SELECT COUNT(DISTINCT session_id) FROM {t} WHERE session_id LIKE 'u:s%%' AND state_key='m'")[0][0] == 200
        assert [store.get_list("u", f"s{s}", "m") for s in (0, 199)] == [lists[0], lists[199]]
    finally:
        store.close()


# ---- one round trip: the statement carries its COMMIT -----------------------------------------


def test_two_workers_taking_turns_send_each_save_as_one_packet(store, other, raw, driver_commits):
    """The alternating saves' one statement carries the COMMIT: the driver's commit is never
    called, the server counts one COMMIT a save, and the list is exact after every turn."""
    items = [msg(i) for i in range(40)]
    store.save_list("u", "s", "m", items)
    other.get_list("u", "s", "m")
    called = driver_commits
    called.clear()
    for turn in range(6):
        items = items + [msg(100 + 2 * turn), msg(101 + 2 * turn)]
        before = raw.com_counts()
        (other, store)[turn % 2].save_list("u", "s", "m", items)
        after = raw.com_counts()
        assert after.get("Com_commit", 0) - before.get("Com_commit", 0) == 1
        assert check_list_rows(raw, "u:s", "m") == items
    assert called == []


@pytest.mark.parametrize("behind", ["deleted", "cleared", "rewritten"])
def test_a_one_packet_save_whose_list_changed_behind_it_commits_nothing_then_is_exact(store, other, raw, behind):
    """The list changed behind the worker's back (gone, emptied, or another list of the same
    length): its one-packet statement fails before its COMMIT (a gone hash row is inserted with
    the sentinel, which the statement's last row refuses), nothing of it stays, and the locked
    way writes exactly its list."""
    items = [msg(i) for i in range(30)]
    store.save_list("u", "s", "m", items)
    if behind == "deleted":
        other.delete("u", "s", "m")
    elif behind == "cleared":
        other.save_list("u", "s", "m", [])
    else:
        other.save_list("u", "s", "m", [msg(i, "theirs") for i in range(30)])
    items = items + [msg(30)]
    store.save_list("u", "s", "m", items)
    assert check_list_rows(raw, "u:s", "m") == items
    assert raw.query("SELECT COUNT(*) FROM {t} WHERE session_id='u:s' AND state_key='m:_hash'"
                     " AND state_data IN ('', '-')")[0][0] == 0
    items = items + [msg(31)]
    store.append_list("u", "s", "m", [msg(31)])
    assert check_list_rows(raw, "u:s", "m") == items
    assert other.get_list("u", "s", "m") == items


def test_a_one_packet_append_fails_safe_in_a_non_strict_sql_mode(url, database, raw):
    """The failure is an unsigned overflow, an error in every sql_mode: with the sessions in a
    non-strict mode (no STRICT_TRANS_TABLES), an append whose list another process rewrote
    still commits nothing of its statement and ends exact."""
    s = MysqlAgentStateStore.from_url(url, database_name=database, init_command="SET SESSION sql_mode = ''")
    o = MysqlAgentStateStore.from_url(url, database_name=database)
    try:
        s.save_list("u", "s", "m", [1, 2, 3])
        o.save_list("u", "s", "m", ["a", "b", "c"])
        assert s.append_list("u", "s", "m", [4]) == 4
        assert check_list_rows(raw, "u:s", "m") == ["a", "b", "c", 4]
        o.delete("u", "s", "m")
        assert s.append_list("u", "s", "m", [5]) == 1
        assert check_list_rows(raw, "u:s", "m") == [5]
    finally:
        s.close()
        o.close()


# ---- rows of version 0 (the Java store's) meet a one-packet write's failure branch ---------------


@pytest.mark.parametrize("sql_mode", ["strict", "lenient"])
@pytest.mark.parametrize("what", ["append", "create", "values beside"])
def test_a_one_packet_write_over_a_version_0_row_fails_and_goes_the_locked_way(url, database, raw, sql_mode, what):
    """The Java store's rows have version 0 (its INSERTs leave the column's default, its
    rewrites keep it). A one-packet write that meets one it must not write over fails before
    its COMMIT by an unsigned overflow (error 1690) computed from the version: at version 0 it
    must still overflow, or a strict server raises another error to the caller and a lenient
    one (sql_mode '') clamps the version and COMMITs a write whose condition did not hold."""
    mode = "" if sql_mode == "lenient" else None
    was = raw.query("SELECT @@GLOBAL.sql_mode")[0][0]
    if mode is not None:
        raw.execute("SET GLOBAL sql_mode = %s", (mode,))
    try:
        s = MysqlAgentStateStore.from_url(url, database_name=database)
        try:
            items = [msg(i) for i in range(5)]
            if what == "create":  # a value the Java store wrote: version 0
                raw.execute("INSERT INTO {t} (session_id, state_key, item_index, state_data, version)"
                            " VALUES ('u:s', 'k', 0, '\"from java\"', 0)")
                assert s.save_if_version("u", "s", "k", "ours", 0) == -1  # there: nothing written
                assert raw.query("SELECT state_data, version FROM {t} WHERE session_id='u:s' AND state_key='k'") \
                    == [('"from java"', 0)]
                return
            s.save_list("u", "s", "m", items)
            if what == "values beside":  # a value row of the Java store where the put creates one
                raw.execute("INSERT INTO {t} (session_id, state_key, item_index, state_data, version)"
                            " VALUES ('u:s', 'v', 0, '\"from java\"', 0)")
                s.append_lists("u", "s", {"m": [msg(5)]}, values={"v": "ours"})
                assert s.get("u", "s", "v") == "ours"  # written over, as save does
                # one past GREATEST(0, 1), as every write counts a Java row; not a clamped maximum
                assert raw.query("SELECT version FROM {t} WHERE session_id='u:s' AND state_key='v'")[0][0] == 2
                assert check_list_rows(raw, "u:s", "m") == items + [msg(5)]
                return
            # the hash row as the Java store leaves it: version 0, then its text rewritten
            raw.execute("UPDATE {t} SET version = 0 WHERE session_id='u:s' AND state_key='m:_hash'")
            assert s.get_list("u", "s", "m") == items  # this process now knows that hash row
            raw.execute("UPDATE {t} SET state_data = %s WHERE session_id='u:s' AND state_key='m:_hash'",
                        ('{"java":"hash"}',))
            raw.execute("INSERT INTO {t} (session_id, state_key, item_index, state_data, version)"
                        " VALUES ('u:s', 'm', 5, %s, 0)", (orjson.dumps(msg(50)).decode(),))
            s.append_list("u", "s", "m", [msg(6)])
            assert check_list_rows(raw, "u:s", "m") == items + [msg(50), msg(6)]
            versions = raw.query("SELECT version FROM {t} WHERE session_id='u:s' AND state_key='m:_hash'")
            assert len(versions) == 1 and versions[0][0] in (1, 2), versions  # a new version, not a clamped maximum
        finally:
            s.close()
    finally:
        raw.execute("SET GLOBAL sql_mode = %s", (was,))


def _java_list(raw: Raw, sid: str, key: str, items: list) -> None:
    """A list as the Java store writes it: item rows and its own hash string, version 0 (the
    column's default: the Java store never sets it)."""
    for i, item in enumerate(items):
        raw.execute("INSERT INTO {t} (session_id, state_key, item_index, state_data) VALUES (%s, %s, %s, %s)",
                    (sid, key, i, orjson.dumps(item).decode()))
    raw.execute("INSERT INTO {t} (session_id, state_key, item_index, state_data) VALUES (%s, %s, 0, %s)",
                (sid, key + ":_hash", "java-hash-%d" % len(items)))


LIST_WRITES = {  # a write by the other worker, and the list it leaves
    "append_list": (lambda s: s.append_list("u", "s", "m", ["theirs"]), ["j0", "j1", "theirs"]),
    "save_list": (lambda s: s.save_list("u", "s", "m", ["j0", "theirs"]), ["j0", "theirs"]),
    "pop_list": (lambda s: s.pop_list("u", "s", "m"), ["j0"]),
    "append_lists": (lambda s: s.append_lists("u", "s", {"m": ["theirs"]}), ["j0", "j1", "theirs"]),
    "save_many": (lambda s: s.save_many("u", "s", lists={"m": ["theirs"]}), ["theirs"]),
    "transaction": (lambda s: s.transaction(lambda tx: tx.append_list("u", "s", "m", ["theirs"])),
                    ["j0", "j1", "theirs"]),
}


@pytest.mark.parametrize("write", sorted(LIST_WRITES))
def test_a_write_over_a_java_list_moves_its_version_past_what_was_read(store, other, raw, write):
    """The Java store's list reads as version 1 (its hash row has 0): a write by this store
    must leave a version above 1, or a compare-and-set made with the version read before it
    succeeds and overwrites that write (a lost update). Every list write, each way."""
    _java_list(raw, "u:s", "m", ["j0", "j1"])
    items, version = store.get_list_versioned("u", "s", "m")
    assert (items, version) == (["j0", "j1"], 1)
    act, left = LIST_WRITES[write]
    act(other)
    assert check_list_rows(raw, "u:s", "m") == left
    stored = raw.query("SELECT version FROM {t} WHERE session_id = 'u:s' AND state_key = 'm:_hash'")[0][0]
    assert stored >= 2 and other.get_list_versioned("u", "s", "m").version == stored
    assert store.save_list_if_version("u", "s", "m", items + ["mine"], version) == -1  # stale: refused
    assert check_list_rows(raw, "u:s", "m") == left  # their write kept


@pytest.mark.parametrize("under", ["own value", "java value"])
def test_a_list_saved_over_a_value_reports_the_version_it_stored(store, raw, under):
    """A list replacing a value takes a version one past the value's (versions of a key never
    go back); the save reported one less than it stored, so a compare-and-set made with the
    reported version was refused."""
    if under == "own value":
        store.save("u", "s", "m", {"v": 1})
        store.save("u", "s", "m", {"v": 2})  # version 2
    else:  # the Java store's: version 0, read as 1
        raw.execute("INSERT INTO {t} (session_id, state_key, item_index, state_data) VALUES ('u:s', 'm', 0, '1')")
    stored_version = lambda: raw.query(  # noqa: E731
        "SELECT version FROM {t} WHERE session_id = 'u:s' AND state_key = 'm:_hash'")[0][0]
    report = store.save_list_report("u", "s", "m", ["a", "b"])
    assert report.version == stored_version() == (3 if under == "own value" else 2)
    assert store.save_list_if_version("u", "s", "m", ["a", "b", "c"], report.version) == report.version + 1
    store.delete("u", "s", "m")
    store.save("u", "s", "m", "again")
    saved = store.save_many("u", "s", lists={"m": ["x"]})
    assert saved.versions["m"] == stored_version() == store.get_list_versioned("u", "s", "m").version
    assert check_list_rows(raw, "u:s", "m") == ["x"]
