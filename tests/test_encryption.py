"""Encryption at rest: rows sealed with AES-256-GCM and bound to their place, keyed digests,
rotation by reencrypt beside live writers, and erasing a user. Checked with plain SQL."""

from __future__ import annotations

import base64
import os
import threading

import orjson
import pytest

from mysql_state import (
    CorruptStateError,
    DecryptionError,
    Keyring,
    MysqlAgentStateStore,
)
from mysql_state.crypto import PREFIX

pytest.importorskip("cryptography", reason="encryption needs the encryption extra (make test installs it)")
from mysql_state.listsync import Digester, ListHash, verify

from .conftest import Raw

K1, K2 = os.urandom(32), os.urandom(32)
SECRET = "my blood test says"


def ring(*ids: str) -> Keyring:
    keys = {"k1": K1, "k2": K2}
    return Keyring({i: keys[i] for i in ids}, current=ids[0])


@pytest.fixture
def open_store(url, database, store):
    made = []

    def make(encryption=None, **kw):
        s = MysqlAgentStateStore.from_url(url, database_name=database, encryption=encryption, **kw)
        made.append(s)
        return s

    yield make
    for s in made:
        s.close()


def plaintext_anywhere(raw: Raw, text: str) -> bool:
    return any(text in str(r) for r in raw.all_rows())


def msgs(n: int, start: int = 0) -> list:
    return [{"role": "user", "content": f"{SECRET} {i}"} for i in range(start, start + n)]


def test_values_and_items_are_sealed_and_read_back(open_store, raw):
    s = open_store(ring("k1"))
    s.save("alice", "c1", "summary", {"text": SECRET})
    s.save_list("alice", "c1", "memory", msgs(5))
    assert s.append_list("alice", "c1", "memory", msgs(2, 5)) == 7
    assert s.get("alice", "c1", "summary") == {"text": SECRET}
    assert s.get_list("alice", "c1", "memory") == msgs(7)
    assert s.get_list("alice", "c1", "memory", offset=-2) == msgs(2, 5)
    assert s.get_many("alice", "c1", values=["summary"], lists=["memory"])["memory"] == msgs(7)
    assert not plaintext_anywhere(raw, SECRET)
    data_rows = [r for r in raw.rows() if not r[1].endswith(":_hash")]
    assert all(r[3].startswith(PREFIX + "k1:") for r in data_rows)
    # every seal uses a fresh nonce: the same value twice gives two different texts
    s.save("alice", "c1", "again", "x")
    first = raw.query("SELECT state_data FROM {t} WHERE state_key='again'")[0][0]
    s.save("alice", "c1", "again", "x")
    assert raw.query("SELECT state_data FROM {t} WHERE state_key='again'")[0][0] != first
    assert s.pop_list("alice", "c1", "memory") == msgs(1, 6)[0]


def hash_row(raw: Raw, sid: str, key: str = "memory") -> dict:
    return orjson.loads(raw.query("SELECT state_data FROM {t} WHERE session_id=%s AND state_key=%s",
                                  (sid, f"{key}:_hash"))[0][0])


def bound(r: Keyring, kid: str, sid: str, key: str, table: str = "agentscope_sessions") -> Digester:
    """The digester of one list's hash row, derived here from the ring as the docs say."""
    return Digester(r.list_digest_key(kid, table, sid, key), kid + "/list")


def test_hash_rows_hold_keyed_digests_only(open_store, raw):
    a, b = open_store(ring("k1")), open_store(ring("k2"))
    a.save_list("alice", "c1", "memory", msgs(3))
    b.save_list("alice", "c2", "memory", msgs(3))
    h1, h2 = hash_row(raw, "alice:c1"), hash_row(raw, "alice:c2")
    assert h1["dk"] == "k1/list" and h2["dk"] == "k2/list"
    assert (h1["sum"], h1["ph"]) != (h2["sum"], h2["ph"])  # other keys, other digests of the same list
    datas = [orjson.dumps(m) for m in msgs(3)]
    assert not verify(ListHash.parse(orjson.dumps(h1).decode()), datas)  # not the plain digests
    table_wide = Digester(ring("k1").digest_key("k1"), "k1")
    assert not verify(ListHash.parse(orjson.dumps(h1).decode()), datas, table_wide)
    assert verify(ListHash.parse(orjson.dumps(h1).decode()), datas, bound(ring("k1"), "k1", "alice:c1", "memory"))


def test_equal_lists_of_two_users_have_unrelated_hash_rows(open_store, raw):
    """Someone who reads the table and makes the application store a list of their choosing
    (a chat message) must not learn whether another user's list holds the same: with one
    digest key for the whole table, equal lists had equal sums and checkpoints."""
    s = open_store(ring("k1"))
    guess = [{"role": "user", "content": "my PIN is 4821"}]
    s.save_list("mallory", "c1", "memory", guess)
    s.save_list("alice", "c1", "memory", guess)
    s.save_list("alice", "c1", "other", guess)
    s.append_list("mallory", "c2", "memory", guess)  # the one-statement append path too
    s.append_list("alice", "c2", "memory", guess)
    rows = [hash_row(raw, sid, key) for sid, key in
            (("mallory:c1", "memory"), ("alice:c1", "memory"), ("alice:c1", "other"),
             ("mallory:c2", "memory"), ("alice:c2", "memory"))]
    assert len({r["sum"] for r in rows}) == len(rows), rows
    assert len({(r["ph"], r["psum"]) for r in rows}) == len(rows), rows
    assert s.get_list("alice", "c1", "memory") == guess and s.get_list("alice", "c2", "memory") == guess
    assert s.doctor() == []


