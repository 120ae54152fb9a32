"""EXPERIMENT (not part of make bench): where the time of issue 21's missed paths goes.

    .venv/bin/python benchmarks/experiments/proto_profile.py > /tmp/profile.txt

1. the CPU parts measured alone (dumps, SHA-256 vs BLAKE3 of the prefix, per-item digests);
2. the statements each path sends, from the server's general log (exact SQL, in order);
3. cProfile of each missed path (top functions by own time).
"""

from __future__ import annotations

import os, sys  # noqa: E401

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # benchmarks/: harness
import harness  # noqa: E402,F401

import asyncio
import cProfile
import hashlib
import io
import pstats
import random
import statistics
import time

import orjson
import pymysql

import baselines
import data
import paths

from mysql_state import Keyring
from mysql_state.listsync import PLAIN

DB = paths.DB
U, K = paths.U, paths.K


def best(fn, n=30) -> float:
    ts = []
    for _ in range(n):
        t0 = time.perf_counter_ns()
        fn()
        ts.append(time.perf_counter_ns() - t0)
    return statistics.median(ts) / 1000


def cpu_parts() -> None:
    try:
        import blake3
    except ImportError:
        blake3 = None
    print("## CPU parts (median us)")
    for n in (1000, 10000):
        l0, l1, l2 = paths.turn_lists(n)
        blob = orjson.dumps(l2)
        old = orjson.dumps(l1)
        items = [orjson.dumps(m) for m in l2[-4:]]
        row = {"dumps": best(lambda: orjson.dumps(l2)),
               "memcmp prefix": best(lambda: blob.startswith(memoryview(old)[:-1])),
               "sha256 prefix": best(lambda: hashlib.sha256(memoryview(blob)[1:len(old) - 1]).digest()),
               "blake2b 4 items (salted)": best(lambda: PLAIN.digests(items, n)),
               "encode 4 items": best(lambda: [orjson.dumps(m) for m in l2[-4:]]),
               "blake2b all items": best(lambda: PLAIN.digests([orjson.dumps(m) for m in l2]), 5)}
        if blake3 is not None:
            row["blake3 prefix (1 thread)"] = best(lambda: blake3.blake3(memoryview(blob)[1:len(old) - 1]).digest())
            row["blake3 prefix (AUTO threads)"] = best(
                lambda: blake3.blake3(memoryview(blob)[1:len(old) - 1], max_threads=blake3.blake3.AUTO).digest())
            row["blake3 4 items"] = best(lambda: [blake3.blake3(d).digest(16) for d in items])
        print(f"N={n} ({len(blob) / 1e6:.2f} MB): " + ", ".join(f"{k} {v:.1f}" for k, v in row.items()))


class Log:
    """The statements the server received, from its general log (a private server only)."""

    def __init__(self, kwargs: dict) -> None:
        self.con = pymysql.connect(autocommit=True, charset="utf8mb4", **kwargs)
        with self.con.cursor() as cur:
            cur.execute("SET GLOBAL log_output = 'TABLE'")
            cur.execute("SELECT CONNECTION_ID()")
            self.me = cur.fetchone()[0]

    def of(self, fn) -> list[str]:
        with self.con.cursor() as cur:
            cur.execute("TRUNCATE mysql.general_log")
            cur.execute("SET GLOBAL general_log = 1")
        try:
            fn()
        finally:
            with self.con.cursor() as cur:
                cur.execute("SET GLOBAL general_log = 0")
                cur.execute("SELECT command_type, LEFT(CONVERT(argument USING utf8mb4), 150) FROM mysql.general_log"
                            " WHERE thread_id <> %s ORDER BY event_time", (self.me,))
                rows = cur.fetchall()
        return [f"{c}: {a}" for c, a in rows if c in ("Query", "Execute")]


def profile(label: str, before, op, runs: int = 20) -> None:
    pr = cProfile.Profile()
    for _ in range(runs):
        before()
        pr.enable()
        op()
        pr.disable()
    s = io.StringIO()
    st = pstats.Stats(pr, stream=s).sort_stats("tottime")
    st.print_stats(14)
    total = sum(v[2] for v in st.stats.values()) / runs * 1e6
    print(f"### cProfile: {label} ({runs} runs, {total:.0f} us of profiled time per run)")
    lines = [ln for ln in s.getvalue().splitlines() if ln.strip()]
    start = next(i for i, ln in enumerate(lines) if "ncalls" in ln)
    print("\n".join(lines[start:start + 15]))
    print()


