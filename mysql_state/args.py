"""Argument checks of the store's calls, before any SQL: ids, versions, windows, sizes.

Each check raises a clear error naming the value and the rule; the ``prepare_*`` functions
also encode what a call writes (JSON, sealed for its place), so an engine receives only
checked, encoded input. Used by the facade (:mod:`mysql_state.store`) and by
:class:`~mysql_state.transaction.Transaction`, so a call inside a transaction is checked
exactly as outside one.
"""

from __future__ import annotations

import collections.abc

import datetime as dt
import inspect
from typing import Any, Mapping, Optional, Sequence

from . import catalog, keys, serde
from .checks import check_count
from .errors import ValueTooLargeError
from .listsync import Plan
from .results import UNVERSIONED
from .sql import NO_LIMIT
from .table import Table

__all__ = ["SAME_USER", "ids", "key_ids", "version", "window", "check_size", "check_upserts",
           "save_many", "many_keys", "delete_keys", "flag", "session_page", "export_sessions", "prepare_value", "encode_value", "prepare_list", "prepare_append",
           "append_lists", "callback", "erasing_user"]

#: ``fork``'s default ``new_user_id``: the source's user (None would mean the anonymous one).
SAME_USER: Any = type("SameUser", (), {"__repr__": lambda self: "<same user>"})()


def ids(t: Table, user_id: Optional[str], session_id: str, key: Optional[str] = None, *,
        is_list: bool = False) -> tuple[str, Optional[str]]:
    """Validate and pack ids: ``(packed session id, key)``; ``key=None`` means the whole session."""
    sid = keys.pack(user_id, session_id)
    k = keys.state_key(key, is_list=is_list, exact=t.exact_keys) if key is not None else None
    if t.pads_spaces:
        # the user as packed: a blank one is the anonymous user, not an id ending with a space
        for what, v in (("user_id", keys.user_part(user_id)), ("session_id", session_id), ("key", k or "")):
            if v.endswith(" "):
                raise ValueError(
                    f"{what} {v!r} ends with a space, and this table's collation ignores "
                    "trailing spaces (so it would share a row with the trimmed id); make the "
                    "key columns exact (see the warning at open) to allow it"
                )
    return sid, k


def key_ids(t: Table, user_id: Optional[str], session_id: str, key: str, *, is_list: bool = False) -> tuple[str, str]:
    """:func:`ids` for calls whose key is required (None is refused, naming ``key``)."""
    if key is None:
        raise TypeError("key must be a str, got None")
    return ids(t, user_id, session_id, key, is_list=is_list)  # type: ignore[return-value]


def version(v: Any, name: str) -> int:
    """An expected version: an int >= -1 (``UNVERSIONED``)."""
    if not isinstance(v, int) or isinstance(v, bool):
        raise TypeError(f"{name} must be an int, got {type(v).__name__}: {v!r}")
    if v < UNVERSIONED:
        raise ValueError(f"{name} {v} must be >= -1 (UNVERSIONED)")
    return v


def window(offset: Any, limit: Any) -> tuple[int, Optional[int]]:
    """Check ``offset``/``limit`` and bring huge ones within what SQL accepts (same answer)."""
    for name, v in (("offset", offset), ("limit", limit)):
        if v is not None and (not isinstance(v, int) or isinstance(v, bool)):
            raise TypeError(f"{name} must be an int, got {type(v).__name__}: {v!r}")
    if offset is None:
        raise TypeError("offset must be an int, got None")
    if limit is not None and limit < 0:
        raise ValueError(f"limit {limit} must be >= 0 (or None for no limit)")
    offset = max(-NO_LIMIT, min(offset, NO_LIMIT))
    if limit is not None and limit >= NO_LIMIT:
        limit = None
    return offset, limit


def check_size(t: Table, data: bytes, what: str) -> None:
    """Refuse a value whose statement would exceed the server's ``max_allowed_packet``."""
    need = t.sealer.stored_size(data) + 2 * 4 * 2 * keys.MAX_ID_CHARS + 256
    if need > t.max_allowed_packet:
        raise ValueTooLargeError(
            f"{what}: the value's JSON is {len(data)} bytes ({need} bytes in the statement), "
            f"more than the server's max_allowed_packet of {t.max_allowed_packet} bytes; "
            "nothing was written"
        )


def check_upserts(t: Table, k: str, plan: Plan, values: Sequence[Any]) -> None:
    """Refuse, before writing, an item a plan writes that holds NaN/inf or is too large.

    Called by the list engine once the plan is known: only the items written are checked
    (a warm save of a long list checks its new turn, not every item again)."""
    for i, d in plan.upserts:
        serde.check_finite(values[i], d, k, i)
        check_size(t, d, f"item {i} of list {k!r}")


