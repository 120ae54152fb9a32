"""Two trees of the package, side by side: the hot paths' cost in each, rounds interleaved.

    .venv/bin/python benchmarks/experiments/hot_path_ab.py OLD_TREE NEW_TREE [ROUNDS]

Each round runs, in a fresh process per tree (A, B, A, B, ...), on the same server
(``MYSQL_URL``): a warm ``append_list`` of one ~530-byte message, a warm ``save_list`` that
appends one to 1 000, a value ``save``, a ``get_list`` of 10 items, and ``transaction`` with one
``save``; 300 calls each (the list save 100), median microseconds. Prints each tree's medians
over the rounds and the ratio new/old, with the load average. Used to check that a change adding
Python to these paths (a counter under a lock, a metrics tuple) did not move them.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time

CHILD = r'''
import json, os, statistics, sys, time, uuid
sys.path.insert(0, sys.argv[1])
from mysql_state import MysqlAgentStateStore
msg = {"role": "assistant", "text": "x" * 500}
db = "ab_" + uuid.uuid4().hex[:8]
s = MysqlAgentStateStore.from_url(os.environ["MYSQL_URL"], database_name=db, create_if_not_exist=True)
def timed(fn, n):
    out = []
    for _ in range(n):
        t = time.perf_counter(); fn(); out.append(time.perf_counter() - t)
    return statistics.median(out) * 1e6
s.save_list("u", "a", "m", [msg]); s.append_list("u", "a", "m", [msg])
items = [msg] * 1000
s.save_list("u", "w", "m", items)
s.save_list("u", "r", "m", [msg] * 10); s.get_list("u", "r", "m")
grow = list(items)
def save_grow():
    grow.append(msg); s.save_list("u", "w", "m", grow)
res = {
    "append_list": timed(lambda: s.append_list("u", "a", "m", [msg]), 300),
    "save_list warm +1 at 1000": timed(save_grow, 100),
    "save value": timed(lambda: s.save("u", "v", "plan", {"step": 1, "text": "y" * 200}), 300),
    "get_list 10": timed(lambda: s.get_list("u", "r", "m"), 300),
    "transaction save": timed(lambda: s.transaction(lambda tx: tx.save("u", "t", "plan", 1)), 300),
}
s.truncate_all_sessions(); s.close()
import pymysql
from mysql_state.pool import parse_url
kw, _ = parse_url(os.environ["MYSQL_URL"]); c = pymysql.connect(**kw); c.cursor().execute(f"DROP DATABASE `{db}`"); c.close()
print(json.dumps(res))
'''


def main() -> None:
    old, new = sys.argv[1], sys.argv[2]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 6
    got: dict[str, list] = {old: [], new: []}
    print(f"load average before: {os.getloadavg()}", flush=True)
    for r in range(rounds):
        for tree in ((old, new) if r % 2 == 0 else (new, old)):
            out = subprocess.run([sys.executable, "-c", CHILD, tree], capture_output=True, text=True, check=True)
            got[tree].append(json.loads(out.stdout))
        print(f"round {r + 1}/{rounds} done", file=sys.stderr, flush=True)
    print(f"load average after: {os.getloadavg()}")
    print(f"| path | {os.path.basename(old) or old} µs | {os.path.basename(new) or new} µs | new/old |")
    print("|---|---:|---:|---:|")
    for path in got[old][0]:
        a = statistics.median(x[path] for x in got[old])
        b = statistics.median(x[path] for x in got[new])
        print(f"| {path} | {a:.0f} | {b:.0f} | {b / a:.3f} |")


if __name__ == "__main__":
    main()
