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
