"""What the restart demos share: run one turn per process, twice, on one session.

``python examples/<framework>_restart.py`` (``make demo-openai`` / ``make demo-adk``) starts
a throwaway server (or uses MYSQL_URL), then runs the script itself twice as subprocesses with
``--turn 1`` and ``--turn 2`` on the same session; each prints, as one JSON line, what its
offline scripted model was shown. The second process must see the first one's turn.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import uuid
from typing import Awaitable, Callable

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

QUESTIONS = {1: "My name is Ada. Remember it.", 2: "What is my name?"}
ANSWERS = {1: "Nice to meet you, Ada.", 2: "Your name is Ada."}

#: One turn: (url, session id, turn number) -> the texts the model was shown, oldest first.
Turn = Callable[[str, str, int], Awaitable[list[str]]]


def run_turn_process(script: str, url: str, session_id: str, turn: int) -> list[str]:
    """Run ``script --turn`` in a fresh interpreter; the texts its model saw."""
    env = dict(os.environ, MYSQL_URL=url)
    done = subprocess.run([sys.executable, script, "--turn", str(turn), "--session", session_id],
                          env=env, capture_output=True, text=True, timeout=300)
    if done.returncode:
        raise RuntimeError(f"turn {turn} failed:\n{done.stdout}{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])["seen"]


def check_restart(script: str, url: str) -> None:
    """The tests' restart case: two processes, one turn each; the second was shown the first's turn."""
    session_id = f"restart-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    first = run_turn_process(script, url, session_id, 1)
    second = run_turn_process(script, url, session_id, 2)
    assert first == [QUESTIONS[1]], first
    assert second == [QUESTIONS[1], ANSWERS[1], QUESTIONS[2]], second


def main(script: str, framework: str, turn_fn: Turn) -> int:
    """``--turn N``: one turn in this process; no argument: the two-process demo."""
    import asyncio

    ap = argparse.ArgumentParser(description=f"{framework}: a conversation kept across a process restart")
    ap.add_argument("--turn", type=int, choices=(1, 2))
    ap.add_argument("--session", default=None)
    args = ap.parse_args()
    if args.turn:
        seen = asyncio.run(turn_fn(os.environ["MYSQL_URL"], args.session, args.turn))
        print(json.dumps({"seen": seen}))
        return 0
    from mysql_state.server import server_url

    url = server_url()
    session_id = f"demo-{uuid.uuid4().hex[:8]}"
    print(f"{framework}: session {session_id!r}, one turn per process, offline scripted model")
    for turn in (1, 2):
        seen = run_turn_process(script, url, session_id, turn)
        print(f"  process {turn}: the model was shown {len(seen)} message(s):")
        for text in seen:
            print(f"    - {text}")
    ok = QUESTIONS[1] in seen and ANSWERS[1] in seen
    print("  the second process saw the first one's turn: " + ("yes" if ok else "NO"))
    return 0 if ok else 1
