"""A key is a value or a list (list operations on a value are refused, as Redis's WRONGTYPE),
and a read that finds a list damaged makes the same process's next save repair it (issue 18,
items 6 and 7). Plain SQL on the table is the truth."""

from __future__ import annotations

import os

import orjson
import pytest

from mysql_state import (
    CorruptStateError,
    DecryptionError,
    MysqlAgentStateStore,
    MysqlStateError,
    WrongTypeError,
)

from .test_faults import check_list_rows

ITEMS = [{"role": "user", "text": "a"}, {"role": "assistant", "text": "b"}, {"role": "user", "text": "c"}]


def item_rows(raw, sid: str, key: str) -> list[tuple]:
    return [(r[2], r[3]) for r in raw.rows(sid) if r[1] == key]


# ---- 6: a read that finds damage drops what the process remembers of the list ---------------

READS = {
    "get_list": lambda s: s.get_list("u", "s", "m"),
    "get_list_versioned": lambda s: s.get_list_versioned("u", "s", "m"),
    "get_many": lambda s: s.get_many("u", "s", lists=["m"]),
    "window": lambda s: s.get_list("u", "s", "m", offset=1, limit=1),
    "tail": lambda s: s.get_list("u", "s", "m", offset=-2),
    "transaction": lambda s: s.transaction(lambda tx: tx.get_list("u", "s", "m")),
}


@pytest.mark.parametrize("read", sorted(READS))
def test_a_read_that_finds_damage_makes_the_next_save_repair_it(store, raw, read):
    store.save_list("u", "s", "m", ITEMS)
    store.get_list("u", "s", "m")  # warm: snapshot and hash hint of this process
    raw.execute("UPDATE {t} SET state_data = '{bad' WHERE session_id = 'u:s' AND state_key = 'm' AND item_index = 1")
    with pytest.raises(CorruptStateError) as caught:
        READS[read](store)
    assert caught.value.key == "m"
    plan = store.save_list_report("u", "s", "m", ITEMS)
    assert plan.kind != "unchanged"
    assert item_rows(raw, "u:s", "m") == [(i, orjson.dumps(v).decode()) for i, v in enumerate(ITEMS)]
    assert store.get_list("u", "s", "m") == ITEMS
    assert store.doctor() == []
    # repaired, the list is trusted again: the next save of the same list writes nothing
    assert store.save_list_report("u", "s", "m", ITEMS).kind == "unchanged"


@pytest.mark.parametrize("how", ["another store's save", "a transaction", "a delete", "a value"])
def test_a_damage_mark_goes_once_the_list_is_whole_again(url, database, store, raw, how):
    """A store that once read a damaged list kept it marked for good: once another store had
    repaired it and this one read it whole, an identical save still rewrote every row and moved
    the version (the other store's compare-and-set with the version it read was then refused).
    A whole read that finds the list whole, a transaction's save or delete, a value saved
    over it, all end the mark; a save while it stands still rewrites."""
    store.save_list("u", "s", "m", ["x", "y", "z"])
    raw.execute("DELETE FROM {t} WHERE session_id = 'u:s' AND state_key = 'm' AND item_index = 1")
    with pytest.raises(CorruptStateError):
        store.get_list("u", "s", "m")
    other = MysqlAgentStateStore.from_url(url, database_name=database)
    try:
        if how == "another store's save":
            other.save_list("u", "s", "m", ["x", "y", "z"])
            items, version = store.get_list_versioned("u", "s", "m")  # whole again, read whole
            assert items == ["x", "y", "z"]
        elif how == "a transaction":
            store.transaction(lambda tx: tx.save_list("u", "s", "m", ["x", "y", "z"]))
            assert check_list_rows(raw, "u:s", "m") == ["x", "y", "z"]  # it rewrote (the mark stood)
        elif how == "a delete":
            store.transaction(lambda tx: tx.delete("u", "s", "m"))
            other.save_list("u", "s", "m", ["x", "y", "z"])
        else:
            store.save("u", "s", "m", "a value")
            other.save_list("u", "s", "m", ["x", "y", "z"])
        version = other.get_list_versioned("u", "s", "m").version
        report = store.save_list_report("u", "s", "m", ["x", "y", "z"])
        assert (report.kind, report.version) == ("unchanged", version)
        assert other.save_list_if_version("u", "s", "m", ["x", "y", "z", "w"], version) == version + 1
    finally:
        other.close()


def test_a_damaged_row_not_read_is_no_reason_to_rewrite(store, raw):
    """A window that does not cover the damaged row finds nothing: the save stays incremental."""
    store.save_list("u", "s", "m", ITEMS)
    raw.execute("UPDATE {t} SET state_data = '{bad' WHERE session_id = 'u:s' AND state_key = 'm' AND item_index = 0")
    assert store.get_list("u", "s", "m", offset=2) == ITEMS[2:]
    assert store.save_list_report("u", "s", "m", ITEMS).kind == "unchanged"


def test_an_encrypted_row_tampered_with_is_repaired_by_the_next_save(url, database, store, raw):
    pytest.importorskip("cryptography", reason="encryption needs the encryption extra (make test installs it)")
    from mysql_state import Keyring

    s = MysqlAgentStateStore.from_url(url, database_name=database, encryption=Keyring({"k1": os.urandom(32)}, "k1"))
    try:
        s.save_list("u", "s", "m", ITEMS)
        # item 1's ciphertext copied onto item 2: bound to its place, it no longer opens there
        raw.execute("UPDATE {t} d JOIN {t} o ON o.session_id = d.session_id AND o.state_key = d.state_key"
                    " AND o.item_index = 1 SET d.state_data = o.state_data"
                    " WHERE d.session_id = 'u:s' AND d.state_key = 'm' AND d.item_index = 2")
        with pytest.raises(DecryptionError):
            s.get_list("u", "s", "m")
        assert s.save_list_report("u", "s", "m", ITEMS).kind != "unchanged"
        rows = item_rows(raw, "u:s", "m")
        assert [i for i, _ in rows] == [0, 1, 2] and len({d for _, d in rows}) == 3
        assert s.get_list("u", "s", "m") == ITEMS
    finally:
        s.close()


# ---- 7: list operations on a key that holds a single value -----------------------------------


def _refused(caught, key: str, operation: str) -> None:
    e = caught.value
    assert isinstance(e, MysqlStateError) and isinstance(e, TypeError)
    assert e.key == key and e.session_id == "u:s" and e.operation == operation
    assert repr(key) in str(e) and operation in str(e)


