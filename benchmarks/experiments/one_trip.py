"""EXPERIMENT (not part of make bench): what a write in ONE round trip would buy.

``append_list`` is its statement + COMMIT: 2 round trips, like the floor (1 INSERT + COMMIT).
Sent in one packet (``statement; COMMIT`` on a connection with multi-statements), the same
statement would be 1 round trip. The store does not do this: its one-statement append writes
the new items whatever the hash row says and relies on a ROLLBACK when the hash row's
condition did not hold, which a COMMIT sent beside it would not wait for. This measures, side
by side (interleaved, the same rounds, medians; the server's threads on one CPU and this
process on the other, ``harness.place``), the floor, the append's statement + COMMIT sent
raw and pre-bound (its limit today), and that statement and COMMIT in one packet (what a
write whose every failed condition is an error, so that the COMMIT commits nothing, could
reach).

    .venv/bin/python benchmarks/experiments/one_trip.py [ROUNDS]
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
from pymysql.constants import CLIENT

import baselines
import data
import paths
from mysql_state import MysqlAgentStateStore


class OneTrip(paths.RawAppend):
    """``RawAppend``'s statement and its COMMIT in one packet (multi-statements)."""

    def __init__(self, kwargs: dict, store, sid: str, like: str, item: str) -> None:
        super().__init__(kwargs, store, sid, like, item)
        self.con.close()
        self.con = pymysql.connect(autocommit=False, charset="utf8mb4", database=paths.DB,
                                   client_flag=CLIENT.MULTI_STATEMENTS, **kwargs)

    def op(self) -> None:
        statement, new = self.next
        with self.con.cursor() as cur:
            cur.execute(statement + "; COMMIT")
            if not cur.lastrowid:
                raise RuntimeError("the raw append's condition did not hold")
            while cur.nextset():  # the COMMIT's reply
                pass
        self.text = new


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 400
    url, kw = harness.server()
    print(harness.place(kw))
    admin = pymysql.connect(autocommit=True, charset="utf8mb4", **kw)
    with admin.cursor() as cur:
        cur.execute(f"CREATE DATABASE IF NOT EXISTS `{paths.DB}`")
    store = MysqlAgentStateStore.from_url(url, database_name=paths.DB, create_if_not_exist=True)
    msg = data.message(random.Random(1), 5)
    text = orjson.dumps(msg).decode()
    store.delete(paths.U, "one-trip")
    store.save_list(paths.U, "one-trip", paths.K, data.Conversation(10).base)
    floor = baselines.Floor(kw, paths.DB)
    raw = paths.RawAppend(kw, store, "one-trip-raw", "one-trip", text)
    one = OneTrip(kw, store, "one-trip-one", "one-trip", text)
    ops = {"floor: INSERT + COMMIT (2 round trips)": (lambda: floor.insert([text]), None),
           "append's statement + COMMIT, raw (2 round trips)": (raw.op, raw.before),
           "append's statement; COMMIT in one packet (1 round trip)": (one.op, one.before)}
    times: dict = {k: [] for k in ops}
    rng = random.Random(7)
    for _ in range(rounds):
        order = list(ops)
        rng.shuffle(order)
        for name in order:
            op, before = ops[name]
            if before:
                before()
            t0 = time.perf_counter()
            op()
            times[name].append(time.perf_counter() - t0)
    fl = statistics.median(times[next(iter(ops))])
    print(f"{rounds} interleaved rounds ({harness.loadavg_text()})")
    for name, xs in times.items():
        m = statistics.median(xs)
        print(f"  {name}: {1e6 * m:.0f} us median, {m / fl:.2f}x the floor")
    for o in (raw, one):
        o.close()
    floor.close()
    store.close()
    admin.close()


if __name__ == "__main__":
    main()
