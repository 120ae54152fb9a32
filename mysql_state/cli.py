"""``mysql-state``: operate the store from the shell, a command (or an option) per API call.

    export MYSQL_URL=mysql://user:pw@host:3306/agentscope   # or --url URL, or `server start`
    mysql-state server start|stop|status           # the embedded default server
    mysql-state sessions [USER] [--user U] [--limit N] [--older-than 30d] [--newer-than 1d] [--cursor C]
    mysql-state exists USER SESSION                # exit 0 / 1
    mysql-state get USER SESSION [KEY] [--offset N] [--limit N] [--tail N] [--history] [--versioned]
    mysql-state get-many USER SESSION [--value K]... [--list K]...; get-prefix USER SESSION PREFIX
    mysql-state list-length USER SESSION KEY
    mysql-state save USER SESSION KEY JSON [--if-version N]; save-list USER SESSION KEY JSON_ARRAY [--if-version N]
    mysql-state save-many USER SESSION [--value KEY JSON]... [--list KEY JSON_ARRAY]... [--if-version KEY N]...
    mysql-state append-list USER SESSION KEY JSON...; pop-list USER SESSION KEY
    mysql-state delete USER SESSION [KEY...] [--maintenance] [--yes]  # a whole session asks (or needs --yes)
    mysql-state fork USER SESSION NEW_SESSION [--new-user U]
    mysql-state prune --older-than 30d [--user U] [--dry-run] [--yes]
    mysql-state export [--user U [--session S]...] > rows.jsonl
    mysql-state import [--on-conflict skip|replace [--yes]] < rows.jsonl
    mysql-state doctor [--fix]; migrate [--dry-run]; stats
    mysql-state forget-user USER [--batch N] [--yes]; truncate [--yes]
    MYSQL_STATE_KEYS=k2=...,k1=... mysql-state reencrypt [--batch N]   # rows under the current key

Old names kept as aliases: ``show`` and ``get-list`` (of ``get``), ``length`` (of
``list-length``), ``rm`` (of ``delete``); ``--user U SESSION`` works where ``USER SESSION``
does. A destructive command (deleting a whole session, ``prune``, ``truncate``,
``forget-user``, ``import --on-conflict replace``) asks on a terminal and needs ``--yes``
otherwise (exit 2, nothing deleted); deleting one key is an ordinary write and does not ask.

``--url``, ``--database``, ``--table``, ``--json``, ``--create`` and ``--keep-history`` go
before or after the command; ``-`` as
a user means anonymous sessions. ``python -m mysql_state`` is the same command. Errors are one
line on stderr and a non-zero exit (1: not found, 2: refused or failed), never a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import re
import sys
import warnings
from typing import Any, Iterator, NoReturn, Optional, Sequence

import orjson

from . import keys
from .catalog import ALL_USERS
from .crypto import Keyring
from .errors import (DecryptionError, MysqlStateError, SchemaNotFoundError,
                     SessionNotFoundError, StaleStateError)
from .results import UNVERSIONED
from .store import MysqlAgentStateStore
from .url import scrub

GLOBAL_VALUED = ("--url", "--database", "--table")
GLOBAL_FLAGS = ("--json", "--create", "--keep-history")
KEYS_ENV = "MYSQL_STATE_KEYS"
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
NOT_FOUND, REFUSED = 1, 2
MAX_COUNT = 2**31 - 1


class NotFound(LookupError):
    """What a command names does not exist (exit 1)."""


class Refused(Exception):
    """A destructive command was not confirmed; nothing was written (exit ``code``)."""

    def __init__(self, message: str, code: int = REFUSED) -> None:
        super().__init__(message)
        self.code = code


def _user(value: Optional[str]) -> Optional[str]:
    """A USER argument: ``-`` is the anonymous user; a blank one is refused (an unset shell
    variable must not name the anonymous user)."""
    if value == keys.CLI_ANONYMOUS:
        return None
    if value is not None and not value.strip():
        raise ValueError(f"user {value!r} is blank: give a user id, or '-' for the anonymous user")
    if value == keys.ANONYMOUS:  # the API's advice (pass None) means nothing here
        raise ValueError(f"user {value!r} is reserved for anonymous callers: give '-' for the anonymous user")
    return value


def _span(span: dt.timedelta) -> str:
    """A duration as a person reads it: ``30 days``, ``12:00:00``.

    >>> _span(dt.timedelta(days=30)), _span(dt.timedelta(days=1)), _span(dt.timedelta(hours=12))
    ('30 days', '1 day', '12:00:00')
    """
    if span.seconds == 0 and span.microseconds == 0 and span.days:
        return f"{span.days} day{'' if span.days == 1 else 's'}"
    return str(span)


def _who(value: Optional[str]) -> str:
    """A USER argument as a confirmation names it."""
    return "the anonymous user" if value == "-" else f"user {value!r}"


def duration(text: str) -> dt.timedelta:
    """``30d``, ``12h``, ``90m``, ``45s``, ``2w`` as a timedelta; one that reaches before year 1
    is refused like a malformed one.

    >>> duration("30d")
    datetime.timedelta(days=30)
    """
    m = _DURATION.match(text)
    if m is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration like 30d, 12h, 90m, 45s or 2w")
    try:
        span = dt.timedelta(**{_UNITS[m.group(2)]: float(m.group(1))})
        dt.datetime.now(dt.timezone.utc) - span
    except OverflowError:
        raise argparse.ArgumentTypeError(f"{text!r} is too long a duration: it reaches before the year 1") from None
    return span


def count(text: str) -> int:
    """A whole number from 1 to 2**31 - 1 (``--limit``, ``--batch``, ``--tail``)."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not 1 <= n <= MAX_COUNT:
        raise argparse.ArgumentTypeError(f"{text!r} must be from 1 to {MAX_COUNT}")
    return n


def version_number(text: str) -> int:
    """An ``--if-version`` value: a version, 0 for "only if absent". The API's ``UNVERSIONED``
    (-1, "whatever is stored") is refused: a compare-and-set that compares nothing is a blind write.

    >>> version_number("3")
    3
    """
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a version number") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be a version >= 0 (0: only if absent)")
    if n > 2**63 - 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be a version of at most 2**63 - 1 (the version column "
                                         "is a BIGINT)")
    return n


