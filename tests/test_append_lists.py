"""``store.append_lists``: several lists appended to, and values saved beside, in one
transaction; one statement that carries its COMMIT when this process knows every list's hash
row. Every check reads the table with plain SQL."""

from __future__ import annotations

import asyncio

import pytest

from mysql_state import AsyncMysqlAgentStateStore, CorruptStateError, MysqlAgentStateStore, StaleStateError

from .test_faults import check_list_rows


def no_sentinels(raw) -> bool:
    return raw.query("SELECT COUNT(*) FROM {t} WHERE state_key LIKE '%%:\\_hash' AND state_data IN ('', '-')")[0][0] == 0


def value_of(raw, sid: str, key: str) -> list:
    return raw.query("SELECT state_data FROM {t} WHERE session_id = %s AND state_key = %s", (sid, key))


def test_a_warm_call_is_one_packet_and_exact(store, raw, driver_commits):
    """The first call (no hash row known) goes the locked way; the next ones, the lists' hash
    rows known, are one statement and its COMMIT in one packet: one COMMIT counted by the
    server, none sent apart by the driver; the lists and values are exact by plain SQL."""
    assert store.append_lists("u", "s", {"a": [1, 2], "b": ["x"]}, values={"v": {"n": 0}}) == {"a": 2, "b": 1}
    a, b = [1, 2], ["x"]
    commits = driver_commits
    for turn in range(4):
        commits.clear()
        before = raw.com_counts()
        got = store.append_lists("u", "s", {"b": [f"y{turn}"], "a": [10 + turn]}, at={"a": len(a)},
                                 values={f"c{turn}": {"turn": turn}})
        after = raw.com_counts()
        a, b = a + [10 + turn], b + [f"y{turn}"]
        assert got == {"b": len(b), "a": len(a)}
        assert commits == []
        diff = {k: v - before.get(k, 0) for k, v in after.items() if v - before.get(k, 0)}
        assert diff == {"Com_select": 1, "Com_insert": 1, "Com_commit": 1}, diff
        assert check_list_rows(raw, "u:s", "a") == a and check_list_rows(raw, "u:s", "b") == b
        assert value_of(raw, "u:s", f"c{turn}") == [(f'{{"turn":{turn}}}',)]
    assert no_sentinels(raw)
    assert store.get_many("u", "s", values=["v", "c3"], lists=["a", "b"]) == {
        "v": {"n": 0}, "c3": {"turn": 3}, "a": a, "b": b}


def test_lists_alone_send_no_check(store, raw):
    store.append_lists("u", "s", {"a": [1]})
    before = raw.com_counts()
    assert store.append_lists("u", "s", {"a": [2]}) == {"a": 2}
    after = raw.com_counts()
    assert {k: v - before.get(k, 0) for k, v in after.items() if v - before.get(k, 0)} == {
        "Com_insert": 1, "Com_commit": 1}
    assert check_list_rows(raw, "u:s", "a") == [1, 2]


@pytest.mark.parametrize("behind", ["appended", "deleted", "rewritten"])
def test_a_list_changed_behind_the_call_commits_nothing_of_the_packet_then_is_exact(store, other, raw, behind):
    """Another writer changed one of the lists: the one-packet statement fails before its COMMIT
    (a gone hash row is inserted with the sentinel, which its check row refuses) and the call
    goes the locked way: exactly the items appended to what is stored, no sentinel left."""
    store.append_lists("u", "s", {"a": [1, 2], "b": [3]})
    if behind == "appended":
        other.append_list("u", "s", "a", ["theirs"])
        a = [1, 2, "theirs", 4]
    elif behind == "deleted":
        other.delete("u", "s", "a")
        a = [4]
    else:
        other.save_list("u", "s", "a", ["p", "q"])  # the same length, another list
        a = ["p", "q", 4]
    assert store.append_lists("u", "s", {"a": [4], "b": [5]}, values={"v": 1}) == {"a": len(a), "b": 2}
    assert check_list_rows(raw, "u:s", "a") == a
    assert check_list_rows(raw, "u:s", "b") == [3, 5]
    assert value_of(raw, "u:s", "v") == [("1",)]
    assert no_sentinels(raw)
    assert store.append_lists("u", "s", {"a": [6]}) == {"a": len(a) + 1}  # warm again
    assert check_list_rows(raw, "u:s", "a") == a + [6]


def test_at_another_length_raises_and_writes_nothing(store, other, raw):
    store.append_lists("u", "s", {"a": [1, 2], "b": [3]})
    other.append_list("u", "s", "a", [9])
    table = raw.query("SELECT * FROM {t} ORDER BY session_id, state_key, item_index")
    with pytest.raises(StaleStateError, match="expected length 2, but length 3"):
        store.append_lists("u", "s", {"a": [4], "b": [5]}, at={"a": 2}, values={"v": 1})
    assert raw.query("SELECT * FROM {t} ORDER BY session_id, state_key, item_index") == table
    assert store.append_lists("u", "s", {"a": [4]}, at={"a": 3}) == {"a": 4}
    assert check_list_rows(raw, "u:s", "a") == [1, 2, 9, 4]


