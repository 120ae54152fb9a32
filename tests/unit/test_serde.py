"""serde: JSON encoding and decoding, no server."""

from __future__ import annotations

import dataclasses
import datetime as dt
import math

import pydantic
import pytest

from mysql_state import CorruptStateError, serde


@dataclasses.dataclass
class Point:
    x: int
    y: int


class Msg(pydantic.BaseModel):
    role: str
    text: str


def test_values_round_trip():
    for value in ({"a": [1, 2.5, None, True]}, "héllo", 0, [], {}):
        assert serde.decode(serde.encode(value, "k")) == value


def test_dataclasses_and_models_encode_and_convert_back():
    assert serde.decode(serde.encode(Point(1, 2), "k"), Point) == Point(1, 2)
    msgs = [Msg(role="user", text="hi")]
    assert serde.decode(serde.encode(msgs, "k"), list[Msg]) == msgs
    assert serde.decode(serde.encode(dt.datetime(2026, 1, 2, 3, 4, 5), "k")) == "2026-01-02T03:04:05"


def test_non_finite_floats_are_refused_naming_key_and_item():
    with pytest.raises(ValueError, match="key 'k'.*nan"):
        serde.encode({"x": math.nan}, "k")
    with pytest.raises(ValueError, match="item 1 of list 'm'.*inf"):
        serde.encode_items([1, [math.inf]], "m")
    assert serde.encode_items([None, {"a": None}], "m") == [b"null", b'{"a":null}']


def test_unserialisable_values_name_key_and_type():
    with pytest.raises(TypeError, match="'k'.*object"):
        serde.encode(object(), "k")
    with pytest.raises(TypeError, match="item 1"):
        serde.encode_list([1, object()], "m")


def test_sequences_and_key_lists_refuse_what_would_be_misread():
    for bad in ({"a": 1}, "abc", b"ab"):
        with pytest.raises(TypeError, match="values must be a list"):
            serde.check_sequence(bad, "values")
    assert serde.check_sequence((1, 2), "values") == (1, 2)
    assert serde.check_sequence(iter([1]), "values") == [1]
    with pytest.raises(TypeError, match="lists must be a list of keys"):
        serde.check_keys("memory", "lists")
    with pytest.raises(TypeError, match="type must be a class"):
        serde.check_type(5)


def test_invalid_json_is_a_corrupt_state_error_naming_the_row():
    with pytest.raises(CorruptStateError, match="'u:s'.*'k'.*item_index 3"):
        serde.decode_row("{not json", None, "u:s", "k", 3)


def test_a_non_finite_float_is_found_at_any_depth_and_in_any_container():
    class Scored(pydantic.BaseModel):
        text: str
        score: float

    @dataclasses.dataclass
    class Holder:
        values: list

    nan = math.nan
    for where in ({"a": [1, {"b": (2, nan)}]}, [None, "x", math.inf], Holder([1.5, [nan]]),
                  {"deep": [[[[[-math.inf]]]]]}, Scored(text="t", score=nan)):
        with pytest.raises(ValueError, match="holds the float"):
            serde.encode(where, "k")
    assert serde.encode({"a": [1.5, None, True, "nan", 2.0], "b": Holder([None])}, "k")
