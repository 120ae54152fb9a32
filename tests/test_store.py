"""The store against a real server: rows, semantics, versioning, values, errors."""

from __future__ import annotations

import dataclasses
import math
import datetime as dt
import threading
import uuid

import orjson
import pydantic
import pytest

from mysql_state import UNVERSIONED, MysqlAgentStateStore, VersionedState
from mysql_state.listsync import HASH_FORMAT


def msgs(n: int, start: int = 0) -> list[dict]:
    return [{"role": "user" if i % 2 else "assistant", "text": f"message {i} " * 5} for i in range(start, start + n)]


def item_rows(raw, sid: str, key: str) -> list[tuple]:
    return raw.query(
        "SELECT item_index, state_data, version FROM {t} WHERE session_id = %s AND state_key = %s ORDER BY item_index",
        (sid, key),
    )


# ---- single values ------------------------------------------------------------------------------


def test_save_writes_one_row_at_index_0_with_growing_version(store, raw):
    store.save("alice", "s1", "summary", {"text": "hello"})
    assert raw.rows() == [("alice:s1", "summary", 0, '{"text":"hello"}', 1)]
    store.save("alice", "s1", "summary", {"text": "again"})
    store.save("alice", "s1", "summary", {"text": "third"})
    assert raw.rows() == [("alice:s1", "summary", 0, '{"text":"third"}', 3)]
    assert store.get("alice", "s1", "summary") == {"text": "third"}


def test_anonymous_users_are_packed_as_anon(store, raw):
    store.save(None, "s", "k", 1)
    store.save("   ", "s2", "k", 2)
    store.save("", "s3", "k", 3)
    assert [r[0] for r in raw.rows()] == ["__anon__:s", "__anon__:s2", "__anon__:s3"]
    assert store.list_session_ids(None) == {"s", "s2", "s3"}
    assert store.get("", "s2", "k") == 2


def test_get_absent_gives_default(store):
    assert store.get("u", "s", "missing") is None
    assert store.get("u", "s", "missing", default={"d": 1}) == {"d": 1}
    store.save("u", "s", "none", None)
    assert store.get("u", "s", "none", default=5) is None


# ---- lists: rows ----------------------------------------------------------------------------------


def test_list_is_one_row_per_item_plus_a_hash_row(store, raw):
    items = msgs(4)
    store.save_list("alice", "s1", "memory", items)
    rows = raw.rows("alice:s1")
    assert [(r[1], r[2]) for r in rows] == [("memory", i) for i in range(4)] + [("memory:_hash", 0)]
    assert [orjson.loads(r[3]) for r in rows[:4]] == items
    hash_row = orjson.loads(rows[4][3])
    assert hash_row["fmt"] == HASH_FORMAT and hash_row["n"] == 4
    assert store.get_list("alice", "s1", "memory") == items
    assert store.list_length("alice", "s1", "memory") == 4


def test_unchanged_rows_are_not_rewritten_and_changes_anywhere_are_seen(store, raw):
    items = msgs(20)
    store.save_list("u", "s", "m", items)
    before = item_rows(raw, "u:s", "m")
    # a change in the middle (index 7, which no 5-point sample of 20 would look at)
    items[7] = {**items[7], "text": "edited"}
    plan = store.save_list_report("u", "s", "m", items)
    assert plan.rows_written == 1 and plan.indexes[0] == 7
    after = item_rows(raw, "u:s", "m")
    changed = [a[0] for a, b in zip(after, before) if a != b]
    assert changed == [7]
    assert orjson.loads(after[7][1])["text"] == "edited" and after[7][2] == 2
    assert store.get_list("u", "s", "m") == items


def test_in_place_growth_of_the_last_item_is_persisted(store, raw):
    items = msgs(5)
    store.save_list("u", "s", "m", items)
    items[-1]["text"] += " and more streamed text"  # the same dict, mutated in place
    plan = store.save_list_report("u", "s", "m", items)
    assert list(plan.indexes) == [4]
    items.append({"role": "user", "text": "next"})
    items[-2]["text"] += " even more"
    plan = store.save_list_report("u", "s", "m", items)
    assert list(plan.indexes) == [4, 5]
    fresh = MysqlAgentStateStore.from_url(raw_url(raw), database_name=raw.database)
    assert fresh.get_list("u", "s", "m") == items
    fresh.close()


