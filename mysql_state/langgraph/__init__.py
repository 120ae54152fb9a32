"""LangGraph on the store's table (extra ``langgraph``): the checkpointer :class:`MysqlSaver`
(``langgraph.checkpoint.base.BaseCheckpointSaver``) and the long-term memory store
:class:`MysqlStore` (``langgraph.store.base.BaseStore``). See docs/langgraph.md and
docs/langgraph-memory.md.

>>> from mysql_state.langgraph import MysqlSaver, MysqlStore
>>> with MysqlSaver(store) as saver:
...     saver.get_tuple({"configurable": {"thread_id": "no-such-thread"}}) is None
True
"""

from .checkpoint import MysqlSaver
from .memory import MysqlStore

__all__ = ["MysqlSaver", "MysqlStore"]
