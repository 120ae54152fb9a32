"""The saver's JSON rows (pure: no database): every msgpack value the serializer writes comes
back as the very same bytes, through a tree that is JSON (a row must stay JSON)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("langgraph", reason="needs the langgraph extra (make test installs it)")

import orjson  # noqa: E402
import ormsgpack  # noqa: E402
from langgraph.checkpoint.base import empty_checkpoint  # noqa: E402

from mysql_state.langgraph.codec import json_to_msgpack, msgpack_to_json  # noqa: E402

scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2 ** 63), 2 ** 64 - 1), st.text(max_size=8),
                    st.sampled_from(["~", "~m", "~p", "x~"]), st.binary(max_size=4),
                    # NaN as Python makes it (a NaN with another payload has no tree: it goes as base64)
                    st.floats(allow_nan=False, allow_infinity=True), st.just(math.nan))
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4),
    st.dictionaries(st.one_of(st.text(max_size=4), st.sampled_from(["~x", "~b", "~f"])), inner, max_size=4),
    st.dictionaries(st.integers(-5, 5), inner, max_size=3)), max_leaves=12)


def round_trip(data: bytes) -> None:
    tree = msgpack_to_json(data)
    assert tree is not None
    assert json_to_msgpack(orjson.loads(orjson.dumps(tree))) == data  # through JSON text, byte for byte


@settings(max_examples=300, deadline=None)
@given(values)
def test_every_msgpack_value_comes_back_as_the_same_bytes_through_json(value):
    round_trip(ormsgpack.packb(value, option=ormsgpack.OPT_NON_STR_KEYS))


def test_a_checkpoint_body_and_metadata_are_plain_trees_and_escapes_stay_escaped():
    body = {k: v for k, v in empty_checkpoint().items() if k != "channel_values"}
    for value in (body, {"source": "loop", "step": 3, "parents": {}, "writes": None}):
        data = ormsgpack.packb(value)
        assert msgpack_to_json(data) == {"~p": value}  # no walk needed, nothing to escape
        round_trip(data)
    for value in ({"~p": 1}, {"a": "~b"}, {"f": math.nan}, {"f": 1.5}, {1: "x"}, [b"raw"]):
        data = ormsgpack.packb(value, option=ormsgpack.OPT_NON_STR_KEYS)
        round_trip(data)
    assert msgpack_to_json(ormsgpack.packb({"~p": 1})) != {"~p": {"~p": 1}}  # a marker is never data


@settings(max_examples=100, deadline=None)
@given(st.lists(values, min_size=2, max_size=6))
def test_many_rows_in_one_array_decode_as_each_row_alone(items):
    """``from_rows`` packs the rows into one msgpack array for one serializer call: the values
    are those each row gives alone, rows of every kind of tree (plain, escaped) mixed."""
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    from mysql_state.langgraph.codec import from_row, from_rows, to_row

    serde = JsonPlusSerializer()
    rows = [orjson.loads(orjson.dumps(to_row(serde, [v]))) for v in items]  # as read back: JSON text
    assert all(r["t"] == "msgpack" and "v" in r for r in rows)  # the one-array way is taken
    alone = [from_row(serde, r) for r in rows]
    together = from_rows(serde, rows)
    assert ormsgpack.packb(together, option=ormsgpack.OPT_NON_STR_KEYS) == ormsgpack.packb(
        alone, option=ormsgpack.OPT_NON_STR_KEYS)  # NaN != NaN: compared as bytes
