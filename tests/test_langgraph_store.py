"""MysqlStore (LangGraph's long-term memory store) against LangGraph's InMemoryStore, on the
real server: the same answers on random operation sequences, the same validation errors, the
same vector ranking and scores; TTL expiry and sweeping seen with plain SQL; a prefix search
reading only its range; the operator's tools (forget_user, export/import, encryption) over it."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import random
import threading
import time
import warnings

import pytest

pytest.importorskip("langgraph.store.base", reason="needs the langgraph extra: pip install 'mysql-state[langgraph]'")

from langgraph.store.base import GetOp, InvalidNamespaceError, PutOp, SearchOp, get_text_at_path  # noqa: E402
from langgraph.store.memory import InMemoryStore  # noqa: E402

from mysql_state import AsyncMysqlAgentStateStore, Keyring, MysqlAgentStateStore, MysqlStateWarning  # noqa: E402
from mysql_state.langgraph import MysqlStore  # noqa: E402
from .conftest import make_java_table  # noqa: E402
from .rows_read import RowsRead  # noqa: E402

SESSION = "alice:langgraph-store"
DIMS = 12


class Reference(InMemoryStore):
    """InMemoryStore with the two differences MysqlStore has on purpose normalised away:

    * a namespace is listed (and keeps its place) only while it holds items: InMemoryStore
      keeps every namespace it ever saw, even one only read by ``get`` or emptied by deletes;
    * a put replaces the item's vectors (``index=False`` leaves none, as BaseStore.put's
      docstring says): InMemoryStore keeps the vectors of an earlier put.
    """

    def _extract_texts(self, put_ops):
        # After the batch's searches (which see the vectors from before the batch), as
        # InMemoryStore.batch calls this: the puts' old vectors go, then the new ones are made.
        for (namespace, key), op in put_ops.items():
            if op.value is not None:
                self._vectors[namespace].pop(key, None)
        return super()._extract_texts(put_ops)

    def batch(self, ops):
        out = super().batch(ops)
        self._forget_empty()
        return out

    async def abatch(self, ops):
        out = await super().abatch(ops)
        self._forget_empty()
        return out

    def _forget_empty(self):
        for ns in [ns for ns, items in self._data.items() if not items]:
            del self._data[ns]


def embed(texts):
    """A deterministic embedding: letter counts folded into DIMS dimensions, plus a hash part."""
    out = []
    for t in texts:
        v = [0.0] * DIMS
        for ch in t.lower():
            v[ord(ch) % DIMS] += 1.0
        h = hashlib.sha256(t.encode()).digest()
        v[h[0] % DIMS] += h[1] / 255.0
        out.append(v)
    return out


async def aembed(texts):
    return embed(texts)


def view(result):
    """What must agree: namespaces, keys, values, order and scores (not the timestamps)."""
    if result is None:
        return None
    if isinstance(result, list):
        return [view(r) for r in result]
    if isinstance(result, tuple):
        return result
    score = getattr(result, "score", "n/a")
    return (result.namespace, result.key, result.value, score)


@pytest.fixture
def memory(store):
    m = MysqlStore(store, user_id="alice")
    yield m
    m.close()


# ---- the same answers as InMemoryStore ---------------------------------------------------------

NAMESPACES = [("a",), ("a", "b"), ("a", "bc"), ("a", "b", "c"), ("x",), ("x", "y"), ("x", "y", "z"), ("b",),
              ("a", "b/c"), ("ü ber", "A")]
PREFIXES = [(), ("a",), ("a", "b"), ("a", "bc"), ("x",), ("x", "y"), ("nope",), ("a", "b", "c")]
KEYS = ["k1", "k2", "k.3", "k/4", "", "K1", "ключ", "x:_hash", "nul\x00 tab\t ", ".."]
FILTERS = [None, {"tag": "red"}, {"n": {"$gt": 3}}, {"n": {"$gte": 2, "$lt": 7}}, {"n": {"$ne": 4}},
           {"n": {"$lte": 1}}, {"nested": {"k": 1}}, {"tag": {"$eq": "blue"}}, {"lst": [1, 2]},
           {"tag": "red", "n": {"$gt": 0}}]


def random_value(rng: random.Random) -> dict:
    v = {"n": rng.randint(0, 9), "tag": rng.choice(["red", "blue", "green"]), "text": rng.choice(
        ["apples and pears", "mysql is a database", "langgraph memory", "the quick brown fox", "zebra"])}
    if rng.random() < 0.5:
        v["nested"] = {"k": rng.randint(0, 2)}
    if rng.random() < 0.3:
        v["lst"] = rng.choice([[1, 2], [2, 1], [1]])
    return v


def random_op(rng: random.Random):
    """One public call, as (method name, args, kwargs)."""
    kind = rng.choices(["put", "delete", "get", "search", "list"], [40, 12, 15, 20, 13])[0]
    if kind == "put":
        return "put", (rng.choice(NAMESPACES), rng.choice(KEYS), random_value(rng)), {}
    if kind == "delete":
        return "delete", (rng.choice(NAMESPACES), rng.choice(KEYS)), {}
    if kind == "get":
        return "get", (rng.choice(NAMESPACES + [("zz",)]), rng.choice(KEYS)), {}
    if kind == "search":
        return "search", (rng.choice(PREFIXES),), {
            "filter": rng.choice(FILTERS), "limit": rng.choice([1, 2, 3, 10, 100]), "offset": rng.choice([0, 0, 1, 2, 5])}
    kw = {"limit": rng.choice([1, 3, 100]), "offset": rng.choice([0, 0, 1, 3])}
    if rng.random() < 0.5:
        kw["prefix"] = rng.choice([("a",), ("x",), ("a", "*"), ("*", "b"), ("x", "y"), ("a", "b")])
    if rng.random() < 0.3:
        kw["suffix"] = rng.choice([("b",), ("y",), ("*", "c"), ("z",)])
    if rng.random() < 0.4:
        kw["max_depth"] = rng.choice([1, 2, 3])
    return "list_namespaces", (), kw


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_sequences_answer_as_inmemory_store(store, seed):
    """Random put/delete/get/search(filter, limit, offset)/list_namespaces(prefix, suffix,
    max_depth, limit, offset) sequences: every answer equal to InMemoryStore's, order included."""
    rng = random.Random(seed)
    mine, ref = MysqlStore(store, user_id=f"u{seed}"), Reference()
    for step in range(220):
        name, args, kw = random_op(rng)
        got, want = getattr(mine, name)(*args, **kw), getattr(ref, name)(*args, **kw)
        assert view(got) == view(want), f"seed {seed} step {step}: {name}{args} {kw}"
        if name == "get" and got is not None:
            assert got.created_at <= got.updated_at
    assert view(mine.search((), limit=1000)) == view(ref.search((), limit=1000))
    assert mine.list_namespaces(limit=1000) == ref.list_namespaces(limit=1000)


