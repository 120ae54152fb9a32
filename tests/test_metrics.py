"""Metrics: what ``store.metrics()`` counts (one rule each, see mysql_state.metrics), the
connector's observer hook they are fed by, and several stores in one Prometheus registry.
Real server, real ``prometheus_client`` registry; damage is made with plain SQL."""

from __future__ import annotations

import os

import orjson
import pytest

from mysql_state import CorruptStateError, DecryptionError, MysqlAgentStateStore, metrics
from mysql_state.pool import Connector, make_pools

prometheus_client = pytest.importorskip("prometheus_client", reason="make test installs the metrics extra")

ITEMS = [{"role": "user", "text": "hi"}, {"role": "assistant", "text": "hello there"}, [1, 2, 3]]
VALUE = {"summary": "talked about MySQL", "n": 3}


def json_bytes(*values) -> int:
    return sum(len(orjson.dumps(v)) for v in values)


def test_decryption_and_corrupt_state_errors_are_counted(url, database, store, raw):
    crypto = pytest.importorskip("mysql_state.crypto")
    pytest.importorskip("cryptography")
    right = crypto.Keyring({"k1": os.urandom(32)}, current="k1")
    wrong = crypto.Keyring({"k1": os.urandom(32)}, current="k1")  # same id, another key
    with MysqlAgentStateStore.from_url(url, database_name=database, encryption=right) as writer:
        writer.save("u", "s", "v", VALUE)
        writer.save_list("u", "s", "l", ITEMS)
    with MysqlAgentStateStore.from_url(url, database_name=database, encryption=wrong) as reader:
        for read in (lambda: reader.get("u", "s", "v"), lambda: reader.get_list("u", "s", "l"),
                     lambda: reader.get_many("u", "s", values=["v"]), lambda: reader.get_prefix("u", "s")):
            with pytest.raises(DecryptionError):
                read()
        assert reader.metrics()["errors"] == {"DecryptionError": 4}

    store.save("u", "t", "v", VALUE)
    store.save_list("u", "t", "l", ITEMS)
    raw.execute("UPDATE {t} SET state_data = '{not json' WHERE session_id = 'u:t' AND state_key = 'v'")
    raw.execute("DELETE FROM {t} WHERE session_id = 'u:t' AND state_key = 'l' AND item_index = 1")
    with pytest.raises(CorruptStateError):
        store.get("u", "t", "v")
    with pytest.raises(CorruptStateError):
        store.get_list("u", "t", "l")
    assert store.metrics()["errors"] == {"CorruptStateError": 2}


def test_a_pop_whose_item_does_not_decode_is_counted_and_pops_nothing(store, raw):
    store.save_list("u", "s", "l", [1, 2, 3])
    raw.execute("UPDATE {t} SET state_data = '{not json' WHERE session_id = 'u:s' AND state_key = 'l' AND item_index = 2")
    with pytest.raises(CorruptStateError):
        store.pop_list("u", "s", "l")
    assert store.metrics()["errors"] == {"CorruptStateError": 1}
    assert len([r for r in raw.rows("u:s") if r[1] == "l"]) == 3  # decoded inside the transaction: undone


def test_bytes_written_are_plaintext_json_on_plain_and_encrypted_stores(url, database, store):
    pytest.importorskip("cryptography")
    from mysql_state.crypto import Keyring

    sealed = MysqlAgentStateStore.from_url(url, database_name=database, table_name="sealed_t",
                                           create_if_not_exist=True,
                                           encryption=Keyring({"k1": os.urandom(32)}, current="k1"))
    try:
        for s in (store, sealed):
            s.save("u", "s", "v", VALUE)
            s.save_if_version("u", "s", "w", VALUE, 0)
            s.save_many("u", "s", values={"x": VALUE})
            s.save_list("u", "s", "l", ITEMS)
            s.append_list("u", "s", "l", [{"more": True}])
        want = 3 * json_bytes(VALUE) + json_bytes(*ITEMS) + json_bytes({"more": True})
        assert store.metrics()["bytes_written"] == want
        assert sealed.metrics()["bytes_written"] == want  # not the ciphertext's envelope
    finally:
        sealed.close()


def test_stale_versioned_saves_count_one_way(store):
    store.save("u", "s", "v", 1)
    store.save_list("u", "s", "l", [1])
    assert store.save_if_version("u", "s", "v", 2, 7) == -1
    assert store.save_list_if_version("u", "s", "l", [1, 2], 7) == -1
    m = store.metrics()
    assert m["stale_conflicts"] == 2 and m["errors"] == {}


def test_connector_observer_hook_is_told_each_call_and_checkout(url, database, store):
    class Seen:
        def __init__(self):
            self.calls, self.waits = [], []

        def ran(self, what, write, seconds, error):
            self.calls.append((what, write, type(error).__name__ if error else None))

        def checked_out(self, seconds):
            self.waits.append(seconds)

    seen = Seen()
    write_pool, read_pool, _ = make_pools(url, pool_size=2)
    db = Connector(write_pool, read_pool=read_pool, owned=True, pool_size=2, observer=seen)
    try:
        assert db.run(lambda cur: (cur.execute("SELECT 1"), cur.fetchone())[1], "probe", write=False) == (1,)
        with pytest.raises(ZeroDivisionError):
            db.run(lambda cur: 1 / 0, "boom now", write=True, session="u:s")
        assert seen.calls == [("probe", False, None), ("boom now", True, "ZeroDivisionError")]
        assert len(seen.waits) == 2 and all(w >= 0 for w in seen.waits)
    finally:
        db.close()


