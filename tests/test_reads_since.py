"""A process that read a list before reads only what is new (issue 21, the load of a turn).

``get_list`` (whole) and ``get_many`` (its first list) of a process that read the list before
send only the items after what it read, with the hash row marked with what proves the rest
unchanged (``list_read.check_since``); anything that does not prove itself is read whole, in
the same call. These tests change the list behind the reader's back in every way a other, a
hand or another program can, and check each read against plain SQL on the table and a fresh
process's read; rows sent are counted by the server (``Rows_sent``)."""

from __future__ import annotations

import orjson
import pytest

from mysql_state import CorruptStateError, Keyring, MysqlAgentStateStore
from mysql_state.aio import AsyncMysqlAgentStateStore

from . import procs
from .conftest import Raw
from .test_cold_saves import fresh, msg  # noqa: F401 (fresh: a fixture)
from .test_issue21 import other  # noqa: F401 (a fixture: another worker)

N = 150


def table_list(raw: Raw, key: str = "m") -> list:
    """The list as plain SQL on the table says it is."""
    rows = raw.query("SELECT state_data FROM {t} WHERE session_id = 'u:s' AND state_key = %s ORDER BY item_index",
                     (key,))
    return [orjson.loads(r[0]) for r in rows]


READS = {
    "get_list": lambda s: s.get_list("u", "s", "m"),
    "get_many": lambda s: s.get_many("u", "s", values=["v"], lists=["m", "z"]).get("m", []),
}


def _seen_twice(store, other, read) -> list:
    """The writer saves the list; the reader reads it twice (the second read is kept)."""
    items = [msg(i) for i in range(N)]
    other.save("u", "s", "v", {"plan": 1})
    other.save_list("u", "s", "z", [1, 2])
    other.save_list("u", "s", "m", items)
    assert read(store) == items
    assert read(store) == items
    return items


@pytest.mark.parametrize("read", sorted(READS))
def test_a_reader_that_saw_the_list_is_sent_only_the_new_items(store, other, raw, read):
    items = _seen_twice(store, other, READS[read])
    other.append_list("u", "s", "m", [msg(N), msg(N + 1)])
    got, rows = raw.sent(lambda: READS[read](store))
    assert got == items + [msg(N), msg(N + 1)] == table_list(raw)
    extra = 0 if read == "get_list" else 4  # get_many: the value, the other list's two items and hash row
    assert rows == 2 + 1 + extra  # the two new items and the hash row
    got, rows = raw.sent(lambda: READS[read](store))  # nothing new: the hash row alone
    assert got == table_list(raw) and rows == 1 + extra
    other.save_list("u", "s", "m", table_list(raw) + [msg(N + 2)])  # a save that appends
    got, count = raw.statements(lambda: READS[read](store))
    assert got == table_list(raw) == items + [msg(N + j) for j in range(3)] and count == 1


CHANGES = {
    "edit in the middle": lambda w, items: w.save_list("u", "s", "m", items[:5] + [{"edited": 1}] + items[6:]),
    "edit and append": lambda w, items: w.save_list("u", "s", "m", items[:5] + [{"edited": 1}] + items[6:] + [1]),
    "shrink": lambda w, items: w.save_list("u", "s", "m", items[:40]),
    "shrink and regrow": lambda w, items: w.save_list("u", "s", "m", items[:40] + [msg(-j) for j in range(120)]),
    "clear": lambda w, items: w.save_list("u", "s", "m", []),
    "pop then append": lambda w, items: (w.pop_list("u", "s", "m"), w.append_list("u", "s", "m", [{"x": 1}, 2])),
    "delete": lambda w, items: w.delete("u", "s", "m"),
    "same length, other items": lambda w, items: w.save_list("u", "s", "m", [msg(-j) for j in range(N)]),
}


@pytest.mark.parametrize("change", sorted(CHANGES))
@pytest.mark.parametrize("read", sorted(READS))
def test_a_list_changed_by_another_writer_is_read_exactly(store, other, raw, fresh, change, read):
    items = _seen_twice(store, other, READS[read])
    CHANGES[change](other, items)
    want = table_list(raw)
    got, count = raw.statements(lambda: READS[read](store))
    assert got == want == READS[read](fresh()) and count <= 2
    assert READS[read](store) == want  # and again, from what that read kept


