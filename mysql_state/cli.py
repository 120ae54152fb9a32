"""``mysql-state``: the maintenance calls of the store from the shell (mirrors the API).

    export MYSQL_URL=mysql://user:pw@host:3306/agentscope   # or --url URL
    mysql-state sessions alice                     # list_session_ids
    mysql-state exists alice chat-1                # exit status 0 if it exists, 1 if not
    mysql-state get alice chat-1 summary           # the value as JSON
    mysql-state get-list alice chat-1 memory --offset -5
    mysql-state length alice chat-1 memory         # list_length
    mysql-state delete alice chat-1 [KEY]          # a whole session, or one key
    mysql-state truncate --yes                     # truncate_all_sessions
    mysql-state forget-user alice --yes            # forget_user: every row of alice
    MYSQL_STATE_KEYS=k2=...,k1=... mysql-state reencrypt   # rows under the current key

``--database`` and ``--table`` pick another database or table; ``-`` as the user means
anonymous sessions. ``python -m mysql_state`` is the same command.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Optional, Sequence

import orjson

from .crypto import Keyring
from .errors import MysqlStateError
from .store import MysqlAgentStateStore
from .url import scrub


KEYS_ENV = "MYSQL_STATE_KEYS"


def _user(value: str) -> Optional[str]:
    return None if value == "-" else value


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="mysql-state", description="Inspect and maintain agent state stored by mysql-state.")
    p.add_argument("--url", help="mysql://user:pw@host:port/database (default: $MYSQL_URL)")
    p.add_argument("--database", help="database name (wins over the URL's path)")
    p.add_argument("--table", help="table name (default agentscope_sessions)")
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("sessions", help="the session ids of a user ('-' for anonymous)")
    s.add_argument("user")
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


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run one command; returns the exit status (2 for a usage or store error)."""
    args = _parser().parse_args(argv)
    url = args.url or os.environ.get("MYSQL_URL")
    if not url:
        print("mysql-state: give a URL (mysql://user:pw@host:port/database) or set MYSQL_URL", file=sys.stderr)
        return 2
    if args.command in ("truncate", "forget-user") and not args.yes:
        what = "every session" if args.command == "truncate" else f"every session of user {args.user!r}"
        print(f"mysql-state: {args.command} removes {what}; nothing was deleted: pass --yes to confirm",
              file=sys.stderr)
        return 2
    out = sys.stdout
    try:
        # Encrypted sessions read with the ring of MYSQL_STATE_KEYS (reencrypt needs it).
        ring = Keyring.from_env() if os.environ.get(KEYS_ENV) or args.command == "reencrypt" else None
        with MysqlAgentStateStore.from_url(url, args.database, args.table, pool_size=1, encryption=ring) as store:
            if args.command == "sessions":
                for sid in sorted(store.list_session_ids(_user(args.user))):
                    print(sid, file=out)
            elif args.command == "exists":
                found = store.exists(_user(args.user), args.session)
                print("yes" if found else "no", file=out)
                return 0 if found else 1
            elif args.command == "get":
                value, version = store.get_versioned(_user(args.user), args.session, args.key)
                if version == 0 and value is None:
                    print(f"mysql-state: no value at {args.key!r}", file=sys.stderr)
                    return 1
                print(orjson.dumps(value).decode(), file=out)
            elif args.command == "length":
                print(store.list_length(_user(args.user), args.session, args.key), file=out)
            elif args.command == "get-list":
                items = store.get_list(_user(args.user), args.session, args.key, offset=args.offset, limit=args.limit)
                for item in items:
                    print(orjson.dumps(item).decode(), file=out)
            elif args.command == "delete":
                store.delete(_user(args.user), args.session, args.key)
            elif args.command == "truncate":
                print(f"removed {store.truncate_all_sessions()} rows", file=out)
            elif args.command == "forget-user":
                print(f"removed {store.forget_user(_user(args.user))} rows", file=out)
            elif args.command == "reencrypt":
                print(f"rewrote {store.reencrypt()} rows under key {ring.current!r}", file=out)
    except (MysqlStateError, ValueError, TypeError) as exc:
        print(f"mysql-state: {_one_line(str(exc), url)}", file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 - a CLI prints one line, never a traceback
        print(f"mysql-state: {type(exc).__name__}: {_one_line(str(exc), url)}", file=sys.stderr)
        return 2
    return 0


def _one_line(message: str, url: str) -> str:
    """The message on one line, with the URL's password (if it slipped in) as ``***``."""
    return " ".join(scrub(message, url).split())


if __name__ == "__main__":
    sys.exit(main())
