"""LangGraph checkpointers side by side: time per step and stored bytes at 10, 100, 1 000 messages.

One real graph (``StateGraph(MessagesState)``, one agent node with a scripted model: each
turn adds the user's message and a reply of ~300 characters), compiled once per saver, run
turn by turn in interleaved rounds (each round gives every saver one turn, in a shuffled
order) so that load on this shared machine falls on all of them alike:

* ``MysqlSaver`` (this project) on the MariaDB of ``mysql_state.server.server_url()``;
* LangGraph's ``SqliteSaver`` on a file;
* ``PostgresSaver`` on a private PostgreSQL cluster this script starts (``initdb`` and
  ``pg_ctl`` of Debian's ``postgresql``, as the ``postgres`` user when run as root);
* ``PyMySQLSaver`` of ``langgraph-checkpoint-mysql`` on a MariaDB of its own (same binary and
  settings), with the workarounds it needs there (a ``utf8mb4_general_ci`` database, a large
  ``group_concat_max_len``).

Measured inside the saver (a timing wrapper around each saver call, ``durability="sync"``):

* **step**: one superstep's checkpoint: ``put`` + its ``put_writes`` (a turn has three:
  the input, ``__start__``, the agent's reply);
* **load**: ``get_tuple`` at the start of an invoke (the whole state, every saver decodes
  every message);
* **stored bytes**: the payload bytes of the thread's rows, by SQL on each database.

Figures are medians over the turns that end between 90 % and 100 % of each size. The saver
alone (one superstep's ``put`` + ``put_writes`` outside a graph) is timed twice: interleaved
with every saver, and at the largest size with ``PostgresSaver`` only (the two the target
compares, nothing else's writes between their steps). The saver's
own overhead over the store: the same turn's messages saved with the store's ``save_list``
(one warm append) beside ``MysqlSaver``'s steps. Writes ``results/<date>-langgraph.{json,md,png}``.

    python benchmarks/langgraph_bench.py [--sizes 10,100,1000] [--out benchmarks/results]
    python benchmarks/langgraph_bench.py --quick 40 --sizes 1000   # the saver alone, minutes
    python benchmarks/langgraph_bench.py --savers MysqlSaver,PostgresSaver   # the graph, two savers
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import random
import shutil
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from typing import Any, Callable, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import pymysql  # noqa: E402
from langchain_core.messages import AIMessage, HumanMessage  # noqa: E402
from langgraph.checkpoint.base import BaseCheckpointSaver  # noqa: E402
from langgraph.graph import END, START, MessagesState, StateGraph  # noqa: E402

from mysql_state import MysqlAgentStateStore, keys  # noqa: E402
from mysql_state.langgraph import MysqlSaver  # noqa: E402
from mysql_state.langgraph.codec import to_row  # noqa: E402
from mysql_state.pool import parse_url  # noqa: E402
from mysql_state.server import server_url  # noqa: E402

sys.path.insert(0, HERE)
from harness import settle  # noqa: E402

USER_TEXT = "Could you look at the report I sent and tell me what stands out? " * 2
REPLY_PAD = "The figures for the third quarter look steady; revenue grew while costs held. " * 4


# ---- the graph and the timing wrapper ---------------------------------------------------------


def chat_graph(checkpointer: Any) -> Any:
    def agent(state: MessagesState) -> dict:
        n = len(state["messages"])
        return {"messages": [AIMessage(content=f"[{n}] {REPLY_PAD}", id=f"ai-{n}")]}

    b = StateGraph(MessagesState)
    b.add_node("agent", agent)
    b.add_edge(START, "agent")
    b.add_edge("agent", END)
    return b.compile(checkpointer=checkpointer)


class Timed(BaseCheckpointSaver):
    """Delegates to a saver, adding up the time spent in each kind of call."""

    def __init__(self, inner: BaseCheckpointSaver) -> None:
        super().__init__(serde=inner.serde)
        self.inner = inner
        self.spent: dict[str, float] = {}

    def _time(self, kind: str, fn: Callable, *args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            self.spent[kind] = self.spent.get(kind, 0.0) + time.perf_counter() - t0

    def take(self) -> dict[str, float]:
        spent, self.spent = self.spent, {}
        return spent

    def get_tuple(self, config):
        return self._time("load", self.inner.get_tuple, config)

    def list(self, config, **kw):
        return self.inner.list(config, **kw)

    def put(self, config, checkpoint, metadata, new_versions):
        return self._time("step", self.inner.put, config, checkpoint, metadata, new_versions)

    def put_writes(self, config, writes, task_id, task_path=""):
        return self._time("step", self.inner.put_writes, config, writes, task_id, task_path)

    def get_next_version(self, current, channel):
        return self.inner.get_next_version(current, channel)


# ---- the savers ---------------------------------------------------------------------------------


class Subject:
    name = ""
    version = ""

    def __init__(self) -> None:
        self.timed: Optional[Timed] = None
        self.graph: Any = None
        self.error: Optional[str] = None
        self.thread = f"bench-{uuid.uuid4().hex[:8]}"

    def start(self, saver: BaseCheckpointSaver) -> None:
        self.timed = Timed(saver)
        self.graph = chat_graph(self.timed)

    def turn(self, i: int) -> dict:
        t0 = time.perf_counter()
        self.graph.invoke({"messages": [HumanMessage(content=f"({i}) {USER_TEXT}", id=f"h-{i}")]},
                          {"configurable": {"thread_id": self.thread}}, durability="sync")
        wall = time.perf_counter() - t0
        spent = self.timed.take()
        return {"wall": wall, "step": spent.get("step", 0.0) / 3, "load": spent.get("load", 0.0)}

    #: Statements summing the payload bytes of the thread's rows (``%s``: the thread id).
    stored_sql: tuple[str, ...] = ()

    def scalar(self, sql: str, params: tuple) -> int:
        raise NotImplementedError

    def stored(self) -> int:
        return sum(self.scalar(sql, (self.thread,)) for sql in self.stored_sql)

    def seed_alone(self, n: int, tag: str = "alone") -> None:
        """A thread of ``n`` messages for :meth:`step_alone`, in one put (``tag``: which run)."""
        self.alone = {"thread": f"{self.thread}-{tag}-{n}", "parent": None, "version": None, "messages": []}
        for i in range(n // 2):
            self.alone["messages"] += [HumanMessage(content=f"({i}) {USER_TEXT}", id=f"h-{i}"),
                                       AIMessage(content=f"[{i}] {REPLY_PAD}", id=f"ai-{i}")]
        self.step_alone(0)

    def step_alone(self, k: int) -> float:
        """The saver alone, outside a graph: one superstep that adds a message (``put`` of the
        new checkpoint with the whole list, as LangGraph hands it, and its ``put_writes``)."""
        from langgraph.checkpoint.base import empty_checkpoint

        a, saver = self.alone, self.timed.inner
        new = AIMessage(content=f"(step {k}) {REPLY_PAD}", id=f"s-{k}")
        a["messages"] = a["messages"] + [new]
        a["version"] = saver.get_next_version(a["version"], None)
        ck = empty_checkpoint()
        ck["channel_values"] = {"messages": a["messages"]}
        ck["channel_versions"] = {"messages": a["version"]}
        conf = {"thread_id": a["thread"], "checkpoint_ns": ""}
        if a["parent"]:
            conf["checkpoint_id"] = a["parent"]
        t0 = time.perf_counter()
        stored = saver.put({"configurable": conf}, ck, {"source": "loop", "step": k}, {"messages": a["version"]})
        saver.put_writes(stored, [("messages", [new])], f"task-{k}")
        spent = time.perf_counter() - t0
        a["parent"] = stored["configurable"]["checkpoint_id"]
        return spent

    def close(self) -> None:
        pass


def _version(dist: str) -> str:
    from importlib.metadata import version

    try:
        return version(dist)
    except Exception:
        return "?"


class Ours(Subject):
    name = "MysqlSaver"

    def __init__(self, url: str, database: str) -> None:
        super().__init__()
        self.version = "mysql-state " + _version("mysql-state")
        self.store = MysqlAgentStateStore.from_url(url, database_name=database, create_if_not_exist=True)
        self.start(MysqlSaver(self.store))
        kwargs, _ = parse_url(url)
        self.sql = pymysql.connect(autocommit=True, charset="utf8mb4", **kwargs)
        self.table = f"`{database}`.`{self.store.table_name}`"
        self.list_thread = self.thread + "-list"
        self.items: list = []

    def stored(self) -> int:
        with self.sql.cursor() as cur:
            cur.execute(f"SELECT COALESCE(SUM(LENGTH(state_data)), 0) FROM {self.table} WHERE session_id = %s",
                        (keys.pack(None, self.thread),))
            return int(cur.fetchone()[0])

    def scalar(self, sql: str, params: tuple) -> int:  # pragma: no cover - stored() is its own
        raise NotImplementedError

    def list_save(self, i: int) -> float:
        """The store alone on the same turn: the two messages, as the saver's item rows,
        saved with ``save_list`` of the whole list (a warm append: only the new rows go)."""
        serde = self.timed.serde
        self.items += [to_row(serde, HumanMessage(content=f"({i}) {USER_TEXT}", id=f"h-{i}")),
                       to_row(serde, AIMessage(content=f"[{len(self.items) + 1}] {REPLY_PAD}", id=f"ai-{i}"))]
        t0 = time.perf_counter()
        self.store.save_list(None, self.list_thread, "messages", self.items)
        return time.perf_counter() - t0

    def close(self) -> None:
        self.timed.inner.close()
        self.store.close()
        self.sql.close()


class Sqlite(Subject):
    name = "SqliteSaver"

    def __init__(self, path: str) -> None:
        super().__init__()
        from langgraph.checkpoint.sqlite import SqliteSaver

        self.version = "langgraph-checkpoint-sqlite " + _version("langgraph-checkpoint-sqlite")
        self.conn = sqlite3.connect(path, check_same_thread=False)
        saver = SqliteSaver(self.conn)
        saver.setup()
        self.start(saver)

    stored_sql = (
        "SELECT COALESCE(SUM(LENGTH(checkpoint) + LENGTH(metadata)), 0) FROM checkpoints WHERE thread_id = %s",
        "SELECT COALESCE(SUM(LENGTH(value)), 0) FROM writes WHERE thread_id = %s",
    )

    def scalar(self, sql: str, params: tuple) -> int:
        return int(self.conn.execute(sql.replace("%s", "?"), params).fetchone()[0])

    def close(self) -> None:
        self.conn.close()


class Postgres(Subject):
    name = "PostgresSaver"

    def __init__(self, dsn: str) -> None:
        super().__init__()
        from langgraph.checkpoint.postgres import PostgresSaver
        from psycopg import Connection
        from psycopg.rows import dict_row

        self.version = "langgraph-checkpoint-postgres " + _version("langgraph-checkpoint-postgres")
        self.conn = Connection.connect(dsn, autocommit=True, prepare_threshold=0, row_factory=dict_row)
        saver = PostgresSaver(self.conn)
        saver.setup()
        self.start(saver)

    stored_sql = (
        "SELECT COALESCE(SUM(pg_column_size(checkpoint) + pg_column_size(metadata)), 0) AS n FROM checkpoints"
        " WHERE thread_id = %s",
        "SELECT COALESCE(SUM(octet_length(blob)), 0) AS n FROM checkpoint_blobs WHERE thread_id = %s",
        "SELECT COALESCE(SUM(octet_length(blob)), 0) AS n FROM checkpoint_writes WHERE thread_id = %s",
    )

    def scalar(self, sql: str, params: tuple) -> int:
        with self.conn.cursor() as cur:
            cur.execute(sql, params)
            return int(cur.fetchone()["n"])

    def close(self) -> None:
        self.conn.close()


class CommunityMysql(Subject):
    name = "PyMySQLSaver"

    def __init__(self, kwargs: dict, database: str) -> None:
        super().__init__()
        from langgraph.checkpoint.mysql.pymysql import PyMySQLSaver

        self.version = "langgraph-checkpoint-mysql " + _version("langgraph-checkpoint-mysql")
        admin = pymysql.connect(autocommit=True, charset="utf8mb4", **kwargs)
        with admin.cursor() as cur:
            # On MariaDB it fails with error 1267 (illegal mix of collations) in a
            # utf8mb4_unicode_ci database, and its GROUP_CONCAT JSON is cut at 1 MB.
            cur.execute(f"DROP DATABASE IF EXISTS `{database}`")
            cur.execute(f"CREATE DATABASE `{database}` DEFAULT CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci")
        admin.close()
        self.conn = pymysql.connect(autocommit=True, database=database, charset="utf8mb4", **kwargs)
        with self.conn.cursor() as cur:
            cur.execute("SET SESSION group_concat_max_len = 1073741824")
        saver = PyMySQLSaver(self.conn)
        saver.setup()
        self.start(saver)

    stored_sql = (
        "SELECT COALESCE(SUM(LENGTH(checkpoint) + LENGTH(metadata)), 0) FROM checkpoints WHERE thread_id = %s",
        "SELECT COALESCE(SUM(LENGTH(`blob`)), 0) FROM checkpoint_blobs WHERE thread_id = %s",
        "SELECT COALESCE(SUM(LENGTH(`blob`)), 0) FROM checkpoint_writes WHERE thread_id = %s",
    )

    def scalar(self, sql: str, params: tuple) -> int:
        with self.conn.cursor() as cur:
            cur.execute(sql, params)
            return int(cur.fetchone()[0])

    def close(self) -> None:
        self.conn.close()


# ---- a private PostgreSQL ---------------------------------------------------------------------


class LocalPostgres:
    """A throwaway PostgreSQL cluster under a temp dir, on a free loopback port."""

    def __init__(self) -> None:
        bins = sorted(d for d in (os.listdir("/usr/lib/postgresql") if os.path.isdir("/usr/lib/postgresql") else []))
        if not bins:
            raise RuntimeError("no PostgreSQL found: apt-get install -y postgresql")
        self.bin = f"/usr/lib/postgresql/{bins[-1]}/bin"
        self.dir = tempfile.mkdtemp(prefix="lgbench-pg-")
        self.user = None
        if os.geteuid() == 0:  # initdb refuses root: run it as the postgres user
            import pwd

            self.user = "postgres"
            pw = pwd.getpwnam(self.user)
            os.chown(self.dir, pw.pw_uid, pw.pw_gid)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        data = os.path.join(self.dir, "data")
        self._run([f"{self.bin}/initdb", "-D", data, "-U", "bench", "-A", "trust", "--no-sync"])
        self._run([f"{self.bin}/pg_ctl", "-D", data, "-w", "-l", os.path.join(self.dir, "log"), "-o",
                   f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.dir} -c fsync=on", "start"])
        self.data = data
        self.dsn = f"postgresql://bench@127.0.0.1:{self.port}/postgres"

    def _run(self, cmd: list[str]) -> None:
        if self.user:
            cmd = ["runuser", "-u", self.user, "--", *cmd]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if done.returncode:
            raise RuntimeError(f"{' '.join(cmd)} failed: {done.stdout}{done.stderr}")

    def stop(self) -> None:
        try:
            self._run([f"{self.bin}/pg_ctl", "-D", self.data, "-m", "fast", "stop"])
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)


# ---- the run ------------------------------------------------------------------------------------


def median(xs: list[float]) -> Optional[float]:
    return statistics.median(xs) if xs else None


SAVERS = ("MysqlSaver", "SqliteSaver", "PostgresSaver", "PyMySQLSaver")


def alone_rounds(subjects: list, n: int, rounds: int, rng: random.Random, tag: str = "alone") -> dict[str, float]:
    """Each subject's saver alone (:meth:`Subject.step_alone`) on a thread of ``n`` messages of
    its own, in ``rounds`` interleaved rounds (a shuffled order each): the median ms per name."""
    live = list(subjects)
    for s in live:
        s.seed_alone(n, tag)
    samples: dict[str, list[float]] = {s.name: [] for s in live}
    for k in range(1, rounds + 1):
        rng.shuffle(live)
        for s in live:
            samples[s.name].append(s.step_alone(k))
    return {name: 1e3 * median(xs) for name, xs in samples.items()}


def run(sizes: list[int], seed: int = 7, savers: tuple[str, ...] = SAVERS) -> dict:
    """The graph run (``savers``: which of :data:`SAVERS` besides ``MysqlSaver``, always run)."""
    url = server_url()
    kwargs, _ = parse_url(url)
    tmp = tempfile.mkdtemp(prefix="lgbench-")
    pg = None
    subjects: list[Subject] = []
    skipped: dict[str, str] = {}
    ours = Ours(url, "lgbench_ours")
    subjects.append(ours)
    if "SqliteSaver" in savers:
        subjects.append(Sqlite(os.path.join(tmp, "sqlite.db")))
    try:
        if "PostgresSaver" in savers:
            pg = LocalPostgres()
            subjects.append(Postgres(pg.dsn))
    except Exception as exc:
        skipped["PostgresSaver"] = f"{type(exc).__name__}: {exc}"[:300]
    other = None
    if "PyMySQLSaver" in savers:
        try:
            # a server of its own: its O(T²) bytes would otherwise fill the buffer pool and the
            # redo log that MysqlSaver's commits share (a MYSQL_URL run shares the given server)
            other_url = url
            if not os.environ.get("MYSQL_URL"):
                from mysql_state.server import LocalServer

                other = LocalServer()
                other_url = other.url
            subjects.append(CommunityMysql(parse_url(other_url)[0], "lgbench_community"))
        except Exception as exc:
            skipped["PyMySQLSaver"] = f"{type(exc).__name__}: {exc}"[:300]
    rng = random.Random(seed)
    turns = max(sizes) // 2
    per_turn: dict[str, list[dict]] = {s.name: [] for s in subjects}
    list_saves: list[float] = []
    stored: dict[str, dict[int, int]] = {s.name: {} for s in subjects}
    loads: list[tuple[float, float, float]] = []
    t_start = time.time()
    for i in range(turns):
        order = list(subjects)
        rng.shuffle(order)
        for s in order:
            if s.error:
                continue
            try:
                per_turn[s.name].append(s.turn(i))
            except Exception as exc:
                s.error = f"turn {i}: {type(exc).__name__}: {exc}"[:300]
        list_saves.append(ours.list_save(i))
        messages = 2 * (i + 1)
        if messages in sizes:
            loads.append(os.getloadavg())
            for s in subjects:
                if not s.error:
                    stored[s.name][messages] = s.stored()
            print(f"  {messages:>5} messages: " + ", ".join(
                f"{s.name} {stored[s.name].get(messages, 0) / 1e6:.2f} MB" for s in subjects), flush=True)
    alone: dict[str, dict[int, float]] = {s.name: {} for s in subjects}
    for n in sizes:  # the saver alone, each size on a thread of its own, interleaved rounds
        for name, ms in alone_rounds([s for s in subjects if not s.error], n, 15, rng).items():
            alone[name][n] = ms
    # The two savers the target compares, alone and side by side with nothing else between
    # their steps: in the rounds above the other savers' writes (PyMySQLSaver stores ~200 MB by
    # 1 000 messages) share the disk with every COMMIT and the CPUs with every call.
    two = [s for s in subjects if s.name in ("MysqlSaver", "PostgresSaver") and not s.error]
    pair = alone_rounds(two, max(sizes), 30, rng, "pair") if len(two) == 2 else {}
    elapsed = time.time() - t_start
    figures: dict[str, dict[int, dict]] = {}
    for s in subjects:
        figures[s.name] = {}
        for n in sizes:
            lo, hi = max(1, int(0.9 * n) // 2), n // 2  # turns whose thread ends at 90-100 % of n
            window = per_turn[s.name][lo - 1:hi]
            if len(window) < (hi - lo + 1):
                continue
            figures[s.name][n] = {
                "step_ms": 1e3 * median([t["step"] for t in window]),
                "load_ms": 1e3 * median([t["load"] for t in window]),
                "turn_ms": 1e3 * median([t["wall"] for t in window]),
                "rest_ms": 1e3 * median([t["wall"] - t["load"] for t in window]),
                "stored_bytes": stored[s.name].get(n),
            }
    list_save = {n: 1e3 * median(list_saves[max(1, int(0.9 * n) // 2) - 1:n // 2]) for n in sizes}
    for s in subjects:
        s.close()
    if pg is not None:
        pg.stop()
    if other is not None:
        other.stop()
    shutil.rmtree(tmp, ignore_errors=True)
    return {
        "date": dt.date.today().isoformat(),
        "sizes": sizes,
        "figures": figures,
        "store_list_save_ms": list_save,
        "step_alone_ms": alone,
        "step_pair_ms": pair,
        "errors": {s.name: s.error for s in subjects if s.error},
        "skipped": skipped,
        "versions": {s.name: s.version for s in subjects},
        "loadavg_at_marks": loads,
        "elapsed_s": elapsed,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform(),
                    "mysql": _server_version(kwargs), "langgraph": _version("langgraph")},
    }


def _server_version(kwargs: dict) -> str:
    con = pymysql.connect(**kwargs)
    try:
        with con.cursor() as cur:
            cur.execute("SELECT VERSION()")
            return cur.fetchone()[0]
    finally:
        con.close()


# ---- the report ---------------------------------------------------------------------------------


def markdown(r: dict) -> str:
    sizes, fig = r["sizes"], r["figures"]
    names = list(fig)
    lines = ["# LangGraph checkpointers: time per step and stored bytes", "",
             f"Machine: {r['machine']['cpus']} cores, {r['machine']['platform']}, Python {r['machine']['python']}; "
             f"server {r['machine']['mysql']}; langgraph {r['machine']['langgraph']}. Load average (1, 5, 15 min) "
             f"at each size: " + "; ".join(f"{n}: {a[0]:.2f} {a[1]:.2f} {a[2]:.2f}" for n, a in zip(sizes, r["loadavg_at_marks"])),
             "", "Versions: " + ", ".join(r["versions"].values()), "",
             "One turn = one `invoke` of a `StateGraph(MessagesState)` with a scripted agent (the user's message and "
             "a ~330-character reply), `durability=\"sync\"`; savers side by side in interleaved rounds. **step** = one "
             "superstep's `put` + its `put_writes` (three per turn); **load** = `get_tuple` at the start of the invoke; "
             "medians over the turns ending at 90-100 % of N messages; **turn - load** = the turn's wall time "
             "outside the load (its steps as the graph waits for them, LangGraph's own work, the same for every "
             "saver, included: a `put` runs on LangGraph's background thread beside the next task, so the "
             "steps' summed call times count time twice that the wall clock counts once). Stored bytes: payload "
             "of the thread's rows by SQL.", ""]
    lines += ["| N | saver | step (ms) | load (ms) | turn (ms) | turn - load (ms) | stored (MB) | step vs PostgresSaver "
              "| turn - load vs PostgresSaver |",
              "|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
    for n in sizes:
        pg = fig.get("PostgresSaver", {}).get(n)
        for name in names:
            f = fig[name].get(n)
            if not f:
                continue
            ratio = f"{f['step_ms'] / pg['step_ms']:.2f}x" if pg and pg["step_ms"] else ""
            rest = f.get("rest_ms")
            rest_ratio = f"{rest / pg['rest_ms']:.2f}x" if pg and rest is not None and pg.get("rest_ms") else ""
            mb = f"{f['stored_bytes'] / 1e6:.3f}" if f.get("stored_bytes") is not None else ""
            lines.append(f"| {n:,} | {name} | {f['step_ms']:.2f} | {f['load_ms']:.2f} | {f['turn_ms']:.2f} | "
                         f"{'' if rest is None else f'{rest:.2f}'} | {mb} | {ratio} | {rest_ratio} |")
    lines += ["", "Stored bytes, growth from the smallest size:"]
    for name in names:
        s = {n: fig[name][n]["stored_bytes"] for n in sizes if n in fig[name] and fig[name][n].get("stored_bytes")}
        if len(s) > 1:
            a, b = min(s), max(s)
            lines.append(f"- {name}: {s[a] / 1e6:.3f} MB at {a} -> {s[b] / 1e6:.3f} MB at {b} messages: "
                         f"x{s[b] / s[a]:.0f} for x{b // a} the messages")
    alone = r.get("step_alone_ms", {})
    if alone:
        lines += ["", "The saver alone, outside a graph (no LangGraph work beside it): one superstep that adds a "
                  "message, `put` of the checkpoint with the whole list as LangGraph hands it + its `put_writes`; "
                  "medians of 15 interleaved rounds on a thread of N messages:", "",
                  "| N | " + " | ".join(alone) + " | MysqlSaver vs PostgresSaver |",
                  "|---:|" + "---:|" * (len(alone) + 1)]
        for n in sizes:
            cells = [f"{alone[name][n]:.2f}" if n in alone[name] else "" for name in alone]
            pg, me = alone.get("PostgresSaver", {}).get(n), alone.get("MysqlSaver", {}).get(n)
            lines.append(f"| {n:,} | " + " | ".join(cells) + f" | {f'{me / pg:.2f}x' if pg and me else ''} |")
    pair = r.get("step_pair_ms", {})
    if len(pair) == 2:
        lines += ["", f"The saver alone beside `PostgresSaver` only (N={max(sizes):,}, 30 interleaved rounds of the two, "
                  "nothing else between their steps): MysqlSaver "
                  f"{pair['MysqlSaver']:.2f} ms, PostgresSaver {pair['PostgresSaver']:.2f} ms: "
                  f"{pair['MysqlSaver'] / pair['PostgresSaver']:.2f}x."]
    ours = fig.get("MysqlSaver", {})
    if ours:
        lines += ["", "The saver's own overhead over the store: one step of `MysqlSaver` beside the store's `save_list` "
                  "of the same turn (the whole list, a warm append):", ""]
        for n in sizes:
            if n in ours:
                ls = r["store_list_save_ms"][n]
                lines.append(f"- N={n:,}: step {ours[n]['step_ms']:.2f} ms, save_list {ls:.2f} ms "
                             f"({ours[n]['step_ms'] / ls:.1f}x)")
    big = max(sizes)
    if big in ours and big in fig.get("PostgresSaver", {}):
        ratio = ours[big]["step_ms"] / fig["PostgresSaver"][big]["step_ms"]
        lines += ["", f"Target, step at {big:,} messages at most 0.5x PostgresSaver's: in the graph {ratio:.2f}x, "
                  f"**{'met' if ratio <= 0.5 else 'missed'}**"]
        if big in alone.get("MysqlSaver", {}) and big in alone.get("PostgresSaver", {}):
            ratio = alone["MysqlSaver"][big] / alone["PostgresSaver"][big]
            lines[-1] += f"; the saver alone {ratio:.2f}x, **{'met' if ratio <= 0.5 else 'missed'}**"
        if len(pair) == 2:
            ratio = pair["MysqlSaver"] / pair["PostgresSaver"]
            lines[-1] += f"; alone beside PostgresSaver only {ratio:.2f}x, **{'met' if ratio <= 0.5 else 'missed'}**"
        lines[-1] += "."
    for name, err in {**r["errors"], **r["skipped"]}.items():
        lines += ["", f"{name}: {err}"]
    return "\n".join(lines) + "\n"


def plot(r: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4.2))
    for name, f in r["figures"].items():
        ns = [n for n in r["sizes"] if n in f]
        a.plot(ns, [f[n]["step_ms"] for n in ns], marker="o", label=name)
        b.plot([n for n in ns if f[n].get("stored_bytes")], [f[n]["stored_bytes"] / 1e6 for n in ns if f[n].get("stored_bytes")],
               marker="o", label=name)
    for name, f in r.get("step_alone_ms", {}).items():
        ns = [n for n in r["sizes"] if n in f]
        a.plot(ns, [f[n] for n in ns], marker="x", linestyle="--", alpha=0.7, label=f"{name} (alone)")
    for ax, title, unit in ((a, "time per step (put + put_writes)", "ms"), (b, "stored bytes of the thread", "MB")):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("messages in the thread")
        ax.set_ylabel(unit)
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    fig.suptitle(f"LangGraph checkpointers, {r['date']}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def quick(sizes: list[int], rounds: int, seed: int = 7) -> str:
    """The saver alone (``step_alone``) against ``PostgresSaver`` (and ``SqliteSaver``), and
    the store's warm ``save_list`` of the same new message on a list of the same length, in
    ``rounds`` interleaved rounds per size: a few minutes, no graph run, no files written.
    Also counts the statements one MysqlSaver step sends (the server's ``Com_*`` counters)."""
    url = server_url()
    pg = LocalPostgres()
    tmp = tempfile.mkdtemp(prefix="lgbench-")
    ours = Ours(url, "lgbench_quick")
    subjects: list[Subject] = [ours, Postgres(pg.dsn), Sqlite(os.path.join(tmp, "sqlite.db"))]
    rng = random.Random(seed)
    lines = [f"quick: {rounds} interleaved rounds per size, load average {os.getloadavg()[0]:.2f}", "",
             "| N | " + " | ".join(s.name for s in subjects) + " | store save_list | MysqlSaver vs Postgres"
             " | MysqlSaver vs save_list | statements per MysqlSaver step, COMMITs included |",
             "|---:|" + "---:|" * (len(subjects) + 4)]
    try:
        for n in sizes:
            for s in subjects:
                s.seed_alone(n)
            serde = ours.timed.serde
            rows = [to_row(serde, m) for m in ours.alone["messages"]]
            key = f"quick-{n}"
            ours.store.save_list(None, ours.list_thread, key, rows)
            samples: dict[str, list[float]] = {s.name: [] for s in subjects}
            samples["save_list"] = []
            calls = []
            for k in range(1, rounds + 1):
                order: list[Any] = list(subjects) + ["save_list"]
                rng.shuffle(order)
                for s in order:
                    if s == "save_list":
                        rows.append(to_row(serde, AIMessage(content=f"(step {k}) {REPLY_PAD}", id=f"s-{k}")))
                        t0 = time.perf_counter()
                        ours.store.save_list(None, ours.list_thread, key, rows)
                        samples["save_list"].append(time.perf_counter() - t0)
                    elif s is ours and k == rounds:
                        before = _statements(ours.sql)
                        samples[s.name].append(s.step_alone(k))
                        calls.append(_statements(ours.sql) - before)  # (SHOW STATUS is no Com_select)
                    else:
                        samples[s.name].append(s.step_alone(k))
            med = {name: 1e3 * median(xs) for name, xs in samples.items()}
            me, pgm, ls = med[ours.name], med["PostgresSaver"], med["save_list"]
            lines.append(f"| {n:,} | " + " | ".join(f"{med[s.name]:.2f} ms" for s in subjects)
                         + f" | {ls:.2f} ms | {me / pgm:.2f}x | {me / ls:.2f}x | {calls[-1]} |")
    finally:
        for s in subjects:
            s.close()
        pg.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    return "\n".join(lines)


def _statements(con: Any) -> int:
    """Statements the server has run (all sessions: run quick mode on a quiet server)."""
    with con.cursor() as cur:
        cur.execute("SHOW GLOBAL STATUS WHERE Variable_name IN ('Com_select', 'Com_insert', 'Com_update',"
                    " 'Com_delete', 'Com_commit', 'Com_begin', 'Com_set_option', 'Com_rollback')")
        return sum(int(r[1]) for r in cur.fetchall())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10,100,1000")
    parser.add_argument("--out", default=os.path.join(HERE, "results"))
    parser.add_argument("--name", help="output file stem (default: <date>-langgraph)")
    parser.add_argument("--savers", default=",".join(SAVERS),
                        help="the savers of the graph run (MysqlSaver always runs), e.g. MysqlSaver,PostgresSaver")
    parser.add_argument("--quick", type=int, default=0, metavar="ROUNDS",
                        help="only the saver alone vs PostgresSaver, ROUNDS interleaved rounds per size (see quick())")
    args = parser.parse_args()
    sizes = sorted(int(x) for x in args.sizes.split(","))
    if args.quick:
        print(quick(sizes, args.quick), flush=True)
        return 0
    settle("langgraph")  # make bench runs it after the seeding of catalog_bench.py: on a quiet machine
    print(f"LangGraph checkpointers at {sizes} messages (load average {os.getloadavg()[0]:.2f})", flush=True)
    savers = tuple(x.strip() for x in args.savers.split(",") if x.strip())
    unknown = set(savers) - set(SAVERS)
    if unknown:
        parser.error(f"unknown savers {sorted(unknown)}: use some of {', '.join(SAVERS)}")
    r = run(sizes, savers=savers)
    os.makedirs(args.out, exist_ok=True)
    base = os.path.join(args.out, args.name or f"{r['date']}-langgraph")
    with open(base + ".json", "w") as f:
        json.dump(r, f, indent=1, default=str)
    text = markdown(r)
    with open(base + ".md", "w") as f:
        f.write(text)
    plot(r, base + ".png")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
