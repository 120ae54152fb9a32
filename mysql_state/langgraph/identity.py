"""Whether an object the saver stored is still what it stored: a fingerprint of its state (pure).

The saver does not serialise again the items of a list channel (the messages) that it stored
or read before: the same object refers to the same log item. The same object is not enough,
an object may have been edited in place since (``message.content = ...``,
``message.additional_kwargs["k"] = v``), so each object is remembered with a fingerprint of
its whole state, taken again at each put and compared: equal fingerprints mean the serializer
would write the same thing, so the stored item is exact; a different one means the object is
written again as a new item.

:func:`state_of` is the fast fingerprint: ``marshal`` (C code, exact types: ``1``, ``1.0`` and
``True`` differ, dict order counts) of the state of a builtin container or a pydantic model
made of builtins (what LangChain messages are), ``b""`` for an immutable scalar (identity is
enough). For anything else it gives None, and the saver fingerprints the object with the
serializer's own bytes (slower, exact by construction).

:func:`print_of` fingerprints a whole list in one ``marshal`` call (~0.3 µs a message against
~1.3 µs for :func:`state_of` one by one), so that the next version of the list, which starts
with the same objects, is proven unchanged over that prefix by :func:`extends`: one byte
comparison, no pass per item. Its bytes may differ for an unchanged list (``marshal``'s
format 4 marks objects referenced more than once, which reference counts decide): then the
saver takes the per-item way; equal bytes always mean equal states.

>>> from langchain_core.messages import AIMessage
>>> m = AIMessage(content="hi", id="a1")
>>> before = state_of(m)
>>> m.additional_kwargs["edited"] = True   # in place: the object is the same
>>> state_of(m) == before
False
"""

from __future__ import annotations

import marshal
from operator import attrgetter
from typing import Any, NamedTuple, Optional, Sequence

from pydantic import BaseModel

__all__ = ["state_of", "IMMUTABLE", "ListPrint", "print_of", "extends", "exact_of", "states_in"]

#: The fingerprint of an immutable scalar: the same object is the same value.
IMMUTABLE = b""
_SCALARS = frozenset({str, int, float, bool, type(None), bytes})
_CONTAINERS = frozenset({dict, list, tuple})
# marshal's format 2 has no back-references: the bytes depend only on the value (not on
# reference counts), so an unchanged object always gives the same fingerprint.
_FORMAT = 2
_MODEL_SLOTS = frozenset(BaseModel.__slots__) | {"__weakref__"}
_models: set = set()  # pydantic model classes whose whole state is BaseModel's four slots
_others: set = set()  # classes seen that are not


def _is_plain_model(cls: type) -> bool:
    """A pydantic model class whose whole state is the four slots of ``BaseModel``: no class
    of its own adds slots (whose values a fingerprint of those four would not see)."""
    if cls in _models:
        return True
    if cls in _others:
        return False
    plain = issubclass(cls, BaseModel) and all(
        set(getattr(c, "__slots__", ())) <= _MODEL_SLOTS for c in cls.__mro__
        if c is not object and "__slots__" in c.__dict__)
    (_models if plain else _others).add(cls)
    return plain


def state_of(obj: Any, _dumps: Any = marshal.dumps, _models: set = _models) -> Optional[bytes]:
    """A fingerprint of ``obj``'s state: equal for an object unchanged since the last call,
    different once it (or anything it holds) was edited; None when this function cannot tell
    (an object of another kind, or holding values ``marshal`` does not take).

    A pydantic model's state is its class, ``__dict__``, ``__pydantic_extra__``,
    ``__pydantic_private__`` and how many fields are set (assigning a field only ever adds
    to that set)."""
    cls = type(obj)
    try:
        if cls in _models:  # the usual item, a message: first, and in one statement
            return _dumps((id(cls), obj.__dict__, obj.__pydantic_extra__, obj.__pydantic_private__,
                           len(obj.__pydantic_fields_set__)), _FORMAT)
        if cls in _SCALARS:
            return IMMUTABLE
        if cls in _CONTAINERS:
            return _dumps(obj, _FORMAT)
        if _is_plain_model(cls):
            return state_of(obj)
    except ValueError:  # an object marshal does not take, or nested too deep
        return None
    return None


_DICT, _EXTRA, _PRIVATE, _FIELDS_SET = (attrgetter(a) for a in (
    "__dict__", "__pydantic_extra__", "__pydantic_private__", "__pydantic_fields_set__"))