def test_at_the_same_length_but_another_list_raises_and_writes_nothing(store, other, raw):
    """``at`` says the list is as long as this process last read or wrote it; a list another
    writer rewrote to that very length (a copy over a deleted one, a Java store's save) is not
    that list: stale, nothing written, the store's memory of it forgotten; read again, it goes."""
    store.save_list("u", "s", "m", [1, 2, 3])
    store.get_list("u", "s", "m")
    other.save_list("u", "s", "m", [7, 8, 9])
    before = raw.rows("u:s")
    with pytest.raises(StaleStateError, match="not the list this process last read or wrote") as caught:
        store.append_lists("u", "s", {"m": [4]}, at={"m": 3})
    assert (caught.value.expected, caught.value.stored) == (3, 3) and raw.rows("u:s") == before
    assert store.get_list("u", "s", "m") == [7, 8, 9]
    assert store.append_lists("u", "s", {"m": [4]}, at={"m": 3}) == {"m": 4}
    assert other.get_list("u", "s", "m") == [7, 8, 9, 4]


@pytest.mark.parametrize("how", ["append_lists", "save_list_if_version"])
def test_a_list_rewritten_at_the_same_length_or_version_is_stale_then_read_again_goes(store, other, raw, how):
    """A list rewritten to the length (or version) this process knew is stale, nothing
    written; the list read again (a whole read, or only its length), the call goes. A stale
    forgets what the process knew of the list, so a caller must read before it tries again, as
    with any compare-and-set (the same call repeated unread is not checked again)."""
    store.save_list("u", "s", "m", [1, 2, 3])
    _, version = store.get_list_versioned("u", "s", "m")
    other.save_list("u", "s", "m", [7, 8, 9])
    raw.execute("UPDATE {t} SET version = %s WHERE session_id = 'u:s' AND state_key = 'm:_hash'", (version,))
    before = raw.rows("u:s")
    try:
        stale = (store.append_lists("u", "s", {"m": [4]}, at={"m": 3}) if how == "append_lists" else
                 store.save_list_if_version("u", "s", "m", [1, 2, 3, 4], version)) == -1
    except StaleStateError:
        stale = True
    assert stale and raw.rows("u:s") == before
    if how == "append_lists":
        assert store.append_lists("u", "s", {"m": [4]}, at={"m": store.list_length("u", "s", "m")}) == {"m": 4}
    else:
        items, version = store.get_list_versioned("u", "s", "m")
        assert items == [7, 8, 9]
        assert store.save_list_if_version("u", "s", "m", items + [4], version) == version + 1
    assert other.get_list("u", "s", "m") == [7, 8, 9, 4]


def test_what_a_transaction_read_is_what_its_at_goes_by_and_its_end_leaves_nothing_wrong(store, other, raw):
    """Inside a transaction, at= is checked against what the transaction read under lock (it
    was checked against the store's older sight and stayed stale at every run); a transaction
    that found a list damaged and rolled back leaves the store nothing that would skip the
    repair; one that appended and then deleted the session leaves no sight of the deleted list."""
    store.save_list("u", "s", "m", [1, 2, 3])
    store.get_list("u", "s", "m")
    other.save_list("u", "s", "m", [7, 8, 9])

    def answer(tx):
        items = tx.get_list("u", "s", "m")
        return tx.append_lists("u", "s", {"m": [sum(items)]}, at={"m": len(items)})

    assert store.transaction(answer) == {"m": 4} and other.get_list("u", "s", "m") == [7, 8, 9, 24]
    store.save_list("u", "d", "m", ["a", "b", "c"])
    raw.execute("DELETE FROM {t} WHERE session_id = 'u:d' AND state_key = 'm' AND item_index = 1")
    with pytest.raises(CorruptStateError):
        store.transaction(lambda tx: tx.get_list("u", "d", "m"))
    store.save_list("u", "d", "m", ["a", "b", "c", "d"])
    assert check_list_rows(raw, "u:d", "m") == ["a", "b", "c", "d"]

    def append_then_delete(tx):
        tx.append_list("u", "gone", "log", ["x"])
        tx.delete("u", "gone")

    store.transaction(append_then_delete)
    assert store.save_list_if_version("u", "gone", "log", ["new"], 0) == 1


