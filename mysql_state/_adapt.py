"""What the framework adapters share: one async store from whatever the caller passed.

Each adapter accepts an :class:`AsyncMysqlAgentStateStore` or a :class:`MysqlAgentStateStore`
(wrapped without taking ownership), and closes only a store that its own ``from_url`` made.
"""

from __future__ import annotations

import inspect
from typing import Any, Union

from . import url as url_module
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
    """A store of the adapter's own (``from_url``), closed by the adapter's ``close``. A
    misspelt option is named with the closest one, the adapter's ``create_tables`` included
    (the store's ``create_if_not_exist`` is that option here)."""
    if "create_if_not_exist" in store_options:
        raise TypeError("from_url() got an unexpected keyword argument 'create_if_not_exist': "
                        "this adapter's option for it is create_tables=")
    store_own = inspect.signature(MysqlAgentStateStore.from_url).parameters
    url_module.check_keywords({k: v for k, v in store_options.items() if k not in store_own},
                              ["create_tables", *store_own])
    return AsyncMysqlAgentStateStore.from_url(url, create_if_not_exist=create_tables, **store_options)
