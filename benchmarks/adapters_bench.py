"""The framework adapters against the frameworks' own SQL stores: one agent turn (load the
history, then save the turn's user message and reply) at 10, 100 and 1 000 items, in one
process, on one server, in interleaved rounds (medians).

* ``MysqlSession`` against the SDK's ``SQLAlchemySession`` (``get_items`` + ``add_items``);
* ``MysqlSessionService`` against ADK's ``DatabaseSessionService`` (``get_session`` + two
  ``append_event``).

Targets at 1 000 items: at most 0.5x the SDK's store and 0.3x ADK's, per turn.

Every timed call starts after a full garbage collection (untimed, both sides alike). Without it
the medians were bimodal at 1 000 items: a load builds ~1 000 ADK ``Event`` objects on either
side, and every two or three turns that churn starts a full collection of the whole process
(~170 ms here) inside whichever call crosses the threshold, so one side's median could be a
collection's and the other's not (``ours`` 34 / 180 ms alternating, 2026-12-04).

    .venv/bin/python benchmarks/run.py --only adapters   # needs the bench extra (both frameworks)

Writes ``results/<date>-adapters.{json,md}`` (``--quick``: ``<date>-quick-adapters``).
"""

from __future__ import annotations

import asyncio
import gc
import statistics
import time
import uuid
from typing import Any, Callable

import peers as peers_mod

SIZES = (10, 100, 1000)
TARGETS = {"openai-agents": 0.5, "google-adk": 0.3}


def _msgs(n: int) -> list[dict]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i} " + "x" * 400} for i in range(n)]


class _Pair:
    """One framework: its own store (the peer) and our adapter, each with a ``turn(n)``."""

    def __init__(self, name: str, theirs: Callable[[], None], ours: Callable[[], None]) -> None:
        self.name, self.theirs, self.ours = name, theirs, ours


def _sdk_pair(peer: Any, store: Any, loop: asyncio.AbstractEventLoop, n: int) -> _Pair:
    from mysql_state.openai_agents import MysqlSession

    sid = f"sdk-{n}-{uuid.uuid4().hex[:6]}"
    base, turn = _msgs(n), _msgs(2)
    peer.seed(sid, peer.convert(base))
    ours = MysqlSession(sid, store)
    loop.run_until_complete(ours.clear_session())
    loop.run_until_complete(ours.add_items(base))

    def theirs_turn() -> None:
        peer.load_all(sid)
        peer.append(sid, peer.convert(turn))

    def ours_turn() -> None:
        loop.run_until_complete(ours.get_items())
        loop.run_until_complete(ours.add_items(turn))

    return _Pair("openai-agents", theirs_turn, ours_turn)


def _adk_pair(peer: Any, store: Any, loop: asyncio.AbstractEventLoop, n: int) -> _Pair:
    from mysql_state.adk import MysqlSessionService

    sid = f"adk-{n}-{uuid.uuid4().hex[:6]}"
    peer.seed(sid, peer.convert(_msgs(n)))
    service = MysqlSessionService(store)
    loop.run_until_complete(service.create_session(app_name="bench", user_id=peers_mod.USER, session_id=sid))
    session = loop.run_until_complete(service.get_session(app_name="bench", user_id=peers_mod.USER, session_id=sid))
    for event in peer.convert(_msgs(n)):  # seeded through the public API (n <= 1 000)
        loop.run_until_complete(service.append_event(session, event))

    def theirs_turn() -> None:
        peer.sessions[sid] = peer.run(peer.svc.get_session(app_name="bench", user_id=peers_mod.USER, session_id=sid))
        peer.append(sid, peer.fresh(peer.convert(_msgs(2))))

    def ours_turn() -> None:
        s = loop.run_until_complete(service.get_session(app_name="bench", user_id=peers_mod.USER, session_id=sid))
        for event in peer.fresh(peer.convert(_msgs(2))):
            loop.run_until_complete(service.append_event(s, event))

    return _Pair("google-adk", theirs_turn, ours_turn)


DATABASES = {"store": "msbench_adapters", "openai-agents": "msbench_openai_agents", "google-adk": "msbench_google_adk"}


def _fresh_databases(kwargs: dict) -> None:
    """Drop and create this benchmark's databases (the peers do not create theirs)."""
    import pymysql

    admin = pymysql.connect(autocommit=True, charset="utf8mb4", **kwargs)
    try:
        with admin.cursor() as cur:
            for db in DATABASES.values():
                cur.execute(f"DROP DATABASE IF EXISTS `{db}`")
                cur.execute(f"CREATE DATABASE `{db}` DEFAULT CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci")
    finally:
        admin.close()


def _start_peers(kwargs: dict, loop: asyncio.AbstractEventLoop) -> tuple[dict, dict]:
    """The two frameworks' own stores that start here, and the error of each that does not."""
    made, failed = {}, {}
    for name, cls in (("openai-agents", peers_mod.OpenAIAgentsPeer), ("google-adk", peers_mod.ADKPeer)):
        try:
            made[name] = cls(kwargs, DATABASES[name], loop)
        except Exception as exc:  # noqa: BLE001 - reported, not fatal
            failed[name] = f"{type(exc).__name__}: {exc}"[:500]
    return made, failed