def test_a_read_since_a_save_is_what_at_and_a_compare_and_set_go_by(store, other):
    """What a process read last, not what it saved before, is what its calls are checked
    against; and a read with consistency 'session' that sees another process's turn leaves
    nothing stale behind (a compare-and-set with the version it read goes through)."""
    for turn in range(4):
        store.save_list("u", "s", "m", [turn])
        other.save_list("u", "s", "m", [turn, "other"])
        assert store.get_list("u", "s", "m") == [turn, "other"]
        assert store.append_lists("u", "s", {"m": ["mine"]}, at={"m": 2}) == {"m": 3}
    for turn in range(6):
        worker = (store, other)[turn % 2]
        items, version = worker.get_list_versioned("u", "t", "m", consistency="session")
        assert worker.save_list_if_version("u", "t", "m", items + [turn], version) == version + 1
    assert store.get_list("u", "t", "m") == list(range(6))


def test_a_list_keyed_anew_by_reencrypt_is_not_taken_for_a_rewrite(url, database):
    """reencrypt computes each hash row again under the new digest key, leaving version and
    length: another process's compare-and-set with the version read before the rotation still
    goes through, as reencrypt promises (a rewrite check took the new digests for another list)."""
    from mysql_state import Keyring

    k1, k2 = b"\x01" * 32, b"\x02" * 32
    ring = lambda: Keyring({"k2": k2, "k1": k1}, current="k2")  # noqa: E731
    with MysqlAgentStateStore.from_url(url, database_name=database, encryption=Keyring({"k1": k1}, current="k1"),
                                       create_if_not_exist=True) as old:
        old.save_list("u", "s", "m", ["a", "b"])
    with MysqlAgentStateStore.from_url(url, database_name=database, encryption=ring()) as worker, \
            MysqlAgentStateStore.from_url(url, database_name=database, encryption=ring()) as operator:
        items, version = worker.get_list_versioned("u", "s", "m")
        assert operator.reencrypt() > 0
        assert worker.save_list_if_version("u", "s", "m", items + ["c"], version) == version + 1
        assert worker.append_lists("u", "s", {"m": ["d"]}, at={"m": 3}) == {"m": 4}
        assert operator.get_list("u", "s", "m") == ["a", "b", "c", "d"]


def test_a_list_only_checked_rides_in_the_one_packet_and_is_left_as_it_is(store, other, raw, driver_commits):
    """A list given no items but a length (``at``: a compare-and-set on it alone) rides in the
    one-packet statement (it used to send the whole call the locked way: 3 round trips): its
    hash row is checked, and left as it is, version and text, as the locked way leaves it."""
    store.append_lists("u", "s", {"a": [1, 2], "b": [3]})
    head = raw.query("SELECT state_data, version FROM {t} WHERE session_id = 'u:s' AND state_key = 'a:_hash'")
    driver_commits.clear()
    before = raw.com_counts()
    assert store.append_lists("u", "s", {"a": [], "b": [4]}, at={"a": 2}, values={"v": 1}) == {"a": 2, "b": 2}
    after = raw.com_counts()
    assert {k: v - before.get(k, 0) for k, v in after.items() if v - before.get(k, 0)} == {
        "Com_select": 1, "Com_insert": 1, "Com_commit": 1}
    assert driver_commits == []
    assert raw.query("SELECT state_data, version FROM {t} WHERE session_id = 'u:s' AND state_key = 'a:_hash'") == head
    assert check_list_rows(raw, "u:s", "a") == [1, 2] and check_list_rows(raw, "u:s", "b") == [3, 4]
    assert store.append_lists("u", "s", {"a": []}, at={"a": 2}) == {"a": 2}  # checked alone
    assert raw.query("SELECT state_data, version FROM {t} WHERE session_id = 'u:s' AND state_key = 'a:_hash'") == head
    # another writer appended to the checked list: stale, nothing of the call written
    other.append_list("u", "s", "a", ["theirs"])
    table = raw.query("SELECT * FROM {t} ORDER BY session_id, state_key, item_index")
    with pytest.raises(StaleStateError, match="expected length 2, but length 3"):
        store.append_lists("u", "s", {"a": [], "b": [5]}, at={"a": 2})
    assert raw.query("SELECT * FROM {t} ORDER BY session_id, state_key, item_index") == table
    # rewritten behind the call to the same length: the packet's check refuses, the locked way
    # checks the length (2 = 2) and leaves the list as the other writer left it
    other.save_list("u", "s", "a", ["p", "q", "r"])
    store.append_lists("u", "s", {"a": [], "b": [5]}, at={"a": 3})
    assert check_list_rows(raw, "u:s", "a") == ["p", "q", "r"] and check_list_rows(raw, "u:s", "b") == [3, 4, 5]
    assert no_sentinels(raw)


