"""The fingerprints MysqlSaver tells an unchanged list item by (pure: no database).

A fingerprint must change with every edit the serializer would see (exact types, dict order,
nested containers, a model's extras), and must say "cannot tell" (None) rather than guess."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest

pytest.importorskip("langgraph", reason="needs the langgraph extra (make test installs it)")

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage  # noqa: E402
from pydantic import BaseModel  # noqa: E402

from mysql_state.langgraph.identity import IMMUTABLE, exact_of, state_of, states_in  # noqa: E402


def test_every_in_place_edit_of_a_message_changes_its_fingerprint():
    m = AIMessage(content="hi", id="a1", additional_kwargs={"k": [1, {"x": 1}]})
    seen = {state_of(m)}
    edits = [
        lambda: setattr(m, "content", "edited"),
        lambda: m.additional_kwargs["k"].append(2),
        lambda: m.additional_kwargs["k"][1].update(x=1.0),  # 1 == 1.0, but serialised apart
        lambda: m.additional_kwargs["k"][1].update(x=True),  # and True
        lambda: m.response_metadata.update(model="m"),
        lambda: m.tool_calls.append({"name": "t", "args": {}, "id": "c1", "type": "tool_call"}),
        lambda: m.additional_kwargs.update({"z": 0}),
        lambda: m.additional_kwargs.update({"k": m.additional_kwargs.pop("k")}),  # only the order
        lambda: setattr(m, "name", "bot"),
        lambda: setattr(m, "name", "bot\u00e9"),
    ]
    for edit in edits:
        edit()
        now = state_of(m)
        assert now is not None and now not in seen, edit
        seen.add(now)
    assert state_of(m) == state_of(m)  # unchanged: the same fingerprint, always


def test_equal_messages_built_apart_have_equal_fingerprints_and_kinds_differ():
    a = HumanMessage(content="same", id="h1")
    assert state_of(a) == state_of(HumanMessage(content="same", id="h1"))
    assert state_of(a) != state_of(AIMessage(content="same", id="h1"))  # the class counts
    t = ToolMessage(content="r", tool_call_id="c1", artifact={"rows": [1]})
    before = state_of(t)
    t.artifact["rows"].append(2)
    assert state_of(t) != before


def test_extras_of_a_model_count():
    class Loose(BaseModel, extra="allow"):
        a: int = 1

    m = Loose(b=[1])
    before = state_of(m)
    m.b.append(2)  # an extra field, kept in __pydantic_extra__
    assert state_of(m) != before


def test_builtins_and_immutables():
    assert state_of("text") == state_of(7) == state_of(None) == IMMUTABLE  # identity is enough
    d = {"a": [1]}
    before = state_of(d)
    d["a"].append(1)
    assert state_of(d) != before
    assert state_of((1, 2)) != state_of([1, 2])


def test_what_it_cannot_tell_is_none_never_a_guess():
    @dataclasses.dataclass
    class Item:
        text: str

    class Slotted(BaseModel):
        __slots__ = ("hidden",)
        a: int = 1

    assert state_of(Item("x")) is None  # not a kind it knows: the saver asks the serializer
    assert state_of(Slotted()) is None  # state outside BaseModel's slots
    assert state_of(AIMessage(content="x", additional_kwargs={"at": dt.datetime(2026, 1, 1)})) is None
    assert state_of({"k": {1, 2}.__class__([dt.date(2026, 1, 1)])}) is None
    class Sub(str):
        pass

    assert state_of([Sub("x")]) is None  # a subclass of a builtin: marshal refuses, no guess


# ---- the whole-list fingerprint (print_of / extends) -------------------------------------------

from mysql_state.langgraph.identity import extends, print_of  # noqa: E402


def conversation(n: int) -> list:
    return [HumanMessage(content=f"q{i}", id=f"h{i}") if i % 2 == 0 else
            AIMessage(content=f"a{i}", id=f"a{i}", additional_kwargs={"k": [1, {"x": 1}]}) for i in range(n)]


def test_a_list_that_goes_on_with_the_same_unchanged_objects_extends_the_last_print():
    log = conversation(6)
    before = print_of(log)
    assert before is not None and extends(print_of(log), before)
    assert extends(print_of(log + conversation(3)), before)
    assert not extends(print_of(log[:5]), before)  # shorter: not an extension
    assert not extends(print_of(log[1:] + log[:1]), before)  # another order


@pytest.mark.parametrize("edit", [
    lambda log: setattr(log[0], "content", "edited"),
    lambda log: log[1].additional_kwargs["k"].append(2),
    lambda log: log[1].additional_kwargs["k"][1].update(x=1.0),  # 1 == 1.0, serialised apart
    lambda log: log[1].additional_kwargs["k"][1].update(x=True),
    lambda log: log[3].additional_kwargs.update({"k": log[3].additional_kwargs.pop("k"), "z": 0}),
    lambda log: log[5].response_metadata.update(model="m"),
    lambda log: setattr(log[2], "name", None),  # the value it had, but now a field set
    lambda log: setattr(log[4], "id", "h4\u00e9"),
])
def test_any_in_place_edit_of_an_earlier_item_breaks_the_extension(edit):
    log = conversation(6)
    before = print_of(log)
    edit(log)
    assert not extends(print_of(log + conversation(1)), before)


def test_what_the_whole_list_print_cannot_tell_is_none_and_never_extends():
    class Loose(BaseModel, extra="allow"):
        a: int = 1

    assert print_of([HumanMessage(content="x", id="h"), Loose(b=[1])]) is None  # extras: item by item
    assert print_of([HumanMessage(content="x", id="h"), {"role": "user"}]) is None  # mixed kinds
    assert print_of([dt.date(2026, 1, 1)]) is None
    assert not extends(None, print_of(conversation(2))) and not extends(print_of(conversation(2)), None)
    plain = [{"role": "user", "n": 1}, "text", 3]
    before = print_of(plain)
    assert before is not None and extends(print_of(plain + [None]), before)
    plain[0]["n"] = True  # builtins: the same exactness
    assert not extends(print_of(plain + [None]), before)
    assert not extends(print_of(conversation(2)), print_of([{"content": "q0"}, {"content": "a1"}]))


def test_the_states_of_a_whole_list_split_back_into_each_items_state():
    """exact_of takes a list's states in one call; states_in gives back each item's state_of
    as it was then: an item edited in place since differs, the others do not, whatever
    references other code holds meanwhile (format 2: no back-references)."""
    log = conversation(6)
    taken = exact_of(log)
    assert states_in(taken) == [state_of(m) for m in log]
    held = [m.content for m in log] + [m.additional_kwargs for m in log]  # noqa: F841 (references held)
    assert exact_of(log) == taken
    log[1].additional_kwargs["k"][1].update(x=1.0)  # 1 == 1.0, but serialised apart
    log[4].content = "edited"
    now = [state_of(m) for m in log]
    assert [a == b for a, b in zip(states_in(taken), now)] == [True, False, True, True, False, True]
    plain = [{"role": "user", "n": 1}, "text", 3, [1, 2.5], None]
    taken = exact_of(plain)
    assert states_in(taken) == [state_of(x) for x in plain]
    plain[0]["n"] = True
    assert states_in(taken)[0] != state_of(plain[0])
    assert exact_of([HumanMessage(content="x", id="h"), {"role": "user"}]) is None  # mixed kinds
    assert exact_of([dt.date(2026, 1, 1)]) is None
