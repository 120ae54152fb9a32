"""LangGraph on this store's table (extra ``langgraph``): :class:`MysqlStore`, the long-term
memory store (``langgraph.store.base.BaseStore``).

>>> from mysql_state.langgraph import MysqlStore  # doctest: +SKIP
"""

from .memory import MysqlStore

__all__ = ["MysqlStore"]
