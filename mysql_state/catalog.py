"""The session catalog: which sessions exist, newest activity first, a page at a time.

Every session has one catalog row in the same table: ``session_id = '__catalog__'``,
``state_key = <packed id>``, ``item_index = 0``, ``state_data = '{}'``. Each write of the store
carries it in the statement that already writes the session (the multi-row upsert, the value
upsert), so it costs no round trip; its ``version`` grows on every touch so MySQL moves its
``updated_at`` (the server's clock: every process agrees). ``created_at`` is the first write.
The one-statement writes of a process (appends, a turn's save) move it at most once every
:data:`TOUCH_EVERY` seconds and once a transaction: ``updated_at`` is at most
:data:`ACTIVITY_LAG` behind the session's last write.

A page is two statements: the page of catalog rows by the index ``by_activity (session_id,
updated_at)`` with a keyset cursor (cost in proportion to the page, not the table), then ONE
aggregate (rows, bytes, keys) over just those sessions' rows.
"""

from __future__ import annotations

import base64
import datetime as dt
from dataclasses import dataclass, field
from typing import Any, Callable, NamedTuple, Optional, Sequence

import orjson

from . import keys, sql
from .table import Table

__all__ = ["ACTIVITY_LAG", "ALL_USERS", "SessionInfo", "SessionPage", "TOUCH_EVERY", "row", "sessions", "user_range",
           "rebuild"]

#: Seconds between two moves of a session's catalog row by the one-statement writes of one
#: process (a list append, a turn's save: their condition proves the session exists, so its
#: catalog row does); every other write moves it. The activity time's resolution is the
#: second anyway (``updated_at`` is a DATETIME).
TOUCH_EVERY = 1.0
#: How far a catalog row's ``updated_at`` may be behind its session's last write.
ACTIVITY_LAG = dt.timedelta(seconds=TOUCH_EVERY + 1)


class _AllUsers:
    """The "every user" argument of :meth:`sessions`, ``prune`` and ``export`` (``None`` is
    the anonymous user, as everywhere)."""

    _instance: Optional["_AllUsers"] = None

    def __new__(cls) -> "_AllUsers":
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "ALL_USERS"

    def __reduce__(self) -> str:
        return "ALL_USERS"


ALL_USERS: Any = _AllUsers()


@dataclass(frozen=True)
class SessionInfo:
    """One session of the catalog: ``keys`` are the caller's keys (no hash or internal rows);
    ``rows`` and ``bytes`` (of ``state_data``) count every row it has, archived history included."""

    user_id: Optional[str]
    session_id: str
    keys: list = field(default_factory=list)
    rows: int = 0
    bytes: int = 0
    created_at: Optional[dt.datetime] = None
    updated_at: Optional[dt.datetime] = None


class SessionPage(NamedTuple):
    """A page of :class:`SessionInfo`; ``next_cursor`` is None on the last page."""

    items: list
    next_cursor: Optional[str]


def row(sid: str) -> tuple[tuple[str, str, int, bytes]]:
    """The catalog row of ``sid`` as an extra row of :func:`sql.upsert_rows`."""
    return ((keys.CATALOG_SESSION, sid, 0, sql.CATALOG_DATA),)


def prefix_of(user_id: Any) -> Optional[str]:
    """The prefix of ``user_id``'s packed ids; None for :data:`ALL_USERS`."""
    return None if user_id is ALL_USERS else keys.user_prefix(user_id)


def user_range(user_id: Any, exact: bool, column: str = "state_key") -> tuple[str, tuple]:
    """A WHERE fragment (`` AND ...``) keeping the packed ids of one user in ``column``; ``""``
    for :data:`ALL_USERS` (:func:`sql.user_ids`). A primary-key range on exact tables; otherwise
    (the Java store's table before ``migrate()``, whose keys fold case and accents) an escaped
    LIKE and the exact prefix compared as bytes, so that ``"alice"`` never takes ``"Alice"``'s rows.

    >>> user_range("a_b", False, "session_id")
    (" AND session_id LIKE %s ESCAPE '!' AND CAST(LEFT(session_id, %s) AS BINARY) = CAST(%s AS BINARY)", ('a!_b:%', 4, 'a_b:'))
    """
    return sql.user_ids(prefix_of(user_id), exact, column)