#: 19 digits in a row: maybe an integer beyond 64 bits (2**63 has 19).
_LONG_DIGITS = re.compile(r"\d{19}")


def _json(text: str) -> Any:
    """A JSON document given on the command line, its integers exact: orjson reads an integer
    beyond 64 bits as a float (1e+23 for 99999999999999999999999), which would be saved as
    another number; Python's reader keeps it, and the store then refuses it as the API does."""
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"{text!r} is not a JSON document ({exc})") from None
    if _LONG_DIGITS.search(text):  # valid JSON (orjson read it): read again, integers exact
        value = json.loads(text)
    return value


class Parser(argparse.ArgumentParser):
    """argparse whose usage errors are one line on stderr (exit 2), like every other error."""

    def error(self, message: str) -> "NoReturn":  # type: ignore[override]
        _err(f"{message} (see `{self.prog} --help`)")
        sys.exit(REFUSED)


#: Every command: canonical name -> (aliases, what it does). The canonical names are the API's
#: (``list_length`` is ``list-length``); the aliases are the names of earlier versions.
COMMAND_HELP = {
    "server": ((), "start, stop or ask after the embedded default server (data under ~/.cache/mysql-state)"),
    "sessions": ((), "sessions newest first, a page at a time (store.sessions); given USER, that user's "
                     "session ids, one a line (store.list_session_ids)"),
    "exists": ((), "exit 0 if the session has rows, 1 if not (store.exists)"),
    "get": (("show", "get-list"), "a key's value as JSON, or a list's items one JSON document a line "
                                  "(store.get / store.get_list); without KEY, the session's catalog entry; "
                                  "--history: the list's archived items (store.get_history)"),
    "get-many": ((), "several values and whole lists of one session, read in one statement, as one JSON "
                     "object (store.get_many)"),
    "get-prefix": ((), "the values of one session whose key starts with PREFIX, as one JSON object (store.get_prefix)"),
    "list-length": (("length",), "a list's length (store.list_length)"),
    "key-kind": ((), "what a key holds: list, value, or exit 1 when absent (store.key_kind)"),
    "save": ((), "store one JSON value at a key (store.save); --if-version N: only if the key's version is N "
                 "(store.save_if_version), exit 1 when it is not"),
    "save-list": ((), "store a whole list, given as a JSON array (store.save_list); --if-version N as save's "
                      "(store.save_list_if_version)"),
    "save-many": ((), "several values and lists of one session in ONE transaction, all or nothing "
                      "(store.save_many); --if-version KEY N: a compare-and-set of that key"),
    "append-list": ((), "add items, each a JSON document, at a list's end; prints the new length (store.append_list)"),
    "pop-list": ((), "remove a list's last item and print it; exit 1 when the list is empty (store.pop_list)"),
    "delete": (("rm",), "delete one key, several keys in one transaction (store.delete_keys), or (asking first) a "
                        "whole session (store.delete); exit 1 when it does not exist"),
    "fork": ((), "copy a session to a new one, server-side (store.fork)"),
    "prune": ((), "delete, asking first, the sessions with no write for a while (store.prune)"),
    "export": ((), "every row as JSON lines on stdout (store.export)"),
    "import": ((), "rows of an export from stdin (store.import_rows); --on-conflict replace needs --yes"),
    "doctor": ((), "check the table, --fix repairs; exit 1 when a problem remains (store.doctor)"),
    "migrate": ((), "apply the schema steps the table needs, --dry-run prints their SQL (store.migrate)"),
    "stats": ((), "sessions, rows, bytes, the largest sessions, and this process's metrics (store.metrics)"),
    "truncate": ((), "delete, asking first, every row of the table (store.truncate_all_sessions)"),
    "forget-user": ((), "erase, asking first, every row of a user's sessions (store.forget_user)"),
    "reencrypt": ((), "rewrite every row under the current key of $MYSQL_STATE_KEYS (store.reencrypt)"),
}


def _command(sub: Any, name: str, run: Any, spec: Optional[tuple] = None, usage: Optional[str] = None) -> argparse.ArgumentParser:
    aliases, what = COMMAND_HELP[name]
    text = what + (f" (aliases: {', '.join(aliases)})" if aliases else "")
    c = sub.add_parser(name, aliases=list(aliases), help=what,  # the list shows the aliases beside the name
                       description=text[0].upper() + text[1:] + ".",
                       epilog="Every command also takes the global options (mysql-state --help): --url, --database, "
                              "--table, --json, --create, --keep-history.",
                       usage=None if usage is None else f"mysql-state {name} {usage}")
    c.set_defaults(run=run, canonical=name, spec=spec, cmd=c)
    if spec is not None:  # USER SESSION ..., or --user U SESSION ...
        c.add_argument("--user", help="the user ('-' for anonymous), given here instead of as the first positional")
        c.add_argument("target", nargs="*", help=argparse.SUPPRESS)
    return c


def _yes(c: argparse.ArgumentParser) -> None:
    c.add_argument("--yes", action="store_true", help="do it without asking (needed when there is no terminal to ask on)")


