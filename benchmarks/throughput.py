"""Throughput: agent turns per second when every process serves every session.

    python benchmarks/throughput.py            # full run (5 rounds x 10 s per system, ~8 min)
    python benchmarks/throughput.py --quick    # smoke (2 rounds x 2 s, ~1-2 min; not committed)
    python benchmarks/run.py --only throughput # the same from make bench's entry point

P worker processes (``--procs``, default 4), each with its own client of every system (its own
store object, so its own snapshot cache), serve 64 sessions. A turn is what an AgentScope agent
does per request: load the session (the context list and the rest of the state), append a user
message and the assistant's reply (AgentScope-shaped, ~320-800 bytes of JSON each; sessions start
with 50-200 messages and a summary), save it.

Routing: a worker that is free takes a RANDOM FREE session (a shared busy flag per session, under
one lock), so a session's next turn lands on another process than its last one ~(P-1)/P of the
time: most saves of this store are cold (the process's snapshot is stale or absent). No two turns
of one session ever overlap: today the store, the naive rewrite and the blob are last-writer-wins
for concurrent turns of one session and would lose turns, which would make the workload neither
realistic (a chat session has one request at a time) nor verifiable. The share of turns that
landed on the process that wrote the session last is reported ("same-process").

Systems, interleaved round by round (each round runs every system for ``--seconds`` in a fresh
random order, so machine noise hits them alike), every one at the same concurrency P:

1. mysql-state: ``get_many`` when the store has it, else ``get_list`` + ``get``; then
   ``save_many(values={"state": ...}, lists={"context": ...})`` as ``AgentStateRepository.save``.
2. floor: the session's rows read by one bare SELECT, then one INSERT of the two new rows + COMMIT.
3. naive: the session read by one SELECT, then DELETE all its rows + INSERT every row + COMMIT.
4. blob: the whole state as one JSON row, read by one SELECT, upserted per turn.
5. openai-agents ``SQLAlchemySession`` (aiomysql): ``get_items`` + ``add_items`` of the two
   new items (it keeps no other state).

And the async variant, in this (the coordinator's) process while the workers idle: one
``AsyncMysqlAgentStateStore`` driven by 64 coroutines vs one sync store driven by 64 threads
(both pool_size 16, same calls in the same order), sessions picked the same way.

Before each system's round its 64 sessions are reset to their seed (untimed, from the
coordinator's own client, so the workers' snapshots are stale); after it, every session is read
back and must equal the seed followed by exactly the turns the workers completed, in order (each
turn's messages carry a unique turn id), with the state's turn counter matching. Turns/s is the
median over rounds; the ratio to the floor is the median of the per-round ratios (paired, since
the rounds are interleaved); latency quantiles pool every turn of every round.

Uses ``MYSQL_URL`` if set, else the embedded default server (``mysql_state.server``). Writes
``benchmarks/results/<date>-throughput.{json,csv,md,png}`` (``-quick`` runs are git-ignored).
"""

from __future__ import annotations

import harness  # noqa: F401  (the shared header: sys.path, matplotlib backend)

import argparse
import asyncio
import datetime as dt
import multiprocessing as mp
import os
import random
import statistics
import sys
import threading
import time
from typing import Any, Callable, Mapping, Optional

import orjson  # noqa: E402
import pymysql  # noqa: E402

from mysql_state import MysqlAgentStateStore  # noqa: E402
from mysql_state.aio import AsyncMysqlAgentStateStore  # noqa: E402
from mysql_state.pool import parse_url  # noqa: E402

import baselines  # noqa: E402
import data  # noqa: E402
import peers  # noqa: E402
import report  # noqa: E402

DB = "msbench_tp"
DB_OA = "msbench_tp_openai_agents"
USER = "tp"
CONTEXT, STATE = "context", "state"
MAX_ERRORS = 50  # an actor stops its round after this many failed turns
PROFILES = {
    "full": dict(procs=4, sessions=64, actors=64, rounds=5, seconds=10.0, pool_size=16),
    "quick": dict(procs=4, sessions=64, actors=64, rounds=2, seconds=2.0, pool_size=16),
}
PROC_SYSTEMS = ("mysql-state", "floor", "naive", "blob", "openai-agents")
LOCAL_SYSTEMS = ("async", "threads")


def sid_of(s: int) -> str:
    return f"tp-{s:02d}"