def test_pop_list_on_a_value_is_refused_and_writes_nothing(store, raw):
    store.save("u", "s", "v", {"plan": "keep me"})
    before = raw.all_rows()
    with pytest.raises(WrongTypeError) as caught:
        store.pop_list("u", "s", "v")
    _refused(caught, "v", "pop_list")
    assert raw.all_rows() == before
    assert store.get("u", "s", "v") == {"plan": "keep me"}


def test_append_list_on_a_value_is_refused_and_writes_nothing(store, raw):
    store.save("u", "s", "v", {"plan": "keep me"})
    before = raw.all_rows()
    with pytest.raises(WrongTypeError) as caught:
        store.append_list("u", "s", "v", [{"x": 1}])
    _refused(caught, "v", "append_list")
    assert raw.all_rows() == before


@pytest.mark.parametrize("seen_by", ["save_list", "get_list", "append_list"])
def test_the_one_statement_append_of_a_warm_process_is_refused_too(url, database, store, raw, seen_by):
    """This process holds the list's hash row as a hint (its own save, read or append); another
    process then saved a value over the key: the one-statement append must not go through."""
    store.save_list("u", "s", "v", [1])
    if seen_by == "get_list":
        store.get_list("u", "s", "v")
    elif seen_by == "append_list":
        store.append_list("u", "s", "v", [2])
    other = MysqlAgentStateStore.from_url(url, database_name=database)
    try:
        other.save("u", "s", "v", "a value now")
    finally:
        other.close()
    before = raw.all_rows()
    with pytest.raises(WrongTypeError):
        store.append_list("u", "s", "v", [3])
    with pytest.raises(WrongTypeError):
        store.pop_list("u", "s", "v")
    assert raw.all_rows() == before
    assert store.get("u", "s", "v") == "a value now"


def test_transaction_append_list_on_a_value_is_refused_and_rolls_back(store, raw):
    store.save("u", "s", "v", 7)
    before = raw.all_rows()

    def fn(tx):
        tx.save("u", "s", "other", "written before the mistake")
        tx.append_list("u", "s", "v", [8])

    with pytest.raises(WrongTypeError):
        store.transaction(fn)
    assert raw.all_rows() == before


def test_save_list_over_a_value_still_replaces_it(store, raw):
    """Only pop and append are refused: save_list of a whole list replaces a value, as documented."""
    store.save("u", "s", "v", "old value")
    store.save_list("u", "s", "v", [1, 2])
    assert store.get_list("u", "s", "v") == [1, 2]
    assert [r[1:3] for r in raw.rows("u:s")] == [("v", 0), ("v", 1), ("v:_hash", 0)]
    assert store.append_list("u", "s", "v", [3]) == 3 and store.pop_list("u", "s", "v") == 3


@pytest.mark.parametrize("repair", ["value", "list", "empty list"])
def test_a_value_row_beside_an_empty_lists_hash_row_is_found_and_the_next_save_rewrites_it(
        url, database, store, raw, repair):
    """The state the known gap of docs/guarantees.md leaves (a value and an empty list created at
    the same moment on one new key), made by SQL: the list read is a typed error, never a list;
    the value read is the value; the next save of either kind, by a process that saw nothing,
    rewrites the key whole."""
    store.save_list("u", "s", "k", [])
    raw.execute("INSERT INTO {t} (session_id, state_key, item_index, state_data, version)"
                " VALUES ('u:s', 'k', 0, '{\"v\": 1}', 1)")
    with pytest.raises(CorruptStateError):
        store.get_list("u", "s", "k")
    assert store.get("u", "s", "k") == {"v": 1}
    other = MysqlAgentStateStore.from_url(url, database_name=database)
    try:
        if repair == "value":
            other.save("u", "s", "k", {"x": 2})
            assert other.get("u", "s", "k") == store.get("u", "s", "k") == {"x": 2}
            rows = [("k", 0)]
        else:
            items = [1, 2] if repair == "list" else []
            other.save_list("u", "s", "k", items)
            assert other.get_list("u", "s", "k") == items and store.get_list("u", "s", "k") == items
            rows = [("k", i) for i in range(len(items))] + [("k:_hash", 0)]
    finally:
        other.close()
    assert [r[1:3] for r in raw.rows("u:s")] == rows


def test_a_list_of_one_item_is_still_a_list(store, raw):
    """The rule is precise: a list of one item (our hash row, or the Java store's) is a list."""
    store.save_list("u", "s", "mine", ["only"])
    assert store.pop_list("u", "s", "mine") == "only" and store.get_list("u", "s", "mine") == []
    raw.execute("INSERT INTO {t} (session_id, state_key, item_index, state_data, version) VALUES"
                " ('u:s', 'java', 0, '\"only\"', 1), ('u:s', 'java:_hash', 0, 'c0ffee', 1)")
    assert store.append_list("u", "s", "java", ["next"]) == 2
    assert store.get_list("u", "s", "java") == ["only", "next"]
    assert store.pop_list("u", "s", "java") == "next"


# ---- a list with a missing item row --------------------------------------------------------


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


def _hashless_list(raw, sid: str, key: str, items: list, version: int = 1) -> None:
    """A list whose hash row is gone (deleted by hand, or a writer that left none): its item
    rows only, numbered 0..n-1."""
    for i, item in enumerate(items):
        raw.execute("INSERT INTO {t} (session_id, state_key, item_index, state_data, version)"
                    " VALUES (%s, %s, %s, %s, %s)", (sid, key, i, orjson.dumps(item).decode(), version))


def _rows(raw, sid: str = "u:s") -> list[tuple]:
    """Every row of the session, as plain SQL reads it: (key, index, text, version)."""
    return raw.query("SELECT state_key, item_index, state_data, version FROM {t} WHERE session_id = %s"
                     " ORDER BY state_key, item_index", (sid,))


