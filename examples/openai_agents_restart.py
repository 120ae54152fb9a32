"""An OpenAI Agents SDK agent (offline scripted model) whose conversation survives a restart.

    python examples/openai_agents_restart.py     # make demo-openai
"""

from __future__ import annotations

import sys

from restart_demo import ANSWERS, QUESTIONS, main
from agents import Agent, Runner
from agents.testing import ScriptedModel, assistant_message

from mysql_state.openai_agents import MysqlSession


def _text(item: dict) -> str:
    content = item.get("content")
    if isinstance(content, list):
        return " ".join(part.get("text", "") for part in content if isinstance(part, dict))
    return str(content)


async def turn(url: str, session_id: str, n: int) -> list[str]:
    """One turn of the agent on ``session_id``: the texts the model was shown."""
    model = ScriptedModel()
    model.enqueue([assistant_message(ANSWERS[n])])
    agent = Agent(name="assistant", instructions="Be brief.", model=model)
    session = MysqlSession.from_url(session_id, url, user_id="demo", create_tables=True)
    try:
        result = await Runner.run(agent, QUESTIONS[n], session=session)
        assert result.final_output == ANSWERS[n], result.final_output
    finally:
        await session.close()
    return [_text(item) for item in model.calls[-1].input]


if __name__ == "__main__":
    sys.exit(main(__file__, "OpenAI Agents SDK", turn))