HAND = {  # rows changed by hand, the hash row left as it was
    "a row deleted": ("DELETE FROM {t} WHERE session_id='u:s' AND state_key='m' AND item_index=7", CorruptStateError),
    "a row added": ("INSERT INTO {t} (session_id, state_key, item_index, state_data) VALUES ('u:s', 'm', %s, '1')"
                    % (N + 3), CorruptStateError),
    "a row renumbered": ("UPDATE {t} SET item_index=-1 WHERE session_id='u:s' AND state_key='m' AND item_index=0",
                         CorruptStateError),
    "a row not JSON": ("UPDATE {t} SET state_data='[1,' WHERE session_id='u:s' AND state_key='m' AND item_index=7",
                       CorruptStateError),
    "a row other JSON": ("UPDATE {t} SET state_data='{\"hand\": 1}' WHERE session_id='u:s' AND state_key='m'"
                         " AND item_index=7", None),
    "two rows swapped": ("UPDATE {t} SET state_data = IF(item_index = 3, %s, %s) WHERE session_id='u:s'"
                         " AND state_key='m' AND item_index IN (3, 4)", None),
}


@pytest.mark.parametrize("hand", sorted(HAND))
@pytest.mark.parametrize("read", sorted(READS))
def test_rows_changed_by_hand_below_what_was_read_are_found(store, other, raw, fresh, hand, read):
    """The rows not sent are proved by count, lowest and highest index and their CRC sum: a
    reader that saw the list finds what a fresh reader finds, never its own old copy."""
    items = _seen_twice(store, other, READS[read])
    statement, error = HAND[hand]
    if hand == "two rows swapped":
        raw.execute(statement, (orjson.dumps(items[4]).decode(), orjson.dumps(items[3]).decode()))
    else:
        raw.execute(statement)
    if error is not None:
        for s in (store, fresh()):
            with pytest.raises(error) as caught:
                READS[read](s)
            assert caught.value.key == "m"
    else:
        want = table_list(raw)
        assert want != items and READS[read](store) == want == READS[read](fresh())


def test_a_list_the_java_store_rewrote_is_read_whole(store, other, raw):
    """A hash row this store does not write (the Java store's) proves nothing: read whole."""
    items = _seen_twice(store, other, READS["get_list"])
    raw.execute("UPDATE {t} SET state_data = '\"java-hash\"' WHERE session_id='u:s' AND state_key='m:_hash'")
    raw.execute("UPDATE {t} SET state_data = '{\"java\": 1}' WHERE session_id='u:s' AND state_key='m' AND item_index=9")
    want = items[:9] + [{"java": 1}] + items[10:]
    for read in READS.values():
        got, rows = raw.sent(lambda: read(store))
        assert got == want == table_list(raw) and rows >= N


def test_a_typed_read_reads_whole(store, other, raw):
    """A read into a model type (``type=``) is read whole, as before."""
    items = _seen_twice(store, other, READS["get_list"])
    other.append_list("u", "s", "m", [msg(N)])
    got, rows = raw.sent(lambda: store.get_list("u", "s", "m", type=dict))
    assert got == items + [msg(N)] and rows >= N


@pytest.mark.parametrize("read", sorted(READS))
def test_an_encrypted_reader_is_sent_only_the_new_items_and_finds_moved_rows(url, database, raw, read):
    """Sealed rows: the CRC sum is of the stored (sealed) texts, the digest sum keyed; the
    reader keeps the plaintext it opened. Two sealed rows swapped by hand (each bound to its
    index) are found as a fresh reader finds them: a DecryptionError naming the row."""
    import os

    from mysql_state import DecryptionError

    ring = Keyring({"k": os.urandom(32)}, "k")
    stores = [MysqlAgentStateStore.from_url(url, database_name=database, encryption=ring) for _ in range(3)]
    reader, other, fresh_one = stores
    try:
        items = _seen_twice(reader, other, READS[read])
        other.append_list("u", "s", "m", [msg(N)])
        got, rows = raw.sent(lambda: READS[read](reader))
        assert got == items + [msg(N)] == READS[read](fresh_one)
        assert rows == 2 + (0 if read == "get_list" else 4)
        sealed = dict(raw.query("SELECT item_index, state_data FROM {t} WHERE session_id='u:s' AND state_key='m'"
                                " AND item_index IN (3, 4)"))
        raw.execute("UPDATE {t} SET state_data = IF(item_index = 3, %s, %s) WHERE session_id='u:s'"
                    " AND state_key='m' AND item_index IN (3, 4)", (sealed[4], sealed[3]))
        for s in (reader, stores[2]):
            with pytest.raises(DecryptionError) as caught:
                READS[read](s)
            assert caught.value.key == "m"
    finally:
        for s in stores:
            s.close()


