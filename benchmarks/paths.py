"""Issue 21's production paths, side by side in one run, each against its target.

    .venv/bin/python benchmarks/paths.py            # ~40 interleaved rounds per cell (make bench)
    .venv/bin/python benchmarks/paths.py --quick    # smoke: 5 rounds, N <= 1000 (not committed)

What it measures (~530-byte messages, ``data.Conversation``; every operation of a cell in the
same rounds, a fresh random order per round; medians; statements counted BY THE SERVER, the
global ``Questions`` + ``Com_admin_commands`` of the private server, minimum of 3 runs):

* warm ``save_list`` (this worker wrote the last turn: the next turn, 2 messages, of a list
  that grows) vs the floor (one INSERT of those messages' bytes + COMMIT, rows that grow too) +
  ``orjson.dumps(list)`` + one memcmp (the issue's reference); no cell resets its list between
  rounds (a reset deletes the rows the timed save then inserts again, over records just
  delete-marked: a cost the floor never pays);
* two workers taking turns on one list: each save is the next turn (2 messages) of one growing
  list, by the worker that did not save the turn before (so the saver last saw the list one
  turn ago, when it saved it). Two store objects (own pools, own caches) in this process, and
  once as two real processes (the save timed inside the worker process);
* a process that has never seen the list (a new store object, its connections open) saves the
  next turn of a list another worker saved last;
* ``append_list`` of one message (the worker knows the list's hash row: it read the list) vs
  the floor (one INSERT of that message + COMMIT);
* an AgentScope 2.x turn: ``AgentStateRepository.load`` then ``save`` by the worker that did
  NOT save the last turn, and by the one that did;
* ``get_list`` of a short list (N = 10, 100) vs a bare SELECT + ``orjson.loads``; encrypted
  ``get_list`` at N = 10 000 vs plain. Each twice: by a process that reads the list again (it
  is sent only what is new, nothing here: docs/lists.md, "Reads") and read whole every time
  (a store with ``snapshot_bytes=0`` keeps nothing: a process that did not read it before);
* throughput, 4 processes x 64 sessions (``throughput.py``, mysql-state and the floor only);
* beside the issue's figures: each two-process save also against a warm save timed inside a
  worker process (like for like: both woken from a pipe), and the physical limit of the
  sub-millisecond paths, their own statement sent raw and pre-bound (``append_list``'s
  conditional upsert + COMMIT; ``get_list``'s read + ``orjson.loads``), against the same
  reference: where that limit is above a target, no client code can meet the target. Those
  two cells run 400 rounds (a commit's jitter moves a 40-round median by 0.3x).

The latency cells run with the server's threads on one CPU and this process (and its workers)
on the others (``--placement cross``, ``harness.place``: a free placement biases the ratio of
two connections by up to 2x on a small machine); the throughput cell runs free.

Writes ``benchmarks/results/<date>-paths.{json,md,png}``; the load average is printed beside
the figures (before and after each cell).
"""

from __future__ import annotations

import harness  # noqa: F401  (the header: sys.path, matplotlib backend)

import argparse
import asyncio
import datetime as dt
import gc
import multiprocessing as mp
import os
import random
import statistics
import sys
import time
from typing import Any, Callable, Optional

import orjson
import pymysql

import baselines
import data
import report
import throughput
from harness import Subject

U = "paths"
K = "memory"
DB = "msbench_paths"
PROFILES = {
    # fast: the rounds of the sub-millisecond cells (append, short reads), whose medians a
    # commit's or a wake-up's jitter moves by 0.3x at 40 rounds.
    "full": dict(sizes=(1000, 10000), rounds=40, fast=400, short=(10, 100), enc_n=10000, as_n=200,
                 tp=dict(procs=4, sessions=64, actors=64, rounds=3, seconds=5.0)),
    "quick": dict(sizes=(1000,), rounds=5, fast=20, short=(10, 100), enc_n=1000, as_n=100,
                  tp=dict(procs=4, sessions=64, actors=64, rounds=1, seconds=2.0)),
}
# The targets: (what is compared, limit, "ratio" <= limit | "rt" <= limit | "min" >= limit)
TARGETS = {
    "warm": ("warm save_list / (floor + orjson.dumps(list) + memcmp)", 1.3),
    "alt": ("two workers alternating / warm", 1.25),
    "alt_rt": ("two workers alternating: statements per save", 3),
    "fresh": ("never-seen process / warm", 1.4),
    "append": ("append_list(1 message) / floor (1 INSERT + COMMIT)", 1.3),
    "append_rt": ("append_list: statements", 2),
    "as_load_rt": ("AgentScope load: statements (any worker)", 1),
    "as_save_rt": ("AgentScope save: statements (any worker)", 3),
    "tp": ("throughput 4 procs x 64 sessions / floor's turns/s (at least)", 0.8),
    "short": ("get_list short list / bare SELECT + loads", 1.2),
    "enc": ("encrypted get_list N=10 000 / plain", 1.5),
    # The same two for a whole read every time (a process that did not read the list before;
    # a process that did is sent only the new items: docs/lists.md, "Reads").
    "short_whole": ("get_list short list, whole (nothing kept) / bare SELECT + loads", 1.2),
    "enc_whole": ("encrypted get_list N=10 000, whole (nothing kept) / plain whole", 1.5),
    "hash": ("checkpoint hash: BLAKE3 / SHA-256 (why blake3; no target of its own)", None),
    # Like for like: the two processes' saves against a warm save timed inside a worker process
    # too (a process that waited on its pipe between saves, as a production worker waits
    # between requests), beside the figure against the coordinator's warm save.
    "alt_proc": ("two workers alternating (2 processes) / warm save timed in a worker process", 1.25),
    # The physical limit of a path: its own statement sent raw (pre-bound, no client code but the
    # driver's) against the same reference. A target below it cannot be met by any client code.
    "append_limit": ("limit: append_list's statement alone (raw, + COMMIT) / floor", None),
    "short_limit": ("limit: get_list's statement alone (raw) + loads / bare SELECT + loads", None),
}


