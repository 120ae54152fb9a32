"""EXPERIMENT (not part of make bench): the client CPU of ``append_list`` against its own
statement sent raw (``paths.RawAppend``: the same conditional upsert, bound before the call,
+ COMMIT), by ``time.process_time`` over interleaved calls. CPU, not wall time: it does not
move with the commit latency of the disk, which moves the wall-time ratios (DESIGN-issue21.md
section 10).

    .venv/bin/python benchmarks/experiments/append_cpu.py [CALLS]
"""

from __future__ import annotations

import os, sys  # noqa: E401

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # benchmarks/: harness
import harness  # noqa: E402

import random
import statistics
import time

import orjson
import pymysql

import data
import paths
from mysql_state import MysqlAgentStateStore


def main() -> None:
    calls = int(sys.argv[1]) if len(sys.argv) > 1 else 1500
    url, kw = harness.server()
    print(harness.place(kw))  # the store's connection and the raw one alike (harness.place)
    admin = pymysql.connect(autocommit=True, charset="utf8mb4", **kw)
    with admin.cursor() as cur:
        cur.execute(f"CREATE DATABASE IF NOT EXISTS `{paths.DB}`")
    store = MysqlAgentStateStore.from_url(url, database_name=paths.DB, create_if_not_exist=True, pool_size=4)
    msg = [data.message(random.Random(1), 5)]
    store.delete(paths.U, "cpu")
    store.save_list(paths.U, "cpu", paths.K, data.Conversation(10).base)
    store.get_list(paths.U, "cpu", paths.K, offset=-1)  # the process knows the hash row: one statement
    raw = paths.RawAppend(kw, store, "cpu-raw", "cpu", orjson.dumps(msg[0]).decode())
    cpu: dict = {"append_list": [], "raw statement + COMMIT": []}
    wall: dict = {k: [] for k in cpu}
    ops = {"append_list": lambda: store.append_list(paths.U, "cpu", paths.K, msg), "raw statement + COMMIT": raw.op}
    order = list(ops)
    for i in range(calls):
        raw.before()
        for name in (order if i % 2 else order[::-1]):
            c, w = time.process_time(), time.perf_counter()
            ops[name]()
            cpu[name].append(time.process_time() - c)
            wall[name].append(time.perf_counter() - w)
    print(f"{calls} interleaved calls ({harness.loadavg_text()})")
    for name in ops:
        print(f"  {name}: CPU {1e6 * statistics.mean(cpu[name][100:]):.1f} us a call (mean), "
              f"wall {1e6 * statistics.median(wall[name][100:]):.0f} us (median)")
    raw.close()
    store.close()
    admin.close()


if __name__ == "__main__":
    main()