@pytest.mark.parametrize("how", ["save_list_if_version", "save_many"])
def test_a_compare_and_set_with_the_version_read_of_a_list_without_a_hash_row_succeeds(store, raw, how):
    """A list left without a hash row read as version 0, and a compare-and-set with that 0 (the
    contract's "absent") replaced it. It reads as version 1 (its rows carry no version of the
    list: as rows written without one, it reads as 1) in every read, get_versioned included,
    and a compare-and-set with that 1 succeeds once, and only once."""
    _hashless_list(raw, "u:s", "m", ["a", "b", "c"], version=4)
    items, version = store.get_list_versioned("u", "s", "m")
    assert (items, version) == (["a", "b", "c"], 1)
    assert store.get_versioned("u", "s", "m").version == 1
    assert store.get_many("u", "s", lists=["m"], versioned=True)["m"] == (["a", "b", "c"], 1)
    store.save("u", "s", "x", "other")
    assert store.get_many("u", "s", lists=["x", "m"], versioned=True)["m"] == (["a", "b", "c"], 1)  # not the first
    assert store.get_many("u", "s", values=["m"], versioned=True)["m"] == ("a", 1)
    if how == "save_list_if_version":
        new = store.save_list_if_version("u", "s", "m", items + ["d"], version)
    else:
        new = store.save_many("u", "s", lists={"m": items + ["d"]}, expected_versions={"m": version}).versions["m"]
    assert new > 4  # past every row the key had: its versions never go back below what a row said
    assert check_list_rows(raw, "u:s", "m") == ["a", "b", "c", "d"]
    assert store.get_list_versioned("u", "s", "m") == (["a", "b", "c", "d"], new)
    stored = raw.query("SELECT version FROM {t} WHERE session_id = 'u:s' AND state_key = 'm:_hash'")[0][0]
    assert stored == new
    before = raw.rows("u:s")
    assert store.save_list_if_version("u", "s", "m", ["lost"], version) == -1  # the same read again: stale
    assert raw.rows("u:s") == before


HASHLESS = {
    "its hash row deleted": "DELETE FROM {t} WHERE session_id = 'u:s' AND state_key = 'm:_hash'",
    "its hash row and item 0 deleted": "DELETE FROM {t} WHERE session_id = 'u:s'"
                                       " AND (state_key = 'm:_hash' OR (state_key = 'm' AND item_index = 0))",
}


def _list_cas(store, how: str, items: list, expected: int) -> int:
    """A list compare-and-set by ``how``: the new version, or -1 (stale)."""
    from mysql_state import StaleStateError

    if how == "save_list_if_version":
        return store.save_list_if_version("u", "s", "m", items, expected)
    if how == "async":
        import asyncio

        from mysql_state.aio import AsyncMysqlAgentStateStore
        return asyncio.run(AsyncMysqlAgentStateStore(store, close_store=False).save_list_if_version(
            "u", "s", "m", items, expected))
    try:
        if how == "save_list_report":
            return store.save_list_report("u", "s", "m", items, expected_version=expected).version
        return store.save_many("u", "s", lists={"m": items}, values={"note": 1},
                               expected_versions={"m": expected}).versions["m"]
    except StaleStateError as exc:
        assert exc.key == "m" and exc.expected == expected
        return -1


@pytest.mark.parametrize("damage", sorted(HASHLESS))
@pytest.mark.parametrize("how", ["save_list_if_version", "save_list_report", "save_many", "async"])
def test_a_list_without_its_hash_row_is_not_absent_to_a_compare_and_set(url, database, store, raw, damage, how):
    """A list whose hash row was gone counted as absent for a compare-and-set expecting 0
    (create only while absent): save_list_if_version(..., 0) wrote its list over the items,
    while save_if_version(..., 0) of the same key refused (found by an audit). Version 0 means
    absent everywhere: such a list is stale to 0, nothing written; one that lost item 0 too has
    no version a read gives (every read of it raises), so every version is stale to it."""
    store.save_list("u", "s", "m", ["a", "b", "c"])
    raw.execute(HASHLESS[damage])
    before = _rows(raw)
    fresh = MysqlAgentStateStore.from_url(url, database_name=database)  # nothing remembered of the list
    try:
        assert fresh.save_if_version("u", "s", "m", "value", 0) == -1
        if damage == "its hash row deleted":
            assert fresh.get_list_versioned("u", "s", "m") == (["a", "b", "c"], 1)
            assert fresh.get_versioned("u", "s", "m").version == 1
        else:
            for read in (lambda: fresh.get_list_versioned("u", "s", "m"), lambda: fresh.get_versioned("u", "s", "m")):
                with pytest.raises(CorruptStateError):
                    read()
        assert _list_cas(fresh, how, ["X"], 0) == -1
        assert _rows(raw) == before
        if damage != "its hash row deleted":
            assert _list_cas(fresh, how, ["X"], 1) == -1
            assert _rows(raw) == before
    finally:
        fresh.close()


def test_a_value_compare_and_set_of_a_key_without_row_0_and_hash_row_writes_nothing(store, raw):
    """save_many(values=..., expected_versions={key: 0}) took a key whose rows lost row 0 and
    the list's hash row for absent and wrote the value over them (save_if_version(..., 0)
    refused it): stale, nothing written."""
    from mysql_state import StaleStateError

    store.save_list("u", "s", "m", ["a", "b", "c"])
    raw.execute(HASHLESS["its hash row and item 0 deleted"])
    before = _rows(raw)
    for expected in (0, 1):
        with pytest.raises(StaleStateError, match="neither row 0 nor a list.s hash row") as caught:
            store.save_many("u", "s", values={"m": "value"}, expected_versions={"m": expected})
        assert (caught.value.key, caught.value.expected, caught.value.stored) == ("m", expected, -1)
        assert _rows(raw) == before
    assert store.save_if_version("u", "s", "m", "value", 1) == -1
    assert _rows(raw) == before


GAPPED = {  # a list of 1, 2, 3 that lost item 1: its hash row the Java store's, or none
    "java": "UPDATE {t} SET state_data = '3f2a9c', version = 0 WHERE session_id = 'u:s' AND state_key = 'm:_hash'",
    "none": "DELETE FROM {t} WHERE session_id = 'u:s' AND state_key = 'm:_hash'",
}


def _async(store):
    from mysql_state.aio import AsyncMysqlAgentStateStore

    return AsyncMysqlAgentStateStore(store, close_store=False)


GAP_READS = {
    "list_length": lambda s: s.list_length("u", "s", "m"),
    "append_list of no items": lambda s: s.append_list("u", "s", "m", []),
    "append_lists of no items": lambda s: s.append_lists("u", "s", {"m": []}),
    "append_lists at its count": lambda s: s.append_lists("u", "s", {"m": []}, at={"m": 2}),
    "transaction list_length": lambda s: s.transaction(lambda tx: tx.list_length("u", "s", "m")),
    "transaction append_lists at its count": lambda s: s.transaction(
        lambda tx: tx.append_lists("u", "s", {"m": []}, at={"m": 2})),
    "async list_length": lambda s: __import__("asyncio").run(_async(s).list_length("u", "s", "m")),
}