def test_batches_answer_as_inmemory_store(memory):
    """One batch: reads see the state before it, the last put of a key wins, order is kept."""
    ref = Reference()
    ops = [PutOp(("p",), "a", {"n": 1}), PutOp(("q",), "b", {"n": 2}), PutOp(("p",), "c", {"n": 3}),
           GetOp(("p",), "a"), PutOp(("p",), "a", {"n": 4}), SearchOp(("p",))]
    assert view(memory.batch(ops)) == view(ref.batch(ops))
    ops = [GetOp(("p",), "a"), SearchOp(()), PutOp(("p",), "a", None), PutOp(("p",), "c", None),
           PutOp(("p",), "d", {"n": 5})]
    assert view(memory.batch(ops)) == view(ref.batch(ops))
    assert view(memory.search(())) == view(ref.search(()))
    assert memory.list_namespaces() == ref.list_namespaces() == [("p",), ("q",)]


def test_an_overwrite_keeps_created_at_and_its_place(memory, raw):
    memory.put(("n",), "first", {"v": 1})
    memory.put(("n",), "second", {"v": 2})
    before = memory.get(("n",), "first")
    time.sleep(0.01)
    memory.put(("n",), "first", {"v": 3})
    after = memory.get(("n",), "first")
    assert after.value == {"v": 3} and after.created_at == before.created_at and after.updated_at > before.updated_at
    assert [i.key for i in memory.search(("n",))] == ["first", "second"]
    memory.delete(("n",), "first")
    memory.put(("n",), "first", {"v": 4})
    assert [i.key for i in memory.search(("n",))] == ["second", "first"]
    row = raw.query("SELECT state_data FROM {t} WHERE session_id = %s AND state_key = 'in..first.'", (SESSION,))
    assert json.loads(row[0][0])["value"] == {"v": 4}


# ---- validation: the same errors, before any SQL -------------------------------------------------

BAD_NAMESPACES = [(), ("langgraph",), ("langgraph", "x"), ("a.b",), ("",), ("a", ""), (1,), ("a", None), ("a\x00",)]


def _error(fn):
    try:
        fn()
    except Exception as exc:  # noqa: BLE001 - the error itself is compared
        return type(exc), str(exc)
    return None