def turn_lists(n: int) -> tuple[list, list, list]:
    """Turn t-1 (N messages), turn t (+2) and turn t+1 (+2 more), the same in every process."""
    conv = data.Conversation(n)
    rng = random.Random(f"paths-{n}")
    more = [data.message(rng, n + 2), data.message(rng, n + 3)]
    l1 = conv.base + conv.turn2
    return conv.base, l1, l1 + more


def new_store(url: str, **kw: Any):
    from mysql_state import MysqlAgentStateStore

    return MysqlAgentStateStore.from_url(url, database_name=DB, create_if_not_exist=True, pool_size=4, **kw)


def turn_of(n: int, k: int) -> list:
    """Turn ``k`` (k >= 1) of the alternating workload on the list of length ``n``: 2 messages."""
    r = random.Random(f"alt-{n}-{k}")
    return [data.message(r, 0), data.message(r, 1)]


class RawAppend:
    """``append_list``'s statement for one message, sent raw: the table's own multi-row upsert
    head and ``APPEND_IF_HASH_TAIL`` (the hash row written only if it still is the text last
    written, by its SHA-256), the hash row and the item, bound before the timed call; then
    COMMIT. A list of its own (session ``sid``) whose hash row text is the size of the store's
    list ``like``'s (the session of ``U`` and key ``K`` the store saved)."""

    def __init__(self, kwargs: dict, store: Any, sid: str, like: str, item: str) -> None:
        import hashlib
        import re

        from mysql_state import keys, sql

        self.con = pymysql.connect(autocommit=False, charset="utf8mb4", database=DB, **kwargs)
        self.sid, self.hk, self.item = keys.pack(U, sid), keys.hash_key(K), item
        table = f"`{DB}`.`{store.table_name}`"
        with self.con.cursor() as cur:
            cur.execute(f"SELECT state_data FROM {table} WHERE session_id = %s"
                        " AND state_key = %s AND item_index = 0", (keys.pack(U, like), self.hk))
            self.template = cur.fetchone()[0]
        self.re, self.sha = re.compile(r'"sum":"[0-9a-f]+"'), hashlib.sha256
        t = store.table.statements
        self.statement = t["UPSERT_ROWS_HEAD"] + ",".join([sql.UPSERT_ROW] * 2) + t["APPEND_IF_HASH_TAIL"]
        self.n, self.text, self.next = 1_000_000, self._text(0), None
        with self.con.cursor() as cur:
            cur.execute(f"INSERT INTO {table} (session_id, state_key, item_index, state_data, version)"
                        " VALUES (%s, %s, 0, %s, 1) ON DUPLICATE KEY UPDATE state_data = VALUES(state_data)",
                        (self.sid, self.hk, self.text))
        self.con.commit()

    def _text(self, i: int) -> str:
        return self.re.sub('"sum":"%s"' % self.sha(b"%d" % i).hexdigest()[:32], self.template, count=1)

    def before(self) -> None:
        """The next statement's text, bound untimed: the new hash row, the item at the next index."""
        self.n += 1
        new = self._text(self.n)
        h = self.sha(self.text.encode()).hexdigest()
        params = (self.sid, self.hk, 0, new, self.sid, K, self.n, self.item, self.hk, h, self.hk, h)
        self.next = (self.con.cursor().mogrify(self.statement, params), new)

    def op(self) -> None:
        statement, new = self.next
        with self.con.cursor() as cur:
            cur.execute(statement)
            if not cur.lastrowid:
                raise RuntimeError("the raw append's condition did not hold")
        self.con.commit()
        self.text = new

    def close(self) -> None:
        self.con.close()