def raw_url(raw) -> str:
    from mysql_state.server import server_url

    return server_url()


def test_shorter_list_removes_rows_past_its_end_and_empty_clears(store, raw):
    items = msgs(6)
    store.save_list("u", "s", "m", items)
    store.save_list("u", "s", "m", items[:2])
    assert [r[0] for r in item_rows(raw, "u:s", "m")] == [0, 1]
    assert store.get_list("u", "s", "m") == items[:2]
    store.save_list("u", "s", "m", [])
    assert item_rows(raw, "u:s", "m") == []
    assert store.list_length("u", "s", "m") == 0
    # A cleared list stays cleared for a process that never saw it (the Java store ignores []).
    fresh = MysqlAgentStateStore.from_url(raw_url(raw), database_name=raw.database)
    assert fresh.get_list("u", "s", "m") == []
    fresh.close()


def test_append_writes_only_new_rows(store, raw):
    items = msgs(3)
    store.save_list("u", "s", "m", items)
    # edit row 1 behind the store's back
    raw.execute("UPDATE {t} SET state_data = %s WHERE session_id = 'u:s' AND state_key = 'm' AND item_index = 1",
                ('{"edited":"behind"}',))
    assert store.append_list("u", "s", "m", msgs(2, 3)) == 5
    rows = item_rows(raw, "u:s", "m")
    assert [r[0] for r in rows] == [0, 1, 2, 3, 4]
    assert rows[1][1] == '{"edited":"behind"}'  # not rewritten by the append
    items += msgs(2, 3)
    assert store.save_list_report("u", "s", "m", items).kind == "unchanged"
    assert item_rows(raw, "u:s", "m")[1][1] == '{"edited":"behind"}'
    items[1] = {"role": "user", "text": "changed by the caller"}
    plan = store.save_list_report("u", "s", "m", items)
    assert list(plan.indexes) == [1]
    assert orjson.loads(item_rows(raw, "u:s", "m")[1][1]) == items[1]


def test_append_keeps_the_hash_row_valid_for_a_later_save_list(store, raw, url, database):
    store.append_list("u", "s", "m", msgs(3))
    store.append_list("u", "s", "m", msgs(2, 3))
    assert store.list_length("u", "s", "m") == 5
    items = msgs(6)
    # a process that never saw the list (cold) writes only the new item
    other = MysqlAgentStateStore.from_url(url, database_name=database)
    plan = other.save_list_report("u", "s", "m", items)
    assert plan.kind == "append" and list(plan.indexes) == [5]
    # and the warm store, whose snapshot is now stale, still converges correctly
    items.append({"role": "user", "text": "x"})
    plan = store.save_list_report("u", "s", "m", items)
    assert list(plan.indexes) == [6]
    assert other.get_list("u", "s", "m") == items
    other.close()


def test_missing_or_foreign_hash_row_leads_to_one_full_rewrite(store, raw):
    # rows as the Java store writes them: items with version 0 and a sampled-hash string
    for i, m in enumerate(msgs(3)):
        raw.execute("INSERT INTO {t} (session_id, state_key, item_index, state_data) VALUES (%s,%s,%s,%s)",
                    ("u:s", "m", i, orjson.dumps(m).decode()))
    raw.execute("INSERT INTO {t} (session_id, state_key, item_index, state_data) VALUES ('u:s','m:_hash',0,'1a2b3c')")
    assert store.get_list("u", "s", "m") == msgs(3)
    assert store.list_length("u", "s", "m") == 3
    plan = store.save_list_report("u", "s", "m", msgs(4))
    assert plan.kind == "rewrite" and plan.rows_written == 4
    plan = store.save_list_report("u", "s", "m", msgs(5))
    assert plan.kind == "append" and plan.rows_written == 1
    raw.execute("DELETE FROM {t} WHERE state_key = 'm:_hash'")
    assert store.save_list_report("u", "s", "m", msgs(5)).kind == "rewrite"
    assert store.get_list("u", "s", "m") == msgs(5)