@pytest.mark.parametrize("hash_row", sorted(GAPPED))
@pytest.mark.parametrize("read", sorted(GAP_READS))
def test_the_length_of_a_list_with_a_gap_and_no_hash_row_of_ours_is_damage_not_a_count(store, raw, hash_row, read):
    """list_length counted the rows of a list without a hash row of this store: 2 for items 0
    and 2, where the whole read, an append and a pop raise (found by an audit). The count's
    statement takes the lowest and highest index too (no statement more; the count was a scan
    of the list's rows already): a gap raises CorruptStateError, nothing written."""
    store.save_list("u", "s", "m", [1, 2, 3])
    raw.execute(GAPPED[hash_row])
    raw.execute("DELETE FROM {t} WHERE session_id = 'u:s' AND state_key = 'm' AND item_index = 1")
    before = _rows(raw)
    with pytest.raises(CorruptStateError, match="list 'm' of session 'u:s' is damaged") as caught:
        GAP_READS[read](store)
    assert caught.value.key == "m"
    assert _rows(raw) == before


@pytest.mark.parametrize("hash_row", sorted(GAPPED))
def test_a_list_without_a_hash_row_of_ours_and_no_gap_still_reads_its_length(store, other, raw, hash_row):
    store.save_list("u", "s", "m", [1, 2, 3])
    raw.execute(GAPPED[hash_row])
    assert other.list_length("u", "s", "m") == 3  # (another worker: nothing remembered of the list)
    assert other.transaction(lambda tx: tx.list_length("u", "s", "m")) == 3
    assert other.append_lists("u", "s", {"m": []}, at={"m": 3}) == {"m": 3}
    assert other.get_list("u", "s", "m", offset=-1) == [3]
    raw.execute("DELETE FROM {t} WHERE session_id = 'u:s' AND state_key IN ('m', 'm:_hash')")
    assert other.list_length("u", "s", "m") == 0  # absent
    store.save("u", "s", "m", "a value")
    assert other.list_length("u", "s", "m") == 1  # a value: one row, as before


def test_a_value_save_after_get_many_of_a_list_without_a_hash_row_replaces_the_whole_list(store, raw):
    """get_many(values=[k]) of a list left without a hash row sees row 0 only; the save that
    followed took it for a single value it had seen and updated row 0 in one statement, leaving
    items 1.. behind (the key then read as a list whose first item was the value). The value
    replaces the whole list, as save does over any list."""
    _hashless_list(raw, "u:s", "m", ["a", "b", "c"])
    store.get_many("u", "s", values=["m"])
    store.save_many("u", "s", values={"m": {"v": 1}})
    assert [r[1:4] for r in raw.rows("u:s")] == [("m", 0, '{"v":1}')]
    assert store.get("u", "s", "m") == {"v": 1}


def test_windows_still_read_when_the_damage_is_elsewhere(store, raw):
    store.save_list("u", "s", "m", list(range(10)))
    raw.execute("DELETE FROM {t} WHERE session_id='u:s' AND state_key='m' AND item_index=2")
    assert store.get_list("u", "s", "m", offset=5, limit=3) == [5, 6, 7]
    assert store.get_list("u", "s", "m", offset=-3) == [7, 8, 9]
    with pytest.raises(CorruptStateError):
        store.get_list("u", "s", "m", offset=1, limit=3)


# ---- unreadable rows -----------------------------------------------------------------------


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


# ---- get_many's one-column read (issue 21): every shape of what it may meet -------------------


@pytest.mark.parametrize("damage", ["missing item", "extra item", "renumbered"])
def test_get_many_finds_damage_in_its_first_list_and_in_the_others(store, raw, damage):
    for key in ("a", "m", "z"):  # the first list asked for ("m"), another ("z"), a value key ("a")
        if key == "a":
            store.save("u", "s", "a", {"v": 1})
        else:
            store.save_list("u", "s", key, ITEMS)
    for key in ("m", "z"):
        want = {"m": ITEMS, "z": ITEMS}
        assert store.get_many("u", "s", values=["a"], lists=["m", "z"]) == {"a": {"v": 1}, **want}
        if damage == "missing item":
            raw.execute("DELETE FROM {t} WHERE session_id = 'u:s' AND state_key = %s AND item_index = 1", (key,))
        elif damage == "extra item":
            raw.execute("INSERT INTO {t} (session_id, state_key, item_index, state_data) VALUES ('u:s', %s, 3, '1')", (key,))
        else:
            raw.execute("UPDATE {t} SET item_index = 5 WHERE session_id = 'u:s' AND state_key = %s AND item_index = 2", (key,))
        with pytest.raises(CorruptStateError) as caught:
            store.get_many("u", "s", values=["a"], lists=["m", "z"])
        assert caught.value.key == key
        store.save_list("u", "s", key, ITEMS)  # repaired
    assert store.get_many("u", "s", values=["a"], lists=["m", "z"]) == {"a": {"v": 1}, "m": ITEMS, "z": ITEMS}


def test_get_many_reads_a_list_the_java_store_wrote(store, raw):
    """Items without a hash row of ours (the Java store's, or none): read again with their
    indexes, as get_list reads them; a value key holding a list reads as get does (its row 0)."""
    for i, item in enumerate(ITEMS):
        raw.execute("INSERT INTO {t} (session_id, state_key, item_index, state_data) VALUES ('u:s', 'm', %s, %s)",
                    (i, orjson.dumps(item).decode()))
    store.save_list("u", "s", "l", [1, 2])
    got = store.get_many("u", "s", values=["l"], lists=["m"], versioned=True)
    assert got["m"].value == ITEMS and got["l"].value == store.get("u", "s", "l") == 1
    assert store.get_many("u", "s", lists=["m", "l"]) == {"m": ITEMS, "l": [1, 2]}
    assert store.get_many("u", "s", lists=["l", "m"]) == {"m": ITEMS, "l": [1, 2]}


# ---- rows whose text starts like the read statements' marks ----------------------------------

#: texts no JSON encoder writes (a JSON text cannot start with a control character) but that
#: start like the marks the one-column reads put on hash rows and other keys' rows
MARK_LIKE = ["\x1f", "\x1fjunk", "\x1f1,0,199\x1f{}", "\x1f\x1f", "\x1f\x1fm\x1f0\x1f1\x1f1"]
LONG = list(range(200))