def test_a_value_already_there_or_holding_a_list_is_replaced_as_save_does(store, other, raw):
    """A value key that has a row already (one-packet: refused, then written over the locked
    way) or holds a list (its check, first in the packet, fails: the list is removed, as a
    save does): the value is exactly the one given, nothing of the list stays."""
    store.append_lists("u", "s", {"a": [1]}, values={"v": "old"})
    other.save_list("u", "s", "w", [7, 8, 9])
    other.save_list("u", "s", "e", [])
    assert store.append_lists("u", "s", {"a": [2]}, values={"v": "new"}) == {"a": 2}
    assert raw.query("SELECT state_data, version FROM {t} WHERE session_id = 'u:s' AND state_key = 'v'") == [
        ('"new"', 2)]  # written over: its version grew
    assert store.append_lists("u", "s", {"a": [3]}, values={"w": "was a list", "e": "was empty"}) == {"a": 3}
    assert raw.query("SELECT state_key, item_index, state_data FROM {t} WHERE session_id = 'u:s'"
                     " AND state_key IN ('w', 'w:_hash', 'e', 'e:_hash') ORDER BY state_key") == [
        ("e", 0, '"was empty"'), ("w", 0, '"was a list"')]
    assert store.get("u", "s", "w") == "was a list" and store.get("u", "s", "e") == "was empty"
    assert check_list_rows(raw, "u:s", "a") == [1, 2, 3]
    assert no_sentinels(raw)


def test_bad_input_names_the_rule_and_writes_nothing(store, raw):
    store.append_lists("u", "s", {"a": [1]})
    table = raw.query("SELECT * FROM {t} ORDER BY session_id, state_key, item_index")
    with pytest.raises(ValueError, match=r"keys \['a'\] are given both"):
        store.append_lists("u", "s", {"a": [2]}, values={"a": 1})
    with pytest.raises(ValueError, match=r"at\['a'\] must be a list's length .* got -1"):
        store.append_lists("u", "s", {"a": [2]}, at={"a": -1})
    with pytest.raises(ValueError, match=r"at names keys \['b'\]"):
        store.append_lists("u", "s", {"a": [2]}, at={"b": 0})
    with pytest.raises(TypeError, match="appends must be a mapping"):
        store.append_lists("u", "s", [("a", [2])])
    with pytest.raises(ValueError):
        store.append_lists("u", "s", {"m:_hash": [2]})
    assert raw.query("SELECT * FROM {t} ORDER BY session_id, state_key, item_index") == table


def test_two_store_objects_taking_turns_stay_exact(store, other, raw):
    """Each turn's hash rows were last written by the other object: its packet fails, its
    locked way appends; its next turn after its own is one packet again."""
    a = []
    for turn in range(8):
        who = (store, other)[(turn // 2) % 2]
        a.append(turn)
        assert who.append_lists("u", "s", {"a": [turn]}, values={"last": turn}) == {"a": len(a)}
        assert check_list_rows(raw, "u:s", "a") == a
    assert value_of(raw, "u:s", "last") == [("7",)]
    assert no_sentinels(raw)


def test_encrypted_lists_and_values_are_sealed_and_exact(url, database, raw):
    from mysql_state import Keyring

    ring = Keyring({"k1": bytes(range(32))}, current="k1")
    s = MysqlAgentStateStore.from_url(url, database_name=database, encryption=ring)
    try:
        s.append_lists("u", "s", {"a": [{"text": "secret one"}]}, values={"v": {"text": "secret value"}})
        s.append_lists("u", "s", {"a": [{"text": "secret two"}]}, values={"w": {"text": "secret w"}})
        assert "secret" not in str(raw.rows("u:s"))
        assert s.get_list("u", "s", "a") == [{"text": "secret one"}, {"text": "secret two"}]
        assert s.get("u", "s", "w") == {"text": "secret w"}
        assert no_sentinels(raw)
    finally:
        s.close()


def test_the_async_twin(url, database, raw):
    async def main():
        async with await AsyncMysqlAgentStateStore.open(url, database_name=database) as astore:
            await astore.append_lists("u", "s", {"a": [1]})
            return await astore.append_lists("u", "s", {"a": [2]}, at={"a": 1}, values={"v": 1})

    assert asyncio.run(main()) == {"a": 2}
    assert check_list_rows(raw, "u:s", "a") == [1, 2]


def test_append_at_zero_onto_an_empty_list_another_worker_deleted_goes_through(store, other):
    """The empty list this process saved, deleted by another worker: absent is as empty, so an
    append at length 0 goes through (it was refused once as "not the list last seen", audit of
    2026-12-07)."""
    store.save_list("u", "s", "k", [])
    other.delete("u", "s", "k")
    store.append_lists("u", "s", {"k": ["a"]}, at={"k": 0})
    assert other.get_list_versioned("u", "s", "k").value == ["a"]
