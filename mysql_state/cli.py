"""``mysql-state``: operate the store from the shell (a thin layer over the API).

    export MYSQL_URL=mysql://user:pw@host:3306/agentscope   # or --url URL, or `server start`
    mysql-state server start|stop|status           # the embedded default server
    mysql-state sessions [--user U] [--limit N] [--older-than 30d] [--json]
    mysql-state show --user U SESSION [KEY] [--tail N] [--history] [--json]
    mysql-state rm --user U SESSION [KEY] [--yes]
    mysql-state fork --user U SESSION NEW_SESSION
    mysql-state prune --older-than 30d [--user U] [--dry-run] [--yes]
    mysql-state export [--user U] > rows.jsonl
    mysql-state import [--on-conflict skip|replace] < rows.jsonl
    mysql-state doctor [--fix]          # exit 1 when a problem remains
    mysql-state migrate [--dry-run]     # prints the SQL
    mysql-state stats
    mysql-state forget-user alice --yes            # forget_user: every row of alice
    MYSQL_STATE_KEYS=k2=...,k1=... mysql-state reencrypt   # rows under the current key
    # and the first commands: sessions USER, exists, get, get-list, length, delete, truncate

``--url``, ``--database``, ``--table`` and ``--json`` go before or after the command; ``-`` as
a user means anonymous sessions. ``python -m mysql_state`` is the same command. Errors are one
line on stderr and a non-zero exit, never a traceback.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import re
import sys
from typing import Any, Optional, Sequence

import orjson

from .catalog import ALL_USERS
from .crypto import Keyring
from .errors import MysqlStateError, SessionNotFoundError
from .store import MysqlAgentStateStore
from .url import scrub

GLOBAL_VALUED = ("--url", "--database", "--table")
KEYS_ENV = "MYSQL_STATE_KEYS"
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def _user(value: Optional[str]) -> Optional[str]:
    return None if value == "-" else value


def duration(text: str) -> dt.timedelta:
    """``30d``, ``12h``, ``90m``, ``45s``, ``2w`` as a timedelta.

    >>> duration("30d")
    datetime.timedelta(days=30)
    """
    m = _DURATION.match(text)
    if m is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration like 30d, 12h, 90m, 45s or 2w")
    return dt.timedelta(**{_UNITS[m.group(2)]: float(m.group(1))})


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="mysql-state", description="Inspect and maintain agent state stored by mysql-state.")
    p.add_argument("--url", help="mysql://user:pw@host:port/database (default: $MYSQL_URL, else the default server)")
    p.add_argument("--database", help="database name (wins over the URL's path)")
    p.add_argument("--table", help="table name (default agentscope_sessions)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    sub = p.add_subparsers(dest="command", required=True)
    sv = sub.add_parser("server", help="the embedded default server (data under ~/.cache/mysql-state)")
    sv.add_argument("action", choices=["start", "stop", "status"])
    s = sub.add_parser("sessions", help="sessions newest first (or, given USER, that user's session ids)")
    s.add_argument("user_ids", nargs="?", metavar="USER", help="print only this user's session ids, one a line")
    s.add_argument("--user", help="only this user ('-' for anonymous)")
    s.add_argument("--limit", type=int, default=100)
    s.add_argument("--older-than", type=duration, help="only sessions with no write for this long (30d, 12h)")
    sh = sub.add_parser("show", help="a session's keys, or one key's value or items")
    sh.add_argument("--user", required=True)
    sh.add_argument("session")
    sh.add_argument("key", nargs="?")
    sh.add_argument("--tail", type=int, help="only the last N items of a list")
    sh.add_argument("--history", action="store_true", help="the list's archived items instead")
    rm = sub.add_parser("rm", help="delete a session, or one key of it")
    rm.add_argument("--user", required=True)
    rm.add_argument("session")
    rm.add_argument("key", nargs="?")
    rm.add_argument("--yes", action="store_true", help="required to delete a whole session")
    fk = sub.add_parser("fork", help="copy a session to a new one (server-side)")
    fk.add_argument("--user", required=True)
    fk.add_argument("session")
    fk.add_argument("new_session")
    fk.add_argument("--new-user", help="the new session's user (default: the same)")
    pr = sub.add_parser("prune", help="delete sessions with no write for a while")
    pr.add_argument("--older-than", type=duration, required=True)
    pr.add_argument("--user")
    pr.add_argument("--dry-run", action="store_true")
    pr.add_argument("--yes", action="store_true", help="required unless --dry-run")
    pr.add_argument("--batch", type=int, default=500)
    ex = sub.add_parser("export", help="every row as JSON lines on stdout")
    ex.add_argument("--user")
    ex.add_argument("--session", action="append", help="only this session of --user (repeatable)")
    im = sub.add_parser("import", help="rows of an export from stdin")
    im.add_argument("--on-conflict", choices=["skip", "replace"], default="skip")
    dr = sub.add_parser("doctor", help="check the table; exit 1 when a problem remains")
    dr.add_argument("--fix", action="store_true")
    mg = sub.add_parser("migrate", help="apply the schema steps the table needs")
    mg.add_argument("--dry-run", action="store_true")
    sub.add_parser("stats", help="sessions, rows, bytes, the largest sessions, and the metrics")
    e = sub.add_parser("exists", help="exit 0 if the session has rows, 1 if not")
    e.add_argument("user")
    e.add_argument("session")
    for name, helptext in (("get", "a single value, as JSON"), ("length", "a list's length")):
        c = sub.add_parser(name, help=helptext)
        c.add_argument("user")
        c.add_argument("session")
        c.add_argument("key")
    g = sub.add_parser("get-list", help="a list's items, one JSON document per line")
    g.add_argument("user")
    g.add_argument("session")
    g.add_argument("key")
    g.add_argument("--offset", type=int, default=0, help="first item; negative counts from the end")
    g.add_argument("--limit", type=int, default=None)
    d = sub.add_parser("delete", help="delete a whole session, or one key of it")
    d.add_argument("user")
    d.add_argument("session")
    d.add_argument("key", nargs="?")
    t = sub.add_parser("truncate", help="remove every row of the table")
    t.add_argument("--yes", action="store_true", help="required: this deletes every session")
    f = sub.add_parser("forget-user", help="erase every row of a user's sessions ('-' for anonymous)")
    f.add_argument("user")
    f.add_argument("--yes", action="store_true", help="required: this deletes every session of the user")
    sub.add_parser("reencrypt", help="rewrite every row under the current key of $MYSQL_STATE_KEYS")
    return p


def hoist(argv: Sequence[str]) -> list[str]:
    """Move the global options to the front, so they may follow the command too."""
    front, rest = [], []
    it = iter(argv)
    for a in it:
        name = a.split("=", 1)[0]
        if name in GLOBAL_VALUED:
            front.append(a)
            if "=" not in a:
                front.append(next(it, ""))
        elif a == "--json":
            front.append(a)
        else:
            rest.append(a)
    return front + rest


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run one command; returns the exit status (2 for a usage or store error)."""
    args = _parser().parse_args(hoist(list(sys.argv[1:] if argv is None else argv)))
    if args.command == "server":
        return _server(args)
    url = args.url or os.environ.get("MYSQL_URL")
    if not url:
        from .server import default_server_url

        url = default_server_url()
    if not url:
        _err("give a URL (--url mysql://user:pw@host:port/database), set MYSQL_URL, or run `mysql-state server start`")
        return 2
    for command, flag in (("truncate", "yes"), ("prune", "yes")):
        if args.command == command and not getattr(args, flag) and not getattr(args, "dry_run", False):
            _err(f"{command} deletes sessions; pass --yes to confirm (or --dry-run to see what it would do)")
            return 2
    if args.command == "forget-user" and not args.yes:
        _err(f"forget-user removes every session of user {args.user!r}; nothing was deleted: pass --yes to confirm")
        return 2
    if args.command == "rm" and args.key is None and not args.yes:
        _err("rm of a whole session: pass --yes to confirm")
        return 2
    try:
        # Encrypted sessions read with the ring of MYSQL_STATE_KEYS (reencrypt needs it).
        ring = Keyring.from_env() if os.environ.get(KEYS_ENV) or args.command == "reencrypt" else None
        with MysqlAgentStateStore.from_url(url, args.database, args.table, pool_size=1, encryption=ring) as store:
            return COMMANDS[args.command](store, args)
    except (MysqlStateError, ValueError, TypeError, LookupError) as exc:
        _err(_one_line(str(exc), url))
        return 2
    except KeyboardInterrupt:
        _err("interrupted")
        return 130
    except Exception as exc:  # noqa: BLE001 - a CLI prints one line, never a traceback
        _err(f"{type(exc).__name__}: {_one_line(str(exc), url)}")
        return 2