@pytest.mark.parametrize("text", MARK_LIKE)
@pytest.mark.parametrize("where", ["first", "last"])
def test_an_item_that_starts_like_a_mark_is_a_typed_error_in_every_read(url, database, store, raw, text, where):
    """Whole reads (short and long shapes), windows, tails and get_many, by a store that saw the
    list and by one that never did: such an item is damage (CorruptStateError naming the key),
    never a ValueError and never a wrong answer, with or without the list's hash row."""
    index = 0 if where == "first" else len(LONG) - 1
    fresh = MysqlAgentStateStore.from_url(url, database_name=database)

    def reads(s):
        return {
            "get_list": lambda: s.get_list("u", "s", "m"),
            "window": lambda: s.get_list("u", "s", "m", offset=0 if where == "first" else 150, limit=50),
            "tail": lambda: s.get_list("u", "s", "m", offset=-50 if where == "last" else -200),
            "get_many": lambda: s.get_many("u", "s", values=["a"], lists=["m"]),
            "get_many second": lambda: s.get_many("u", "s", lists=["l", "m"]),
        }
    store.save("u", "s", "a", {"v": 1})
    store.save_list("u", "s", "l", [1, 2])
    for hash_row in (True, False):
        store.save_list("u", "s", "m", LONG)
        assert store.get_list("u", "s", "m") == LONG  # this process has seen it long
        raw.execute("UPDATE {t} SET state_data = %s WHERE session_id = 'u:s' AND state_key = 'm' AND item_index = %s",
                    (text, index))
        if not hash_row:
            raw.execute("DELETE FROM {t} WHERE session_id = 'u:s' AND state_key = 'm:_hash'")
        for who, s in (("seen", store), ("fresh", fresh)):
            for name, read in reads(s).items():
                with pytest.raises(CorruptStateError) as caught:
                    read()
                assert caught.value.key == "m", (who, name, hash_row)
    fresh.close()


def test_a_builtin_type_checks_the_stored_kind_and_never_hands_back_another(store, raw):
    store.save("u", "kinds", "n", "7")
    store.save("u", "kinds", "f", 2)
    store.save("u", "kinds", "b", True)
    store.save_list("u", "kinds", "mixed", ["a", 1])
    rows = lambda: raw.query("SELECT state_key, item_index, state_data, version FROM {t}"  # noqa: E731
                             " WHERE session_id = 'u:kinds' AND state_key NOT LIKE 'texts%%' ORDER BY 1, 2")
    before = rows()
    with pytest.raises(TypeError, match=r"type=int reads a JSON integer; the stored value is '7' \(str\)"):
        store.get("u", "kinds", "n", type=int)
    with pytest.raises(TypeError, match=r"type=int reads a JSON integer; the stored value is True \(bool\)"):
        store.get("u", "kinds", "b", type=int)
    with pytest.raises(TypeError, match=r"key 'mixed', item_index 1: type=str reads a JSON string; the stored value is 1 \(int\)"):
        store.get_list("u", "kinds", "mixed", type=str)
    got = store.get("u", "kinds", "f", type=float)
    assert got == 2.0 and type(got) is float
    assert store.get("u", "kinds", "n", type=str) == "7" and store.get("u", "kinds", "b", type=bool) is True
    store.save_list("u", "kinds", "texts", ["a", "b"])
    assert store.get_list("u", "kinds", "texts", type=str) == ["a", "b"]  # type= is each item's
    assert store.get("u", "kinds", "missing", type=int) is None  # no value is no mismatch
    # the reads wrote nothing, and the lists read fine afterwards (a type mismatch is not damage)
    assert rows() == before
    assert store.get_list("u", "kinds", "mixed") == ["a", 1]


def test_a_typed_read_of_another_shape_is_a_type_error_never_the_value_as_it_was(store, raw):
    """Containers, unions, datetimes and dataclasses asked of a value of another shape: a
    TypeError naming the row, the type and the value; the reads write nothing."""
    import dataclasses
    import datetime
    import uuid
    from typing import Optional, Union

    @dataclasses.dataclass
    class Point:
        x: int = 0

    store.save("u", "shapes", "obj", {"a": 1})
    store.save("u", "shapes", "arr", [1, "two"])
    store.save("u", "shapes", "text", "not a date")
    store.save("u", "shapes", "num", 7)
    rows = lambda: raw.query("SELECT state_key, item_index, state_data, version FROM {t}"  # noqa: E731
                             " WHERE session_id = 'u:shapes' ORDER BY 1, 2")
    before = rows()
    refused = [
        ("obj", list[int], r"key 'obj', item_index 0: type=list\[int\] reads a JSON array; the stored value is \{'a': 1\} \(dict\)"),
        ("arr", dict[str, int], r"key 'arr', item_index 0: type=dict\[str, int\] reads a JSON object; the stored value is \[1, 'two'\] \(list\)"),
        ("arr", list[int], r"key 'arr', item_index 0: type=int reads a JSON integer; the stored value is 'two' \(str\)"),
        ("arr", tuple[int, str, int], r"type=tuple\[int, str, int\] reads a JSON array of 3 items; the stored value is \[1, 'two'\]"),
        ("obj", Union[int, str], r"type=Union\[int, str\] matches none of its members; the stored value is \{'a': 1\} \(dict\)"),
        ("text", datetime.datetime, r"type=datetime reads an ISO 8601 date and time; the stored value is 'not a date' \(str\)"),
        ("num", uuid.UUID, r"type=UUID reads a UUID string; the stored value is 7 \(int\)"),
        ("arr", Point, r"type=Point reads a JSON object; the stored value is \[1, 'two'\] \(list\)"),
    ]
    for key, tp, message in refused:
        with pytest.raises(TypeError, match=message):
            store.get("u", "shapes", key, type=tp)
    # the shapes that match are built, an Optional is its member or None, a union tries in order
    assert store.get("u", "shapes", "arr", type=tuple[int, str]) == (1, "two")
    assert store.get("u", "shapes", "arr", type=list[Union[int, str]]) == [1, "two"]
    assert store.get("u", "shapes", "num", type=Optional[float]) == 7.0
    assert store.get("u", "shapes", "num", type=Union[str, int]) == 7
    assert store.get("u", "shapes", "missing", type=Optional[list[int]]) is None
    store.save_list("u", "shapes", "points", [{"x": 1}, 2])
    with pytest.raises(TypeError, match=r"key 'points', item_index 1: type=Point reads a JSON object; the stored value is 2 \(int\)"):
        store.get_list("u", "shapes", "points", type=Point)
    assert [r for r in rows() if not r[0].startswith("points")] == before  # the reads wrote nothing
    assert store.get_list("u", "shapes", "points") == [{"x": 1}, 2]


# ---- 2026-12-07 audit: damage that read as another answer ------------------------------------


