"""listsync: change detection and write plans, no server.

The property that matters: applying a plan to the stored rows gives exactly the new list, and
the hash row describes exactly the list written."""

from __future__ import annotations

import orjson
from hypothesis import given, settings, strategies as st

from mysql_state import listsync
from mysql_state.listsync import ListHash, PLAIN

items = st.lists(st.one_of(st.integers(-3, 3), st.text(max_size=3), st.none()), max_size=12)


def encode(values, start=0):
    return [orjson.dumps(v) for v in values]


def apply(stored: list[bytes], plan: listsync.Plan) -> list[bytes]:
    rows = {} if plan.delete_all else dict(enumerate(stored))
    if plan.delete_from is not None:
        rows = {i: d for i, d in rows.items() if i < plan.delete_from}
    rows.update(dict(plan.upserts))
    return [rows[i] for i in sorted(rows)]


@given(old=items, new=items)
def test_plan_against_stored_rows_gives_the_new_list(old, new):
    stored, datas = encode(old), encode(new)
    plan = listsync.plan_against_stored(datas, stored)
    assert apply(stored, plan) == datas
    assert plan.rows_written == sum(1 for i, d in enumerate(datas) if i >= len(stored) or stored[i] != d)


@settings(max_examples=200)
@given(old=items, new=items)
def test_a_warm_snapshot_plans_exactly(old, new):
    """A snapshot of what was written plans the next save; the result is the new list and the
    new hash row verifies against it."""
    stored = encode(old)
    digests = PLAIN.digests(stored)
    _, snap = listsync.full_snapshot(orjson.dumps(old), stored, digests)
    out = snap.diff(orjson.dumps(new), new, encode)
    if out is None:  # the cold path: per-item plan against the stored rows
        return
    plan, after = out
    assert apply(stored, plan) == encode(new)
    if plan.kind != "unchanged":
        assert listsync.verify(plan.new_hash, encode(new))
    assert after.n == len(new)


@given(old=items, new=items)
def test_cold_start_finds_the_unchanged_checkpoint_or_says_so(old, new):
    """A process that never saw the list checks the stored checkpoint with one hash; when it
    says the prefix is unchanged, the plan it makes gives the new list."""
    stored = encode(old)
    h, _ = listsync.full_snapshot(orjson.dumps(old), stored, PLAIN.digests(stored))
    start = listsync.cold_start(orjson.dumps(new), new, h, encode)
    if start is None:
        return  # the per-item path takes over: nothing was claimed
    assert new[: h.p] == old[: h.p]
    out = start.plan(stored[h.p:] if start.needs_read() else None)
    if out is not None:
        plan, _ = out
        assert apply(stored, plan) == encode(new)


def test_hash_row_round_trips_and_foreign_ones_are_refused():
    datas = encode([1, "a", None])
    h, _ = listsync.full_snapshot(orjson.dumps([1, "a", None]), datas, PLAIN.digests(datas))
    assert ListHash.parse(h.to_json().decode()) == h
    assert listsync.verify(h, datas)
    assert not listsync.verify(h, encode([1, "b", None]))
    for foreign in (None, "", "[]", '{"fmt":"java"}', '{"fmt":"mysql-state/list-v2","n":-1,"sum":"0"}', "not json"):
        assert ListHash.parse(foreign) is None
    legacy = ListHash.parse('{"fmt":"mysql-state/list-v1","n":3,"sum":"%032x"}' % h.total)
    assert legacy is not None and legacy.n == 3 and legacy.p == 0


def test_an_append_extends_the_hash_in_proportion_to_new_items():
    datas = encode(list(range(5)))
    h, _ = listsync.full_snapshot(orjson.dumps(list(range(5))), datas, PLAIN.digests(datas))
    more = encode([5, 6])
    h2 = h.extended(PLAIN.digests(more, 5))
    assert h2.n == 7 and listsync.verify(h2, datas + more)


def test_keyed_digests_differ_from_plain_ones():
    keyed = listsync.Digester(b"k" * 32, "k1")
    assert keyed.digest(0, b"1") != PLAIN.digest(0, b"1")
    assert PLAIN.digest(0, b"1") != PLAIN.digest(1, b"1")  # index-salted


def test_the_kinds_of_a_save_are_the_ones_the_docs_name():
    """docs/lists.md's table: what each kind of save writes."""
    old = encode([1, 2, 3])
    cases = {
        "append": ([1, 2, 3, 4, 5], 2),       # the new items only
        "suffix": ([1, 2, 9, 4], 2),          # from the first changed item, not shorter
        "shrink": ([1, 9], 1),                # shorter: the changed items, rows past the end deleted
        "clear": ([], 0),
    }
    for kind, (new, rows) in cases.items():
        plan = listsync.plan_against_stored(encode(new), old)
        assert (plan.kind, plan.rows_written) == (kind, rows), (kind, plan)
        assert apply(old, plan) == encode(new)
    shrunk = listsync.plan_against_stored(encode([1, 9]), old)
    assert shrunk.delete_from == 2
    h, _ = listsync.full_snapshot(orjson.dumps([1, 2, 3]), old, PLAIN.digests(old))
    assert listsync.plan_cold(old, PLAIN.digests(old), h).kind == "unchanged"   # by the hash row alone
    assert listsync.plan_cold(old, PLAIN.digests(old), None).kind == "rewrite"  # no (or a foreign) hash row
    rewrite = listsync.plan_rewrite(encode([7, 8]))
    assert (rewrite.kind, rewrite.rows_written, rewrite.delete_all) == ("rewrite", 2, True)