@pytest.mark.parametrize("ns", BAD_NAMESPACES, ids=repr)
def test_namespace_errors_are_inmemory_stores(memory, raw, ns):
    ref = InMemoryStore()
    calls = [lambda s: s.put(ns, "k", {"v": 1}), lambda s: s.get(ns, "k"), lambda s: s.delete(ns, "k"),
             lambda s: s.search(ns), lambda s: s.list_namespaces(prefix=ns), lambda s: s.list_namespaces(suffix=ns)]
    for call in calls:
        assert _error(lambda: call(memory)) == _error(lambda: call(ref))
    assert _error(lambda: memory.put(ns, "k", {"v": 1}))[0] is InvalidNamespaceError
    assert raw.rows(SESSION) == []


def test_bad_puts_are_refused_before_any_sql(memory, raw):
    with pytest.raises(ValueError, match="too long for MysqlStore.*255"):
        memory.put(("ns",) * 90, "key", {"v": 1})
    with pytest.raises(ValueError, match="too long for MysqlStore"):
        memory.put(("ns",), "k" * 251, {"v": 1})
    memory.put(("ns",), "k" * 249, {"v": 1})  # 1 + 3 + 1 + 249 + 1 = 255: fits
    assert memory.get(("ns",), "k" * 249).value == {"v": 1}
    assert memory.get(("ns",), "k" * 300) is None  # cannot be stored, so is not there
    assert memory.search(("n",) * 200) == [] and memory.list_namespaces(prefix=("n",) * 200) == []
    assert memory.get(("ns",), "\ud800") is None
    with pytest.raises(ValueError, match="lone surrogate"):
        memory.put(("ns",), "\ud800", {"v": 1})
    with pytest.raises(ValueError, match="ttl"):
        memory.put(("ns",), "t", {"v": 1}, ttl=-1)
    with pytest.raises(TypeError, match="must be a dict, got list"):
        memory.batch([PutOp(("ns",), "x", ["not", "a", "dict"])])
    import collections

    with pytest.raises(TypeError, match="must be a dict, got UserDict"):  # orjson cannot write one
        memory.put(("ns",), "x", collections.UserDict(v=1))
    for minutes in (5e9, 1e12):  # an expiry past year 9999, a wait no clock sleeps: refused here
        with pytest.raises(ValueError, match="at most 100,000,000"):
            memory.put(("ns",), "t", {"v": 1}, ttl=minutes)
        with pytest.raises(ValueError, match="sweep_interval_minutes must be a positive number of minutes, at most"):
            memory.start_ttl_sweeper(minutes)
    with pytest.raises(ValueError, match=r"default_ttl'\] must be a positive number of minutes, at most"):
        MysqlStore(memory.store, ttl={"default_ttl": 1e10})
    with pytest.raises(ValueError, match="Unsupported operator"):
        memory.search(("ns",), filter={"v": {"$regex": "x"}})
    with pytest.raises(ValueError, match="Unknown operation type"):
        memory.batch([("not", "an", "op")])
    keys = [r[1] for r in raw.rows(SESSION)]
    assert keys == ["ins..", "ins.." + "k" * 249 + "."]


def test_values_json_does_not_hold_are_refused_naming_the_field_and_nothing_is_written(memory, raw):
    """orjson wrote a datetime, a UUID, an Enum or a dataclass as a string or a dict, so the
    value came back as another thing (and a filter with the datetime found nothing, where
    InMemoryStore finds the item); an integer past 64 bits gave orjson's message. As the docs
    say, they are refused, naming the field, and nothing is written."""
    import collections
    import dataclasses
    import datetime
    import enum
    import uuid

    class Color(enum.Enum):
        RED = "red"

    class Mode(str, enum.Enum):
        DARK = "dark"

    class Level(enum.IntEnum):
        HIGH = 3

    class Score(float):
        pass

    Pair = collections.namedtuple("Pair", "a b")

    def deep(levels: int) -> dict:  # a value of that many levels (the value itself is one)
        v: object = 1
        for _ in range(levels):
            v = {"x": v}
        return v  # type: ignore[return-value]

    @dataclasses.dataclass
    class Point:
        x: int

    memory.put(("ok",), "k", {"v": 1})
    before = raw.rows(SESSION)
    for value, said in [({"when": datetime.datetime(2024, 1, 2)}, "field 'when' is a datetime"),
                        ({"a": [1, {"id": uuid.uuid4()}]}, "field 'a.1.id' is a UUID"),
                        ({"c": Color.RED}, "field 'c' is a Color"),
                        ({"p": Point(1)}, "field 'p' is a Point"),
                        ({"n": 2**70}, "field 'n' is an integer past 64 bits"),
                        ({"s": {1, 2}}, "field 's' is a set"),
                        ({"x": [float("nan")]}, "field 'x.0' is nan"),
                        ({"i": float("inf")}, "field 'i' is inf"),
                        ({"t": "a\ud800b"}, "field 't' is a str with a lone surrogate"),
                        ({"d": {"k\udfff": 1}}, "field 'd' has a key with a lone surrogate"),
                        # written by orjson as nothing it can: refused here, not inside the write
                        ({"m": {"score": Score(0.5)}}, "field 'm.score' is a Score, a float subclass"),
                        ({"p": Pair(1, 2)}, "field 'p' is a Pair, a tuple subclass"),
                        ({"d": {Mode.DARK: 1}}, "field 'd' has a key that is not a str: Mode"),
                        (deep(254), "field 'x(.x)+' nests deeper than 253 levels")]:
        with pytest.raises(TypeError, match=f"\\('ev',\\) 'e1' must be what JSON holds: {said}"):
            memory.batch([PutOp(("ok",), "k2", {"v": 2}), PutOp(("ev",), "e1", value)])
        assert raw.rows(SESSION) == before
    memory.put(("deep",), "d", deep(253))  # the deepest that is stored
    assert memory.get(("deep",), "d").value == deep(253)
    memory.put(("enum",), "e", {"mode": Mode.DARK, "level": Level.HIGH})  # str and int enums: plain values
    assert memory.get(("enum",), "e").value == {"mode": "dark", "level": 3}
    memory.put(("ev",), "e1", {"n": 2**64 - 1, "m": -(2**63), "t": (1, "a"), "f": 1.5, "b": True, "z": None})
    assert memory.get(("ev",), "e1").value == {"n": 2**64 - 1, "m": -(2**63), "t": [1, "a"], "f": 1.5, "b": True,
                                                "z": None}