def encode_cursor(updated_at: dt.datetime, sid: str) -> str:
    """An opaque cursor: where the next page starts (strictly after this row)."""
    return base64.urlsafe_b64encode(orjson.dumps([updated_at.isoformat(), sid])).decode()


def decode_cursor(cursor: str) -> tuple[dt.datetime, str]:
    try:
        when, sid = orjson.loads(base64.urlsafe_b64decode(cursor.encode()))
        return dt.datetime.fromisoformat(when), str(sid)
    except (ValueError, TypeError, AttributeError) as exc:
        raise ValueError(f"cursor {cursor[:40]!r} is not one that sessions() returned") from exc


def sessions(
    db: Any,
    t: Table,
    user_id: Any,
    updated_before: Optional[dt.datetime],
    updated_after: Optional[dt.datetime],
    limit: int,
    cursor: Optional[str],
) -> SessionPage:
    """A page of the catalog (see the module doc), read through the connector ``db`` on the
    table ``t``. Datetimes are the server's (naive)."""
    q, of_user = t.q, prefix_of(user_id)
    page_sql, params = sql.catalog_page(of_user, t.exact_keys, updated_before, updated_after,
                                        None if cursor is None else decode_cursor(cursor), limit)
    page_sql = q(page_sql)
    prefix = of_user or ""  # exact, whatever the collation

    def read(cur: Any) -> tuple[list, list]:
        cur.execute(page_sql, params)
        found = [r for r in cur.fetchall() if r[0].startswith(prefix)]
        page = found[:limit]
        shape: list = []
        if page:
            ids = [r[0] for r in page] + [keys.history_session(r[0]) for r in page]
            cur.execute(q(sql.with_ids(sql.CATALOG_SHAPE, len(ids))), ids)
            shape = list(cur.fetchall())
        return found, shape

    found, shape = db.run(read, "sessions", write=False)
    page = found[:limit]
    history_of = {keys.history_session(r[0]): r[0] for r in page}
    counts: dict[str, list] = {r[0]: [0, 0, set()] for r in page}
    for session_id, state_key, n, size in shape:
        owner = history_of.get(session_id, session_id)
        c = counts.get(owner)
        if c is None:
            continue
        c[0] += int(n)
        c[1] += int(size)
        if owner == session_id:  # a list's key by its hash row too: an empty list is a key (it exists)
            c[2].add(state_key[: -len(keys.HASH_SUFFIX)] if state_key.endswith(keys.HASH_SUFFIX) else state_key)
    items = []
    for sid, created, updated in page:
        user, session = keys.unpack(sid)
        n, size, ks = counts[sid]
        items.append(SessionInfo(user, session, sorted(ks), n, size, created, updated))
    more = len(found) > limit
    next_cursor = encode_cursor(page[-1][2], page[-1][0]) if more and page else None
    return SessionPage(items, next_cursor)


def check_when(name: str, value: Any) -> Optional[dt.datetime]:
    """``updated_before``/``updated_after``: a datetime or None."""
    if value is None or isinstance(value, dt.datetime):
        return value
    raise TypeError(f"{name} must be a datetime or None, got {type(value).__name__}: {value!r}")


def chunks(seq: Sequence[Any], size: int) -> list:
    """``seq`` cut in lists of at most ``size``."""
    return [list(seq[i : i + size]) for i in range(0, len(seq), size)]


def rebuild(cur: Any, q: Callable[[str], str], sids: Sequence[str]) -> int:
    """Create (or widen to their rows' times) the catalog rows of the sessions ``sids``, in the
    caller's transaction; the rows changed. (``q`` renders a statement for the table.)"""
    changed = 0
    for part in chunks(list(sids), 500):
        changed += cur.execute(q(sql.with_ids(sql.REBUILD_CATALOG, len(part))), tuple(part))
    return changed
