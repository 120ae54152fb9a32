"""AgentScope 2.x adapters: an agent's ``AgentState`` kept in this store.

Install with ``pip install 'mysql-state[agentscope]'``; the core package never imports this.

The state is split the way production platforms do: ``context`` (the conversation) is a list,
one row per message, saved incrementally by the store's change detection (which compares the
messages' JSON, so in-place growth of the last message, a resumed reply under the same id, or a
compression that replaces the context with its tail are all found from the content, never from
``summary``); every other field is one value, overwritten on each save.

A turn: load the state, let the agent reply, save (``model`` is any AgentScope chat model). A
new agent on the loaded state, as after a restart, writes only the new turn's messages:

>>> from agentscope.agent import Agent
>>> from agentscope.message import UserMsg
>>> repo = AgentStateRepository(store)
>>> async def turn(text):
...     agent = Agent(name="bot", system_prompt="Be brief.", model=model,
...                   state=await repo.load("alice", "chat-1"))
...     await agent.reply(UserMsg("alice", text))
...     return await repo.save("alice", "chat-1", agent.state)
>>> print(asyncio.run(turn("hi")))
rewrite: 2 of 2 message rows + 1 state row
>>> print(asyncio.run(turn("and again")))
append: 2 of 4 message rows + 1 state row
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional, Union

try:
    from agentscope.state import AgentState
    from pydantic import ValidationError
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "mysql_state.agentscope needs AgentScope 2.x: pip install 'mysql-state[agentscope]'"
    ) from exc

from . import keys
from ._adapt import as_async
from .aio import AsyncMysqlAgentStateStore
from .errors import CorruptStateError
from .results import SaveReport as ListSaveReport
from .store import MysqlAgentStateStore

if TYPE_CHECKING:  # pragma: no cover
    from agentscope.app.storage import SessionRecord

__all__ = ["AgentStateRepository", "StateSaveReport", "SaveReport", "MysqlStateAppStorage", "CONTEXT_KEY", "STATE_KEY"]

#: The list key holding ``AgentState.context``, one message per row.
CONTEXT_KEY = "agentscope.context"
#: The value key holding every other field of the ``AgentState``.
STATE_KEY = "agentscope.state"


@dataclass(frozen=True)
class StateSaveReport:
    """What :meth:`AgentStateRepository.save` wrote (the list's part is the store's
    :class:`mysql_state.SaveReport`).

    ``context`` is the store's plan for the message list (``kind`` is ``unchanged``,
    ``append``, ``suffix``, ``rewrite`` or ``clear``; ``rows_written`` the message rows);
    the rest of the state is always one row.
    """

    context: ListSaveReport
    messages: int
    #: The state's new version: pass it as ``expected_version`` to the next save.
    version: int = 0

    @property
    def rows_written(self) -> int:
        """Message rows plus the one row of the rest (the list's hash row not counted)."""
        return self.context.rows_written + 1

    def __str__(self) -> str:
        c = self.context
        return f"{c.kind}: {c.rows_written} of {self.messages} message rows + 1 state row"


#: The name :class:`StateSaveReport` had before the store's own :class:`mysql_state.SaveReport` existed.
SaveReport = StateSaveReport


class AgentStateRepository:
    """Load and save an AgentScope 2.x ``AgentState`` per ``(user_id, session_id)``.

    ``store`` is an :class:`AsyncMysqlAgentStateStore` (a sync store is wrapped). The
    saved state loads back equal: ``model_dump(mode="json")`` is identical.

    >>> repo = AgentStateRepository(store)  # a sync store is wrapped
    >>> state = asyncio.run(repo.load("alice", "repo-1"))
    >>> asyncio.run(repo.save("alice", "repo-1", state)).version
    1
    >>> asyncio.run(repo.load("alice", "repo-1")).model_dump(mode="json") == state.model_dump(mode="json")
    True
    """

    def __init__(
        self,
        store: AsyncMysqlAgentStateStore | MysqlAgentStateStore,
        *,
        context_key: str = CONTEXT_KEY,
        state_key: str = STATE_KEY,
    ) -> None:
        self.store = as_async(store, "AgentStateRepository")
        self.context_key = context_key
        self.state_key = state_key

    async def load(self, user_id: Optional[str], session_id: str) -> AgentState:
        """The stored state, or a fresh ``AgentState(session_id=session_id)``.

        >>> repo = AgentStateRepository(store)
        >>> state = asyncio.run(repo.load("alice", "load-1"))  # nothing saved yet: a fresh state
        >>> state.session_id, state.context
        ('load-1', [])
        """
        return (await self.load_versioned(user_id, session_id))[0]

    async def load_versioned(self, user_id: Optional[str], session_id: str) -> tuple[AgentState, int]:
        """The state and its version (0 for a fresh state), read in ONE statement (one
        snapshot: never the new context with the old rest); save with ``expected_version``.

        >>> repo = AgentStateRepository(store)
        >>> async def edit():
        ...     state, version = await repo.load_versioned("alice", "versioned-1")
        ...     state.summary = "greeted"
        ...     return (await repo.save("alice", "versioned-1", state, expected_version=version)).version
        >>> asyncio.run(edit()), asyncio.run(edit())
        (1, 2)
        """
        found = await self.store.get_many(
            user_id, session_id, values=[self.state_key], lists=[self.context_key], versioned=True
        )
        if (self.state_key in found) != (self.context_key in found):  # a save writes both, in one transaction
            lost = self.context_key if self.state_key in found else self.state_key
            sid = keys.pack(user_id, session_id)
            raise CorruptStateError(
                f"AgentScope state of session {sid!r} is half there: {lost!r} is missing while the other key "
                "is stored (a save writes both in one transaction: it was lost behind the store's back); "
                "nothing of it was returned", sid, lost)
        sid = keys.pack(user_id, session_id)
        if self.state_key in found:
            rest, version = found[self.state_key]
            if not isinstance(rest, dict):  # a save writes a map: anything else was put there by hand
                raise CorruptStateError(f"AgentScope state of session {sid!r} cannot be read: {self.state_key!r} "
                                        f"holds {type(rest).__name__} {str(rest)[:40]!r}, not the state's map",
                                        sid, self.state_key)
        else:
            rest, version = {}, 0
        context = found[self.context_key].value if self.context_key in found else []
        if not version and not context:
            return AgentState(session_id=session_id), version
        data: dict[str, Any] = {"session_id": session_id, **rest}
        data["context"] = context
        try:
            return AgentState.model_validate(data), version
        except ValidationError as exc:  # rows of another shape than a save writes: damage, named
            loc: tuple[Union[int, str], ...] = exc.errors()[0].get("loc", ()) if exc.errors() else ()
            key = self.context_key if loc[:1] == ("context",) else self.state_key
            index = loc[1] if key == self.context_key and len(loc) > 1 and isinstance(loc[1], int) else None
            raise CorruptStateError(f"AgentScope state of session {sid!r} cannot be read as an AgentState "
                                    f"({exc.error_count()} problem(s), the first at {'.'.join(map(str, loc))}: "
                                    f"{exc.errors()[0].get('msg', '')})", sid, key, index) from exc

    async def save(
        self, user_id: Optional[str], session_id: str, state: AgentState, *, expected_version: Optional[int] = None
    ) -> StateSaveReport:
        """Store ``state``: changed or new messages only, plus the rest as one row.

        With ``expected_version`` (from :meth:`load_versioned` or the last report's
        ``version``) it raises :class:`StaleStateError` and writes nothing when another save
        landed in between; without it the last writer wins.

        >>> from agentscope.message import UserMsg
        >>> repo = AgentStateRepository(store)
        >>> state = asyncio.run(repo.load("alice", "save-1"))
        >>> state.context.append(UserMsg("alice", "hi"))
        >>> report = asyncio.run(repo.save("alice", "save-1", state))
        >>> report.context.kind, report.context.rows_written
        ('rewrite', 1)
        >>> state.context.append(UserMsg("alice", "and more"))
        >>> report = asyncio.run(repo.save("alice", "save-1", state))
        >>> report.context.kind, report.context.rows_written
        ('append', 1)
        """
        if not isinstance(state, AgentState):
            raise TypeError(f"state must be an agentscope AgentState, got {type(state).__name__}")
        data = state.model_dump(mode="json")
        context = data.pop("context")
        if expected_version is not None and (not isinstance(expected_version, int) or isinstance(expected_version, bool)):
            raise TypeError(f"expected_version must be an int, got {type(expected_version).__name__}")
        expected = None if expected_version is None else {self.state_key: expected_version}
        plans = await self.store.save_many(  # one transaction: context and the rest never diverge
            user_id, session_id, values={self.state_key: data}, lists={self.context_key: context},
            expected_versions=expected,
        )
        return StateSaveReport(plans[self.context_key], len(context), plans.versions[self.state_key])

    async def delete(self, user_id: Optional[str], session_id: str) -> None:
        """Forget the state (only this repository's two keys; other keys stay).

        >>> repo = AgentStateRepository(store)
        >>> state = asyncio.run(repo.load("alice", "delete-1"))
        >>> _ = asyncio.run(repo.save("alice", "delete-1", state))
        >>> asyncio.run(repo.delete("alice", "delete-1"))
        >>> asyncio.run(repo.exists("alice", "delete-1"))
        False
        """
        keys.pack(user_id, session_id)  # refused before any connection

        def forget(tx: Any) -> None:  # one transaction: never half a state
            tx.delete(user_id, session_id, self.context_key)
            tx.delete(user_id, session_id, self.state_key)

        await self.store.transaction(forget)

    async def exists(self, user_id: Optional[str], session_id: str) -> bool:
        """True when a state was saved for the session.

        >>> repo = AgentStateRepository(store)
        >>> asyncio.run(repo.exists("alice", "exists-1"))
        False
        >>> _ = asyncio.run(repo.save("alice", "exists-1", asyncio.run(repo.load("alice", "exists-1"))))
        >>> asyncio.run(repo.exists("alice", "exists-1"))
        True
        """
        return (await self.store.get_versioned(user_id, session_id, self.state_key)).version > 0

    async def list_sessions(self, user_id: Optional[str]) -> set[str]:
        """The user's session ids (every session with rows in the store).

        >>> repo = AgentStateRepository(store)
        >>> _ = asyncio.run(repo.save("bob", "chat-1", asyncio.run(repo.load("bob", "chat-1"))))
        >>> asyncio.run(repo.list_sessions("bob"))
        {'chat-1'}
        """
        return await self.store.list_session_ids(user_id)


# ---- agentscope.app storage --------------------------------------------------------------------

_APP_STORAGE: dict[str, type] = {}
#: The key of an AgentScope SQL session's ``info`` listing the states to delete at its COMMIT.
_STATES_TO_DELETE = "mysql_state.states_to_delete"


def _app_storage_class() -> type:
    """Build the storage subclass on first use: ``agentscope.app`` needs extra packages."""
    if "cls" in _APP_STORAGE:
        return _APP_STORAGE["cls"]
    try:
        from agentscope.app.storage import AsyncSQLAlchemyStorage, SessionRecord
        from agentscope.app.storage._sql._tables import SessionRow
        from agentscope.state import AgentState as RowState  # the row's stub state
        from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
    except ImportError as exc:
        raise ImportError(
            "MysqlStateAppStorage needs agentscope.app's SQL storage: "
            "pip install 'agentscope[storage-sql]' apscheduler (and an async driver such as aiomysql)"
        ) from exc

    class _StateDeletingSession(AsyncSession):
        """AgentScope's SQL session, which deletes the states of the sessions whose rows it
        deleted once its transaction COMMITs (a rollback keeps rows and states alike)."""

        async def commit(self) -> None:
            await super().commit()
            gone = self.info.pop(_STATES_TO_DELETE, ())
            for repo, user_id, session_id in gone:
                await repo.delete(user_id, session_id)

        async def rollback(self) -> None:
            self.info.pop(_STATES_TO_DELETE, None)
            await super().rollback()

    class MysqlStateAppStorage(AsyncSQLAlchemyStorage):
        """AgentScope's SQL app storage with the agents' session state kept in this store.

        Everything but the state (users, agents, sessions' config, messages...) stays in
        AgentScope's tables at ``url``; each session's ``AgentState`` goes through an
        :class:`AgentStateRepository`, keyed by the session's owner and id, so a chat turn
        writes only the messages that changed. The SQL row keeps a stub state.

        Give it to the app as ``create_app(storage=storage, ...)``; ``app_url`` is AgentScope's
        SQLAlchemy URL (here ``mysql+aiomysql://``, the store's database):

        >>> from agentscope.app.storage import SessionConfig
        >>> from mysql_state.agentscope import MysqlStateAppStorage
        >>> async def new_session():
        ...     async with MysqlStateAppStorage(app_url, store) as storage:
        ...         rec = await storage.upsert_session("alice", "agent-1", SessionConfig(workspace_id="w1"))
        ...         return await storage.repo.exists("alice", rec.id)
        >>> asyncio.run(new_session())  # the new session's (fresh) state is in the store
        True
        """

        def __init__(
            self,
            url: str,
            store: AsyncMysqlAgentStateStore | MysqlAgentStateStore | AgentStateRepository,
            **kwargs: Any,
        ) -> None:
            super().__init__(url, **kwargs)
            self.repo = store if isinstance(store, AgentStateRepository) else AgentStateRepository(store)

        async def _hydrate(self, rec: Optional["SessionRecord"]) -> Optional["SessionRecord"]:
            return None if rec is None else await self._hydrated(rec)

        async def _hydrated(self, rec: "SessionRecord") -> "SessionRecord":
            # One read: the state when one was saved; half a state (its row lost while the
            # context is there) is CorruptStateError, never the stub state (whose next save
            # would write the context over with the stub's).
            state, version = await self.repo.load_versioned(rec.user_id, rec.id)
            if version:
                rec.state = state
            return rec

        def _session(self) -> AsyncSession:
            """AgentScope's session, of a class that deletes a deleted session's state once the
            deletion COMMITs (:meth:`_delete_session_impl`)."""
            base = super()._session()  # its checks (entered, not closed) and its factory's settings
            if getattr(self, "_deleting_factory_of", None) is not self._session_factory:
                self._deleting_factory = async_sessionmaker(base.bind, class_=_StateDeletingSession,
                                                            expire_on_commit=False)
                self._deleting_factory_of = self._session_factory
            return self._deleting_factory()

        async def _owner(self, session_id: str) -> Optional[str]:
            async with self._session() as sess:
                row = await sess.get(SessionRow, session_id)
            return None if row is None else row.user_id

        # (ignore: AgentScope's further parameters, origin, source..., are passed on by keyword
        # through **kwargs, not named here, so that this fits each 2.0.x release's list of them.)
        async def upsert_session(  # type: ignore[override]
                self, user_id: str, agent_id: str, config: Any, state: Any = None,
                session_id: Optional[str] = None, **kwargs: Any) -> "SessionRecord":
            """Upsert the row with a stub state; the real state goes to the store, FIRST: an id
            the store refuses (a user id with ':'), a state it cannot hold or a store that is
            down write nothing, neither a new row nor a changed config. A new session (no id,
            ``""`` as in AgentScope, or an id with no row) starts from the state given or a
            fresh one, never from what a deleted session of that id left in the store.

            >>> from agentscope.app.storage import SessionConfig
            >>> from mysql_state.agentscope import MysqlStateAppStorage
            >>> cfg, renamed = SessionConfig(workspace_id="w1"), SessionConfig(workspace_id="w1", name="renamed")
            >>> async def upsert():
            ...     async with MysqlStateAppStorage(app_url, store) as storage:
            ...         rec = await storage.upsert_session("alice", "agent-1", cfg, AgentState(summary="started"))
            ...         again = await storage.upsert_session("alice", "agent-1", renamed, session_id=rec.id)
            ...         state = await storage.repo.load("alice", rec.id)  # what the store holds
            ...         return again.id == rec.id, again.config.name, state.summary
            >>> asyncio.run(upsert())  # the row's config changed; the state given first is kept
            (True, 'renamed', 'started')
            """
            keys.pack(user_id, session_id or "-")
            owner = await self._owner(session_id) if session_id else None
            if owner is None:
                # (ignore: pydantic types a field's default_factory as Optional and as maybe taking
                # the data validated so far; SessionRecord.id's is there and takes none.)
                sid = session_id or SessionRecord.model_fields["id"].default_factory()  # type: ignore[call-arg,misc]
                first = state if state is not None else RowState()
                await self.repo.save(user_id, sid, first)  # written over anything left there
                try:
                    rec = await super().upsert_session(user_id, agent_id, config, None, sid, **kwargs)
                except BaseException:
                    await self._forget_orphan(user_id, sid)
                    raise
                rec.state = first
                return rec
            assert session_id is not None  # its owner was looked up
            if state is not None:  # the row's owner's state, as update_session_state writes it
                await self.repo.save(owner, session_id, state)
            rec = await super().upsert_session(user_id, agent_id, config, None, session_id, **kwargs)
            if state is not None:
                rec.state = state
            else:
                await self._hydrate(rec)
            return rec

        async def _forget_orphan(self, user_id: str, session_id: str, *, quiet: bool = True) -> None:
            """Delete the state of a session that has no row (its creation failed, it was
            deleted under a turn, or its deletion could not delete the state), unless a row
            came meanwhile. ``quiet``: an error here never masks the one the caller raises."""
            try:
                if await self._owner(session_id) is None:
                    await self.repo.delete(user_id, session_id)
            except Exception:  # noqa: BLE001 - the error being raised is the one to see
                if not quiet:
                    raise

        async def update_session_state(self, user_id: str, agent_id: str, session_id: str,
                                       state: AgentState) -> None:
            """The hot path after each chat turn: an incremental save of the state; the row
            keeps its stub state and its ``updated_at`` moves, as in AgentScope's storage. A
            session deleted during the turn does not keep the state saved for it.

            >>> from agentscope.app.storage import SessionConfig
            >>> from agentscope.message import UserMsg
            >>> from mysql_state.agentscope import MysqlStateAppStorage
            >>> async def turn():
            ...     async with MysqlStateAppStorage(app_url, store) as storage:
            ...         rec = await storage.upsert_session("alice", "agent-state-1", SessionConfig(workspace_id="w1"))
            ...         rec.state.context.append(UserMsg("alice", "hi"))
            ...         await storage.update_session_state("alice", "agent-state-1", rec.id, rec.state)
            ...         return len((await storage.repo.load("alice", rec.id)).context)
            >>> asyncio.run(turn())  # the turn's message is in the store
            1
            """
            owner = await self._owner(session_id)
            if owner is None:
                raise KeyError(f"Session {session_id!r} not found.")
            await self.repo.save(owner, session_id, state)
            try:
                await super().update_session_state(user_id, agent_id, session_id, RowState(session_id=session_id))
            except KeyError:  # deleted since _owner: the state just saved must not outlive it
                await self._forget_orphan(owner, session_id)
                raise

        async def get_session(self, user_id: str, agent_id: str, session_id: str) -> Optional["SessionRecord"]:
            """AgentScope's record of the session, with its state loaded from the store (in place
            of the row's stub); None when ``user_id`` has no session of that id.

            >>> from agentscope.app.storage import SessionConfig
            >>> from mysql_state.agentscope import MysqlStateAppStorage
            >>> async def summary():
            ...     async with MysqlStateAppStorage(app_url, store) as storage:
            ...         rec = await storage.upsert_session("alice", "agent-get-1", SessionConfig(workspace_id="w1"))
            ...         rec.state.summary = "greeted"
            ...         await storage.update_session_state("alice", "agent-get-1", rec.id, rec.state)
            ...         got = await storage.get_session("alice", "agent-get-1", rec.id)
            ...         return got.state.summary, await storage.get_session("bob", "agent-get-1", rec.id)
            >>> asyncio.run(summary())  # bob does not own it
            ('greeted', None)
            """
            return await self._hydrate(await super().get_session(user_id, agent_id, session_id))

        async def _hydrate_all(self, recs: list["SessionRecord"]) -> list["SessionRecord"]:
            """Every record's state, loaded side by side (the store's threads bound how many)."""
            return list(await asyncio.gather(*(self._hydrated(r) for r in recs)))

        async def list_sessions(self, user_id: str, agent_id: str) -> list["SessionRecord"]:
            """The user's sessions with one agent, newest first (AgentScope's order), each with its
            state loaded from the store (side by side).

            >>> from agentscope.app.storage import SessionConfig
            >>> from mysql_state.agentscope import MysqlStateAppStorage
            >>> async def sessions():
            ...     async with MysqlStateAppStorage(app_url, store) as storage:
            ...         for name in ("first", "second"):
            ...             cfg = SessionConfig(workspace_id="w1", name=name)
            ...             await storage.upsert_session("alice", "agent-list-1", cfg, AgentState(summary=name))
            ...         found = await storage.list_sessions("alice", "agent-list-1")
            ...         return [(r.config.name, r.state.summary) for r in found]
            >>> sorted(asyncio.run(sessions()))  # sorted: the two may share a creation second
            [('first', 'first'), ('second', 'second')]
            """
            return await self._hydrate_all(await super().list_sessions(user_id, agent_id))

        async def list_sessions_by_schedule(self, user_id: str, schedule_id: str) -> list["SessionRecord"]:
            """The user's sessions a schedule opened, newest first, each with its state loaded from
            the store.

            >>> from agentscope.app.storage import ScheduleOrigin, SessionConfig
            >>> from mysql_state.agentscope import MysqlStateAppStorage
            >>> cfg, state = SessionConfig(workspace_id="w1"), AgentState(summary="daily report")
            >>> origin = ScheduleOrigin(schedule_id="daily-1")  # the schedule opened it
            >>> async def scheduled():
            ...     async with MysqlStateAppStorage(app_url, store) as storage:
            ...         await storage.upsert_session("alice", "agent-1", cfg, state, origin=origin)
            ...         return [r.state.summary for r in await storage.list_sessions_by_schedule("alice", "daily-1")]
            >>> asyncio.run(scheduled())
            ['daily report']
            """
            return await self._hydrate_all(await super().list_sessions_by_schedule(user_id, schedule_id))

        async def list_sessions_by_channel(self, user_id: str, channel_id: str) -> list["SessionRecord"]:
            """The user's sessions an inbound channel (a chat platform) opened, newest first, each
            with its state loaded from the store.

            >>> from agentscope.app.storage import ChannelOrigin, SessionConfig
            >>> from mysql_state.agentscope import MysqlStateAppStorage
            >>> cfg, state = SessionConfig(workspace_id="w1"), AgentState(summary="from chat")
            >>> origin = ChannelOrigin(channel_id="slack-1", chat_id="general")  # a message in #general opened it
            >>> async def from_channel():
            ...     async with MysqlStateAppStorage(app_url, store) as storage:
            ...         await storage.upsert_session("alice", "agent-1", cfg, state, origin=origin)
            ...         found = await storage.list_sessions_by_channel("alice", "slack-1")
            ...         return [(r.origin.chat_id, r.state.summary) for r in found]
            >>> asyncio.run(from_channel())
            [('general', 'from chat')]
            """
            return await self._hydrate_all(await super().list_sessions_by_channel(user_id, channel_id))

        async def _delete_session_impl(self, sess: Any, user_id: str, agent_id: str, session_id: str) -> bool:
            # Every cascade (agent, team, schedule, SOP run) deletes sessions through here, in a
            # transaction it COMMITs later: the state goes then (a rollback keeps the session).
            ok = await super()._delete_session_impl(sess, user_id, agent_id, session_id)
            if ok:
                if isinstance(sess, _StateDeletingSession):
                    sess.info.setdefault(_STATES_TO_DELETE, []).append((self.repo, user_id, session_id))
                else:  # a session not made by _session: as before, at once
                    await self.repo.delete(user_id, session_id)
            else:  # no row: a state left by a deletion whose state delete failed goes now
                await self._forget_orphan(user_id, session_id, quiet=False)
            return ok

    _APP_STORAGE["cls"] = MysqlStateAppStorage
    return MysqlStateAppStorage


def __getattr__(name: str) -> Any:
    if name == "MysqlStateAppStorage":
        return _app_storage_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
