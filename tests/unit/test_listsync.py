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


# ---- issue 21: the v3 format (BLAKE3 checkpoint), older formats read and upgraded -----------------

import hashlib  # noqa: E402
import hmac  # noqa: E402

import blake3  # noqa: E402

from mysql_state.listsync import HASH_FORMAT, HASH_VERSION, Digester  # noqa: E402

KEYED = Digester(b"d" * 32, "k1")


def hashed(values, dig=PLAIN):
    datas = encode(values)
    return listsync.full_snapshot(orjson.dumps(values), datas, dig.digests(datas), dig)


def v2_row(values, dig=PLAIN) -> str:
    """The hash row the previous release wrote: checkpoint before the last item, SHA-256."""
    datas = encode(values)
    p = max(len(datas) - 1, 0)
    prefix = b",".join(datas[:p])
    ph = (hmac.new(dig.key, prefix, hashlib.sha256) if dig.key else hashlib.sha256(prefix)).digest()
    obj = {"fmt": "mysql-state/list-v2", "n": len(datas), "sum": format(sum(dig.digests(datas)) % (1 << 128), "032x"),
           "p": p, "plen": len(prefix), "ph": ph.hex(), "psum": format(sum(dig.digests(datas[:p])) % (1 << 128), "032x")}
    if dig.kid is not None:
        obj["dk"] = dig.kid
    return orjson.dumps(obj).decode()


def test_the_format_written_is_v3_with_a_blake3_checkpoint():
    values = ["a", {"b": 1}, [2], "last"]
    h, snap = hashed(values)
    row = orjson.loads(h.to_json())
    assert HASH_FORMAT == "mysql-state/list-v3" and row["fmt"] == HASH_FORMAT and h.v == HASH_VERSION == 3
    prefix = b",".join(encode(values)[:3])
    assert (row["p"], row["plen"]) == (3, len(prefix))
    assert bytes.fromhex(row["ph"]) == blake3.blake3(prefix).digest()
    hk, _ = hashed(values, KEYED)
    assert hk.ph == blake3.blake3(prefix, key=b"d" * 32).digest() and hk.dk == "k1"
    assert ListHash.parse(h.to_json().decode()) == h and ListHash.parse(hk.to_json().decode()) == hk


def test_a_v2_row_reads_back_to_its_own_text_and_verifies_with_sha256():
    for dig in (PLAIN, KEYED):
        text = v2_row(list(range(6)), dig)
        h = ListHash.parse(text)
        assert h is not None and h.v == 2 and h.p == 5
        assert h.to_json().decode() == text  # a conditional write compares this text
        assert listsync.verify(h, encode(list(range(6))), dig)
        assert not listsync.verify(h, encode([0, 1, 2, 3, 9, 5]), dig)
    v1 = '{"fmt":"mysql-state/list-v1","n":3,"sum":"%032x"}' % (sum(PLAIN.digests(encode([1, 2, 3]))) % (1 << 128))
    assert ListHash.parse(v1).to_json().decode() == v1 and listsync.verify(ListHash.parse(v1), encode([1, 2, 3]))


def test_a_cold_save_over_a_v2_row_checks_it_with_sha256_and_writes_v3():
    for dig in (PLAIN, KEYED):
        old = [{"m": i} for i in range(8)]
        stored = ListHash.parse(v2_row(old, dig))
        for new, kind in ((old + [{"m": 8}], "append"), (old[:7] + [{"m": "grown"}], "suffix"), (old, "unchanged")):
            start = listsync.cold_start(orjson.dumps(new), new, stored, encode, dig)
            assert start is not None
            plan, snap = start.plan(encode(old)[7:] if start.needs_read() else None)
            assert plan.kind == kind and apply(encode(old), plan) == encode(new)
            assert plan.new_hash is not None and plan.new_hash.v == 3  # upgraded, even when unchanged
            assert listsync.verify(plan.new_hash, encode(new), dig) and snap.hash == plan.new_hash
        edited = [{"m": "x"}] + old[1:]
        assert listsync.cold_start(orjson.dumps(edited), edited, stored, encode, dig) is None  # SHA-256 says so


def test_appends_and_pops_on_an_older_row_write_v3_with_the_checkpoint_at_0():
    for dig in (PLAIN, KEYED):
        datas = encode(list(range(6)))
        old = ListHash.parse(v2_row(list(range(6)), dig))
        more = encode([6, 7])
        h = old.extended(dig.digests(more, 6), dig.empty)
        assert (h.v, h.p, h.n) == (3, 0, 8) and listsync.verify(h, datas + more, dig)
        popped = old.without_last(dig.digest(5, datas[5]), dig.empty)
        assert (popped.v, popped.p, popped.n) == (3, 0, 5) and listsync.verify(popped, datas[:5], dig)
        current, _ = hashed(list(range(6)), dig)  # a v3 row keeps its checkpoint
        assert current.extended(dig.digests(more, 6), dig.empty).p == current.p == 5


# ---- issue 21 step 2: a worker that saw the list extends the hasher state it kept -----------------