class _Version(argparse.Action):
    """``--version``: the installed distribution's version, looked up only when asked (reading
    the package metadata costs ~30 ms, which every other command would pay at start-up)."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS,
                         help="print the version of mysql-state and exit")

    def __call__(self, parser: argparse.ArgumentParser, namespace: Any, values: Any, option_string: Any = None) -> None:
        from importlib.metadata import PackageNotFoundError, version

        try:
            found = version("mysql-state")
        except PackageNotFoundError:  # run from a checkout that is not installed
            found = "(not installed)"
        print(f"mysql-state {found}")
        parser.exit()


def _parser() -> argparse.ArgumentParser:
    p = Parser(prog="mysql-state", description="Inspect and maintain agent state stored by mysql-state: a "
               "command (or an option of one) per call of MysqlAgentStateStore an operator makes. With "
               "$MYSQL_STATE_KEYS set (id=<base64 key>,..., the current first), every command reads and writes "
               "encrypted rows.")
    p.add_argument("--version", action=_Version)
    p.add_argument("--url", help="mysql://user:pw@host:port/database (default: $MYSQL_URL, else the default server)")
    p.add_argument("--database", help="database name (wins over the URL's path)")
    p.add_argument("--table", help="table name (default agentscope_sessions)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--create", action="store_true",
                   help="create the database and table when missing (create_if_not_exist=True): a new server, "
                        "a restore into a fresh database")
    p.add_argument("--keep-history", action="store_true",
                   help="archive what a save-list drops, shrunk or replaced items (keep_history=True), as the application's "
                        "store does when it keeps history; `get --history` reads it")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    sv = _command(sub, "server", None)
    sv.add_argument("action", choices=["start", "stop", "status"])
    s = _command(sub, "sessions", _sessions)
    s.add_argument("user_ids", nargs="?", metavar="USER", help="print only this user's session ids, one a line")
    s.add_argument("--user", help="only this user's sessions ('-' for anonymous)")
    s.add_argument("--limit", type=count, help="sessions per page (default 100)")
    s.add_argument("--older-than", type=duration, help="only sessions with no write for this long (30d, 12h)")
    s.add_argument("--newer-than", type=duration, help="only sessions written in the last 30d, 12h, ...")
    s.add_argument("--cursor", help="the next page: the next_cursor of the page before (printed on stderr, or in --json)")
    _command(sub, "exists", _exists, ("session",), "[--user U] USER SESSION")
    g = _command(sub, "get", _get, ("session", "key?"),
                 "[--user U] USER SESSION [KEY] [--offset N] [--limit N] [--tail N] [--history] [--versioned]")
    g.add_argument("--offset", type=int, default=None, help="a list's first item; negative counts from the end")
    g.add_argument("--limit", type=count, default=None, help="at most N items of a list")
    g.add_argument("--tail", type=count, help="only the last N items of a list")
    g.add_argument("--history", action="store_true", help="the list's archived items instead")
    g.add_argument("--versioned", action="store_true",
                   help='the value (or the whole list) and its version: {"value": ..., "version": N}')
    gm = _command(sub, "get-many", _get_many, ("session",),
                  "[--user U] USER SESSION [--value KEY]... [--list KEY]... [--versioned]")
    gm.add_argument("--value", action="append", default=[], metavar="KEY", help="a value key (repeatable)")
    gm.add_argument("--list", action="append", default=[], metavar="KEY", help="a list key (repeatable)")
    gm.add_argument("--versioned", action="store_true", help='each as {"value": ..., "version": N}')
    gp = _command(sub, "get-prefix", _get_prefix, ("session", "prefix"), "[--user U] USER SESSION PREFIX [--versioned]")
    gp.add_argument("--versioned", action="store_true", help='each as {"value": ..., "version": N}')
    _command(sub, "list-length", _length, ("session", "key"), "[--user U] USER SESSION KEY")
    _command(sub, "key-kind", _kind, ("session", "key"), "[--user U] USER SESSION KEY")
    sv1 = _command(sub, "save", _save, ("session", "key", "value"), "[--user U] USER SESSION KEY JSON [--if-version N]")
    sv2 = _command(sub, "save-list", _save_list, ("session", "key", "value"),
                   "[--user U] USER SESSION KEY JSON_ARRAY [--if-version N]")
    for c in (sv1, sv2):
        c.add_argument("--if-version", type=version_number, metavar="N",
                       help="write only if the key's version is N (0: only if absent); exit 1 when it is not")
    sm = _command(sub, "save-many", _save_many, ("session",),
                  "[--user U] USER SESSION [--value KEY JSON]... [--list KEY JSON_ARRAY]... [--if-version KEY N]...")
    sm.add_argument("--value", nargs=2, action="append", default=[], metavar=("KEY", "JSON"),
                    help="a value to save (repeatable)")
    sm.add_argument("--list", nargs=2, action="append", default=[], metavar=("KEY", "JSON_ARRAY"),
                    help="a whole list to save (repeatable)")
    sm.add_argument("--if-version", nargs=2, action="append", default=[], metavar=("KEY", "N"),
                    help="save only if KEY's version is N (0: only if absent); else exit 1, nothing written")
    _command(sub, "append-list", _append_list, ("session", "key", "items*"), "[--user U] USER SESSION KEY JSON...")
    _command(sub, "pop-list", _pop_list, ("session", "key"), "[--user U] USER SESSION KEY")
    d = _command(sub, "delete", _delete, ("session", "keys*"), "[--user U] USER SESSION [KEY...] [--yes] [--maintenance]")
    d.add_argument("--maintenance", action="store_true",
                   help="keys deleted as maintenance: the session's activity time is left as it was")
    _yes(d)
    fk = _command(sub, "fork", _fork, ("session", "new_session"), "[--user U] USER SESSION NEW_SESSION [--new-user U]")
    fk.add_argument("--new-user", help="the new session's user (default: the same)")
    pr = _command(sub, "prune", _prune)
    pr.add_argument("--older-than", type=duration, required=True, help="no write for this long (30d, 12h, 2w)")
    pr.add_argument("--user", help="only this user's sessions ('-' for anonymous)")
    pr.add_argument("--dry-run", action="store_true", help="count what it would delete; delete nothing")
    pr.add_argument("--batch", type=count, default=500, help="sessions per transaction (default 500)")
    _yes(pr)
    ex = _command(sub, "export", _export)
    ex.add_argument("--user", help="only this user's sessions ('-' for anonymous)")
    ex.add_argument("--session", action="append", help="only this session of --user (repeatable)")
    im = _command(sub, "import", _import)
    im.add_argument("file", nargs="?", default="-", metavar="FILE",
                    help="the export's lines (default -: standard input)")
    im.add_argument("--on-conflict", choices=["skip", "replace"], default="skip",
                    help="skip (default): keep stored rows; replace: the export's keys replace the stored ones")
    _yes(im)
    dr = _command(sub, "doctor", _doctor)
    dr.add_argument("--fix", action="store_true", help="repair what can be repaired")
    mg = _command(sub, "migrate", _migrate)
    mg.add_argument("--dry-run", action="store_true", help="print the SQL; change nothing")
    _command(sub, "stats", _stats)
    _yes(_command(sub, "truncate", _truncate))
    f = _command(sub, "forget-user", _forget_user, (), "[--user U | USER] [--batch N] [--yes]")
    f.add_argument("--batch", type=count, default=500, help="sessions per transaction, each whole (default 500)")
    _yes(f)
    re = _command(sub, "reencrypt", _reencrypt)
    re.add_argument("--batch", type=count, default=500, help="rows per transaction (default 500)")
    return p


def _bind(args: argparse.Namespace) -> None:
    """Name the positionals of ``USER SESSION ...`` (or ``--user U SESSION ...``) by the command's spec."""
    pos = list(args.target)
    what = " ".join(n.rstrip("?*").upper() if not n.endswith("?") else f"[{n[:-1].upper()}]" for n in args.spec)
    by_option = args.user is not None
    if not by_option:
        if not pos:
            args.cmd.error(f"give USER {what} (or --user U {what})")
        args.user = pos.pop(0)
    for name in args.spec:
        base = name.rstrip("?*")
        if name.endswith("*"):
            setattr(args, base, pos)
            pos = []
        elif name.endswith("?"):
            setattr(args, base, pos.pop(0) if pos else None)
        elif pos:
            setattr(args, base, pos.pop(0))
        else:
            args.cmd.error(f"missing {base.upper()}: give {'--user U ' if by_option else 'USER '}{what}")
    if pos:
        args.cmd.error(f"unexpected {' '.join(map(repr, pos))}")


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
        elif a in GLOBAL_FLAGS:
            front.append(a)
        elif a in DURATION_OPTIONS:  # its value joined, so that "-1d" reaches duration() (refused
            value = next(it, None)  # there, naming the rule) instead of argparse reading an option
            rest.append(a if value is None else f"{a}={value}")
        else:
            rest.append(a)
    return front + rest