def worker_main(conn: Any, url: str, sizes: tuple) -> None:
    """A worker process: one store of its own; ``(sid, n, k)`` saves the list of length ``n``
    after ``k`` alternating turns (built here, untimed) and answers the save's duration (ns,
    timed here)."""
    store = new_store(url)
    built: dict = {}
    store.save(U, "warm-up", "x", 1)  # open the write connection
    conn.send("ready")
    while True:
        msg = conn.recv()
        if msg is None:
            break
        sid, n, k = msg
        have, lst = built.get(sid, (0, None))
        if lst is None or have > k:
            have, lst = 0, list(turn_lists(n)[0])
        for j in range(have + 1, k + 1):
            lst = lst + turn_of(n, j)
        built[sid] = (k, lst)
        t0 = time.perf_counter_ns()
        store.save_list(U, sid, K, lst)
        conn.send(time.perf_counter_ns() - t0)
    store.close()


class Proc:
    """The coordinator's end of one worker process."""

    def __init__(self, ctx: Any, url: str, sizes: tuple, name: str) -> None:
        self.pipe, child = ctx.Pipe()
        self.proc = ctx.Process(target=worker_main, args=(child, url, sizes), daemon=True, name=name)
        self.proc.start()
        if self.pipe.recv() != "ready":
            raise RuntimeError(f"{name} did not start")

    def save(self, sid: str, n: int, k: int) -> int:
        self.pipe.send((sid, n, k))
        return self.pipe.recv()

    def close(self) -> None:
        self.pipe.send(None)
        self.proc.join(timeout=30)