def test_append_to_a_list_without_hash_row_and_to_nothing(store, raw):
    assert store.append_list("u", "s", "new", [1, 2]) == 2
    for i in range(2):
        raw.execute("INSERT INTO {t} (session_id, state_key, item_index, state_data) VALUES ('u:s','j',%s,%s)", (i, str(i)))
    assert store.append_list("u", "s", "j", [2]) == 3
    assert store.get_list("u", "s", "j") == [0, 1, 2]
    assert store.append_list("u", "s", "j", []) == 3


def test_cold_store_after_a_middle_edit_reads_and_writes_only_the_change(store, url, database):
    items = msgs(30)
    store.save_list("u", "s", "m", items)
    items[3] = {"x": 1}
    other = MysqlAgentStateStore.from_url(url, database_name=database)
    plan = other.save_list_report("u", "s", "m", items)
    assert list(plan.indexes) == [3]
    assert store.get_list("u", "s", "m") == items
    other.close()


def test_change_detection_sees_type_changes_that_python_equality_hides(store):
    store.save_list("u", "s", "m", [1, {"a": 1}, [1.0]])
    store.save_list("u", "s", "m", [True, {"a": 1.0}, [1]])
    assert [type(x) for x in store.get_list("u", "s", "m")] == [bool, dict, list]
    assert store.get_list("u", "s", "m") == [True, {"a": 1.0}, [1]]
    assert isinstance(store.get_list("u", "s", "m")[1]["a"], float)
    # bare numbers whose JSON is a prefix of the new one (12 -> 123)
    store.save_list("u", "s", "n", [12, 12])
    store.save_list("u", "s", "n", [12, 123])
    assert store.get_list("u", "s", "n") == [12, 123]


def test_get_list_windows(store):
    items = list(range(100))
    store.save_list("u", "s", "m", items)
    assert store.get_list("u", "s", "m", offset=10, limit=5) == items[10:15]
    assert store.get_list("u", "s", "m", offset=95) == items[95:]
    assert store.get_list("u", "s", "m", offset=-50) == items[-50:]
    assert store.get_list("u", "s", "m", offset=-10, limit=3) == items[-10:-7]
    assert store.get_list("u", "s", "m", limit=0) == []
    assert store.get_list("u", "s", "m", offset=200) == []
    with pytest.raises(ValueError, match="limit"):
        store.get_list("u", "s", "m", limit=-1)
    with pytest.raises(TypeError, match="offset"):
        store.get_list("u", "s", "m", offset="3")


def test_list_length_reads_the_hash_row_not_the_items(store, raw):
    store.save_list("u", "s", "m", list(range(50)))
    # remove items behind the store's back: a scan would see 0, the hash row says 50
    raw.execute("DELETE FROM {t} WHERE state_key = 'm'")
    assert store.list_length("u", "s", "m") == 50


def test_save_over_a_list_removes_its_items_and_hash_row(store, raw):
    store.save_list("u", "s", "k", [1, 2, 3])
    store.save("u", "s", "k", {"single": True})
    assert [(r[1], r[2]) for r in raw.rows("u:s")] == [("k", 0)]
    assert store.get("u", "s", "k") == {"single": True}
    store.save_list("u", "s", "k", [4, 5])
    assert store.get_list("u", "s", "k") == [4, 5]


# ---- sessions -------------------------------------------------------------------------------------


def test_exists_delete_and_delete_key(store, raw):
    store.save("u", "s", "a", 1)
    store.save_list("u", "s", "l", [1, 2])
    store.save("u", "other", "a", 1)
    assert store.exists("u", "s")
    store.delete("u", "s", "l")
    assert [(r[1]) for r in raw.rows("u:s")] == ["a"]
    store.delete("u", "s")
    assert raw.rows("u:s") == [] and not store.exists("u", "s")
    assert store.exists("u", "other")


