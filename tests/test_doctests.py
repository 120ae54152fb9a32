"""Every docstring example of the package runs (doctest), against the test server.

Each module's examples run in the namespace of :mod:`tests.doctest_run` (``url``, ``store``,
``astore``, ``messages``, ``asyncio``). The AgentScope 2.x module's examples also get ``model``
(an offline chat model that answers "hello") and ``app_url`` (the store's database, for
AgentScope's own app tables). The framework adapters' examples run inside their framework's
virtualenv, as cases of that framework's suite (``tests/*_inner``)."""

from __future__ import annotations

import pkgutil

import pytest

import mysql_state
from tests.doctest_run import run_examples

#: Modules whose examples need a framework that the main environment does not hold.
IN_THEIR_VIRTUALENV = {"mysql_state.adk", "mysql_state.agentscope1", "mysql_state.openai_agents"}
MODULES = ["mysql_state"] + sorted(m.name for m in pkgutil.walk_packages(mysql_state.__path__, "mysql_state.")
                                   if m.name not in IN_THEIR_VIRTUALENV and not m.name.endswith("__main__"))


def agentscope_extras(url: str) -> dict:
    """``model`` and ``app_url`` for the AgentScope 2.x examples."""
    from agentscope.credential import CredentialBase
    from agentscope.formatter import OpenAIChatFormatter
    from agentscope.message import TextBlock
    from agentscope.model import ChatModelBase, ChatResponse, ChatUsage

    class Hello(ChatModelBase):
        """An offline chat model: every call answers "hello"."""

        def __init__(self) -> None:
            super().__init__(credential=CredentialBase(), model="scripted", parameters=ChatModelBase.Parameters(),
                             stream=False, max_retries=0, context_size=32768)
            self.formatter = OpenAIChatFormatter()

        async def _call_api(self, model_name, messages, tools=None, tool_choice=None, **kwargs) -> ChatResponse:
            return ChatResponse(content=[TextBlock(text="hello")], is_last=True,
                                usage=ChatUsage(input_tokens=3, output_tokens=1, time=0.0))

    return {"model": Hello(), "app_url": "mysql+aiomysql://" + url.split("://", 1)[1]}


EXTRAS = {"mysql_state.agentscope": agentscope_extras}
#: Modules whose docstrings show examples (a run that finds none there is a failure, not a pass).
EXAMPLED = {"mysql_state", "mysql_state.store", "mysql_state.aio", "mysql_state.agentscope", "mysql_state.crypto",
            "mysql_state.metrics", "mysql_state.server", "mysql_state.transaction", "mysql_state.locks",
            "mysql_state.langgraph.checkpoint", "mysql_state.langgraph.memory"}


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name: str, url: str, database: str, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)  # examples that write a file write it here
    result = run_examples(name, url, database, monkeypatch, EXTRAS.get(name))
    assert result.attempted > 0 or name not in EXAMPLED, f"{name} lost its examples"
    assert result.failed == 0, f"{result.failed} of {result.attempted} docstring examples of {name} failed (see above)"
