"""Serialisation: values to JSON bytes (orjson) and back, optionally into a given type.

Supported values: dict, list, str, int, float, bool, None, dataclasses, pydantic v2 models,
and what orjson handles natively (datetime, date, UUID, enum...). Anything else raises
``TypeError`` naming the key and the type, before anything is written.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import enum
import math
import types
import typing
import uuid
from typing import Any, Iterable, Mapping, Optional, Sequence

import orjson

from .errors import CorruptStateError

_LOADS = orjson.loads


def _default(obj: Any) -> Any:
    dump = getattr(obj, "model_dump", None)  # pydantic v2 models
    if dump is not None and hasattr(type(obj), "model_validate"):
        return dump(mode="json")
    raise TypeError(f"type {type(obj).__name__} is not JSON serialisable")


#: The deepest nesting of arrays and objects orjson writes (deeper raises "Recursion limit reached").
MAX_DEPTH = 254


def _deeper_than(obj: Any, limit: int) -> bool:
    """Whether ``obj`` nests lists, tuples or dicts more than ``limit`` levels deep (walked
    only when orjson refused a value, to say why in this library's words).

    >>> _deeper_than([[1]], 2), _deeper_than([[[1]]], 2)
    (False, True)
    """
    level: list = [obj]
    for _ in range(limit):
        level = [c for o in level if isinstance(o, (list, tuple, dict))
                 for c in (o.values() if isinstance(o, dict) else o)]
        if not level:
            return False
    return any(isinstance(o, (list, tuple, dict)) for o in level)


def _fail(key: str, value: Any, exc: Exception, item: Optional[int] = None) -> TypeError:
    where = f"item {item} of list {key!r}" if item is not None else f"key {key!r}"
    reason = (f"it nests arrays and objects more than {MAX_DEPTH} levels deep, the most JSON is stored with"
              if _deeper_than(value, MAX_DEPTH) else str(exc))
    return TypeError(f"cannot serialise the value for {where}: {type(value).__name__} ({reason}); nothing was written")


_ATOMS = frozenset({str, int, bool, type(None), bytes})  # exact types that hold no float
_JSON_LEAVES = frozenset({str, int, float, bool, type(None)})


class _Nothing:
    """:func:`not_plain_json`'s answer when every value is plain JSON (None is a value)."""

    def __repr__(self) -> str:
        return "NOTHING"


NOTHING: Any = _Nothing()


def not_plain_json(obj: Any) -> Any:
    """The first value in ``obj`` that Python's ``json`` module refuses to write, or
    :data:`NOTHING`: for adapters that mirror a framework storing with ``json.dumps``, which
    refuses what orjson writes as a string (``datetime``, ``date``, ``UUID``, a dataclass, a
    plain ``Enum``, a pydantic model), so such a value would read back as another type.
    Dicts, lists and tuples are walked; ``str``/``int``/``float`` subclasses are plain (``json``
    writes an ``IntEnum`` or a ``StrEnum``).

    >>> import datetime
    >>> not_plain_json({"a": [1, "x", None, {"b": 2.5}]}) is NOTHING
    True
    >>> not_plain_json({"a": [1, {"at": datetime.date(2026, 1, 2)}]})
    datetime.date(2026, 1, 2)
    """
    stack = [obj]
    while stack:
        o = stack.pop()
        kind = type(o)
        if kind in _JSON_LEAVES:
            continue
        if kind is dict or (kind is not list and kind is not tuple and isinstance(o, dict)):
            stack.extend(o.values())
        elif kind is list or kind is tuple or isinstance(o, (list, tuple)):
            stack.extend(o)
        elif not isinstance(o, (str, int, float)):
            return o
    return NOTHING


def non_finite(obj: Any, depth: int = 0) -> Optional[float]:
    """A NaN or infinity anywhere in ``obj`` (orjson would silently write it as null), or None.

    >>> non_finite({"a": [1.5, {"b": float("inf")}]}), non_finite({"a": None})
    (inf, None)

    Exact builtin types first (the leaves are looked at in the loop, not by a call each);
    subclasses, dataclasses and pydantic models after."""
    kind = type(obj)
    if kind is float:
        return None if math.isfinite(obj) else obj
    if kind in _ATOMS or depth > 300:  # deeper than orjson writes (254): such data was refused
        return None
    if kind is dict:
        items: Iterable[Any] = obj.values()
    elif kind is list or kind is tuple:
        items = obj
    elif isinstance(obj, float):
        return None if math.isfinite(obj) else obj
    elif isinstance(obj, dict):
        items = obj.values()
    elif isinstance(obj, (list, tuple)):
        items = obj
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        items = (getattr(obj, f.name) for f in dataclasses.fields(obj))
    elif hasattr(obj, "model_dump") and hasattr(type(obj), "model_validate"):
        items = obj.model_dump().values()
    elif isinstance(obj, enum.Enum):  # written as its value (a float Enum is a float, above)
        items = (obj.value,)
    else:
        return None
    for v in items:
        kind = type(v)
        if kind in _ATOMS:
            continue
        if kind is float:
            if not math.isfinite(v):
                return v
            continue
        bad = non_finite(v, depth + 1)
        if bad is not None:
            return bad
    return None


def check_finite(value: Any, data: bytes, key: str, item: Optional[int] = None) -> None:
    """Refuse NaN and infinities: JSON has no such numbers, and null would change the data.

    Only JSON holding ``null`` can hide one, so the walk runs on those values alone.
    """
    if b"null" in data:
        bad = non_finite(value)
        if bad is not None:
            where = f"item {item} of list {key!r}" if item is not None else f"key {key!r}"
            raise ValueError(
                f"the value for {where} holds the float {bad!r}, which JSON cannot represent "
                "(it would be stored as null); nothing was written"
            )


def encode(value: Any, key: str) -> bytes:
    """The JSON of one value."""
    try:
        data = orjson.dumps(value, default=_default)
    except TypeError as exc:
        raise _fail(key, value, exc) from exc
    check_finite(value, data, key)
    return data


#: Below this length a kept encoder output is copied by :func:`compact`. Above it orjson's
#: reservation is a mapping of its own whose untouched pages are not resident (measured: 1.1x
#: the JSON's bytes resident for list snapshots of 530 KB, copied or not), and a copy would
#: cost a memcpy of the whole on every save.
COMPACT_BELOW = 128 * 1024


def compact(data: bytes) -> bytes:
    """``data`` copied into a buffer of its own length, for bytes that a cache keeps.

    orjson returns its output in the buffer it wrote into, reserved at several times the
    output's length (4 KB for 7 bytes, 8 KB for 500 here) and never shrunk. Kept as it is,
    a cached item holds that whole buffer (its cache counts ``len``): list snapshots of 10
    messages kept 3.8x their JSON's bytes resident, 1.8x copied; and each new ``dumps``
    touches fresh pages instead of reusing the freed buffer (about 2 page faults, 8 us, an
    ``append_list`` of one message). Outputs of :data:`COMPACT_BELOW` bytes or more are
    returned as they are.

    >>> data = orjson.dumps({"role": "user", "text": "hi"})
    >>> compact(data) == data
    True
    """
    return bytes(memoryview(data)) if len(data) < COMPACT_BELOW else data


def encode_list(values: Sequence[Any], key: str) -> bytes:
    """The JSON of a whole list in one call (the fast path of change detection)."""
    try:
        return orjson.dumps(values, default=_default)
    except TypeError:
        encode_items(values, key)  # names the offending item
        raise


def encode_items(values: Iterable[Any], key: str, start: int = 0, *, check: bool = True) -> list[bytes]:
    """The JSON of each item; ``start`` is the index of the first one (for messages).

    ``check=False`` leaves :func:`check_finite` to the caller, for the items it will write.
    """
    dumps = orjson.dumps
    out = []
    for i, v in enumerate(values, start):
        try:
            data = dumps(v, default=_default)
        except TypeError as exc:
            raise _fail(key, v, exc, i) from exc
        if check and b"null" in data:
            check_finite(v, data, key, i)
        out.append(data)
    return out


def check_sequence(values: Any, parameter: str) -> Sequence[Any]:
    """A list's items as a sequence; a mapping, str or bytes is refused (it would store its
    keys or characters), and a set (its order is not the caller's), naming the parameter."""
    if type(values) is list or type(values) is tuple:  # the usual case, without the ABC checks
        return values
    if isinstance(values, (set, frozenset)):
        raise TypeError(f"{parameter} must be a list (or another sequence) of items, got {type(values).__name__}, "
                        "which has no order: give sorted(...) or a list")
    if isinstance(values, (Mapping, str, bytes, bytearray, memoryview)) or not isinstance(values, Iterable):
        raise TypeError(
            f"{parameter} must be a list (or another sequence) of items, got "
            f"{type(values).__name__}; wrap a single item as [item]"
        )
    return values if isinstance(values, (list, tuple)) else list(values)


def check_type(tp: Any) -> Any:
    """``type=``: None, a class (pydantic model, dataclass...) or a typing construct (``list[X]``)."""
    if tp is not None and not isinstance(tp, type) and typing.get_origin(tp) is None and tp is not Any:
        raise TypeError(f"type must be a class or a typing construct such as list[Model], got {tp!r}")
    return tp


def check_keys(names: Any, parameter: str) -> list[str]:
    """A sequence of key names (a single str is refused: it would be read as its characters)."""
    if isinstance(names, (str, bytes)) or not isinstance(names, Iterable):
        raise TypeError(f"{parameter} must be a list of keys, got {type(names).__name__}: {names!r}")
    return list(names)


def decode_row(data: str | bytes, type: Optional[type], session_id: str, key: str, index: int,
               hide: bool = False) -> Any:
    """:func:`decode`, raising :class:`CorruptStateError` naming the row when the JSON is invalid
    (``hide``: as :func:`convert_row`)."""
    try:
        obj = _LOADS(data)
    except orjson.JSONDecodeError as exc:
        raise CorruptStateError(
            f"the row of session {session_id!r}, key {key!r}, item_index {index} is not valid JSON "
            f"({exc}); it was changed outside this store or cut short",
            session_id, key, index,
        ) from exc
    return obj if type is None else convert_row(obj, type, session_id, key, index, hide)


#: What a type error of a sealed row shows in place of the value.
NOT_SHOWN = "(not shown: the row is encrypted)"


def convert_row(obj: Any, type: Any, session_id: str, key: str, index: int, hide: bool = False) -> Any:
    """:func:`convert` of a row's decoded value; a value not of the type asked for is a
    :class:`TypeError` that names the row. ``hide`` (a row that was sealed: its plaintext must
    not reach a message or a log) names the stored value's kind only, and a pydantic model's
    ``ValidationError`` is raised again with every input replaced by :data:`NOT_SHOWN`, neither
    chained to the error that held the value.

    >>> convert_row({"api_key": "sk-1"}, int, "u:s", "creds", 0, hide=True)
    Traceback (most recent call last):
    TypeError: the row of session 'u:s', key 'creds', item_index 0: type=int does not read the stored value, a dict (not shown: the row is encrypted)
    """
    try:
        return convert(obj, type)
    except TypeError as exc:
        where = f"the row of session {session_id!r}, key {key!r}, item_index {index}"
        if not hide:
            raise TypeError(f"{where}: {exc}") from exc
        hidden = TypeError(f"{where}: type={_type_name(type)} does not read the stored value, a "
                           f"{obj.__class__.__name__} {NOT_SHOWN}")
    except ValueError as exc:
        rebuild = getattr(exc.__class__, "from_exception_data", None)  # pydantic's ValidationError
        if not hide or rebuild is None:
            raise
        hidden = rebuild(exc.title, [{"type": e["type"], "loc": e["loc"], "input": NOT_SHOWN,  # type: ignore[attr-defined]
                                      **({"ctx": e["ctx"]} if "ctx" in e else {})}
                                     for e in exc.errors(include_url=False)])  # type: ignore[attr-defined]
    raise hidden from None


def decode(data: str | bytes, type: Optional[type] = None) -> Any:
    """Decode stored JSON; with ``type`` build an instance (pydantic model or dataclass)."""
    obj = _LOADS(data)
    return obj if type is None else convert(obj, type)


#: ``type=`` given a JSON kind: the stored value must be of it (a float may be stored as an int).
_JSON_KINDS = {int: "a JSON integer", float: "a JSON number", str: "a JSON string", bool: "true or false",
               list: "a JSON array", dict: "a JSON object"}


def cut_repr(obj: Any) -> str:
    """A value as an error message shows it: its repr, cut at 60 characters.

    >>> cut_repr("x" * 100)[-5:], cut_repr([1])
    ('xx...', '[1]')
    """
    shown = repr(obj)
    return shown if len(shown) <= 60 else shown[:57] + "..."


def _shown(obj: Any) -> str:
    """A stored value as a type error shows it: :func:`cut_repr` and its kind."""
    return f"{cut_repr(obj)} ({type(obj).__name__})"


def _type_name(tp: Any) -> str:
    """``int``, ``list[int]``, ``Optional[int]``: a ``type=`` as the user wrote it."""
    if isinstance(tp, type) and not typing.get_args(tp):
        return tp.__name__
    return repr(tp).replace("typing.", "")


def _mismatch(tp: Any, reads: str, obj: Any) -> TypeError:
    return TypeError(f"type={_type_name(tp)} reads {reads}; the stored value is {_shown(obj)}")


def _as_kind(obj: Any, tp: type) -> Any:
    """``obj`` when it is of the JSON kind ``tp`` names (a float from a JSON integer), else a
    :class:`TypeError` naming the value and the rule: never another kind handed back as if it
    were the one asked for.

    >>> _as_kind(2, float), _as_kind([1], list)
    (2.0, [1])
    >>> _as_kind("7", int)
    Traceback (most recent call last):
    TypeError: type=int reads a JSON integer; the stored value is '7' (str)
    """
    kind = type(obj)
    if kind is tp:
        return obj
    if tp is float and kind is int:
        return float(obj)
    raise _mismatch(tp, _JSON_KINDS[tp], obj)


#: ``type=`` given one of these: the stored value is a string in the form it names, parsed.
_PARSED = {_dt.datetime: "an ISO 8601 date and time", _dt.date: "an ISO 8601 date", uuid.UUID: "a UUID string"}


def _parse(obj: Any, tp: type) -> Any:
    """A datetime, date or UUID from the string orjson stored it as; any other stored value is a
    :class:`TypeError` naming it (never handed back as it was).

    >>> _parse("2026-12-06T10:00:00Z", _dt.datetime)
    datetime.datetime(2026, 12, 6, 10, 0, tzinfo=datetime.timezone.utc)
    >>> _parse(7, _dt.date)
    Traceback (most recent call last):
    TypeError: type=date reads an ISO 8601 date; the stored value is 7 (int)
    """
    if isinstance(obj, str):
        try:
            if tp is _dt.datetime:
                return _dt.datetime.fromisoformat(obj.replace("Z", "+00:00"))
            if tp is _dt.date:
                return _dt.date.fromisoformat(obj)
            return uuid.UUID(obj)
        except ValueError as exc:
            raise _mismatch(tp, _PARSED[tp], obj) from exc
    raise _mismatch(tp, _PARSED[tp], obj)


def convert(obj: Any, tp: Any) -> Any:
    """Turn decoded JSON into ``tp``: pydantic models, dataclasses, JSON kinds, datetimes, UUIDs
    and containers and unions of them. A stored value of another shape than ``tp`` asks for is a
    :class:`TypeError` naming the value and the type (a pydantic model raises its own
    ``ValidationError``); a ``None`` is ``None`` whatever ``tp`` is; a ``tp`` of none of these
    forms gets the decoded JSON as it is.

    >>> convert([1, 2], list[float]), convert("7", Optional[int | str])
    ([1.0, 2.0], '7')
    >>> convert({"a": 1}, list[int])
    Traceback (most recent call last):
    TypeError: type=list[int] reads a JSON array; the stored value is {'a': 1} (dict)
    >>> convert([1], int | str)
    Traceback (most recent call last):
    TypeError: type=int | str matches none of its members; the stored value is [1] (list)
    """
    if tp is None or tp is Any or obj is None:
        return obj
    validate = getattr(tp, "model_validate", None)
    if validate is not None:
        return validate(obj)
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        if not isinstance(obj, dict):
            raise _mismatch(tp, "a JSON object", obj)
        hints = typing.get_type_hints(tp)
        kwargs = {}
        for f in dataclasses.fields(tp):
            if f.name in obj:
                kwargs[f.name] = convert(obj[f.name], hints.get(f.name, Any))
        return tp(**kwargs)
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (list, Sequence, tuple) and args:
        if not isinstance(obj, list):
            raise _mismatch(tp, "a JSON array", obj)
        if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):
            if len(obj) != len(args):
                raise _mismatch(tp, f"a JSON array of {len(args)} items", obj)
            return tuple(convert(v, a) for v, a in zip(obj, args))
        items = [convert(v, args[0]) for v in obj]
        return tuple(items) if origin is tuple else items
    if origin is dict and len(args) == 2:
        if not isinstance(obj, dict):
            raise _mismatch(tp, "a JSON object", obj)
        return {k: convert(v, args[1]) for k, v in obj.items()}
    if origin in (typing.Union, getattr(types, "UnionType", typing.Union)):
        for a in args:
            if a is type(None):
                continue
            try:
                return convert(obj, a)
            except (TypeError, ValueError):
                continue
        raise TypeError(f"type={_type_name(tp)} matches none of its members; the stored value is {_shown(obj)}")
    if tp in _JSON_KINDS:
        return _as_kind(obj, tp)
    if tp in _PARSED:
        return _parse(obj, tp)
    return obj
