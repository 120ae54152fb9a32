"""Deterministic conversations: ~500 bytes of text per message, user and assistant alternating."""

from __future__ import annotations

import random

WORDS = (
    "the agent reads a table row index hash memory state session user assistant tool call "
    "result query plan step answer question context window token model prompt reply error "
    "retry commit insert select update delete list value json text server client network"
).split()
TEXT_CHARS = 500


def text(rng: random.Random, n: int = TEXT_CHARS) -> str:
    out, size = [], 0
    while size < n:
        w = rng.choice(WORDS)
        out.append(w)
        size += len(w) + 1
    return " ".join(out)[:n]


def role(i: int) -> str:
    return "user" if i % 2 == 0 else "assistant"


def message(rng: random.Random, i: int) -> dict:
    return {"role": role(i), "content": text(rng)}


class Conversation:
    """The list of N messages and the lists each workload writes, built once (untimed)."""

    def __init__(self, n: int, seed: int = 4) -> None:
        rng = random.Random(seed * 100003 + n)
        self.n = n
        self.base = [message(rng, i) for i in range(n)]
        self.turn1 = [message(rng, n)]
        self.turn2 = [message(rng, n), message(rng, n + 1)]
        last = dict(self.base[-1])
        last["content"] = last["content"] + " " + text(rng, 200)  # the reply streamed on
        self.grown_last = last
        self.grow_new = message(rng, n)
        self.grown = self.base[:-1] + [last, self.grow_new]
        self.summary = {"role": "system", "content": "Summary of the conversation so far: " + text(rng, 460)}
        self.compacted = [self.summary] + self.base[-10:]

    def with_turn(self, k: int) -> list:
        return self.base + (self.turn1 if k == 1 else self.turn2)

    def turn(self, k: int) -> list:
        return self.turn1 if k == 1 else self.turn2


# ---- AgentScope-shaped sessions (the throughput benchmark) -------------------------------------

def agentscope_msg(rng: random.Random, role_: str, msg_id: str, turn: str = "") -> dict:
    """A message as AgentScope 2.x ``Msg.model_dump(mode="json")`` gives it (~320-800 bytes)."""
    ts = f"2026-01-01T{rng.randrange(24):02d}:{rng.randrange(60):02d}:{rng.randrange(60):02d}.{rng.randrange(10**6):06d}"
    block = {"type": "text", "text": text(rng, rng.randint(20, 450)), "id": msg_id + "-b0", "created_at": ts,
             "finished_at": None}
    return {"name": role_, "content": [block], "role": role_, "id": msg_id,
            "metadata": {"turn": turn} if turn else {}, "created_at": ts, "usage": None, "finished_at": None,
            "finished_reason": None, "structured_output": None, "error": None}


def seeded_session(s: int) -> tuple[list, str]:
    """Session ``s``'s history before any turn (50-200 messages) and its summary text."""
    rng = random.Random(f"tp-seed-{s}")
    n = rng.randint(50, 200)
    msgs = [agentscope_msg(rng, role(i), f"s{s}-seed-{i}") for i in range(n)]
    return msgs, "Summary of the conversation so far: " + text(rng, 200)


def turn_messages(s: int, rnd: int, k: int) -> list:
    """Turn ``k`` of session ``s`` in round ``rnd``: a user message and the reply, ids unique."""
    rng = random.Random(f"tp-turn-{s}-{rnd}-{k}")
    tid = f"r{rnd}-t{k}"
    return [agentscope_msg(rng, r, f"s{s}-{tid}-{r}", tid) for r in ("user", "assistant")]
