"""``make bench``: what one agent turn costs, side by side with the baselines and the peers.

    .venv/bin/python benchmarks/run.py            # full run (~25 min on 2 cores)
    .venv/bin/python benchmarks/run.py --quick    # 2-4 minute smoke (not committed)
    .venv/bin/python benchmarks/run.py --only throughput [--quick] [--procs 4]
    .venv/bin/python benchmarks/run.py --only paths [--quick]   # issue 21's paths (paths.py)

Uses ``MYSQL_URL`` if set, else the embedded default server (``mysql_state.server``). First
issue 21's production paths against their targets (``paths.py``: ``<date>-paths.{json,md,png}``),
then ``benchmarks/results/<date>.json`` (every sample), ``<date>.md`` (tables, targets) and
``<date>.png`` (cost against conversation length), then the multi-process throughput benchmark
(``throughput.py``): ``<date>-throughput.{json,csv,md,png}``. See benchmarks/README.md.
"""

from __future__ import annotations

import harness  # noqa: F401  (the shared header: sys.path, matplotlib backend)

import argparse
import asyncio
import datetime as dt
import gc
import os
import random
import sys
import time
from typing import Any, Callable

import orjson  # noqa: E402
import pymysql  # noqa: E402

from mysql_state import Keyring, MysqlAgentStateStore, keys  # noqa: E402
from mysql_state.pool import parse_url  # noqa: E402

import baselines  # noqa: E402
import data  # noqa: E402
import peers as peers_mod  # noqa: E402
import report  # noqa: E402
import throughput  # noqa: E402
from harness import Subject  # noqa: E402

U = "bench"
K = "memory"
DBS = {
    "store": "msbench",
    "langgraph": "msbench_langgraph",
    "openai-agents": "msbench_openai_agents",
    "google-adk": "msbench_google_adk",
}
OURS = "mysql-state"
COLD, WARM_REFERENCE, ENCRYPTED = report.COLD, report.WARM_REFERENCE, report.ENCRYPTED

PROFILES = {
    # rounds: interleaved rounds per cell; min_runs/budget: a subject that spent budget_s
    # seconds (timed + reset) in a cell stops after min_runs runs.
    "full": dict(sizes=(10, 100, 1000, 10000), rounds=41, min_runs=9, budget_s=8.0,
                 tp_threads=(1, 4, 16), tp_rounds=5, tp_sessions=8, tp_turns=8,
                 value_rounds=61),
    "quick": dict(sizes=(10, 100, 1000), rounds=5, min_runs=3, budget_s=0.5,
                  tp_threads=(1, 4), tp_rounds=1, tp_sessions=4, tp_turns=4,
                  value_rounds=7),
}


