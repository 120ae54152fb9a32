"""The one header and harness every benchmark uses.

``import harness`` first (before ``mysql_state`` or a sibling module): it puts the repository
and this folder on ``sys.path`` and selects matplotlib's file backend, so every script runs as
``python benchmarks/<script>.py`` from any folder. Then:

* :func:`server` a server (``MYSQL_URL``, else the embedded default one) as (url, pymysql kwargs);
* :func:`loadavg` the machine's load average, printed beside every figure;
* :class:`Subject`, :func:`run_cell`: interleaved rounds (a fresh random order per round),
  medians; :class:`Counter`: statements counted BY THE SERVER (global ``Questions`` +
  ``Com_admin_commands`` on a private server);
* :func:`timed_writers`: N threads each running one operation in a loop for some seconds
  (the cluster benchmarks);
* :func:`place`: the server on one CPU and this process on the others, for latency cells on
  a machine that runs its own server (see its docstring: why a free placement biases them);
* :func:`progress`: a progress bar for long runs (tqdm, or a plain line per step);
* :func:`write_json`, :func:`write_text`: the results files.
"""

from __future__ import annotations

import json
import math
import os
import platform
import random
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
for _p in (HERE, ROOT):
    if _p not in sys.path:
        sys.path.insert(0, _p)
os.environ.setdefault("MPLBACKEND", "Agg")
RESULTS = os.path.join(HERE, "results")

import pymysql  # noqa: E402

import peers  # noqa: E402


def server() -> tuple[str, dict]:
    """(url, pymysql keyword arguments) of the benchmark's server: ``MYSQL_URL`` if set, else the
    embedded default one (``mysql_state.server``: Docker, else a private throwaway mariadbd)."""
    from mysql_state.pool import parse_url
    from mysql_state.server import server_url

    url = server_url()
    return url, parse_url(url)[0]


def private_server() -> bool:
    """Whether the server is this process's own (global counters then count only us)."""
    return not os.environ.get("MYSQL_URL")


def loadavg() -> tuple[float, float, float]:
    """The 1, 5 and 15 minute load averages (zeros where the OS does not say)."""
    try:
        return os.getloadavg()
    except OSError:
        return (0.0, 0.0, 0.0)


def settle(what: str, limit: float = 0.5, timeout: float = 240.0) -> float:
    """Wait until the 1-minute load average is below ``limit`` (at most ``timeout`` seconds)
    before the part ``what`` of a benchmark starts, and say so: a part started in the load the
    part before it left (the throughput cells leave 2-3 on 2 cores, which takes the 1-minute
    average about two minutes to lose) is not measured on a quiet machine. Returns the
    seconds waited; the load average the part starts in is printed either way."""
    started = time.monotonic()
    first = loadavg()[0]
    while loadavg()[0] >= limit and time.monotonic() - started < timeout:
        time.sleep(2.0)
    waited = time.monotonic() - started
    now = loadavg()[0]
    quiet = "" if now < limit else f" (still at or above {limit} after {timeout:.0f} s: not quiet)"
    if waited >= 1.0 or quiet:
        print(f"{what}: waited {waited:.0f} s for the load average to fall from {first:.2f} to {now:.2f}{quiet}",
              flush=True)
    else:
        print(f"{what}: load average {now:.2f}", flush=True)
    return waited


def loadavg_text() -> str:
    a, b, c = loadavg()
    return f"load average {a:.2f} {b:.2f} {c:.2f} on {os.cpu_count()} cores"


def progress(total: int, desc: str):
    """A progress bar with ``update(n)`` and ``set_postfix_str(s)``; tqdm when installed."""
    try:
        from tqdm import tqdm

        return tqdm(total=total, unit="round", dynamic_ncols=True, desc=desc)
    except ImportError:
        return _Lines(total, desc)


class _Lines:
    """The fallback progress display: one line per 10 % and per postfix change."""

    def __init__(self, total: int, desc: str) -> None:
        self.total, self.desc, self.n, self.shown = max(total, 1), desc, 0, -1

    def update(self, n: int = 1) -> None:
        self.n += n
        tenth = 10 * self.n // self.total
        if tenth != self.shown:
            self.shown = tenth
            print(f"{self.desc}: {self.n}/{self.total}", file=sys.stderr, flush=True)

    def set_postfix_str(self, s: str) -> None:
        print(f"{self.desc}: {s}", file=sys.stderr, flush=True)

    def __enter__(self) -> "_Lines":
        return self

    def __exit__(self, *exc: object) -> None:
        pass