def dumps(m: Any) -> str:
    return orjson.dumps(m).decode()


# ---- the systems, as one process (or one thread pool) sees them ------------------------------


class Client:
    """One system's client: ``load`` and ``save`` make a turn; ``reset``/``stored`` are untimed."""

    keeps_state = True

    def load(self, sid: str) -> tuple[list, Optional[dict]]:
        raise NotImplementedError

    def save(self, sid: str, context: list, new: list, state: dict) -> None:
        raise NotImplementedError

    def reset(self, sid: str, context: list, state: dict) -> None:
        self.save(sid, context, context, state)

    def stored(self, sid: str) -> tuple[list, Optional[dict]]:
        return self.load(sid)

    def close(self) -> None:
        pass


def unpack_many(got: Any) -> tuple[list, Optional[dict]]:
    """``get_many``'s answer: a mapping by key, or a (values, lists) pair of mappings."""
    if isinstance(got, Mapping):
        return list(got.get(CONTEXT) or []), got.get(STATE)
    values, lists = got
    return list(lists.get(CONTEXT) or []), values.get(STATE)


class StoreClient(Client):
    """mysql-state, in the shape ``AgentStateRepository`` uses (context list + one value)."""

    def __init__(self, store: MysqlAgentStateStore, user: str = USER) -> None:
        self.store, self.user = store, user
        self.many = hasattr(store, "get_many")

    def load(self, sid: str) -> tuple[list, Optional[dict]]:
        if self.many:
            return unpack_many(self.store.get_many(self.user, sid, values=[STATE], lists=[CONTEXT]))
        return self.store.get_list(self.user, sid, CONTEXT), self.store.get(self.user, sid, STATE)

    def save(self, sid: str, context: list, new: list, state: dict) -> None:
        self.store.save_many(self.user, sid, values={STATE: state}, lists={CONTEXT: context})

    def close(self) -> None:
        self.store.close()


class AsyncStoreClient:
    """The async store doing a StoreClient's turn; untimed work goes through the sync one."""

    def __init__(self, astore: AsyncMysqlAgentStateStore, user: str) -> None:
        self.a, self.user = astore, user
        self.sync = StoreClient(astore.sync, user)

    async def load(self, sid: str) -> tuple[list, Optional[dict]]:
        if self.sync.many:
            return unpack_many(await self.a.get_many(self.user, sid, values=[STATE], lists=[CONTEXT]))
        return await self.a.get_list(self.user, sid, CONTEXT), await self.a.get(self.user, sid, STATE)

    async def save(self, sid: str, context: list, new: list, state: dict) -> None:
        await self.a.save_many(self.user, sid, values={STATE: state}, lists={CONTEXT: context})


class FloorClient(Client):
    """The floor: one bare SELECT of the session's rows; one INSERT of the 2 new rows + COMMIT."""

    keeps_state = False

    def __init__(self, kwargs: dict) -> None:
        self.f = baselines.Floor(kwargs, DB)

    def load(self, sid: str) -> tuple[list, Optional[dict]]:
        return self.f.select_list(self.f.table, sid, CONTEXT), None

    def save(self, sid: str, context: list, new: list, state: dict) -> None:
        self.f.append_rows(sid, CONTEXT, len(context) - len(new), [dumps(m) for m in new])

    def reset(self, sid: str, context: list, state: dict) -> None:
        self.f.replace_rows(sid, CONTEXT, [dumps(m) for m in context])

    def close(self) -> None:
        self.f.close()


class NaiveClient(Client):
    """Naive: read the session (one SELECT), rewrite all of it (DELETE + INSERT all) + COMMIT."""

    def __init__(self, kwargs: dict) -> None:
        self.n = baselines.NaiveStore(kwargs, DB)

    def load(self, sid: str) -> tuple[list, Optional[dict]]:
        got = self.n.load_session(sid, (CONTEXT,))
        return got[CONTEXT], got.get(STATE)

    def save(self, sid: str, context: list, new: list, state: dict) -> None:
        self.n.save_session(sid, {CONTEXT: context}, {STATE: state})

    def close(self) -> None:
        self.n.close()