def main() -> None:
    cpu_parts()
    url, kwargs = harness.server()
    admin = pymysql.connect(autocommit=True, charset="utf8mb4", **kwargs)
    with admin.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{DB}`")
        cur.execute(f"CREATE DATABASE `{DB}` DEFAULT CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci")
    a, b = paths.new_store(url), paths.new_store(url)
    enc = paths.new_store(url, encryption=Keyring({"k1": bytes(32)}, current="k1"))
    floor = baselines.Floor(kwargs, DB)
    for s in (a, b):
        s.save(U, "w", "x", 1)
    log = Log(kwargs)
    print("\n## round trip of one statement (median us)")
    print(f"SELECT 1 {best(floor.select1, 200):.0f}; floor INSERT + COMMIT of 1 message "
          f"{best(lambda: floor.insert(['{}']), 200):.0f}")
    results = {}
    for n in (1000, 10000):
        l0, l1, l2 = paths.turn_lists(n)
        sid = f"alt-{n}"
        a.save_list(U, sid, K, l0)

        def alt_before():
            b.save_list(U, sid, K, l0)
            a.save_list(U, sid, K, l1)

        alt_before()
        results[f"alternating N={n}"] = log.of(lambda: b.save_list(U, sid, K, l2))
        profile(f"two workers alternating N={n}", alt_before, lambda: b.save_list(U, sid, K, l2))
        box = {}

        def fresh_before():
            a.save_list(U, sid, K, l0)
            box["f"] = paths.new_store(url)
            box["f"].save(U, "w", "x", 1)

        fresh_before()
        results[f"never-seen N={n}"] = log.of(lambda: box["f"].save_list(U, sid, K, l1))
        box["f"].close()
        profile(f"never-seen process N={n}", fresh_before, lambda: (box["f"].save_list(U, sid, K, l1), box["f"].close()),
                runs=10)
    sid = "append"
    a.save_list(U, sid, K, l0)
    msg = [data.message(random.Random(1), 5)]

    def app_before():
        if a.list_length(U, sid, K) > len(l0):
            a.pop_list(U, sid, K)
        a.get_list(U, sid, K, offset=-1)

    app_before()
    results["append_list (hint known)"] = log.of(lambda: a.append_list(U, sid, K, msg))
    profile("append_list (hint known) N=10000", app_before, lambda: a.append_list(U, sid, K, msg), runs=200)
    profile("floor INSERT + COMMIT 1 message", lambda: None, lambda: floor.insert([orjson.dumps(msg[0]).decode()]),
            runs=200)
    for n in (10, 100):
        a.save_list(U, f"short-{n}", K, data.Conversation(n).base)
    results["get_list N=10"] = log.of(lambda: a.get_list(U, "short-10", K))
    profile("get_list N=10", lambda: None, lambda: a.get_list(U, "short-10", K), runs=300)
    table = f"`{DB}`.`agentscope_sessions`"
    profile("bare SELECT + loads N=10", lambda: None, lambda: floor.select_list(table, f"{U}:short-10", K), runs=300)
    base = data.Conversation(10000).base
    enc.save_list(U, "enc", K, base)
    a.save_list(U, "plain", K, base)
    profile("encrypted get_list N=10000", lambda: None, lambda: enc.get_list(U, "enc", K), runs=5)
    profile("plain get_list N=10000", lambda: None, lambda: a.get_list(U, "plain", K), runs=5)
    try:
        from agentscope.state import AgentState

        from mysql_state.agentscope import AgentStateRepository

        loop = asyncio.new_event_loop()
        run = loop.run_until_complete
        ra, rb = AgentStateRepository(a), AgentStateRepository(b)
        rng = random.Random(3)
        seed = [data.agentscope_msg(rng, data.role(i), f"seed-{i}") for i in range(200)]
        run(ra.save(U, "as", AgentState.model_validate({"session_id": "as", "context": seed})))

        def turn(repo, k):
            st = run(repo.load(U, "as")).model_dump(mode="json")
            st["context"] += [data.agentscope_msg(rng, r, f"{k}-{r}") for r in ("user", "assistant")]
            return AgentState.model_validate(st)

        run(ra.save(U, "as", turn(ra, 1)))
        st = turn(rb, 2)
        results["AgentScope save, the other worker saved last"] = log.of(lambda: run(rb.save(U, "as", st)))
        st = turn(rb, 3)
        results["AgentScope save, this worker saved last"] = log.of(lambda: run(rb.save(U, "as", st)))
        results["AgentScope load"] = log.of(lambda: run(ra.load(U, "as")))
        loop.close()
    except ImportError as exc:
        print("no AgentScope:", exc)
    print("## statements per path (general log)")
    for k, v in results.items():
        print(f"### {k}: {len(v)} statements")
        for line in v:
            print("   ", line)
    for s in (a, b, enc):
        s.close()
    floor.close()
    with admin.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{DB}`")


if __name__ == "__main__":
    main()