def legacy_hash_row(raw: Raw, sealer, sid: str, key: str = "memory") -> None:
    """Rewrite a list's hash row as stores before 2026-12-07 wrote it: keyed for the whole table."""
    from mysql_state.listsync import hash_of

    rows = raw.query("SELECT item_index, state_data FROM {t} WHERE session_id=%s AND state_key=%s ORDER BY item_index",
                     (sid, key))
    datas = [sealer.open(sid, key, i, d) for i, d in rows]
    old = Digester(ring("k1").digest_key("k1"), "k1")
    legacy = hash_of(datas, old)
    raw.execute("UPDATE {t} SET state_data=%s WHERE session_id=%s AND state_key=%s",
                (legacy.to_json().decode(), sid, f"{key}:_hash"))
    assert hash_row(raw, sid, key)["dk"] == "k1"


def test_a_hash_row_keyed_for_the_whole_table_works_as_before_until_reencrypt_binds_it(open_store, raw):
    """Hash rows written before 2026-12-07 were keyed for the whole table (``"dk": "k1"``):
    every read, check and write treats them as before (a damaged list stays damaged, a
    compare-and-set still sees a rewrite), and reencrypt() binds them to their list."""
    from mysql_state import StaleStateError

    s = open_store(ring("k1"))
    for c, n in (("c1", 40), ("c2", 3), ("c3", 5), ("c4", 3)):
        s.save_list("alice", c, "memory", msgs(n))
        legacy_hash_row(raw, s.table.sealer, f"alice:{c}")
    fresh = open_store(ring("k1"))  # a process that remembers nothing of them
    assert fresh.get_list("alice", "c1", "memory") == msgs(40)
    assert fresh.get_list("alice", "c1", "memory", offset=-2) == msgs(2, 38)
    assert fresh.doctor() == []
    assert fresh.append_list("alice", "c1", "memory", msgs(1, 40)) == 41
    fresh.save_list("alice", "c1", "memory", msgs(42))
    assert hash_row(raw, "alice:c1")["dk"] == "k1"  # extended under its own key
    assert fresh.get_list("alice", "c1", "memory") == msgs(42) and fresh.doctor() == []

    # another writer rewrites a list to the same length: a compare-and-set on it is refused
    other = open_store(ring("k1"))
    assert fresh.get_list("alice", "c2", "memory") == msgs(3)
    other.save_list("alice", "c2", "memory", msgs(3, 100))
    with pytest.raises(StaleStateError):
        fresh.append_lists("alice", "c2", {"memory": [{"a": 1}]}, at={"memory": 3})

    # a lost row and a lost item 0 stay visible to reads and to the doctor
    raw.execute("DELETE FROM {t} WHERE session_id='alice:c3' AND state_key='memory' AND item_index=2")
    raw.execute("DELETE FROM {t} WHERE session_id='alice:c4' AND state_key='memory' AND item_index=0")
    later = open_store(ring("k1"))
    with pytest.raises(CorruptStateError):
        later.get_list("alice", "c3", "memory")
    with pytest.raises(CorruptStateError):
        later.get("alice", "c4", "memory")
    assert {p.session_id for p in later.doctor()} == {"alice:c3", "alice:c4"}
    for c in ("c3", "c4"):
        later.delete("alice", c)

    assert later.reencrypt() == (1 + 42) + (1 + 3)  # each hash row bound, its items sealed again
    assert hash_row(raw, "alice:c1")["dk"] == hash_row(raw, "alice:c2")["dk"] == "k1/list"
    assert verify(ListHash.parse(orjson.dumps(hash_row(raw, "alice:c1")).decode()),
                  [orjson.dumps(m) for m in msgs(42)], bound(ring("k1"), "k1", "alice:c1", "memory"))
    assert later.reencrypt() == 0
    assert later.get_list("alice", "c1", "memory") == msgs(42) and later.doctor() == []


def test_a_forked_list_has_its_hash_row_keyed_for_its_new_place(open_store, raw):
    s = open_store(ring("k1"))
    s.save_list("alice", "c1", "memory", msgs(30))
    s.save("alice", "c1", "v", SECRET)
    s.fork("alice", "c1", "c2", new_user_id="bob")
    src, dst = hash_row(raw, "alice:c1"), hash_row(raw, "bob:c2")
    assert dst["dk"] == "k1/list" and dst["n"] == 30 and dst["sum"] != src["sum"]
    assert verify(ListHash.parse(orjson.dumps(dst).decode()), [orjson.dumps(m) for m in msgs(30)],
                  bound(ring("k1"), "k1", "bob:c2", "memory"))
    assert s.doctor() == []
    fresh = open_store(ring("k1"))
    assert fresh.get_list("bob", "c2", "memory") == msgs(30)
    assert fresh.append_list("bob", "c2", "memory", msgs(1, 30)) == 31
    fresh.save_list("bob", "c2", "memory", msgs(32))
    assert fresh.get_list("bob", "c2", "memory") == msgs(32) and fresh.get_list("alice", "c1", "memory") == msgs(30)
    assert fresh.doctor() == []