#: Options whose value is a duration (a negative one must reach :func:`duration` to be refused).
DURATION_OPTIONS = ("--older-than", "--newer-than")


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run one command; returns the exit status (1: not found, 2: a usage or store error, or refused).
    A warning the store gives (``MysqlStateWarning``) is one line on stderr, as every message."""
    with warnings.catch_warnings():
        warnings.showwarning = _warning_line
        return _main(argv)


def _warning_line(message: Any, category: Any, filename: str, lineno: int, file: Any = None, line: Any = None) -> None:
    """A warning as one ``mysql-state: warning: ...`` line (Python's shows the file, the line
    number and the source line under it)."""
    _err("warning: " + " ".join(str(message).split()))


def _main(argv: Optional[Sequence[str]] = None) -> int:
    args = _parser().parse_args(hoist(list(sys.argv[1:] if argv is None else argv)))
    if args.spec is not None:
        _bind(args)
    if args.canonical == "server":
        return _server(args)
    for option in ("url", "database", "table"):
        value = getattr(args, option)
        if value is not None and not value.strip():
            _err(f"--{option} is empty: give a value, or leave the option out (an unset shell variable must "
                 f"not send the command to another server, database or table)")
            return REFUSED
    url = args.url or os.environ.get("MYSQL_URL")
    embedded = False
    if not url:
        from .server import default_server_url

        url = default_server_url()
        embedded = url is not None  # the user's own scratch server: make the database and table
    if not url:
        _err("give a URL (--url mysql://USER@HOST:PORT/DATABASE, a password as USER:PASSWORD@), set MYSQL_URL, "
             "or run `mysql-state server start`")
        return 2
    try:
        # Encrypted sessions read with the ring of MYSQL_STATE_KEYS (reencrypt needs it).
        args.ring = Keyring.from_env() if os.environ.get(KEYS_ENV) or args.canonical == "reencrypt" else None
        with MysqlAgentStateStore.from_url(url, args.database, args.table, embedded or args.create, pool_size=1,
                                           encryption=args.ring, keep_history=args.keep_history) as store:
            return args.run(store, args)
    except SchemaNotFoundError as exc:
        _err(_one_line(f"the {exc.missing} {exc.name} does not exist; nothing was done. Give --create to make it "
                       f"(before or after the command), or create it with: "
                       + " ".join(f"{statement};" for statement in exc.statements), url))
        return 2
    except (NotFound, SessionNotFoundError) as exc:
        _err(_one_line(str(exc), url))
        return NOT_FOUND
    except Refused as exc:
        _err(str(exc))
        return exc.code
    except (MysqlStateError, ValueError, TypeError, LookupError) as exc:
        said = str(exc)
        if isinstance(exc, DecryptionError) and getattr(args, "ring", None) is None:
            said += f"; every command reads and writes with the keys of ${KEYS_ENV} (id=<base64 key>,...)"
        _err(_one_line(said, url))
        return 2
    except KeyboardInterrupt:
        _err("interrupted")
        return 130
    except BrokenPipeError:  # the reader went (`| head`): stop quietly, as Unix tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # Python's flush at exit fails no more
        return 141  # 128 + SIGPIPE, what a shell reports for a tool killed by it
    except Exception as exc:  # noqa: BLE001 - a CLI prints one line, never a traceback
        _err(f"{type(exc).__name__}: {_one_line(str(exc), url)}")
        return 2


def confirm(args: argparse.Namespace, what: str) -> None:
    """Go on if ``--yes`` was given, or if the user answers y on the terminal; else raise
    :class:`Refused` (exit 2 without a terminal to ask on, 1 when the answer was no)."""
    if getattr(args, "yes", False):
        return
    if not sys.stdin.isatty():
        raise Refused(f"{args.canonical} would {what}; nothing was deleted: pass --yes to confirm "
                      "(there is no terminal to ask on)")
    sys.stderr.write(f"mysql-state: {args.canonical} will {what}. Go on? [y/N] ")
    sys.stderr.flush()
    if sys.stdin.readline().strip().lower() not in ("y", "yes"):
        raise Refused("not confirmed: nothing was deleted", NOT_FOUND)


def _err(message: str) -> None:
    """One line on stderr; any URL's password in it, and that of $MYSQL_URL and of every URL
    on the command line (``--url``, or one typed where a command goes), shown as ``***``:
    argparse echoes what it refuses, and a password with a space is not cut at a URL's end."""
    for url in _urls_given():
        message = scrub(message, url)
    print(f"mysql-state: {scrub(message)}", file=sys.stderr)