class Paths:
    def __init__(self, args: argparse.Namespace) -> None:
        from mysql_state import Keyring

        self.args = args
        self.p = dict(PROFILES["quick" if args.quick else "full"])
        if args.sizes:
            self.p["sizes"] = tuple(int(x) for x in args.sizes.split(","))
        if args.rounds:
            self.p["rounds"] = args.rounds
        self.rng = random.Random(20261203)
        self.url, self.kwargs = harness.server()
        # Before any connection or worker process: they inherit it (the throughput cell frees it).
        self.placement = harness.place(self.kwargs, args.placement)
        self.admin = pymysql.connect(autocommit=True, charset="utf8mb4", **self.kwargs)
        with self.admin.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{DB}`")
            cur.execute(f"CREATE DATABASE `{DB}` DEFAULT CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci")
        self.a = new_store(self.url)  # worker A
        self.b = new_store(self.url)  # worker B: own pools, own caches
        self.ring = Keyring({"k1": os.urandom(32)}, current="k1")
        self.enc = new_store(self.url, encryption=self.ring)
        # Whole reads every time, as by a process that did not read the list before (nothing
        # kept: snapshot_bytes=0), beside the path of a process that reads it again.
        self.a_whole = new_store(self.url, snapshot_bytes=0)
        self.enc_whole = new_store(self.url, encryption=self.ring, snapshot_bytes=0)
        self.table = f"`{DB}`.`{self.a.table_name}`"
        self.floor = baselines.Floor(self.kwargs, DB)
        self.counter = harness.Counter(self.kwargs)
        self.machine = harness.machine(self.admin)
        ctx = mp.get_context("spawn")
        self.procs = [Proc(ctx, self.url, self.p["sizes"], f"paths-worker-{i}") for i in range(2)]
        self.loop = asyncio.new_event_loop()
        self.cells: list[dict] = []
        self.figures: list[dict] = []
        self.throughput: Optional[dict] = None

    # ---- running a cell -------------------------------------------------------------------

    def cell(self, name: str, n: int, subjects: list[Subject], bar: Any, rounds: Optional[int] = None) -> dict:
        bar.set_postfix_str(f"{name} N={n}")
        load_before = harness.loadavg()
        gc.collect()
        harness.run_cell(subjects, rounds=rounds or self.p["rounds"], min_runs=rounds or self.p["rounds"],
                         budget_s=1e9, counter=self.counter, rng=self.rng, tick=lambda: bar.update(1))
        c = {"cell": name, "n": n, "loadavg_before": [round(x, 2) for x in load_before],
             "loadavg_after": [round(x, 2) for x in harness.loadavg()],
             "subjects": {s.name: s.summary() for s in subjects}}
        for s in subjects:
            if s.error:
                print(f"  {name} N={n}: {s.name} failed: {s.error}", file=sys.stderr)
        self.cells.append(c)
        return c

    def figure(self, key: str, n: Optional[int], value: Optional[float], detail: str, cell: Optional[dict]) -> None:
        what, limit = TARGETS[key]
        if value is None or limit is None:
            met = None
        elif key == "tp":
            met = value >= limit
        else:
            met = value <= limit
        load = cell["loadavg_after"] if cell else [round(x, 2) for x in harness.loadavg()]
        self.figures.append({"key": key, "n": n, "what": what, "value": value, "target": limit, "met": met,
                             "detail": detail, "loadavg": load})
        mark = "-" if met is None else ("MET" if met else "MISSED")
        v = "-" if value is None else (f"{value:.2f}" if isinstance(value, float) else str(value))
        print(f"{what}{'' if n is None else f' (N={n})'}: {v} (target {'>=' if key == 'tp' else '<='} {limit}) "
              f"{mark}  [{detail}; load {load[0]:.2f}]", flush=True)

    # ---- the cells ------------------------------------------------------------------------

    def saves(self, n: int, bar: Any) -> None:
        l0, l1, l2 = turn_lists(n)
        texts1 = [orjson.dumps(m).decode() for m in l1[n:]]
        stored0 = orjson.dumps(l0)
        a, b = self.a, self.b
        sw, sa, sp, sf = (f"warm-{n}", f"alt-{n}", f"proc-{n}", f"fresh-{n}")
        for s in (a, b):
            s.save(U, "warm-up", "x", 1)
        a.save_list(U, sw, K, l0)
        a.save_list(U, sa, K, l0)
        a.save_list(U, sf, K, l0)
        self.procs[0].save(sp, n, 0)
        spw = f"proc-warm-{n}"
        self.procs[0].save(spw, n, 0)
        box: dict = {}
        del l2

        # The warm save: the worker that saved the last turn saves the next one (2 messages) of
        # a list that grows, as a conversation does; its reference grows alike (the floor's
        # INSERT of the new messages' bytes, orjson.dumps of the whole list, one memcmp against
        # the last one). No reset between rounds: a reset deletes the rows the timed save then
        # inserts again, over records just delete-marked, which the floor never pays (~2x for
        # an append, 2026-12-05).
        def grow(box: dict, turn: int) -> list:
            """Add the next turn (2 messages, ``turn_of(n, turn(k))``) to ``box``'s list; its messages."""
            box["k"] += 1
            new = turn_of(n, turn(box["k"]))
            box["list"] = box["list"] + new
            return new

        warm = {"list": list(l0), "k": 0}
        ref = {"list": list(l0), "k": 0, "texts": texts1, "last": stored0}

        def warm_before() -> None:
            grow(warm, lambda k: -k)

        def ref_before() -> None:
            ref["texts"] = [orjson.dumps(m).decode() for m in grow(ref, lambda k: -k)]

        def reference() -> None:
            self.floor.insert(ref["texts"])
            blob = orjson.dumps(ref["list"])
            _ = blob.startswith(memoryview(ref["last"])[:-1])
            ref["last"] = blob

        # Two workers truly alternating: each save is the next turn (2 messages) of one growing
        # list, by the worker that did NOT save the one before; so each saver last saw the list
        # one turn ago. No reset in between (a reset by the saver would make it the last writer).
        alt = {"list": list(l0), "k": 0}
        a.save_list(U, sa, K, l0)
        b.save_list(U, sa, K, l0 + turn_of(n, 1))
        alt["k"], alt["list"] = 1, l0 + turn_of(n, 1)

        def alt_before() -> None:
            alt["k"] += 1
            alt["list"] = alt["list"] + turn_of(n, alt["k"])

        def alt_op() -> None:  # turn k by worker A when k is even, by B when odd
            (b if alt["k"] % 2 else a).save_list(U, sa, K, alt["list"])

        proc = {"k": 1}
        self.procs[1].save(sp, n, 1)

        def proc_op() -> int:
            proc["k"] += 1
            return self.procs[proc["k"] % 2].save(sp, n, proc["k"])

        pwarm = {"k": 0}

        def proc_warm_op() -> int:  # the same worker saves every turn: it wrote the last one
            pwarm["k"] += 1
            return self.procs[0].save(spw, n, pwarm["k"])

        # The never-seen process: another worker saved the last turn of a list that grows (no
        # reset, as for the warm save), then a new store saves the next turn.
        fresh = {"list": list(l0), "k": 0}

        def fresh_before() -> None:
            grow(fresh, lambda k: 10**6 + k)
            a.save_list(U, sf, K, fresh["list"])  # the last turn, by worker A
            grow(fresh, lambda k: 10**6 + k)  # the turn to time
            f = box["f"] = new_store(self.url)
            f.save(U, "warm-up", "x", 1)  # connections open (the write pool's), nothing of this list
            f.exists(U, sf)  # and the read pool's

        def fresh_after() -> None:
            box.pop("f").close()

        subjects = [
            Subject("warm save_list", "store", lambda: a.save_list(U, sw, K, warm["list"]), warm_before),
            Subject("reference: floor + orjson.dumps(list) + memcmp", "floor", reference, ref_before),
            Subject("two workers alternating (2 store objects)", "store", alt_op, alt_before),
            Subject("two workers alternating (2 processes)", "store", proc_op, self_timed=True),
            Subject("warm save_list (1 process, timed in it)", "store", proc_warm_op, self_timed=True),
            Subject("never-seen process (new store, connections open)", "store",
                    lambda: box["f"].save_list(U, sf, K, fresh["list"]), fresh_before, fresh_after),
        ]
        c = self.cell("saves", n, subjects, bar)
        m = {k: v.get("median_us") for k, v in c["subjects"].items()}
        rt = {k: v.get("round_trips") for k, v in c["subjects"].items()}
        warm, ref = m["warm save_list"], m["reference: floor + orjson.dumps(list) + memcmp"]
        self.figure("warm", n, warm / ref if warm and ref else None,
                    f"warm {warm:.0f} us, reference {ref:.0f} us, warm {rt['warm save_list']} statements", c)
        for label in ("two workers alternating (2 store objects)", "two workers alternating (2 processes)"):
            v = m.get(label)
            self.figure("alt", n, v / warm if v and warm else None, f"{label}: {v:.0f} us vs warm {warm:.0f} us", c)
            self.figure("alt_rt", n, rt.get(label), label, c)
        v, pw = m.get("two workers alternating (2 processes)"), m.get("warm save_list (1 process, timed in it)")
        self.figure("alt_proc", n, v / pw if v and pw else None, f"{v:.0f} us vs warm in a worker {pw:.0f} us", c)
        v = m["never-seen process (new store, connections open)"]
        self.figure("fresh", n, v / warm if v and warm else None,
                    f"{v:.0f} us vs warm {warm:.0f} us, "
                    f"{rt['never-seen process (new store, connections open)']} statements", c)
        self.checkpoint_hash(n, l1, bar)

    def checkpoint_hash(self, n: int, lst: list, bar: Any) -> None:
        """The one hash a process that never saw the list pays (the checkpoint: the list's JSON
        but its last item): SHA-256 (hash rows v2) vs BLAKE3 (v3): the reason for ``blake3``."""
        import hashlib

        import blake3

        blob = orjson.dumps(lst)
        body = memoryview(blob)[1:len(blob) - len(orjson.dumps(lst[-1])) - 2]
        subjects = [Subject("SHA-256 of the checkpoint (list-v2)", "baseline", lambda: hashlib.sha256(body).digest()),
                    Subject("BLAKE3 of the checkpoint (list-v3)", "store", lambda: blake3.blake3(body).digest())]
        c = self.cell("checkpoint hash", n, subjects, bar)
        s = c["subjects"]
        sha, b3 = s[subjects[0].name].get("median_us"), s[subjects[1].name].get("median_us")
        self.figure("hash", n, b3 / sha if sha and b3 else None,
                    f"BLAKE3 {b3:.0f} us vs SHA-256 {sha:.0f} us over {len(body) / 1e6:.2f} MB", c)

    def append(self, n: int, bar: Any) -> None:
        l0 = turn_lists(n)[0]
        sid = f"append-{n}"
        msg = [data.message(random.Random(f"append-{n}"), n)]
        text = [orjson.dumps(m).decode() for m in msg]
        a = self.a
        a.save_list(U, sid, K, l0)

        def before() -> None:
            if a.list_length(U, sid, K) > n:
                a.pop_list(U, sid, K)
            a.get_list(U, sid, K, offset=-1)  # the worker read the list: it knows its hash row

        raw = RawAppend(self.kwargs, a, f"raw-append-{n}", sid, text[0])
        subjects = [
            Subject("append_list(1 message)", "store", lambda: a.append_list(U, sid, K, msg), before),
            Subject("floor: 1 INSERT + COMMIT (1 message)", "floor", lambda: self.floor.insert(text)),
            Subject("limit: append_list's statement alone (raw, pre-bound) + COMMIT", "floor", raw.op, raw.before),
        ]
        try:
            c = self.cell("append", n, subjects, bar, rounds=self.p["fast"])
        finally:
            raw.close()
        s = c["subjects"]
        ours, fl = s["append_list(1 message)"].get("median_us"), s["floor: 1 INSERT + COMMIT (1 message)"].get("median_us")
        lim = s["limit: append_list's statement alone (raw, pre-bound) + COMMIT"].get("median_us")
        self.figure("append", n, ours / fl if ours and fl else None, f"append {ours:.0f} us, floor {fl:.0f} us", c)
        self.figure("append_limit", n, lim / fl if lim and fl else None,
                    f"statement alone {lim:.0f} us, floor {fl:.0f} us: no client code can do better", c)
        self.figure("append_rt", n, s["append_list(1 message)"].get("round_trips"), "append_list", c)

    def agentscope(self, bar: Any) -> None:
        try:
            from agentscope.state import AgentState

            from mysql_state.agentscope import AgentStateRepository
        except ImportError as exc:
            print(f"AgentScope 2.x not installed ({exc}): its turn is not measured", file=sys.stderr)
            return
        n = self.p["as_n"]
        rng = random.Random("paths-agentscope")
        seed = [data.agentscope_msg(rng, data.role(i), f"seed-{i}") for i in range(n)]
        ra, rb = AgentStateRepository(self.a), AgentStateRepository(self.b)
        run = self.loop.run_until_complete
        sid = "agentscope"
        run(ra.save(U, sid, AgentState.model_validate({"session_id": sid, "context": seed})))
        count = [0]
        box: dict = {}

        def turn_msgs() -> list:
            count[0] += 1
            r = random.Random(f"as-turn-{count[0]}")
            return [data.agentscope_msg(r, role, f"t{count[0]}-{role}") for role in ("user", "assistant")]

        def turn(repo: Any) -> None:
            state = run(repo.load(U, sid))
            d = state.model_dump(mode="json")
            d["context"] += turn_msgs()
            run(repo.save(U, sid, AgentState.model_validate(d)))

        def prepared(repo: Any) -> None:
            state = run(repo.load(U, sid))
            d = state.model_dump(mode="json")
            d["context"] += turn_msgs()
            box["state"] = AgentState.model_validate(d)

        subjects = [
            Subject("AgentScope load (the other worker saved last)", "store", lambda: run(rb.load(U, sid)),
                    lambda: turn(ra)),
            Subject("AgentScope save (the other worker saved last)", "store", lambda: run(rb.save(U, sid, box["state"])),
                    lambda: (turn(ra), prepared(rb))),
            Subject("AgentScope save (this worker saved last)", "store", lambda: run(ra.save(U, sid, box["state"])),
                    lambda: (turn(ra), prepared(ra))),
        ]
        c = self.cell("agentscope", n, subjects, bar)
        s = c["subjects"]
        self.figure("as_load_rt", n, s["AgentScope load (the other worker saved last)"].get("round_trips"),
                    f"{s['AgentScope load (the other worker saved last)'].get('median_us', 0):.0f} us", c)
        for label in ("AgentScope save (the other worker saved last)", "AgentScope save (this worker saved last)"):
            self.figure("as_save_rt", n, s[label].get("round_trips"), f"{label}: {s[label].get('median_us', 0):.0f} us", c)

    def reads(self, bar: Any) -> None:
        subjects = []
        for n in self.p["short"]:
            sid = f"short-{n}"
            self.a.save_list(U, sid, K, data.Conversation(n).base)
            subjects += [
                Subject(f"get_list N={n}", "store", lambda sid=sid: self.a.get_list(U, sid, K)),
                Subject(f"get_list N={n}, whole (nothing kept)", "store", lambda sid=sid: self.a_whole.get_list(U, sid, K)),
                Subject(f"bare SELECT + loads N={n}", "floor",
                        lambda sid=sid: self.floor.select_list(self.table, f"{U}:{sid}", K)),
                Subject(f"limit: get_list's statement alone (raw, pre-bound) + loads N={n}", "floor",
                        self.raw_read(sid)),
            ]
        c = self.cell("short reads", 0, subjects, bar, rounds=self.p["fast"])
        s = c["subjects"]
        for n in self.p["short"]:
            ours, fl = s[f"get_list N={n}"].get("median_us"), s[f"bare SELECT + loads N={n}"].get("median_us")
            self.figure("short", n, ours / fl if ours and fl else None, f"get_list {ours:.0f} us, bare {fl:.0f} us", c)
            whole = s[f"get_list N={n}, whole (nothing kept)"].get("median_us")
            self.figure("short_whole", n, whole / fl if whole and fl else None,
                        f"get_list whole {whole:.0f} us, bare {fl:.0f} us", c)
            lim = s[f"limit: get_list's statement alone (raw, pre-bound) + loads N={n}"].get("median_us")
            self.figure("short_limit", n, lim / fl if lim and fl else None,
                        f"statement alone {lim:.0f} us, bare {fl:.0f} us: no client code can do better", c)
        n = self.p["enc_n"]
        base = data.Conversation(n).base
        self.a.save_list(U, f"plain-{n}", K, base)
        self.enc.save_list(U, f"enc-{n}", K, base)
        subjects = [
            Subject(f"get_list N={n}", "store", lambda: self.a.get_list(U, f"plain-{n}", K)),
            Subject(f"get_list N={n} encrypted", "store", lambda: self.enc.get_list(U, f"enc-{n}", K)),
            Subject(f"get_list N={n}, whole (nothing kept)", "store", lambda: self.a_whole.get_list(U, f"plain-{n}", K)),
            Subject(f"get_list N={n} encrypted, whole (nothing kept)", "store",
                    lambda: self.enc_whole.get_list(U, f"enc-{n}", K)),
        ]
        c = self.cell("encrypted read", n, subjects, bar, rounds=max(5, self.p["rounds"] // 2))
        s = c["subjects"]
        ours, plain = s[f"get_list N={n} encrypted"].get("median_us"), s[f"get_list N={n}"].get("median_us")
        self.figure("enc", n, ours / plain if ours and plain else None, f"encrypted {ours:.0f} us, plain {plain:.0f} us", c)
        ours, plain = (s[f"get_list N={n} encrypted, whole (nothing kept)"].get("median_us"),
                       s[f"get_list N={n}, whole (nothing kept)"].get("median_us"))
        self.figure("enc_whole", n, ours / plain if ours and plain else None,
                    f"encrypted {ours:.0f} us, plain {plain:.0f} us, both read whole", c)

    def raw_read(self, sid: str) -> Callable[[], list]:
        """``get_list``'s whole-list statement for a short list (``SELECT_ITEMS``: the items
        with their indexes and the hash row, which the damage check needs), bound once, sent
        on the floor's read connection; then ``orjson.loads`` of the items (the bare read's
        decode). No check, no store code: the statement's own cost."""
        from mysql_state import keys

        con, loads = self.floor.rcon, orjson.loads
        statement = con.cursor().mogrify(self.a.table.statements["SELECT_ITEMS"],
                                         (K, keys.pack(U, sid), K, keys.hash_key(K)))

        def op() -> list:
            with con.cursor() as cur:
                cur.execute(statement)
                rows = cur.fetchall()
            return [loads(r[1]) for r in rows if r[0] >= 0]
        return op

    def run_throughput(self, bar: Any) -> None:
        tpp = self.p["tp"]
        ns = argparse.Namespace(quick=False, systems="mysql-state,floor", **tpp)
        bar.set_postfix_str("throughput")
        load_before = harness.loadavg()
        harness.unplace(self.kwargs)  # 4 processes and the server: every CPU, as in production
        tp = throughput.Throughput(ns)
        try:
            tp.run(_Quiet(), random.Random(20240601))
        finally:
            res = tp.results()
            tp.close()
        self.throughput = res
        by = {s["key"]: s for s in res["systems"]}
        ours, fl = by.get("mysql-state"), by.get("floor")
        c = {"loadavg_after": [round(x, 2) for x in harness.loadavg()], "loadavg_before": load_before}
        if ours and fl:
            ok = not ours["verified"]["failures"]
            self.figure("tp", None, ours["vs_floor"],
                        f"{ours['turns_per_s']:.0f} vs {fl['turns_per_s']:.0f} turns/s, "
                        f"{ours['statements_per_turn']} vs {fl['statements_per_turn']} statements a turn, "
                        f"same-process share {statistics.median([r['same_process'] for r in ours['rounds']]):.2f}, "
                        f"verified {'ok' if ok else 'FAILED'}", c)
        bar.update(1)

    def close(self) -> None:
        for p in self.procs:
            p.close()
        for s in (self.a, self.b, self.enc, self.a_whole, self.enc_whole):
            s.close()
        self.floor.close()
        self.counter.close()
        with self.admin.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{DB}`")
        self.admin.close()
        self.loop.close()


