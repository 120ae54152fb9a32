"""OpenAI Agents SDK adapter: a ``Session`` whose conversation lives in this store.

Install with ``pip install 'mysql-state[openai-agents]'``; the core package never imports this.

The session's items are one list in the store (one row per item): ``add_items`` appends
(no rewrite, whatever the history's length), ``get_items(limit=k)`` reads the last ``k`` in
one query, ``pop_item`` removes the last item atomically, ``clear_session`` deletes the list.

A turn of a real agent (``ScriptedModel``, the SDK's offline model, stands in for an LLM):

>>> from agents import Agent, Runner
>>> from agents.testing import ScriptedModel, assistant_message
>>> model = ScriptedModel()
>>> model.enqueue([assistant_message("hello")])
>>> async def turn():
...     session = MysqlSession.from_url("chat-1", url, create_tables=True)
...     try:
...         result = await Runner.run(Agent(name="bot", model=model), "hi", session=session)
...         return result.final_output, len(await session.get_items())
...     finally:
...         await session.close()
>>> asyncio.run(turn())
('hello', 2)
"""

from __future__ import annotations

from typing import Any, Optional

try:
    from agents.memory import SessionABC
    from agents.memory.session_settings import SessionSettings, coerce_session_settings, resolve_session_limit
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "mysql_state.openai_agents needs the OpenAI Agents SDK: pip install 'mysql-state[openai-agents]'"
    ) from exc

from . import keys
from ._adapt import AnyStore, as_async, open_store
from .errors import StoreClosedError

__all__ = ["MysqlSession", "ITEMS_KEY"]

#: The list key holding a session's items, one item per row.
ITEMS_KEY = "items"


class MysqlSession(SessionABC):
    """The SDK's session protocol on a MySQL table, with ``SQLiteSession``'s semantics.

    ``store`` is an :class:`~mysql_state.aio.AsyncMysqlAgentStateStore` or a
    :class:`~mysql_state.store.MysqlAgentStateStore`; ``(user_id, session_id, key)`` name the
    list. No lock is bound to an event loop: one session object may be used from several
    loops and threads (the store serialises writers of a list in the database).

    >>> session = MysqlSession("chat-2", store, user_id="alice")
    >>> asyncio.run(session.add_items([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]))
    >>> asyncio.run(session.get_items(limit=1))
    [{'role': 'assistant', 'content': 'hello'}]
    >>> asyncio.run(session.pop_item())
    {'role': 'assistant', 'content': 'hello'}
    >>> asyncio.run(session.get_items())
    [{'role': 'user', 'content': 'hi'}]
    """

    session_settings: Optional[SessionSettings] = None

    def __init__(
        self,
        session_id: str,
        store: AnyStore,
        *,
        user_id: Optional[str] = None,
        key: str = ITEMS_KEY,
        session_settings: SessionSettings | dict[str, Any] | None = None,
    ) -> None:
        self.session_id = session_id
        self.user_id = user_id
        self.key = key
        self.store = as_async(store, "MysqlSession")
        self.session_settings = (
            coerce_session_settings(session_settings) if session_settings is not None else SessionSettings()
        )
        self._owns_store = False
        self._closed = False
        # Validate the ids now (ValueError naming the id), not on the first turn.
        keys.pack(user_id, session_id)
        keys.state_key(key, is_list=True, exact=self.store.sync.exact_keys)

    @classmethod
    def from_url(
        cls,
        session_id: str,
        url: str,
        *,
        user_id: Optional[str] = None,
        create_tables: bool = False,
        key: str = ITEMS_KEY,
        session_settings: SessionSettings | dict[str, Any] | None = None,
        **store_options: Any,
    ) -> "MysqlSession":
        """A session on a store of its own (``store_options`` go to ``from_url``), closed by :meth:`close`.

        >>> session = MysqlSession.from_url("chat-3", url, create_tables=True)
        >>> asyncio.run(session.get_items())
        []
        >>> asyncio.run(session.close())
        """
        store = open_store(url, create_tables, store_options)
        try:
            session = cls(session_id, store, user_id=user_id, key=key, session_settings=session_settings)
        except BaseException:
            store.sync.close()
            raise
        session._owns_store = True
        return session

    async def get_items(self, limit: int | None = None) -> list[Any]:
        """The history, oldest first; ``limit`` (or ``session_settings.limit``) keeps the latest N.

        As ``SQLiteSession``: ``0`` gives no items, a negative limit gives them all.
        """
        self._check_open()
        n = resolve_session_limit(limit, self.session_settings)
        if n is not None and n == 0:
            return []
        offset = -n if n is not None and n > 0 else 0
        return await self.store.get_list(self.user_id, self.session_id, self.key, offset=offset)

    async def add_items(self, items: list[Any]) -> None:
        """Append ``items`` after the history (one transaction; the history is not rewritten)."""
        self._check_open()
        if items:
            await self.store.append_list(self.user_id, self.session_id, self.key, list(items))

    async def pop_item(self) -> Any | None:
        """Remove and return the most recent item (None when empty), atomically across processes."""
        self._check_open()
        return await self.store.pop_list(self.user_id, self.session_id, self.key)

    async def clear_session(self) -> None:
        """Remove every item of this session (other keys of the store session stay)."""
        self._check_open()
        await self.store.delete(self.user_id, self.session_id, self.key)

    async def close(self) -> None:
        """Close the session: its calls then raise :class:`~mysql_state.errors.StoreClosedError`
        (a ``RuntimeError``, as a closed ``SQLiteSession`` raises), and the store too if
        :meth:`from_url` made it; a store that was passed in stays open. Idempotent.

        >>> session = MysqlSession("chat-4", store)
        >>> asyncio.run(session.close())
        >>> asyncio.run(session.add_items([]))
        Traceback (most recent call last):
        mysql_state.errors.StoreClosedError: MysqlSession 'chat-4' is closed (close() was called); it runs no new call
        """
        self._closed = True
        if self._owns_store:
            await self.store.aclose()

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosedError(f"MysqlSession {self.session_id!r} is closed (close() was called); "
                                   "it runs no new call")

    def __repr__(self) -> str:
        return f"MysqlSession(session_id={self.session_id!r}, user_id={self.user_id!r}, key={self.key!r})"