def save_many(values: Any, lists: Any, expected_versions: Any) -> tuple[dict, dict, dict]:
    """``save_many``'s mappings checked: (values, lists, expected versions) as dicts."""
    for name, m in (("values", values), ("lists", lists), ("expected_versions", expected_versions)):
        if m is not None and not isinstance(m, Mapping):
            raise TypeError(f"{name} must be a mapping of key to {name[:-1]}, got {type(m).__name__}: {serde.cut_repr(m)}")
    value_map, list_map, expected = dict(values or {}), dict(lists or {}), dict(expected_versions or {})
    both = set(value_map) & set(list_map)
    if both:
        raise ValueError(f"keys {sorted(both)} are given both as a value and as a list")
    unknown = set(expected) - set(value_map) - set(list_map)
    if unknown:
        raise ValueError(f"expected_versions names keys {sorted(unknown)} that are not saved")
    for k, v in expected.items():
        version(v, f"expected_versions[{k!r}]")
    return value_map, list_map, expected


def append_lists(t: Table, user_id: Optional[str], session_id: str, appends: Any, at: Any,
                 values: Any) -> tuple[str, list[tuple[str, list[bytes]]], dict[str, int], list[tuple[str, bytes]]]:
    """``append_lists``' arguments checked and encoded: (packed session id, ``(key, new items'
    JSON)`` per list, ``at`` as a dict, ``(key, JSON)`` per value)."""
    for name, m in (("appends", appends), ("at", at), ("values", values)):
        if (m is not None or name == "appends") and not isinstance(m, Mapping):
            what = {"appends": "the items to append", "at": "its expected length", "values": "its value"}[name]
            raise TypeError(f"{name} must be a mapping of key to {what}, got {type(m).__name__}: {serde.cut_repr(m)}")
    prepared = [prepare_append(t, user_id, session_id, k, items, f"appends[{k!r}]") for k, items in appends.items()]
    value_rows = [encode_value(t, user_id, session_id, k, v) for k, v in (values or {}).items()]
    both = {k for _, k, _ in prepared} & {k for _, k, _ in value_rows}
    if both:
        raise ValueError(f"keys {sorted(both)} are given both as a list to append to and as a value")
    want = dict(at or {})
    for k, v in want.items():
        if isinstance(v, bool) or not isinstance(v, int):
            raise TypeError(f"at[{k!r}] must be a list's length (an int >= 0), got {v!r}")
        if v < 0:
            raise ValueError(f"at[{k!r}] must be a list's length (an int >= 0), got {v!r}")
    unknown = set(want) - {k for _, k, _ in prepared}
    if unknown:
        raise ValueError(f"at names keys {sorted(unknown)} that are not appended to")
    sid = keys.pack(user_id, session_id)
    return sid, [(k, datas) for _, k, datas in prepared], want, [(k, d) for _, k, d in value_rows]


def many_keys(t: Table, user_id: Optional[str], session_id: str, values: Any,
              lists: Any) -> tuple[str, list[str], list[str]]:
    """``get_many``'s keys checked: (packed session id, value keys, list keys)."""
    value_keys = [key_ids(t, user_id, session_id, k)[1] for k in serde.check_keys(values, "values")]
    list_keys = [key_ids(t, user_id, session_id, k, is_list=True)[1] for k in serde.check_keys(lists, "lists")]
    both = set(value_keys) & set(list_keys)
    if both:
        raise ValueError(f"keys {sorted(both)} are asked for both as a value and as a list")
    return keys.pack(user_id, session_id), value_keys, list_keys


def callback(fn: Any, name: str) -> Any:
    """A function the store calls (``fn`` of ``transaction``, ``progress=``): callable, and
    not an ``async def``, whose call gives a coroutine that nothing would await (the async
    store runs it in a worker thread too). None is returned as it is (no callback).

    >>> async def later(tx): ...
    >>> callback(later, "fn")
    Traceback (most recent call last):
    TypeError: fn must be a plain function taking its arguments; later is an async def, whose coroutine nothing would await
    """
    if fn is None:
        return None
    if not callable(fn):
        raise TypeError(f"{name} must be a callable, got {type(fn).__name__}: {serde.cut_repr(fn)}")
    if inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(getattr(fn, "__call__", None)):
        raise TypeError(f"{name} must be a plain function taking its arguments; "
                        f"{getattr(fn, '__name__', serde.cut_repr(fn))} is an async def, whose coroutine nothing would await")
    return fn