class BlobClient(Client):
    """The whole state as one JSON row: one SELECT, one upsert + COMMIT."""

    def __init__(self, kwargs: dict) -> None:
        self.b = baselines.BlobStore(kwargs, DB)

    def load(self, sid: str) -> tuple[list, Optional[dict]]:
        got = self.b.load(sid)
        return got[CONTEXT], got[STATE]

    def save(self, sid: str, context: list, new: list, state: dict) -> None:
        self.b.save(sid, {CONTEXT: context, STATE: state})

    def close(self) -> None:
        self.b.close()


class OpenAIAgentsClient(Client):
    """openai-agents ``SQLAlchemySession``: ``get_items``, ``add_items`` of the 2 new items."""

    keeps_state = False

    def __init__(self, kwargs: dict) -> None:
        self.loop = asyncio.new_event_loop()
        self.p = peers.OpenAIAgentsPeer(kwargs, DB_OA, self.loop)

    def load(self, sid: str) -> tuple[list, Optional[dict]]:
        return list(self.p.load_all(sid)), None

    def save(self, sid: str, context: list, new: list, state: dict) -> None:
        self.p.append(sid, new)

    def reset(self, sid: str, context: list, state: dict) -> None:
        self.p.seed(sid, context)

    def close(self) -> None:
        self.p.close()
        self.loop.close()


def open_clients(url: str, names: tuple, pool_size: int) -> tuple[dict[str, Client], dict[str, str]]:
    """A client of each system in ``names`` for this process, and the error of each that fails."""
    kwargs, _ = parse_url(url)
    makers: dict[str, Callable[[], Client]] = {
        "mysql-state": lambda: StoreClient(MysqlAgentStateStore.from_url(
            url, database_name=DB, create_if_not_exist=True, pool_size=pool_size)),
        "floor": lambda: FloorClient(kwargs),
        "naive": lambda: NaiveClient(kwargs),
        "blob": lambda: BlobClient(kwargs),
        "openai-agents": lambda: OpenAIAgentsClient(kwargs),
    }
    made, failed = {}, {}
    for name in names:
        try:
            made[name] = makers[name]()
        except Exception as exc:  # noqa: BLE001 - reported, not fatal
            failed[name] = f"{type(exc).__name__}: {exc}"[:500]
    return made, failed


# ---- routing and the turn loop ---------------------------------------------------------------


class Picker:
    """Hands a free actor a random free session; no two turns of one session overlap.

    ``busy``, ``count`` (turns completed this round) and ``last`` (the process that completed
    the last one) are shared arrays under ``lock`` for worker processes, plain lists for actors
    of one process.
    """

    def __init__(self, lock: Any, busy: Any, count: Any, last: Any) -> None:
        self.lock, self.busy, self.count, self.last = lock, busy, count, last
        self.n = len(busy)

    @classmethod
    def local(cls, n: int) -> "Picker":
        return cls(threading.Lock(), [0] * n, [0] * n, [-1] * n)

    def clear(self) -> None:
        with self.lock:
            for i in range(self.n):
                self.busy[i], self.count[i], self.last[i] = 0, 0, -1

    def acquire(self, rng: random.Random, me: int) -> tuple[int, int, bool]:
        """(session, its turn number, whether ``me`` completed its last turn)."""
        while True:
            with self.lock:
                free = [i for i in range(self.n) if not self.busy[i]]
                if free:
                    s = rng.choice(free)
                    self.busy[s] = 1
                    return s, self.count[s], self.last[s] == me
            time.sleep(0.0001)  # only when actors > sessions

    def release(self, s: int, me: int, ok: bool) -> None:
        with self.lock:
            if ok:
                self.count[s] += 1
                self.last[s] = me
            self.busy[s] = 0


def turn_state(summary: str, k: int) -> dict:
    """The rest of the agent state after turn ``k``: the summary and a turn counter."""
    return {"summary": summary, "turns": k}


