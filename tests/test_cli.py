"""The command line mirrors the API: run it as a real subprocess against the real server."""

from __future__ import annotations

import subprocess
import sys

import orjson

from tests.conftest import Raw, connect, with_terminal_stderr


def cli(url: str, database: str, *args: str, input: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mysql_state", "--url", url, "--database", database, *args],
                          input=input, capture_output=True, text=True, timeout=60)


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
    refused = cli(url, database, "delete", "alice", "chat-2")  # a whole session: --yes, as rm
    assert refused.returncode == 2 and "--yes" in refused.stderr and store.exists("alice", "chat-2")
    assert cli(url, database, "delete", "alice", "chat-2", "--yes").returncode == 0
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
    rotated = run("reencrypt", "--batch", "1")
    assert rotated.returncode == 0 and "rewrote 4 rows under key 'k1'" in rotated.stdout
    assert "secret" not in str(raw.rows()) and key not in rotated.stdout + rotated.stderr
    assert [orjson.loads(x) for x in run("get-list", "bob", "chat-1", "memory").stdout.splitlines()] == [{"text": "secret"}] * 3
    unreadable = cli(url, database, "get-list", "bob", "chat-1", "memory")  # no ring: a one-line error
    assert unreadable.returncode == 2 and "k1" in unreadable.stderr and len(unreadable.stderr.splitlines()) == 1
    assert "$MYSQL_STATE_KEYS" in unreadable.stderr  # the CLI's way to give the keys, not the API's


# ---- issue 18 item 21 and issue 19's command line -------------------------------------------------