def test_list_session_ids_does_not_treat_ids_as_patterns(store):
    for user in ("a_b", "axb", "a%b", "a\\b", "a", "ab"):
        store.save(user, f"s-{user}", "k", 1)
    assert store.list_session_ids("a_b") == {"s-a_b"}
    assert store.list_session_ids("a%b") == {"s-a%b"}
    assert store.list_session_ids("a\\b") == {"s-a\\b"}
    assert store.list_session_ids("a") == {"s-a"}
    assert store.list_session_ids("nobody") == set()


def test_truncate_all_sessions(store, raw):
    store.save("u", "s", "a", 1)
    store.save_list("u", "s", "l", [1, 2])
    assert store.truncate_all_sessions() == 4
    assert raw.rows() == []
    store.save_list("u", "s", "l", [1, 2])  # snapshots were dropped: a fresh list again
    assert store.get_list("u", "s", "l") == [1, 2]


# ---- versioning -----------------------------------------------------------------------------------


def test_versioning_contract(store, raw):
    assert store.get_versioned("u", "s", "k") == VersionedState(None, 0)
    assert store.save_if_version("u", "s", "k", {"v": 1}, 0) == 1
    assert store.save_if_version("u", "s", "k", {"v": "x"}, 0) == UNVERSIONED
    assert store.get_versioned("u", "s", "k") == ({"v": 1}, 1)
    assert store.save_if_version("u", "s", "k", {"v": 2}, 1) == 2
    assert store.save_if_version("u", "s", "k", {"v": "stale"}, 1) == UNVERSIONED
    assert store.get_versioned("u", "s", "k") == ({"v": 2}, 2)
    assert store.save_if_version("u", "s", "k", {"v": 3}, UNVERSIONED) == 3
    assert store.save_if_version("u", "s", "new", {"v": 1}, UNVERSIONED) == 1
    assert raw.query("SELECT version FROM {t} WHERE state_key = 'k'") == [(3,)]
    with pytest.raises(ValueError, match="expected_version"):
        store.save_if_version("u", "s", "k", 1, -2)


def test_concurrent_compare_and_set_has_exactly_one_winner(store):
    store.save_if_version("u", "s", "k", 0, 0)
    for version in range(1, 6):
        results: list[int] = []
        barrier = threading.Barrier(6)

        def cas(i: int) -> None:
            barrier.wait()
            results.append(store.save_if_version("u", "s", "k", {"by": i}, version))

        threads = [threading.Thread(target=cas, args=(i,)) for i in range(6)]
        [t.start() for t in threads]
        [t.join() for t in threads]
        assert sorted(results) == [UNVERSIONED] * 5 + [version + 1]
        assert store.get_versioned("u", "s", "k").version == version + 1


# ---- values ---------------------------------------------------------------------------------------


@dataclasses.dataclass
class Step:
    name: str
    done: bool = False
    at: dt.datetime | None = None


@dataclasses.dataclass
class Plan:
    steps: list[Step]
    id: uuid.UUID


class Msg(pydantic.BaseModel):
    role: str
    content: list[dict]
    created: dt.datetime


def test_values_of_every_supported_kind_round_trip(store):
    when = dt.datetime(2026, 12, 2, 10, 30, tzinfo=dt.timezone.utc)
    plan = Plan([Step("a", True, when), Step("b")], uuid.UUID(int=7))
    store.save("u", "s", "plan", plan)
    assert store.get("u", "s", "plan", type=Plan) == plan
    assert store.get("u", "s", "plan")["id"] == str(uuid.UUID(int=7))
    m = Msg(role="user", content=[{"type": "text", "text": "héllo 🌍"}], created=when)
    store.save_list("u", "s", "msgs", [m, m])
    assert store.get_list("u", "s", "msgs", type=Msg) == [m, m]
    for v in ({"a": [1, 2.5, None, True]}, [1, "x"], "text", 42, 1.5, False, None):
        store.save("u", "s", "v", v)
        assert store.get("u", "s", "v") == v