def test_an_item_row_at_a_negative_index_is_damage_never_the_hash_row(store, raw):
    """A list read marks its hash row with an index below every INT: an item row left at -1
    (by hand) was taken for the hash row, and a key holding only it read as an empty list."""
    raw.execute("INSERT INTO {t} (session_id, state_key, item_index, state_data) VALUES ('u:s', 'm', -1, '\"x\"')")
    for read in (lambda: store.get_list("u", "s", "m"), lambda: store.get_list_versioned("u", "s", "m"),
                 lambda: store.get_many("u", "s", lists=["m"]),
                 lambda: store.transaction(lambda tx: tx.get_list("u", "s", "m"))):
        with pytest.raises(CorruptStateError, match="'m'"):
            read()
    # in get_many, a list after the first with such a row is named; a value's stray row is not
    # read (a value is its row 0, as get reads it): it used to raise IndexError
    store.save_list("u", "t", "a", [1, 2])
    store.save_list("u", "t", "b", [3, 4])
    store.save("u", "t", "v", {"n": 1})
    raw.execute("INSERT INTO {t} (session_id, state_key, item_index, state_data) VALUES ('u:t', 'b', -1, '5')")
    raw.execute("INSERT INTO {t} (session_id, state_key, item_index, state_data) VALUES ('u:t', 'v', -1, '5')")
    assert store.get_many("u", "t", values=["v"]) == {"v": {"n": 1}} == {"v": store.get("u", "t", "v")}
    assert store.get_many("u", "t", values=["v"], lists=["a"]) == {"v": {"n": 1}, "a": [1, 2]}
    with pytest.raises(CorruptStateError, match="'b'"):
        store.get_many("u", "t", values=["v"], lists=["a", "b"])


def test_get_of_a_list_whose_item_0_is_lost_raises_never_the_default(store, raw):
    store.save_list("u", "s", "m", ["a", "b", "c"])
    raw.execute("DELETE FROM {t} WHERE session_id = 'u:s' AND state_key = 'm' AND item_index = 0")
    for read in (lambda: store.get("u", "s", "m", default="DEFAULT"), lambda: store.get_versioned("u", "s", "m"),
                 lambda: store.get_many("u", "s", values=["m"]),
                 lambda: store.transaction(lambda tx: tx.get("u", "s", "m"))):
        with pytest.raises(CorruptStateError, match="3 items, but item 0 is missing"):
            read()
    store.save_list("u", "s", "e", [])
    assert store.get("u", "s", "e", default="DEFAULT") == "DEFAULT"  # an empty list has no item 0: no damage


def test_a_hash_row_of_this_store_cut_short_is_damage_not_another_writers_row(store, raw):
    """A hash row that begins as this store's but does not parse was read as "no hash row this
    store reads" (the Java store's), which only checks for gaps: a list that also lost its last
    item read as the shorter list. The next whole save repairs it."""
    store.save_list("u", "s", "m", ["a", "b", "c"])
    raw.execute("DELETE FROM {t} WHERE session_id = 'u:s' AND state_key = 'm' AND item_index = 2")
    raw.execute("UPDATE {t} SET state_data = LEFT(state_data, 40) WHERE session_id = 'u:s' AND state_key = 'm:_hash'")
    for read in (lambda: store.get_list("u", "s", "m"), lambda: store.get_list("u", "s", "m", offset=-1),
                 lambda: store.get_list("u", "s", "m", offset=0, limit=1),
                 lambda: store.get_many("u", "s", lists=["m"], versioned=True)):
        with pytest.raises(CorruptStateError, match="its hash row cannot be read"):
            read()
    store.save_list("u", "s", "m", ["a", "b", "c"])
    assert check_list_rows(raw, "u:s", "m") == ["a", "b", "c"] and store.get_list("u", "s", "m") == ["a", "b", "c"]


def test_a_value_read_as_a_list_gives_the_version_a_list_compare_and_set_compares_with(store, raw):
    """A key holding one value, read as a list, gave version 0 while a list compare-and-set
    compares with the value's version: the read-modify-write loop failed every time."""
    store.save("u", "s", "m", "first")
    store.save("u", "s", "m", "second")
    assert store.get_versioned("u", "s", "m").version == 2
    assert tuple(store.get_list_versioned("u", "s", "m")) == (["second"], 2)
    assert store.get_many("u", "s", lists=["m"], versioned=True)["m"] == (["second"], 2)
    store.save("u", "s", "x", "other")
    assert store.get_many("u", "s", lists=["x", "m"], versioned=True)["m"] == (["second"], 2)  # not the first list
    items, version = store.get_list_versioned("u", "s", "m")
    assert store.save_list_if_version("u", "s", "m", items + ["more"], version) > 0
    assert check_list_rows(raw, "u:s", "m") == ["second", "more"]
    assert store.save_list_if_version("u", "s", "m", ["lost"], version) == -1


def test_an_append_of_no_items_to_a_value_is_refused_as_an_append_of_items_is(store, raw):
    """append_list(..., []) on a key holding one value answered 1 (its rows counted) where an
    append of items raises WrongTypeError (audit of 2026-12-07)."""
    store.save("u", "s", "plan", {"step": 1})
    before = raw.rows("u:s")
    for call in (lambda: store.append_list("u", "s", "plan", []), lambda: store.append_lists("u", "s", {"plan": []}),
                 lambda: store.transaction(lambda tx: tx.append_list("u", "s", "plan", [])),
                 lambda: store.transaction(lambda tx: tx.append_lists("u", "s", {"plan": []}))):
        with pytest.raises(WrongTypeError, match="append_list"):
            call()
    assert raw.rows("u:s") == before
    for call in (lambda: store.append_lists("u", "s", {"plan": []}, at={"plan": 1}),  # LangGraph's form
                 lambda: store.transaction(lambda tx: tx.append_lists("u", "s", {"plan": []}, at={"plan": 1}))):
        with pytest.raises(WrongTypeError, match="append_lists"):
            call()
    assert raw.rows("u:s") == before
    store.save_list("u", "s", "one", ["x"])  # a list of one item is a list
    assert store.append_list("u", "s", "one", []) == 1 and store.append_lists("u", "s", {"one": []}) == {"one": 1}
    assert store.append_list("u", "s", "absent", []) == 0


def test_an_append_of_no_items_never_takes_a_list_of_one_being_created_for_a_value(store, other):
    """The value check of an empty append read the hash row, the count and row 0 in three
    statements: a list of one created between them looked like a value (WrongTypeError ~3 %
    of the time against a writer that creates and deletes it; review of 2026-12-07). One
    statement decides now."""
    import threading
    import time

    stop, refused = threading.Event(), []

    def writer():
        while not stop.is_set():
            other.save_list("u", "race", "k", ["only item"])
            other.delete("u", "race", "k")

    t = threading.Thread(target=writer)
    t.start()
    try:
        end = time.monotonic() + 2.0
        while time.monotonic() < end:
            try:
                assert store.append_list("u", "race", "k", []) in (0, 1)
            except WrongTypeError as exc:
                refused.append(exc)
    finally:
        stop.set()
        t.join()
    assert refused == []


