"""LangGraph on the store's table (extra ``langgraph``): the checkpointer :class:`MysqlSaver`.

>>> from mysql_state.langgraph import MysqlSaver
>>> saver = MysqlSaver.from_url("mysql://root@127.0.0.1:3306/agentscope", create_if_not_exist=True)  # doctest: +SKIP
"""

from .checkpoint import MysqlSaver

__all__ = ["MysqlSaver"]
