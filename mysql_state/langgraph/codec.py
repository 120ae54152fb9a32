"""LangGraph values as JSON rows: what the saver stores, pure functions (no SQL, no state).

LangGraph serialises with a ``SerializerProtocol`` (``dumps_typed(obj) -> (type, bytes)``;
``JsonPlusSerializer`` gives msgpack). Every row of the table stays JSON, so a value is stored as
``{"t": type, "v": tree}`` when its msgpack transcodes losslessly to JSON (the usual case: a
message's text reads as text in the table, so operators' tools show it and encryption at rest
has something to hide), else ``{"t": type, "b": base64}`` (an ``EncryptedSerializer``'s
ciphertext, pickle, raw bytes), and ``{"t": "null"}`` for the serializer's null.

The transcoding is checked: a tree is kept only when packing it back gives the very bytes the
serializer produced, so reading a row hands the serializer exactly what it wrote.

>>> from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
>>> serde = JsonPlusSerializer()
>>> row = to_row(serde, {"text": "hi", 1: b"raw"})
>>> row["t"], from_row(serde, row)
('msgpack', {'text': 'hi', 1: b'raw'})
"""

from __future__ import annotations

import base64
import math
from typing import Any, NamedTuple, Optional, Sequence

import orjson
import ormsgpack
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

__all__ = ["to_row", "from_row", "from_rows", "msgpack_to_json", "json_to_msgpack", "RowError"]

#: Keys that mark an escaped msgpack form in a tree. A dict of the serializer's data whose
#: keys start with "~" is itself escaped (as ``"~m"``), so a marker is never data. ``"~p"``
#: wraps a whole tree with no escape, ``"p"`` an extension's: a reader packs it in one call.
_MAP, _BIN, _FLOAT, _EXT, _PLAIN = "~m", "~b", "~f", "~x", "~p"
_NON_STR = ormsgpack.OPT_NON_STR_KEYS


class RowError(ValueError):
    """A stored row is not a value row this module wrote (the saver names its place)."""


class _Ext(NamedTuple):
    tag: int
    data: bytes


class _NotJson(Exception):
    pass


def _unpack(data: bytes) -> Any:
    return ormsgpack.unpackb(data, ext_hook=_Ext, option=_NON_STR)


def _pack(obj: Any) -> bytes:
    return ormsgpack.packb(obj, option=_NON_STR)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _tree(obj: Any, depth: int = 0) -> tuple[Any, bool]:
    """An unpacked msgpack object as JSON types, escaping what JSON has not; and whether the
    tree is plain (holds no escape), which lets a reader pack it back in one call."""
    if depth > 200:
        raise _NotJson
    if obj is None or isinstance(obj, (bool, str)):
        return obj, True
    if isinstance(obj, int):
        if -(1 << 63) <= obj < (1 << 64):
            return obj, True
        raise _NotJson
    if isinstance(obj, float):
        return (obj, True) if math.isfinite(obj) else ({_FLOAT: repr(obj)}, False)
    if isinstance(obj, bytes):
        return {_BIN: _b64(obj)}, False
    if isinstance(obj, list):
        parts = [_tree(v, depth + 1) for v in obj]
        return [t for t, _ in parts], all(p for _, p in parts)
    if isinstance(obj, _Ext):
        try:
            inner, plain = _tree(_unpack(obj.data), depth + 1)
            if _pack(_plain(inner)) == obj.data:
                return ({_EXT: obj.tag, "v": inner, "p": 1} if plain else {_EXT: obj.tag, "v": inner}), False
        except (_NotJson, ormsgpack.MsgpackDecodeError, ormsgpack.MsgpackEncodeError, TypeError, ValueError):
            pass
        return {_EXT: obj.tag, "b": _b64(obj.data)}, False
    if isinstance(obj, dict):
        if all(isinstance(k, str) and not k.startswith("~") for k in obj):
            fields = {k: _tree(v, depth + 1) for k, v in obj.items()}
            return {k: t for k, (t, _) in fields.items()}, all(p for _, p in fields.values())
        return {_MAP: [[_tree(k, depth + 1)[0], _tree(v, depth + 1)[0]] for k, v in obj.items()]}, False
    raise _NotJson


def _plain(tree: Any) -> Any:
    """A tree back to the objects msgpack packs (the inverse of :func:`_tree`)."""
    if isinstance(tree, list):
        return [_plain(v) for v in tree]
    if isinstance(tree, dict):
        if _MAP in tree:
            return {_key(_plain(k)): _plain(v) for k, v in tree[_MAP]}
        if _BIN in tree:
            return base64.b64decode(tree[_BIN])
        if _FLOAT in tree:
            return float(tree[_FLOAT])
        if _EXT in tree:
            if "b" in tree:
                data = base64.b64decode(tree["b"])
            else:  # a plain inner tree ("p") is packed as it is, in one call
                data = _pack(tree["v"] if "p" in tree else _plain(tree["v"]))
            return ormsgpack.Ext(int(tree[_EXT]), data)
        return {k: _plain(v) for k, v in tree.items()}
    return tree


def _key(k: Any) -> Any:
    return tuple(_key(v) for v in k) if isinstance(k, list) else k