def _err(message: str) -> None:
    print(f"mysql-state: {message}", file=sys.stderr)


def _one_line(message: str, url: str) -> str:
    """The message on one line, with the URL's password (if it slipped in) as ``***``."""
    return " ".join(scrub(message, url).split())


def _dumps(obj: Any) -> str:
    return orjson.dumps(obj, default=str).decode()


def table(rows: list[list[Any]], header: list[str]) -> str:
    """A plain text table, columns padded to their widest cell."""
    cells = [header] + [["-" if c is None else str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells)


def _out(args: argparse.Namespace, obj: Any, text: str) -> None:
    print(_dumps(obj) if args.json else text)


# ---- commands --------------------------------------------------------------------------------


def _server(args: argparse.Namespace) -> int:
    from . import server

    try:
        if args.action == "start":
            url = server.DefaultServer().start()
            print(url)
        elif args.action == "stop":
            print("stopped" if server.DefaultServer().stop() else "not running")
        else:
            url = server.default_server_url()
            print(f"running: {url}" if url else "not running")
            return 0 if url else 1
    except (RuntimeError, OSError) as exc:
        _err(_one_line(str(exc), ""))
        return 2
    return 0


def _sessions(store: MysqlAgentStateStore, args: argparse.Namespace) -> int:
    if args.user_ids is not None:  # the first form: one user's session ids
        for sid in sorted(store.list_session_ids(_user(args.user_ids))):
            print(sid)
        return 0
    user = ALL_USERS if args.user is None else _user(args.user)
    before = None
    if args.older_than is not None:
        before = dt.datetime.now(dt.timezone.utc) - args.older_than
    page = store.sessions(user, updated_before=before, limit=args.limit)
    items = [dict(user_id=s.user_id, session_id=s.session_id, keys=s.keys, rows=s.rows, bytes=s.bytes,
                  created_at=s.created_at, updated_at=s.updated_at) for s in page.items]
    rows = [[s.user_id or "-", s.session_id, len(s.keys), s.rows, s.bytes, s.updated_at] for s in page.items]
    _out(args, {"items": items, "next_cursor": page.next_cursor},
         table(rows, ["USER", "SESSION", "KEYS", "ROWS", "BYTES", "UPDATED"]))
    return 0


def _show(store: MysqlAgentStateStore, args: argparse.Namespace) -> int:
    user = _user(args.user)
    if not store.exists(user, args.session):
        raise SessionNotFoundError(f"no session {args.session!r} of user {args.user!r}")
    if args.key is None:
        info = _info(store, user, args.session)
        _out(args, info, "\n".join(f"{k}: {v}" for k, v in info.items()))
        return 0
    if args.history:
        items = [{"value": h.value, "archived_at": h.archived_at} for h in store.get_history(user, args.session, args.key)]
        _out(args, items, "\n".join(f"{h['archived_at']}  {_dumps(h['value'])}" for h in items))
        return 0
    if store.get_versioned(user, args.session, args.key).version == 0:
        raise LookupError(f"session {args.session!r} has no key {args.key!r}")
    if store.get_list_versioned(user, args.session, args.key).version > 0:  # a hash row: a list
        items = store.get_list(user, args.session, args.key, offset=-args.tail if args.tail else 0)
        _out(args, items, "\n".join(_dumps(i) for i in items))
        return 0
    value = store.get(user, args.session, args.key)
    _out(args, value, _dumps(value))
    return 0


def _info(store: MysqlAgentStateStore, user: Optional[str], session: str) -> dict:
    """The catalog entry of one session (paged through that user's sessions)."""
    cursor = None
    while True:
        page = store.sessions(user, limit=500, cursor=cursor)
        for s in page.items:
            if s.session_id == session:
                return dict(user_id=s.user_id, session_id=s.session_id, keys=s.keys, rows=s.rows, bytes=s.bytes,
                            created_at=s.created_at, updated_at=s.updated_at)
        if page.next_cursor is None:
            return dict(user_id=user, session_id=session, keys="(no catalog row: run doctor --fix)")
        cursor = page.next_cursor


def _rm(store: MysqlAgentStateStore, args: argparse.Namespace) -> int:
    user = _user(args.user)
    if not store.exists(user, args.session):
        raise SessionNotFoundError(f"no session {args.session!r} of user {args.user!r}")
    store.delete(user, args.session, args.key)
    _out(args, {"deleted": True}, "deleted")
    return 0


def _fork(store: MysqlAgentStateStore, args: argparse.Namespace) -> int:
    user = _user(args.user)
    new_user = user if args.new_user is None else _user(args.new_user)
    n = store.fork(user, args.session, args.new_session, new_user_id=new_user)
    _out(args, {"rows": n}, f"copied {n} rows")
    return 0


class Bar:
    """A progress bar on stderr (one line, redrawn)."""

    def __init__(self, what: str) -> None:
        self.what = what

    def __call__(self, done: int, total: Optional[int] = None) -> None:
        if total:
            width = 30
            filled = int(width * min(done, total) / total)
            sys.stderr.write(f"\r{self.what} [{'#' * filled}{'.' * (width - filled)}] {done}/{total}")
        else:
            sys.stderr.write(f"\r{self.what} {done}")
        sys.stderr.flush()

    def end(self) -> None:
        sys.stderr.write("\n")


def _prune(store: MysqlAgentStateStore, args: argparse.Namespace) -> int:
    user = ALL_USERS if args.user is None else _user(args.user)
    bar = Bar("would prune" if args.dry_run else "pruning")
    try:
        report = store.prune(args.older_than, user_id=user, dry_run=args.dry_run, batch=args.batch, progress=bar)
    finally:
        bar.end()
    verb = "would delete" if args.dry_run else "deleted"
    _out(args, {"sessions": report.sessions, "rows": report.rows, "dry_run": args.dry_run},
         f"{verb} {report.sessions} sessions ({report.rows} rows)")
    return 0


def _export(store: MysqlAgentStateStore, args: argparse.Namespace) -> int:
    user = ALL_USERS if args.user is None else _user(args.user)
    if args.session and args.user is None:
        raise ValueError("--session needs --user")
    bar = Bar("exported rows")
    n = 0
    write = sys.stdout.write
    for line in store.export(user, sessions=args.session):
        write(line + "\n")
        n += 1
        if n % 1000 == 0:
            bar(n)
    sys.stdout.flush()
    bar(n)
    bar.end()
    return 0


def _import(store: MysqlAgentStateStore, args: argparse.Namespace) -> int:
    bar = Bar("imported rows")
    n = store.import_rows(sys.stdin, on_conflict=args.on_conflict, progress=bar)
    bar.end()
    _out(args, {"written": n}, f"{n} rows written")
    return 0


def _doctor(store: MysqlAgentStateStore, args: argparse.Namespace) -> int:
    problems = store.doctor(fix=args.fix)
    left = [p for p in problems if not p.fixed]
    _out(args, [vars(p) for p in problems],
         "\n".join(("fixed: " if p.fixed else "problem: ") + p.message for p in problems) or "healthy")
    return 1 if left else 0


def _migrate(store: MysqlAgentStateStore, args: argparse.Namespace) -> int:
    steps = store.migrate(dry_run=args.dry_run)
    head = "would apply" if args.dry_run else "applied"
    _out(args, [{"name": s.name, "sql": s.sql} for s in steps],
         "\n".join(f"-- {head} {s.name}\n{s.sql};" for s in steps) or "nothing to do: the schema is current")
    return 0


def _stats(store: MysqlAgentStateStore, args: argparse.Namespace) -> int:
    sessions, rows, nbytes = 0, 0, 0
    biggest: list = []
    cursor = None
    while True:
        page = store.sessions(limit=1000, cursor=cursor)
        for s in page.items:
            sessions += 1
            rows += s.rows
            nbytes += s.bytes
            biggest.append((s.bytes, s.rows, s.user_id, s.session_id))
        cursor = page.next_cursor
        if cursor is None:
            break
        biggest = sorted(biggest, reverse=True)[:10]
    biggest = sorted(biggest, reverse=True)[:10]
    m = store.metrics()
    out = {"sessions": sessions, "rows": rows, "bytes": nbytes,
           "largest": [{"user_id": u, "session_id": s, "rows": r, "bytes": b} for b, r, u, s in biggest], "metrics": m}
    text = (f"sessions {sessions}\nrows     {rows}\nbytes    {nbytes}\n\nlargest sessions\n"
            + table([[u or "-", s, r, b] for b, r, u, s in biggest], ["USER", "SESSION", "ROWS", "BYTES"])
            + "\n\nmetrics (this process)\n" + _dumps(m))
    _out(args, out, text)
    return 0


def _exists(store: MysqlAgentStateStore, args: argparse.Namespace) -> int:
    found = store.exists(_user(args.user), args.session)
    print("yes" if found else "no")
    return 0 if found else 1


def _get(store: MysqlAgentStateStore, args: argparse.Namespace) -> int:
    value, version = store.get_versioned(_user(args.user), args.session, args.key)
    if version == 0 and value is None:
        _err(f"no value at {args.key!r}")
        return 1
    print(_dumps(value))
    return 0


def _length(store: MysqlAgentStateStore, args: argparse.Namespace) -> int:
    print(store.list_length(_user(args.user), args.session, args.key))
    return 0


def _get_list(store: MysqlAgentStateStore, args: argparse.Namespace) -> int:
    for item in store.get_list(_user(args.user), args.session, args.key, offset=args.offset, limit=args.limit):
        print(_dumps(item))
    return 0


def _delete(store: MysqlAgentStateStore, args: argparse.Namespace) -> int:
    store.delete(_user(args.user), args.session, args.key)
    return 0


def _truncate(store: MysqlAgentStateStore, args: argparse.Namespace) -> int:
    print(f"removed {store.truncate_all_sessions()} rows")
    return 0


def _forget_user(store: MysqlAgentStateStore, args: argparse.Namespace) -> int:
    print(f"removed {store.forget_user(_user(args.user))} rows")
    return 0


def _reencrypt(store: MysqlAgentStateStore, args: argparse.Namespace) -> int:
    print(f"rewrote {store.reencrypt()} rows under key {store._keyring.current!r}")  # noqa: SLF001
    return 0


COMMANDS = {
    "sessions": _sessions, "show": _show, "rm": _rm, "fork": _fork, "prune": _prune, "export": _export,
    "import": _import, "doctor": _doctor, "migrate": _migrate, "stats": _stats, "exists": _exists,
    "get": _get, "length": _length, "get-list": _get_list, "delete": _delete, "truncate": _truncate,
    "forget-user": _forget_user, "reencrypt": _reencrypt,
}


if __name__ == "__main__":
    sys.exit(main())
