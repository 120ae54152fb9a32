"""Serialisation: values to JSON bytes (orjson) and back, optionally into a given type.

Supported values: dict, list, str, int, float, bool, None, dataclasses, pydantic v2 models,
and what orjson handles natively (datetime, date, UUID, enum...). Anything else raises
``TypeError`` naming the key and the type, before anything is written.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import types
import typing
import uuid
from typing import Any, Iterable, Optional, Sequence

import orjson

_LOADS = orjson.loads


def _default(obj: Any) -> Any:
    dump = getattr(obj, "model_dump", None)  # pydantic v2 models
    if dump is not None and hasattr(type(obj), "model_validate"):
        return dump(mode="json")
    raise TypeError(f"type {type(obj).__name__} is not JSON serialisable")


def _fail(key: str, value: Any, exc: Exception, item: Optional[int] = None) -> TypeError:
    where = f"item {item} of list {key!r}" if item is not None else f"key {key!r}"
    return TypeError(f"cannot serialise the value for {where}: {type(value).__name__} ({exc})")


def encode(value: Any, key: str) -> bytes:
    """The JSON of one value."""
    try:
        return orjson.dumps(value, default=_default)
    except TypeError as exc:
        raise _fail(key, value, exc) from exc


def encode_list(values: Sequence[Any], key: str) -> bytes:
    """The JSON of a whole list in one call (the fast path of change detection)."""
    try:
        return orjson.dumps(values, default=_default)
    except TypeError:
        encode_items(values, key)  # names the offending item
        raise


def encode_items(values: Iterable[Any], key: str, start: int = 0) -> list[bytes]:
    """The JSON of each item; ``start`` is the index of the first one (for messages)."""
    dumps = orjson.dumps
    out = []
    for i, v in enumerate(values, start):
        try:
            out.append(dumps(v, default=_default))
        except TypeError as exc:
            raise _fail(key, v, exc, i) from exc
    return out


def decode(data: str | bytes, type: Optional[type] = None) -> Any:
    """Decode stored JSON; with ``type`` build an instance (pydantic model or dataclass)."""
    obj = _LOADS(data)
    return obj if type is None else convert(obj, type)


def convert(obj: Any, tp: Any) -> Any:
    """Turn decoded JSON into ``tp``: pydantic models, dataclasses, and containers of them."""
    if tp is None or tp is Any or obj is None:
        return obj
    validate = getattr(tp, "model_validate", None)
    if validate is not None:
        return validate(obj)
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        hints = typing.get_type_hints(tp)
        kwargs = {}
        for f in dataclasses.fields(tp):
            if f.name in obj:
                kwargs[f.name] = convert(obj[f.name], hints.get(f.name, Any))
        return tp(**kwargs)
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (list, Sequence, tuple) and args and isinstance(obj, list):
        if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):
            return tuple(convert(v, a) for v, a in zip(obj, args))
        items = [convert(v, args[0]) for v in obj]
        return tuple(items) if origin is tuple else items
    if origin is dict and len(args) == 2 and isinstance(obj, dict):
        return {k: convert(v, args[1]) for k, v in obj.items()}
    if origin in (typing.Union, getattr(types, "UnionType", typing.Union)):
        for a in args:
            if a is type(None):
                continue
            try:
                return convert(obj, a)
            except (TypeError, ValueError):
                continue
        return obj
    if isinstance(tp, type) and isinstance(obj, str):
        if tp is _dt.datetime:
            return _dt.datetime.fromisoformat(obj.replace("Z", "+00:00"))
        if tp is _dt.date:
            return _dt.date.fromisoformat(obj)
        if tp is uuid.UUID:
            return uuid.UUID(obj)
    return obj
