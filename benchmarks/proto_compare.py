"""EXPERIMENT (not part of make bench): today's store against a patched scratch copy, side by side.

    .venv/bin/python benchmarks/proto_compare.py                 # steps 2 + 3 of DESIGN-issue21.md
    PROTO_BLAKE3=1 .venv/bin/python benchmarks/proto_compare.py  # + step 4 (BLAKE3 checkpoint)

The copy is ``mysql_state`` with ``proto-issue21.patch`` applied, imported as
``mysql_state_proto`` from a scratch folder (``$PROTO_DIR``, default /tmp/proto; built on the
first run); ``mysql_state/`` itself is not changed. Every row of the table is written by the
store under test, so the prototype's unversioned BLAKE3 checkpoint is never met by the other.
Cells as in paths.py: warm save, two workers truly alternating, a never-seen process; interleaved
rounds, medians, statements counted by the server.
"""

from __future__ import annotations

import harness  # noqa: F401

import os
import random
import shutil
import subprocess
import sys

import pymysql

from harness import Subject

PROTO_DIR = os.environ.get("PROTO_DIR", "/tmp/proto")
PATCH = os.path.join(harness.HERE, "proto-issue21.patch")


def build() -> None:
    target = os.path.join(PROTO_DIR, "mysql_state_proto")
    if os.path.isdir(target):
        return
    shutil.copytree(os.path.join(harness.ROOT, "mysql_state"), target,
                    ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run(["patch", "-s", "-p1", "-d", target, "-i", PATCH], check=True)


def main() -> int:
    import paths  # (here: proto_alias imports this module before mysql_state is aliased)

    build()
    sys.path.append(PROTO_DIR)
    import mysql_state
    import mysql_state_proto

    url, kwargs = harness.server()
    db = "msbench_proto_cmp"
    admin = pymysql.connect(autocommit=True, charset="utf8mb4", **kwargs)
    with admin.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{db}`")
    mk = {name: (lambda mod=mod: mod.MysqlAgentStateStore.from_url(url, database_name=db, create_if_not_exist=True,
                                                                    pool_size=4))
          for name, mod in (("today", mysql_state), ("proto", mysql_state_proto))}
    counter = harness.Counter(kwargs)
    rng = random.Random(7)
    U, K = paths.U, paths.K
    print(harness.loadavg_text(), "BLAKE3" if os.environ.get("PROTO_BLAKE3") == "1" else "SHA-256")
    for n in [int(x) for x in os.environ.get("PROTO_SIZES", "1000,10000").split(",")]:
        l0, l1, _ = paths.turn_lists(n)
        subjects = []
        closers = []
        for name in ("today", "proto"):
            a, b = mk[name](), mk[name]()
            closers += [a, b]
            for s in (a, b):
                s.save(U, "w", "x", 1)
            sw, sa, sf = f"{name}-warm-{n}", f"{name}-alt-{n}", f"{name}-fresh-{n}"
            a.save_list(U, sw, K, l0)
            a.save_list(U, sa, K, l0)
            b.save_list(U, sa, K, l0 + paths.turn_of(n, 1))
            alt = {"k": 1, "list": l0 + paths.turn_of(n, 1)}
            box: dict = {}

            def alt_before(alt=alt):
                alt["k"] += 1
                alt["list"] = alt["list"] + paths.turn_of(n, alt["k"])

            def fresh_before(a=a, sf=sf, box=box, name=name):
                a.save_list(U, sf, K, l0)
                f = box["f"] = mk[name]()
                f.save(U, "w", "x", 1)

            subjects += [
                Subject(f"{name}: warm", "store", lambda a=a, sw=sw: a.save_list(U, sw, K, l1),
                        lambda a=a, sw=sw: a.save_list(U, sw, K, l0)),
                Subject(f"{name}: alternating", "store",
                        lambda a=a, b=b, sa=sa, alt=alt: (b if alt["k"] % 2 else a).save_list(U, sa, K, alt["list"]),
                        alt_before),
                Subject(f"{name}: never-seen", "store", lambda box=box, sf=sf: box["f"].save_list(U, sf, K, l1),
                        fresh_before, lambda box=box: box.pop("f").close()),
            ]
        harness.run_cell(subjects, rounds=30, min_runs=30, budget_s=1e9, counter=counter, rng=rng)
        med = {s.name: s.summary() for s in subjects}
        print(f"N={n} ({harness.loadavg_text()})")
        for name in ("today", "proto"):
            w = med[f"{name}: warm"]["median_us"]
            for what in ("warm", "alternating", "never-seen"):
                s = med[f"{name}: {what}"]
                print(f"  {name:5} {what:12} {s['median_us']:8.0f} us  {s['median_us'] / w:5.2f}x warm  "
                      f"{s.get('round_trips')} statements  (min {s['min_us']:.0f}, p90 {s['p90_us']:.0f})")
        for s in closers:
            s.close()
    counter.close()
    with admin.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{db}`")
    return 0


if __name__ == "__main__":
    sys.exit(main())