def test_a_fork_binds_a_legacy_hash_row_and_leaves_strays_to_the_doctor_in_the_copy(open_store, raw):
    s = open_store(ring("k1"))
    s.save_list("alice", "c1", "memory", msgs(3))
    legacy_hash_row(raw, s.table.sealer, "alice:c1")
    s.save_list("alice", "c5", "memory", msgs(3))
    raw.execute("INSERT INTO {t} (session_id, state_key, item_index, state_data, version) VALUES (%s, %s, 3, %s, 1)",
                ("alice:c5", "memory", s.table.sealer.seal("alice:c5", "memory", 3, b'{"stray":1}').decode()))
    s.fork("alice", "c1", "c2")
    s.fork("alice", "c5", "c6")
    assert hash_row(raw, "alice:c2")["dk"] == "k1/list"  # bound for the copy: no sum shared with c1
    assert hash_row(raw, "alice:c2")["sum"] != hash_row(raw, "alice:c1")["sum"]
    assert hash_row(raw, "alice:c6")["sum"] != hash_row(raw, "alice:c5")["sum"]
    assert {(p.session_id, p.kind) for p in s.doctor()} == {("alice:c5", "list_rows"), ("alice:c6", "list_rows")}
    s.doctor(fix=True)  # the stray removed in the source and in the copy alike
    assert s.doctor() == []
    assert s.get_list("alice", "c6", "memory") == msgs(3) and s.get_list("alice", "c2", "memory") == msgs(3)


def test_a_damaged_list_stays_visibly_damaged_in_a_fork(open_store, raw):
    """Keying the copy's hash row anew must not vouch for items its source's did not prove."""
    s = open_store(ring("k1"))
    s.save_list("alice", "c1", "memory", msgs(5))
    s.save_list("alice", "c9", "memory", msgs(5, 100))
    raw.execute("UPDATE {t} a JOIN {t} b ON b.session_id='alice:c9' AND b.state_key='memory' AND b.item_index=2"
                " SET a.state_data=b.state_data WHERE a.session_id='alice:c1' AND a.state_key='memory'"
                " AND a.item_index=2")  # a row moved by hand: it does not open in its new place
    before = {p.session_id for p in s.doctor()}
    assert "alice:c1" in before
    s2 = open_store(ring("k1"))
    with pytest.raises(DecryptionError):
        s2.fork("alice", "c1", "c2")
    raw.execute("UPDATE {t} SET state_data=%s WHERE session_id='alice:c1' AND state_key='memory'"
                " AND item_index=2", (s2.table.sealer.seal("alice:c1", "memory", 2, b'{"changed":1}').decode(),))
    assert "alice:c1" in {p.session_id for p in s2.doctor()}  # sealed right, but not the list saved
    s2.fork("alice", "c1", "c3")
    assert hash_row(raw, "alice:c3") == hash_row(raw, "alice:c1")  # left as copied: proves nothing there
    assert "alice:c3" in {p.session_id for p in s2.doctor()}


def test_incremental_paths_encrypt_only_what_they_write(open_store, raw, monkeypatch):
    s = open_store(ring("k1"))
    s.save_list("alice", "c1", "memory", msgs(50))
    sealed = []
    real = s.table.sealer.cipher.seal
    monkeypatch.setattr(s.table.sealer.cipher, "seal", lambda *a: sealed.append(a[2]) or real(*a))
    s.append_list("alice", "c1", "memory", msgs(1, 50))
    assert sealed == [50]
    sealed.clear()
    s.save_list("alice", "c1", "memory", msgs(53))
    assert sealed == [51, 52]
    cold = open_store(ring("k1"))
    monkeypatch.setattr(cold.table.sealer.cipher, "seal", lambda *a: sealed.append(a[2]) or real(*a))
    opened = []
    real_open = cold.table.sealer.cipher.open
    monkeypatch.setattr(cold.table.sealer.cipher, "open", lambda *a: opened.append(a[2]) or real_open(*a))
    sealed.clear()
    plan = cold.save_list_report("alice", "c1", "memory", msgs(54))
    assert (plan.kind, sealed, opened) == ("append", [53], [])  # cold: nothing decrypted


def test_a_row_moved_copied_or_tampered_with_fails_to_decrypt(open_store, raw):
    s = open_store(ring("k1"))
    s.save("alice", "c1", "v", SECRET)
    s.save_list("alice", "c1", "m", ["a", "b"])
    raw.execute("INSERT INTO {t} (session_id, state_key, item_index, state_data) SELECT 'bob:c1', state_key,"
                " item_index, state_data FROM {t} WHERE session_id='alice:c1' AND state_key='v'")
    with pytest.raises(DecryptionError) as err:
        s.get("bob", "c1", "v")
    assert (err.value.session_id, err.value.key, err.value.index, err.value.key_id) == ("bob:c1", "v", 0, "k1")
    assert isinstance(err.value, CorruptStateError)
    # swap two items of one list: each is bound to its index
    a, b = (r[0] for r in raw.query("SELECT state_data FROM {t} WHERE state_key='m' ORDER BY item_index"))
    raw.execute("UPDATE {t} SET state_data=%s WHERE state_key='m' AND item_index=0", (b,))
    with pytest.raises(DecryptionError):
        s.get_list("alice", "c1", "m")
    # one flipped character of the ciphertext
    text = raw.query("SELECT state_data FROM {t} WHERE session_id='alice:c1' AND state_key='v'")[0][0]
    flipped = text[:-3] + ("A" if text[-3] != "A" else "B") + text[-2:]
    raw.execute("UPDATE {t} SET state_data=%s WHERE session_id='alice:c1' AND state_key='v'", (flipped,))
    with pytest.raises(DecryptionError):
        s.get("alice", "c1", "v")