def _urls_given() -> list[str]:
    """$MYSQL_URL and every URL of the command line (``--url X``, ``--url=X``, or any argument
    holding ``://``)."""
    argv, urls = sys.argv[1:], [os.environ.get("MYSQL_URL") or ""]
    for i, arg in enumerate(argv):
        if arg.startswith("--url="):
            urls.append(arg[len("--url="):])
        elif arg == "--url" and i + 1 < len(argv):
            urls.append(argv[i + 1])
        elif "://" in arg:
            urls.append(arg)
    return [u for u in urls if u]


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
    """``obj`` as JSON with ``--json``, else ``text`` (nothing at all when it is empty)."""
    if args.json:
        print(_dumps(obj))
    elif text:
        print(text)


def _where(args: argparse.Namespace) -> str:
    return f"session {args.session!r} of user {args.user!r}"


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
            running = server.default_server_url()
            print(f"running: {running}" if running else "not running")
            return 0 if running else 1
    except (RuntimeError, OSError) as exc:
        _err(_one_line(str(exc), ""))
        return 2
    return 0


def _sessions(store: MysqlAgentStateStore, args: argparse.Namespace) -> int:
    if args.user_ids is not None:  # the first form: one user's session ids
        given = [f"--{o.replace('_', '-')}" for o in ("user", "limit", "older_than", "newer_than", "cursor")
                 if getattr(args, o) is not None]
        if given:
            raise ValueError(f"sessions USER lists that user's session ids; {', '.join(given)} belong to the other "
                             "form: sessions [--user U] [--limit N] [--older-than D] [--cursor C]")
        ids = sorted(store.list_session_ids(_user(args.user_ids)))
        _out(args, ids, "\n".join(ids))
        return 0
    user = ALL_USERS if args.user is None else _user(args.user)
    before = after = None
    if args.older_than is not None:
        before = dt.datetime.now(dt.timezone.utc) - args.older_than
    if args.newer_than is not None:
        after = dt.datetime.now(dt.timezone.utc) - args.newer_than
    page = store.sessions(user, updated_before=before, updated_after=after, limit=args.limit or 100, cursor=args.cursor)
    items = [dict(user_id=s.user_id, session_id=s.session_id, keys=s.keys, rows=s.rows, bytes=s.bytes,
                  created_at=s.created_at, updated_at=s.updated_at) for s in page.items]
    rows = [[s.user_id or "-", s.session_id, len(s.keys), s.rows, s.bytes, s.updated_at] for s in page.items]
    _out(args, {"items": items, "next_cursor": page.next_cursor},
         table(rows, ["USER", "SESSION", "KEYS", "ROWS", "BYTES", "UPDATED"]) if rows else "")
    if page.next_cursor is not None and not args.json:
        _err(f"more sessions: the next page is --cursor {page.next_cursor}")
    return 0


def _has_key(store: MysqlAgentStateStore, args: argparse.Namespace) -> bool:
    return store.key_kind(_user(args.user), args.session, args.key) is not None


def _window_options(args: argparse.Namespace) -> list[str]:
    """The window options of ``get`` given: --offset, --limit, --tail."""
    return [f"--{name}" for name in ("offset", "limit", "tail") if getattr(args, name) is not None]


def _check_get_options(args: argparse.Namespace) -> None:
    """``get``'s options that cannot go together, or with no KEY, refused (exit 2) before any
    read: none is ever dropped in silence."""
    window = _window_options(args)
    if args.key is None and (window or args.history or args.versioned):
        given = window + ["--history"] * args.history + ["--versioned"] * args.versioned
        raise ValueError(f"{', '.join(given)} {'applies' if len(given) == 1 else 'apply'} to a KEY; without one, get "
                         "shows the session's catalog entry")
    if args.tail is not None and (args.offset is not None or args.limit is not None):
        raise ValueError("--tail N is the last N items: it does not go with --offset or --limit")
    if args.versioned and (window or args.history):
        raise ValueError(f"--versioned reads a value or a whole list with its version: it does not go with "
                         f"{', '.join(window + ['--history'] * args.history)}")


def _get(store: MysqlAgentStateStore, args: argparse.Namespace) -> int:
    user = _user(args.user)
    _check_get_options(args)
    if args.key is None:
        if not store.exists(user, args.session):
            raise NotFound(f"no {_where(args)}")
        info = _info(store, user, args.session)
        _out(args, info, "\n".join(f"{k}: {v}" for k, v in info.items()))
        return 0
    if args.history:
        if not store.exists(user, args.session):
            raise NotFound(f"no {_where(args)}")
        found = store.get_history(user, args.session, args.key, offset=args.offset or 0, limit=args.limit)
        if args.tail:  # alone (_check_get_options): the last N archived items
            found = found[-args.tail:]
        items = [{"value": h.value, "archived_at": h.archived_at} for h in found]
        _out(args, items, "\n".join(f"{h['archived_at']}  {_dumps(h['value'])}" for h in items))
        return 0
    kind = store.key_kind(user, args.session, args.key)
    if kind is None:
        raise NotFound(f"{_where(args)} has no key {args.key!r}")
    listed = kind == "list"
    if args.versioned:  # a list whole with its hash row's version, else the value with its own
        whole = (store.get_list_versioned(user, args.session, args.key) if listed
                 else store.get_versioned(user, args.session, args.key))
        _out(args, _versioned(whole), _dumps(_versioned(whole)))
        return 0
    given = [] if listed else _window_options(args)
    if given:
        raise ValueError(f"key {args.key!r} holds a value, not a list: {', '.join(given)} "
                         f"{'applies' if len(given) == 1 else 'apply'} to a list's items")
    if listed:
        offset = -args.tail if args.tail else args.offset or 0
        items = store.get_list(user, args.session, args.key, offset=offset, limit=args.limit)
        _out(args, items, "\n".join(_dumps(i) for i in items))
        return 0
    value = store.get(user, args.session, args.key)
    _out(args, value, _dumps(value))
    return 0


