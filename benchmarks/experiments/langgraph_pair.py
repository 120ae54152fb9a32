"""EXPERIMENT (not part of make bench): a ``MysqlSaver`` step beside a ``PostgresSaver`` step,
the saver alone (one superstep's ``put`` + ``put_writes`` on a 1 000-message thread, as
``langgraph_bench.Subject.step_alone`` does), in a process running only these two savers.
Three phases, each: 30 steps of ours, then 30 rounds of the two interleaved, then 30 of
Postgres's; medians, and the two ratios (interleaved, apart). It shows what the other savers'
writes in ``langgraph_bench.py``'s rounds add to a step made of two COMMITs (docs/langgraph.md,
"Figures").

    .venv/bin/python benchmarks/experiments/langgraph_pair.py [N]
"""

from __future__ import annotations

import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # benchmarks/

import langgraph_bench as lb  # noqa: E402

from mysql_state.server import server_url  # noqa: E402


def main(n: int = 1000) -> None:
    pg = lb.LocalPostgres()
    ours, theirs = lb.Ours(server_url(), "lgpair"), lb.Postgres(pg.dsn)
    try:
        for s in (ours, theirs):
            s.seed_alone(n)
        ms = lambda xs: 1e3 * statistics.median(xs)  # noqa: E731
        k = 1
        print(f"N={n}, load average {os.getloadavg()[0]:.2f}")
        for _ in range(3):
            mine_apart, mine_mixed, theirs_mixed, theirs_apart = [], [], [], []
            for _ in range(30):
                k += 1
                mine_apart.append(ours.step_alone(k))
            for _ in range(30):
                k += 1
                mine_mixed.append(ours.step_alone(k))
                theirs_mixed.append(theirs.step_alone(k))
            for _ in range(30):
                k += 1
                theirs_apart.append(theirs.step_alone(k))
            print(f"ours apart {ms(mine_apart):.2f} ms, interleaved {ms(mine_mixed):.2f}; Postgres interleaved "
                  f"{ms(theirs_mixed):.2f}, apart {ms(theirs_apart):.2f}; ratio interleaved "
                  f"{ms(mine_mixed) / ms(theirs_mixed):.2f}x, apart {ms(mine_apart) / ms(theirs_apart):.2f}x")
    finally:
        ours.close()
        theirs.close()
        pg.stop()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1000)