def test_a_store_without_the_key_never_reads_an_envelope_as_data(open_store, raw):
    open_store(ring("k2")).save("alice", "c1", "v", SECRET)
    open_store(ring("k2")).save_list("alice", "c1", "m", ["x"])
    for s in (open_store(None), open_store(ring("k1"))):
        with pytest.raises(DecryptionError, match="k2"):
            s.get("alice", "c1", "v")
        with pytest.raises(DecryptionError):
            s.get_list("alice", "c1", "m")
        with pytest.raises(DecryptionError):
            s.get_many("alice", "c1", values=["v"])


def test_plaintext_rows_read_as_they_are_and_reencrypt_rewrites_them(open_store, raw):
    plain = open_store(None)
    plain.save("alice", "c1", "v", SECRET)
    plain.save_list("alice", "c1", "m", msgs(4))
    s = open_store(ring("k1"))
    assert s.get("alice", "c1", "v") == SECRET and s.get_list("alice", "c1", "m") == msgs(4)
    assert s.append_list("alice", "c1", "m", msgs(1, 4)) == 5  # a plaintext-era list keeps working
    # the 4 plaintext-era items and the value (the append sealed its item and keyed the hash row)
    assert s.reencrypt() == 5
    assert not plaintext_anywhere(raw, SECRET)
    assert s.reencrypt() == 0
    assert s.get_list("alice", "c1", "m") == msgs(5) and s.get("alice", "c1", "v") == SECRET


def test_a_ring_that_refuses_plaintext_never_reads_a_row_put_in_place_of_a_sealed_one(open_store, raw):
    """By default a plaintext row reads as it is (rows written before encryption was on), so
    someone who can write the table but has no key could put {"admin": true} in place of a
    sealed value. allow_plaintext=False makes such a row a DecryptionError, as a row under an
    unknown key is; reencrypt with a ring that allows them seals the old ones first."""
    from mysql_state import DecryptionError

    plain = open_store(None)
    plain.save("alice", "c1", "old", SECRET)  # before encryption was turned on
    plain.save_list("alice", "c1", "oldlist", msgs(2))
    lines = list(plain.export("alice"))
    strict_ring = Keyring({"k1": K1}, current="k1", allow_plaintext=False)
    strict = open_store(strict_ring)
    assert "allow_plaintext=False" in repr(strict_ring)
    with pytest.raises(DecryptionError, match="not encrypted.*allow_plaintext=False"):
        strict.get("alice", "c1", "old")
    with pytest.raises(DecryptionError):
        strict.get_list("alice", "c1", "oldlist")
    assert {p.kind for p in strict.doctor()} == {"sealed"}
    assert open_store(ring("k1")).reencrypt() == 4  # a ring that allows them seals them (and keys the hash row)
    assert strict.get("alice", "c1", "old") == SECRET and strict.get_list("alice", "c1", "oldlist") == msgs(2)
    strict.save("alice", "c1", "role", {"admin": False})
    strict.save_list("alice", "c1", "m", msgs(3))
    raw.execute("UPDATE {t} SET state_data = '{\"admin\": true}' WHERE session_id = 'alice:c1' AND state_key = 'role'")
    raw.execute("UPDATE {t} SET state_data = '\"forged\"' WHERE session_id = 'alice:c1' AND state_key = 'm'"
                " AND item_index = 1")
    with pytest.raises(DecryptionError, match="not encrypted"):
        strict.get("alice", "c1", "role")
    with pytest.raises(DecryptionError, match="item_index 1"):
        strict.get_list("alice", "c1", "m")
    assert open_store(ring("k1")).get("alice", "c1", "role") == {"admin": True}  # the default reads it
    found = strict.doctor()
    assert sorted(p.key for p in found) == ["m", "role"] and all("refuses plaintext" in p.message for p in found)
    strict.truncate_all_sessions()
    with pytest.raises(ValueError, match="not encrypted, and this store's keyring refuses plaintext"):
        strict.import_rows(lines)
    assert raw.all_rows() == []
    with pytest.raises(TypeError, match="allow_plaintext"):
        Keyring({"k1": K1}, current="k1", allow_plaintext="no")


def test_rotation_loses_nothing_beside_writers_on_the_old_ring(open_store, raw):
    old = open_store(ring("k1"))
    for i in range(20):
        old.save_list("alice", f"c{i}", "m", msgs(5))
        old.save("alice", f"c{i}", "v", i)
    rotated = open_store(ring("k2", "k1"))
    still_old = open_store(ring("k1", "k2"))  # a worker not yet moved to the new ring
    stop = threading.Event()
    written: dict[str, int] = {}

    def writer():
        j = 0
        while not stop.is_set():
            j += 1
            n = still_old.append_list("alice", f"c{j % 20}", "m", [{"turn": j}])
            written[f"c{j % 20}"] = n

    t = threading.Thread(target=writer)
    t.start()
    try:
        first = rotated.reencrypt(batch=7)
    finally:
        stop.set()
        t.join()
    assert first > 0
    rotated.reencrypt(batch=7)  # the old ring's writes during the first run
    newest = open_store(ring("k2"))
    for i in range(20):
        items = newest.get_list("alice", f"c{i}", "m")
        assert items[:5] == msgs(5) and len(items) == written.get(f"c{i}", 5)
        assert newest.get("alice", f"c{i}", "v") == i
    assert all(r[3].startswith(PREFIX + "k2:") for r in raw.rows() if not r[1].endswith(":_hash"))
    assert all('"dk":"k2/list"' in r[3] for r in raw.rows() if r[1].endswith(":_hash"))


