"""EXPERIMENT (not part of make bench): where the server's CPU of a throughput turn goes.

``throughput.py`` reports the store's turn at ~1.8x the floor's server CPU (2026-12-06). This
measures, on a private server (its CPU read from ``/proc``, 10 ms ticks: ITER operations a
figure), the parts of the turn against the floor's (an AgentScope-shaped session of 125
messages and a state value):

* the load: the store's ``get_many`` (a process that read the session before is sent only what
  is new, its hash row marked with what proves the rest) against the floor's bare SELECT of
  every row; then that statement's parts sent raw: without its sub-query, the sub-query alone
  (COUNT, MIN, MAX and the CRC32 sum over every item of the list), and without the CRC32 sum;
* the save: ``save_many`` of the state and the list with 2 new messages (this store wrote the
  session last) against the floor's INSERT of the 2 new rows + COMMIT.

    .venv/bin/python benchmarks/experiments/turn_server_cpu.py [ITER]
"""

from __future__ import annotations

import os, sys  # noqa: E401

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # benchmarks/: harness
import harness  # noqa: E402

import random
import re
import time

import orjson
import pymysql

import baselines
import data
from mysql_state import MysqlAgentStateStore, keys, sql

DB, N, SESSIONS = "turn_server_cpu", 125, 32


def main() -> None:
    iterations = int(sys.argv[1]) if len(sys.argv) > 1 else 400
    url, kw = harness.server()
    cpu = harness.server_cpu(kw)
    if cpu() is None:
        sys.exit("the server's CPU cannot be read here (MYSQL_URL set to another machine's server?)")
    store = MysqlAgentStateStore.from_url(url, database_name=DB, create_if_not_exist=True)
    floor = baselines.Floor(kw, DB)
    rng = random.Random(3)
    base = data.Conversation(N).base
    state = {"turn": 0, "summary": "x" * 300}
    for i in range(SESSIONS):
        store.save_many("u", f"s{i}", values={"state": state}, lists={"context": base})
        floor.replace_rows(f"f{i}", "context", [orjson.dumps(m).decode() for m in base])
    lists = {i: list(base) for i in range(SESSIONS)}
    floor_n = dict.fromkeys(range(SESSIONS), N)
    print(f"load average {harness.loadavg()}; {iterations} operations a figure; server CPU and wall a call")

    def measure(name: str, op) -> None:
        t0, c0 = time.perf_counter(), cpu()
        for k in range(iterations):
            op(k)
        print(f"  {name:58s} server {(cpu() - c0) / iterations * 1e6:6.0f} µs   wall "
              f"{(time.perf_counter() - t0) / iterations * 1e6:6.0f} µs")

    def message(k: int, j: int) -> dict:
        return data.message(rng, 10_000 + 2 * k + j)

    for i in range(SESSIONS):  # read once: the loads below are sent only what is new
        store.get_many("u", f"s{i}", values=["state"], lists=["context"])
    print("the load")
    measure("floor: SELECT every row of the list", lambda k: floor.select_list(floor.table, f"f{k % SESSIONS}", "context"))
    measure("store: get_many(values=[state], lists=[context])",
            lambda k: store.get_many("u", f"s{k % SESSIONS}", values=["state"], lists=["context"]))

    con = pymysql.connect(autocommit=True, database=DB, **kw)
    cur = con.cursor()
    table = store.table.quoted
    m = N - 2
    statement, params = sql.select_many(table, keys.pack("u", "s0"), ["state"], ["context"],
                                        [keys.hash_key("state"), keys.hash_key("context")], since=m)
    full = cur.mogrify(statement, params)
    crc = f"COALESCE(SUM(IF(item_index < {m}, CRC32(state_data) * (item_index + 1), 0)), 0)"
    sub = re.search(r"\(SELECT CONCAT\(COUNT.*?state_key = 'context'\)", full)
    assert crc in full and sub is not None, "the statement's shape changed: update this experiment"
    parts = [
        ("  its statement (since m = N - 2), raw", full),
        ("  without the sub-query", full.replace(sub.group(0), "'0,0,0,0'")),
        ("  without the CRC32 sum", full.replace(crc, "0")),
        ("  the sub-query alone", sub.group(0)[1:-1]),
        ("  the sub-query alone, without the CRC32 sum", sub.group(0)[1:-1].replace(crc, "0")),
        ("  SELECT 1", "SELECT 1"),
    ]
    for name, query in parts:
        def run(k: int, query: str = query) -> None:
            cur.execute(query)
            cur.fetchall()
        measure(name, run)

    print("the save (2 new messages)")

    def floor_save(k: int) -> None:
        i = k % SESSIONS
        floor.append_rows(f"f{i}", "context", floor_n[i], [orjson.dumps(message(k, j)).decode() for j in (0, 1)])
        floor_n[i] += 2

    def store_save(k: int) -> None:
        i = k % SESSIONS
        lists[i] = lists[i] + [message(k, 0), message(k, 1)]
        store.save_many("u", f"s{i}", values={"state": {"turn": k, "summary": "x" * 300}}, lists={"context": lists[i]})

    measure("floor: INSERT the 2 rows + COMMIT", floor_save)
    measure("store: save_many(values={state}, lists={context})", store_save)
    con.close()
    floor.close()
    store.close()


if __name__ == "__main__":
    main()
