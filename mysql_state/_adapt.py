"""What the framework adapters share: one async store from whatever the caller passed.

Each adapter accepts an :class:`AsyncMysqlAgentStateStore` or a :class:`MysqlAgentStateStore`
(wrapped without taking ownership), and closes only a store that its own ``from_url`` made.
"""

from __future__ import annotations

from typing import Any, Union

from .aio import AsyncMysqlAgentStateStore
from .store import MysqlAgentStateStore

AnyStore = Union[AsyncMysqlAgentStateStore, MysqlAgentStateStore]


def as_async(store: Any, owner: str) -> AsyncMysqlAgentStateStore:
    """``store`` as an async store; a sync one is wrapped and stays the caller's to close."""
    if isinstance(store, MysqlAgentStateStore):
        return AsyncMysqlAgentStateStore(store, close_store=False)
    if not isinstance(store, AsyncMysqlAgentStateStore):
        raise TypeError(
            f"{owner} needs an AsyncMysqlAgentStateStore or a MysqlAgentStateStore, got {type(store).__name__}"
        )
    return store


def open_store(url: str, create_tables: bool, store_options: dict[str, Any]) -> AsyncMysqlAgentStateStore:
    """A store of the adapter's own (``from_url``), closed by the adapter's ``close``."""
    return AsyncMysqlAgentStateStore.from_url(url, create_if_not_exist=create_tables, **store_options)