def test_unserialisable_value_is_a_type_error_and_writes_nothing(store, raw):
    with pytest.raises(TypeError, match=r"'state'.*set"):
        store.save("u", "s", "state", {1, 2})
    with pytest.raises(TypeError, match=r"item 1 of list 'memory'.*object"):
        store.save_list("u", "s", "memory", [1, object()])
    store.save_list("u", "s", "memory", [1])
    with pytest.raises(TypeError, match="item 0"):
        store.append_list("u", "s", "memory", [object()])
    assert [r[1] for r in raw.rows()] == ["memory", "memory:_hash"]
    assert store.get_list("u", "s", "memory") == [1]


def test_a_value_nested_deeper_than_json_is_stored_is_refused_in_words_and_writes_nothing(store, raw):
    """orjson writes 254 levels of arrays and objects and said only "Recursion limit
    reached"; the error now names the key (or item) and the rule, and nothing is written."""
    def nest(depth: int):
        v: object = 1
        for _ in range(depth):
            v = [v]
        return v

    store.save("u", "s", "deep", nest(254))  # the deepest that is stored
    assert store.get("u", "s", "deep") == nest(254)
    with pytest.raises(TypeError, match=r"key 'deeper': dict \(it nests arrays and objects more than 254 levels deep"):
        store.save("u", "s", "deeper", {"a": nest(254)})
    with pytest.raises(TypeError, match=r"item 1 of list 'memory': list \(it nests .* more than 254 levels"):
        store.save_list("u", "s", "memory", [1, nest(255)])
    with pytest.raises(TypeError, match=r"Integer exceeds 64-bit range\); nothing was written"):
        store.save("u", "s", "big", 2 ** 64)
    assert [r[1] for r in raw.rows()] == ["deep"]


def test_save_many_writes_values_and_lists_in_one_transaction(store, raw):
    plans = store.save_many("u", "s", values={"summary": {"t": 1}, "plan": [1]}, lists={"context": msgs(3)})
    assert plans["context"].kind == "rewrite" and plans["context"].rows_written == 3
    assert store.get("u", "s", "summary") == {"t": 1} and store.get_list("u", "s", "context") == msgs(3)
    plans = store.save_many("u", "s", values={"summary": {"t": 2}}, lists={"context": msgs(4)})
    assert plans["context"].kind == "append" and plans["context"].rows_written == 1
    before = raw.rows()
    # one bad part (the list's second item cannot be serialised) and nothing of the call is written
    with pytest.raises(TypeError, match="item 1 of list 'context'"):
        store.save_many("u", "s", values={"summary": {"t": 3}}, lists={"context": [1, object()]})
    # a value too large for the server: refused before anything of the call is written
    store_small = store
    store_small.table.max_allowed_packet, real = 10_000, store.max_allowed_packet
    try:
        with pytest.raises(ValueError, match="max_allowed_packet"):
            store.save_many("u", "s", values={"summary": "x" * 20_000}, lists={"context": msgs(5)})
    finally:
        store_small.table.max_allowed_packet = real
    assert raw.rows() == before
    with pytest.raises(ValueError, match="both as a value and as a list"):
        store.save_many("u", "s", values={"k": 1}, lists={"k": [1]})


def test_appends_on_a_stale_hint_are_redone_the_locked_way(url, database, store, raw):
    from .test_faults import check_list_rows

    other = MysqlAgentStateStore.from_url(url, database_name=database)
    try:
        store.save_list("u", "s", "m", [0])
        assert other.get_list("u", "s", "m") == [0]  # other's hint: the hash row it read
        assert store.append_list("u", "s", "m", [1]) == 2  # other's hint is stale now
        assert other.append_list("u", "s", "m", [2]) == 3  # rolled back, then appended after 1
        assert store.append_list("u", "s", "m", [3]) == 4
        assert check_list_rows(raw, "u:s", "m") == [0, 1, 2, 3]
        raw.execute("DELETE FROM {t} WHERE state_key = 'm:_hash'")  # the hint's row is gone
        assert store.append_list("u", "s", "m", [4]) == 5
        assert check_list_rows(raw, "u:s", "m") == [0, 1, 2, 3, 4]
    finally:
        other.close()