def test_a_value_read_as_a_list_while_a_list_replaces_it_gets_no_version_of_the_list(store, other, raw, monkeypatch):
    """The version of a value read as a list is read in a second statement: another writer's
    list saved between the two gave the old value the new list's version, and a compare-and-set
    with it wrote over that list (review of 2026-12-07). The version is now the value's only
    when the key still holds that value alone, else 0 (stale for any compare-and-set)."""
    from mysql_state import values

    store.save("u", "s", "m", "old value")
    real, fired = values.get, []

    def between(*a, **kw):  # the other writer commits between the read and its version
        if not fired:
            fired.append(1)
            other.save_list("u", "s", "m", ["a", "b"])
        return real(*a, **kw)

    monkeypatch.setattr(values, "get", between)
    items, version = store.get_list_versioned("u", "s", "m")
    monkeypatch.setattr(values, "get", real)
    assert fired and (items, version) == (["old value"], 0)
    assert store.save_list_if_version("u", "s", "m", items + ["mine"], version) == -1
    assert check_list_rows(raw, "u:s", "m") == ["a", "b"]


def test_the_damage_message_counts_what_is_missing_and_what_lies_outside(store, raw):
    """The message named the missing rows from the count alone: with an item renumbered past
    the end and two lost it said 2 missing (review of 2026-12-07). It counts the rows inside
    the range."""
    store.save_list("u", "s", "m", ["a", "b", "c", "d", "e"])
    raw.execute("UPDATE {t} SET item_index = 9 WHERE session_id = 'u:s' AND state_key = 'm' AND item_index = 2")
    raw.execute("DELETE FROM {t} WHERE session_id = 'u:s' AND state_key = 'm' AND item_index IN (3, 4)")
    with pytest.raises(CorruptStateError, match=r"numbered 0\.\.9 \(3 missing and 1 outside it\)"):
        store.get_list("u", "s", "m")
    with pytest.raises(CorruptStateError, match=r"\(3 missing and 1 outside it\)"):
        store.get_list("u", "s", "m", offset=0, limit=5)


VALUE_READS = {
    "get": lambda s, k: s.get("u", "s", k, default="DEFAULT"),
    "get_versioned": lambda s, k: s.get_versioned("u", "s", k),
    "get_many": lambda s, k: s.get_many("u", "s", values=[k]),
    "transaction": lambda s, k: s.transaction(lambda tx: tx.get("u", "s", k, default="DEFAULT")),
}


@pytest.mark.parametrize("read", sorted(VALUE_READS))
@pytest.mark.parametrize("hash_row", ["ours", "java", "none"])
def test_a_key_whose_rows_lost_row_0_is_damage_never_absent(store, raw, read, hash_row):
    """A list that lost item 0 and its hash row (or whose hash row is another writer's) read as
    no state yet: get gave the default, get_many left the key out (found by a damage audit)."""
    store.save_list("u", "s", "m", ["a", "b", "c"])
    if hash_row == "java":
        raw.execute("UPDATE {t} SET state_data = '3f2a9c' WHERE session_id = 'u:s' AND state_key = 'm:_hash'")
    raw.execute("DELETE FROM {t} WHERE session_id = 'u:s' AND ((state_key = 'm' AND item_index = 0)"
                + (" OR state_key = 'm:_hash'" if hash_row == "none" else "") + ")")
    with pytest.raises(CorruptStateError, match="'m' of session 'u:s' is damaged") as info:
        VALUE_READS[read](store, "m")
    assert info.value.key == "m"
    assert store.key_kind("u", "s", "m") == "list"


@pytest.mark.parametrize("read", sorted(VALUE_READS))
def test_a_value_moved_off_row_0_is_damage_and_its_key_is_not_absent(store, raw, read):
    store.save("u", "s", "v", {"a": 1})
    raw.execute("UPDATE {t} SET item_index = -1 WHERE session_id = 'u:s' AND state_key = 'v'")
    with pytest.raises(CorruptStateError, match="it has rows but no row 0"):
        VALUE_READS[read](store, "v")
    assert store.key_kind("u", "s", "v") == "list"  # something is there: its list read names the damage
    with pytest.raises(CorruptStateError):
        store.get_list("u", "s", "v")
    store.save("u", "s", "v", {"a": 2})  # a value save replaces whatever is under the key
    assert raw.query("SELECT item_index, state_data FROM {t} WHERE session_id = 'u:s' AND state_key = 'v'") == [
        (0, '{"a":2}')]


@pytest.mark.parametrize("how", ["store", "transaction", "fresh store"])
def test_create_only_while_absent_refuses_a_key_whose_rows_lost_row_0(url, database, store, raw, how):
    """save_if_version(..., 0) took a list that lost item 0 and its hash row for absent: it wrote
    row 0 and the damage read as a whole list again (found by a damage audit)."""
    store.save_list("u", "s", "m", ["a", "b", "c"])
    raw.execute("DELETE FROM {t} WHERE session_id = 'u:s' AND (state_key = 'm:_hash' OR item_index = 0)")
    before = raw.query("SELECT state_key, item_index, state_data, version FROM {t} WHERE session_id = 'u:s'"
                       " ORDER BY state_key, item_index")
    if how == "transaction":
        with pytest.raises(CorruptStateError):  # its read sees the damage before any write
            store.transaction(lambda tx: tx.get("u", "s", "m") or tx.save("u", "s", "m", {"new": 1}))
    else:
        s = store if how == "store" else MysqlAgentStateStore.from_url(url, database_name=database)
        try:
            assert s.save_if_version("u", "s", "m", {"new": 1}, 0) == -1
        finally:
            if s is not store:
                s.close()
    assert raw.query("SELECT state_key, item_index, state_data, version FROM {t} WHERE session_id = 'u:s'"
                     " ORDER BY state_key, item_index") == before


POP_DAMAGE = {
    "a row past the end": "INSERT INTO {t} (session_id, state_key, item_index, state_data, version)"
                          " VALUES ('u:s', 'm', 3, '\"stray\"', 1)",
    "a row far past the end": "INSERT INTO {t} (session_id, state_key, item_index, state_data, version)"
                              " VALUES ('u:s', 'm', 100000, '\"far\"', 1)",
    "a row at -1": "INSERT INTO {t} (session_id, state_key, item_index, state_data, version)"
                   " VALUES ('u:s', 'm', -1, '\"negative\"', 1)",
    "item 0 lost": "DELETE FROM {t} WHERE session_id = 'u:s' AND state_key = 'm' AND item_index = 0",
    "a hash row that cannot be read": "UPDATE {t} SET state_data = LEFT(state_data, 40)"
                                      " WHERE session_id = 'u:s' AND state_key = 'm:_hash'",
    "a gap in a list without our hash row": "UPDATE {t} SET state_data = '3f2a9c'"
                                            " WHERE session_id = 'u:s' AND state_key = 'm:_hash'",
}