def run_adapters(kwargs: dict, url: str, rounds: int = 15) -> tuple[list[dict], dict]:
    """Time both pairs at every size: one row per (framework, size), and the peers' errors."""
    from mysql_state.aio import AsyncMysqlAgentStateStore

    _fresh_databases(kwargs)
    loop = asyncio.new_event_loop()
    store = AsyncMysqlAgentStateStore.from_url(url, database_name=DATABASES["store"], create_if_not_exist=True)
    made, failed = _start_peers(kwargs, loop)
    rows: list[dict] = []
    try:
        for n in SIZES:
            pairs = []
            if "openai-agents" in made:
                pairs.append(_sdk_pair(made["openai-agents"], store, loop, n))
            if "google-adk" in made:
                pairs.append(_adk_pair(made["google-adk"], store, loop, n))
            times: dict[tuple[str, str], list[float]] = {}
            for _ in range(rounds):  # interleaved: theirs, ours, theirs, ours...
                for pair in pairs:
                    for side, fn in (("theirs", pair.theirs), ("ours", pair.ours)):
                        gc.collect()  # untimed: no collection owed to earlier calls lands in this one
                        t0 = time.perf_counter()
                        fn()
                        times.setdefault((pair.name, side), []).append(time.perf_counter() - t0)
            for pair in pairs:
                theirs = statistics.median(times[(pair.name, "theirs")])
                ours = statistics.median(times[(pair.name, "ours")])
                rows.append({"framework": pair.name, "n": n, "theirs_s": theirs, "ours_s": ours,
                             "ratio": ours / theirs, "target": TARGETS[pair.name], "rounds": rounds,
                             "theirs_samples_s": times[(pair.name, "theirs")],
                             "ours_samples_s": times[(pair.name, "ours")]})
    finally:
        for p in made.values():
            p.close()
        loop.run_until_complete(store.aclose())
        loop.close()
    for name, err in failed.items():
        print(f"  {name}: not measured ({err})")
    return rows, failed


LABELS = {"openai-agents": ("SQLAlchemySession", "MysqlSession"),
          "google-adk": ("DatabaseSessionService", "MysqlSessionService")}


def markdown(rows: list[dict], failed: dict, machine: str) -> str:
    """The committed table: one line per framework and size, the target at 1 000 met or missed."""
    out = ["# Adapters: one turn through the adapter vs the framework's own SQL store", "",
           f"{machine}", "",
           "One turn = load the history, then save the turn's 2 items (SDK: `get_items` + `add_items`; "
           "ADK: `get_session` + two `append_event`). Medians of interleaved rounds, one process, one server; "
           "a full garbage collection (untimed) before every timed call, both sides alike.", "",
           "| framework | theirs | ours | N | theirs (ms) | ours (ms) | ratio | target at 1 000 |",
           "|---|---|---|---:|---:|---:|---:|---|"]
    for r in rows:
        theirs, ours = LABELS[r["framework"]]
        target = "" if r["n"] != 1000 else (f"≤ {r['target']}x: " + ("met" if r["ratio"] <= r["target"] else "**missed**"))
        out.append(f"| {r['framework']} | {theirs} | {ours} | {r['n']:,} | {r['theirs_s'] * 1e3:.2f} | "
                   f"{r['ours_s'] * 1e3:.2f} | {r['ratio']:.2f}x | {target} |")
    for name, err in failed.items():
        out.append(f"\n{name}: not measured ({err})")
    return "\n".join(out) + "\n"


def write_results(rows: list[dict], failed: dict, out_dir: str, stem: str, machine: str) -> list[str]:
    """``<stem>-adapters.json`` (every sample) and ``<stem>-adapters.md`` (the table)."""
    import json
    import os

    os.makedirs(out_dir, exist_ok=True)
    base = os.path.join(out_dir, f"{stem}-adapters")
    with open(base + ".json", "w") as f:
        json.dump({"machine": machine, "rows": rows, "peer_errors": failed,
                   "command": "benchmarks/run.py --only adapters"}, f, indent=1)
    with open(base + ".md", "w") as f:
        f.write(markdown(rows, failed, machine))
    return [base + ".json", base + ".md"]


def print_table(rows: list[dict]) -> None:
    """The side-by-side comparison, one line per framework and size."""
    print("\nOne turn (load + save the turn's 2 items): adapter vs the framework's own SQL store")
    print(f"{'framework':<15}{'N':>7}{'theirs':>12}{'ours':>12}{'ratio':>8}{'target':>8}")
    for r in rows:
        met = "" if r["n"] != 1000 else ("  met" if r["ratio"] <= r["target"] else "  MISSED")
        print(f"{r['framework']:<15}{r['n']:>7}{r['theirs_s'] * 1e3:>10.2f}ms{r['ours_s'] * 1e3:>10.2f}ms"
              f"{r['ratio']:>7.2f}x{r['target']:>7.1f}x{met}")