def test_round_trips_per_operation(store, raw):
    """Statements the server receives (its Questions counter): append is 2 with the COMMIT."""

    def questions() -> int:
        return int(raw.query("SHOW GLOBAL STATUS LIKE 'Questions'")[0][1])

    def count(fn) -> int:
        before = questions()
        fn()
        return questions() - before - 1  # minus the SHOW STATUS itself

    store.save_list("u", "s", "m", msgs(50))
    store.get_list("u", "s", "m")  # both pools hold a connection now
    # one INSERT (items and the hash row, checked against the one this process saw), COMMIT
    assert count(lambda: store.append_list("u", "s", "m", msgs(1, 50))) == 2
    assert count(lambda: store.save_list("u", "s", "m", msgs(53))) == 2  # warm, items appended: the same
    changed = msgs(53)
    changed[-1] = {"role": "assistant", "text": "grew"}
    assert count(lambda: store.save_list("u", "s", "m", changed)) == 3  # lock hash row, upsert, COMMIT
    assert count(lambda: store.get_list("u", "s", "m")) == 1
    assert count(lambda: store.get_list("u", "s", "m", offset=-10)) == 1
    assert count(lambda: store.list_length("u", "s", "m")) == 1
    assert count(lambda: store.save("u", "s", "v", {"x": 1})) == 3  # lock the key's head, upsert, COMMIT
    assert count(lambda: store.get("u", "s", "v")) == 1


def test_get_prefix_reads_one_key_range_of_values(store):
    """get_prefix: the single values of one session whose key starts with the prefix, lists left
    out, other sessions untouched."""
    store.save("u", "s", "ns/a", {"x": 1})
    store.save("u", "s", "ns/b", 2)
    store.save("u", "s", "nt/c", 3)
    store.save_list("u", "s", "ns/list", [1, 2])
    store.save("u", "s2", "ns/z", 9)
    assert store.get_prefix("u", "s", "ns/") == {"ns/a": {"x": 1}, "ns/b": 2}
    assert list(store.get_prefix("u", "s")) == ["ns/a", "ns/b", "nt/c"]
    assert store.get_prefix("u", "s", "ns/", versioned=True)["ns/b"].version == 1
    assert store.get_prefix("u", "nope", "ns/") == {}
    with pytest.raises(TypeError, match="prefix"):
        store.get_prefix("u", "s", 5)


def test_get_prefix_ending_before_the_surrogates_or_at_the_last_code_point(store):
    """The range's upper bound was the prefix's last character plus one: U+D7FF gave a lone
    surrogate (UnicodeEncodeError) and U+10FFFF no character at all (ValueError); a lone
    surrogate in the prefix raised the codec's error, not one naming the prefix."""
    store.save("u", "s", "\ud7ffa", 1)
    store.save("u", "s", "\ue000", 2)
    store.save("u", "s", "\U0010ffffz", 3)
    store.save("u", "s", "\U0010ffff\U0010ffff", 4)
    assert store.get_prefix("u", "s", "\ud7ff") == {"\ud7ffa": 1}
    assert store.get_prefix("u", "s", "\U0010ffff") == {"\U0010ffff\U0010ffff": 4, "\U0010ffffz": 3}
    assert store.get_prefix("u", "s", "\U0010ffff\U0010ffff") == {"\U0010ffff\U0010ffff": 4}
    with pytest.raises(ValueError, match="prefix '\\\\ud800' is not valid Unicode"):
        store.get_prefix("u", "s", "\ud800")


# ---- values that would change silently --------------------------------------------------


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_nan_and_infinities_are_refused_naming_the_key_and_item(store, raw, bad):
    with pytest.raises(ValueError, match="key 'k'"):
        store.save("u", "s", "k", {"x": [1, bad]})
    with pytest.raises(ValueError, match="item 1 of list 'm'"):
        store.save_list("u", "s", "m", [{"ok": None}, {"score": bad}])
    with pytest.raises(ValueError, match="item 0 of list 'm'"):
        store.append_list("u", "s", "m", [bad])
    with pytest.raises(ValueError, match="key 'v'"):
        store.save_many("u", "s", values={"v": bad}, lists={"l": [1]})
    assert raw.rows("u:s") == []
    store.save_list("u", "s", "m", [None, {"a": None}, 1.5])  # null itself is fine
    assert store.get_list("u", "s", "m") == [None, {"a": None}, 1.5]