def test_a_batch_with_a_bad_put_reads_and_refreshes_nothing(url, database, raw):
    """A NaN or a lone surrogate was refused only inside the write, after the batch's
    refresh_on_read had been saved (the item's expiry moved by a batch that raised), and the
    error named an internal row key: refused before any SQL now, naming the field."""
    mem = MysqlStore.from_url(url, database_name=database, user_id="refresh",
                              ttl={"default_ttl": 10, "refresh_on_read": True})
    try:
        mem.put(("d",), "k", {"v": 1})
        expiry = raw.rows("refresh:langgraph-store")
        class Score(float):
            pass

        for bad, said in (({"f": float("nan")}, "field 'f' is nan"), ({"t": "\ud800"}, "field 't' is a str"),
                          ({"s": Score(1.5)}, "field 's' is a Score")):
            time.sleep(0.01)
            with pytest.raises(TypeError, match=said):
                mem.batch([GetOp(("d",), "k", refresh_ttl=True), PutOp(("d",), "k2", bad)])
            assert raw.rows("refresh:langgraph-store") == expiry  # no refresh saved, nothing written
    finally:
        mem.close()


def test_a_search_sees_the_vectors_from_before_a_put_of_the_same_key_in_its_batch(store):
    """InMemoryStore's order: the batch's searches, then its puts (the test's Reference pops an
    item's vectors in that order too)."""
    idx = {"dims": DIMS, "embed": embed, "fields": ["text"]}
    mem, ref = MysqlStore(store, user_id="order", index=idx), Reference(index=idx)
    for s in (mem, ref):
        s.put(("d",), "k", {"text": "apples"})
    ops = [SearchOp(("d",), None, 10, 0, "apples"), PutOp(("d",), "k", {"text": "fox"}),
           SearchOp(("d",), None, 10, 0, "fox")]
    got, want = mem.batch(ops), ref.batch(ops)
    assert view(got) == view(want) and got[0][0].score is not None and got[0][0].value == {"text": "apples"}
    assert view(mem.search(("d",), query="fox")) == view(ref.search(("d",), query="fox"))


def test_filters_read_dollar_names_as_inmemory_store_does(memory):
    """Only a dict value with a ``$`` key is an operator dict: a field named ``$schema`` and an
    operand that holds ``$`` keys were refused as unknown operators."""
    oracle = InMemoryStore()
    for s in (memory, oracle):
        s.put(("d",), "a", {"$schema": "v1", "meta": {"$ref": "x"}, "n": 2})
        s.put(("d",), "b", {"$schema": "v2", "meta": {"$ref": "y"}, "n": 5})
    for f in [{"$schema": "v1"}, {"meta": {"$eq": {"$ref": "y"}}}, {"$schema": {"$ne": "v1"}, "n": {"$gt": 1}}]:
        assert view(memory.search(("d",), filter=f)) == view(oracle.search(("d",), filter=f)), f
    for f in [{"meta": {"$near": 1}}, {"meta": {"$ref": "x"}}]:  # a dict value with a $ key: operators
        with pytest.raises(ValueError, match="Unsupported operator"):
            oracle.search(("d",), filter=f)
        with pytest.raises(ValueError, match="Unsupported operator"):
            memory.search(("d",), filter=f)