def msgpack_to_json(data: bytes) -> Optional[Any]:
    """The JSON tree of msgpack ``data``, or None when no tree packs back to the same bytes.

    >>> msgpack_to_json(ormsgpack.packb({"a": [1, 2.5, None]}))  # plain: marked, packed in one call
    {'~p': {'a': [1, 2.5, None]}}
    """
    fast = _plain_tree(data)
    if fast is not None:
        return fast
    try:
        tree, plain = _tree(_unpack(data))
        if plain:
            tree = {_PLAIN: tree}
        if json_to_msgpack(tree) == data:
            return tree
    except (_NotJson, ormsgpack.MsgpackDecodeError, ormsgpack.MsgpackEncodeError, TypeError, ValueError):
        pass
    return None


def _plain_tree(data: bytes) -> Optional[Any]:
    """:func:`msgpack_to_json` without the walk, for msgpack holding no float (its marker
    bytes absent), no extension (unpacking refuses one without a hook), nothing JSON has not
    (orjson refuses bytes and non-string keys) and no ``"~"`` that would need escaping: a
    checkpoint's body, its metadata. None: take the walk."""
    if b"\xca" in data or b"\xcb" in data:
        return None
    try:
        obj = ormsgpack.unpackb(data, option=_NON_STR)
        if b'"~' in orjson.dumps(obj) or _pack(obj) != data:
            return None
    except (ormsgpack.MsgpackDecodeError, ormsgpack.MsgpackEncodeError, TypeError, ValueError):
        return None
    return {_PLAIN: obj}


def json_to_msgpack(tree: Any) -> bytes:
    """The msgpack bytes a tree of :func:`msgpack_to_json` stands for."""
    return _pack(_packable(tree))


def _packable(tree: Any) -> Any:
    """What msgpack packs into the bytes a tree stands for (a plain one as it is)."""
    if isinstance(tree, dict) and _PLAIN in tree:
        return tree[_PLAIN]
    return _plain(tree)


def to_row(serde: Any, value: Any) -> dict:
    """One value as a JSON row, through the saver's serializer."""
    t, data = serde.dumps_typed(value)
    if t == "null":
        return {"t": t}
    if t == "msgpack":
        tree = msgpack_to_json(data)
        if tree is not None:
            return {"t": t, "v": tree}
    return {"t": t, "b": _b64(bytes(data))}


#: msgpack's nil: a row that holds it holds None.
_NIL = b"\xc0"


def from_row(serde: Any, row: Any) -> Any:
    """The value a row of :func:`to_row` holds; :class:`RowError` for anything else."""
    if not isinstance(row, dict) or not isinstance(row.get("t"), str):
        raise RowError(f"not a LangGraph value row: {str(row)[:80]!r}")
    try:
        if "v" in row:
            data = json_to_msgpack(row["v"])
        elif "b" in row:
            data = base64.b64decode(row["b"], validate=True)
        else:
            data = b""
    except (ValueError, TypeError, KeyError, ormsgpack.MsgpackEncodeError) as exc:
        raise RowError(f"a LangGraph value row of type {row['t']!r} does not decode ({exc})") from exc
    try:
        value = serde.loads_typed((row["t"], data))
    except Exception as exc:  # noqa: BLE001 - the serializer's own errors (a payload cut short): the row's
        raise RowError(f"a LangGraph value row of type {row['t']!r} does not decode ({type(exc).__name__}: "
                       f"{str(exc)[:80]})") from exc
    if value is None and row["t"] == "msgpack" and data != _NIL:
        # LangGraph's serializer reads an object it cannot rebuild (a payload changed by hand) as
        # None: a row that held something is damage, never a None the saver hands on.
        raise RowError("a LangGraph value row of type 'msgpack' holds an object the serializer cannot read "
                       "(it gave None)")
    return value


def from_rows(serde: Any, rows: Sequence[Any]) -> list:
    """The values of many rows of :func:`to_row`, in order, each what :func:`from_row` gives.

    With LangGraph's own ``JsonPlusSerializer`` and rows that all hold msgpack trees, the
    serializer is called once, on one msgpack array of the rows' bytes (as a saver reading one
    blob does: one unpacking, not one per row); else, or if that fails, row by row (so a bad
    row raises :class:`RowError` as :func:`from_row` does).

    >>> serde = JsonPlusSerializer()
    >>> from_rows(serde, [to_row(serde, {"a": 1}), to_row(serde, [b"x", 2.5])])  # one call
    [{'a': 1}, [b'x', 2.5]]
    >>> from_rows(serde, [to_row(serde, "s"), to_row(serde, None)])  # a null row: row by row
    ['s', None]
    """
    if type(serde) is JsonPlusSerializer and len(rows) > 1 and all(
            type(r) is dict and r.get("t") == "msgpack" and "v" in r for r in rows):
        try:
            data = _pack([_packable(r["v"]) for r in rows])  # one array: its items' bytes, in one call
            values = serde.loads_typed(("msgpack", data))
            if type(values) is list and len(values) == len(rows) and all(
                    v is not None or r["v"] is None for v, r in zip(values, rows)):
                return values
        except Exception:  # a row that does not decode: found and named row by row, below
            pass
    return [from_row(serde, r) for r in rows]