def _pages(store: MysqlAgentStateStore, user: Any, limit: int) -> Iterator[list]:
    """The items of every page of ``store.sessions(user)``, ``limit`` a page, newest first."""
    cursor = None
    while True:
        page = store.sessions(user, limit=limit, cursor=cursor)
        yield page.items
        cursor = page.next_cursor
        if cursor is None:
            return


def _info(store: MysqlAgentStateStore, user: Optional[str], session: str) -> dict:
    """The catalog entry of one session (paged through that user's sessions). A session
    written during a walk moves ahead of its cursor (pages are not a snapshot): the next walk
    meets it on its first page, so only a session no walk meets has no catalog row."""
    for _ in range(3):
        for items in _pages(store, user, 500):
            for s in items:
                if s.session_id == session:
                    return dict(user_id=s.user_id, session_id=s.session_id, keys=s.keys, rows=s.rows, bytes=s.bytes,
                                created_at=s.created_at, updated_at=s.updated_at)
    return dict(user_id=user, session_id=session, keys="(no catalog row: run doctor --fix)")


def _kind(store: MysqlAgentStateStore, args: argparse.Namespace) -> int:
    kind = store.key_kind(_user(args.user), args.session, args.key)
    if kind is None:
        raise NotFound(f"{_where(args)} has no key {args.key!r}")
    _out(args, kind, kind)
    return 0


def _length(store: MysqlAgentStateStore, args: argparse.Namespace) -> int:
    n = store.list_length(_user(args.user), args.session, args.key)
    if n == 0 and not _has_key(store, args):
        raise NotFound(f"{_where(args)} has no key {args.key!r}")
    _out(args, n, str(n))
    return 0


def _save(store: MysqlAgentStateStore, args: argparse.Namespace) -> int:
    if args.if_version is not None:
        version = store.save_if_version(_user(args.user), args.session, args.key, _json(args.value), args.if_version)
        return _if_version(args, version)
    store.save(_user(args.user), args.session, args.key, _json(args.value))
    _out(args, {"saved": True}, f"saved {args.key!r}")
    return 0


def _save_list(store: MysqlAgentStateStore, args: argparse.Namespace) -> int:
    values = _json(args.value)
    if not isinstance(values, list):
        raise ValueError(f"save-list takes a JSON array, got {args.value!r}")
    if args.if_version is not None:
        version = store.save_list_if_version(_user(args.user), args.session, args.key, values, args.if_version)
        return _if_version(args, version)
    report = store.save_list_report(_user(args.user), args.session, args.key, values)
    _out(args, {"saved": len(values), **_report(report)},
         f"saved {len(values)} item{'' if len(values) == 1 else 's'} at {args.key!r} ({_written(report)}, "
         f"version {report.version})")
    return 0


def _written(report: Any) -> str:
    """What a list save wrote, in words: ``append: 1 row written``."""
    return f"{report.kind}: {report.rows_written} row{'' if report.rows_written == 1 else 's'} written"


def _report(report: Any) -> dict:
    """A :class:`~mysql_state.results.SaveReport` as JSON."""
    return {"kind": report.kind, "rows_written": report.rows_written, "version": report.version,
            "delete_from": report.delete_from}


def _save_many(store: MysqlAgentStateStore, args: argparse.Namespace) -> int:
    values = {k: _json(v) for k, v in args.value}
    lists: dict = {}
    for k, v in args.list:
        lists[k] = _json(v)
        if not isinstance(lists[k], list):
            raise ValueError(f"--list {k} takes a JSON array, got {v!r}")
    if not values and not lists:
        raise ValueError("save-many needs at least one --value KEY JSON or --list KEY JSON_ARRAY")
    expected: dict = {}
    for k, n in args.if_version:
        try:
            expected[k] = version_number(n)
        except argparse.ArgumentTypeError as exc:
            raise ValueError(f"--if-version {k}: {exc}") from None
    try:
        saved = store.save_many(_user(args.user), args.session, values, lists, expected_versions=expected or None)
    except StaleStateError as exc:
        _out(args, {"saved": False, "key": exc.key, "expected": exc.expected, "stored": exc.stored},
             f"not saved: {exc}")
        return NOT_FOUND
    out = {"saved": True, "versions": saved.versions, "lists": {k: _report(r) for k, r in saved.items()}}
    _out(args, out, "\n".join(f"saved {k!r} at version {v}" + (f" ({_written(saved[k])})" if k in saved else "")
                              for k, v in sorted(saved.versions.items())))
    return 0


def _if_version(args: argparse.Namespace, version: int) -> int:
    """A compare-and-set's outcome: the new version, or (exit 1) that the key is at another."""
    if version == UNVERSIONED:
        _out(args, {"saved": False, "version": None},
             f"not saved: {args.key!r} is not at version {args.if_version} (another writer saved, or it is "
             f"{'there' if args.if_version == 0 else 'absent'}); nothing was written")
        return NOT_FOUND
    _out(args, {"saved": True, "version": version}, f"saved {args.key!r} at version {version}")
    return 0


def _versioned(found: Any) -> dict:
    return {"value": found.value, "version": found.version}


def _get_many(store: MysqlAgentStateStore, args: argparse.Namespace) -> int:
    if not args.value and not args.list:
        raise ValueError("get-many needs at least one --value KEY or --list KEY")
    found = store.get_many(_user(args.user), args.session, values=args.value, lists=args.list, versioned=args.versioned)
    out = {k: _versioned(v) if args.versioned else v for k, v in found.items()}
    _out(args, out, _dumps(out))
    return 0