def test_keyring_rules_and_no_key_in_any_message(monkeypatch):
    with pytest.raises(ValueError, match=r"\(id 'k1'\) must be 32 bytes"):
        Keyring({"k1": b"short"}, current="k1")
    with pytest.raises(ValueError, match="current key id 'k9'"):
        Keyring({"k1": K1}, current="k9")
    for given in (base64.b64encode(K2).decode(), K2):  # a key where the current id goes: never shown
        with pytest.raises(ValueError) as err:
            Keyring({"k1": K1}, current=given)
        assert base64.b64encode(K2).decode() not in str(err.value) and repr(K2) not in str(err.value)
    monkeypatch.setenv("MYSQL_STATE_KEYS", f"k2={base64.b64encode(K2).decode()},k1={base64.b64encode(K1).decode()}")
    r = Keyring.from_env()
    assert r.current == "k2" and r.ids == ["k2", "k1"]
    assert base64.b64encode(K2).decode() not in repr(r) and "k2" in repr(r)
    monkeypatch.setenv("MYSQL_STATE_KEYS", "k1=" + base64.b64encode(b"x" * 16).decode())
    with pytest.raises(ValueError) as err:
        Keyring.from_env()
    assert "16" in str(err.value) and base64.b64encode(b"x" * 16).decode() not in str(err.value)


def test_a_key_id_given_twice_is_refused(monkeypatch):
    a, b = base64.b64encode(K1).decode(), base64.b64encode(K2).decode()
    monkeypatch.setenv("MYSQL_STATE_KEYS", f"k1={a},k1={b}")
    with pytest.raises(ValueError, match="key id 'k1' is given twice") as err:
        Keyring.from_env()
    assert a not in str(err.value) and b not in str(err.value)


@pytest.mark.parametrize("spec", ["{k}", "k1:{k}", "{k_bare}", "k1={k},{k_bare}", "k1={k},k2:{k}"])
def test_a_malformed_keys_variable_never_shows_a_key(monkeypatch, spec):
    """MYSQL_STATE_KEYS with the id forgotten (the key alone, with or without its padding), a
    ':' for the '=', or a key where an id goes: refused, and no part of any key in the message."""
    for key in (K1, K2, bytes(range(32)), b"\xfb" * 32):  # the last two: base64 with and without '+' and '/'
        k = base64.b64encode(key).decode()
        monkeypatch.setenv("MYSQL_STATE_KEYS", spec.format(k=k, k_bare=k.rstrip("=")))
        with pytest.raises(ValueError) as err:
            Keyring.from_env()
        message = str(err.value)
        assert "MYSQL_STATE_KEYS" in message and "<key id>=<base64 key>" in message
        assert not any(k[i:i + 8] in message for i in range(len(k) - 8)), message


def test_forget_user_removes_every_row_of_that_user_only(url, database, store, raw):
    for u in ("alice", "alicia", "bob", None):
        for s in ("c1", "c2"):
            store.save(u, s, "v", 1)
            store.save_list(u, s, "m", [1, 2, 3])
    with MysqlAgentStateStore.from_url(url, database_name=database, keep_history=True) as h:
        h.save_list("alice", "c1", "m", [1])  # 2 and 3 archived: history rows of alice
        h.save_list("bob", "c1", "m", [1])
    assert store.get_history("alice", "c1", "m")
    everything = len(raw.all_rows())
    before = len(raw.rows())
    removed = store.forget_user("alice", batch=3)
    assert removed == 8 + 2 + 2  # her data rows (one list now shorter), her history, her 2 catalog rows
    assert len(raw.all_rows()) == everything - removed
    assert not any("alice:" in str(r) for r in raw.all_rows())
    assert store.get_history("alice", "c1", "m") == [] and store.get_history("bob", "c1", "m")
    assert store.forget_user("alice") == 0
    assert not store.exists("alice", "c1") and store.list_session_ids("alice") == set()
    assert len(raw.rows()) == before - 8
    assert store.list_session_ids("alicia") == {"c1", "c2"} and store.exists("bob", "c2")
    assert store.forget_user(None) == 12 and store.list_session_ids(None) == set()  # 10 data + 2 catalog rows


def test_the_agentscope_repository_never_takes_an_unreadable_state_for_a_new_one(open_store):
    pytest.importorskip("agentscope", reason="the AgentScope 2.x extra is part of make test")
    import asyncio

    from agentscope.message import UserMsg
    from agentscope.state import AgentState

    from mysql_state.agentscope import AgentStateRepository
    from mysql_state.aio import AsyncMysqlAgentStateStore

    async def go():
        writer = AgentStateRepository(AsyncMysqlAgentStateStore(open_store(ring("k1")), close_store=False))
        state = AgentState(session_id="chat-1")
        state.context = [UserMsg("alice", SECRET)]
        await writer.save("alice", "chat-1", state)
        assert (await writer.load("alice", "chat-1")).context[0].content[0].text == SECRET
        for other in (open_store(None), open_store(ring("k2"))):
            reader = AgentStateRepository(AsyncMysqlAgentStateStore(other, close_store=False))
            with pytest.raises(DecryptionError):
                await reader.load("alice", "chat-1")

    asyncio.run(go())


