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

>>> from langchain_core.messages import AIMessage
>>> m = AIMessage(content="hi", id="a1")
>>> before = state_of(m)
>>> m.additional_kwargs["edited"] = True   # in place: the object is the same
>>> state_of(m) == before
False
"""

from __future__ import annotations

import marshal
from typing import Any, Optional

from pydantic import BaseModel

__all__ = ["state_of", "IMMUTABLE"]

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