@pytest.mark.parametrize("damage", sorted(POP_DAMAGE))
def test_pop_list_of_a_damaged_list_raises_and_removes_nothing(store, raw, damage):
    """pop_list deleted every row from the last item on (a stray row past the end with it) and
    renumbered a list without a hash row of ours, gaps and all: damage every read reports was
    popped over and hidden (found by a damage audit)."""
    store.save_list("u", "s", "m", ["a", "b", "c"])
    raw.execute(POP_DAMAGE[damage])
    if damage.endswith("without our hash row"):
        raw.execute("DELETE FROM {t} WHERE session_id = 'u:s' AND state_key = 'm' AND item_index = 1")
    before = raw.query("SELECT state_key, item_index, state_data FROM {t} WHERE session_id = 'u:s'"
                       " ORDER BY state_key, item_index")
    with pytest.raises(CorruptStateError, match="list 'm' of session 'u:s' is damaged"):
        store.pop_list("u", "s", "m")
    assert raw.query("SELECT state_key, item_index, state_data FROM {t} WHERE session_id = 'u:s'"
                     " ORDER BY state_key, item_index") == before
    with pytest.raises(CorruptStateError):
        store.get_list("u", "s", "m")


def test_pop_list_of_a_list_that_lost_a_middle_row_pops_its_last_item_and_the_damage_stays_visible(store, raw):
    """The pop looks at the list's ends only (two index dives, not a scan of its rows): what it
    removes is the last item and nothing else, and the next read still names the damage."""
    store.save_list("u", "s", "m", ["a", "b", "c"])
    raw.execute("DELETE FROM {t} WHERE session_id = 'u:s' AND state_key = 'm' AND item_index = 1")
    assert store.pop_list("u", "s", "m") == "c"
    assert raw.query("SELECT item_index FROM {t} WHERE session_id = 'u:s' AND state_key = 'm'") == [(0,)]
    with pytest.raises(CorruptStateError, match="list 'm' of session 'u:s' is damaged"):
        store.get_list("u", "s", "m")


def test_pop_list_of_a_whole_list_without_our_hash_row_still_pops(store, raw):
    store.save_list("u", "s", "m", ["a", "b", "c"])
    raw.execute("UPDATE {t} SET state_data = '3f2a9c' WHERE session_id = 'u:s' AND state_key = 'm:_hash'")
    assert store.pop_list("u", "s", "m") == "c"
    assert store.get_list("u", "s", "m") == ["a", "b"]


@pytest.mark.parametrize("read", ["store", "transaction", "async"])
def test_list_length_of_a_list_whose_hash_row_cannot_be_read_is_damage_not_a_count(store, raw, read):
    store.save_list("u", "s", "m", ["a", "b", "c", "d", "e"])
    raw.execute("UPDATE {t} SET state_data = REPLACE(state_data, '\"n\":5', '\"n\":-1')"
                " WHERE session_id = 'u:s' AND state_key = 'm:_hash'")
    with pytest.raises(CorruptStateError, match="its hash row cannot be read"):
        if read == "store":
            store.list_length("u", "s", "m")
        elif read == "transaction":
            store.transaction(lambda tx: tx.list_length("u", "s", "m"))
        else:
            import asyncio

            from mysql_state.aio import AsyncMysqlAgentStateStore
            asyncio.run(AsyncMysqlAgentStateStore(store, close_store=False).list_length("u", "s", "m"))


def test_get_prefix_leaves_out_a_list_without_its_hash_row_and_names_a_key_without_row_0(store, raw):
    """get_prefix told lists by their hash rows only: a list whose hash row was gone came back as
    a value (its first item), and a key whose only row moved off index 0 was left out as absent
    (found by a damage audit)."""
    store.save("u", "s", "p:v", {"a": 1})
    store.save_list("u", "s", "p:m", ["a", "b", "c"])
    raw.execute("DELETE FROM {t} WHERE session_id = 'u:s' AND state_key = 'p:m:_hash'")
    assert store.get_prefix("u", "s", "p:") == {"p:v": {"a": 1}}
    assert store.get_prefix("u", "s") == {"p:v": {"a": 1}}
    store.save("u", "s", "p:w", 2)
    raw.execute("UPDATE {t} SET item_index = -1 WHERE session_id = 'u:s' AND state_key = 'p:w'")
    with pytest.raises(CorruptStateError, match="key 'p:w' of session 'u:s' is damaged"):
        store.get_prefix("u", "s", "p:")


@pytest.mark.parametrize("damage", ["a gap in a list without our hash row", "a hash row of ours that cannot be read"])
@pytest.mark.parametrize("how", ["append_list", "append_lists", "transaction"])
def test_an_append_to_a_damaged_list_raises_and_writes_nothing(url, database, store, raw, damage, how):
    """The append renumbered the rows of a list without our hash row gap and all, and took a hash
    row of ours it could not read for another writer's: the lost item left no trace (found by
    an adapter audit, through the OpenAI Agents session's add_items)."""
    store.save_list("u", "s", "m", ["a", "b", "c"])
    if damage.startswith("a gap"):
        raw.execute("DELETE FROM {t} WHERE session_id = 'u:s' AND (state_key = 'm:_hash'"
                    " OR (state_key = 'm' AND item_index = 1))")
    else:
        raw.execute("UPDATE {t} SET state_data = LEFT(state_data, 20) WHERE session_id = 'u:s'"
                    " AND state_key = 'm:_hash'")
        raw.execute("DELETE FROM {t} WHERE session_id = 'u:s' AND state_key = 'm' AND item_index = 1")
    before = raw.query("SELECT state_key, item_index, state_data FROM {t} WHERE session_id = 'u:s'"
                       " ORDER BY state_key, item_index")
    fresh = MysqlAgentStateStore.from_url(url, database_name=database)  # nothing remembered of the list
    try:
        with pytest.raises(CorruptStateError, match="list 'm' of session 'u:s' is damaged"):
            if how == "append_list":
                fresh.append_list("u", "s", "m", ["d"])
            elif how == "append_lists":
                fresh.append_lists("u", "s", {"m": ["d"]})
            else:
                fresh.transaction(lambda tx: tx.append_list("u", "s", "m", ["d"]))
    finally:
        fresh.close()
    assert raw.query("SELECT state_key, item_index, state_data FROM {t} WHERE session_id = 'u:s'"
                     " ORDER BY state_key, item_index") == before