def write_json(obj: Any, path: str) -> str:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w") as f:
        json.dump(obj, f, indent=1, default=str)
        f.write("\n")
    return path


def write_text(text: str, path: str) -> str:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w") as f:
        f.write(text if text.endswith("\n") else text + "\n")
    return path


def timed_writers(ops: list[Callable[[], Any]], seconds: float, errors_of: tuple = (Exception,),
                  on_error: Optional[Callable[[int], None]] = None) -> tuple[list[int], list[int], list[list[float]]]:
    """Thread k runs ``ops[k]()`` in a loop for ``seconds`` (all start together): per thread
    the operations done, the errors (``errors_of``, after ``on_error(k)``) and the latencies (s)."""
    n = len(ops)
    counts, errors, lat = [0] * n, [0] * n, [[] for _ in range(n)]
    start = threading.Barrier(n + 1)
    stop_at = [0.0]

    def loop(k: int) -> None:
        start.wait()
        while time.monotonic() < stop_at[0]:
            t = time.monotonic()
            try:
                ops[k]()
            except errors_of:  # counted
                errors[k] += 1
                if on_error is not None:
                    on_error(k)
                continue
            counts[k] += 1
            lat[k].append(time.monotonic() - t)

    threads = [threading.Thread(target=loop, args=(k,), daemon=True) for k in range(n)]
    for t in threads:
        t.start()
    stop_at[0] = time.monotonic() + seconds
    start.wait()
    for t in threads:
        t.join()
    return counts, errors, lat


@dataclass
class Subject:
    """One system doing one workload: ``op`` is timed, ``before``/``after`` are not."""

    name: str
    kind: str  # store | floor | baseline | peer
    op: Callable[[], Any]
    before: Optional[Callable[[], Any]] = None
    after: Optional[Callable[[], Any]] = None
    self_timed: bool = False  # ``op`` returns its own duration in ns (timed where it ran)
    samples: list[int] = field(default_factory=list)  # ns
    round_trips: Optional[int] = None
    error: Optional[str] = None
    spent: float = 0.0  # seconds, incl. untimed reset

    def summary(self) -> dict:
        out: dict = {"name": self.name, "kind": self.kind}
        if self.error:
            out["error"] = self.error
        if self.samples:
            us = [s / 1000 for s in self.samples]
            out.update(
                median_us=statistics.median(us),
                min_us=min(us),
                p90_us=sorted(us)[int(0.9 * (len(us) - 1))],
                runs=len(us),
                samples_us=[round(u, 1) for u in us],
            )
        if self.round_trips is not None:
            out["round_trips"] = self.round_trips
        return out


class Counter:
    """Statements the server received: ``Questions`` + ``Com_admin_commands`` (COM_PING counts
    there, not in Questions), read on a connection of its own; COMMIT and ROLLBACK count in
    Questions like any statement. Calibrated for the counter's own SHOW.

    The count is global: nothing else may use the server while it runs (the benchmark is
    single-threaded then).
    """

    def __init__(self, kwargs: dict) -> None:
        self.con = pymysql.connect(autocommit=True, **kwargs)
        self.calibration = 0
        a = self.read()
        b = self.read()
        self.calibration = b - a

    def read(self) -> int:
        with self.con.cursor() as cur:
            cur.execute(
                "SHOW GLOBAL STATUS WHERE Variable_name IN ('Questions', 'Com_admin_commands')"
            )
            return sum(int(v) for _, v in cur.fetchall())

    def count(self, fn: Callable[[], Any]) -> int:
        a = self.read()
        fn()
        b = self.read()
        return b - a - self.calibration

    def close(self) -> None:
        self.con.close()


def server_pid(kwargs: dict) -> Optional[int]:
    """The pid of the server's process when it runs on this machine (its pid file readable)."""
    try:
        con = pymysql.connect(autocommit=True, **kwargs)
        try:
            with con.cursor() as cur:
                cur.execute("SELECT @@pid_file")
                pid_file = cur.fetchone()[0]
        finally:
            con.close()
        with open(pid_file) as f:
            pid = int(f.read().strip())
        os.kill(pid, 0)
        return pid
    except Exception:  # noqa: BLE001 - another machine's server, a pid file we cannot read
        return None


def server_cpu(kwargs: dict) -> Callable[[], Optional[float]]:
    """A reader of the server process's CPU seconds (user + system, from ``/proc``), when the
    server runs on this machine and its pid file is readable; else a reader that says None."""
    pid = server_pid(kwargs)
    if pid is None:
        return lambda: None
    stat, tick = f"/proc/{pid}/stat", os.sysconf("SC_CLK_TCK")

    def read() -> Optional[float]:
        try:
            with open(stat) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / tick
        except (OSError, IndexError, ValueError):
            return None

    return read if read() is not None else (lambda: None)