def test_the_async_twin_reads_only_the_new_items_too(url, database, store, other, raw):
    import asyncio

    items = _seen_twice(store, other, READS["get_list"])

    async def go():
        astore = AsyncMysqlAgentStateStore.from_url(url, database_name=database)
        try:
            await astore.get_list("u", "s", "m")
            await astore.get_list("u", "s", "m")
            other.append_list("u", "s", "m", [msg(N)])
            return raw.sent(lambda: astore.sync.get_list("u", "s", "m")), await astore.get_list("u", "s", "m")
        finally:
            await astore.close()

    (got, rows), again = asyncio.run(go())
    assert got == again == items + [msg(N)] == table_list(raw) and rows == 2


@pytest.mark.parametrize("read", sorted(READS))
def test_whole_reads_beside_a_writer_process_are_whole_runs(url, database, store, read):
    """Another process appends and, every 25th write, trims the list to its last 60 items
    while this one reads it whole again and again: every read is a run of consecutive items
    that ends where the writer was (never a stale copy glued to new rows), never damage."""
    store.save_list("u", "s", "m", [{"i": j} for j in range(100)])
    with procs.appending_and_trimming(url, database) as (proc, results):
        reads, last = 0, -1
        while proc.is_alive():
            got = [x["i"] for x in READS[read](store)] if read == "get_list" else \
                [x["i"] for x in store.get_many("u", "s", lists=["m"])["m"]]
            assert got == list(range(got[0], got[0] + len(got))), got
            assert got[-1] >= last  # the writer only moves forward
            last, reads = got[-1], reads + 1
        assert results.get(timeout=30) > 10 and reads > 50


# ---- lists appended to inside a transaction (what LangGraph's saver does at each step) --------


def _kept_then(store, raw, change) -> tuple[list, int]:
    """A list of N items read twice (kept), ``change(tx)`` in a transaction, then a whole read
    of it: (the items read, the rows the server sent for them)."""
    items = [msg(i) for i in range(N)]
    store.save_list("u", "s", "m", items)
    assert store.get_list("u", "s", "m") == items
    assert store.get_list("u", "s", "m") == items
    store.transaction(change)
    return raw.sent(lambda: store.get_list("u", "s", "m"))


def test_a_list_appended_in_a_transaction_is_then_read_since(store, raw, fresh):
    got, rows = _kept_then(store, raw, lambda tx: tx.append_list("u", "s", "m", [msg(N)]))
    assert got == table_list(raw) == fresh().get_list("u", "s", "m") == [msg(i) for i in range(N + 1)]
    assert rows == 2  # the new item and the hash row, not the N items before it
    got, rows = _kept_then(store, raw, lambda tx: tx.append_lists("u", "s", {"m": [msg(-1)], "z": [1]}))
    assert got == table_list(raw) and got[-1] == msg(-1) and rows == 2


TX_REWRITES = {
    "save_list": lambda tx: tx.save_list("u", "s", "m", [msg(i) for i in range(5)] + [{"edited": 1}]),
    "append then save_list": lambda tx: (tx.append_list("u", "s", "m", [msg(N)]),
                                         tx.save_list("u", "s", "m", [{"edited": 1}] + [msg(i) for i in range(1, N)])),
    "append then delete": lambda tx: (tx.append_list("u", "s", "m", [msg(N)]), tx.delete("u", "s", "m")),
    "append then save": lambda tx: (tx.append_list("u", "s", "m", [msg(N)]), tx.save("u", "s", "m", {"a value": 1})),
    "delete the session then append": lambda tx: (tx.delete("u", "s"), tx.append_list("u", "s", "m", [msg(0)])),
}


@pytest.mark.parametrize("change", sorted(TX_REWRITES))
def test_a_list_rewritten_in_a_transaction_is_read_exactly(store, raw, fresh, change):
    """A transaction that did more than append: what the store kept is not its base (and
    would not prove itself if it were): the read is the table's list."""
    got, _ = _kept_then(store, raw, TX_REWRITES[change])
    assert got == table_list(raw) == fresh().get_list("u", "s", "m")
    assert store.get_list("u", "s", "m") == got
