"""Google ADK adapter: a ``BaseSessionService`` whose sessions live in this store.

Install with ``pip install 'mysql-state[adk]'``; the core package never imports this.

Layout in the store (ids encoded by :func:`encode_id`, so any id ADK accepts works, ``:``
included, and no two (app, user, session) share a row):

* store user ``adk.<app>``, store session ``index``: one value row per key:
  ``app`` (the ``app:`` state), ``u:<user>`` (a user's ``user:`` state) and
  ``s:<user>:<session>`` (a session's own state, ``last_update_time`` and revision marker).
  Listing a user's sessions reads the key range ``s:<user>:`` of this one store session (a
  primary-key range: cost in proportion to that user's sessions, never to their events);
  listing an app's sessions reads this store session.
* store user ``adk.<app>``, store session ``e:<user>:<session>``: the list ``events``, one
  event per row, in append order.

``append_event`` writes the event, the session's row and the ``user:``/``app:`` rows it
changes in one :meth:`~mysql_state.store.MysqlAgentStateStore.transaction`, whose reads lock
what they read: concurrent appends lose no event and no shared key, and a writer holding a
session superseded in storage gets ADK's ``StaleSessionError``.

A turn of a real agent (``model`` is any ADK model; the test gives an offline one that answers
"hello"); the events are in the store:

>>> from google.adk.agents import LlmAgent
>>> from google.adk.runners import Runner
>>> from google.genai import types
>>> async def turn(text):
...     service = MysqlSessionService.from_url(url, create_tables=True)
...     try:
...         runner = Runner(agent=LlmAgent(name="bot", model=model), app_name="app", session_service=service)
...         await service.create_session(app_name="app", user_id="alice", session_id="chat-1")
...         message = types.Content(role="user", parts=[types.Part(text=text)])
...         async for _ in runner.run_async(user_id="alice", session_id="chat-1", new_message=message):
...             pass
...         session = await service.get_session(app_name="app", user_id="alice", session_id="chat-1")
...         return [event.content.parts[0].text for event in session.events]
...     finally:
...         await service.close()
>>> asyncio.run(turn("hi"))
['hi', 'hello']
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import datetime
import functools
import importlib.util
import re
import threading
import uuid
from typing import Any, AsyncIterator, Callable, Iterator, Mapping, Optional, Sequence, overload

try:
    from google.adk.errors import StaleSessionError
    from google.adk.errors.already_exists_error import AlreadyExistsError
    from google.adk.errors.session_not_found_error import SessionNotFoundError
    from google.adk.events.event import Event
    from google.adk.platform import time as platform_time
    from google.adk.platform import uuid as platform_uuid
    from google.adk.sessions import _session_util
    from google.adk.sessions.base_session_service import (
        BaseSessionService,
        GetSessionConfig,
        ListSessionsResponse,
    )
    from google.adk.sessions.session import Session
    from google.adk.sessions.state import State
    from pydantic import ValidationError
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    try:
        _installed = importlib.util.find_spec("google.adk") is not None
    except (ImportError, ValueError):
        _installed = False
    if not _installed:
        raise ImportError("mysql_state.adk needs Google ADK: pip install 'mysql-state[adk]'") from exc
    raise ImportError(f"mysql_state.adk cannot use the installed Google ADK ({exc}); it is written for the "
                      "version the adk extra pins: pip install 'mysql-state[adk]'") from exc

from . import args, keys, serde
from ._adapt import AnyStore, as_async, open_store
from .errors import CorruptStateError, DecryptionError

__all__ = ["MysqlSessionService", "encode_id", "decode_id"]

STALE_MESSAGE = (
    "The session has been modified in storage since it was loaded. "
    "Please reload the session before appending more events."
)
INDEX = "index"  # the store session holding app, user and session rows of one app
APP_KEY = "app"
EVENTS = "events"
_ESCAPES = {"%": "%25", ":": "%3A"}
_UNESCAPE = re.compile("%(25|3A|5F)")
_UNESCAPED = {"25": "%", "3A": ":", "5F": "_"}


def encode_id(value: str) -> str:
    """Escape ``%`` and ``:`` (``%25``, ``%3A``) and a leading ``_`` (``%5F``); decodes back.

    The result has no ``:`` and does not start with ``_``, so a key ending in an encoded id
    never ends in the store's reserved ``:_hash`` (an ADK session id ``_hash`` works).

    >>> encode_id("a:b%c"), encode_id("_hash"), decode_id(encode_id("_a:b%c"))
    ('a%3Ab%25c', '%5Fhash', '_a:b%c')
    """
    if not isinstance(value, str):
        raise TypeError(f"an ADK id must be a str, got {type(value).__name__}: {value!r}")
    out = "".join(_ESCAPES.get(ch, ch) for ch in value)
    return "%5F" + out[1:] if out.startswith("_") else out


def decode_id(value: str) -> str:
    """The inverse of :func:`encode_id`."""
    return _UNESCAPE.sub(lambda m: _UNESCAPED[m.group(1)], value)


_SCOPES = (("app", State.APP_PREFIX), ("user", State.USER_PREFIX), ("session", ""))


def _check_storable(deltas: dict[str, dict[str, Any]], what: str) -> None:
    """Refuse what the store cannot hold in the JSON-safe ``deltas`` of a state
    (``extract_json_safe_state_delta``'s: sets already lists) naming its state key, prefix
    included, before anything is written: a NaN or an infinity (``ValueError``), an integer
    beyond 64 bits, a dict key that is not a str (``TypeError``). The store would refuse them
    too, naming only its own row."""
    for scope, prefix in _SCOPES:
        for key, value in deltas[scope].items():
            try:
                serde.encode(value, prefix + key)
            except ValueError as exc:
                bad = serde.non_finite(value)
                raise ValueError(f"{what}: state key {prefix + key!r} holds the float {bad!r}, which JSON cannot "
                                 "represent (it would be stored as null); nothing was written") from exc
            except TypeError as exc:
                raise TypeError(f"{what}: state key {prefix + key!r} cannot be stored as JSON "
                                f"({exc.__cause__ or exc}); nothing was written") from exc


class _Ids:
    """Where one ADK session lives in the store; checks lengths, naming the ids."""

    def __init__(self, app_name: str, user_id: str, session_id: str = "") -> None:
        for what, value in (("app_name", app_name), ("user_id", user_id), ("session_id", session_id)):
            keys.check_text(value, what)  # named as ADK names it, not as the store's row
        self.app_name, self.user_id, self.session_id = app_name, user_id, session_id
        self.owner = "adk." + encode_id(app_name)
        self.user_key = "u:" + encode_id(user_id)
        self.session_key = f"s:{encode_id(user_id)}:{encode_id(session_id)}"
        self.events = f"e:{encode_id(user_id)}:{encode_id(session_id)}"
        longest = max(  # the store's session ids (owner:events, owner:index) and keys
            len(self.owner) + 1 + len(self.events),
            len(self.owner) + 1 + len(INDEX),
            len(self.session_key),
        )
        if longest > keys.MAX_ID_CHARS:
            raise ValueError(
                f"app_name {app_name[:60]!r}, user_id {user_id[:60]!r} and session_id {session_id[:60]!r} "
                f"are too long together: they take {longest} of the {keys.MAX_ID_CHARS} characters "
                "the store's key columns hold (':', '%' and a leading '_' count three once escaped)"
            )


#: What a call that meets damage did not do, as its CorruptStateError says.
RETURNED_NOTHING = "nothing of it was returned"
LISTED_NOTHING = "no session was listed"
WROTE_NOTHING = "nothing was written"
PRUNED_NOTHING = "nothing was pruned"

#: A read's default: an absent row reads as this, a row holding JSON null as None (damage).
_ABSENT: Any = object()

#: The fields of a session's record (create_session and append_event write it), each with the
#: JSON types it holds and what it is; ``last`` (the id of the event appended last) may be
#: missing (rows written before it was kept) or null (no event yet).
_RECORD_FIELDS = (
    ("state", (dict,), "a map: the session's own state"),
    ("update_time", (int, float), "a number: the session's last_update_time"),
    ("marker", (str,), "a non-empty str: its revision marker"),
)
_RECORD = "the session's record (a map of 'state', 'update_time', 'marker' and 'last')"
#: The fields of an event's row this module reads itself (ADK's Event reads the rest); the id
#: is never empty (an Event given none makes one).
_EVENT_FIELDS = (
    ("id", (str,), "a non-empty str: the event's id"),
    ("timestamp", (int, float), "a number: when it happened"),
)


def _shown(value: Any) -> str:
    """A stored value as a message names it: its JSON type, then its start."""
    if value is None:
        return "null"
    kind = ("a map" if isinstance(value, dict) else "a list" if isinstance(value, list) else "a str"
            if isinstance(value, str) else "a boolean" if isinstance(value, bool) else "a number")
    return f"{kind} {serde.cut_repr(value)}"


def _fields_problem(value: Any, fields: tuple, what: str, whole: str) -> Optional[str]:
    """What is wrong with ``value`` as a map holding ``fields`` (name, JSON types, the rule;
    a str not empty, a number not a boolean); ``what`` is a map of them, ``whole`` the rule."""
    if not isinstance(value, dict):
        return f"holds {_shown(value)}, not {whole}"
    for field, types, rule in fields:
        if field not in value:
            return f"holds {what} without {field!r} ({rule})"
        got = value[field]
        if not isinstance(got, types) or isinstance(got, bool) or got == "":
            return f"holds {what} whose {field!r} is {_shown(got)}, not {rule}"
    return None


def _event_problem(value: Any) -> Optional[str]:
    """What is wrong with one row of a session's events (None: nothing), as this module reads it."""
    return _fields_problem(value, _EVENT_FIELDS, "an event", "an event (a map of its fields)")


def _problem(key: str, value: Any) -> Optional[str]:
    """What is wrong with the app's index row ``key`` holding ``value`` (None: nothing), by the
    rule of its kind: a session's record (``s:<user>:<session>``), a map of ``app:`` or
    ``user:`` state (``app``, ``u:<user>``). Every index row this module reads is checked here
    (:func:`_check_rows`) before it is used."""
    if key.startswith("s:"):
        if ":" not in key[2:]:
            return "is not named s:<user>:<session>: it names no ADK session"
        wrong = _fields_problem(value, _RECORD_FIELDS, "a record", _RECORD)
        if wrong is not None:
            return wrong
        if value.get("last") is not None and not isinstance(value["last"], str):
            return (f"holds a record whose 'last' is {_shown(value['last'])}, not the id of the event appended "
                    "last (a str, or null before the first)")
        return None
    if key == APP_KEY or key.startswith("u:"):
        scope = "app:" if key == APP_KEY else "user:"
        return None if isinstance(value, dict) else f"holds {_shown(value)}, not a map of {scope} state"
    return None


def _session_of(key: str) -> tuple[str, str]:
    """The (user id, session id) of a session row's key ``s:<user>:<session>`` (checked by :func:`_problem`)."""
    user_part, session_part = key[2:].split(":", 1)
    return decode_id(user_part), decode_id(session_part)


def _place(app_name: str, sid: str, key: str) -> str:
    """What the row ``key`` of the store session ``sid`` (packed) is to ADK: a session, its
    events, or the app's or a user's shared state."""
    store_session = sid.split(keys.SEPARATOR, 1)[-1]
    of_app = f"app {app_name!r}"
    if store_session.startswith("e:") and ":" in store_session[2:]:
        user, session = _session_of(store_session)  # e:<user>:<session>, as a session row's key
        return f"the events of ADK session {session!r} of user {user!r}, {of_app}"
    if key == APP_KEY:
        return f"the app: state of {of_app}"
    if key.startswith("u:"):
        return f"the user: state of user {decode_id(key[2:])!r}, {of_app}"
    if key.startswith("s:") and ":" in key[2:]:
        user, session = _session_of(key)
        return f"ADK session {session!r} of user {user!r}, {of_app}"
    return f"a session row of {of_app}"


#: One damaged row: (packed store session, key, item index: of the events' list, negative
#: counted from the end as read, None for an index row), what is wrong with it.
_Found = tuple[str, str, Optional[int], str]


def _damage(app_name: str, found: Sequence[_Found], then: str) -> CorruptStateError:
    """The error for damaged rows of an app (``found``, the first named in full, the others
    listed): the ADK session (or shared state) each belongs to, its row, what is wrong, the
    way out, and ``then`` (what the call did not do)."""
    sid, key, index, wrong = found[0]
    if index is None:
        row = f"row {key!r} of store session {sid!r}"
    else:
        at = f"{index}" if index >= 0 else f"{index} (counted from the end)"
        row = f"event {at} (row of list {key!r}, store session {sid!r})"
    if key == APP_KEY or key.startswith("u:"):
        owner = sid.split(keys.SEPARATOR, 1)[0]
        remedy = (f"restore the row from a backup, or drop that state with store.delete({owner!r}, {INDEX!r}, "
                  f"{key!r})")
    else:
        remedy = ("delete_session removes the session whole (it reads none of its rows), or restore its rows "
                  "from a backup")
    also = ""
    if len(found) > 1:
        named = [f"{_place(app_name, s, k)} (row {k!r})" for s, k, _, _ in found[1:6]]
        more = f" and {len(found) - 6} more" if len(found) > 6 else ""
        also = f" (also damaged: {'; '.join(named)}{more})"
    return CorruptStateError(
        f"{_place(app_name, sid, key)} cannot be read: its {row} {wrong}; it was changed outside this adapter: "
        f"{remedy}; {then}{also}", sid, key, None if index is None or index < 0 else index)


@contextlib.contextmanager
def _reading(app_name: str, then: str) -> Iterator[None]:
    """Around a store read of an app's rows: the store's own :class:`CorruptStateError` (a row
    that is not JSON, a list whose rows disagree with its hash row) is raised again naming the
    ADK session, chained. A :class:`DecryptionError` (a key the keyring lacks) passes as it is."""
    try:
        yield
    except DecryptionError:
        raise
    except CorruptStateError as exc:
        index = None if exc.key != EVENTS else exc.index
        raise _damage(app_name, [(exc.session_id, exc.key, index, f"cannot be read by the store ({exc})")],
                      then) from exc


def _check_rows(ids: _Ids, rows: Mapping[str, Any], then: str) -> None:
    """Raise :func:`_damage` naming every damaged one of the app's index ``rows`` (:func:`_problem`)."""
    sid = keys.pack(ids.owner, INDEX)
    found = [(sid, k, None, wrong) for k, v in rows.items() if (wrong := _problem(k, v)) is not None]
    if found:
        raise _damage(ids.app_name, found, then)


def _check_events(ids: _Ids, data: list, whole: bool, then: str) -> list:
    """``data`` (events as read: the whole list, or with ``whole`` False its tail), once every
    row is an event :func:`_event_problem` reads; else :func:`_damage` naming each damaged one."""
    sid = keys.pack(ids.owner, ids.events)
    found = [(sid, EVENTS, i if whole else i - len(data), wrong)
             for i, e in enumerate(data) if (wrong := _event_problem(e)) is not None]
    if found:
        raise _damage(ids.app_name, found, then)
    return data


def _events_read_in(t: Any, ids: _Ids, last: Optional[int], then: str) -> list:
    """The session's events read (locked) in the transaction ``t``: the ``last`` ones (all:
    None), checked."""
    with _reading(ids.app_name, then):
        data = t.get_list(ids.owner, ids.events, EVENTS, offset=-last) if last else t.get_list(
            ids.owner, ids.events, EVENTS)
    return _check_events(ids, data, last is None, then)


def _models(ids: _Ids, data: list, start: int, whole: bool, then: str) -> list[Event]:
    """ADK's events of ``data[start:]`` (checked rows, read as :func:`_check_events` says);
    one ADK cannot read is :func:`_damage` naming it, chained to pydantic's error."""
    try:
        return [Event.model_validate(e) for e in data[start:]]
    except ValidationError:
        for i in range(start, len(data)):
            try:
                Event.model_validate(data[i])
            except ValidationError as exc:
                first = exc.errors()[0]  # a ValidationError has one at least
                at = ".".join(map(str, first["loc"])) or "the top"
                wrong = (f"holds an event ADK cannot read ({exc.error_count()} problem(s), the first at {at}: "
                         f"{first['msg']})")
                raise _damage(ids.app_name, [(keys.pack(ids.owner, ids.events), EVENTS,
                                              i if whole else i - len(data), wrong)], then) from exc
        raise


def _row_in(t: Any, ids: _Ids, key: str, then: str) -> Any:
    """The index row ``key`` read (locked) in the transaction ``t``, checked; :data:`_ABSENT`
    when there is none."""
    with _reading(ids.app_name, then):
        value = t.get(ids.owner, INDEX, key, default=_ABSENT)
    if value is not _ABSENT:
        _check_rows(ids, {key: value}, then)
    return value


def _merge(app: dict, user: dict, session_state: dict) -> dict[str, Any]:
    """ADK's merged view: session keys, then ``app:`` and ``user:`` keys with their prefix."""
    merged = copy.deepcopy(session_state)
    merged.update({State.APP_PREFIX + k: v for k, v in app.items()})
    merged.update({State.USER_PREFIX + k: v for k, v in user.items()})
    return merged


def _session(ids: _Ids, meta: dict, app: dict, user: dict, events: list) -> Session:
    s = Session(
        id=ids.session_id,
        app_name=ids.app_name,
        user_id=ids.user_id,
        state=_merge(app, user, meta["state"]),
        events=events,
        last_update_time=meta["update_time"],
    )
    s._storage_update_marker = meta["marker"]
    return s


#: Reads of a session's row and its events before get_session reads them under a lock: each
#: time, an append came in between.
READ_ATTEMPTS = 4


def _from(data: list, after: Optional[float]) -> list:
    """The events of ``data`` at or after ``after`` (all of them without it), read from the end."""
    if after is None:
        return data
    i = len(data) - 1
    while i >= 0 and data[i].get("timestamp", 0) >= after:
        i -= 1
    return data[i + 1 :]


def _agree(meta: dict, data: list, config: Optional[GetSessionConfig]) -> bool:
    """Whether events read after the session's row are the ones that row was written with: the
    last one is the row's ``last`` (the id of the event appended last; a row written before it
    was kept: its ``update_time``, the last event's timestamp). Nothing to check when no event
    was asked for (``data`` is the tail read, before ``after_timestamp`` cuts it)."""
    if config is not None and config.num_recent_events == 0:
        return True
    if "last" in meta:
        return (data[-1].get("id") if data else None) == meta["last"]
    return not data or data[-1].get("timestamp") == meta.get("update_time")


def _events_in(t: Any, ids: "_Ids", config: Optional[GetSessionConfig]) -> tuple[list, bool]:
    """:meth:`MysqlSessionService._events` in the transaction ``t`` (the whole list, or the last
    ``num_recent_events``), checked."""
    recent = config.num_recent_events if config else None
    if recent == 0:
        return [], False
    return _events_read_in(t, ids, recent, RETURNED_NOTHING), recent is None


def _delete_whole(t: Any, ids: "_Ids", maintenance: bool = False) -> None:
    """Delete a session in the transaction ``t``: its events and its row in the app's index;
    ``maintenance`` (an erasure, a prune): the index session's activity stays as it is."""
    t.delete(ids.owner, ids.events)
    t.delete(ids.owner, INDEX, ids.session_key, maintenance=maintenance)


@overload
def _strip(session_id: str) -> str: ...


@overload
def _strip(session_id: Optional[str]) -> Optional[str]: ...


def _strip(session_id: Optional[str]) -> Optional[str]:
    """A session id without surrounding blanks (a str in, a str out: the overloads say so)."""
    return session_id.strip() if session_id else session_id


class MysqlSessionService(BaseSessionService):
    """ADK's session service on a MySQL table, with ``DatabaseSessionService``'s semantics.

    ``store`` is an :class:`~mysql_state.aio.AsyncMysqlAgentStateStore` or a
    :class:`~mysql_state.store.MysqlAgentStateStore`.

    >>> service = MysqlSessionService(store)
    >>> session = asyncio.run(service.create_session(app_name="app", user_id="bob", state={"user:lang": "en"}))
    >>> asyncio.run(service.get_session(app_name="app", user_id="bob", session_id=session.id)).state
    {'user:lang': 'en'}
    >>> [s.id for s in asyncio.run(service.list_sessions(app_name="app", user_id="bob")).sessions] == [session.id]
    True
    """

    def __init__(self, store: AnyStore) -> None:
        self.store = as_async(store, "MysqlSessionService")
        self._owns_store = False
        # One asyncio.Lock per session being appended to, per event loop, with its users: the
        # appends of one process to one session take turns (as DatabaseSessionService's), so
        # two at once on one Session object do not both start from the same revision.
        self._appending: dict[tuple, list] = {}
        self._appending_guard = threading.Lock()  # the dict, from any thread or loop

    @classmethod
    def from_url(cls, url: str, *, create_tables: bool = False, **store_options: Any) -> "MysqlSessionService":
        """A service on a store of its own (``store_options`` go to ``from_url``), closed by :meth:`close`."""
        service = cls(open_store(url, create_tables, store_options))
        service._owns_store = True
        return service

    # ---- reads outside a transaction ---------------------------------------------------------

    async def _index(self, ids: _Ids, *wanted: str, then: str) -> dict[str, Any]:
        """The index rows named in ``wanted`` (absent ones left out), checked: one statement.
        Damage is a :class:`CorruptStateError` naming the session, saying ``then``."""
        with _reading(ids.app_name, then):
            rows = await self.store.get_many(ids.owner, INDEX, values=list(wanted))
        _check_rows(ids, rows, then)
        return rows

    async def _scan_index(self, ids: _Ids, prefix: str, *named: str, then: str) -> dict[str, Any]:
        """The index rows named, and those whose key starts with ``prefix`` ("" for all),
        checked as :meth:`_index` checks them.

        Listing must not read events: :meth:`~mysql_state.store.MysqlAgentStateStore.get_prefix`
        reads a primary-key range of the one index session (one statement, cost in proportion
        to the sessions listed), and the named rows (the app's and the user's state) come from
        one ``get_many``, both at once.
        """
        with _reading(ids.app_name, then):
            if not prefix:
                found = await self.store.get_prefix(ids.owner, INDEX)
            else:
                found, rows = await asyncio.gather(self.store.get_many(ids.owner, INDEX, values=list(named)),
                                                   self.store.get_prefix(ids.owner, INDEX, prefix))
                found.update(rows)
        _check_rows(ids, found, then)
        return found

    # ---- BaseSessionService --------------------------------------------------------------------

    async def create_session(
        self,
        *,
        app_name: str,
        user_id: str,
        state: Optional[dict[str, Any]] = None,
        session_id: Optional[str] = None,
    ) -> Session:
        """A new session (a generated id when none or blank); ``AlreadyExistsError`` if the id is taken.

        ``temp:`` keys of ``state`` are dropped, ``app:``/``user:`` keys go to their shared rows.
        """
        session_id = _strip(session_id) or platform_uuid.new_uuid()
        ids = _Ids(app_name, user_id, session_id)
        deltas = _session_util.extract_json_safe_state_delta(state or {})
        _check_storable(deltas, "create_session")
        meta = {"state": deltas["session"], "update_time": platform_time.get_time(), "marker": uuid.uuid4().hex,
                "last": None}

        def tx(t: Any) -> tuple[dict, dict]:
            # Read as absent, the session's row is created by a plain INSERT: of two creators
            # of one id the second fails on the duplicate key, is re-run, and finds the first's.
            if _row_in(t, ids, ids.session_key, WROTE_NOTHING) is not _ABSENT:
                raise AlreadyExistsError(f"Session with id {session_id} already exists.")
            app = self._update(t, ids, APP_KEY, deltas["app"])
            user = self._update(t, ids, ids.user_key, deltas["user"])
            t.save(ids.owner, INDEX, ids.session_key, meta)
            return app, user

        app, user = await self.store.transaction(tx)
        return _session(ids, meta, app, user, [])

    @staticmethod
    def _update(t: Any, ids: _Ids, key: str, delta: dict) -> dict:
        """Read (locked, checked) one shared state row, apply ``delta``, write it back if non-empty.

        A row read as absent is created by a plain INSERT (see ``transaction``): of two first
        writers, the second fails on the duplicate key and is re-run, reading the first's row.
        """
        current = _row_in(t, ids, key, WROTE_NOTHING)
        current = {} if current is _ABSENT else current
        if delta:
            current = {**current, **delta}
            t.save(ids.owner, INDEX, key, current)
        return current

    async def get_session(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        config: Optional[GetSessionConfig] = None,
    ) -> Optional[Session]:
        """The session with its merged state and events (None if absent).

        ``num_recent_events=k`` reads only the last ``k`` events; ``after_timestamp`` keeps the
        events from the last one older than it onwards (inclusive), reading back from the end.
        A row read that is not what the adapter writes (the session's, the app's or user's
        state, an event) is :class:`CorruptStateError` naming the session and the row.
        """
        ids = _Ids(app_name, user_id, _strip(session_id))
        # The session's row and its events are rows of two sessions of the store (two
        # statements): the events read after the row must end with the event the row says was
        # appended last, else an append came in between and both are read again.
        for _ in range(READ_ATTEMPTS):
            rows = await self._index(ids, APP_KEY, ids.user_key, ids.session_key, then=RETURNED_NOTHING)
            meta = rows.get(ids.session_key)  # checked: None only when absent
            if meta is None:
                return None
            data, whole = await self._events(ids, config)
            if _agree(meta, data, config):
                break
        else:  # appends all along: read both under the session row's lock (appends wait for it)
            def locked(t: Any) -> tuple[dict, Optional[dict], tuple[list, bool]]:
                row = _row_in(t, ids, ids.session_key, RETURNED_NOTHING)
                shared = {k: _row_in(t, ids, k, RETURNED_NOTHING) for k in (APP_KEY, ids.user_key)}
                if row is _ABSENT:
                    return {}, None, ([], False)
                return {k: v for k, v in shared.items() if v is not _ABSENT}, row, _events_in(t, ids, config)

            rows, meta, (data, whole) = await self.store.transaction(locked)
            if meta is None:
                return None
            if not _agree(meta, data, config):  # under the lock no append comes between: lost events
                sid = keys.pack(ids.owner, ids.events)
                raise CorruptStateError(
                    f"ADK session {ids.session_id!r} of app {ids.app_name!r}: its events (session {sid!r}) do not "
                    f"end with the event its row says was appended last ({meta.get('last')!r}): events were lost "
                    "behind the store's back (a store-level prune or delete of the events session does that: "
                    "prune and erase ADK sessions with MysqlSessionService.prune / forget_user / delete_session); "
                    "nothing of it was returned", sid, EVENTS)
        kept = _from(data, config.after_timestamp if config else None)
        events = _models(ids, data, len(data) - len(kept), whole, RETURNED_NOTHING)
        return _session(ids, meta, rows.get(APP_KEY) or {}, rows.get(ids.user_key) or {}, events)

    async def _events(self, ids: _Ids, config: Optional[GetSessionConfig]) -> tuple[list[dict], bool]:
        """The tail of the events that holds those ``config`` asks for, as stored (dicts, checked;
        the caller keeps those after ``after_timestamp``, :func:`_from`), and whether it is the
        whole list (else the positions of damage are counted from the end)."""
        recent = config.num_recent_events if config else None
        after = config.after_timestamp if config else None

        async def read(last: Optional[int]) -> list[dict]:
            with _reading(ids.app_name, RETURNED_NOTHING):
                data = await (self.store.get_list(ids.owner, ids.events, EVENTS, offset=-last) if last
                              else self.store.get_list(ids.owner, ids.events, EVENTS))
            return _check_events(ids, data, last is None, RETURNED_NOTHING)

        if recent == 0:
            return [], False
        if recent is not None or after is None:
            return await read(recent), recent is None
        window = 16  # read back from the end in growing windows until an older event shows up
        while True:
            data = await read(window)
            if len(data) < window or any(e["timestamp"] < after for e in data):
                return data, False
            window *= 4

    async def list_sessions(self, *, app_name: str, user_id: Optional[str] = None) -> ListSessionsResponse:
        """Sessions without events, oldest update first; every user's when ``user_id`` is None.

        A damaged row among those read is :class:`CorruptStateError` naming it and the others,
        no session listed (never a list silently short of one).
        """
        ids = _Ids(app_name, user_id or "")
        prefix = "" if user_id is None else "s:" + encode_id(user_id) + ":"
        rows = await self._scan_index(ids, prefix, APP_KEY, ids.user_key, then=LISTED_NOTHING)
        app = rows.get(APP_KEY) or {}
        sessions = []
        for key, meta in rows.items():
            if not key.startswith("s:"):
                continue
            user_part, session_part = key[2:].split(":", 1)
            owner = decode_id(user_part)
            one = _Ids(app_name, owner, decode_id(session_part))
            sessions.append(_session(one, meta, app, rows.get("u:" + user_part) or {}, []))
        sessions.sort(key=lambda s: (s.last_update_time, s.user_id, s.id))
        return ListSessionsResponse(sessions=sessions)

    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        """Remove the session and its events (one transaction); absent is fine. It reads none of
        the session's rows: the way out for a session whose rows are damaged."""
        ids = _Ids(app_name, user_id, _strip(session_id))
        await self.store.transaction(lambda t: _delete_whole(t, ids))

    # ---- the operator's calls, for ADK's layout ---------------------------------------------------
    #
    # Every ADK user of an app is one store user (``adk.<app>``) and every session's row sits in
    # the app's shared index session: the store's own forget_user(user) finds no ADK user, and
    # its prune, which deletes whole store sessions, would take a session's events and leave its
    # row. These two do it ADK's way.

    async def forget_user(self, *, app_name: str, user_id: str,
                          progress: Optional[Callable[[int, int], None]] = None) -> int:
        """Erase one ADK user of an app: every session of theirs (events and row, as
        :meth:`delete_session` deletes one; also events left without a row) and their ``user:``
        state, none of it looking like the app's activity. The app's shared ``app:`` state
        stays. Returns the sessions erased; safe to re-run (0 the second time).

        ``progress(done, total)`` (keyword-only; a plain function, called on the event loop)
        once the user's sessions are found, then after each session's transaction: ``done`` the
        sessions erased so far (the last call's is what the call returns), ``total`` those found.
        The ``user:`` state goes after the last call. A callback that raises stops the erasure
        there, the sessions before it erased (each whole): run it again to finish.

        >>> service = MysqlSessionService(store)
        >>> _ = asyncio.run(service.create_session(app_name="app", user_id="erin", state={"user:x": 1}))
        >>> asyncio.run(service.forget_user(app_name="app", user_id="erin",
        ...                                 progress=lambda done, total: print(f"{done}/{total} sessions")))
        0/1 sessions
        1/1 sessions
        1
        >>> asyncio.run(service.list_sessions(app_name="app", user_id="erin")).sessions, asyncio.run(
        ...     service.get_user_state(app_name="app", user_id="erin"))
        ([], {})
        """
        if not isinstance(user_id, str):  # a blank id is an ordinary ADK user (create_session takes it)
            raise TypeError(f"forget_user: user_id must be a str, got {type(user_id).__name__}: {user_id!r}")
        args.callback(progress, "progress")
        ids = _Ids(app_name, user_id)
        rows_prefix, events_prefix = "s:" + encode_id(user_id) + ":", "e:" + encode_id(user_id) + ":"
        sessions = {decode_id(k[len(rows_prefix):]) for k in await self.store.get_prefix(ids.owner, INDEX, rows_prefix)}
        sessions |= {decode_id(sid[len(events_prefix):]) for sid in await self.store.list_session_ids(ids.owner)
                     if sid.startswith(events_prefix)}
        if progress is not None:
            progress(0, len(sessions))
        for done, session_id in enumerate(sorted(sessions), 1):  # one transaction per session, as delete_session
            one = _Ids(app_name, user_id, session_id)
            await self.store.transaction(functools.partial(_delete_whole, ids=one, maintenance=True))
            if progress is not None:
                progress(done, len(sessions))
        await self.store.transaction(lambda t: t.delete(ids.owner, INDEX, ids.user_key, maintenance=True))
        return len(sessions)

    async def prune(self, *, app_name: str, older_than: datetime.timedelta,
                    progress: Optional[Callable[[int, int], None]] = None) -> int:
        """Delete the sessions of an app whose last event (``last_update_time``) is older than
        ``older_than`` before now, each whole as :meth:`delete_session` deletes it; the
        sessions deleted. (The store's ``prune`` works on store sessions: on ADK's layout it
        would take a session's events and leave its row, which then reads as damage.)

        A session whose row does not read (its age unknown) is never skipped nor deleted on a
        guess: :class:`CorruptStateError` names it (and every other damaged one) before any
        session is deleted. Each session goes in a transaction of its own, so a row damaged
        meanwhile stops prune with the sessions before it deleted whole and none after it: the
        error says how many; a re-run, once it is repaired or deleted, goes on where it stopped.

        ``progress(done, total)`` (keyword-only; a plain function, called on the event loop)
        once the rows are read and checked, then after each session's transaction: ``done`` the
        sessions pruned so far (the last call's is what the call returns), ``total`` those found
        idle; ``done`` ends below it by the sessions appended to or deleted meanwhile. A damaged
        row makes no call. A callback that raises stops prune there, the sessions before it
        deleted (each whole): run it again to finish.

        >>> import datetime
        >>> service = MysqlSessionService(store)
        >>> asyncio.run(service.prune(app_name="app", older_than=datetime.timedelta(days=365),
        ...                           progress=lambda done, total: print(f"{done}/{total} sessions")))
        0/0 sessions
        0
        """
        if not isinstance(older_than, datetime.timedelta) or older_than < datetime.timedelta(0):
            raise ValueError(f"prune: older_than must be a timedelta of 0 or more, got {older_than!r}")
        args.callback(progress, "progress")
        cutoff = platform_time.get_time() - older_than.total_seconds()
        ids = _Ids(app_name, "")
        rows = await self._scan_index(ids, "s:", then=PRUNED_NOTHING)  # every row checked before any delete
        idle = sorted(key for key, meta in rows.items() if meta["update_time"] < cutoff)
        gone = 0
        if progress is not None:
            progress(0, len(idle))
        for key in idle:
            one = _Ids(app_name, *_session_of(key))
            then = (f"it was not pruned, nor any session after it in key order ({gone} before it were, each whole): "
                    "prune again once it is repaired or deleted")

            def tx(t: Any, one: _Ids = one, then: str = then) -> bool:  # read again, locked: an append keeps it
                now = _row_in(t, one, one.session_key, then)
                if now is _ABSENT or now["update_time"] >= cutoff:
                    return False
                _delete_whole(t, one, maintenance=True)
                return True

            gone += bool(await self.store.transaction(tx))
            if progress is not None:
                progress(gone, len(idle))
        return gone

    async def get_user_state(self, *, app_name: str, user_id: str) -> dict[str, Any]:
        """The user's ``user:`` state, keys without the prefix ({} when none)."""
        ids = _Ids(app_name, user_id)
        rows = await self._index(ids, ids.user_key, then=RETURNED_NOTHING)
        return dict(rows.get(ids.user_key) or {})

    @contextlib.asynccontextmanager
    async def _turn_of(self, ids: _Ids) -> AsyncIterator[None]:
        """This process's turn to append to one session (see ``_appending``)."""
        key = (asyncio.get_running_loop(), ids.owner, ids.session_key)
        with self._appending_guard:
            entry = self._appending.setdefault(key, [asyncio.Lock(), 0])
            entry[1] += 1
        try:
            async with entry[0]:
                yield
        finally:
            with self._appending_guard:
                entry[1] -= 1
                if entry[1] == 0:
                    self._appending.pop(key, None)

    async def append_event(self, session: Session, event: Event) -> Event:
        """Persist ``event`` and its state delta in one transaction; update ``session`` in memory.

        Partial events are not stored; ``temp:`` keys reach only the in-memory state.
        ``SessionNotFoundError`` when the session was deleted, ``StaleSessionError`` when it
        was changed in storage since ``session`` was loaded (as ``DatabaseSessionService``).
        Appends of this process to one session take turns, so two at once on one ``Session``
        object both land. An event whose id the session already holds (in ``session`` as
        loaded, or stored last) is stored once: an equal one again (a retry) changes nothing
        and is returned, another event with that id raises ``AlreadyExistsError``.
        """
        if event.partial:
            return event
        self._apply_temp_state(session, event)
        event = self._trim_temp_delta_state(event)
        ids = _Ids(session.app_name, session.user_id, session.id)
        deltas = _session_util.extract_json_safe_state_delta(event.actions.state_delta or {})
        _check_storable(deltas, "append_event")
        data = event.model_dump(exclude_none=True, mode="json")
        new_marker = uuid.uuid4().hex
        async with self._turn_of(ids):
            # Read under the turn: an append just before, on this object, moved them on.
            marker, seen_time = session._storage_update_marker, session.last_update_time
            last_seen = session.events[-1].id if session.events else None
            held = next((e for e in reversed(session.events) if e.id == event.id), None)

            def stored_last(t: Any) -> Optional[dict]:
                """The event stored last (None: no event), checked as get_session would read it."""
                tail = _events_read_in(t, ids, 1, WROTE_NOTHING)
                _models(ids, tail, 0, False, WROTE_NOTHING)
                return tail[-1] if tail else None

            def tx(t: Any) -> Optional[dict]:
                meta = _row_in(t, ids, ids.session_key, WROTE_NOTHING)
                if meta is _ABSENT:
                    raise SessionNotFoundError(f"Session {session.id} not found.")
                if marker is not None:
                    if marker != meta["marker"]:
                        raise StaleSessionError(STALE_MESSAGE)
                elif meta["update_time"] > seen_time:  # a session object without a marker
                    tail = stored_last(t)
                    if (tail["id"] if tail else None) != last_seen:
                        raise StaleSessionError(STALE_MESSAGE)
                if held is not None or meta.get("last") == data["id"]:
                    stored = held.model_dump(exclude_none=True, mode="json") if held is not None else stored_last(t)
                    if stored == data:
                        return None  # delivered again: stored once, nothing changes
                    raise AlreadyExistsError(f"Event with id {event.id} already exists in session {session.id}; "
                                             "nothing was written.")
                for scope, key in (("app", APP_KEY), ("user", ids.user_key)):  # always app first: no deadlock
                    if deltas[scope]:
                        self._update(t, ids, key, deltas[scope])
                new = {
                    "state": {**meta["state"], **deltas["session"]},
                    "update_time": event.timestamp,
                    "marker": new_marker,
                    "last": data["id"],  # the event appended last: a read of the events checks it
                }
                t.save(ids.owner, INDEX, ids.session_key, new)
                try:
                    t.append_list(ids.owner, ids.events, EVENTS, [data])
                except TypeError as exc:  # an integer beyond 64 bits in the event: named as ADK's
                    raise TypeError(f"append_event: event {event.id!r} of session {session.id!r} cannot be stored "
                                    f"as JSON ({exc.__cause__ or exc}); nothing was written") from exc
                return new

            new = await self.store.transaction(tx)
            if new is None:
                return event
            session.last_update_time = new["update_time"]
            session._storage_update_marker = new["marker"]
            return self._commit_event_to_session(session, event)

    async def close(self) -> None:
        """Close the store if :meth:`from_url` made it; a store that was passed in stays open."""
        if self._owns_store:
            await self.store.aclose()

    async def __aenter__(self) -> "MysqlSessionService":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