def _pin_process(pid: int, cpus: set) -> None:
    """Every thread of process ``pid`` (threads it makes later inherit its main thread's set)."""
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            os.sched_setaffinity(int(tid), cpus)
        except OSError:  # a thread that just ended
            pass


def place(kwargs: dict, mode: str = "cross") -> str:
    """Where the server's threads and this process run; returns the sentence the results print.

    On a small machine that runs its own server, a round trip costs what the wake-up of the
    server's thread costs, and that depends on the CPU the scheduler left that thread on:
    here (2 vCPUs) a commit that changes nothing took 78 us with both on one CPU, 185 us
    across the two, and, left free, each connection settled in one or the other at random
    (105 or 200 us, for the whole run; ``docs/performance.md``, the 2026-12-05 evening section). The store's
    connection and the floor's are different connections, so a free placement biased their
    ratio by up to 2x either way, run by run. ``"cross"`` (the default): the server on the
    last CPU, this process and the processes it starts on the others (like a client on
    another machine: its CPU work never competes with the server's); ``"same"``: all on CPU
    0; ``"free"``: as the scheduler likes (also what is done when the server is not a process
    of this machine, or there is one CPU).
    """
    if mode not in ("cross", "same", "free"):
        raise ValueError(f"placement must be 'cross', 'same' or 'free', got {mode!r}")
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    pid = server_pid(kwargs) if mode != "free" and len(cpus) > 1 else None
    if pid is None:
        return "placement: free (the scheduler's)" + ("" if mode == "free" else
                                                      ": the server is not a process of this machine, or one CPU")
    server, client = ({cpus[0]}, {cpus[0]}) if mode == "same" else ({cpus[-1]}, set(cpus[:-1]))
    try:
        _pin_process(pid, server)
        os.sched_setaffinity(0, client)
    except OSError as exc:  # not allowed here (a container's CPU set): as the scheduler likes
        unplace(kwargs)
        return f"placement: free (the scheduler's): pinning refused ({exc.strerror})"
    return (f"placement: {mode}: the server's threads on CPU {','.join(map(str, sorted(server)))}, "
            f"this process on CPU {','.join(map(str, sorted(client)))}")


def unplace(kwargs: dict) -> None:
    """Every CPU again for the server and this process (before a throughput cell)."""
    cpus = set(range(os.cpu_count() or 1))
    pid = server_pid(kwargs)
    try:
        if pid is not None:
            _pin_process(pid, cpus)
        if hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, cpus)
    except OSError:  # a CPU set narrower than the machine's: it stays as it was given
        pass


def run_cell(
    subjects: list[Subject],
    *,
    rounds: int,
    min_runs: int,
    budget_s: float,
    counter: Optional[Counter],
    rng: random.Random,
    tick: Callable[[], None] = lambda: None,
    rt_runs: int = 3,
) -> None:
    """Rounds of every subject in a fresh random order (side by side, interleaved).

    A subject that has spent ``budget_s`` (timed + reset) stops after ``min_runs`` runs.
    Then ``rt_runs`` more runs per subject count its round trips (the minimum is kept).
    """
    for r in range(rounds):
        order = [s for s in subjects if s.error is None]
        rng.shuffle(order)
        for s in order:
            if len(s.samples) >= min_runs and s.spent > budget_s:
                continue
            start = time.perf_counter()
            try:
                if s.before:
                    s.before()
                t0 = time.perf_counter_ns()
                got = s.op()
                t1 = time.perf_counter_ns()
                if s.self_timed:
                    t0, t1 = 0, int(got)
                if s.after:
                    s.after()
            except Exception as exc:  # noqa: BLE001 - a failing subject is reported, not fatal
                s.error = f"{type(exc).__name__}: {exc}"[:500]
                continue
            s.samples.append(t1 - t0)
            s.spent += time.perf_counter() - start
        tick()
    if counter is None:
        return
    for s in subjects:
        if s.error is not None:
            continue
        try:
            counts = []
            for _ in range(rt_runs):
                if s.before:
                    s.before()
                counts.append(counter.count(s.op))
                if s.after:
                    s.after()
            s.round_trips = min(counts)  # the counter is global: min drops stray statements
        except Exception as exc:  # noqa: BLE001
            s.error = f"round-trip count: {type(exc).__name__}: {exc}"[:500]