def test_a_get_of_a_key_that_is_not_a_str_is_none_as_inmemory_store(memory):
    memory.put(("ns",), "5", {"v": 1})
    assert memory.batch([GetOp(("ns",), 5), GetOp(("ns",), None), GetOp(("ns",), "5")])[:2] == [None, None]


def test_a_table_that_ignores_case_is_refused(url, database):
    make_java_table(url, database)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MysqlStateWarning)  # the store's own warning at open
        s = MysqlAgentStateStore.from_url(url, database_name=database)
    with s, pytest.raises(ValueError, match="compare exactly.*migrate"):
        MysqlStore(s)


# ---- vector search ----------------------------------------------------------------------------------


def test_vector_search_ranks_and_scores_as_inmemory_store(store):
    index = {"dims": DIMS, "embed": embed, "fields": ["text"]}
    mine, ref = MysqlStore(store, user_id="alice", index=index), Reference(index=index)
    docs = [(("docs",), "1", {"text": "mysql is a database", "n": 1}, None),
            (("docs",), "2", {"text": "apples and pears", "n": 2}, None),
            (("docs", "sub"), "3", {"text": "langgraph long term memory", "n": 3}, None),
            (("docs",), "4", {"text": "no vector here", "n": 4}, False),
            (("docs",), "5", {"title": "only a title", "text": "zebra crossing", "n": 5}, ["title"]),
            (("docs",), "6", {"parts": ["alpha beta", "gamma delta", "epsilon"], "n": 6}, ["parts[*]"]),
            (("other",), "7", {"text": "mysql replication", "n": 7}, None)]
    for ns, key, value, idx in docs:
        mine.put(ns, key, value, index=idx)
        ref.put(ns, key, value, index=idx)
    for q in ["mysql", "database of apples", "gamma", "memory", "zzz"]:
        for prefix in [(), ("docs",), ("docs", "sub")]:
            for kw in [{}, {"limit": 2}, {"limit": 3, "offset": 1}, {"filter": {"n": {"$gt": 2}}}, {"limit": 10, "offset": 5}]:
                got, want = mine.search(prefix, query=q, **kw), ref.search(prefix, query=q, **kw)
                assert view(got) == view(want), (q, prefix, kw)
    assert any(i.score is None for i in mine.search(("docs",), query="mysql", limit=10))  # "4" unscored
    mine.put(("docs",), "1", {"text": "re-put without a vector"}, index=False)  # its vectors go
    ref.put(("docs",), "1", {"text": "re-put without a vector"}, index=False)
    assert view(mine.search(("docs",), query="mysql")) == view(ref.search(("docs",), query="mysql"))


def test_vectors_live_beside_the_item_and_go_with_it(store, raw):
    mine = MysqlStore(store, user_id="alice", index={"dims": DIMS, "embed": embed})
    mine.put(("v",), "k", {"text": "hello"})
    rows = {r[1]: json.loads(r[3]) for r in raw.rows(SESSION)}
    assert rows["vv..k."] == {"vectors": {"$": embed(get_text_at_path({"text": "hello"}, "$"))[0]}}
    assert json.loads(raw.rows(SESSION)[1][3])["indexed"] is True
    mine.delete(("v",), "k")
    assert raw.rows(SESSION) == []


# ---- TTL ---------------------------------------------------------------------------------------------


def test_expired_items_are_never_returned_and_sweep_removes_them(memory, raw):
    memory.put(("t",), "short", {"v": 1}, ttl=1.5 / 60)  # a second and a half
    memory.put(("t",), "long", {"v": 2}, ttl=60)
    memory.put(("u",), "gone", {"v": 3}, ttl=1.5 / 60)
    memory.put(("t",), "none", {"v": 4})
    assert memory.get(("t",), "short", refresh_ttl=False).value == {"v": 1}
    time.sleep(2.0)
    assert memory.get(("t",), "short") is None
    assert [i.key for i in memory.search(("t",))] == ["long", "none"]
    assert [i.key for i in memory.search(())] == ["long", "none"]
    assert memory.list_namespaces() == [("t",)]  # ("u",) holds only an expired item
    keys = [r[1] for r in raw.rows(SESSION)]
    assert "it..short." in keys and "tt..short." in keys and "iu..gone." in keys  # still stored until swept
    assert memory.sweep_ttl() == 2
    assert memory.sweep_ttl() == 0
    keys = [r[1] for r in raw.rows(SESSION)]
    assert keys == ["it..", "it..long.", "it..none.", "tt..long."]
    assert json.loads(raw.rows(SESSION)[0][3])["items"] == 2


