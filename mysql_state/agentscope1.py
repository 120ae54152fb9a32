"""AgentScope 1.0.x adapters: a ``SessionBase`` and a working memory kept in this store.

Install with ``pip install 'mysql-state[agentscope1]'`` (AgentScope 1.0.x cannot share an
environment with 2.x: both are imported as ``agentscope``).

* :class:`MysqlSession` behaves like AgentScope's ``JSONSession`` (one saved state per
  ``(user_id, session_id)`` holding the modules passed to the last save), except that every
  memory inside it (a state dict with ``content`` and ``_compressed_summary``) is stored as a
  list, one row per message, so a save writes only the messages that changed.
* :class:`MysqlMemory` is AgentScope's ``InMemoryMemory`` (same semantics, it *is* one) that
  writes every change through to the store: ``add`` appends rows, a mark update rewrites only
  the messages it touched, and a new process picks the memory up where it was. Every call
  reads the stored memory first (only the rows added since this object's last read travel),
  and a change is written as a compare-and-set on the list's version, done again on what is
  stored now when another writer came first: two objects or processes on one memory lose
  nothing of each other's, as with AgentScope's SQL memory.

A turn of a real agent (``model`` is any AgentScope 1.x chat model; the test gives an offline
one that answers "hello"); its memory is written through, one row per message:

>>> from agentscope.agent import ReActAgent
>>> from agentscope.formatter import OpenAIChatFormatter
>>> memory = MysqlMemory(store, user_id="alice", session_id="chat-1")
>>> agent = ReActAgent(name="bot", sys_prompt="Be brief.", model=model, formatter=OpenAIChatFormatter(),
...                    memory=memory)
>>> agent.set_console_output_enabled(False)
>>> asyncio.run(agent(Msg("alice", "hi", "user"))).get_text_content()
'hello'
>>> store.list_length("alice", "chat-1", memory.key)
2
>>> asyncio.run(MysqlSession(store).save_session_state("chat-1", user_id="alice", agent=agent))
"""

from __future__ import annotations

import asyncio
import random
from typing import Any, Awaitable, Callable, Optional, TypeVar

try:
    from agentscope.memory import InMemoryMemory
    from agentscope.message import Msg
    from agentscope.module import StateModule
    from agentscope.session import SessionBase
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "mysql_state.agentscope1 needs AgentScope 1.0.x: pip install 'mysql-state[agentscope1]'"
    ) from exc

from . import keys, serde
from ._adapt import as_async
from .aio import AsyncMysqlAgentStateStore
from .errors import ConflictError, CorruptStateError, StaleStateError
from .results import SaveReport
from .store import MysqlAgentStateStore

T = TypeVar("T")
#: Times a change is applied again on the stored memory when another writer came first.
CHANGE_ATTEMPTS = 12
#: The first wait (seconds) before a change is applied again; each further wait may double,
#: up to ``CHANGE_PAUSE_MAX``, and is drawn at random below that bound ("full jitter"), so
#: writers that collided do not collide again in lock step.
CHANGE_PAUSE = 0.005
CHANGE_PAUSE_MAX = 0.25
#: Reads of a session's state (with its memories) before a load gives up: each saw another state.
LOAD_ATTEMPTS = 8

__all__ = ["MysqlSession", "MysqlMemory", "SESSION_KEY"]

#: The value key of a saved session: ``{module name: state dict}`` with memories swapped out.
SESSION_KEY = "agentscope1.session"
_LIST_REF = "__mysql_state_list__"
#: A module's own dict that looks like a reference (its one key is ``_LIST_REF`` or this) is
#: saved wrapped in ``{_ESCAPED: dict}``, so it loads back as the dict it was.
_ESCAPED = "__mysql_state_escaped__"


def _user(user_id: str) -> Optional[str]:
    return user_id or None  # JSONSession's "" (no user) is the store's anonymous user


def _check_plain(obj: Any, what: str) -> None:
    """Refuse, as ``json.dumps`` (``JSONSession``) does, a value JSON has no type for, which
    orjson would store as a string and read back as one (``datetime``, ``UUID``...)."""
    bad = serde.not_plain_json(obj)
    if bad is not serde.NOTHING:
        raise TypeError(f"{what} holds a {type(bad).__name__}, which JSON has no type for (json.dumps refuses it; "
                        "stored it would read back as a string); nothing was written")


