"""The command line mirrors the API: run it as a real subprocess against the real server."""

from __future__ import annotations

import subprocess
import sys

import orjson


def cli(url: str, database: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mysql_state", "--url", url, "--database", database, *args],
                          capture_output=True, text=True, timeout=60)


def test_cli_mirrors_the_maintenance_calls(store, raw, url, database):
    store.save_list("alice", "chat-1", "memory", [{"i": i} for i in range(5)])
    store.save("alice", "chat-1", "summary", {"text": "héllo"})
    store.save("alice", "chat-2", "summary", 1)
    store.save(None, "anon-1", "k", 1)
    assert cli(url, database, "sessions", "alice").stdout.split() == ["chat-1", "chat-2"]
    assert cli(url, database, "sessions", "-").stdout.split() == ["anon-1"]
    assert cli(url, database, "exists", "alice", "chat-1").returncode == 0
    assert cli(url, database, "exists", "alice", "nope").returncode == 1
    assert orjson.loads(cli(url, database, "get", "alice", "chat-1", "summary").stdout) == {"text": "héllo"}
    assert cli(url, database, "get", "alice", "chat-1", "missing").returncode == 1
    assert cli(url, database, "length", "alice", "chat-1", "memory").stdout.strip() == "5"
    tail = cli(url, database, "get-list", "alice", "chat-1", "memory", "--offset", "-2").stdout.splitlines()
    assert [orjson.loads(x) for x in tail] == [{"i": 3}, {"i": 4}]
    assert cli(url, database, "delete", "alice", "chat-1", "memory").returncode == 0
    assert store.get_list("alice", "chat-1", "memory") == [] and store.exists("alice", "chat-1")
    assert cli(url, database, "delete", "alice", "chat-2").returncode == 0
    assert not store.exists("alice", "chat-2")
    bad = cli(url, database, "sessions", "a:b")
    assert bad.returncode == 2 and "contains ':'" in bad.stderr
    refused = cli(url, database, "truncate")
    assert refused.returncode == 2 and "--yes" in refused.stderr and len(raw.rows()) == 2
    done = cli(url, database, "truncate", "--yes")
    assert done.returncode == 0 and "removed 2 rows" in done.stdout and raw.rows() == []


def test_forget_user_and_reencrypt_from_the_shell(store, raw, url, database):
    import base64
    import os

    for u in ("alice", "bob"):
        store.save_list(u, "chat-1", "memory", [{"text": "secret"}] * 3)
    refused = cli(url, database, "forget-user", "alice")
    assert refused.returncode == 2 and "--yes" in refused.stderr and "nothing was deleted" in refused.stderr
    assert len(raw.rows()) == 8
    done = cli(url, database, "forget-user", "alice", "--yes")
    assert done.returncode == 0 and "removed 5 rows" in done.stdout  # 4 rows and the catalog row
    assert {r[0] for r in raw.rows()} == {"bob:chat-1"}
    key = base64.b64encode(os.urandom(32)).decode()
    env = dict(os.environ, MYSQL_STATE_KEYS=f"k1={key}")
    run = lambda *a: subprocess.run([sys.executable, "-m", "mysql_state", "--url", url, "--database", database, *a],  # noqa: E731
                                    capture_output=True, text=True, timeout=60, env=env)
    rotated = run("reencrypt")
    assert rotated.returncode == 0 and "rewrote 4 rows under key 'k1'" in rotated.stdout
    assert "secret" not in str(raw.rows()) and key not in rotated.stdout + rotated.stderr
    assert [orjson.loads(x) for x in run("get-list", "bob", "chat-1", "memory").stdout.splitlines()] == [{"text": "secret"}] * 3
    unreadable = cli(url, database, "get-list", "bob", "chat-1", "memory")  # no ring: a one-line error
    assert unreadable.returncode == 2 and "k1" in unreadable.stderr and len(unreadable.stderr.splitlines()) == 1