def test_fork_and_history_of_an_encrypted_store_read_back(url, database, store, raw):
    s = MysqlAgentStateStore.from_url(url, database_name=database, encryption=ring("k1"), keep_history=True)
    try:
        s.save_list("alice", "c1", "m", msgs(6))
        s.save("alice", "c1", "v", SECRET)
        s.save_list("alice", "c1", "m", msgs(2, 4))  # a compaction: 0..5 archived, keeps 4, 5
        assert [h.value for h in s.get_history("alice", "c1", "m")] == msgs(6)
        s.save_list("alice", "c1", "m", [])  # cleared: 4, 5 archived after them
        assert [h.value for h in s.get_history("alice", "c1", "m")] == msgs(6) + msgs(2, 4)
        s.save_list("alice", "c1", "m", msgs(3))
        copied = s.fork("alice", "c1", "c2", new_user_id="bob")
        assert copied > 0
        assert s.get_list("bob", "c2", "m") == msgs(3) and s.get("bob", "c2", "v") == SECRET
        assert [h.value for h in s.get_history("bob", "c2", "m")] == msgs(6) + msgs(2, 4)
        assert s.get_list("alice", "c1", "m") == msgs(3)  # the source is untouched
        assert not plaintext_anywhere(raw, SECRET)
    finally:
        s.close()


def test_a_long_list_under_two_keys_reads_back_and_a_bad_row_is_named(open_store, raw):
    """The encrypted list read (issue 21's fast path): a long list read whole by the store that
    wrote it (one-column shape), by a fresh store (two columns) and as a window; rows under an
    older key of the ring and a plaintext row among them open; a damaged row is named."""
    old = open_store(ring("k1"))
    old.save_list("alice", "c1", "m", msgs(150))
    new = open_store(ring("k2", "k1"))
    assert new.append_list("alice", "c1", "m", msgs(50, 150)) == 200  # rows 150.. under k2
    raw.execute("UPDATE {t} SET state_data=%s WHERE state_key='m' AND item_index=7", (orjson.dumps(msgs(1, 7)[0]).decode(),))
    new.get_list("alice", "c1", "m")  # this store has now seen 200 items: the long shape next
    for s in (new, open_store(ring("k2", "k1"))):
        assert s.get_list("alice", "c1", "m") == msgs(200)
        assert s.get_list("alice", "c1", "m", offset=140, limit=20) == msgs(20, 140)
    assert open_store(ring("k2")).get_list("alice", "c1", "m", offset=150) == msgs(50, 150)
    with pytest.raises(DecryptionError) as err:
        open_store(ring("k2")).get_list("alice", "c1", "m")
    assert (err.value.index, err.value.key_id) == (0, "k1")  # k1 is not in that ring
    text = raw.query("SELECT state_data FROM {t} WHERE state_key='m' AND item_index=170")[0][0]
    raw.execute("UPDATE {t} SET state_data=%s WHERE state_key='m' AND item_index=170",
                (text[:-5] + ("A" if text[-5] != "A" else "B") + text[-4:],))
    for s in (new, open_store(ring("k2", "k1"))):
        for window in ({}, {"offset": 160, "limit": 20}):
            with pytest.raises(DecryptionError) as err:
                s.get_list("alice", "c1", "m", **window)
            assert (err.value.session_id, err.value.key, err.value.index, err.value.key_id) == ("alice:c1", "m", 170, "k2")
            assert SECRET not in str(err.value)


def test_an_encrypted_backup_restored_under_another_table_name_is_refused_whole(url, database, open_store, raw):
    """Rows are sealed for their table, session, key and index: imported into a table of another
    name they would not open. With the keyring the import checks each sealed row where it lands
    and refuses the whole import (nothing written); into a table of the same name it restores."""
    s = open_store(ring("k1"))
    s.save_list("alice", "c1", "m", [{"text": SECRET}] * 3)
    s.save("alice", "c1", "v", {"text": SECRET})
    backup = list(s.export("alice"))
    other = MysqlAgentStateStore.from_url(url, database_name=database, table_name="elsewhere",
                                          create_if_not_exist=True, encryption=ring("k1"))
    try:
        with pytest.raises(ValueError, match="sealed row that does not open in this table") as err:
            other.import_rows(backup)
        assert SECRET not in str(err.value)
        assert raw.query(f"SELECT COUNT(*) FROM `{database}`.`elsewhere`") == [(0,)]
    finally:
        other.close()
    s.truncate_all_sessions()
    assert s.import_rows(backup) == len(backup)
    assert s.get_list("alice", "c1", "m") == [{"text": SECRET}] * 3 and s.get("alice", "c1", "v") == {"text": SECRET}