def _get_prefix(store: MysqlAgentStateStore, args: argparse.Namespace) -> int:
    found = store.get_prefix(_user(args.user), args.session, args.prefix, versioned=args.versioned)
    out = {k: _versioned(v) if args.versioned else v for k, v in found.items()}
    _out(args, out, _dumps(out))
    return 0


def _append_list(store: MysqlAgentStateStore, args: argparse.Namespace) -> int:
    if not args.items:  # a forgotten argument must not look like a success
        raise ValueError("append-list needs at least one JSON item after KEY (a list's length: `mysql-state length "
                         "USER SESSION KEY`); nothing was written")
    n = store.append_list(_user(args.user), args.session, args.key, [_json(i) for i in args.items])
    _out(args, n, str(n))
    return 0


def _pop_list(store: MysqlAgentStateStore, args: argparse.Namespace) -> int:
    user = _user(args.user)
    if store.list_length(user, args.session, args.key) == 0:
        raise NotFound(f"the list {args.key!r} of {_where(args)} is empty or absent: nothing popped")
    item = store.pop_list(user, args.session, args.key)
    _out(args, item, _dumps(item))
    return 0


def _delete(store: MysqlAgentStateStore, args: argparse.Namespace) -> int:
    user = _user(args.user)
    args.key = args.keys[0] if len(args.keys) == 1 else None
    if len(args.keys) > 1 or args.maintenance:
        if not args.keys:
            raise ValueError("--maintenance deletes keys: give KEY...; a whole session goes with its history")
        n = store.delete_keys(user, args.session, args.keys, maintenance=args.maintenance)
        if n == 0:
            raise NotFound(f"{_where(args)} has none of the keys {args.keys!r}: nothing was deleted")
        _out(args, {"deleted": "keys", "keys": args.keys, "rows": n}, f"deleted {n} rows of {_where(args)}")
        return 0
    if args.key is None:
        # No data row, but the catalog may still list it (with its history: what the Java store's
        # delete leaves), as `sessions` shows it: deleted whole then, as the API's delete does.
        if not store.exists(user, args.session) and "created_at" not in _info(store, user, args.session):
            raise NotFound(f"no {_where(args)}: nothing was deleted")
        confirm(args, f"delete {_where(args)}, every key of it")
        store.delete(user, args.session)
        _out(args, {"deleted": "session", "session_id": args.session}, f"deleted {_where(args)}")
        return 0
    if not _has_key(store, args):
        raise NotFound(f"{_where(args)} has no key {args.key!r}: nothing was deleted")
    store.delete(user, args.session, args.key)
    _out(args, {"deleted": "key", "key": args.key}, f"deleted key {args.key!r} of {_where(args)}")
    return 0


def _fork(store: MysqlAgentStateStore, args: argparse.Namespace) -> int:
    user = _user(args.user)
    new_user = user if args.new_user is None else _user(args.new_user)
    n = store.fork(user, args.session, args.new_session, new_user_id=new_user)
    _out(args, {"rows": n}, f"copied {n} rows")
    return 0


class Bar:
    """A progress bar on stderr (one line, redrawn), drawn only when stderr is a terminal and
    the output is not ``--json`` (logs and cron mail get the result line only)."""

    def __init__(self, what: str, json: bool = False) -> None:
        self.what = what
        self.on = not json and sys.stderr.isatty()
        self.drawn = False

    def __call__(self, done: int, total: Optional[int] = None) -> None:
        if not self.on:
            return
        self.drawn = True
        if total:
            width = 30
            filled = int(width * min(done, total) / total)
            sys.stderr.write(f"\r{self.what} [{'#' * filled}{'.' * (width - filled)}] {done}/{total}")
        else:
            sys.stderr.write(f"\r{self.what} {done}")
        sys.stderr.flush()

    def end(self) -> None:
        if self.drawn:
            sys.stderr.write("\n")


@contextlib.contextmanager
def drawing(what: str, json: bool) -> Iterator[Bar]:
    """A :class:`Bar` for the ``with`` block, ended when the block ends (an error or Ctrl-C
    too); a warning given meanwhile is shown after it, on a line of its own, not on the bar's."""
    bar = Bar(what, json)
    caught: list = []
    try:
        with warnings.catch_warnings(record=True) as caught:
            yield bar
    finally:
        bar.end()
        for w in caught:
            warnings.showwarning(w.message, w.category, w.filename, w.lineno)


def _prune(store: MysqlAgentStateStore, args: argparse.Namespace) -> int:
    user = ALL_USERS if args.user is None else _user(args.user)
    if not args.dry_run:
        whose = "" if args.user is None else f" of {_who(args.user)}"
        confirm(args, f"delete every session{whose} with no write for {_span(args.older_than)}")
    with drawing("would prune" if args.dry_run else "pruning", args.json) as bar:
        report = store.prune(args.older_than, user_id=user, dry_run=args.dry_run, batch=args.batch, progress=bar)
    verb = "would delete" if args.dry_run else "deleted"
    _out(args, {"sessions": report.sessions, "rows": report.rows, "dry_run": args.dry_run},
         f"{verb} {report.sessions} sessions ({report.rows} rows) and their catalog rows")
    return 0


def _export(store: MysqlAgentStateStore, args: argparse.Namespace) -> int:
    user = ALL_USERS if args.user is None else _user(args.user)
    if args.session and args.user is None:
        raise ValueError("--session needs --user")
    n = 0
    write = sys.stdout.write
    named = {keys.pack(user, s): s for s in args.session or ()}
    lines = store.export(user, sessions=args.session)
    lines.warn = False  # the damaged keys are named below, one line each
    with drawing("exported rows", args.json) as bar:
        for line in lines:
            write(line + "\n")
            n += 1
            if named:
                named.pop(orjson.loads(line).get("session_id"), None)
            if n % 1000 == 0:
                bar(n)
        sys.stdout.flush()
        bar(n)
    torn = lines.damaged
    for sid, key, why in torn:  # named whatever else went wrong
        _err(f"key {key!r} of session {sid!r} is damaged in the table, and so in this export: {why}")
    if torn:
        _err(f"{len(torn)} key(s) damaged: `import` refuses this export until their lines are removed from it; "
             "`doctor` reports them in the table and `doctor --fix` repairs what it safely can (restore the others "
             "from an older backup, or delete them), then export again")
    # A user or a session asked for by name that has no row is not in the backup: not a success.
    if named:
        _err(f"no session {', '.join(map(repr, sorted(named.values())))} of {_who(args.user)}: not exported")
        return NOT_FOUND
    if n == 0 and args.user is not None:
        _err(f"{_who(args.user)} has no session: nothing exported")
        return NOT_FOUND
    # Every row is written, as it is; but import refuses a file with a damaged key whole: not a success.
    return NOT_FOUND if torn else 0