def test_refresh_on_read_extends_get_and_search_not_listing(store, raw):
    memory = MysqlStore(store, user_id="alice", ttl={"default_ttl": 10, "refresh_on_read": True})

    def expiry():
        return json.loads(raw.query("SELECT state_data FROM {t} WHERE session_id = %s AND state_key = 'tr..k.'",
                                    (SESSION,))[0][0])["expires_at"]

    memory.put(("r",), "k", {"v": 1})  # default_ttl applies
    first = expiry()
    time.sleep(0.01)
    memory.list_namespaces()
    assert expiry() == first
    memory.get(("r",), "k", refresh_ttl=False)
    memory.search(("r",), refresh_ttl=False)
    assert expiry() == first
    memory.get(("r",), "k")
    second = expiry()
    assert second > first
    time.sleep(0.01)
    memory.search(("r",))
    assert expiry() > second
    memory.put(("r",), "k", {"v": 2}, ttl=None)  # an explicit None: no expiry any more
    assert raw.query("SELECT COUNT(*) FROM {t} WHERE state_key = 'tr..k.'")[0][0] == 0
    no_refresh = MysqlStore(store, user_id="bob", ttl={"default_ttl": 10, "refresh_on_read": False})
    no_refresh.put(("r",), "k", {"v": 1})
    before = raw.query("SELECT state_data FROM {t} WHERE session_id = 'bob:langgraph-store' AND state_key = 'tr..k.'")
    no_refresh.get(("r",), "k")
    assert raw.query("SELECT state_data FROM {t} WHERE session_id = 'bob:langgraph-store' AND state_key = 'tr..k.'") == before


def test_a_read_refreshes_an_item_for_real(memory):
    memory.put(("f",), "k", {"v": 1}, ttl=2 / 60)  # 2 s
    for _ in range(3):
        time.sleep(1.0)
        assert memory.get(("f",), "k") is not None  # each read gives it 2 s more
    time.sleep(3.0)
    assert memory.get(("f",), "k") is None


def test_sweep_works_in_bounded_batches(memory, raw):
    memory.batch([PutOp(("s", str(i % 3)), f"k{i}", {"i": i}, ttl=0.2 / 60) for i in range(11)])
    memory.put(("s", "0"), "stays", {"i": -1})
    time.sleep(0.5)
    before = raw.rows(SESSION)
    for bad, kind in ((True, TypeError), ("3", TypeError), (0, ValueError), (-1, ValueError)):  # the store's rule
        with pytest.raises(kind, match="batch must be"):
            memory.sweep_ttl(batch=bad)
    assert raw.rows(SESSION) == before
    assert memory.sweep_ttl(batch=3) == 11
    assert [r[1] for r in raw.rows(SESSION)] == ["is.0..", "is.0..stays."]
    assert memory.list_namespaces() == [("s", "0")]


def test_the_sweeper_thread_removes_rows_by_itself_and_stops(store, raw):
    memory = MysqlStore(store, user_id="alice", ttl={"sweep_interval_minutes": 0.2 / 60})
    memory.put(("w",), "k", {"v": 1}, ttl=0.2 / 60)
    future = memory.start_ttl_sweeper()
    deadline = time.monotonic() + 15
    while raw.rows(SESSION) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert raw.rows(SESSION) == []
    t0 = time.monotonic()
    assert memory.stop_ttl_sweeper(timeout=5) is True
    assert time.monotonic() - t0 < 2 and future.done()
    assert not any(t.name == "mysql-state-ttl-sweeper" and t.is_alive() for t in threading.enumerate())


def test_a_second_start_of_the_sweeper_gives_the_running_one_s_future(store):
    """A start while a sweeper runs returned a new future that never completed (waiting on it
    hung); it is the running sweeper's future, done when it stops. A start after a stop runs a
    new sweeper."""
    memory = MysqlStore(store, user_id="alice")
    first = memory.start_ttl_sweeper(0.5)
    assert memory.start_ttl_sweeper(0.5) is first
    assert memory.stop_ttl_sweeper(timeout=5) is True
    assert first.result(timeout=5) is None
    again = memory.start_ttl_sweeper(0.5)
    assert again is not first and not again.done()
    assert memory.stop_ttl_sweeper(timeout=5) is True and again.result(timeout=5) is None
    memory.close()


def test_the_async_sweeper_removes_rows_and_stops(store, raw):
    memory = MysqlStore(store, user_id="alice")

    async def main():
        await memory.aput(("w",), "k", {"v": 1}, ttl=0.2 / 60)
        task = await memory.astart_ttl_sweeper(0.2 / 60)
        for _ in range(150):
            if not raw.rows(SESSION):
                break
            await asyncio.sleep(0.1)
        assert raw.rows(SESSION) == []
        assert await memory.astop_ttl_sweeper(timeout=5) is True
        assert task.done()
        assert await memory.asweep_ttl() == 0

    asyncio.run(main())


# ---- costs: a prefix reads its range ------------------------------------------------------------