class Bench:
    def __init__(self, args) -> None:
        self.args = args
        self.profile = PROFILES["quick" if args.quick else "full"]
        if args.sizes:
            self.profile["sizes"] = tuple(int(x) for x in args.sizes.split(","))
        self.rng = random.Random(20240601)
        self.url, self.kwargs = harness.server()
        self.admin = pymysql.connect(autocommit=True, charset="utf8mb4", **self.kwargs)
        with self.admin.cursor() as cur:
            for name, db in DBS.items():
                # langgraph-checkpoint-mysql fails with error 1267 (illegal mix of collations)
                # in a utf8mb4_unicode_ci database on MariaDB: give it general_ci (see peers.py).
                coll = "utf8mb4_general_ci" if name == "langgraph" else "utf8mb4_unicode_ci"
                cur.execute(f"DROP DATABASE IF EXISTS `{db}`")
                cur.execute(f"CREATE DATABASE `{db}` DEFAULT CHARACTER SET utf8mb4 COLLATE {coll}")
        db = DBS["store"]
        self.store = self.new_store()
        self.other = self.new_store()  # another worker: warm connections, no snapshot of the list
        self.ring = Keyring({"k1": os.urandom(32)}, current="k1")
        self.enc = self.new_store(encryption=self.ring)  # the same workloads, encrypted at rest
        self.enc_other = self.new_store(encryption=self.ring)
        self.table = f"`{db}`.`{self.store.table_name}`"
        self.floor = baselines.Floor(self.kwargs, db)
        self.java = baselines.JavaReplica(self.kwargs, db)
        self.naive = baselines.NaiveStore(self.kwargs, db)
        self.blob = baselines.BlobStore(self.kwargs, db)
        self.loop = asyncio.new_event_loop()
        self.peers: dict[str, Any] = {}
        self.peer_errors: dict[str, str] = {}
        if not args.no_peers:
            self.peers, self.peer_errors = peers_mod.start_peers(self.kwargs, DBS, self.loop)
            probe = data.Conversation(4).base
            for name in list(self.peers):
                err = peers_mod.check_peer(self.peers[name], "probe", probe)
                if err:
                    self.peer_errors[name] = err
                    self.peers.pop(name)
        self.counter = harness.Counter(self.kwargs)
        self.cells: list[dict] = []
        self.throughput: list[dict] = []
        self.machine = harness.machine(self.admin)

    def new_store(self, **kw: Any) -> MysqlAgentStateStore:
        return MysqlAgentStateStore.from_url(self.url, database_name=DBS["store"], create_if_not_exist=True,
                                             pool_size=16, **kw)

    # ---- per-N setup ------------------------------------------------------------------------

    def seed(self, conv: data.Conversation) -> dict:
        n = conv.n
        sid = f"n{n}"
        ctx: dict = {"sid": sid, "packed": keys.pack(U, sid), "conv": conv, "esid": sid + "-enc",
                     "asid": sid + "-append", "aesid": sid + "-append-enc"}
        self.store.save_list(U, sid, K, conv.base)
        self.enc.save_list(U, ctx["esid"], K, conv.base)
        self.store.save_list(U, ctx["asid"], K, conv.base)
        self.enc.save_list(U, ctx["aesid"], K, conv.base)
        self.java.restore(sid, K, conv.base, 0)
        self.naive.save_list(sid, K, conv.base)
        self.blob.save(sid, {K: conv.base})
        ctx["peer_items"] = {}
        for name, p in self.peers.items():
            items = {
                "base": p.convert(conv.base),
                "turn1": p.convert(conv.turn1),
                "turn2": p.convert(conv.turn2),
                "grow": p.convert([conv.grown_last, conv.grow_new]),
                "summary": p.convert([conv.summary]),
            }
            items["full1"] = items["base"] + items["turn1"]
            items["full2"] = items["base"] + items["turn2"]
            items["grown"] = items["base"][:-1] + items["grow"]
            items["compacted"] = items["summary"] + items["base"][-10:]
            ctx["peer_items"][name] = items
            try:
                p.seed(sid, items["base"])
            except Exception as exc:  # noqa: BLE001
                self.peer_errors[name] = f"seed at N={n}: {type(exc).__name__}: {exc}"[:500]
        for name in [n_ for n_ in self.peers if n_ in self.peer_errors]:
            self.peers.pop(name)
        return ctx

    def unseed(self, ctx: dict) -> None:
        sid = ctx["sid"]
        self.store.delete(U, sid)
        self.store.delete(U, ctx["asid"])
        self.enc.delete(U, ctx["esid"])
        self.enc.delete(U, ctx["aesid"])
        with self.admin.cursor() as cur:
            for t in ("java_sessions", "naive_sessions", "blob_sessions"):
                cur.execute(f"DELETE FROM `{DBS['store']}`.`{t}` WHERE session_id = %s", (sid,))
            cur.execute(f"TRUNCATE TABLE `{DBS['store']}`.`floor_rows`")
        lg = self.peers.get("langgraph")
        if lg is not None:
            lg.saver.delete_thread(sid)

    # ---- subjects ---------------------------------------------------------------------------

    def ours_reset(self, sid: str, base: list) -> Callable[[], None]:
        return lambda: self.store.save_list(U, sid, K, base)

    def cold(self, sid: str, base: list, values_of: Callable[[], list], encrypted: bool = False) -> Subject:
        """save_list from another store object (another worker or process: its connections
        open, but no snapshot of this list), after this one saved ``base``."""
        store, other = (self.enc, self.enc_other) if encrypted else (self.store, self.other)

        def before() -> None:
            store.save_list(U, sid, K, base)
            other._forget()  # noqa: SLF001 - nothing of this list in that "process"

        values = values_of()
        return Subject(COLD + (ENCRYPTED if encrypted else ""), "store",
                       lambda: other.save_list(U, sid, K, values), before)

    def reference(self, full: list, texts: list[str]) -> Subject:
        """What a warm save cannot avoid: the floor's INSERT + COMMIT, one ``orjson.dumps`` of the
        list and one comparison of its bytes with what was stored."""
        stored = orjson.dumps(full[:-1])

        def run() -> None:
            self.floor.insert(texts)
            blob = orjson.dumps(full)
            _ = blob.startswith(memoryview(stored)[:-1])

        return Subject(WARM_REFERENCE, "floor", run)

    def write_subjects(self, ctx: dict, workload: str) -> list[Subject]:
        conv: data.Conversation = ctx["conv"]
        sid, base, n = ctx["sid"], conv.base, conv.n
        reset = self.ours_reset(sid, base)
        enc = lambda msgs: [orjson.dumps(m).decode() for m in msgs]  # noqa: E731
        out: list[Subject] = []
        if workload in ("append1", "append2"):
            k = 1 if workload == "append1" else 2
            turn, full = conv.turn(k), conv.with_turn(k)
            texts = enc(turn)
            # The appends each have a session of their own that grows by the turn every round,
            # as a conversation does and as the floor's table does: no reset before them. (A
            # reset that deleted the appended rows right before the timed append made it insert
            # over rows just deleted, which the floor never does: ~2x its cost, 2026-12-05 night.)
            out += [
                Subject(f"{OURS} append_list", "store", lambda: self.store.append_list(U, ctx["asid"], K, turn)),
                Subject(f"{OURS} save_list (warm)", "store", lambda: self.store.save_list(U, sid, K, full), reset),
                self.cold(sid, base, lambda: full),
                Subject("floor: 1 INSERT + COMMIT", "floor", lambda: self.floor.insert(texts)),
                self.reference(full, texts),
                Subject(f"{OURS} append_list" + ENCRYPTED, "store",
                        lambda: self.enc.append_list(U, ctx["aesid"], K, turn)),
                Subject(f"{OURS} save_list (warm)" + ENCRYPTED, "store",
                        lambda: self.enc.save_list(U, ctx["esid"], K, full),
                        lambda: self.enc.save_list(U, ctx["esid"], K, base)),
                self.cold(ctx["esid"], base, lambda: full, encrypted=True),
                Subject("Java store algorithm (replica)", "baseline", lambda: self.java.save_list(sid, K, full),
                        lambda: self.java.restore(sid, K, base, n)),
                Subject("naive: rewrite whole list", "baseline", lambda: self.naive.save_list(sid, K, full)),
                Subject("one JSON blob per session", "baseline", lambda: self.blob.save(sid, {K: full})),
            ]
            for name, p in self.peers.items():
                it = ctx["peer_items"][name]
                if name == "langgraph":
                    out.append(Subject(p.label, "peer", lambda p=p, v=it[f"full{k}"]: p.write_list(sid, v)))
                elif name == "openai-agents":
                    out.append(Subject(p.label, "peer", lambda p=p, v=it[f"turn{k}"]: p.append(sid, v),
                                       after=lambda p=p: p.pop(sid, k)))
                elif name == "google-adk":
                    box: dict = {}

                    def before(p=p, v=it[f"turn{k}"], box=box):
                        box["e"] = p.fresh(v)

                    out.append(Subject(p.label, "peer", lambda p=p, box=box: p.append(sid, box["e"]), before,
                                       lambda p=p, box=box: p.drop_events(sid, box["e"])))
        elif workload == "grow":
            texts = enc([conv.grown_last, conv.grow_new])
            out += [
                Subject(f"{OURS} save_list (warm)", "store", lambda: self.store.save_list(U, sid, K, conv.grown), reset),
                self.cold(sid, base, lambda: conv.grown),
                Subject("floor: 1 INSERT + COMMIT", "floor", lambda: self.floor.insert(texts)),
                Subject("Java store algorithm (replica)", "baseline", lambda: self.java.save_list(sid, K, conv.grown),
                        lambda: self.java.restore(sid, K, base, n - 1)),
                Subject("naive: rewrite whole list", "baseline", lambda: self.naive.save_list(sid, K, conv.grown)),
                Subject("one JSON blob per session", "baseline", lambda: self.blob.save(sid, {K: conv.grown})),
            ]
            for name, p in self.peers.items():
                it = ctx["peer_items"][name]
                if name == "langgraph":
                    out.append(Subject(p.label, "peer", lambda p=p, v=it["grown"]: p.write_list(sid, v)))
                elif name == "openai-agents":
                    def restore(p=p, last=it["base"][-1:]):
                        p.pop(sid, 2)
                        p.append(sid, last)

                    out.append(Subject(p.label, "peer", lambda p=p, v=it["grow"]: p.replace_last(sid, v),
                                       after=restore))
        elif workload == "compact":
            texts = enc(conv.compacted)
            out += [
                Subject(f"{OURS} save_list (warm)", "store", lambda: self.store.save_list(U, sid, K, conv.compacted), reset),
                self.cold(sid, base, lambda: conv.compacted),
                Subject("floor: 1 INSERT + COMMIT", "floor", lambda: self.floor.insert(texts)),
                Subject("Java store algorithm (replica)", "baseline", lambda: self.java.save_list(sid, K, conv.compacted),
                        lambda: self.java.restore(sid, K, base, 0)),
                Subject("naive: rewrite whole list", "baseline", lambda: self.naive.save_list(sid, K, conv.compacted),
                        lambda: self.naive.save_list(sid, K, base)),
                Subject("one JSON blob per session", "baseline", lambda: self.blob.save(sid, {K: conv.compacted}),
                        lambda: self.blob.save(sid, {K: base})),
            ]
            for name, p in self.peers.items():
                it = ctx["peer_items"][name]
                if name == "langgraph":
                    out.append(Subject(p.label, "peer", lambda p=p, v=it["compacted"]: p.write_list(sid, v)))
                elif name == "openai-agents":
                    out.append(Subject(p.label, "peer", lambda p=p, v=it["compacted"]: p.replace_all(sid, v),
                                       after=lambda p=p, v=it["base"]: p.replace_all(sid, v)))
        return out

    def read_subjects(self, ctx: dict, workload: str) -> list[Subject]:
        sid, packed = ctx["sid"], ctx["packed"]
        out: list[Subject] = []
        if workload == "load_all":
            out += [
                Subject(f"{OURS} get_list", "store", lambda: self.store.get_list(U, sid, K)),
                Subject(f"{OURS} get_list" + ENCRYPTED, "store", lambda: self.enc.get_list(U, ctx["esid"], K)),
                Subject("bare SELECT ORDER BY item_index + orjson.loads", "floor",
                        lambda: self.floor.select_list(self.table, packed, K)),
                Subject("floor: SELECT 1", "floor", self.floor.select1),
                Subject("Java store algorithm (replica)", "baseline", lambda: self.java.get_list(sid, K)),
                Subject("one JSON blob per session", "baseline", lambda: self.blob.load(sid)[K]),
            ]
            for name, p in self.peers.items():
                out.append(Subject(p.label, "peer", lambda p=p: p.load_all(sid)))
        else:
            out += [
                Subject(f"{OURS} get_list(offset=-50)", "store", lambda: self.store.get_list(U, sid, K, offset=-50)),
                Subject("bare SELECT ... DESC LIMIT 50 + orjson.loads", "floor",
                        lambda: self.floor.select_tail(self.table, packed, K, 50)),
                Subject("floor: SELECT 1", "floor", self.floor.select1),
                Subject("Java store algorithm (replica, loads all)", "baseline", lambda: self.java.get_list(sid, K)[-50:]),
                Subject("one JSON blob per session", "baseline", lambda: self.blob.load(sid)[K][-50:]),
            ]
            for name, p in self.peers.items():
                if name == "langgraph":
                    out.append(Subject(p.label + " (loads all)", "peer", lambda p=p: p.load_all(sid)[-50:]))
                else:
                    out.append(Subject(p.label, "peer", lambda p=p: p.load_tail(sid, 50)))
        return out

    def not_applicable(self, workload: str) -> dict:
        na = {}
        for name in self.peers:
            p = self.peers[name]
            why = p.why_not.get(workload.rstrip("12"))
            if why and workload.rstrip("12") not in p.supports:
                na[p.label] = why
        return na

    # ---- running ----------------------------------------------------------------------------

    def cell(self, workload: str, n: int, subjects: list[Subject], rounds: int, bar) -> None:
        bar.set_postfix_str(f"N={n} {workload}")
        harness.run_cell(subjects, rounds=rounds, min_runs=self.profile["min_runs"], budget_s=self.profile["budget_s"],
                         counter=self.counter, rng=self.rng, tick=lambda: bar.update(1))
        self.cells.append({"workload": workload, "n": n, "subjects": [s.summary() for s in subjects],
                           "not_applicable": self.not_applicable(workload)})

    def run_lists(self, bar) -> None:
        rounds = self.profile["rounds"]
        for n in self.profile["sizes"]:
            bar.set_postfix_str(f"N={n} seeding")
            ctx = self.seed(data.Conversation(n))
            gc.collect()
            gc.freeze()
            for wl in ("load_all", "load_tail"):
                self.cell(wl, n, self.read_subjects(ctx, wl), rounds, bar)
            for wl in ("append1", "append2", "grow", "compact"):
                self.cell(wl, n, self.write_subjects(ctx, wl), rounds, bar)
            self.unseed(ctx)
            gc.unfreeze()
            gc.collect()

    def run_values(self, bar) -> None:
        rng = random.Random(7)
        rounds = self.profile["value_rounds"]
        db = DBS["store"]
        for label, size in (("2 KB", 2000), ("200 KB", 200_000)):
            value = {"kind": "blob", "text": data.text(rng, size - 30)}
            text = orjson.dumps(value).decode()
            sid = f"value-{size}"
            packed = keys.pack(U, sid)
            self.store.save(U, sid, "value", value)
            self.java.save(sid, "value", value)
            self.floor.upsert_value(sid, text)
            saves = [
                Subject(f"{OURS} save", "store", lambda: self.store.save(U, sid, "value", value)),
                Subject("floor: 1 INSERT + COMMIT", "floor", lambda: self.floor.upsert_value(sid, text)),
                Subject("Java store algorithm (replica)", "baseline", lambda: self.java.save(sid, "value", value)),
            ]
            self.cell(f"save {label}", 0, saves, rounds, bar)
            gets = [
                Subject(f"{OURS} get", "store", lambda: self.store.get(U, sid, "value")),
                Subject("bare SELECT + orjson.loads", "floor",
                        lambda: self.floor.select_value(f"`{db}`.`agentscope_sessions`", packed, "value")),
                Subject("floor: SELECT 1", "floor", self.floor.select1),
                Subject("Java store algorithm (replica)", "baseline", lambda: self.java.get(sid, "value")),
            ]
            self.cell(f"get {label}", 0, gets, rounds, bar)

    def run_throughput(self, bar) -> None:
        """Many sessions at once: each thread appends turns to its own sessions (N=100 at start)."""
        p = self.profile
        conv = data.Conversation(100)
        sessions, turns = p["tp_sessions"], p["tp_turns"]
        turn = conv.turn2
        texts = [orjson.dumps(m).decode() for m in turn]

        def sids(i: int) -> list[str]:
            return [f"tp{i}-{j}" for j in range(sessions)]

        def ours_append(i: int):
            ss = sids(i)
            for s in ss:
                self.store.save_list(U, s, K, conv.base)
            return lambda j: self.store.append_list(U, ss[j % sessions], K, turn)

        def ours_save(i: int):
            ss = sids(i)
            lists = {s: list(conv.base) for s in ss}
            for s in ss:
                self.store.save_list(U, s, K, lists[s])

            def op(j: int) -> None:
                s = ss[j % sessions]
                lists[s].extend(turn)
                self.store.save_list(U, s, K, lists[s])
            return op

        def floor(i: int):
            f = baselines.Floor(self.kwargs, DBS["store"])
            return lambda j: f.insert(texts)

        def java(i: int):
            jv = baselines.JavaReplica(self.kwargs, DBS["store"])
            ss = sids(i)
            lists = {s: list(conv.base) for s in ss}
            for s in ss:
                jv.restore(s, K, conv.base, 0)

            def op(j: int) -> None:
                s = ss[j % sessions]
                lists[s].extend(turn)
                jv.save_list(s, K, lists[s])
            return op

        def blob(i: int):
            b = baselines.BlobStore(self.kwargs, DBS["store"])
            ss = sids(i)
            lists = {s: list(conv.base) for s in ss}

            def op(j: int) -> None:
                s = ss[j % sessions]
                lists[s].extend(turn)
                b.save(s, {K: lists[s]})
            return op

        systems = [
            (f"{OURS} append_list", "store", ours_append),
            (f"{OURS} save_list (warm)", "store", ours_save),
            ("floor: 1 INSERT + COMMIT", "floor", floor),
            ("Java store algorithm (replica)", "baseline", java),
            ("one JSON blob per session", "baseline", blob),
        ]
        for threads in p["tp_threads"]:
            bar.set_postfix_str(f"throughput {threads} threads")
            runs: dict[str, list[dict]] = {name: [] for name, _, _ in systems}
            for _ in range(p["tp_rounds"]):
                order = list(systems)
                self.rng.shuffle(order)
                for name, kind, make in order:
                    runs[name].append(harness.throughput(make, threads, sessions * turns))
                    with self.admin.cursor() as cur:  # sessions start at N=100 again
                        for t in ("java_sessions", "blob_sessions"):
                            cur.execute(f"DELETE FROM `{DBS['store']}`.`{t}` WHERE session_id LIKE 'tp%%'")
                bar.update(1)
            for name, kind, _ in systems:
                rs = sorted(runs[name], key=lambda r: r["ops_per_s"])
                mid = rs[len(rs) // 2]
                self.throughput.append({"name": name, "kind": kind, "threads": threads,
                                        "ops_per_s": mid["ops_per_s"], "median_latency_us": mid["median_latency_us"],
                                        "p90_latency_us": mid["p90_latency_us"],
                                        "runs_ops_per_s": [round(r["ops_per_s"], 1) for r in runs[name]],
                                        "errors": [e for r in runs[name] for e in r.get("errors", [])][:3]})

    def close(self) -> None:
        for p in self.peers.values():
            try:
                p.close()
            except Exception:  # noqa: BLE001
                pass
        for s in (self.store, self.other, self.enc, self.enc_other):
            s.close()
        for b in (self.floor, self.java, self.naive, self.blob, self.counter):
            b.close()
        with self.admin.cursor() as cur:
            for db in DBS.values():
                cur.execute(f"DROP DATABASE IF EXISTS `{db}`")
        self.admin.close()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="1-2 minute smoke run (N <= 1000, few rounds)")
    ap.add_argument("--sizes", help="comma-separated conversation lengths (overrides the profile)")
    ap.add_argument("--no-peers", action="store_true", help="skip the Python peers")
    ap.add_argument("--out", default=harness.RESULTS, help="output folder")
    ap.add_argument("--name", help="output file stem (default: the date; --quick adds -quick)")
    ap.add_argument("--only", choices=("lists", "throughput", "adapters", "paths"),
                    help="run only the per-operation benchmark (lists), the throughput one, the adapters one, "
                         "or issue 21's production paths (paths.py)")
    ap.add_argument("--adapters", action="store_true", help="same as --only adapters")
    ap.add_argument("--placement", choices=("cross", "same", "free"), default="cross",
                    help="where the server's threads and the per-operation cells run (harness.place); "
                         "the throughput cells run free")
    throughput.add_arguments(ap.add_argument_group("throughput (benchmarks/throughput.py)"))
    args = ap.parse_args(argv)
    if args.adapters:
        args.only = "adapters"
    rc = 0
    quiet = args.quick or args.only is not None  # make bench: each part starts on a quiet machine
    if args.only in (None, "paths"):  # first: issue 21's production paths against their targets
        import paths

        quiet or harness.settle("paths")
        rc = paths.main((["--quick"] if args.quick else []) + (["--name", args.name + "-paths"] if args.name else [])
                        + ["--out", args.out, "--placement", args.placement] + ([] if quiet else ["--settle"]))
    if args.only is None:
        quiet or harness.settle("lists")
    rc = (run_lists(args) if args.only in (None, "lists") else 0) or rc
    if args.only in (None, "throughput"):
        quiet or harness.settle("throughput")
        tp = argparse.Namespace(**vars(args))
        tp.name = args.name and args.name + "-throughput"
        if args.no_peers and not args.systems:
            tp.systems = ",".join(s for s in throughput.PROC_SYSTEMS + throughput.LOCAL_SYSTEMS if s != "openai-agents")
        rc = throughput.run(tp) or rc
    if args.only in (None, "adapters") and not args.no_peers:  # a separate hook: benchmarks/adapters_bench.py
        import adapters_bench

        quiet or harness.settle("adapters")
        url, kwargs = harness.server()
        rows, failed = adapters_bench.run_adapters(kwargs, url, rounds=5 if args.quick else 15)
        adapters_bench.print_table(rows)
        stem = args.name or (dt.date.today().isoformat() + ("-quick" if args.quick else ""))
        for path in adapters_bench.write_results(rows, failed, args.out, stem, adapters_machine(url)):
            print(path)
    return rc


