"""Saves in a process that has never seen the list (another worker, a restart): the checkpoint
in the hash row makes them one hash over one byte range plus work on the items after it, and
they stay exact: any change to any item is written."""

from __future__ import annotations

import uuid

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mysql_state import MysqlAgentStateStore, serde
from mysql_state.listsync import HASH_FORMAT, ListHash, digests

from .conftest import Raw
from .test_faults import check_list_rows


def msg(i: int, text: str = "") -> dict:
    return {"role": "user" if i % 2 else "assistant", "content": f"message {i} {text}", "i": i}


class Encoded:
    """Counts the items the store encodes one by one (the per-item path encodes them all)."""

    def __init__(self, monkeypatch):
        self.items = 0
        real = serde.encode_items

        def counting(values, key, start=0, **kw):
            out = real(values, key, start, **kw)
            self.items += len(out)
            return out

        monkeypatch.setattr(serde, "encode_items", counting)


@pytest.fixture
def fresh(url, database, store):
    """A new store object per call: a process that never saw the list."""
    made = []

    def make():
        s = MysqlAgentStateStore.from_url(url, database_name=database)
        made.append(s)
        return s

    yield make
    for s in made:
        s.close()


def test_cold_save_after_one_appended_turn_touches_only_the_turn(store, raw, fresh, monkeypatch):
    items = [msg(i) for i in range(2000)]
    store.save_list("u", "s", "m", items)
    h = ListHash.parse(raw.query("SELECT state_data FROM {t} WHERE state_key='m:_hash'")[0][0])
    assert (h.n, h.p) == (2000, 1999)  # the checkpoint sits before the last item
    b = fresh()
    b.save("u", "s", "other", 1)  # the write pool is connected
    counted = Encoded(monkeypatch)
    items += [msg(2000), msg(2001)]
    plan, n = raw.statements(lambda: b.save_list_report("u", "s", "m", items))
    assert (plan.kind, list(plan.indexes)) == ("append", [2000, 2001])
    assert n == 3 and counted.items == 3  # lock, upsert, COMMIT; the old last item and the turn
    assert check_list_rows(raw, "u:s", "m") == items


def test_cold_save_after_the_last_message_grew_in_place(store, raw, fresh, monkeypatch):
    items = [msg(i) for i in range(500)]
    store.save_list("u", "s", "m", items)
    items[-1] = msg(499, "and more streamed text")
    b = fresh()
    b.save("u", "s", "other", 1)  # the write pool is connected
    counted = Encoded(monkeypatch)
    plan, n = raw.statements(lambda: b.save_list_report("u", "s", "m", items))
    assert (plan.kind, list(plan.indexes)) == ("suffix", [499])
    assert n == 3 and counted.items == 1  # lock, upsert, COMMIT; no stored item read
    # grew in place and one more appended, cold again
    items[-1] = msg(499, "and even more")
    items.append(msg(500))
    plan = fresh().save_list_report("u", "s", "m", items)
    assert (plan.kind, list(plan.indexes)) == ("suffix", [499, 500])
    assert check_list_rows(raw, "u:s", "m") == items


def test_after_appends_the_items_since_the_checkpoint_are_checked(store, raw, fresh):
    store.save_list("u", "s", "m", [msg(i) for i in range(10)])
    for i in range(10, 30):
        store.append_list("u", "s", "m", [msg(i)])  # the checkpoint stays at 9
    items = [msg(i) for i in range(30)]
    items[20] = msg(20, "edited")
    plan = fresh().save_list_report("u", "s", "m", items)  # reads items 9.. once, writes 20
    assert (plan.kind, list(plan.indexes)) == ("suffix", [20])
    assert check_list_rows(raw, "u:s", "m") == items


def test_a_hash_row_of_the_previous_format_is_read_then_upgraded(store, raw, fresh):
    items = [msg(i) for i in range(20)]
    store.save_list("u", "s", "m", items)
    datas = [orjson.dumps(x) for x in items]
    v1 = orjson.dumps({"fmt": "mysql-state/list-v1", "n": 20, "sum": format(sum(digests(datas)) % (1 << 128), "032x")})
    raw.execute("UPDATE {t} SET state_data=%s WHERE state_key='m:_hash'", (v1.decode(),))
    items.append(msg(20))
    plan = fresh().save_list_report("u", "s", "m", items)
    assert (plan.kind, plan.rows_written) == ("append", 1)
    row = orjson.loads(raw.query("SELECT state_data FROM {t} WHERE state_key='m:_hash'")[0][0])
    assert row["fmt"] == HASH_FORMAT and row["p"] == 20
    assert check_list_rows(raw, "u:s", "m") == items


# ---- exactness: any change to any item is written, whichever path plans it ----------------------

EDITS = ("append", "grow_last", "edit", "same_size", "swap", "delete", "insert", "truncate", "clear",
         "replace", "duplicate_last", "none")


def edited(items: list, edit: str, i: int, tag: str) -> list:
    out = list(items)
    j = i % len(out) if out else 0
    if edit == "append":
        out += [msg(len(out), tag), msg(len(out) + 1, tag)]
    elif edit == "grow_last" and out:
        out[-1] = {**out[-1], "content": out[-1]["content"] + tag}
    elif edit == "edit" and out:
        out[j] = {**out[j], "content": tag}
    elif edit == "same_size" and out:
        c = out[j]["content"]
        out[j] = {**out[j], "content": c[:-1] + ("X" if c[-1:] != "X" else "Y")}
    elif edit == "swap" and len(out) > 1:
        out[j], out[-1] = out[-1], out[j]
    elif edit == "delete" and out:
        del out[j]
    elif edit == "insert":
        out.insert(j, msg(999, tag))
    elif edit == "truncate":
        out = out[j:]
    elif edit == "clear":
        out = []
    elif edit == "replace":
        out = [msg(7, tag)] + out[-3:]
    elif edit == "duplicate_last" and out:
        out.append(out[-1])
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=st.integers(0, 40), steps=st.lists(st.tuples(st.sampled_from(EDITS), st.integers(0, 50),
                                                      st.sampled_from(["A", "B", "append"])), min_size=1, max_size=6))
def test_every_edit_is_stored_exactly_warm_or_cold(url, database, store, n, steps):
    sid = uuid.uuid4().hex[:8]
    a = store
    b = MysqlAgentStateStore.from_url(url, database_name=database, pool_size=2)
    raw = Raw(url, database)
    try:
        items = [msg(i) for i in range(n)]
        a.save_list("u", sid, "m", items)
        for k, (edit, i, who) in enumerate(steps):
            if who == "append":
                new = [msg(100 + k, "app")]
                (a if i % 2 else b).append_list("u", sid, "m", new)
                items = items + new
                continue
            items = edited(items, edit, i, f"{k}")
            (a if who == "A" else b).save_list("u", sid, "m", items)
            assert check_list_rows(raw, f"u:{sid}", "m") == items, (edit, i, who)
        assert b.get_list("u", sid, "m") == items and a.get_list("u", sid, "m") == items
    finally:
        raw.close()
        b.close()