_BUILTINS = _SCALARS | _CONTAINERS
_LIST_HEAD = 5  # marshal's list header: its type byte and its length


class ListPrint(NamedTuple):
    """A fingerprint of a whole list (:func:`print_of`): the items' classes, how many fields
    each model has set, and ``marshal`` of their states without the list's header (so the
    print of a list starts with the print of each of its prefixes)."""

    types: list
    sets: Optional[list]
    body: bytes


def print_of(items: Sequence[Any]) -> Optional[ListPrint]:
    """A fingerprint of the whole of ``items``, when they are all plain pydantic models with
    no extra fields and no private attributes set (messages), or all builtins; None otherwise
    (the saver then fingerprints item by item).

    >>> from langchain_core.messages import AIMessage, HumanMessage
    >>> log = [HumanMessage(content="hi", id="h1"), AIMessage(content="hello", id="a1")]
    >>> before = print_of(log)
    >>> extends(print_of(log + [HumanMessage(content="more", id="h2")]), before)
    True
    >>> log[0].content = "edited in place"
    >>> extends(print_of(log + [HumanMessage(content="more", id="h2")]), before)
    False
    """
    types = list(map(type, items))
    kinds = set(types)
    try:
        if kinds <= _BUILTINS:
            return ListPrint(types, None, marshal.dumps(list(items), 4)[_LIST_HEAD:])
        if not all(map(_is_plain_model, kinds)):
            return None
        if any(map(_EXTRA, items)) or any(map(_PRIVATE, items)):
            return None  # a model with extra fields or private attributes set: item by item
        return ListPrint(types, list(map(len, map(_FIELDS_SET, items))),
                         marshal.dumps(list(map(_DICT, items)), 4)[_LIST_HEAD:])
    except ValueError:  # a value marshal does not take, or nested too deep
        return None


def extends(new: Optional[ListPrint], old: Optional[ListPrint]) -> bool:
    """Whether the list ``new`` was taken from starts with the items ``old`` was taken from in
    the very same states (the caller checked they are the same objects): their classes, their
    fields set and the ``marshal`` bytes of their states are the first ones of ``new``'s."""
    if new is None or old is None or (new.sets is None) != (old.sets is None):
        return False
    n = len(old.types)
    return (len(new.types) >= n and new.types[:n] == old.types
            and (new.sets is None or new.sets[:n] == old.sets) and new.body.startswith(old.body))


_MODELS_EXACT, _BUILTINS_EXACT = b"m", b"b"


def exact_of(items: Sequence[Any]) -> Optional[bytes]:
    """The states of all of ``items`` in one ``marshal`` call, as :func:`state_of` takes each
    (its format 2: no back-references, the bytes depend on the values only, never on
    reference counts), to be split into each item's :func:`state_of` later by
    :func:`states_in`. None unless the items are all plain pydantic models (messages) or all
    builtins. About twice :func:`print_of`'s cost, a third of :func:`state_of` item by item.

    >>> from langchain_core.messages import AIMessage
    >>> log = [AIMessage(content="hi", id="a1"), AIMessage(content="ho", id="a2")]
    >>> taken = exact_of(log)
    >>> log[1].response_metadata["model"] = "x"   # in place
    >>> [old == state_of(m) for old, m in zip(states_in(taken), log)]
    [True, False]
    """
    kinds = set(map(type, items))
    try:
        if kinds <= _BUILTINS:
            return _BUILTINS_EXACT + marshal.dumps(list(items), _FORMAT)
        if not all(map(_is_plain_model, kinds)):
            return None
        return _MODELS_EXACT + marshal.dumps([(id(type(o)), o.__dict__, o.__pydantic_extra__, o.__pydantic_private__,
                                               len(o.__pydantic_fields_set__)) for o in items], _FORMAT)
    except ValueError:  # a value marshal does not take, or nested too deep
        return None


def states_in(exact: bytes) -> list:
    """What :func:`state_of` gave for each item when :func:`exact_of` took ``exact``: its
    values read back and each written again as ``state_of`` writes it. A value that does not
    come back to the same bytes (a set, whose order may differ) only makes its item look
    edited (it is stored again), never the other way round: equal bytes are equal states."""
    values = marshal.loads(exact[1:])
    if exact[:1] == _MODELS_EXACT:
        return [marshal.dumps(v, _FORMAT) for v in values]
    return [IMMUTABLE if type(v) in _SCALARS else marshal.dumps(v, _FORMAT) for v in values]
