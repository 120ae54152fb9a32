"""EXPERIMENT (not part of make bench): with ``durability="async"`` (LangGraph's default), a
node that edits a message in place races the put of the checkpoint taken before it ran, for
every saver that does I/O. A graph whose node edits the thread's first message in place when
asked; after the second turn, the checkpoint of step 3 (taken before that node ran) is read
back: does its first message show the edit? Counted over RUNS runs for ``MysqlSaver``,
``PostgresSaver`` (a local PostgreSQL, started as ``langgraph_bench.py`` starts it),
``SqliteSaver`` (in memory) and ``InMemorySaver``, each on its own new thread per run, then
again with ``durability="sync"`` (docs/langgraph.md, "Not serialising again").

    .venv/bin/python benchmarks/experiments/langgraph_edit_race.py [RUNS]
"""

from __future__ import annotations

import collections
import os
import sqlite3
import sys
import uuid

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # benchmarks/

import langgraph_bench as lb  # noqa: E402
import psycopg  # noqa: E402
from langchain_core.messages import AIMessage, HumanMessage  # noqa: E402
from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402
from langgraph.checkpoint.postgres import PostgresSaver  # noqa: E402
from langgraph.checkpoint.sqlite import SqliteSaver  # noqa: E402
from langgraph.graph import START, MessagesState, StateGraph  # noqa: E402

from mysql_state import MysqlAgentStateStore  # noqa: E402
from mysql_state.langgraph import MysqlSaver  # noqa: E402
from mysql_state.server import server_url  # noqa: E402


def agent(state: MessagesState) -> dict:
    msgs = state["messages"]
    if msgs[-1].content == "edit":
        msgs[0].content = "EDITED"  # in place, on the object the last checkpoint holds
        return {"messages": [msgs[0], AIMessage("ok", id="a-edit")]}
    return {"messages": [AIMessage("re:" + msgs[-1].content, id="a-" + msgs[-1].id)]}


def edited_before(saver, durability: str) -> bool:
    """Whether the checkpoint taken before the editing node ran shows the edit."""
    graph = StateGraph(MessagesState).add_node("agent", agent).add_edge(START, "agent").compile(checkpointer=saver)
    config = {"configurable": {"thread_id": uuid.uuid4().hex}}
    graph.invoke({"messages": [HumanMessage("hello", id="h0")]}, config, durability=durability)
    graph.invoke({"messages": [HumanMessage("edit", id="h1")]}, config, durability=durability)
    before = [h for h in graph.get_state_history(config) if h.metadata["step"] == 3][0]
    return before.values["messages"][0].content == "EDITED"


def main(runs: int = 20) -> None:
    pg = lb.LocalPostgres()
    store = MysqlAgentStateStore.from_url(server_url(), database_name="lgrace", create_if_not_exist=True)
    try:
        with psycopg.connect(pg.dsn, autocommit=True, prepare_threshold=0) as con:
            postgres = PostgresSaver(con)
            postgres.setup()
            savers = {"MysqlSaver": MysqlSaver(store), "PostgresSaver": postgres,
                      "SqliteSaver": SqliteSaver(sqlite3.connect(":memory:", check_same_thread=False)),
                      "InMemorySaver": InMemorySaver()}
            for durability in ("async", "sync"):
                seen: collections.Counter = collections.Counter()
                for _ in range(runs):
                    for name, saver in savers.items():  # interleaved: one run of each in turn
                        seen[name] += edited_before(saver, durability)
                print(f"durability={durability!r}: the checkpoint before the editing node shows the edit in")
                for name in savers:
                    print(f"  {name}: {seen[name]} of {runs} runs")
    finally:
        store.close()
        pg.stop()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 20)
