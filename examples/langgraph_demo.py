"""LangGraph on MySQL, offline: a graph stopped at a human approval, resumed by a NEW process,
then forked from an earlier checkpoint (``make demo-langgraph``).

The graph is a real ``StateGraph(MessagesState)``: a scripted chat model (a LangChain chat
model that answers from a script, no network) asks for a tool, ``transfer``, whose node asks a
human through ``interrupt``. The demo

1. runs the graph in a child process until the interrupt (``--phase ask``);
2. resumes it in ANOTHER child process with the approval (``--phase resume --answer yes``);
3. forks the thread here (time travel): from the checkpoint that waited for the approval,
   ``update_state`` replaces the model's tool call by a refusal; both endings read back;
4. prints the rows the saver wrote and what ``mysql-state sessions`` shows.

It uses ``MYSQL_URL`` when set, else a throwaway server (``mysql_state.server.server_url()``).
The tests import :func:`build_graph` and run the phases as real processes too.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import uuid
from typing import Any, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from langchain_core.language_models.chat_models import BaseChatModel  # noqa: E402
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage  # noqa: E402
from langchain_core.outputs import ChatGeneration, ChatResult  # noqa: E402
from langgraph.graph import END, START, MessagesState, StateGraph  # noqa: E402
from langgraph.types import Command, interrupt  # noqa: E402

from mysql_state.langgraph import MysqlSaver  # noqa: E402

DATABASE = "langgraph_demo"
QUESTION = "Please send 20 EUR to Bob."


class ScriptedChatModel(BaseChatModel):
    """A chat model that answers from a script: a user's request to pay becomes a call of
    the ``transfer`` tool; a tool's result becomes the final answer; anything else, a reply
    that says how many messages it was shown (so a test sees what the model saw)."""

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def _generate(self, messages: list[BaseMessage], stop: Optional[list[str]] = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        last = messages[-1]
        n = len(messages)
        if isinstance(last, ToolMessage):
            reply = AIMessage(content=f"Done: {last.content}", id=f"ai-{n}")
        elif "send" in str(last.content).lower():
            amount = next((w for w in str(last.content).split() if w.isdigit()), "0")
            reply = AIMessage(content="", id=f"ai-{n}", tool_calls=[
                {"name": "transfer", "args": {"to": "Bob", "amount": int(amount)}, "id": f"call-{n}"}])
        else:
            reply = AIMessage(content=f"Noted ({n} messages so far).", id=f"ai-{n}")
        return ChatResult(generations=[ChatGeneration(message=reply)])


def build_graph(checkpointer: Any) -> Any:
    """agent -> (tool call?) -> tools (asks a human through ``interrupt``) -> agent -> end."""
    model = ScriptedChatModel()

    def agent(state: MessagesState) -> dict:
        return {"messages": [model.invoke(state["messages"])]}

    def tools(state: MessagesState) -> dict:
        out = []
        for call in state["messages"][-1].tool_calls:
            answer = interrupt({"tool": call["name"], "args": call["args"], "question": "approve?"})
            result = (f"sent {call['args']['amount']} EUR to {call['args']['to']}" if answer == "yes"
                      else "transfer refused by the human")
            out.append(ToolMessage(content=result, tool_call_id=call["id"], id=f"tool-{call['id']}"))
        return {"messages": out}

    def route(state: MessagesState) -> str:
        return "tools" if getattr(state["messages"][-1], "tool_calls", None) else END

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_node("tools", tools)
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", route, ["tools", END])
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=checkpointer)


def texts(messages: list[BaseMessage]) -> list[str]:
    return [f"{m.type}: {m.content or m.tool_calls}" for m in messages]


def phase(url: str, database: str, thread: str, step: str, answer: str = "yes") -> dict:
    """One phase in this process: ``ask`` runs to the interrupt, ``resume`` answers it."""
    with MysqlSaver.from_url(url, database_name=database, create_if_not_exist=True) as saver:
        graph = build_graph(saver)
        config = {"configurable": {"thread_id": thread}}
        if step == "ask":
            out = graph.invoke({"messages": [("user", QUESTION)]}, config)
        else:
            out = graph.invoke(Command(resume=answer), config)
        state = graph.get_state(config)
        return {
            "pid": os.getpid(),
            "interrupt": [i.value for i in out.get("__interrupt__", [])],
            "messages": texts(out["messages"]),
            "next": list(state.next),
        }


def run_phase(url: str, database: str, thread: str, step: str, answer: str = "yes") -> dict:
    """:func:`phase` in a fresh interpreter (a real process); its JSON result."""
    env = dict(os.environ, MYSQL_URL=url)
    args = [sys.executable, os.path.abspath(__file__), "--phase", step, "--thread", thread,
            "--database", database, "--answer", answer]
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=300)
    if done.returncode:
        raise RuntimeError(f"phase {step} failed:\n{done.stdout}{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def fork_cancelled(url: str, database: str, thread: str) -> dict:
    """Time travel: from the checkpoint that waited for the approval, fork the thread with
    ``update_state``: the model's tool call is replaced (same message id) by a refusal, so
    the fork ends without a transfer while the first ending stays readable."""
    with MysqlSaver.from_url(url, database_name=database) as saver:
        graph = build_graph(saver)
        config = {"configurable": {"thread_id": thread}}
        waiting = next(s for s in graph.get_state_history(config) if s.next == ("tools",))
        call = waiting.values["messages"][-1]
        forked = graph.update_state(waiting.config, {"messages": [AIMessage(
            content="Cancelled: I will not send money without a reason.", id=call.id)]}, as_node="agent")
        fork_state = graph.get_state(forked)
        history = list(graph.get_state_history(config))
        first_end = next(s for s in history if s.next == () and s.values["messages"][-1].type == "ai"
                         and s.values["messages"][-1].content.startswith("Done"))
        return {"from": waiting.config["configurable"]["checkpoint_id"], "messages": texts(fork_state.values["messages"]),
                "next": list(fork_state.next), "checkpoints": len(history),
                "first_ending": texts(first_end.values["messages"])}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--phase", choices=["ask", "resume"])
    parser.add_argument("--thread")
    parser.add_argument("--database", default=DATABASE)
    parser.add_argument("--answer", default="yes")
    args = parser.parse_args()
    if args.phase:
        print(json.dumps(phase(os.environ["MYSQL_URL"], args.database, args.thread, args.phase, args.answer)))
        return 0

    from mysql_state.server import server_url

    url = os.environ.get("MYSQL_URL") or server_url()
    thread = f"demo-{uuid.uuid4().hex[:8]}"
    print(f"thread {thread} in database {args.database}\n")
    asked = run_phase(url, args.database, thread, "ask")
    print(f"process {asked['pid']}: stopped at the interrupt {asked['interrupt']}")
    for line in asked["messages"]:
        print(f"    {line}")
    resumed = run_phase(url, args.database, thread, "resume", "yes")
    assert resumed["pid"] != asked["pid"] and not resumed["interrupt"], resumed
    print(f"\nprocess {resumed['pid']} (a new one): resumed with 'yes'")
    for line in resumed["messages"]:
        print(f"    {line}")
    forked = fork_cancelled(url, args.database, thread)
    print(f"\nfork (update_state) from checkpoint {forked['from']}, the one waiting for the approval:")
    for line in forked["messages"]:
        print(f"    {line}")
    print(f"the thread now has {forked['checkpoints']} checkpoints; the first ending still reads back:")
    for line in forked["first_ending"]:
        print(f"    {line}")
    print()

    from mysql_state import keys

    sid = keys.pack(None, thread)
    rows = _rows(url, args.database, sid)
    print(f"rows of session {sid!r} (key, rows, bytes):")
    for key, count, size in rows:
        print(f"    {key:<60} {count:>3} {size:>6}")
    print("\n$ mysql-state sessions")
    cli = subprocess.run([sys.executable, "-m", "mysql_state", "--url", url, "--database", args.database,
                          "sessions", "--limit", "5"], capture_output=True, text=True, timeout=60)
    print(cli.stdout + cli.stderr)
    return 0


def _rows(url: str, database: str, sid: str) -> list[tuple]:
    """(state_key, rows, bytes) of one session, by plain SQL."""
    import pymysql

    from mysql_state.pool import parse_url

    kwargs, _ = parse_url(url)
    con = pymysql.connect(charset="utf8mb4", **kwargs)
    try:
        with con.cursor() as cur:
            cur.execute(f"SELECT state_key, COUNT(*), SUM(LENGTH(state_data)) FROM `{database}`.`agentscope_sessions`"
                        " WHERE session_id = %s GROUP BY state_key ORDER BY state_key", (sid,))
            return list(cur.fetchall())
    finally:
        con.close()


if __name__ == "__main__":
    raise SystemExit(main())