def test_a_prefix_search_reads_only_its_range(memory, raw):
    memory.batch([PutOp(("big", str(i % 7)), f"k{i}", {"i": i}) for i in range(400)])
    memory.batch([PutOp(("small",), f"k{i}", {"i": i}) for i in range(5)])
    counter = RowsRead(raw)
    try:
        def rows_of(fn):
            before = counter.total()
            fn()
            return counter.total() - before

        assert rows_of(lambda: memory.search(("big",), limit=1000)) >= 400  # the counter sees the big range
        small = rows_of(lambda: memory.search(("small",)))
        listing = rows_of(lambda: memory.list_namespaces(prefix=("small",)))
        one = rows_of(lambda: memory.get(("small",), "k1"))
    finally:
        counter.close()
    assert small <= 12, small  # 5 items + their marker (+ the range ends), not the 400 others
    assert listing <= 12, listing
    assert one <= 4, one


# ---- async twins ------------------------------------------------------------------------------------


def test_async_twins_answer_as_inmemory_store(url, database):
    index = {"dims": DIMS, "embed": aembed, "fields": ["text"]}

    async def main():
        astore = AsyncMysqlAgentStateStore.from_url(url, database_name=database, create_if_not_exist=True)
        try:
            mine, ref = MysqlStore(astore, user_id="alice", index=index), Reference(index=index)
            rng = random.Random(7)
            for step in range(80):
                name, args, kw = random_op(rng)
                if name == "search" and rng.random() < 0.5:
                    kw["query"] = rng.choice(["mysql", "fox", "memory of apples"])
                got = await getattr(mine, "a" + name)(*args, **kw)
                want = await getattr(ref, "a" + name)(*args, **kw)
                assert view(got) == view(want), f"step {step}: a{name}{args} {kw}"
            got = await asyncio.gather(*(mine.aget(ns, k) for ns in NAMESPACES for k in KEYS))
            want = [await ref.aget(ns, k) for ns in NAMESPACES for k in KEYS]
            assert view(got) == view(want)
        finally:
            await astore.aclose()

    asyncio.run(main())


def test_concurrent_puts_keep_the_namespace_marker_exact(memory, raw):
    def work(t):
        for i in range(15):
            memory.put(("c",), f"t{t}-{i}", {"i": i})
        for i in range(0, 15, 3):
            memory.delete(("c",), f"t{t}-{i}")

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    marker = json.loads(raw.query("SELECT state_data FROM {t} WHERE session_id = %s AND state_key = 'ic..'", (SESSION,))[0][0])
    assert marker["items"] == 4 * 10 == len(memory.search(("c",), limit=100))


# ---- the operator's tools over the memory store ----------------------------------------------------


def test_forget_user_export_import_and_sessions_cover_the_memory(store, raw):
    alice, bob = MysqlStore(store, user_id="alice"), MysqlStore(store, user_id="bob")
    for m in (alice, bob):
        m.put(("prefs",), "theme", {"v": "dark"}, ttl=60)
        m.put(("memories", "2026"), "m1", {"text": "likes MySQL"})
    assert "langgraph-store" in store.list_session_ids("alice")
    assert [s.session_id for s in store.sessions("alice").items] == ["langgraph-store"]
    lines = list(store.export("alice"))
    before = [(i.namespace, i.key, i.value, i.created_at) for i in alice.search(())]
    assert store.forget_user("alice") > 0
    assert raw.rows(SESSION) == [] and alice.search(()) == [] and alice.list_namespaces() == []
    assert [i.key for i in bob.search(())] == ["theme", "m1"]
    store.import_rows(lines)
    assert [(i.namespace, i.key, i.value, i.created_at) for i in alice.search(())] == before
    assert store.doctor() == []  # nothing for the doctor to find in the memory's rows


def test_encryption_at_rest_leaves_no_value_text_in_the_table(url, database, raw):
    ring = Keyring({"k1": os.urandom(32)}, current="k1")
    with MysqlAgentStateStore.from_url(url, database_name=database, encryption=ring) as sealed:
        memory = MysqlStore(sealed, user_id="alice", index={"dims": DIMS, "embed": embed, "fields": ["text"]})
        memory.put(("secrets",), "s1", {"text": "the launch code is swordfish"}, ttl=60)
        assert memory.get(("secrets",), "s1").value == {"text": "the launch code is swordfish"}
        assert memory.search(("secrets",), query="swordfish")[0].key == "s1"
    rows = raw.rows(SESSION)
    assert len(rows) == 4  # marker, item, expiry, vectors
    for _, key, _, data, _ in rows:
        assert "swordfish" not in data and "launch" not in data and "created_at" not in data, key
    with MysqlAgentStateStore.from_url(url, database_name=database) as plain:  # no keyring: a typed error
        from mysql_state import DecryptionError

        with pytest.raises(DecryptionError):
            MysqlStore(plain, user_id="alice").get(("secrets",), "s1")