def adapters_machine(url: str) -> str:
    """The machine line of the adapters' results (as the other reports print it)."""
    admin = pymysql.connect(autocommit=True, charset="utf8mb4", **parse_url(url)[0])
    try:
        m = harness.machine(admin)
    finally:
        admin.close()
    return f"Machine: {report.machine_line(m)}; versions: " + ", ".join(
        f"{d} {peers_mod.version(d)}" for d in ("openai-agents", "google-adk"))


def run_lists(args) -> int:
    from tqdm import tqdm

    started = time.time()
    bench = Bench(args)
    p = bench.profile
    total = len(p["sizes"]) * 6 * p["rounds"] + 4 * p["value_rounds"] + len(p["tp_threads"]) * p["tp_rounds"]
    # The per-operation cells pinned (harness.place: a free placement biases each connection's
    # round trip, so the ratio of the store's to the floor's, by up to 2x); throughput free.
    placement = harness.place(bench.kwargs, args.placement)
    try:
        with tqdm(total=total, unit="round", dynamic_ncols=True, desc="bench") as bar:
            bench.run_lists(bar)
            bench.run_values(bar)
            harness.unplace(bench.kwargs)
            bench.run_throughput(bar)
    finally:
        harness.unplace(bench.kwargs)
        results = {
            "date": dt.datetime.now().isoformat(timespec="seconds"),
            "profile": "quick" if args.quick else "full",
            "settings": {k: v for k, v in p.items()},
            "machine": bench.machine,
            "peer_errors": bench.peer_errors,
            "peers": {name: peer.label for name, peer in bench.peers.items()},
            "cells": bench.cells,
            "throughput": bench.throughput,
            "elapsed_s": round(time.time() - started, 1),
            "command": "make bench" + ("" if not args.quick else "  (benchmarks/run.py --quick)"),
            "placement": placement + " (the per-operation cells; the throughput cells run free)",
        }
        bench.close()
    stem = args.name or (dt.date.today().isoformat() + ("-quick" if args.quick else ""))
    os.makedirs(args.out, exist_ok=True)
    paths = report.write_all(results, args.out, stem)
    for path in paths:
        print(path)
    print(f"done in {results['elapsed_s']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