class Actor:
    """The bookkeeping of one actor's round: which session next, latencies, errors."""

    def __init__(self, picker: Picker, rnd: int, me: int, rng: random.Random, summaries: list) -> None:
        self.picker, self.rnd, self.me, self.rng, self.summaries = picker, rnd, me, rng, summaries
        self.lat: list[int] = []
        self.errors: list[str] = []
        self.n_errors = 0
        self.same = 0
        self.cur = (0, False)

    def going(self, end: float) -> bool:
        return time.monotonic() < end and self.n_errors < MAX_ERRORS

    def next(self) -> tuple[str, list, dict]:
        """The next turn (built untimed, as an agent holds its messages in memory)."""
        s, k, same = self.picker.acquire(self.rng, self.me)
        self.cur = (s, same)
        return sid_of(s), data.turn_messages(s, self.rnd, k), turn_state(self.summaries[s], k + 1)

    def done(self, ns: int) -> None:
        s, same = self.cur
        self.picker.release(s, self.me, True)
        self.lat.append(ns)
        self.same += same

    def failed(self, exc: BaseException) -> None:
        self.picker.release(self.cur[0], self.me, False)
        self.n_errors += 1
        if len(self.errors) < 3:
            self.errors.append(f"{type(exc).__name__}: {exc}"[:300])

    def result(self, start: float) -> dict:
        return {"lat_ns": self.lat, "same": self.same, "errors": self.errors, "n_errors": self.n_errors,
                "start": start, "stop": time.monotonic()}


def run_sync(client: Client, actor: Actor, start: float, end: float) -> dict:
    time.sleep(max(0.0, start - time.monotonic()))
    cpu = time.process_time()
    while actor.going(end):
        sid, new, state = actor.next()
        t0 = time.perf_counter_ns()
        try:
            context, _ = client.load(sid)
            context.extend(new)
            client.save(sid, context, new, state)
        except Exception as exc:  # noqa: BLE001 - counted and reported
            actor.failed(exc)
        else:
            actor.done(time.perf_counter_ns() - t0)
    return {**actor.result(start), "cpu_s": time.process_time() - cpu}


async def run_async(client: AsyncStoreClient, actor: Actor, start: float, end: float) -> dict:
    await asyncio.sleep(max(0.0, start - time.monotonic()))
    while actor.going(end):
        sid, new, state = actor.next()
        t0 = time.perf_counter_ns()
        try:
            context, _ = await client.load(sid)
            context.extend(new)
            await client.save(sid, context, new, state)
        except Exception as exc:  # noqa: BLE001
            actor.failed(exc)
        else:
            actor.done(time.perf_counter_ns() - t0)
    return actor.result(start)


def worker_main(conn, me: int, url: str, shared: tuple, pool_size: int, summaries: list) -> None:
    """A worker process: a client of every system; runs rounds on command until ``None``."""
    picker = Picker(*shared)
    clients, errors = open_clients(url, PROC_SYSTEMS, pool_size)
    conn.send(errors)
    rng = random.Random(1000 + me)
    try:
        while True:
            cmd = conn.recv()
            if cmd is None:
                break
            system, rnd, start, end = cmd
            conn.send(run_sync(clients[system], Actor(picker, rnd, me, rng, summaries), start, end))
    finally:
        for c in clients.values():
            c.close()


def merge(results: list[dict]) -> tuple[dict, list[int]]:
    """One round of one system from its actors' results, and its latencies (ns, sorted)."""
    lat = sorted(x for r in results for x in r["lat_ns"])
    start = min(r["start"] for r in results)
    seconds = max(r["stop"] for r in results) - start
    out = {"turns": len(lat), "seconds": round(seconds, 3), "turns_per_s": len(lat) / seconds if seconds else 0.0,
           "p50_us": (harness.quantile(lat, 0.5) or 0) / 1000, "p99_us": (harness.quantile(lat, 0.99) or 0) / 1000,
           "same_process": round(sum(r["same"] for r in results) / len(lat), 3) if lat else None,
           "n_errors": sum(r["n_errors"] for r in results),
           "errors": [e for r in results for e in r["errors"]][:3]}
    return out, lat


def median(xs: list) -> Optional[float]:
    xs = [x for x in xs if x is not None]
    return round(statistics.median(xs), 2) if xs else None


def diagnose(expected: list, got: list) -> str:
    """Why a stored conversation differs: missing, duplicated or reordered turns."""
    ids = lambda ms: [m.get("id") if isinstance(m, dict) else None for m in ms]  # noqa: E731
    want, have = ids(expected), ids(got)
    missing = [i for i in want if i not in set(have)]
    dup = sorted({i for i in have if have.count(i) > 1})
    if missing or dup or len(have) != len(want):
        return f"{len(have)} messages, {len(want)} expected; missing {missing[:4]}; duplicated {dup[:4]}"
    if have != want:
        return "every message present, order differs"
    return "same ids and order, contents differ"


# ---- the coordinator -------------------------------------------------------------------------