def test_from_url_owns_its_store_and_an_async_store_is_accepted(url, database):
    with MysqlStore.from_url(url, database_name=database, create_if_not_exist=True, user_id="alice") as m:
        m.put(("o",), "k", {"v": 1})
        owned = m.store
    from mysql_state import StoreClosedError

    with pytest.raises(StoreClosedError):
        owned.get("alice", "langgraph-store", "io..k.")
    with MysqlAgentStateStore.from_url(url, database_name=database) as s:
        m = MysqlStore(s, user_id="alice")
        m.close()
        assert m.get(("o",), "k").value == {"v": 1}  # the caller's store stays open
    with pytest.raises(TypeError, match="MysqlAgentStateStore"):
        MysqlStore("mysql://nope")


def test_rows_it_cannot_read_are_a_typed_error_never_an_empty_answer(store, memory):
    from mysql_state import CorruptStateError

    memory.put(("ok",), "k", {"v": 1})
    store.save("alice", "langgraph-store", "iok..broken.", {"value": {"v": 2}})  # no seq, no times
    with pytest.raises(CorruptStateError, match="iok..broken."):
        memory.search(("ok",))
    with pytest.raises(CorruptStateError, match="iok..broken."):
        memory.get(("ok",), "broken")
    store.delete("alice", "langgraph-store", "iok..broken.")
    store.save("alice", "langgraph-store", "inot-a-namespace", {"seq": 1})
    with pytest.raises(CorruptStateError, match="not one MysqlStore writes"):
        memory.list_namespaces()
    assert memory.get(("ok",), "k").value == {"v": 1}


def test_a_graph_remembers_across_invocations_and_threads(url, database):
    from typing import TypedDict

    from langgraph.graph import END, START, StateGraph
    from langgraph.store.base import BaseStore

    class State(TypedDict):
        user: str
        fact: str
        recalled: list

    def node(state: State, *, store: BaseStore) -> dict:
        ns = ("facts", state["user"])
        if state["fact"]:
            store.put(ns, f"f{len(store.search(ns, limit=100))}", {"text": state["fact"]})
        return {"recalled": [i.value["text"] for i in store.search(ns, limit=100)]}

    def build(memory):
        g = StateGraph(State)
        g.add_node("remember", node)
        g.add_edge(START, "remember")
        g.add_edge("remember", END)
        return g.compile(store=memory)

    with MysqlStore.from_url(url, database_name=database, create_if_not_exist=True, user_id="alice") as memory:
        graph = build(memory)
        graph.invoke({"user": "alice", "fact": "likes tea", "recalled": []})
        threads = [threading.Thread(target=graph.invoke, args=({"user": f"u{i}", "fact": f"fact {i}", "recalled": []},))
                   for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    with MysqlStore.from_url(url, database_name=database, user_id="alice") as again:  # a new store object
        out = asyncio.run(build(again).ainvoke({"user": "alice", "fact": "", "recalled": []}))
        assert out["recalled"] == ["likes tea"]
        assert again.list_namespaces(prefix=("facts",)) == [("facts", "alice")] + [("facts", f"u{i}") for i in range(4)]


def _writer_process(url: str, database: str, tag: str, barrier) -> None:
    """A child process: its own MysqlStore puts 20 items into one namespace and deletes 5."""
    with MysqlStore.from_url(url, database_name=database, user_id="alice") as m:
        barrier.wait(60)
        for i in range(20):
            m.put(("shared",), f"{tag}-{i}", {"by": tag, "i": i})
        for i in range(0, 20, 4):
            m.delete(("shared",), f"{tag}-{i}")


def test_two_processes_share_one_namespace(url, database, memory, raw):
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(2)
    procs = [ctx.Process(target=_writer_process, args=(url, database, tag, barrier)) for tag in ("p", "q")]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0]
    found = memory.search(("shared",), limit=100)
    assert sorted(i.key for i in found) == sorted(f"{t}-{i}" for t in "pq" for i in range(20) if i % 4)
    for tag in "pq":  # each writer's items in the order it created them
        assert [i.value["i"] for i in found if i.value["by"] == tag] == [i for i in range(20) if i % 4]
    marker = json.loads(raw.query("SELECT state_data FROM {t} WHERE session_id = %s AND state_key = 'ishared..'",
                                  (SESSION,))[0][0])
    assert marker["items"] == 30


def test_supports_ttl_is_true_with_and_without_a_ttl_config(store):
    from mysql_state.langgraph import MysqlStore

    assert MysqlStore(store).supports_ttl is True
    assert MysqlStore(store, ttl={"default_ttl": 5}).supports_ttl is True
