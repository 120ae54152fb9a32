"""Write throughput and fail-over pause on a throwaway 3-node Galera cluster (loopback).

    python benchmarks/cluster_write.py [--seconds 5] [--threads 4] [--galera-defaults]

1. Throughput: ``threads`` writers, each one INSERT + COMMIT per operation on its own
   connection, for ``seconds``: on a standalone mariadbd (no Galera, for reference), on one
   node of the cluster, and spread over the 3 nodes (writer k on node k % 3).
2. Pause: one writer on node 1 commits in a loop; node 3 is SIGKILLed; the longest gap
   between two commits is the pause the writer saw (Galera waits for the dead node to be
   suspected and evicted: ``evs.suspect_timeout``). Then node 3 is restarted (IST) and the
   gap during its rejoin is measured too.

All on one machine: the nodes share its cores and disk, so the figures say what certification
and group communication cost here, not what 3 machines would give.
"""

from __future__ import annotations

import harness  # the shared header (sys.path) and writer loop

import argparse
import threading
import time

import pymysql  # noqa: E402

from mysql_state.cluster import GaleraCluster  # noqa: E402
from mysql_state.server import LocalServer  # noqa: E402

DB = "bench_cluster"


def connect(port: int, autocommit: bool = False):
    return pymysql.connect(host="127.0.0.1", port=port, user="root", autocommit=autocommit,
                           connect_timeout=5, read_timeout=60, write_timeout=60)


def create_table(port: int) -> None:
    con = connect(port, autocommit=True)
    with con.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS {DB}")
        cur.execute(f"CREATE DATABASE {DB}")
        cur.execute(f"CREATE TABLE {DB}.w (id BIGINT AUTO_INCREMENT PRIMARY KEY, "
                    "writer INT NOT NULL, payload VARCHAR(200) NOT NULL)")
    con.close()


def throughput(ports: list[int], threads: int, seconds: float) -> tuple[float, int, float]:
    """(commits per second, errors, median commit latency ms) of ``threads`` writers."""
    cons = [connect(ports[k % len(ports)]) for k in range(threads)]

    def writer(k: int):
        con, cur = cons[k], cons[k].cursor()

        def op() -> None:
            cur.execute(f"INSERT INTO {DB}.w (writer, payload) VALUES (%s, %s)", (k, "x" * 100))
            con.commit()
        return op

    counts, errors, latencies = harness.timed_writers([writer(k) for k in range(threads)], seconds,
                                                      (pymysql.err.OperationalError,), lambda k: cons[k].rollback())
    for con in cons:
        con.close()
    lat = sorted(x for xs in latencies for x in xs)
    return sum(counts) / seconds, sum(errors), (lat[len(lat) // 2] * 1000 if lat else float("nan"))


def pause_on_kill(cluster: GaleraCluster) -> dict:
    """One writer on node 0; node 2 SIGKILLed, then restarted: the longest commit gaps."""
    commits: list[float] = []
    errors: list[str] = []
    running = [True]

    def writer() -> None:
        con = connect(cluster.ports[0])
        cur = con.cursor()
        while running[0]:
            try:
                cur.execute(f"INSERT INTO {DB}.w (writer, payload) VALUES (0, 'pause')")
                con.commit()
                commits.append(time.monotonic())
            except pymysql.err.Error as e:
                errors.append(repr(e))
                try:
                    con.rollback()
                except pymysql.err.Error:
                    con = connect(cluster.ports[0])
                    cur = con.cursor()

    def gap_after(t0: float, t1: float) -> float:
        """The longest gap between commits (or from ``t0``) in [t0, t1]."""
        times = [t0] + [t for t in commits if t0 <= t <= t1]
        return max((b - a for a, b in zip(times, times[1:])), default=t1 - t0)

    thread = threading.Thread(target=writer)
    thread.start()
    time.sleep(2)
    killed = time.monotonic()
    cluster.kill(2)
    time.sleep(8)
    restarted = time.monotonic()
    cluster.start(2)
    synced = time.monotonic()
    time.sleep(2)
    running[0] = False
    thread.join()
    steady = gap_after(killed - 2, killed)
    return {"steady": steady, "kill": gap_after(killed, restarted), "rejoin": gap_after(restarted, synced + 2),
            "rejoin_seconds": synced - restarted, "errors": errors}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--galera-defaults", action="store_true",
                    help="also measure the kill pause with Galera's default failure detection")
    args = ap.parse_args()
    rows = []

    single = LocalServer()
    try:
        create_table(single.port)
        rows.append(("standalone mariadbd (no Galera)",) + throughput([single.port], args.threads, args.seconds))
    finally:
        single.stop()

    t0 = time.monotonic()
    cluster = GaleraCluster(3)
    formed = time.monotonic() - t0
    try:
        create_table(cluster.ports[0])
        rows.append(("Galera, all writers on node 1",)
                    + throughput(cluster.ports[:1], args.threads, args.seconds))
        rows.append(("Galera, writers spread over 3 nodes",)
                    + throughput(cluster.ports, args.threads, args.seconds))
        pauses = [("mysql_state.cluster's (evs.suspect_timeout=PT2S, inactive PT3S)", pause_on_kill(cluster))]
    finally:
        cluster.stop()
    if args.galera_defaults:
        cluster = GaleraCluster(3, provider_options="gcache.size=64M")
        try:
            create_table(cluster.ports[0])
            pauses.append(("Galera defaults (evs.suspect_timeout=PT5S)", pause_on_kill(cluster)))
        finally:
            cluster.stop()

    print(f"\n3-node Galera cluster on loopback formed in {formed:.1f}s; "
          f"{args.threads} writers x {args.seconds:.0f}s, INSERT + COMMIT per op\n")
    print(f"| {'set-up':<38} | {'commits/s':>9} | {'errors':>6} | {'median ms':>9} |")
    print(f"|{'-' * 40}|{'-' * 11}|{'-' * 8}|{'-' * 11}|")
    for name, rate, errs, med in rows:
        print(f"| {name:<38} | {rate:>9.0f} | {errs:>6} | {med:>9.2f} |")
    print("\nOne writer on node 1 while node 3 is SIGKILLed, then restarted (longest gap between commits):\n")
    print(f"| {'failure detection':<64} | {'steady':>7} | {'kill':>6} | {'rejoin':>6} | {'restart':>7} |")
    print(f"|{'-' * 66}|{'-' * 9}|{'-' * 8}|{'-' * 8}|{'-' * 9}|")
    for name, p in pauses:
        print(f"| {name:<64} | {p['steady']:>6.3f}s | {p['kill']:>5.2f}s | {p['rejoin']:>5.2f}s "
              f"| {p['rejoin_seconds']:>6.1f}s |")
        if p["errors"]:
            print(f"  writer errors: {len(p['errors'])}, first: {p['errors'][0]}")


if __name__ == "__main__":
    main()