class Throughput:
    def __init__(self, args: argparse.Namespace) -> None:
        p = self.profile = dict(PROFILES["quick" if args.quick else "full"])
        for k in ("procs", "rounds", "seconds", "sessions", "actors"):
            if getattr(args, k, None) is not None:
                p[k] = getattr(args, k)
        if max(p["procs"], p["actors"]) > p["sessions"]:
            raise SystemExit("--procs and --actors must not exceed --sessions (one turn per session at a time)")
        wanted = tuple(args.systems.split(",")) if args.systems else PROC_SYSTEMS + LOCAL_SYSTEMS
        self.url, self.kwargs = harness.server()
        self.admin = pymysql.connect(autocommit=True, charset="utf8mb4", **self.kwargs)
        with self.admin.cursor() as cur:
            for db in (DB, DB_OA):
                cur.execute(f"DROP DATABASE IF EXISTS `{db}`")
                cur.execute(f"CREATE DATABASE `{db}` DEFAULT CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci")
        self.machine = harness.machine(self.admin)
        # Statements per turn: the server's global counters around each round (private server).
        self.counter = harness.Counter(self.kwargs)
        self.server_cpu = harness.server_cpu(self.kwargs)
        n = p["sessions"]
        seeds = [data.seeded_session(s) for s in range(n)]
        self.seeds = [m for m, _ in seeds]
        self.summaries = [s for _, s in seeds]
        # The coordinator's clients: create the tables, reset and verify (untimed).
        self.clients, self.errors = open_clients(self.url, tuple(s for s in PROC_SYSTEMS if s in wanted), 4)
        for name in list(self.clients):
            err = self.smoke(self.clients[name])
            if err:
                self.errors[name] = err
                self.clients.pop(name).close()
        self.systems = [s for s in PROC_SYSTEMS if s in self.clients]
        ctx = mp.get_context("spawn")
        self.shared = (ctx.Lock(), ctx.Array("i", n, lock=False), ctx.Array("i", n, lock=False),
                       ctx.Array("i", n, lock=False))
        self.picker = Picker(*self.shared)
        self.procs: list = []
        self.pipes: list = []
        if self.systems:
            for me in range(p["procs"]):
                parent, child = ctx.Pipe()
                proc = ctx.Process(target=worker_main, daemon=True, name=f"tp-worker-{me}",
                                   args=(child, me, self.url, self.shared, 4, self.summaries))
                proc.start()
                self.procs.append(proc)
                self.pipes.append(parent)
            for pipe in self.pipes:
                for name, err in pipe.recv().items():
                    self.errors.setdefault(name, f"in a worker: {err}")
            self.systems = [s for s in self.systems if s not in self.errors]
        self.local: dict[str, Any] = {}
        for name in LOCAL_SYSTEMS:
            if name in wanted:
                sync = MysqlAgentStateStore.from_url(self.url, database_name=DB, create_if_not_exist=True,
                                                     pool_size=p["pool_size"])
                self.local[name] = (StoreClient(sync, f"{USER}-threads") if name == "threads" else
                                    AsyncStoreClient(AsyncMysqlAgentStateStore(sync), f"{USER}-async"))
                self.systems.append(name)
        self.rounds: dict[str, list[dict]] = {s: [] for s in self.systems}
        self.latencies: dict[str, list[int]] = {s: [] for s in self.systems}
        self.verified: dict[str, dict] = {s: {"sessions": 0, "ok": 0, "failures": []} for s in self.systems}

    def smoke(self, client: Client) -> Optional[str]:
        try:
            msgs = self.seeds[0][:3]
            client.reset("tp-probe", msgs, turn_state("probe", 0))
            got, _ = client.stored("tp-probe")
            return None if got == msgs else f"smoke test: wrote 3 messages, read back {len(got)}"
        except Exception as exc:  # noqa: BLE001
            return f"smoke test: {type(exc).__name__}: {exc}"[:500]

    def untimed(self, system: str) -> Client:
        c = self.local.get(system)
        if c is None:
            return self.clients[system]
        return c.sync if isinstance(c, AsyncStoreClient) else c

    def reset(self, system: str) -> None:
        client = self.untimed(system)
        for s in range(len(self.seeds)):
            client.reset(sid_of(s), self.seeds[s], turn_state(self.summaries[s], 0))

    def verify(self, system: str, rnd: int, picker: Picker) -> None:
        client, v = self.untimed(system), self.verified[system]
        for s in range(len(self.seeds)):
            k = picker.count[s]
            want = self.seeds[s] + [m for j in range(k) for m in data.turn_messages(s, rnd, j)]
            v["sessions"] += 1
            try:
                got, state = client.stored(sid_of(s))
            except Exception as exc:  # noqa: BLE001
                v["failures"].append(f"round {rnd} {sid_of(s)}: read back failed: {type(exc).__name__}: {exc}"[:300])
                continue
            problem = None
            if got != want:
                problem = diagnose(want, got)
            elif client.keeps_state and state != turn_state(self.summaries[s], k):
                problem = f"state {state!r:.80} after {k} turns"
            if problem:
                v["failures"].append(f"round {rnd} {sid_of(s)} ({k} turns): {problem}")
            else:
                v["ok"] += 1

    def run_round(self, system: str, rnd: int, seconds: float, record: bool = True) -> None:
        self.reset(system)
        p = self.profile
        picker = self.picker if system in PROC_SYSTEMS else Picker.local(p["sessions"])
        picker.clear()
        statements, server_cpu = self.counter.read(), self.server_cpu()
        start = time.monotonic() + 0.05
        end = start + seconds
        if system in PROC_SYSTEMS:
            for pipe in self.pipes:
                pipe.send((system, rnd, start, end))
            results = [pipe.recv() for pipe in self.pipes]
        else:
            results = self.run_local(system, picker, rnd, start, end)
        statements = self.counter.read() - statements
        server_after = self.server_cpu()
        summary, lat = merge(results)
        if not record:
            return
        summary["round"] = rnd
        turns = summary["turns"]
        summary["statements_per_turn"] = round(statements / turns, 2) if turns else None
        # CPU per turn: the worker processes' own (the local systems: None, they share this
        # process with the coordinator) and the server's (None when it is not on this machine).
        client_cpu = [r["cpu_s"] for r in results] if system in PROC_SYSTEMS else []
        summary["client_cpu_us"] = round(sum(client_cpu) / turns * 1e6) if client_cpu and turns else None
        summary["server_cpu_us"] = (round((server_after - server_cpu) / turns * 1e6)
                                    if turns and server_cpu is not None and server_after is not None else None)
        self.rounds[system].append(summary)
        self.latencies[system] += lat
        self.verify(system, rnd, picker)

    def run_local(self, system: str, picker: Picker, rnd: int, start: float, end: float) -> list[dict]:
        client = self.local[system]
        actors = [Actor(picker, rnd, 0, random.Random(2000 + i), self.summaries) for i in range(self.profile["actors"])]
        if system == "async":
            async def go() -> list[dict]:
                return list(await asyncio.gather(*(run_async(client, a, start, end) for a in actors)))
            return asyncio.run(go())
        out: list[dict] = []
        threads = [threading.Thread(target=lambda a=a: out.append(run_sync(client, a, start, end)), daemon=True)
                   for a in actors]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return out

    def run(self, bar, rng: random.Random) -> None:
        warmup = min(1.0, self.profile["seconds"] / 2)
        for system in self.systems:  # connections, imports, caches: one short untimed round each
            bar.set_postfix_str(f"warm-up: {system}")
            self.run_round(system, -1, warmup, record=False)
        for rnd in range(self.profile["rounds"]):
            order = list(self.systems)
            rng.shuffle(order)
            for system in order:
                bar.set_postfix_str(f"round {rnd + 1}: {system}")
                self.run_round(system, rnd, self.profile["seconds"])
                bar.update(1)

    def label(self, system: str) -> tuple[str, str]:
        p = self.profile
        procs = f"{p['procs']} processes"
        load = "get_many" if getattr(self.untimed(system), "many", False) else "get_list + get"
        return {
            "mysql-state": (f"mysql-state {load} + save_many ({procs})", "store"),
            "floor": (f"floor: SELECT + 1 INSERT + COMMIT ({procs})", "floor"),
            "naive": (f"naive: rewrite the whole session ({procs})", "baseline"),
            "blob": (f"one JSON blob per session ({procs})", "baseline"),
            "openai-agents": (f"openai-agents {peers.version('openai-agents')} SQLAlchemySession ({procs})", "peer"),
            "async": (f"mysql-state async: {p['actors']} coroutines, 1 AsyncMysqlAgentStateStore", "store"),
            "threads": (f"mysql-state sync: {p['actors']} threads, 1 store", "store"),
        }[system]

    def results(self) -> dict:
        def per_round(system: str) -> list:
            return [r["turns_per_s"] for r in self.rounds[system]]

        def paired(system: str, ref: str) -> Optional[float]:
            a, b = per_round(system), per_round(ref) if ref in self.rounds else []
            ratios = [x / y for x, y in zip(a, b) if y]
            return round(statistics.median(ratios), 3) if ratios else None

        systems = []
        for s in self.systems:
            lat = sorted(self.latencies[s])
            label, kind = self.label(s)
            entry = {"key": s, "name": label, "kind": kind,
                     "turns_per_s": median(per_round(s)),
                     "p50_us": (harness.quantile(lat, 0.5) or 0) / 1000 or None,
                     "p99_us": (harness.quantile(lat, 0.99) or 0) / 1000 or None,
                     "turns": len(lat), "vs_floor": paired(s, "floor") if s in PROC_SYSTEMS else None,
                     "statements_per_turn": median([r["statements_per_turn"] for r in self.rounds[s]]),
                     "client_cpu_us": median([r.get("client_cpu_us") for r in self.rounds[s]]),
                     "server_cpu_us": median([r.get("server_cpu_us") for r in self.rounds[s]]),
                     "rounds": self.rounds[s], "verified": self.verified[s]}
            if s == "async":
                entry["vs_threads"] = paired(s, "threads")
            systems.append(entry)
        return {"kind": "throughput", "settings": dict(self.profile), "machine": self.machine,
                "systems": systems, "errors": self.errors}

    def close(self) -> None:
        for pipe in self.pipes:
            pipe.send(None)
        for proc in self.procs:
            proc.join(timeout=30)
        for c in self.clients.values():
            c.close()
        for c in self.local.values():
            if isinstance(c, AsyncStoreClient):
                asyncio.run(c.a.aclose())
            else:
                c.close()
        self.counter.close()
        with self.admin.cursor() as cur:
            for db in (DB, DB_OA):
                cur.execute(f"DROP DATABASE IF EXISTS `{db}`")
        self.admin.close()


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """The throughput options (shared with run.py)."""
    ap.add_argument("--procs", type=int, help="worker processes (default 4)")
    ap.add_argument("--rounds", type=int, help="interleaved rounds (default 5; quick 2)")
    ap.add_argument("--seconds", type=float, help="seconds per system per round (default 10; quick 2)")
    ap.add_argument("--sessions", type=int, help="sessions (default 64)")
    ap.add_argument("--actors", type=int, help="coroutines / threads of the async variant (default 64)")
    ap.add_argument("--systems", help="comma-separated subset of: " + ",".join(PROC_SYSTEMS + LOCAL_SYSTEMS))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smoke run: 2 rounds of 2 s")
    ap.add_argument("--out", default=harness.RESULTS, help="output folder")
    ap.add_argument("--name", help="output file stem (default: <date>-throughput; --quick adds -quick)")
    add_arguments(ap)
    args = ap.parse_args(argv)
    return run(args)


def run(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    started = time.time()
    tp = Throughput(args)
    try:
        with tqdm(total=tp.profile["rounds"] * len(tp.systems), unit="round", dynamic_ncols=True,
                  desc="throughput") as bar:
            tp.run(bar, random.Random(20240601))
    finally:
        res = tp.results()
        tp.close()
    res.update(date=dt.datetime.now().isoformat(timespec="seconds"), profile="quick" if args.quick else "full",
               elapsed_s=round(time.time() - started, 1),
               command="python benchmarks/run.py --only throughput" + (" --quick" if args.quick else ""))
    stem = args.name or (dt.date.today().isoformat() + "-throughput" + ("-quick" if args.quick else ""))
    os.makedirs(args.out, exist_ok=True)
    paths = report.write_throughput(res, args.out, stem)
    print("\n".join(report.throughput_table(res)))
    for path in paths:
        print(path)
    bad = [s["key"] for s in res["systems"] if s["verified"]["failures"]]
    if bad:
        print(f"VERIFICATION FAILED for {', '.join(bad)} (see the JSON)", file=sys.stderr)
    print(f"done in {res['elapsed_s']} s")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