def throughput(make_op: Callable[[int], Callable[[int], Any]], threads: int, ops_per_thread: int) -> dict:
    """Wall-clock throughput of ``threads`` threads each running ``op(j)`` for j < ops_per_thread.

    ``make_op(i)`` (untimed) gives thread i its operation. Returns ops/s and latency quantiles.
    """
    lat: list[list[int]] = [[] for _ in range(threads)]
    errors: list[str] = []
    barrier = threading.Barrier(threads + 1)
    done = threading.Barrier(threads + 1)

    def loop(i: int) -> None:
        op = None
        try:
            op = make_op(i)
        except Exception as exc:  # noqa: BLE001
            errors.append(f"{type(exc).__name__}: {exc}"[:300])
        barrier.wait()
        try:
            if op is not None:
                for j in range(ops_per_thread):
                    t0 = time.perf_counter_ns()
                    op(j)
                    lat[i].append(time.perf_counter_ns() - t0)
        except Exception as exc:  # noqa: BLE001
            errors.append(f"{type(exc).__name__}: {exc}"[:300])
        done.wait()

    ts = [threading.Thread(target=loop, args=(i,), daemon=True) for i in range(threads)]
    for t in ts:
        t.start()
    barrier.wait()
    t0 = time.perf_counter()
    done.wait()
    elapsed = time.perf_counter() - t0
    for t in ts:
        t.join()
    all_lat = sorted(x for lst in lat for x in lst)
    out: dict = {
        "threads": threads,
        "ops": len(all_lat),
        "seconds": elapsed,
        "ops_per_s": len(all_lat) / elapsed if elapsed else 0.0,
        "median_latency_us": (all_lat[len(all_lat) // 2] / 1000) if all_lat else None,
        "p90_latency_us": (all_lat[int(0.9 * (len(all_lat) - 1))] / 1000) if all_lat else None,
    }
    if errors:
        out["errors"] = errors[:3]
    return out


def interleaved(ops: dict, rounds: int, before: Optional[dict] = None, seed: int = 1) -> dict:
    """Median µs of each named operation, run in rounds in a fresh random order (the light
    version of :func:`run_cell` for experiments: no round trips, no budget)."""
    samples: dict = {k: [] for k in ops}
    rng = random.Random(seed)
    for _ in range(rounds):
        order = list(ops)
        rng.shuffle(order)
        for k in order:
            if before and k in before:
                before[k]()
            t0 = time.perf_counter_ns()
            ops[k]()
            samples[k].append(time.perf_counter_ns() - t0)
    return {k: statistics.median(v) / 1000 for k, v in samples.items()}


def quantile(sorted_xs: list, q: float):
    """Nearest-rank quantile of an ascending list (None when empty)."""
    if not sorted_xs:
        return None
    return sorted_xs[min(len(sorted_xs) - 1, max(0, math.ceil(q * len(sorted_xs)) - 1))]


def machine(admin) -> dict:
    """The machine, the server's durability settings, the commit and the packages' versions."""
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        cpu = platform.processor() or "?"
    ram = None
    try:
        with open("/proc/meminfo") as f:
            ram = round(int(f.readline().split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    with admin.cursor() as cur:
        cur.execute("SELECT VERSION(), @@innodb_flush_log_at_trx_commit, @@sync_binlog, @@log_bin, @@innodb_buffer_pool_size")
        ver, flush, sync_binlog, log_bin, bp = cur.fetchone()
    try:
        commit = subprocess.run(["git", "-C", os.path.dirname(os.path.abspath(__file__)), "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    except OSError:
        commit = "?"
    return {
        "nproc": os.cpu_count(),
        "loadavg": [round(x, 2) for x in loadavg()],
        "cpu": cpu,
        "ram_gb": ram,
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "server": ver,
        "server_settings": {
            "innodb_flush_log_at_trx_commit": int(flush),
            "sync_binlog": int(sync_binlog),
            "log_bin": int(log_bin),
            "innodb_buffer_pool_size_mb": int(bp) // (1024 * 1024),
        },
        "connection": "MYSQL_URL" if os.environ.get("MYSQL_URL") else "embedded default server (mysql_state.server)",
        "git_commit": commit,
        "packages": {p: peers.version(p) for p in (
            "mysql-state", "PyMySQL", "DBUtils", "orjson", "langgraph-checkpoint-mysql", "langgraph",
            "openai-agents", "SQLAlchemy", "aiomysql", "google-adk")},
    }