def one_line_error(done: subprocess.CompletedProcess, code: int, *words: str) -> None:
    assert done.returncode == code, (done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert all(w in done.stderr for w in words), done.stderr


def test_import_of_a_gzipped_export_is_one_line_naming_the_rule(store, raw, url, database, tmp_path):
    """`mysql-state import rows.jsonl.gz` printed Python's codec error, naming neither line nor
    rule, and from stdin a JSON error about surrogates (a standards audit): one line saying
    to decompress first, exit 2, nothing written."""
    import gzip

    store.save("alice", "chat-1", "k", 1)
    backup = cli(url, database, "export", "--user", "alice").stdout
    store.delete("alice", "chat-1")
    before = raw.all_rows()
    packed = tmp_path / "rows.jsonl.gz"
    packed.write_bytes(gzip.compress(backup.encode()))
    by_file = cli(url, database, "import", str(packed))
    by_stdin = subprocess.run([sys.executable, "-m", "mysql_state", "--url", url, "--database", database, "import"],
                              input=packed.read_bytes(), capture_output=True, timeout=60)
    by_stdin.stderr = by_stdin.stderr.decode()
    for done in (by_file, by_stdin):
        one_line_error(done, 2, "line 1 is not UTF-8 text", "decompressed first", "nothing was imported")
    assert raw.all_rows() == before


def test_usage_slips_are_one_line_naming_the_cli_s_own_rule(store, raw, url, database):
    """From a standards audit: `--if-version` too large said "must be a version >= 0"; the
    reserved `__anon__` got the API's advice ("pass None"); `append-list` with no item printed
    the length and exited 0, so a forgotten argument looked like a success. Each is one line
    naming the command line's rule, exit 2, nothing written."""
    store.save_list("alice", "chat-1", "memory", [1])
    before = raw.all_rows()
    one_line_error(cli(url, database, "save", "alice", "chat-1", "k", "1", "--if-version", "9" * 26), 2,
                   "must be a version of at most 2**63 - 1")
    one_line_error(cli(url, database, "get", "__anon__", "s", "k"), 2, "'__anon__' is reserved",
                   "give '-' for the anonymous user")
    one_line_error(cli(url, database, "append-list", "alice", "chat-1", "memory"), 2,
                   "needs at least one JSON item", "nothing was written")
    assert raw.all_rows() == before
    assert cli(url, database, "append-list", "alice", "chat-1", "memory", "2").stdout.strip() == "2"


def test_a_duration_too_long_is_one_line_and_exit_2(store, raw, url, database):
    store.save("alice", "chat-1", "k", 1)
    before = raw.all_rows()
    for text in ("9999999999d", "99999999999w", "999999d"):
        for args in (("prune", "--older-than", text, "--yes"), ("sessions", "--older-than", text)):
            one_line_error(cli(url, database, *args), 2, text)
    assert raw.all_rows() == before


def test_rm_of_a_key_or_session_that_does_not_exist_says_so_and_exits_1(store, raw, url, database):
    store.save("U", "S", "k", 1)
    before = raw.all_rows()
    one_line_error(cli(url, database, "rm", "--user", "U", "S", "NOKEY"), 1, "'NOKEY'", "nothing was deleted")
    one_line_error(cli(url, database, "delete", "U", "S", "NOKEY"), 1, "'NOKEY'")
    one_line_error(cli(url, database, "rm", "--user", "U", "NOSESSION", "--yes"), 1, "'NOSESSION'")
    assert raw.all_rows() == before
    done = cli(url, database, "rm", "--user", "U", "S", "k")  # a key: an ordinary write, no --yes
    assert done.returncode == 0 and "deleted key 'k'" in done.stdout and raw.rows() == []


def test_sessions_pages_with_the_cursor_it_prints(store, url, database):
    for i in range(5):
        store.save("alice", f"chat-{i}", "k", i)
    seen, cursor, pages = [], None, 0
    while True:
        args = ["sessions", "--json", "--limit", "2"] + (["--cursor", cursor] if cursor else [])
        page = orjson.loads(cli(url, database, *args).stdout)
        seen += [s["session_id"] for s in page["items"]]
        pages += 1
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert sorted(seen) == [f"chat-{i}" for i in range(5)] and pages == 3
    text = cli(url, database, "sessions", "--limit", "2")
    assert len(text.stdout.splitlines()) == 3 and "--cursor" in text.stderr


def test_stats_is_a_table_and_json_with_json(store, url, database):
    store.save_list("alice", "chat-1", "memory", [1, 2, 3])
    text = cli(url, database, "stats")
    assert text.returncode == 0 and "METRIC" in text.stdout and "OPERATION" in text.stdout
    assert not any(line.lstrip().startswith("{") for line in text.stdout.splitlines()), text.stdout
    assert any(line.split()[:1] == ["saves.rewrite"] for line in text.stdout.splitlines())
    data = orjson.loads(cli(url, database, "stats", "--json").stdout)
    assert data["sessions"] == 1 and "saves" in data["metrics"]


def test_every_destructive_command_refuses_without_a_terminal_or_yes(store, raw, url, database):
    store.save_list("alice", "chat-1", "memory", [1, 2])
    store.save("bob", "chat-1", "k", 1)
    raw.execute("UPDATE {t} SET updated_at = NOW() - INTERVAL 40 DAY")
    export = cli(url, database, "export").stdout
    before = raw.all_rows()
    refusals = [
        ("delete", "alice", "chat-1"), ("rm", "--user", "alice", "chat-1"), ("truncate",),
        ("prune", "--older-than", "30d"), ("forget-user", "alice"),
    ]
    for args in refusals:
        one_line_error(cli(url, database, *args), 2, "--yes", "nothing was deleted")
    replace = subprocess.run([sys.executable, "-m", "mysql_state", "--url", url, "--database", database, "import",
                              "--on-conflict", "replace"], input=export, capture_output=True, text=True, timeout=60)
    one_line_error(replace, 2, "--yes")
    assert raw.all_rows() == before
    assert cli(url, database, "prune", "--older-than", "30d", "--dry-run").returncode == 0  # asks nothing
    assert raw.all_rows() == before


def test_a_destructive_command_asks_on_a_terminal(store, raw, url, database):
    import os
    import pty

    store.save("alice", "chat-1", "k", 1)

    def answer(text: str) -> subprocess.CompletedProcess:
        master, slave = pty.openpty()
        try:
            proc = subprocess.Popen([sys.executable, "-m", "mysql_state", "--url", url, "--database", database,
                                     "delete", "alice", "chat-1"], stdin=slave, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True)
            os.write(master, text.encode())
            out, err = proc.communicate(timeout=60)
            return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
        finally:
            os.close(master)
            os.close(slave)

    no = answer("n\n")
    assert no.returncode == 1 and "[y/N]" in no.stderr and "nothing was deleted" in no.stderr
    assert store.exists("alice", "chat-1")
    yes = answer("y\n")
    assert yes.returncode == 0 and "deleted session 'chat-1'" in yes.stdout
    assert raw.rows() == []


def test_one_command_per_operation_old_names_are_listed_aliases(store, url, database):
    from mysql_state.cli import COMMAND_HELP

    store.save_list("alice", "chat-1", "memory", [{"i": i} for i in range(3)])
    top = " ".join(cli(url, database, "--help").stdout.split())
    for alias_text in ("get (show, get-list)", "list-length (length)", "delete (rm)"):  # once, beside the name
        assert alias_text in top
    assert "aliases:" not in top
    for name, (aliases, what) in COMMAND_HELP.items():
        for spelled in (name, *aliases):
            helped = cli(url, database, spelled, "--help")
            text = " ".join(helped.stdout.split()).lower()
            assert helped.returncode == 0 and what.split(" (")[0][:40].lower() in text, spelled
            assert all(a in text for a in aliases) and (not aliases or "aliases:" in text), spelled
    items = ['{"i":0}', '{"i":1}', '{"i":2}']
    assert cli(url, database, "get", "alice", "chat-1", "memory").stdout.split() == items
    assert cli(url, database, "show", "--user", "alice", "chat-1", "memory").stdout.split() == items
    assert cli(url, database, "get-list", "alice", "chat-1", "memory", "--offset", "-1").stdout.split() == items[-1:]
    assert cli(url, database, "length", "alice", "chat-1", "memory").stdout.strip() == "3"
    assert cli(url, database, "list-length", "--user", "alice", "chat-1", "memory").stdout.strip() == "3"


def test_the_write_calls_from_the_shell(store, raw, url, database):
    assert cli(url, database, "save", "alice", "chat-1", "summary", '{"t": "hi"}').returncode == 0
    assert store.get("alice", "chat-1", "summary") == {"t": "hi"}
    assert cli(url, database, "save-list", "alice", "chat-1", "memory", "[1, 2]").returncode == 0
    assert cli(url, database, "append-list", "alice", "chat-1", "memory", "3", '"four"').stdout.strip() == "4"
    assert store.get_list("alice", "chat-1", "memory") == [1, 2, 3, "four"]
    assert orjson.loads(cli(url, database, "pop-list", "alice", "chat-1", "memory").stdout) == "four"
    assert store.get_list("alice", "chat-1", "memory") == [1, 2, 3]
    one_line_error(cli(url, database, "pop-list", "alice", "chat-1", "empty"), 1, "'empty'")
    before = raw.all_rows()
    one_line_error(cli(url, database, "save", "alice", "chat-1", "k", "{not json"), 2, "not a JSON document")
    one_line_error(cli(url, database, "save-list", "alice", "chat-1", "k", '{"a": 1}'), 2, "JSON array")
    assert raw.all_rows() == before


def test_get_prints_every_item_of_a_list_left_without_a_hash_row(store, raw, url, database):
    """A list whose hash row is gone is still a list: `get` printed its first item as a value."""
    for i, item in enumerate(["a", "b", "c"]):
        raw.execute("INSERT INTO {t} (session_id, state_key, item_index, state_data, version)"
                    " VALUES ('alice:chat-1', 'memory', %s, %s, 1)", (i, orjson.dumps(item).decode()))
    done = cli(url, database, "get", "alice", "chat-1", "memory", "--json")
    assert done.returncode == 0 and orjson.loads(done.stdout) == ["a", "b", "c"]
    store.save("alice", "chat-1", "summary", {"t": "hi"})
    assert orjson.loads(cli(url, database, "get", "alice", "chat-1", "summary", "--json").stdout) == {"t": "hi"}


def test_versions_compare_and_set_many_keys_and_prefixes_from_the_shell(store, raw, url, database):
    """The API calls an operator lacked a command for: get --versioned, save/save-list
    --if-version, get-many, get-prefix, delete of several keys (and --maintenance), sessions
    --newer-than, forget-user/reencrypt --batch. Each checked against the store and plain SQL."""
    cas = cli(url, database, "save", "alice", "chat-1", "plan", '{"step": 1}', "--if-version", "0", "--json")
    assert cas.returncode == 0 and orjson.loads(cas.stdout) == {"saved": True, "version": 1}
    stale = cli(url, database, "save", "alice", "chat-1", "plan", '{"step": 9}', "--if-version", "0")
    assert stale.returncode == 1 and "not saved" in stale.stdout and store.get("alice", "chat-1", "plan") == {"step": 1}
    assert orjson.loads(cli(url, database, "get", "alice", "chat-1", "plan", "--versioned").stdout) == \
        {"value": {"step": 1}, "version": 1}
    assert cli(url, database, "save-list", "alice", "chat-1", "memory", "[1, 2]", "--if-version", "0").returncode == 0
    assert cli(url, database, "save-list", "alice", "chat-1", "memory", "[3]", "--if-version", "0").returncode == 1
    assert store.get_list_versioned("alice", "chat-1", "memory") == ([1, 2], 1)
    assert orjson.loads(cli(url, database, "get", "alice", "chat-1", "memory", "--versioned").stdout) == \
        {"value": [1, 2], "version": 1}
    many = cli(url, database, "get-many", "alice", "chat-1", "--value", "plan", "--list", "memory", "--value", "nope")
    assert orjson.loads(many.stdout) == store.get_many("alice", "chat-1", ["plan", "nope"], ["memory"])
    for k in ("idx:a", "idx:b", "other"):
        store.save("alice", "chat-1", k, k)
    assert orjson.loads(cli(url, database, "get-prefix", "alice", "chat-1", "idx:").stdout) == {"idx:a": "idx:a",
                                                                                              "idx:b": "idx:b"}
    before = store.sessions("alice").items[0].updated_at
    raw.execute("UPDATE {t} SET updated_at = updated_at - INTERVAL 2 DAY WHERE session_id = '__catalog__'")
    gone = cli(url, database, "delete", "alice", "chat-1", "idx:a", "idx:b", "--maintenance", "--json")
    assert gone.returncode == 0 and orjson.loads(gone.stdout)["rows"] == 2
    assert sorted(r[1] for r in raw.rows("alice:chat-1")) == ["memory", "memory", "memory:_hash", "other", "plan"]
    assert store.sessions("alice").items[0].updated_at < before  # maintenance: activity left as it was
    assert cli(url, database, "delete", "alice", "chat-1", "idx:a", "idx:b").returncode == 1  # none of them
    assert cli(url, database, "sessions", "--newer-than", "1d", "--json").stdout.count('"session_id"') == 0
    assert orjson.loads(cli(url, database, "sessions", "--newer-than", "3d", "--json").stdout)["items"][0][
        "session_id"] == "chat-1"
    assert cli(url, database, "forget-user", "alice", "--batch", "2", "--yes").returncode == 0
    assert raw.rows("alice:chat-1") == []


def test_a_newcomer_on_the_embedded_default_server(tmp_path):
    """`server start`, then `sessions`: the database and table are made, an empty table lists
    nothing (exit 0), and no DDL is shown as an error."""
    import os
    import shutil
    import tempfile

    from mysql_state.server import find_binary

    if find_binary("mariadbd", "mysqld") is None:
        import pytest

        pytest.skip("needs a mariadbd/mysqld binary for the embedded server (make test installs one)")
    cache = tempfile.mkdtemp(prefix="ms-", dir="/tmp")  # short: the server's socket lives there
    env = {k: v for k, v in os.environ.items() if k != "MYSQL_URL"}
    env["XDG_CACHE_HOME"] = cache
    run = lambda *a: subprocess.run([sys.executable, "-m", "mysql_state", *a],  # noqa: E731
                                    capture_output=True, text=True, timeout=180, env=env)
    try:
        started = run("server", "start")
        assert started.returncode == 0, started.stderr
        listed = run("sessions")
        assert listed.returncode == 0 and listed.stdout == "" and listed.stderr == "", listed.stderr
        assert orjson.loads(run("sessions", "--json").stdout) == {"items": [], "next_cursor": None}
        assert run("save", "alice", "chat-1", "k", "1").returncode == 0
        assert run("sessions", "alice").stdout.split() == ["chat-1"]
    finally:
        run("server", "stop")
        shutil.rmtree(cache, ignore_errors=True)


# ---- a new server or a fresh database: --create (create_if_not_exist=True) -----------------------


def test_a_restore_into_a_fresh_database_needs_create_and_says_so_then_restores_every_row(store, raw, url, database):
    """The unlucky operator's restore: a backup imported into a database that does not exist yet.
    Without ``--create`` it is refused in one line that names the way out (the flag, or the SQL),
    and nothing is created; with it the database and table are made and every row comes back."""
    store.save_list("alice", "chat-1", "memory", [{"i": i, "text": "héllo"} for i in range(4)])
    store.save("alice", "chat-1", "summary", {"text": "s"})
    backup = cli(url, database, "export")
    assert backup.returncode == 0 and backup.stdout.count("\n") == len(raw.all_rows())
    fresh = database + "_r"
    admin = connect(url)
    try:
        refused = cli(url, fresh, "import", input=backup.stdout)
        one_line_error(refused, 2, f"database `{fresh}` does not exist", "nothing was done", "--create",
                       "CREATE DATABASE", "CREATE TABLE")
        with admin.cursor() as cur:
            assert cur.execute("SELECT 1 FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = %s", (fresh,)) == 0
        done = cli(url, fresh, "import", "--create", input=backup.stdout)  # after the command, as every global option
        assert done.returncode == 0, done.stderr
        copy = Raw(url, fresh)
        try:
            assert copy.all_rows() == raw.all_rows()
        finally:
            copy.close()
        back = cli(url, fresh, "get", "alice", "chat-1", "memory")
        assert [orjson.loads(x) for x in back.stdout.splitlines()] == [{"i": i, "text": "héllo"} for i in range(4)]
    finally:
        with admin.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{fresh}`")
        admin.close()


def test_a_missing_table_is_named_with_its_create_statement_and_made_by_create(url, database):
    admin = connect(url)
    with admin.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{database}`")
    try:
        refused = cli(url, database, "sessions")
        one_line_error(refused, 2, f"table `{database}`.`agentscope_sessions` does not exist", "--create",
                       "CREATE TABLE")
        with admin.cursor() as cur:
            assert cur.execute("SELECT 1 FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s", (database,)) == 0
        saved = cli(url, database, "--create", "save", "bob", "s-1", "k", '{"v": 1}')
        assert saved.returncode == 0, saved.stderr
        raw = Raw(url, database)
        try:
            assert raw.rows() == [("bob:s-1", "k", 0, '{"v":1}', 1)]
        finally:
            raw.close()
    finally:
        admin.close()


# ---- an unlucky operator (a review of 2026-12-06): secrets, empty arguments, the anonymous user --


def _password_user(url: str, database: str, name: str, password: str) -> str:
    """A server account with a password on ``database``; its URL."""
    from urllib.parse import quote

    admin = connect(url)
    try:
        with admin.cursor() as cur:
            cur.execute(f"CREATE USER IF NOT EXISTS '{name}'@'%%' IDENTIFIED BY %s", (password,))
            cur.execute(f"CREATE USER IF NOT EXISTS '{name}'@'localhost' IDENTIFIED BY %s", (password,))
            for host in ("%", "localhost"):
                cur.execute(f"GRANT ALL ON `{database}`.* TO '{name}'@'{host}'")
    finally:
        admin.close()
    rest = url.split("://", 1)[1].split("@", 1)[1]
    return f"mysql://{name}:{quote(password, safe='')}@{rest.split('/')[0]}/{database}"


def test_no_password_in_a_usage_error_even_where_argparse_echoes_the_url(url, database, store):
    secret_url = _password_user(url, database, "op_cli", "S3cretPw!x")
    runs = [("sessions", "--uri=" + secret_url), (secret_url, "sessions"), ("-url", secret_url, "sessions")]
    for argv in runs:
        done = subprocess.run([sys.executable, "-m", "mysql_state", *argv], capture_output=True, text=True, timeout=60)
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        assert "S3cretPw" not in done.stderr + done.stdout and "***" in done.stderr, done.stderr


def test_a_one_letter_password_is_masked_where_it_stands_alone_not_in_every_word(url, database, store):
    short_url = _password_user(url, database, "op_short", "e")
    done = subprocess.run([sys.executable, "-m", "mysql_state", "--url", short_url, "get", "carol", "nope"],
                          capture_output=True, text=True, timeout=60)
    one_line_error(done, 1, "no session 'nope' of user 'carol'")  # words whole: 'session', 'user', 'nope'


def test_stats_with_an_anonymous_session_as_large_as_a_named_one(store, url, database):
    store.save_list(None, "b3", "m", [{"i": i} for i in range(3)])
    store.save_list("alice", "b3", "m", [{"i": i} for i in range(3)])  # the same rows and bytes: a tie
    done = cli(url, database, "stats", "--json")
    assert done.returncode == 0, done.stderr
    largest = orjson.loads(done.stdout)["largest"]
    assert sorted((x["user_id"] or "-", x["session_id"]) for x in largest) == [("-", "b3"), ("alice", "b3")]
    assert cli(url, database, "stats").returncode == 0


def test_an_empty_url_database_or_table_is_refused_before_anything_is_done(store, raw, url, database):
    """`--url "$TARGET" truncate --yes` with TARGET unset must not truncate what MYSQL_URL names."""
    import os

    store.save("alice", "chat-1", "k", 1)
    before = raw.all_rows()
    env = dict(os.environ, MYSQL_URL=f"{url.rstrip('/')}/{database}")
    for argv in (("--url", "", "truncate", "--yes"), ("truncate", "--yes", "--url"),
                 ("--database", "", "truncate", "--yes"), ("--table", " ", "truncate", "--yes")):
        done = subprocess.run([sys.executable, "-m", "mysql_state", *argv], capture_output=True, text=True,
                              timeout=60, env=env)
        one_line_error(done, 2, "is empty")
    assert raw.all_rows() == before


def test_a_blank_user_is_refused_and_the_anonymous_user_is_named_as_such(store, raw, url, database):
    store.save(None, "anon-1", "k", 1)
    store.save("alice", "chat-1", "k", 1)
    before = raw.all_rows()
    for argv in (("forget-user", "", "--yes"), ("forget-user", " ", "--yes"), ("sessions", "--user", ""),
                 ("prune", "--older-than", "1s", "--user", "", "--yes"), ("get", "", "anon-1", "k")):
        one_line_error(cli(url, database, *argv), 2, "is blank", "'-' for the anonymous user")
    assert raw.all_rows() == before
    refused = cli(url, database, "forget-user", "-")
    one_line_error(refused, 2, "the anonymous user", "--yes")
    assert cli(url, database, "forget-user", "-", "--yes").returncode == 0
    assert not store.exists(None, "anon-1") and store.exists("alice", "chat-1")


def test_history_pages_and_not_found_from_the_shell(url, database, raw):
    from mysql_state import MysqlAgentStateStore

    with MysqlAgentStateStore.from_url(url, database_name=database, keep_history=True) as h:
        h.save_list("alice", "chat-1", "memory", [{"i": i} for i in range(6)])
        h.save_list("alice", "chat-1", "memory", [])  # the 6 items archived
    lines = lambda done: [orjson.loads(x.split("  ", 1)[1])["i"] for x in done.stdout.splitlines()]  # noqa: E731
    assert lines(cli(url, database, "get", "alice", "chat-1", "memory", "--history")) == [0, 1, 2, 3, 4, 5]
    assert lines(cli(url, database, "get", "alice", "chat-1", "memory", "--history", "--offset", "2", "--limit", "3")) == [2, 3, 4]
    assert lines(cli(url, database, "get", "alice", "chat-1", "memory", "--history", "--tail", "2")) == [4, 5]
    one_line_error(cli(url, database, "get", "alice", "nope", "memory", "--history"), 1, "no session 'nope'")
    one_line_error(cli(url, database, "list-length", "alice", "chat-1", "nope"), 1, "has no key 'nope'")
    assert cli(url, database, "list-length", "alice", "chat-1", "memory").stdout.strip() == "0"  # there, empty


def test_sessions_of_one_user_as_json_and_the_other_form_s_options_refused(store, url, database):
    store.save("alice", "chat-2", "k", 1)
    store.save("alice", "chat-1", "k", 1)
    assert orjson.loads(cli(url, database, "sessions", "alice", "--json").stdout) == ["chat-1", "chat-2"]
    one_line_error(cli(url, database, "sessions", "alice", "--limit", "1"), 2, "--limit")


def test_version():
    done = subprocess.run([sys.executable, "-m", "mysql_state", "--version"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.startswith("mysql-state ")


def test_no_progress_bar_without_a_terminal(store, raw, url, database):
    store.save_list("alice", "chat-1", "memory", [1, 2, 3])
    exported = cli(url, database, "export")
    assert exported.returncode == 0 and exported.stderr == "" and exported.stdout.count("\n") == len(raw.all_rows())
    pruned = cli(url, database, "prune", "--older-than", "30d", "--dry-run", "--json")
    assert pruned.returncode == 0 and pruned.stderr == "" and orjson.loads(pruned.stdout)["dry_run"] is True


def test_reencrypt_doctor_and_forget_user_draw_a_bar_on_a_terminal_only(store, raw, url, database, monkeypatch):
    """The bar of prune and import, on stderr: drawn on a terminal (ended by a newline, a
    warning given meanwhile on a line of its own after it), never without one or with --json."""
    import base64
    import os
    import re

    from mysql_state.crypto import PREFIX

    for session in ("c1", "c2"):
        store.save_list("alice", session, "memory", ["a", "b", "c"])
    store.save_list("bob", "c1", "memory", ["a", "b", "c"])
    quiet = cli(url, database, "doctor")
    assert quiet.returncode == 0 and quiet.stdout.strip() == "healthy" and quiet.stderr == ""
    raw.execute("DELETE FROM {t} WHERE session_id = 'bob:c1' AND state_key = 'memory' AND item_index = 1")
    monkeypatch.setenv("MYSQL_STATE_KEYS", "k1=" + base64.b64encode(os.urandom(32)).decode())
    here = [sys.executable, "-m", "mysql_state", "--url", url, "--database", database]

    def lines(stderr: str) -> list[str]:
        assert stderr.endswith("\n"), repr(stderr)  # the bar's line ended
        return stderr.replace("\r\n", "\n").split("\n")[:-1]

    rotated = with_terminal_stderr(here + ["reencrypt", "--batch", "2"])
    assert rotated.returncode == 0 and "rewrote 10 rows under key 'k1'" in rotated.stdout  # 2 lists whole, bob's 2 items
    bar, warning = lines(rotated.stderr)
    assert re.fullmatch(r"(\rre-encrypted rows \d+)+", bar) and bar.endswith("re-encrypted rows 10"), bar
    assert warning.startswith("mysql-state: warning: reencrypt left 1 list(s)")
    assert all(r[3].startswith(PREFIX) for r in raw.rows() if not r[1].endswith(":_hash"))  # sealed

    checked = with_terminal_stderr(here + ["doctor"])
    assert checked.returncode == 1 and "'memory'" in checked.stdout
    assert lines(checked.stderr) == ["\rchecked sessions 0\rchecked sessions 3"]
    as_json = with_terminal_stderr(here + ["doctor", "--json"])
    assert as_json.returncode == 1 and as_json.stderr == "" and orjson.loads(as_json.stdout)[0]["session_id"] == "bob:c1"
    piped = cli(url, database, "doctor")
    assert piped.returncode == 1 and piped.stderr == ""

    erased = with_terminal_stderr(here + ["forget-user", "alice", "--yes", "--batch", "1"])
    assert erased.returncode == 0 and "removed 10 rows" in erased.stdout
    assert lines(erased.stderr) == ["".join(f"\rerased sessions [{'#' * (15 * n)}{'.' * (30 - 15 * n)}] {n}/2"
                                            for n in (0, 1, 2))]
    gone = cli(url, database, "forget-user", "bob", "--yes")
    assert gone.returncode == 0 and "removed 4 rows" in gone.stdout and gone.stderr == ""
    assert raw.all_rows() == []
    again = with_terminal_stderr(here + ["reencrypt", "--json"])
    assert again.returncode == 0 and again.stderr == "" and orjson.loads(again.stdout)["rewritten"] == 0


def test_the_throwaway_server_goes_away_on_a_plain_kill():
    """`python -m mysql_state.server`, then SIGTERM (not Ctrl-C): its mariadbd stops and its
    temporary data is removed (no orphan server)."""
    import os
    import signal
    import time

    from mysql_state.server import find_binary

    if find_binary("mariadbd", "mysqld") is None:
        import pytest

        pytest.skip("needs a mariadbd/mysqld binary (make test installs one)")
    env = {k: v for k, v in os.environ.items() if k != "MYSQL_URL"}
    proc = subprocess.Popen([sys.executable, "-m", "mysql_state.server"], stdout=subprocess.PIPE, text=True, env=env)
    try:
        url = proc.stdout.readline().strip()
        port = int(url.rsplit(":", 1)[1].strip("/"))
        con = connect(url)
        with con.cursor() as cur:
            cur.execute("SELECT @@datadir, @@pid_file")
            datadir, _ = cur.fetchone()
        con.close()
        assert os.path.isdir(datadir)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
        deadline = time.monotonic() + 30
        while os.path.exists(datadir) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not os.path.exists(datadir)
        import socket

        with socket.socket() as s:  # nothing listens on its port any more
            assert s.connect_ex(("127.0.0.1", port)) != 0
    finally:
        if proc.poll() is None:
            proc.kill()


def test_an_operator_s_save_list_archives_what_it_drops_with_keep_history(store, url, database):
    """The application keeps history (keep_history=True): an operator's shrinking save-list
    archives the items it drops when given --keep-history (before or after the command), and
    without it archives nothing, as a store opened without keep_history."""
    store.save_list("carol", "chat-2", "memory", [{"i": i} for i in range(6)])
    assert cli(url, database, "save-list", "carol", "chat-2", "memory", '[{"i": 0}, {"i": 1}]').returncode == 0
    assert store.get_history("carol", "chat-2", "memory") == []
    done = cli(url, database, "save-list", "carol", "chat-2", "memory", '[{"i": 0}]', "--keep-history")
    assert done.returncode == 0, done.stderr
    assert [h.value for h in store.get_history("carol", "chat-2", "memory")] == [{"i": 1}]
    assert store.get_list("carol", "chat-2", "memory") == [{"i": 0}]


def test_an_integer_beyond_64_bits_is_refused_never_saved_as_a_float(store, raw, url, database):
    """orjson reads 99999999999999999999999 as 1e+23: the CLI saved another number, where the
    API refuses the integer. Now the CLI refuses it too; 64-bit integers stay exact."""
    for command, value in (("save", "99999999999999999999999"), ("save-list", "[1, 18446744073709551616]"),
                           ("append-list", "[18446744073709551616]")):
        out = cli(url, database, command, "u", "s", "k", value)
        assert out.returncode == 2 and "64-bit" in out.stderr, (command, out)
    assert raw.rows("u:s") == []
    assert cli(url, database, "save", "u", "s", "k", '{"a": 1234567890123456789}').returncode == 0
    assert raw.query("SELECT state_data FROM {t} WHERE session_id = 'u:s' AND state_key = 'k'") == [
        ('{"a":1234567890123456789}',)]


def test_get_and_key_kind_tell_a_value_from_a_list_of_one_by_the_key_alone(store, raw, url, database):
    """`get` told a list of one from a value by reading every value whose key starts with KEY:
    a damaged sibling (`plan2`) made `get plan` fail (review of 2026-12-07). `key-kind` and
    `get` ask about the one key."""
    store.save("cu", "s1", "plan", {"step": 1})
    store.save_list("cu", "s1", "memory", [{"only": 1}])
    store.save("cu", "s1", "plan2", 2)
    raw.execute("UPDATE {t} SET state_data = '{not json' WHERE session_id = 'cu:s1' AND state_key = 'plan2'")
    out = cli(url, database, "get", "cu", "s1", "plan")
    assert out.returncode == 0 and orjson.loads(out.stdout) == {"step": 1}, out
    out = cli(url, database, "get", "cu", "s1", "memory")
    assert out.returncode == 0 and out.stdout.splitlines() == ['{"only":1}'], out
    assert [cli(url, database, "key-kind", "cu", "s1", k).stdout.strip() for k in ("plan", "memory")] == ["value", "list"]
    out = cli(url, database, "key-kind", "cu", "s1", "nothing")
    assert out.returncode == 1 and "has no key 'nothing'" in out.stderr
    assert store.key_kind("cu", "s1", "plan2") == "value"  # a damaged value is still a value


def test_a_reader_that_stops_early_ends_the_command_quietly(store, url, database):
    """`mysql-state export | head -2` printed "BrokenPipeError: [Errno 32] Broken pipe" (a new
    user's walk-through, 2026-12-07): the command stops quietly, as Unix tools do."""
    store.save_list("u", "s", "big", list(range(20000)))
    done = subprocess.run(["bash", "-c", f"'{sys.executable}' -m mysql_state export --url '{url}' --database "
                                         f"'{database}' | head -2; exit ${{PIPESTATUS[0]}}"],
                          capture_output=True, text=True, timeout=120)
    assert len(done.stdout.splitlines()) == 2
    assert done.stderr == "" and done.returncode == 141, (done.returncode, done.stderr)


def test_get_refuses_options_that_do_not_go_together_and_drops_none_in_silence(store, raw, url, database):
    """--tail with --offset/--limit (--tail won), a window on a value (ignored), --versioned
    with a window or --history (ignored), and any of them without KEY: exit 2, one line naming
    the options, nothing read."""
    store.save_list("carol", "s1", "mem", ["a", "b", "c", "d"])
    store.save("carol", "s1", "plan", {"x": 1})
    for args, words in (
            (["mem", "--offset", "1", "--limit", "1", "--tail", "1"], ("--tail", "--offset")),
            (["mem", "--tail", "1", "--limit", "2"], ("--tail", "--limit")),
            (["plan", "--offset", "3", "--limit", "1"], ("'plan'", "value", "--offset", "--limit")),
            (["plan", "--tail", "1"], ("'plan'", "--tail")),
            (["mem", "--versioned", "--tail", "1"], ("--versioned", "--tail")),
            (["mem", "--history", "--versioned"], ("--versioned", "--history")),
            (["--offset", "1"], ("--offset", "KEY"))):
        one_line_error(cli(url, database, "get", "carol", "s1", *args), 2, *words)
    ok = cli(url, database, "get", "carol", "s1", "mem", "--offset", "1", "--limit", "2")
    assert ok.returncode == 0 and [orjson.loads(x) for x in ok.stdout.splitlines()] == ["b", "c"]
    ok = cli(url, database, "get", "carol", "s1", "mem", "--tail", "1")
    assert ok.returncode == 0 and [orjson.loads(x) for x in ok.stdout.splitlines()] == ["d"]
    ok = cli(url, database, "get", "carol", "s1", "plan", "--versioned")
    assert ok.returncode == 0 and orjson.loads(ok.stdout)["value"] == {"x": 1}


def test_save_many_and_the_save_list_report_from_the_shell(store, raw, url, database):
    """save_many (all or nothing, with a compare-and-set) and save_list_report had no command."""
    done = cli(url, database, "--json", "save-many", "dora", "s1", "--value", "plan", '{"s":1}',
               "--list", "mem", "[1,2,3]")
    assert done.returncode == 0, done.stderr
    out = orjson.loads(done.stdout)
    assert out["versions"] == {"mem": 1, "plan": 1} and out["lists"]["mem"]["rows_written"] == 3
    assert store.get("dora", "s1", "plan") == {"s": 1} and store.get_list("dora", "s1", "mem") == [1, 2, 3]
    stale = cli(url, database, "save-many", "dora", "s1", "--value", "plan", '{"s":2}', "--list", "mem", "[9]",
                "--if-version", "plan", "7")
    assert stale.returncode == 1 and "not saved" in stale.stdout and "expected version 7" in stale.stdout
    assert store.get("dora", "s1", "plan") == {"s": 1} and store.get_list("dora", "s1", "mem") == [1, 2, 3]
    ok = cli(url, database, "save-many", "dora", "s1", "--list", "mem", "[1,2,3,4]", "--if-version", "mem", "1")
    assert ok.returncode == 0 and "saved 'mem' at version 2 (append: 1 row written)" in ok.stdout, ok.stdout
    for args, words in ((["--list", "mem", "5"], ("--list mem", "JSON array")), ([], ("save-many needs",)),
                        (["--value", "k", "{"], ("not a JSON document",)),
                        (["--value", "k", "1", "--if-version", "k", "x"], ("--if-version k", "'x'"))):
        one_line_error(cli(url, database, "save-many", "dora", "s2", *args), 2, *words)
    assert not store.exists("dora", "s2")
    rep = cli(url, database, "--json", "save-list", "dora", "s1", "mem", "[1,2,3,4,5]")
    assert orjson.loads(rep.stdout) == {"saved": 5, "kind": "append", "rows_written": 1, "version": 3,
                                        "delete_from": None}
    rep = cli(url, database, "save-list", "dora", "s1", "mem", "[1,2]")
    assert rep.stdout.strip() == "saved 2 items at 'mem' (shrink: 0 rows written, version 4)"


def test_a_negative_duration_is_refused_naming_the_value_not_as_a_missing_argument(store, raw, url, database):
    """argparse read "-1d" as an option ("expected one argument"), naming neither the value nor
    the rule (audit of 2026-12-07); nothing is pruned either way."""
    store.save("alice", "chat-1", "k", 1)
    for argv in (("prune", "--older-than", "-1d", "--yes"), ("sessions", "--newer-than", "-2h")):
        out = cli(url, database, *argv)
        assert out.returncode == 2 and f"'{argv[2]}' is not a duration" in out.stderr, out.stderr
    assert cli(url, database, "prune", "--older-than", "30d", "--yes").returncode == 0
    assert store.exists("alice", "chat-1")


def test_a_compare_and_set_version_below_0_is_refused_not_a_blind_write(store, url, database):
    """--if-version -1 passed the API's UNVERSIONED ("whatever is stored") through: the save
    overwrote version 1 although the command says "only if the key's version is N"."""
    store.save("dan", "s", "k", 1)
    for argv in (("save", "dan", "s", "k", "2", "--if-version", "-1"),
                 ("save-list", "dan", "s", "l", "[2]", "--if-version", "-1"),
                 ("save-many", "dan", "s", "--value", "k", "2", "--if-version", "k", "-1")):
        done = cli(url, database, *argv)
        assert done.returncode == 2 and "must be a version >= 0" in done.stderr, (argv, done.stderr)
    assert store.get_versioned("dan", "s", "k") == (1, 1) and store.get_list("dan", "s", "l") == []


def test_export_of_a_user_or_session_with_no_row_is_not_a_success_and_import_reads_a_file(store, url, database,
                                                                                          tmp_path):
    store.save("dan", "s", "k", 1)
    missing = cli(url, database, "export", "--user", "dan", "--session", "s", "--session", "nosuch")
    assert missing.returncode == 1 and "'nosuch'" in missing.stderr and missing.stdout.count("\n") == 2
    nobody = cli(url, database, "export", "--user", "nobody")
    assert nobody.returncode == 1 and "no session" in nobody.stderr and nobody.stdout == ""
    backup = tmp_path / "dan.jsonl"
    backup.write_text(cli(url, database, "export", "--user", "dan").stdout)
    store.delete("dan", "s")
    done = cli(url, database, "import", str(backup))
    assert done.returncode == 0 and store.get("dan", "s", "k") == 1
    unreadable = cli(url, database, "import", str(tmp_path / "nowhere.jsonl"))
    assert unreadable.returncode == 2 and "cannot read FILE" in unreadable.stderr
    gone = cli(url, database, "forget-user", "--user", "dan", "--yes")
    assert gone.returncode == 0 and store.get("dan", "s", "k") is None


def test_a_store_warning_is_one_line_naming_what_to_do(url):
    """A MysqlStateWarning (here: a table made with the Java store's DDL, whose key columns fold
    case) came out as Python shows warnings: the script's path and line, then the source line
    `sys.exit(main())` under it (found by an operator audit)."""
    import uuid

    from tests.conftest import connect, make_java_table

    name = "java_" + uuid.uuid4().hex[:8]
    make_java_table(url, name)
    try:
        done = cli(url, name, "sessions")
        assert done.returncode == 0, done.stderr
        lines = done.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("mysql-state: warning: "), done.stderr
        assert "ALTER TABLE" in lines[0] and "sys.exit" not in done.stderr and ".py:" not in done.stderr
    finally:
        con = connect(url)
        with con.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
        con.close()


def test_delete_takes_a_session_the_catalog_lists_without_data_rows(url, database, raw):
    """After the Java store's delete (the data rows only), `sessions` still listed the session
    with its history, and `delete USER SESSION --yes` said there was no such session, leaving
    the catalog and history rows (found by an operator audit). The API's delete took them."""
    from mysql_state import MysqlAgentStateStore

    keeping = MysqlAgentStateStore.from_url(url, database_name=database, create_if_not_exist=True, keep_history=True)
    try:
        keeping.save_list("bob", "hist", "memory", ["a", "b", "c"])
        keeping.save_list("bob", "hist", "memory", ["a"])  # b, c archived
    finally:
        keeping.close()
    raw.execute("DELETE FROM {t} WHERE session_id = 'bob:hist'")  # what the Java store's delete does
    assert "hist" in cli(url, database, "sessions").stdout
    done = cli(url, database, "delete", "bob", "hist", "--yes")
    assert done.returncode == 0, done.stderr
    assert raw.query("SELECT COUNT(*) FROM {t} WHERE state_key = 'bob:hist' OR session_id LIKE '%%bob:hist%%'"
                     " OR session_id LIKE '!_!_history!_!_%%' ESCAPE '!'") == [(0,)]
    assert cli(url, database, "delete", "bob", "hist", "--yes").returncode == 1  # now there is none


def test_export_of_a_damaged_list_names_it_and_is_not_a_success(store, raw, url, database, tmp_path):
    """An export of a table holding a damaged list (a row lost from its middle) exited 0 with an
    empty stderr, and the operator learned of it only when the restore refused the whole file
    (found by an operator audit). Every row is still written, as it is; the damaged key is
    named; import refuses the file, naming the key and how to import the rest."""
    store.save_list("erin", "s1", "memory", [{"i": i} for i in range(4)])
    store.save("erin", "s1", "plan", {"step": 1})
    store.save_list("erin", "s2", "memory", ["a", "b"])
    raw.execute(f"DELETE FROM {raw.t} WHERE session_id = 'erin:s1' AND state_key = 'memory' AND item_index = 2")
    done = cli(url, database, "export", "--user", "erin")
    assert done.returncode == 1, done.stderr
    assert "key 'memory' of session 'erin:s1'" in done.stderr and "its hash row says 4 items" in done.stderr
    assert "erin:s2" not in done.stderr and "Traceback" not in done.stderr
    lines = done.stdout.splitlines()
    exported = sorted((r["session_id"], r["state_key"], r["item_index"]) for r in map(orjson.loads, lines))
    in_table = sorted((r[0], r[1], r[2]) for r in raw.query(
        f"SELECT session_id, state_key, item_index FROM {raw.t} WHERE session_id LIKE 'erin:%%'"
        " OR (session_id = '__catalog__' AND state_key LIKE 'erin:%%')"))
    assert exported == in_table  # every row, as it is
    backup = tmp_path / "erin.jsonl"
    backup.write_text(done.stdout)
    store.forget_user("erin")
    refused = cli(url, database, "import", str(backup))
    assert refused.returncode != 0 and "'memory'" in refused.stderr and "remove the key's lines" in refused.stderr
    assert raw.query(f"SELECT COUNT(*) FROM {raw.t} WHERE session_id LIKE 'erin:%%'") == [(0,)]
    rest = [x for x in lines if not (orjson.loads(x)["session_id"] == "erin:s1"
                                     and orjson.loads(x)["state_key"] in ("memory", "memory:_hash"))]
    backup.write_text("\n".join(rest) + "\n")
    assert cli(url, database, "import", str(backup)).returncode == 0
    assert store.get("erin", "s1", "plan") == {"step": 1} and store.get_list("erin", "s2", "memory") == ["a", "b"]
    assert store.get_list("erin", "s1", "memory") == []


def test_export_names_damaged_keys_even_when_a_session_asked_for_is_missing(store, raw, url, database):
    """`export --user U --session S --session MISSING` reported only the missing session and
    left the damaged keys of S unnamed (found by a review)."""
    store.save_list("fay", "s", "memory", ["a", "b", "c"])
    raw.execute(f"DELETE FROM {raw.t} WHERE session_id = 'fay:s' AND state_key = 'memory' AND item_index = 1")
    done = cli(url, database, "export", "--user", "fay", "--session", "s", "--session", "nosuch")
    assert done.returncode == 1, done.stderr
    assert "key 'memory' of session 'fay:s'" in done.stderr and "'nosuch'" in done.stderr
    assert "doctor --fix` repairs what it safely can" in done.stderr


def test_migrate_and_stats_draw_a_bar_on_a_terminal_only(url, database):
    """``migrate`` draws the rows migrated (given a version, then a catalog row per session) and
    ``stats`` the sessions read, a page of 1 000 at a time, on stderr: on a terminal only, not
    with --json, not for ``migrate --dry-run`` (it applies nothing)."""
    import re

    from tests.conftest import make_java_table

    make_java_table(url, database)
    raw = Raw(url, database)
    try:
        raw.execute("INSERT INTO {t} (session_id, state_key, item_index, state_data) VALUES "
                    + ", ".join(f"('u:s{i}', 'k{k}', 0, '{k}')" for i in range(1500) for k in range(2)))
        here = [sys.executable, "-m", "mysql_state", "--url", url, "--database", database]
        planned = with_terminal_stderr(here + ["migrate", "--dry-run"])
        assert planned.returncode == 0 and "would apply 0004_session_catalog" in planned.stdout
        assert "migrated rows" not in planned.stderr
        migrated = with_terminal_stderr(here + ["migrate"])
        assert migrated.returncode == 0 and "applied 0004_session_catalog" in migrated.stdout
        # 3 000 rows given a version, then 1 500 catalog rows, 500 sessions a batch; the bar's line ended
        bar = "".join(f"\rmigrated rows {n}" for n in (0, 3000, 3500, 4000, 4500)) + "\n"
        assert migrated.stderr.replace("\r\n", "\n").endswith(bar), repr(migrated.stderr)
        assert raw.query("SELECT version, COUNT(*) FROM {t} GROUP BY version") == [(1, 4500)]
        again = with_terminal_stderr(here + ["migrate"])
        assert "nothing to do" in again.stdout and "migrated rows" not in again.stderr  # nothing applied: no bar

        counted = with_terminal_stderr(here + ["stats"])
        assert counted.returncode == 0 and re.search(r"^sessions 1500$", counted.stdout, re.M)
        assert counted.stderr.replace("\r\n", "\n").endswith("\rread sessions 1000\rread sessions 1500\n"), \
            repr(counted.stderr)
        as_json = with_terminal_stderr(here + ["stats", "--json"])
        assert as_json.stderr == "" and orjson.loads(as_json.stdout)["sessions"] == 1500
        piped = cli(url, database, "stats")
        assert piped.returncode == 0 and piped.stderr == ""
        raw.execute("UPDATE {t} SET version = 0, updated_at = updated_at WHERE session_id = 'u:s7'")
        quiet = with_terminal_stderr(here + ["migrate", "--json"])
        assert [s["name"] for s in orjson.loads(quiet.stdout)] == ["0002_version_column"] and quiet.stderr == ""
    finally:
        raw.close()
