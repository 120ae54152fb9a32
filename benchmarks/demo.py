"""`make demo`: a real AgentScope 2.x agent whose state lives in MySQL, offline.

A scripted chat model (no key, no network) drives a real ``agentscope.agent.Agent`` with a
real tool. The agent runs turns (one with a tool call), pauses on a tool that needs the user's
confirmation, and the process ends. A *new process* builds a new agent from the stored state,
resumes the paused reply, and a small context window forces a compression. After each save the
demo prints what was written (rows, and whether it was an append, an in-place change or a full
rewrite), then lists the sessions, shows the table's rows, and deletes a session.

Runs on the embedded default server (``mysql_state.server.server_url()``: ``MYSQL_URL``,
Docker, or a throwaway local mariadbd).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import warnings

try:
    from agentscope.agent import Agent, ContextConfig, InjectionConfig
    from agentscope.credential import CredentialBase
    from agentscope.event import ConfirmResult, RequireUserConfirmEvent, UserConfirmResultEvent
    from agentscope.formatter import OpenAIChatFormatter
    from agentscope.message import TextBlock, ToolCallBlock, UserMsg
    from agentscope.model import ChatModelBase, ChatResponse, ChatUsage
    from agentscope.permission import PermissionBehavior, PermissionDecision
    from agentscope.tool import FunctionTool, Toolkit
except ImportError:
    sys.exit("the demo needs AgentScope 2.x: pip install -e '.[agentscope]'")

from mysql_state.agentscope import AgentStateRepository
from mysql_state.aio import AsyncMysqlAgentStateStore
from mysql_state.server import server_url

DATABASE = "mysql_state_demo"
USER, SESSION = "alice", "chat-1"
FIELDS = ("task_overview", "current_state", "important_discoveries", "next_steps", "context_to_preserve")

# What the "model" says, in order (a list of blocks per model call).
SCRIPT = [
    [TextBlock(text="Let me add that."), ToolCallBlock(id="call-1", name="add", input='{"a": 2, "b": 3}')],
    [TextBlock(text="2 + 3 = 5.")],
    [TextBlock(text="You're welcome!")],
    [TextBlock(text="That one needs your OK."), ToolCallBlock(id="call-2", name="transfer", input='{"a": 40, "b": 2}')],
    # -- the process restarts here --
    [TextBlock(text="Done: 40 + 2 = 42.")],
    [TextBlock(text="We added twice; all good.")],
]


class ScriptedModel(ChatModelBase):
    """An offline ChatModelBase: replies from SCRIPT, summaries for compression."""

    def __init__(self, script: list, context_size: int = 32768) -> None:
        super().__init__(credential=CredentialBase(), model="scripted", parameters=ChatModelBase.Parameters(),
                         stream=False, max_retries=0, context_size=context_size)
        self.formatter = OpenAIChatFormatter()
        self.script = script

    async def _call_api(self, model_name, messages, tools=None, tool_choice=None, **kwargs) -> ChatResponse:
        if [t["function"]["name"] for t in tools or []] == ["generate_structured_output"]:
            summary = json.dumps({k: f"({k.replace('_', ' ')})" for k in FIELDS})
            return ChatResponse(content=[ToolCallBlock(id="summary", name="generate_structured_output", input=summary)],
                                is_last=True)
        return ChatResponse(content=self.script.pop(0), is_last=True,
                            usage=ChatUsage(input_tokens=3, output_tokens=2, time=0.0))


def add(a: int, b: int) -> str:
    """Add two integers.

    Args:
        a (int): the first
        b (int): the second
    """
    return str(a + b)


def make_agent(state, script, context_size: int = 32768) -> Agent:
    allow = PermissionDecision(behavior=PermissionBehavior.ALLOW, message="ok")
    tools = Toolkit(tools=[FunctionTool(add, permission=allow), FunctionTool(add, name="transfer")])  # asks first
    return Agent(name="bot", system_prompt="You are a careful calculator.", model=ScriptedModel(script, context_size),
                 toolkit=tools, state=state, injection_config=InjectionConfig(inject_runtime_state=False))


def show_reply(user: str, agent: Agent, n_before: int) -> None:
    if user:
        print(f"  alice > {user}")
    for msg in agent.state.context[n_before:] or agent.state.context[-1:]:
        if msg.role != "assistant":
            continue
        for b in msg.content:
            if b.type == "text":
                print(f"  bot   > {b.text}")
            elif b.type == "tool_call":
                print(f"  bot   > [calls {b.name}({b.input}) -> {b.state}]")
            elif b.type == "tool_result":
                out = b.output if isinstance(b.output, str) else " ".join(x.text for x in b.output if x.type == "text")
                print(f"  tool  > {out}")


#: How each kind of list save (mysql_state.listsync.Plan.kind) is told; a kind this table does
#: not know yet is printed by its name, never a crash.
SAVE_KINDS = {"rewrite": "full write", "append": "append", "suffix": "changed rows only",
              "shrink": "shorter list", "unchanged": "nothing changed",
              "clear": "cleared"}


def show_save(report) -> None:
    kind = SAVE_KINDS.get(report.context.kind, report.context.kind)
    dropped = f", dropped rows >= {report.context.delete_from}" if report.context.delete_from is not None else ""
    print(f"  [saved: {kind}: {report.context.rows_written} of {report.messages} message rows{dropped}; "
          f"+1 row for the rest of the state]")


async def turn(repo: AgentStateRepository, agent: Agent, text: str):
    n = len(agent.state.context)
    paused = None
    async for evt in agent.reply_stream(UserMsg(USER, text)):
        if isinstance(evt, RequireUserConfirmEvent):
            paused = evt
    show_reply(text, agent, n)
    show_save(await repo.save(USER, SESSION, agent.state))
    return paused


async def first_process(url: str) -> None:
    async with AsyncMysqlAgentStateStore.from_url(url, database_name=DATABASE, create_if_not_exist=True) as store:
        await store.truncate_all_sessions()
        repo = AgentStateRepository(store)
        agent = make_agent(await repo.load(USER, SESSION), SCRIPT[:4])
        print(f"== process 1 (pid {os.getpid()}): a new agent, state loaded from MySQL (empty) ==")
        await turn(repo, agent, "What is 2 + 3?")
        await turn(repo, agent, "Thanks!")
        paused = await turn(repo, agent, "Now transfer 40 + 2, please.")
        print(f"  ... paused: waiting for the user's OK on {[tc.name for tc in paused.tool_calls]};"
              " the process exits\n")
        # another user's session, for the listing below
        other = make_agent(await repo.load("bob", "chat-9"), [[TextBlock(text="Hi Bob.")]])
        await other.reply(UserMsg("bob", "hello"))
        await repo.save("bob", "chat-9", other.state)


async def second_process(url: str) -> None:
    async with AsyncMysqlAgentStateStore.from_url(url, database_name=DATABASE) as store:
        repo = AgentStateRepository(store)
        state = await repo.load(USER, SESSION)
        awaiting = state.get_awaiting_tool_calls("bot")
        print(f"== process 2 (pid {os.getpid()}): a NEW agent from the stored state "
              f"({len(state.context)} messages, awaiting {[tc.name for tc in awaiting]}) ==")
        agent = make_agent(state, SCRIPT[4:])
        n = len(agent.state.context)
        await agent.reply(UserConfirmResultEvent(
            reply_id=state.reply_id,
            confirm_results=[ConfirmResult(confirmed=True, tool_call=awaiting[0])]))
        print("  alice > [confirms the transfer]")
        show_reply("", agent, n - 1)
        show_save(await repo.save(USER, SESSION, agent.state))
        agent.model.context_size = 200  # a tiny window: the next turn compresses the history
        agent.context_config = ContextConfig(trigger_ratio=0.5, reserve_ratio=0.2)
        before = len(agent.state.context)
        await turn(repo, agent, "Summarize what we did.")
        print(f"  ... compressed: {before + 1} messages -> {len(agent.state.context)}; "
              f"summary starts {str(agent.state.summary)[:48]!r}")
        stored = await repo.load(USER, SESSION)
        same = stored.model_dump(mode="json") == agent.state.model_dump(mode="json")
        print(f"  stored state == agent.state: {same}\n")
        if not same:
            sys.exit("the stored state differs from the agent's")

        print("== sessions ==")
        print(f"  alice: {sorted(await repo.list_sessions('alice'))}   bob: {sorted(await repo.list_sessions('bob'))}")
        print("  the table (session_id, state_key, item_index, bytes, version):")
        for row in await asyncio.to_thread(table_rows, url):
            print("   ", row)
        await repo.delete("bob", "chat-9")
        print(f"  deleted bob/chat-9 -> bob: {sorted(await repo.list_sessions('bob'))}; "
              f"rows left: {len(await asyncio.to_thread(table_rows, url))}")


def table_rows(url: str) -> list[tuple]:
    """The table's rows, read with plain SQL (a connection of our own, not the store's)."""
    import pymysql

    from mysql_state.pool import parse_url

    kwargs, _ = parse_url(url)
    con = pymysql.connect(**kwargs)
    try:
        with con.cursor() as cur:
            cur.execute(f"SELECT session_id, state_key, item_index, LENGTH(state_data), version "
                        f"FROM `{DATABASE}`.`agentscope_sessions` ORDER BY session_id, state_key, item_index")
            return [tuple(r) for r in cur.fetchall()]
    finally:
        con.close()


def main() -> None:
    warnings.filterwarnings("ignore")
    import logging
    logging.disable(logging.WARNING)
    if len(sys.argv) > 1 and sys.argv[1] == "--resume":
        asyncio.run(second_process(os.environ["MYSQL_URL"]))
        return
    t0 = time.perf_counter()
    url = server_url()
    print(f"server: {url}  database: {DATABASE}\n")
    asyncio.run(first_process(url))
    # The restart is a real one: a fresh interpreter with nothing in memory but the URL.
    env = dict(os.environ, MYSQL_URL=url)
    done = subprocess.run([sys.executable, os.path.abspath(__file__), "--resume"], env=env)
    if done.returncode:
        sys.exit(done.returncode)
    print(f"\ndone in {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