def _is_memory(d: Any) -> bool:
    return isinstance(d, dict) and isinstance(d.get("content"), list) and "_compressed_summary" in d


class MysqlSession(SessionBase):
    """AgentScope 1.x session state in MySQL, with ``JSONSession``'s behaviour.

    ``save_session_state`` replaces what was saved for the session by the modules passed now,
    in one transaction (a state that cannot be stored leaves the saved one as it was);
    ``load_session_state`` loads the saved modules that are passed (strict, as JSONSession),
    and raises ``ValueError`` for a missing session when ``allow_not_exist`` is False.

    >>> session = MysqlSession(store)
    >>> notes = InMemoryMemory()
    >>> asyncio.run(notes.add(Msg("alice", "hi", "user")))
    >>> asyncio.run(session.save_session_state("session-1", user_id="alice", notes=notes))
    >>> restored = InMemoryMemory()
    >>> asyncio.run(session.load_session_state("session-1", user_id="alice", notes=restored))
    >>> [m.content for m in asyncio.run(restored.get_memory())]
    ['hi']
    """

    def __init__(self, store: AsyncMysqlAgentStateStore | MysqlAgentStateStore, *, key: str = SESSION_KEY) -> None:
        self.store = as_async(store, type(self).__name__)
        self.key = key

    def _list_key(self, path: tuple[str, ...]) -> str:
        """The list key of the memory at ``path`` (module name, then state dict keys): the parts
        joined by ``.``, each with ``%`` and ``.`` percent-encoded, so that a module named
        ``"a.b"`` and the memory ``b`` inside module ``a`` get two keys (names without either
        character keep the keys they always had)."""
        return ".".join((self.key, *(p.replace("%", "%25").replace(".", "%2E") for p in path)))

    async def save_session_state(self, session_id: str, user_id: str = "", **state_modules_mapping: StateModule) -> None:
        """Save the modules' ``state_dict()``; memories go to lists, written incrementally.

        >>> session, notes = MysqlSession(store), InMemoryMemory()
        >>> asyncio.run(notes.add([Msg("alice", "hi", "user"), Msg("bot", "hello", "assistant")]))
        >>> asyncio.run(session.save_session_state("session-2", user_id="alice", notes=notes))
        >>> store.list_length("alice", "session-2", session.key + ".notes")  # the memory: a list
        2
        """
        uid = _user(user_id)
        lists: dict[str, list] = {}

        def lift(obj: Any, path: tuple[str, ...]) -> Any:
            if _is_memory(obj):  # its content to a list; its other keys lifted as any dict's
                key = self._list_key(path)
                lists[key] = obj["content"]
                return {**{k: lift(v, (*path, str(k))) for k, v in obj.items() if k != "content"},
                        "content": {_LIST_REF: key}}
            if isinstance(obj, dict):
                lifted = {k: lift(v, (*path, str(k))) for k, v in obj.items()}
                return {_ESCAPED: lifted} if set(obj) in ({_LIST_REF}, {_ESCAPED}) else lifted
            return obj

        dicts = {name: module.state_dict() for name, module in state_modules_mapping.items()}
        for name, state in dicts.items():  # JSONSession's json.dumps refuses these: so does this
            _check_plain(state, f"save_session_state: module {name!r} of session {session_id!r}")
        states = {name: lift(state, (name,)) for name, state in dicts.items()}

        def save(tx: Any) -> None:  # one transaction: the whole state, or (an error) nothing of it
            previous = tx.get(uid, session_id, self.key)
            for key, items in lists.items():
                tx.save_list(uid, session_id, key, items)
            tx.save(uid, session_id, self.key, {"states": states, "lists": sorted(lists)})
            for gone in set((previous or {}).get("lists", ())) - set(lists):
                tx.delete(uid, session_id, gone)

        await self.store.transaction(save)

    async def load_session_state(
        self,
        session_id: str,
        user_id: str = "",
        allow_not_exist: bool = True,
        **state_modules_mapping: StateModule,
    ) -> None:
        """Load the saved state into the modules passed (by name).

        >>> session, notes = MysqlSession(store), InMemoryMemory()
        >>> asyncio.run(session.load_session_state("session-3", user_id="alice", notes=notes))  # none: fine
        >>> asyncio.run(session.load_session_state("session-3", user_id="alice", allow_not_exist=False, notes=notes))
        Traceback (most recent call last):
            ...
        ValueError: Failed to load session state for session 'session-3' (user 'alice'): it does not exist.
        """
        uid = _user(user_id)
        # The state and its memories from ONE statement (one snapshot, as the save is one
        # transaction): the state names its lists, so they are read with it again until the
        # state read names the lists read with it (a save in between changed them).
        saved, lists = await self.store.get(uid, session_id, self.key), {}
        for _ in range(LOAD_ATTEMPTS):
            names = sorted((saved or {}).get("lists", ()))
            if not names:
                break
            found = await self.store.get_many(uid, session_id, values=[self.key], lists=names)
            saved, lists = found.get(self.key), found
            if saved is None or sorted(saved.get("lists", ())) == names:
                break
        else:
            raise ConflictError(f"load_session_state: the state of session {session_id!r} (user {user_id!r}) "
                                f"changed between each of {LOAD_ATTEMPTS} reads; try again")
        sid = keys.pack(uid, session_id)
        if saved is None:
            if await self.store.key_kind(uid, session_id, self.key) is not None:  # a row holding null: damage
                raise CorruptStateError(f"AgentScope session state {self.key!r} of session {sid!r} holds null, "
                                        "not the saved state's map", sid, self.key)
            if allow_not_exist:
                return
            raise ValueError(
                f"Failed to load session state for session {session_id!r} (user {user_id!r}): it does not exist."
            )
        listed = saved.get("lists", []) if isinstance(saved, dict) else None
        if not isinstance(saved, dict) or not isinstance(saved.get("states"), dict) or not isinstance(listed, list) \
                or not all(isinstance(n, str) for n in listed):
            raise CorruptStateError(f"AgentScope session state {self.key!r} of session {sid!r} is not what a save "
                                    "writes (a map of 'states' and the names of its 'lists'); nothing was loaded",
                                    sid, self.key)
        states = saved["states"]

        def lower(obj: Any) -> Any:
            if isinstance(obj, dict):
                if set(obj) == {_LIST_REF}:
                    if obj[_LIST_REF] not in lists or obj[_LIST_REF] not in listed:  # a list the state names, gone
                        raise CorruptStateError(f"AgentScope session state {self.key!r} of session {sid!r} refers to "
                                                f"the list {obj[_LIST_REF]!r}, which is not stored; nothing was "
                                                "loaded", sid, str(obj[_LIST_REF]))
                    return lists[obj[_LIST_REF]]
                if set(obj) == {_ESCAPED} and isinstance(obj[_ESCAPED], dict):  # a module's own dict
                    return {k: lower(v) for k, v in obj[_ESCAPED].items()}
                return {k: lower(v) for k, v in obj.items()}
            return obj

        lowered = {name: lower(states[name]) for name in state_modules_mapping if name in states}  # all, first
        for name, module in state_modules_mapping.items():
            if name in lowered:
                module.load_state_dict(lowered[name])


