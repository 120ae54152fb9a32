"""The store's writes on one server vs a 3-node Galera cluster, and its failover pause.

    python benchmarks/cluster_store.py [--seconds 5] [--threads 4]

1. Throughput: ``threads`` writers, each ``append_list`` of one small item per operation to
   a session of its own (one transaction: lock the hash row, insert the item, update the hash
   row, COMMIT), for ``seconds``: on a standalone mariadbd, on one Galera node, and with
   writer k on node k % 3 (a store per node).
2. Failover: one writer on a store built from the cluster's host list (node 1 first) appends
   in a loop; node 1 is SIGKILLed; the longest gap between two acknowledged appends is the
   pause the caller saw (the failed connection, the move to node 2, Galera's eviction of the
   dead node). Errors the caller saw are counted (expected: none, or a CommitUnknownError
   when the kill lands on a COMMIT).

All on one machine: the nodes share its cores and disk.
"""

from __future__ import annotations

import harness  # the shared header (sys.path) and writer loop

import argparse
import threading
import time

from mysql_state import MysqlAgentStateStore  # noqa: E402
from mysql_state.cluster import GaleraCluster  # noqa: E402
from mysql_state.server import LocalServer  # noqa: E402

DB = "bench_cluster_store"


def throughput(urls: list[str], threads: int, seconds: float) -> tuple[float, int]:
    """(appends per second, errors) of ``threads`` writers, writer k on ``urls[k % len]``."""
    stores = [MysqlAgentStateStore.from_url(u, DB, create_if_not_exist=True) for u in urls]

    def writer(k: int):
        store, sid, item = stores[k % len(stores)], f"w{k}-{id(stores)}", [{"k": k, "t": "x" * 100}]
        return lambda: store.append_list("bench", sid, "log", item)

    counts, errors, _ = harness.timed_writers([writer(k) for k in range(threads)], seconds)
    for s in stores:
        s.close()
    return sum(counts) / seconds, sum(errors)


def failover_pause(cluster: GaleraCluster) -> dict:
    store = MysqlAgentStateStore.from_url(cluster.url_list, DB, create_if_not_exist=True)
    acks: list[float] = []
    errors: list[str] = []
    running = [True]

    def writer() -> None:
        j = 0
        while running[0]:
            try:
                store.append_list("bench", "failover", "log", [j])
                acks.append(time.monotonic())
            except Exception as e:  # noqa: BLE001 - reported
                errors.append(type(e).__name__)
            j += 1

    thread = threading.Thread(target=writer)
    thread.start()
    time.sleep(2)
    killed = time.monotonic()
    cluster.kill(0)
    time.sleep(6)
    running[0] = False
    thread.join()
    times = [killed] + [t for t in acks if t >= killed]
    steady = [t for t in acks if killed - 2 <= t < killed]
    result = {"pause": max(b - a for a, b in zip(times, times[1:])),
              "steady": max((b - a for a, b in zip(steady, steady[1:])), default=0.0),
              "errors": errors, "reconnects": store.stats.reconnects}
    store.close()
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--threads", type=int, default=4)
    args = ap.parse_args()
    rows = []
    single = LocalServer()
    try:
        rows.append(("standalone mariadbd (no Galera)",) + throughput([single.url], args.threads, args.seconds))
    finally:
        single.stop()
    cluster = GaleraCluster(3)
    try:
        rows.append(("Galera, all writers on node 1",) + throughput(cluster.urls[:1], args.threads, args.seconds))
        rows.append(("Galera, writers spread over 3 nodes",) + throughput(cluster.urls, args.threads, args.seconds))
        pause = failover_pause(cluster)
    finally:
        cluster.stop()
    print(f"\nstore.append_list, {args.threads} writers x {args.seconds:.0f}s, one session each\n")
    print(f"| {'set-up':<38} | {'appends/s':>9} | {'errors':>6} |")
    print(f"|{'-' * 40}|{'-' * 11}|{'-' * 8}|")
    for name, rate, errs in rows:
        print(f"| {name:<38} | {rate:>9.0f} | {errs:>6} |")
    print(f"\nfailover: store on the host list, node 1 SIGKILLed: longest gap {pause['pause']:.2f}s "
          f"(steady {pause['steady']:.3f}s), {pause['reconnects']} reconnects, errors seen: "
          f"{pause['errors'] or 'none'}")


if __name__ == "__main__":
    main()