def test_two_stores_in_one_prometheus_registry(url, database, store):
    registry = prometheus_client.CollectorRegistry()
    other = MysqlAgentStateStore.from_url(url, database_name=database, table_name="other_t", create_if_not_exist=True)
    try:
        metrics.register(store, registry)
        metrics.register(other, registry)
        with pytest.raises(ValueError, match="name="):
            metrics.register(MysqlAgentStateStore.from_url(url, database_name=database, table_name="other_t"),
                             registry)
        third = MysqlAgentStateStore.from_url(url, database_name=database, table_name="other_t")
        metrics.register(third, registry, name="third")
        store.save_list("u", "s", "m", [1, 2])
        store.save_list("u", "s", "m", [1])
        other.save("u", "s", "v", 1)
        get = registry.get_sample_value
        a, b = f"{database}.agentscope_sessions", f"{database}.other_t"
        assert get("mysql_state_saves_total", {"store": a, "kind": "shrink"}) == 1.0
        assert get("mysql_state_saves_total", {"store": b, "kind": "shrink"}) == 0.0
        assert get("mysql_state_saves_total", {"store": b, "kind": "value"}) == 1.0
        assert get("mysql_state_writes_total", {"store": "third"}) == 1.0  # its set-up only
        assert get("mysql_state_operations_total", {"store": a, "op": "save_list"}) == 2.0
        third.close()
    finally:
        other.close()


def test_saves_inside_a_transaction_are_counted_once_it_commits(store):
    """tx.save / save_list / append_list / append_lists count as the store's own calls do, with
    their rows and plaintext bytes, once the transaction commits: a transaction that raises
    (rolled back) counts none, and a maintenance write is not a save."""
    def writes(tx):
        tx.save("u", "s", "v", VALUE)
        tx.save_list("u", "s", "l", ITEMS)
        tx.append_list("u", "s", "l", [{"more": True}])
        tx.append_lists("u", "s", {"l": ["x"], "m": [1, 2]}, values={"w": VALUE})

    store.transaction(writes)
    m = store.metrics()
    assert m["saves"] == {"unchanged": 0, "append": 3, "suffix": 0, "shrink": 0, "rewrite": 1, "clear": 0, "value": 2}
    assert m["rows_written"] == 1 + len(ITEMS) + 1 + 1 + 2 + 1
    assert m["bytes_written"] == json_bytes(VALUE, *ITEMS, {"more": True}, "x", 1, 2, VALUE)

    def fails(tx):
        tx.save("u", "s", "v", {"other": 1})
        tx.append_list("u", "s", "l", ["y"])
        raise RuntimeError("changed my mind")

    with pytest.raises(RuntimeError):
        store.transaction(fails)
    store.transaction(lambda tx: tx.save("u", "s", "v", {"fixed": 1}, maintenance=True))
    assert store.metrics()["saves"] == m["saves"] and store.metrics()["rows_written"] == m["rows_written"]
    assert store.get("u", "s", "v") == {"fixed": 1} and store.list_length("u", "s", "l") == len(ITEMS) + 2


def test_append_lists_counts_each_list_and_each_value(store):
    """``append_lists`` counts one append per list given items and one value save per value,
    rows and bytes included; values alone are value saves, not an append."""
    store.append_lists("u", "s", {}, values={"w": VALUE})
    m = store.metrics()
    assert m["saves"]["value"] == 1 and m["saves"]["append"] == 0
    assert (m["rows_written"], m["bytes_written"]) == (1, json_bytes(VALUE))
    store.append_lists("u", "s", {"l": [1], "k": [2, 3], "empty": []}, values={"x": VALUE})
    m = store.metrics()
    assert m["saves"]["value"] == 2 and m["saves"]["append"] == 2
    assert (m["rows_written"], m["bytes_written"]) == (5, json_bytes(VALUE, 1, 2, 3, VALUE))


def test_the_async_twin_registers_as_its_store_and_a_store_registers_once(url, database, store):
    from mysql_state import AsyncMysqlAgentStateStore
    import asyncio

    registry = prometheus_client.CollectorRegistry()
    twin = AsyncMysqlAgentStateStore(store, close_store=False)
    metrics.register(twin, registry)  # its counters are its store's: registered as that store
    asyncio.run(twin.save("u", "s", "v", 1))
    get = registry.get_sample_value
    assert get("mysql_state_saves_total", {"store": f"{database}.agentscope_sessions", "kind": "value"}) == 1.0
    metrics.register(store, registry)  # the same store again, the same label: nothing new
    with pytest.raises(ValueError, match="already registered under store="):
        metrics.register(store, registry, name="again")  # its counters would be summed twice
    assert "again" not in prometheus_client.generate_latest(registry).decode()
    with pytest.raises(TypeError, match="needs a MysqlAgentStateStore"):
        metrics.register(object(), registry)