def test_a_nan_in_a_changed_item_of_a_warm_list_is_refused(store, raw):
    store.save_list("u", "s", "m", [{"a": None}, {"b": 1}])
    with pytest.raises(ValueError, match="item 1 of list 'm'"):
        store.save_list("u", "s", "m", [{"a": None}, {"b": math.nan}])
    assert store.get_list("u", "s", "m") == [{"a": None}, {"b": 1}]


@pytest.mark.parametrize("bad", [{"a": 1}, "abc", b"abc", 5])
def test_a_mapping_str_or_bytes_is_not_a_list(store, raw, bad):
    with pytest.raises(TypeError, match="items must be a list"):
        store.append_list("u", "s", "m", bad)
    with pytest.raises(TypeError, match="values must be a list"):
        store.save_list("u", "s", "m", bad)
    assert raw.rows("u:s") == []
    assert store.append_list("u", "s", "m", (x for x in [1, 2])) == 2  # other iterables still work


def test_a_list_whose_first_item_is_null_reads_as_that_item_not_as_absent(store):
    """get gave the default, get_many left the key out and a transaction's get the default for
    a list whose first item is null, as for an empty list (audit of 2026-12-07): get reads item
    0, and a stored null is None. An empty list still reads as absent."""
    store.save_list("u", "s", "m", [None, "second"])
    store.save_list("u", "s", "empty", [])
    assert store.get("u", "s", "m", default="D") is None
    assert store.get("u", "s", "empty", default="D") == "D"
    assert store.get_many("u", "s", values=["m", "empty"], versioned=True) == {"m": (None, 1)}
    assert store.transaction(lambda tx: (tx.get("u", "s", "m", default="D"), tx.get("u", "s", "empty", default="D"))) == (
        None, "D")


def test_a_list_compare_and_set_with_the_version_get_versioned_read_goes_through(store, other):
    """A worker that wrote the list at version 1, then read version 2 (another worker's save)
    with get_versioned, had its compare-and-set on 2 refused: its memory of the list was still
    version 1's (audit of 2026-12-07). A strong value read now updates it."""
    store.save_list("u", "s", "m", [1])
    other.save_list("u", "s", "m", [1, 2, 3])
    version = store.get_versioned("u", "s", "m").version
    assert version == 2 and store.save_list_if_version("u", "s", "m", [1, 2, 3, 4], version) == 3
    assert other.get_list_versioned("u", "s", "m") == ([1, 2, 3, 4], 3)


def test_a_list_compare_and_set_with_a_version_another_worker_read_goes_through(store, other, raw):
    """A worker that last saw the list at version 1 was refused a compare-and-set on version 2
    that another worker read (its memory of version 1's hash row could not tell anything of
    version 2); the version alone decides then. A hash row rewritten behind a version this
    process did see (the Java store's list save leaves the version) is still refused."""
    from mysql_state import StaleStateError

    store.save_list("u", "s", "m", [1])
    other.save_list("u", "s", "m", [1, 2, 3])
    version = other.get_list_versioned("u", "s", "m").version
    assert store.save_list_if_version("u", "s", "m", [1, 2, 3, 4], version) == 3
    report = store.save_many("u", "s", lists={"m": [1, 2, 3, 4, 5]}, expected_versions={"m": 3})
    assert report["m"].version == 4
    other.save("u", "s", "m", "now a value")
    assert store.save_list_if_version("u", "s", "m", [9], other.get_versioned("u", "s", "m").version) == 6
    assert other.get_list("u", "s", "m") == [9]
    # the hash row rewritten with its version left (as the Java store's list save does)
    assert store.get_list_versioned("u", "s", "m").version == 6
    raw.execute("UPDATE {t} SET state_data = 'rewritten' WHERE state_key = 'm:_hash'")
    with pytest.raises(StaleStateError, match="not the list this process last read or wrote"):
        store.save_list_report("u", "s", "m", [9, 10], expected_version=6)
