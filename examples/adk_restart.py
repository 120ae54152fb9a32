"""A Google ADK agent (LlmAgent + Runner, offline scripted model) whose conversation survives
a process restart.

    python examples/adk_restart.py     # make demo-adk
"""

from __future__ import annotations

import sys
from typing import AsyncGenerator

from restart_demo import ANSWERS, QUESTIONS, main
from google.adk.agents import LlmAgent
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.genai import types

from mysql_state.adk import MysqlSessionService


class ScriptedLlm(BaseLlm):
    """Answers from a script, offline; remembers what it was shown."""

    script: list[str] = []
    seen: list[str] = []

    async def generate_content_async(self, llm_request: LlmRequest, stream: bool = False) -> AsyncGenerator[LlmResponse, None]:
        self.seen[:] = [p.text for c in llm_request.contents for p in (c.parts or []) if p.text]
        yield LlmResponse(content=types.Content(role="model", parts=[types.Part(text=self.script.pop(0))]))


async def turn(url: str, session_id: str, n: int) -> list[str]:
    """One turn of the agent on ``session_id``: the texts the model was shown."""
    llm = ScriptedLlm(model="scripted", script=[ANSWERS[n]], seen=[])
    service = MysqlSessionService.from_url(url, create_tables=True)
    try:
        runner = Runner(agent=LlmAgent(name="assistant", model=llm, instruction="Be brief."),
                        app_name="demo", session_service=service)
        if await service.get_session(app_name="demo", user_id="ada", session_id=session_id) is None:
            await service.create_session(app_name="demo", user_id="ada", session_id=session_id)
        message = types.Content(role="user", parts=[types.Part(text=QUESTIONS[n])])
        async for _ in runner.run_async(user_id="ada", session_id=session_id, new_message=message):
            pass
    finally:
        await service.close()
    return llm.seen


if __name__ == "__main__":
    sys.exit(main(__file__, "Google ADK", turn))