class _Quiet:
    def set_postfix_str(self, s: str) -> None:
        pass

    def update(self, n: int = 1) -> None:
        pass


# ---- results -------------------------------------------------------------------------------


def markdown(res: dict) -> str:
    m = res["machine"]
    out = [f"# Issue 21's paths, {res['date']}", "",
           f"Machine: {report.machine_line(m)}.", "",
           f"Load average at the start {m['loadavg']}, at the end {res['loadavg_end']} "
           f"({m['nproc']} cores). {res['note']}", "",
           (res.get("placement") or "placement: free") + " (the latency cells; the throughput cell runs free).", "",
           f"Command: `{res['command']}`; {res['settings']['rounds']} interleaved rounds per cell"
           + (f" ({res['settings']['fast']} for the sub-millisecond append and short-read cells)"
              if res["settings"].get("fast") else "") + ", medians; "
           "statements counted by the server (global Questions + Com_admin_commands, private server, "
           "minimum of 3 runs).", "",
           "| path | N | measured | target | | detail | load |", "|---|---:|---:|---:|---|---|---:|"]
    for f in res["figures"]:
        v = "-" if f["value"] is None else (f"{f['value']:.2f}" if isinstance(f["value"], float) else str(f["value"]))
        op = ">=" if f["key"] == "tp" else "<="
        mark = "-" if f["met"] is None else ("**MET**" if f["met"] else "**MISSED**")
        target = "-" if f["target"] is None else f"{op} {f['target']}"
        out.append(f"| {f['what']} | {f['n'] or ''} | {v} | {target} | {mark} | {f['detail']} | "
                   f"{f['loadavg'][0]:.2f} |")
    out += ["", "## Every operation (median µs, statements)", ""]
    for c in res["cells"]:
        size = f" N={c['n']}" if c["n"] else ""
        out += [f"### {c['cell']}{size} (load {c['loadavg_before'][0]:.2f} -> {c['loadavg_after'][0]:.2f})", "", "| operation | median | min | p90 | runs | statements |",
                "|---|---:|---:|---:|---:|---:|"]
        for name, s in c["subjects"].items():
            if "error" in s and "median_us" not in s:
                out.append(f"| {name} | failed: {s['error'][:120]} | | | | |")
                continue
            out.append(f"| {name} | {report.fmt_us(s.get('median_us'))} | {report.fmt_us(s.get('min_us'))} | "
                       f"{report.fmt_us(s.get('p90_us'))} | {s.get('runs', 0)} | {s.get('round_trips', '-')} |")
        out.append("")
    return "\n".join(out)