def test_a_seen_snapshot_seeds_the_checkpoint_check():
    """Worker B wrote the list (its snapshot), worker A appended twice; B's next save checks the
    stored checkpoint from B's hasher state: the same outcome as hashing from byte 1."""
    mine = [f"turn {i}" * 3 for i in range(10)]
    _, seen = hashed(mine)
    theirs = mine + ["a1", "a2"]
    stored, _ = hashed(theirs)  # what the other worker stored
    new = theirs + ["b"]
    blob = orjson.dumps(new)
    seed = listsync.seed_of(seen, blob, stored, PLAIN)
    assert seed is not None and seed[1] == 1 + seen.hash.plen
    with_seed = listsync.cold_start(blob, new, stored, encode, PLAIN, seen)
    without = listsync.cold_start(blob, new, stored, encode, PLAIN)
    assert with_seed is not None and without is not None
    assert with_seed.hasher.digest() == without.hasher.digest() == stored.ph
    p1, s1 = with_seed.plan(None)
    p2, _ = without.plan(None)
    assert (p1.kind, p1.upserts, p1.new_hash) == (p2.kind, p2.upserts, p2.new_hash) == ("append", [(12, b'"b"')], p1.new_hash)
    assert listsync.verify(p1.new_hash, encode(new)) and s1.hash == p1.new_hash
    # the seed really is what is extended: a snapshot whose state is of other bytes fails the check
    forged = listsync.Snapshot(seen.blob, seen.n, seen.base, seen.first_end, seen.ends,
                               blake3.blake3(b"something else"), seen.hash)
    assert listsync.cold_start(blob, new, stored, encode, PLAIN, forged) is None


def test_the_seed_is_not_used_where_it_does_not_fit():
    mine = [f"m{i}" for i in range(10)]
    _, seen = hashed(mine)
    stored, _ = hashed(mine + ["x"])
    changed = ["CHANGED"] + mine[1:] + ["x", "y"]  # differs inside the remembered prefix
    assert listsync.seed_of(seen, orjson.dumps(changed), stored, PLAIN) is None
    assert listsync.cold_start(orjson.dumps(changed), changed, stored, encode, PLAIN, seen) is None
    short, _ = hashed(mine[:4])  # the stored checkpoint lies before the seen one
    assert listsync.seed_of(seen, orjson.dumps(mine[:4] + ["z"]), short, PLAIN) is None
    assert listsync.seed_of(seen, orjson.dumps(mine + ["x", "y"]), stored, KEYED) is None  # another key
    v2 = ListHash.parse(v2_row(mine + ["x"]))
    assert listsync.seed_of(seen, orjson.dumps(mine + ["x", "y"]), v2, PLAIN) is None  # another hash


@settings(max_examples=200)
@given(first=items, between=items, edit=st.one_of(st.none(), st.tuples(st.integers(0, 30), st.integers(-3, 3))),
       more=items)
def test_seeded_and_unseeded_checks_agree(first, between, edit, more):
    """Whatever was stored since and whatever the new list is, the seeded check gives exactly
    what hashing from byte 1 gives (the plan, the new hash row)."""
    _, seen = hashed(first)
    stored_values = first + between
    stored, _ = hashed(stored_values)
    new = stored_values + more
    if edit is not None and new:
        new[edit[0] % len(new)] = edit[1]
    blob = orjson.dumps(new)
    a = listsync.cold_start(blob, new, stored, encode, PLAIN, seen)
    b = listsync.cold_start(blob, new, stored, encode, PLAIN)
    assert (a is None) == (b is None)
    if a is None:
        return
    tail = encode(stored_values)[stored.p:]
    pa = a.plan(tail if a.needs_read() else None)
    pb = b.plan(tail if b.needs_read() else None)
    assert (pa is None) == (pb is None)
    if pa is not None:
        assert (pa[0].kind, pa[0].upserts, pa[0].delete_from, pa[0].new_hash) == \
            (pb[0].kind, pb[0].upserts, pb[0].delete_from, pb[0].new_hash)
        assert apply(encode(stored_values), pa[0]) == encode(new)
        if pa[0].new_hash is not None:
            assert listsync.verify(pa[0].new_hash, encode(new))


def test_plan_on_hint_is_an_append_or_nothing():
    old = [{"m": i} for i in range(5)]
    hint, _ = hashed(old)
    new = old + [{"m": 5}, {"m": 6}]
    plan, snap = listsync.plan_on_hint(orjson.dumps(new), new, hint, encode)
    assert plan.kind == "append" and [i for i, _ in plan.upserts] == [5, 6] and plan.delete_from is None
    assert apply(encode(old), plan) == encode(new) and listsync.verify(plan.new_hash, encode(new))
    assert snap.hash == plan.new_hash
    for other in (old[:3], old[:4] + [{"m": "x"}], [{"m": "x"}] + old[1:] + [{"m": 5}], old):
        assert listsync.plan_on_hint(orjson.dumps(other), other, hint, encode) is None


def test_the_head_a_one_statement_append_compares_is_the_hash_row_text_up_to_p():
    """``ListHash.head(n, sum)`` is what ``SUBSTRING_INDEX(text, ',"p":', 1)`` gives for every
    hash row this store writes (any checkpoint, keyed or not), and differs for another n or sum."""
    import random

    from mysql_state.listsync import ListHash

    rng = random.Random(7)
    for _ in range(500):
        n = rng.randrange(0, 10 ** rng.randint(1, 9))
        total = rng.getrandbits(128)
        h = ListHash(n, total, rng.randrange(0, n + 1), rng.randrange(0, 10 ** 7), rng.randbytes(32),
                     rng.getrandbits(128), rng.choice([None, "k1", "key-2"]))
        text = h.to_json()
        assert text.split(b',"p":', 1)[0] == ListHash.head(n, total)
        assert ListHash.head(n + 1, total) != ListHash.head(n, total) != ListHash.head(n, total ^ 1)