def erasing_user(user_id: Any, operation: str, nothing: str) -> str:
    """The user prefix of a call that deletes a user's sessions (``prune``, ``forget_user``):
    a blank id (an unset variable) is refused there rather than taken for the anonymous user,
    whose sessions it would delete; None names the anonymous user. ``nothing``: what was not done.

    >>> erasing_user("alice", "prune", "nothing was pruned")
    'alice:'
    >>> erasing_user(" ", "prune", "nothing was pruned")
    Traceback (most recent call last):
    ...
    ValueError: prune: user_id ' ' is blank; pass None for the anonymous user's sessions (a blank id is refused here, not taken for it); nothing was pruned
    """
    if isinstance(user_id, str) and not user_id.strip():
        raise ValueError(f"{operation}: user_id {user_id!r} is blank; pass None for the anonymous user's sessions "
                         f"(a blank id is refused here, not taken for it); {nothing}")
    return keys.user_prefix(user_id)


def flag(v: Any, name: str) -> bool:
    """A keyword that must be a bool (``maintenance=``): 0, 1 or "yes" are refused."""
    if not isinstance(v, bool):
        raise TypeError(f"{name} must be a bool, got {type(v).__name__}: {v!r}")
    return v


def delete_keys(t: Table, user_id: Optional[str], session_id: str, names: Any,
                maintenance: Any) -> tuple[str, list[str]]:
    """``delete_keys``' arguments checked: (packed session id, the keys, each once, in order)."""
    flag(maintenance, "maintenance")
    ks = [key_ids(t, user_id, session_id, k)[1] for k in serde.check_keys(names, "keys")]
    return keys.pack(user_id, session_id), list(dict.fromkeys(ks))


def session_page(user_id: Any, limit: Any, cursor: Any, updated_before: Any,
                 updated_after: Any) -> tuple[Optional[dt.datetime], Optional[dt.datetime]]:
    """``sessions()``'s arguments checked: the two bounds (datetimes or None)."""
    check_count("limit", limit)
    if user_id is not catalog.ALL_USERS:
        keys.user_prefix(user_id)  # validates
    if cursor is not None and not isinstance(cursor, str):
        raise TypeError(f"cursor must be a str from a SessionPage, got {type(cursor).__name__}: {serde.cut_repr(cursor)}")
    return catalog.check_when("updated_before", updated_before), catalog.check_when("updated_after", updated_after)


def export_sessions(t: Table, user_id: Any, sessions: Any) -> Optional[list[str]]:
    """``export``'s arguments checked: the packed ids of ``sessions`` (None: every session)."""
    if sessions is None:
        if user_id is not catalog.ALL_USERS:
            keys.user_prefix(user_id)  # validates
        return None
    if isinstance(sessions, str) or not isinstance(sessions, collections.abc.Iterable):
        raise TypeError(f"sessions must be a list of session ids, got {type(sessions).__name__}: {sessions!r}")
    if user_id is catalog.ALL_USERS:
        raise ValueError("export(sessions=...) needs user_id: session ids belong to one user "
                         "(pass user_id=None for the anonymous user's sessions)")
    return list(dict.fromkeys(ids(t, user_id, s)[0] for s in sessions))


def prepare_value(t: Table, user_id: Optional[str], session_id: str, key: str,
                  value: Any) -> tuple[str, str, str, int]:
    """A value save checked and encoded: (packed session id, key, stored text, the bytes of
    its plaintext JSON)."""
    sid, k, data = encode_value(t, user_id, session_id, key, value)
    return sid, k, t.sealer.seal(sid, k, 0, data).decode(), len(data)


def encode_value(t: Table, user_id: Optional[str], session_id: str, key: str, value: Any) -> tuple[str, str, bytes]:
    """A value save checked and encoded, not yet sealed: (packed session id, key, its JSON)."""
    sid, k = key_ids(t, user_id, session_id, key)
    data = serde.encode(value, k)
    check_size(t, data, f"save {k!r}")
    return sid, k, data


def prepare_list(t: Table, user_id: Optional[str], session_id: str, key: str,
                 values: Any, parameter: str = "values") -> tuple[str, str, Sequence[Any], bytes]:
    """A list save checked and encoded: (packed session id, key, the items, the list's JSON);
    ``parameter`` names the items in an error (``lists['memory']`` for ``save_many``)."""
    sid, k = key_ids(t, user_id, session_id, key, is_list=True)
    values = serde.check_sequence(values, parameter)
    return sid, k, values, serde.encode_list(values, k)


def prepare_append(t: Table, user_id: Optional[str], session_id: str, key: str,
                   items: Any, parameter: str = "items") -> tuple[str, str, list[bytes]]:
    """An append checked and encoded: (packed session id, key, the new items' JSON);
    ``parameter`` names the items in an error (``appends['memory']`` for ``append_lists``)."""
    sid, k = key_ids(t, user_id, session_id, key, is_list=True)
    datas = serde.encode_items(serde.check_sequence(items, parameter), k)
    for i, d in enumerate(datas):
        check_size(t, d, f"new item {i} of list {k!r}")
    return sid, k, datas