def plot(res: dict, path: str) -> Optional[str]:
    try:
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    figs = [f for f in res["figures"] if f["value"] is not None and f["target"] is not None]
    labels = [f"{f['key']}{'' if f['n'] is None else ' N=' + str(f['n'])}" for f in figs]
    share = [(f["target"] / f["value"] if f["key"] == "tp" else f["value"] / f["target"]) for f in figs]
    fig, ax = plt.subplots(figsize=(10, 0.35 * len(figs) + 1.5))
    colors = ["tab:green" if f["met"] else "tab:red" for f in figs]
    ax.barh(range(len(figs)), share, color=colors)
    ax.axvline(1.0, color="black", lw=1)
    ax.set_yticks(range(len(figs)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("measured / target (<= 1 is met; throughput: target / measured)")
    ax.set_title(f"Issue 21's paths, {res['date'][:10]} (load average {res['machine']['loadavg'][0]:.1f})")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main(argv: Optional[list] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smoke run (not committed)")
    ap.add_argument("--sizes", help="comma-separated list lengths for the save cells (default 1000,10000)")
    ap.add_argument("--rounds", type=int, help="interleaved rounds per cell (default 40)")
    ap.add_argument("--no-throughput", action="store_true", help="skip the 4-process throughput run")
    ap.add_argument("--placement", choices=("cross", "same", "free"), default="cross",
                    help="where the server's threads and the benchmark run (harness.place); the "
                         "throughput cell always runs free")
    ap.add_argument("--settle", action="store_true",
                    help="wait for a quiet machine before the throughput cell (harness.settle; make bench does)")
    ap.add_argument("--note", default="", help="a sentence for the results (e.g. the machine was busy)")
    ap.add_argument("--out", default=harness.RESULTS)
    ap.add_argument("--name", help="output stem (default <date>-paths, --quick adds -quick)")
    args = ap.parse_args(argv)
    started = time.time()
    print(harness.loadavg_text(), flush=True)
    bench = Paths(args)
    p = bench.p
    total = (p["rounds"] * (2 * len(p["sizes"]) + 1) + p["fast"] * (len(p["sizes"]) + 1)
             + max(5, p["rounds"] // 2) + 1)
    try:
        with harness.progress(total, "paths") as bar:
            for n in p["sizes"]:
                bench.saves(n, bar)
                bench.append(n, bar)
            bench.agentscope(bar)
            bench.reads(bar)
            if not args.no_throughput:
                if args.settle:
                    harness.settle("paths: throughput")  # after the cells before it, as every part
                bench.run_throughput(bar)
    finally:
        res = {"kind": "paths", "date": dt.datetime.now().isoformat(timespec="seconds"),
               "profile": "quick" if args.quick else "full", "settings": {k: v for k, v in p.items()},
               "machine": bench.machine, "placement": bench.placement, "loadavg_end": [round(x, 2) for x in harness.loadavg()],
               "note": args.note, "figures": bench.figures, "cells": bench.cells, "throughput": bench.throughput,
               "elapsed_s": round(time.time() - started, 1),
               "command": "python benchmarks/paths.py" + (" --quick" if args.quick else "")
               + ("" if args.placement == "cross" else f" --placement {args.placement}")}
        bench.close()
    stem = args.name or (dt.date.today().isoformat() + "-paths" + ("-quick" if args.quick else ""))
    base = os.path.join(args.out, stem)
    paths = [harness.write_json(res, base + ".json"), harness.write_text(markdown(res), base + ".md"),
             plot(res, base + ".png")]
    for path in paths:
        if path:
            print(path)
    print(f"{harness.loadavg_text()}; done in {res['elapsed_s']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
