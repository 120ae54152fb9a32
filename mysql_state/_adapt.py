"""What the framework adapters share: one async store from whatever the caller passed.

Each adapter accepts an :class:`AsyncMysqlAgentStateStore` or a :class:`MysqlAgentStateStore`
(wrapped without taking ownership), and closes only a store that its own ``from_url`` made.
"""

from __future__ import annotations

import inspect
import threading
import weakref
from typing import Any, Union

from . import url as url_module
from .aio import AsyncMysqlAgentStateStore
from .store import MysqlAgentStateStore

AnyStore = Union[AsyncMysqlAgentStateStore, MysqlAgentStateStore]

# The async twin of each sync store an adapter was given, shared by every adapter object on
# that store (weakly: a twin lives as long as an adapter object uses it, a store as long as its
# owner keeps it), so that the threads stay bounded by the store's pool size for the whole
# process, as with one async store: a twin per session, each with its own pool-sized
# executor, held a thread per call waiting for a pooled connection (PoolTimeoutError under
# load) and threads per session until it was garbage-collected.
_TWINS: "weakref.WeakKeyDictionary[MysqlAgentStateStore, weakref.ReferenceType[AsyncMysqlAgentStateStore]]" = (
    weakref.WeakKeyDictionary())
_TWINS_LOCK = threading.Lock()


def twin_of(store: MysqlAgentStateStore) -> AsyncMysqlAgentStateStore:
    """The one async twin of the sync ``store`` that adapters share (made on first use; it
    never closes the store, which stays the caller's to close)."""
    with _TWINS_LOCK:
        known = _TWINS.get(store)
        twin = known() if known is not None else None
        if twin is None:
            twin = AsyncMysqlAgentStateStore(store, close_store=False)
            _TWINS[store] = weakref.ref(twin)
        return twin


def as_async(store: Any, owner: str) -> AsyncMysqlAgentStateStore:
    """``store`` as an async store; a sync one is wrapped (:func:`twin_of`) and stays the
    caller's to close."""
    if isinstance(store, MysqlAgentStateStore):
        return twin_of(store)
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