def test_a_type_the_sealed_items_are_not_of_is_a_type_error_naming_the_row_not_the_value(open_store):
    """A type error named the stored value (its first 60 characters) as a plain store's does:
    on an encrypted store that put the plaintext of a sealed row in an exception message and
    in the logs that record it (a standards audit: "no secret in any message"). It names the
    row, the type asked for and the stored value's kind, never the value, nor chains an error
    that holds it; a pydantic model's ValidationError is raised with its inputs replaced."""
    import traceback

    from pydantic import BaseModel, ValidationError

    class Creds(BaseModel):
        api_key: int

    s = open_store(ring("k1"))
    s.save_list("alice", "kinds", "memory", ["a", {"role": "user", "text": SECRET}])
    s.save("alice", "kinds", "count", {"api_key": SECRET})
    calls = [(TypeError, r"key 'memory', item_index 1: type=str does not read the stored value, a dict "
                         r"\(not shown: the row is encrypted\)", lambda: s.get_list("alice", "kinds", "memory", type=str)),
             (TypeError, r"key 'count', item_index 0: type=int does not read the stored value, a dict \(not shown",
              lambda: s.get("alice", "kinds", "count", type=int)),
             (TypeError, r"item_index 1: type=str does not read", lambda: s.get_list("alice", "kinds", "memory",
                                                                                    offset=1, type=str)),
             (ValidationError, r"api_key\n.*input_value='\(not shown: the row is encrypted\)'",
              lambda: s.get("alice", "kinds", "count", type=Creds))]
    for kind, said, call in calls:
        with pytest.raises(kind, match=said) as err:
            call()
        shown = "".join(traceback.format_exception(err.value))
        assert SECRET not in shown and "'role'" not in shown, shown
    assert s.get_list("alice", "kinds", "memory", offset=0, limit=1, type=str) == ["a"]
    plain = open_store()  # a plain store's rows are in the table as they are: its errors show the value
    plain.save("bob", "kinds", "count", "3")
    with pytest.raises(TypeError, match=r"type=int reads a JSON integer; the stored value is '3' \(str\)"):
        plain.get("bob", "kinds", "count", type=int)


def test_a_store_without_the_keyring_refuses_to_fork_an_encrypted_session(url, database, open_store, raw):
    """A store without a keyring copied an encrypted session's rows as they were: each is
    sealed for its place, so the copies opened nowhere, not even with the right keyring."""
    from mysql_state import DecryptionError

    sealed = open_store(ring("k1"))
    sealed.save_list("alice", "src", "m", [{"text": SECRET}] * 2)
    plain = open_store()
    before = raw.all_rows()
    with pytest.raises(DecryptionError, match="holds encrypted rows.*no keyring.*nothing was copied") as err:
        plain.fork("alice", "src", "copy")
    assert SECRET not in str(err.value) and raw.all_rows() == before
    assert sealed.fork("alice", "src", "copy") > 0  # with the keyring: sealed again for the copy
    assert sealed.get_list("alice", "copy", "m") == [{"text": SECRET}] * 2
    plain.save("bob", "p", "k", 1)
    assert plain.fork("bob", "p", "p2") > 0 and plain.get("bob", "p2", "k") == 1  # plain rows: as before


def test_an_import_checks_that_archived_history_opens_where_it_lands(url, database, open_store, raw):
    """With a keyring an import checks each sealed row where it lands; the archived history
    rows were left out of that check, so a backup restored under another table name imported
    history that no read could open."""
    s = open_store(ring("k1"), keep_history=True)
    s.save_list("alice", "h", "m", [{"text": SECRET}] * 3)
    s.save_list("alice", "h", "m", [])  # the items go to the history, sealed
    backup = list(s.export("alice"))
    assert any("__history__" in line for line in backup)
    other = MysqlAgentStateStore.from_url(url, database_name=database, table_name="elsewhere_h",
                                          create_if_not_exist=True, encryption=ring("k1"))
    try:
        with pytest.raises(ValueError, match="sealed row that does not open in this table"):
            other.import_rows(backup)
        assert raw.query(f"SELECT COUNT(*) FROM `{database}`.`elsewhere_h`") == [(0,)]
    finally:
        other.close()
    s.truncate_all_sessions()
    assert s.import_rows(backup) == len(backup)
    assert [h.value for h in s.get_history("alice", "h", "m")] == [{"text": SECRET}] * 3


def test_a_list_written_before_encryption_gets_keyed_digests_at_its_next_write(open_store, raw):
    """A hash row of unkeyed digests (written before encryption was turned on) was extended by
    the encrypted store's appends: each sealed item's unkeyed digest went into its sum, so a
    guess (a 4-digit PIN) could be checked against the hash rows before and after."""
    open_store().save_list("alice", "pre", "m", [{"pin": "0000"}])
    sealed = open_store(ring("k1"))
    sealed.append_list("alice", "pre", "m", [{"pin": "4821"}])
    head = orjson.loads(raw.query("SELECT state_data FROM {t} WHERE session_id = 'alice:pre' AND state_key = 'm:_hash'")[0][0])
    assert head.get("dk") == "k1/list", head  # keyed now (for this list): nothing to match a guess against
    assert sealed.get_list("alice", "pre", "m") == [{"pin": "0000"}, {"pin": "4821"}]
    assert "4821" not in str(raw.rows("alice:pre"))



def test_an_id_or_key_with_nul_is_refused_by_an_encrypted_store(open_store, raw):
    """A row is bound to its place by associated data "<table>\\0<session id>\\0<key>\\0<index>":
    with a NUL inside an id, two places shared it (("u:c", "a\\0b") and ("u:c\\0a", "b")), so a
    row sealed for one opened in the other. An encrypted store now refuses such ids and keys,
    naming the value and the rule, before anything is sealed or sent; a plaintext store, which
    binds nothing, keeps taking them."""
    from mysql_state.crypto import RowCipher

    cipher = RowCipher(ring("k1"), "agentscope_sessions")
    for sid, key in (("alice:c", "a\0b"), ("alice:c\0a", "b")):  # the two places of one binding
        with pytest.raises(ValueError, match="contains NUL"):
            cipher.seal(sid, key, 0, b"{}")
    s = open_store(ring("k1"))
    calls = [lambda: s.save("alice", "c\0a", "b", {"t": SECRET}),
             lambda: s.save("alice", "c", "a\0b", {"t": SECRET}),
             lambda: s.save_list("alice", "c", "m\0x", msgs(2)),
             lambda: s.append_list("alice", "c\0x", "memory", msgs(1)),
             lambda: s.save_many("alice", "c\0x", values={"k": 1}, lists={"memory": msgs(1)})]
    for call in calls:
        with pytest.raises(ValueError, match="contains NUL.*nothing was written"):
            call()
    assert raw.all_rows() == []
    plain = open_store(None)
    plain.save("alice", "c\0a", "b", {"t": 1})
    assert plain.get("alice", "c\0a", "b") == {"t": 1}


