"""The session catalog at scale (issue 12): 100 000 sessions and 1 000 000 rows, then the time of
a page of 100 (every user, first and a deep page), one user's 1 000 sessions, and the cost the
catalog adds to a write. Seeds with multi-row INSERTs of raw SQL (rows as the store writes
them, catalog rows included); writes benchmarks/results/catalog.json.

    python benchmarks/catalog_bench.py [--sessions 100000] [--rows-per-session 10]
"""

from __future__ import annotations

import harness  # the shared header (sys.path), settle()

import argparse
import json
import os
import statistics
import time

import pymysql  # noqa: E402

from mysql_state import MysqlAgentStateStore  # noqa: E402
from mysql_state.pool import parse_url  # noqa: E402


def seed(url: str, db: str, sessions: int, per: int) -> None:
    kwargs, _ = parse_url(url)
    con = pymysql.connect(charset="utf8mb4", autocommit=True, **kwargs)
    t = f"`{db}`.`agentscope_sessions`"
    with con.cursor() as cur:
        batch, cat = [], []
        for s in range(sessions):
            user = "big" if s < 1000 else f"u{s % 5000}"
            sid = f"{user}:s{s}"
            for i in range(per - 1):
                batch.append(f"('{sid}','memory',{i},'{{\"role\":\"user\",\"text\":\"message {i}\"}}',1,"
                             f"NOW() - INTERVAL {s} SECOND, NOW() - INTERVAL {s} SECOND)")
            batch.append(f"('{sid}','memory:_hash',0,'{{}}',1,NOW() - INTERVAL {s} SECOND, NOW() - INTERVAL {s} SECOND)")
            cat.append(f"('__catalog__','{sid}',0,'{{}}',1,NOW() - INTERVAL {s} SECOND, NOW() - INTERVAL {s} SECOND)")
            if len(batch) >= 5000:
                cur.execute(f"INSERT INTO {t} VALUES " + ",".join(batch))
                batch = []
            if len(cat) >= 5000:
                cur.execute(f"INSERT INTO {t} VALUES " + ",".join(cat))
                cat = []
        for rows in (batch, cat):
            if rows:
                cur.execute(f"INSERT INTO {t} VALUES " + ",".join(rows))
        cur.execute(f"ANALYZE TABLE {t}")
    con.close()


def timed(fn, n: int = 30) -> dict:
    fn()
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return {"median_ms": round(statistics.median(times), 2), "p95_ms": round(sorted(times)[int(n * 0.95) - 1], 2)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sessions", type=int, default=100_000)
    ap.add_argument("--rows-per-session", type=int, default=10)
    args = ap.parse_args()
    url, kwargs = harness.server()
    db = "bench_catalog"
    con = pymysql.connect(charset="utf8mb4", autocommit=True, **kwargs)
    with con.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{db}`")
    store = MysqlAgentStateStore.from_url(url, database_name=db, create_if_not_exist=True)
    t0 = time.perf_counter()
    seed(url, db, args.sessions, args.rows_per_session)
    seeded = time.perf_counter() - t0
    harness.settle("catalog: the pages (after seeding)")
    with con.cursor() as cur:
        cur.execute(f"SELECT COUNT(*) FROM `{db}`.`agentscope_sessions` WHERE session_id LIKE '%:%'")
        rows = cur.fetchone()[0]
    first = store.sessions(limit=100)
    deep_cursor = None
    for _ in range(50):
        deep_cursor = store.sessions(limit=100, cursor=deep_cursor).next_cursor
    out = {
        "sessions": args.sessions, "rows": rows, "seed_seconds": round(seeded, 1),
        "page_of_100_all_users": timed(lambda: store.sessions(limit=100)),
        "page_of_100_after_5000": timed(lambda: store.sessions(limit=100, cursor=deep_cursor)),
        "page_of_100_one_user_of_1000": timed(lambda: store.sessions("big", limit=100)),
        "all_1000_of_one_user": timed(lambda: store.sessions("big", limit=1000), 10),
        "first_page_items": len(first.items),
    }
    # what the catalog adds to a write: a value save and a warm append, with and without it
    store.save_list("w", "s", "m", [{"i": 0}])
    out["append_list"] = timed(lambda: store.append_list("w", "s", "m", [{"i": 1}]), 200)
    out["save_value"] = timed(lambda: store.save("w", "s", "v", {"x": 1}), 200)
    store.close()
    with con.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{db}`")
    con.close()
    harness.write_json(out, os.path.join(harness.RESULTS, "catalog.json"))
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
