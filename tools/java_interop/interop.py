"""This store and AgentScope Java's real ``MysqlAgentStateStore`` on one table: what
``docs/java.md`` says each sees of the other, checked.

    tools/java_interop/build.sh /path/to/agentscope-java     # once: JDK, jars, javac
    .venv/bin/python tools/java_interop/interop.py            # MYSQL_URL, else the embedded server

Every check prints OK or FAIL with what it found; the exit status is 1 when one failed. Each
run works in a database of its own (``java_interop_<random>``), dropped at the end. Not part
of ``make test``: the Java store's code is on no registry this project installs from.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import uuid
import warnings
from typing import Any, Callable
from urllib.parse import quote, urlsplit, urlunsplit

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))

import pymysql  # noqa: E402

from mysql_state import MysqlAgentStateStore, StaleStateError  # noqa: E402
from mysql_state.server import server_url  # noqa: E402
from mysql_state.url import parse_url  # noqa: E402

TABLE = "agentscope_sessions"
FAILED: list[str] = []


class Java:
    """The Java store on one database: each call runs the driver with a few operations."""

    def __init__(self, kwargs: dict, database: str, build: str) -> None:
        self.classpath = open(os.path.join(build, "classpath")).read().strip()
        query = f"user={quote(kwargs.get('user') or '')}&password={quote(kwargs.get('password') or '')}"
        self.jdbc = f"jdbc:mariadb://{kwargs.get('host', '127.0.0.1')}:{kwargs.get('port', 3306)}/?{query}"
        self.database = database

    def __call__(self, *ops: list, create: bool = False) -> list:
        stdin = "".join(json.dumps(op) + "\n" for op in ops)
        done = subprocess.run(["java", "-Dfile.encoding=UTF-8", "-cp", self.classpath, "Driver", self.jdbc,
                               self.database, TABLE, "true" if create else "false"],
                              input=stdin, capture_output=True, text=True, encoding="utf-8", check=False)
        out = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
        if len(out) != len(ops) or not all(r.get("ok") for r in out):
            raise RuntimeError(f"the Java store failed: {done.stdout[-800:]} {done.stderr[-800:]}")
        return [r.get("result") for r in out]

    def one(self, *op: Any) -> Any:
        return self(list(op))[0]


def check(what: str, got: Any, want: Any) -> None:
    ok = got == want
    print(f"{'OK  ' if ok else 'FAIL'} {what}" + ("" if ok else f"\n     got:  {got!r}\n     want: {want!r}"))
    if not ok:
        FAILED.append(what)


def stale(fn: Callable[[], Any]) -> bool:
    try:
        return fn() == -1
    except StaleStateError:
        return True


def main() -> int:
    build = os.environ.get("JAVA_INTEROP_BUILD", os.path.join(HERE, "build"))
    if not os.path.exists(os.path.join(build, "classpath")):
        print(f"no build in {build}: run tools/java_interop/build.sh /path/to/agentscope-java first", file=sys.stderr)
        return 2
    url = os.environ.get("MYSQL_URL") or server_url()
    kwargs, _ = parse_url(url)
    database = f"java_interop_{uuid.uuid4().hex[:8]}"
    con = pymysql.connect(autocommit=True, charset="utf8mb4", **kwargs)
    java = Java(kwargs, database, build)
    try:
        java(["supportsVersioning"], create=True)  # the Java store's own DDL makes the table
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # its collation is not exact: the store says so and works
            py = MysqlAgentStateStore.from_url(in_database(url, database))
        run(py, java, con, database)
        py.migrate()
        check("after migrate(), the Java store reads what it wrote", java.one("getList", "alice", "c1", "mem")[-1],
              {"from": "java", "turn": True})
        java(["save", "alice", "c9", "k", {"after": "migrate"}])
        check("after migrate(), this store reads the Java store's new value", py.get("alice", "c9", "k"),
              {"after": "migrate"})
        py.close()
    finally:
        with con.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{database}`")
        con.close()
    print(f"{'all checks passed' if not FAILED else f'{len(FAILED)} FAILED'} (the Java store of {build})")
    return 1 if FAILED else 0


def run(py: MysqlAgentStateStore, java: Java, con: Any, database: str) -> None:
    t = f"`{database}`.`{TABLE}`"

    def q(statement: str, *args: Any) -> list:
        with con.cursor() as cur:
            cur.execute(statement.replace("{t}", t), args)
            return list(cur.fetchall())

    # values, both ways, and their compare-and-set across the stores
    java(["save", "alice", "c1", "plan", {"step": 1, "text": "héllo 😀"}])
    check("a value the Java store saved reads here, at version 1", tuple(py.get_versioned("alice", "c1", "plan")),
          ({"step": 1, "text": "héllo 😀"}, 1))
    check("a compare-and-set here on the Java store's version", py.save_if_version("alice", "c1", "plan", {"step": 2}, 1), 2)
    check("the Java store's compare-and-set with a stale version", java.one("saveIfVersion", "alice", "c1", "plan",
                                                                           {"step": 9}, 1), -1)
    check("the Java store reads this store's value", java.one("getVersioned", "alice", "c1", "plan"),
          {"value": {"step": 2}, "version": 2})
    # lists, both ways, several rounds
    items = [{"from": "java", "n": i} for i in range(3)]
    java(["saveList", "alice", "c1", "mem", items])
    check("a list the Java store saved reads here", py.get_list("alice", "c1", "mem"), items)
    items = items + [{"from": "py", "n": 3}]
    check("this store's next save rewrites it once", py.save_list_report("alice", "c1", "mem", items).kind, "rewrite")
    check("the Java store reads it", java.one("getList", "alice", "c1", "mem"), items)
    items = items[:3] + [{"from": "java", "n": 4}]
    java(["saveList", "alice", "c1", "mem", items])
    check("the Java store's save of a list this store wrote reads here", py.get_list("alice", "c1", "mem"), items)
    check("append_list here, read there", (py.append_list("alice", "c1", "mem", ["tail"]),
                                          java.one("getList", "alice", "c1", "mem")[-1]), (5, "tail"))
    py.save_list("alice", "c1", "mem", items)
    check("the Java store's delete of one key does nothing", (java.one("delete", "alice", "c1", "plan"),
                                                             py.get("alice", "c1", "plan")), (None, {"step": 2}))
    # a list compare-and-set here sees a Java save in between (it leaves the version as it was)
    _, version = py.get_list_versioned("alice", "c1", "mem")
    java(["saveList", "alice", "c1", "mem", items + [{"from": "java", "turn": True}]])
    check("a list compare-and-set with the version read before a Java save is stale",
          stale(lambda: py.save_list_if_version("alice", "c1", "mem", items + ["py-turn"], version)), True)
    check("the Java store's turn is kept", java.one("getList", "alice", "c1", "mem")[-1], {"from": "java", "turn": True})
    # ids: a blank user is the anonymous one in both stores; catalog rows are invisible to the Java store
    java(["saveList", "  ", "anon", "mem", ["a"]])
    check("a blank user is the anonymous one", (py.get_list(None, "anon", "mem"), py.get_list("  ", "anon", "mem")),
          (["a"], ["a"]))
    check("the Java store lists the user's sessions, not this store's catalog rows",
          java.one("listSessionIds", "alice"), ["c1"])
    # a session the Java store writes, whose catalog row is old, is not pruned
    py.save("bob", "live", "k", 1)
    q("UPDATE {t} SET updated_at = NOW() - INTERVAL 3 DAY WHERE session_id IN ('bob:live', '__catalog__')")
    java(["saveList", "bob", "live", "mem", ["today"]])
    check("prune keeps a session the Java store wrote since the cutoff",
          (py.prune(dt.timedelta(days=1), user_id="bob").sessions, java.one("getList", "bob", "live", "mem")),
          (0, ["today"]))
    # a session the Java store deletes: this store's catalog row and history stay until its own tools
    with MysqlAgentStateStore.from_url(in_database(os.environ.get("MYSQL_URL") or server_url(), database),
                                       keep_history=True) as keeper:
        keeper.save_list("carol", "private", "mem", ["t0", "t1", "t2"])
        keeper.save_list("carol", "private", "mem", ["summary"])
        java(["delete", "carol", "private"])
        check("after the Java store's delete, the history is still there", len(keeper.get_history("carol", "private", "mem")),
              3)
        keeper.forget_user("carol")
        check("this store's forget_user leaves no row of the user", q("SELECT COUNT(*) FROM {t} WHERE session_id LIKE "
                                                                     "'%%carol%%' OR state_key LIKE '%%carol%%'"), [(0,)])


def in_database(url: str, database: str) -> str:
    """``url`` naming ``database`` (its query string kept)."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path="/" + database))


if __name__ == "__main__":
    sys.exit(main())