def test_rows_stored_under_an_id_with_nul_before_stay_readable_and_rotate(open_store, raw):
    """The refusal is for new rows only: rows an earlier version stored under an id or key with
    NUL (plaintext, or sealed) still read, and reencrypt() seals or rotates them in their place
    like every other row instead of stopping at them (found by a review: it raised on them at
    every run, and the rows sorting after them stayed plaintext)."""
    from mysql_state.crypto import RowCipher

    plain = open_store(None)
    plain.save_list("alice", "c", "m\0x", msgs(3))
    plain.save("alice", "c\0x", "v", {"t": SECRET})
    plain.save("zed", "z", "v", {"z": 1})  # sorts after them
    cipher = RowCipher(ring("k1"), raw.table)  # a row sealed under a NUL id by an earlier version
    raw.execute("INSERT INTO {t} (session_id, state_key, item_index, state_data, version) VALUES (%s, %s, 0, %s, 1)",
                ("alice:c", "w\0y", cipher.reseal("alice:c", "w\0y", 0, b'{"old": 1}').decode()))
    s = open_store(Keyring({"k1": K1}, current="k1", allow_plaintext=True))
    assert s.get_list("alice", "c", "m\0x") == msgs(3) and s.get("alice", "c", "w\0y") == {"old": 1}
    assert s.reencrypt(batch=500) > 0
    assert not plaintext_anywhere(raw, SECRET) and "'{\"z\": 1}'" not in str(raw.all_rows())
    assert s.get_list("alice", "c", "m\0x") == msgs(3) and s.get("alice", "c\0x", "v") == {"t": SECRET}
    assert s.get("zed", "z", "v") == {"z": 1} and s.reencrypt(batch=500) == 0


# ---- progress: rows rewritten, after each batch -------------------------------------------------


def under(raw: Raw, kid: str) -> int:
    """The caller's rows under key ``kid``: items and values sealed with it, hash rows keyed with it."""
    return sum(1 for r in raw.rows() if (f'"dk":"{kid}/list"' in r[3] if r[1].endswith(":_hash")
                                         else r[3].startswith(f"{PREFIX}{kid}:")))


def test_reencrypt_reports_the_rows_rewritten_after_each_batch_and_sends_nothing_more(open_store, raw):
    """``progress(done, None)`` once before the first batch, then after each: ``done`` the rows
    rewritten so far (the result's unit, so the last call's is the result), no total. Rotating
    k1 -> k2 without a callback and back k2 -> k1 with one rewrite the same rows with the same
    statements: the callback adds none."""
    old = open_store(ring("k1"))
    for i in range(6):
        old.save_list("alice", f"c{i}", "m", msgs(3))  # the hash row and 3 items
        old.save("alice", f"c{i}", "v", i)
    assert under(raw, "k1") == 30
    rotated, back = open_store(ring("k2", "k1")), open_store(ring("k1", "k2"))
    forth, sent = raw.statements(lambda: rotated.reencrypt(batch=4))
    assert forth == 30 and under(raw, "k2") == 30
    calls: list = []
    back_n, sent_with_progress = raw.statements(
        lambda: back.reencrypt(batch=4, progress=lambda done, total: calls.append((done, total))))
    assert back_n == 30 and under(raw, "k1") == 30
    # lists 4 then 2 a batch (4 rows each), then the values 4 then 2 a batch
    assert calls == [(0, None), (16, None), (24, None), (28, None), (30, None)]
    assert sent_with_progress == sent
    assert [old.get_list("alice", f"c{i}", "m") for i in range(6)] == [msgs(3)] * 6


def test_a_progress_callback_that_raises_stops_reencrypt_where_it_was_and_a_rerun_finishes(open_store, raw):
    """The callback's error is the call's; the batches before it stay committed (the first
    batch of lists, here), nothing after it is rewritten, and a run again rewrites only the rest."""
    old = open_store(ring("k1"))
    for i in range(6):
        old.save_list("alice", f"c{i}", "m", msgs(3))
        old.save("alice", f"c{i}", "v", i)
    rotated = open_store(ring("k2", "k1"))

    class Stop(Exception):
        pass

    def stop(done: int, total: None) -> None:
        if done:
            raise Stop(done)

    with pytest.raises(Stop, match="16"):
        rotated.reencrypt(batch=4, progress=stop)
    assert under(raw, "k2") == 16 and under(raw, "k1") == 14  # 4 whole lists, committed; the rest as it was
    assert [rotated.get_list("alice", f"c{i}", "m") for i in range(6)] == [msgs(3)] * 6
    assert rotated.reencrypt(batch=4) == 14 and under(raw, "k2") == 30
    assert rotated.reencrypt() == 0
    with pytest.raises(TypeError, match="progress must be a callable, got str"):
        rotated.reencrypt(progress="bar")