def _import(store: MysqlAgentStateStore, args: argparse.Namespace) -> int:
    if args.on_conflict == "replace":
        confirm(args, "replace the stored keys of every session in the import with the export's rows")
    with drawing("imported rows", args.json) as bar:
        if args.file == "-":
            if sys.stdin is None:
                raise ValueError("import reads the export from standard input, which is closed; give FILE")
            n = store.import_rows(sys.stdin, on_conflict=args.on_conflict, progress=bar)
        else:
            try:
                source = open(args.file, encoding="utf-8")
            except OSError as exc:
                raise ValueError(f"import: cannot read FILE {args.file!r} ({exc.strerror})") from None
            with source:
                n = store.import_rows(source, on_conflict=args.on_conflict, progress=bar)
    _out(args, {"written": n}, f"{n} rows written")
    return 0


def _doctor(store: MysqlAgentStateStore, args: argparse.Namespace) -> int:
    with drawing("checked sessions", args.json) as bar:
        problems = store.doctor(fix=args.fix, progress=bar)
    left = [p for p in problems if not p.fixed]
    _out(args, [vars(p) for p in problems],
         "\n".join(("fixed: " if p.fixed else "problem: ") + p.message for p in problems) or "healthy")
    return 1 if left else 0


def _migrate(store: MysqlAgentStateStore, args: argparse.Namespace) -> int:
    if args.dry_run:  # applies nothing: no progress to show
        steps = store.migrate(dry_run=True)
    else:
        with drawing("migrated rows", args.json) as bar:
            steps = store.migrate(progress=bar)
    head = "would apply" if args.dry_run else "applied"
    _out(args, [{"name": s.name, "sql": s.sql} for s in steps],
         "\n".join(f"-- {head} {s.name}\n{s.sql};" for s in steps) or "nothing to do: the schema is current")
    return 0


def metric_rows(metrics: dict, prefix: str = "") -> list[list[Any]]:
    """The counters of ``store.metrics()`` as ``[name, value]`` rows, nested names dotted
    (``saves.append``); ``latency`` is left to its own table.

    >>> metric_rows({"saves": {"append": 2}, "errors": {}, "reads": 3, "latency": {}})
    [['saves.append', 2], ['errors', '-'], ['reads', 3]]
    """
    rows: list[list[Any]] = []
    for name, value in metrics.items():
        if name == "latency" and not prefix:
            continue
        if isinstance(value, dict):
            rows += metric_rows(value, f"{prefix}{name}.") if value else [[prefix + name, "-"]]
        else:
            rows.append([prefix + name, round(value, 6) if isinstance(value, float) else value])
    return rows


def _stats(store: MysqlAgentStateStore, args: argparse.Namespace) -> int:
    sessions, rows, nbytes = 0, 0, 0
    biggest: list = []
    with drawing("read sessions", args.json) as bar:  # every session, a page at a time: no total known
        for items in _pages(store, ALL_USERS, 1000):
            for s in items:
                sessions += 1
                rows += s.rows
                nbytes += s.bytes
                biggest.append((s.bytes, s.rows, s.user_id or "", s.session_id))  # "": anonymous, sortable
            bar(sessions)
            biggest = sorted(biggest, reverse=True)[:10]
    m = store.metrics()
    out = {"sessions": sessions, "rows": rows, "bytes": nbytes,
           "largest": [{"user_id": u or None, "session_id": s, "rows": r, "bytes": b} for b, r, u, s in biggest],
           "metrics": m}
    text = (f"sessions {sessions}\nrows     {rows}\nbytes    {nbytes}\n\nlargest sessions\n"
            + table([[u or "-", s, r, b] for b, r, u, s in biggest], ["USER", "SESSION", "ROWS", "BYTES"])
            + "\n\nmetrics (this process)\n" + table(metric_rows(m), ["METRIC", "VALUE"])
            + "\n\nlatency (this process)\n"
            + table([[op, v.get("count"), round(v.get("sum_seconds", 0.0) * 1000, 3), round(v.get("max_seconds", 0.0) * 1000, 3)]
                     for op, v in sorted(m.get("latency", {}).items())], ["OPERATION", "CALLS", "TOTAL_MS", "MAX_MS"]))
    _out(args, out, text)
    return 0


def _exists(store: MysqlAgentStateStore, args: argparse.Namespace) -> int:
    found = store.exists(_user(args.user), args.session)
    _out(args, found, "yes" if found else "no")
    return 0 if found else 1


def _truncate(store: MysqlAgentStateStore, args: argparse.Namespace) -> int:
    confirm(args, f"delete every row of `{store.database_name}`.`{store.table_name}`, every session of every user")
    n = store.truncate_all_sessions()
    _out(args, {"removed": n}, f"removed {n} rows of sessions (and every catalog and history row)")
    return 0


def _forget_user(store: MysqlAgentStateStore, args: argparse.Namespace) -> int:
    user = _user(args.user)
    confirm(args, f"remove every session of {_who(args.user)}")
    with drawing("erased sessions", args.json) as bar:
        n = store.forget_user(user, batch=args.batch, progress=bar)
    _out(args, {"removed": n}, f"removed {n} rows")
    return 0


def _reencrypt(store: MysqlAgentStateStore, args: argparse.Namespace) -> int:
    with drawing("re-encrypted rows", args.json) as bar:
        n = store.reencrypt(batch=args.batch, progress=bar)
    _out(args, {"rewritten": n, "key": args.ring.current}, f"rewrote {n} rows under key {args.ring.current!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