def _message_row(msg: Msg) -> dict:
    """``msg.to_dict()`` with the message's ``invocation_id`` (the model response's id a
    ReActAgent sets), which ``to_dict`` leaves out and ``Msg.from_dict`` reads back: the memory
    is read again at every call, so without it the id was gone right after the write."""
    # (ignores: mypy sees the agentscope installed, 2.x for the agentscope extra, whose Msg has
    # neither; this module is for 1.x's, which has both.)
    row = msg.to_dict()  # type: ignore[attr-defined]
    if getattr(msg, "invocation_id", None) is not None:
        row["invocation_id"] = msg.invocation_id  # type: ignore[attr-defined]
    return row


class MysqlMemory(InMemoryMemory):
    """``InMemoryMemory`` whose content is written through to the store, one row per message.

    The list at ``key`` holds ``[msg.to_dict(), marks]`` per message (the layout of
    ``InMemoryMemory.state_dict()``, the message's ``invocation_id`` kept in its dict); the
    compressed summary is the value ``key + ".summary"``.
    Every call reads the stored memory (one statement; only the rows added since this
    object's last read travel), so a new process, or another object on the same session,
    continues the conversation as it is stored. A change is applied to what is stored and
    written as a compare-and-set on the list's version; when another writer came first it is
    applied again to what that writer left, after a short random wait that grows with each
    collision (at most ``CHANGE_ATTEMPTS`` times, then :class:`~mysql_state.StaleStateError`).
    A change that fails (a message that cannot be stored) leaves the memory as it was: nothing
    of it stays behind to block the next one.

    >>> memory = MysqlMemory(store, user_id="alice", session_id="memory-1")
    >>> asyncio.run(memory.add(Msg("alice", "hi", "user")))
    >>> later = MysqlMemory(store, user_id="alice", session_id="memory-1")  # e.g. in a new process
    >>> asyncio.run(later.size())
    1
    """

    def __init__(
        self,
        store: AsyncMysqlAgentStateStore | MysqlAgentStateStore,
        session_id: str,
        user_id: Optional[str] = None,
        *,
        key: str = "agentscope1.memory",
    ) -> None:
        super().__init__()
        self.store = as_async(store, type(self).__name__)
        self.user_id = user_id or None
        self.session_id = session_id
        self.key = key
        self._version = 0  # the stored list's version when last read or written (0: none)
        self._pending_content = False  # content set by load_state_dict, not written yet
        self._pending_summary = False
        self.last_plan: Optional[SaveReport] = None  # what the last write did (kind, rows written), for callers and tests

    @property
    def summary_key(self) -> str:
        return self.key + ".summary"

    # ---- store I/O ---------------------------------------------------------------------------

    async def _load(self) -> None:
        """The stored memory and summary, with the list's version (0: none stored), in one
        statement; not while this object holds content not written yet (``load_state_dict``):
        that content is what the next write stores."""
        if self._pending_content:
            return
        found = await self.store.get_many(self.user_id, self.session_id, values=[self.summary_key],
                                          lists=[self.key], versioned=True)
        stored, summary = found.get(self.key), found.get(self.summary_key)
        self._version = stored.version if stored is not None else 0
        InMemoryMemory.load_state_dict(self, {"content": stored.value if stored is not None else [],
                                              "_compressed_summary": summary.value if summary is not None else ""},
                                       strict=False)

    def _snapshot(self) -> tuple:
        return [(msg, list(marks)) for msg, marks in self.content], self._compressed_summary

    def _restore(self, taken: tuple) -> None:
        self.content, self._compressed_summary = [(msg, list(marks)) for msg, marks in taken[0]], taken[1]

    async def _change(self, apply: Callable[[], Awaitable[T]], wrote: Callable[[T], bool] = lambda _: True) -> T:
        """``apply`` (an ``InMemoryMemory`` method on the content) to the stored memory, written
        when ``wrote(result)``: a compare-and-set on the list's version, applied again to what
        another writer left; on any error the content is as it was before the call."""
        stale: Optional[StaleStateError] = None
        for attempt in range(CHANGE_ATTEMPTS):
            if attempt:  # writers that collided wait apart: without it they collide again in step
                await asyncio.sleep(random.uniform(0, min(CHANGE_PAUSE_MAX, CHANGE_PAUSE * 2 ** (attempt - 1))))
            await self._load()
            taken = self._snapshot()
            try:
                result = await apply()
                if wrote(result):
                    await self._flush(expected=None if self._pending_content else self._version)
                return result
            except StaleStateError as exc:
                self._restore(taken)  # another writer came first: read what it left, apply again
                stale = exc
            except BaseException:
                self._restore(taken)
                raise
        assert stale is not None
        raise stale

    async def _flush(self, expected: Optional[int] = None) -> None:
        rows = [[_message_row(msg), list(marks)] for msg, marks in self.content]
        if self._pending_content:  # set by load_state_dict: not checked by add
            _check_plain(rows, f"MysqlMemory {self.key!r} of session {self.session_id!r}")
        report = await self.store.save_list_report(self.user_id, self.session_id, self.key, rows,
                                                   expected_version=expected)
        self.last_plan, self._version, self._pending_content = report, report.version, False
        if self._pending_summary:
            await self.store.save(self.user_id, self.session_id, self.summary_key, self._compressed_summary)
            self._pending_summary = False

    async def reload(self) -> None:
        """Drop the local copy and read the stored memory again.

        >>> memory = MysqlMemory(store, user_id="alice", session_id="reload-1")
        >>> other = MysqlMemory(store, user_id="alice", session_id="reload-1")
        >>> asyncio.run(other.add(Msg("alice", "hi", "user")))
        >>> asyncio.run(memory.size()), asyncio.run(other.size())
        (1, 1)
        >>> asyncio.run(other.add(Msg("alice", "more", "user")))
        >>> asyncio.run(memory.reload())
        >>> asyncio.run(memory.size())
        2
        """
        self._pending_content = self._pending_summary = False  # the stored memory wins
        await self._load()

    # ---- MemoryBase --------------------------------------------------------------------------

    async def add(self, memories: Msg | list[Msg] | None, marks: str | list[str] | None = None, **kwargs: Any) -> None:
        """Add messages (skipping ids already present, as ``InMemoryMemory``); appends rows.

        >>> memory = MysqlMemory(store, user_id="alice", session_id="add-1")
        >>> asyncio.run(memory.add([Msg("alice", "hi", "user"), Msg("bot", "hello", "assistant")], marks="hint"))
        >>> memory.last_plan.kind, memory.last_plan.rows_written
        ('rewrite', 2)
        >>> asyncio.run(memory.add(Msg("alice", "bye", "user")))
        >>> memory.last_plan.kind, memory.last_plan.rows_written
        ('append', 1)
        """
        for msg in memories if isinstance(memories, list) else [memories]:
            if isinstance(msg, Msg):  # anything else: InMemoryMemory's own checks
                _check_plain(_message_row(msg), f"MysqlMemory.add: message {msg.id!r}")
        await self._change(lambda: super(MysqlMemory, self).add(memories, marks, **kwargs))

    async def delete(self, msg_ids: list[str], **kwargs: Any) -> int:
        """Delete messages by id; returns how many.

        >>> memory, msg = MysqlMemory(store, user_id="alice", session_id="delete-1"), Msg("alice", "hi", "user")
        >>> asyncio.run(memory.add([msg, Msg("alice", "more", "user")]))
        >>> asyncio.run(memory.delete([msg.id]))
        1
        >>> store.list_length("alice", "delete-1", memory.key)
        1
        """
        return await self._change(lambda: super(MysqlMemory, self).delete(msg_ids, **kwargs), bool)

    async def delete_by_mark(self, mark: str | list[str], *args: Any, **kwargs: Any) -> int:
        """Delete the messages carrying any of the marks; returns how many.

        >>> memory = MysqlMemory(store, user_id="alice", session_id="delete-mark-1")
        >>> asyncio.run(memory.add(Msg("alice", "hi", "user"), marks="hint"))
        >>> asyncio.run(memory.add(Msg("alice", "more", "user")))
        >>> asyncio.run(memory.delete_by_mark("hint"))
        1
        """
        return await self._change(lambda: super(MysqlMemory, self).delete_by_mark(mark, *args, **kwargs), bool)

    async def update_messages_mark(
        self, new_mark: str | None, old_mark: str | None = None, msg_ids: list[str] | None = None
    ) -> int:
        """Add/replace/remove a mark; only the messages it changed are rewritten.

        >>> memory, msg = MysqlMemory(store, user_id="alice", session_id="mark-1"), Msg("alice", "hi", "user")
        >>> asyncio.run(memory.add([msg, Msg("alice", "more", "user")]))
        >>> asyncio.run(memory.update_messages_mark("compressed", msg_ids=[msg.id]))
        1
        >>> memory.last_plan.rows_written  # the one message whose mark changed
        1
        """
        return await self._change(lambda: super(MysqlMemory, self).update_messages_mark(new_mark, old_mark, msg_ids))

    async def size(self) -> int:
        """Number of messages.

        >>> memory = MysqlMemory(store, user_id="alice", session_id="size-1")
        >>> asyncio.run(memory.add([Msg("alice", "hi", "user"), Msg("bot", "hello", "assistant")]))
        >>> asyncio.run(memory.size())
        2
        """
        await self._load()
        return await super().size()

    async def clear(self) -> None:
        """Remove every message (the summary stays, as in ``InMemoryMemory``).

        >>> memory = MysqlMemory(store, user_id="alice", session_id="clear-1")
        >>> asyncio.run(memory.add(Msg("alice", "hi", "user")))
        >>> asyncio.run(memory.clear())
        >>> store.list_length("alice", "clear-1", memory.key)
        0
        """
        await self._change(lambda: super(MysqlMemory, self).clear())

    async def get_memory(
        self, mark: str | None = None, exclude_mark: str | None = None, prepend_summary: bool = True, **kwargs: Any
    ) -> list[Msg]:
        """The messages, filtered by marks, with the summary first (as ``InMemoryMemory``).

        >>> memory = MysqlMemory(store, user_id="alice", session_id="get-1")
        >>> asyncio.run(memory.add(Msg("alice", "old", "user"), marks="compressed"))
        >>> asyncio.run(memory.add(Msg("alice", "new", "user")))
        >>> [m.content for m in asyncio.run(memory.get_memory(exclude_mark="compressed"))]
        ['new']
        """
        await self._load()
        return await super().get_memory(mark, exclude_mark, prepend_summary, **kwargs)

    async def update_compressed_summary(self, summary: str) -> None:
        """Set the compressed summary (one value row).

        >>> memory = MysqlMemory(store, user_id="alice", session_id="summary-1")
        >>> asyncio.run(memory.update_compressed_summary("we talked about MySQL"))
        >>> store.get("alice", "summary-1", memory.summary_key)
        'we talked about MySQL'
        """
        await self._load()
        await super().update_compressed_summary(summary)
        await self.store.save(self.user_id, self.session_id, self.summary_key, summary)

    def state_dict(self) -> dict:
        """``InMemoryMemory.state_dict()`` of the content last read or written, each message's
        ``invocation_id`` kept in its dict (``Msg.to_dict`` leaves it out; ``Msg.from_dict``,
        hence ``load_state_dict`` of any memory, reads it back).

        >>> memory = MysqlMemory(store, user_id="alice", session_id="state-1")
        >>> asyncio.run(memory.add(Msg("bot", "hi", "assistant", invocation_id="resp_1")))
        >>> memory.state_dict()["content"][0][0]["invocation_id"]
        'resp_1'
        """
        return {**super().state_dict(), "content": [[_message_row(msg), marks] for msg, marks in self.content]}

    def load_state_dict(self, state_dict: dict, strict: bool = True) -> None:
        """Replace the content (e.g. from a session); written to the store on the next change
        or :meth:`flush`.

        >>> source = InMemoryMemory()
        >>> asyncio.run(source.add(Msg("alice", "hi", "user")))
        >>> memory = MysqlMemory(store, user_id="alice", session_id="load-1")
        >>> memory.load_state_dict(source.state_dict())
        >>> store.list_length("alice", "load-1", memory.key)  # not written yet
        0
        >>> asyncio.run(memory.flush())
        >>> store.list_length("alice", "load-1", memory.key)
        1
        """
        super().load_state_dict(state_dict, strict)
        self._pending_content = self._pending_summary = True

    async def flush(self) -> None:
        """Write the current content and summary to the store now.

        >>> memory = MysqlMemory(store, user_id="alice", session_id="flush-1")
        >>> asyncio.run(memory.flush())  # an empty memory: an empty list and the summary ""
        >>> store.get("alice", "flush-1", memory.summary_key)
        ''
        """
        await self._load()
        self._pending_summary = True
        await self._flush(expected=None if self._pending_content else self._version)
