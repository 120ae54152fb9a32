"""TLS with the MySQL client's ssl-mode rules, and no secret in any message, against real servers:
a TLS server of this module's own (see tests/tlsserver.py) and the default test server (no TLS)."""

from __future__ import annotations

import asyncio
import logging
import ssl
import subprocess
import sys
import time

import pymysql
import pytest
from dbutils.pooled_db import PooledDB

from mysql_state import (
    AsyncMysqlAgentStateStore,
    MysqlAgentStateStore,
    MysqlStateError,
    MysqlStateWarning,
    ServerUnavailableError,
    TlsError,
    TlsVerificationError,
)
from mysql_state.pool import parse_url
from mysql_state.server import find_binary
from mysql_state.url import parse_hosts, redact

from .tlsserver import TLS_PASSWORD, UNNAMED_HOST, X509_PASSWORD, TlsServer


@pytest.fixture(scope="module")
def tls():
    if find_binary("mariadbd", "mysqld") is None:
        pytest.skip("needs a mariadbd/mysqld binary to start a TLS server")
    server = TlsServer()
    yield server
    server.stop()


def cipher(store: MysqlAgentStateStore) -> str:
    """The session's TLS cipher, '' when in clear text."""
    def q(cur):
        cur.execute("SHOW STATUS LIKE 'Ssl_cipher'")
        return cur.fetchone()[1] or ""
    return store._db.run(q, "cipher", write=False)


def open_store(url: str, **kw) -> MysqlAgentStateStore:
    return MysqlAgentStateStore.from_url(url, create_if_not_exist=True, pool_size=1, **kw)


def roundtrip(store: MysqlAgentStateStore) -> None:
    store.save("alice", "chat-1", "k", {"v": 1})
    assert store.get("alice", "chat-1", "k") == {"v": 1}


def refused(url: str, error: type = TlsVerificationError, **kw) -> MysqlStateError:
    """Connecting raises ``error`` at once (no retries), never a ServerUnavailableError."""
    start = time.monotonic()
    with pytest.raises(error) as info:
        open_store(url, **kw)
    assert not isinstance(info.value, ServerUnavailableError)
    assert time.monotonic() - start < 1.0  # the store's reconnects back off for longer
    return info.value


def plain_server_offers_tls(url: str) -> bool:
    kwargs, _ = parse_url(url)
    con = pymysql.connect(**kwargs)
    try:
        with con.cursor() as cur:
            cur.execute("SHOW VARIABLES LIKE 'have_ssl'")
            row = cur.fetchone()
        return bool(row) and row[1] == "YES"
    finally:
        con.close()


@pytest.fixture(scope="module")
def plain(url):
    """The default test server, which must not offer TLS for these tests."""
    if plain_server_offers_tls(url):
        pytest.skip("the default test server offers TLS")
    return url


# ---- modes ------------------------------------------------------------------------------------


@pytest.mark.parametrize("query", ["ssl-mode=REQUIRED", "ssl_mode=required", "ssl-mode=Required"])
def test_required_encrypts_without_verifying(tls, query):
    with open_store(tls.url(query=query)) as store:
        roundtrip(store)
        assert cipher(store)


@pytest.mark.parametrize("mode", ["REQUIRED", "PREFERRED"])
def test_a_ca_with_a_mode_that_does_not_verify_is_read_and_warned_about(tls, mode):
    """As the MySQL client: ssl-ca with REQUIRED or PREFERRED verifies nothing, and says so; a
    CA file that cannot be read is a ValueError in every mode, before any connection."""
    with pytest.warns(MysqlStateWarning, match="no verification of the server's certificate"):
        with open_store(tls.url(query=f"ssl-mode={mode}&ssl-ca={tls.certs.other_ca}")) as store:
            roundtrip(store)
            assert cipher(store)
    with pytest.raises(ValueError, match="ssl-ca .*could not be loaded"):
        open_store(tls.url(query=f"ssl-mode={mode}&ssl-ca=/nonexistent/ca.pem"))


def test_no_option_is_preferred_and_encrypts_when_offered(tls):
    with open_store(tls.url()) as store:
        assert cipher(store)


def test_disabled_stays_clear_text_so_a_require_ssl_user_is_denied(tls):
    with pytest.raises(MysqlStateError) as info:
        open_store(tls.url(query="ssl-mode=DISABLED"))
    assert info.value.errno == 1045 and not isinstance(info.value, TlsError)


def test_verify_ca_with_the_right_ca(tls):
    with open_store(tls.url(query=f"ssl-mode=VERIFY_CA&ssl-ca={tls.certs.ca}")) as store:
        roundtrip(store)
        assert cipher(store)


def test_verify_ca_with_an_unrelated_ca_is_refused_at_once(tls):
    exc = refused(tls.url(query=f"ssl-mode=VERIFY_CA&ssl-ca={tls.certs.other_ca}"))
    assert "certificate failed verification" in str(exc) and "127.0.0.1" in str(exc)
    assert "ssl-ca is the CA that signed it" in str(exc) and "names" not in str(exc)  # VERIFY_CA checks no name


@pytest.mark.parametrize("spelling", ["ssl-ca", "ssl_ca"])
def test_a_ca_alone_means_verify_ca(tls, spelling):
    refused(tls.url(query=f"{spelling}={tls.certs.other_ca}"))
    with open_store(tls.url(query=f"{spelling}={tls.certs.ca}")) as store:
        assert cipher(store)


def test_verify_ca_does_not_check_the_host_name(tls):
    with open_store(tls.url(host=UNNAMED_HOST, query=f"ssl-mode=VERIFY_CA&ssl-ca={tls.certs.ca}")) as store:
        assert cipher(store)


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_verify_identity_passes_for_a_name_the_certificate_holds(tls, host):
    with open_store(tls.url(host=host, query=f"ssl-mode=verify_identity&ssl-ca={tls.certs.ca}")) as store:
        roundtrip(store)
        assert cipher(store)


def test_verify_identity_refuses_a_host_the_certificate_does_not_name(tls):
    exc = refused(tls.url(host=UNNAMED_HOST, query=f"ssl-mode=VERIFY_IDENTITY&ssl-ca={tls.certs.ca}"))
    assert UNNAMED_HOST in str(exc) and "the names the certificate was issued for" in str(exc)


@pytest.mark.parametrize("mode", ["VERIFY_CA", "verify_identity"])
def test_a_verifying_mode_without_a_ca_is_refused_before_connecting_as_the_mysql_client_does(tls, mode):
    """The MySQL client refuses VERIFY_* without --ssl-ca (error 2026, "CA certificate is
    required"): nothing is trusted by default; the error names the mode and what to give."""
    for kw, query in (({}, f"ssl-mode={mode}"), ({"ssl_mode": mode}, "")):
        with pytest.raises(ValueError, match=f"ssl-mode={mode.upper()} needs ssl-ca") as info:
            open_store(tls.url(query=query), **kw)
        assert "ca-certificates.crt" in str(info.value)
    with open_store(tls.url(query=f"ssl-mode={mode}"), ssl_ca=tls.certs.ca) as store:  # a CA by keyword
        assert cipher(store)


def test_disabled_with_a_ca_is_warned_about_at_the_callers_line(plain):
    """As the MySQL client warns for every mode below VERIFY_CA, DISABLED included; the warning
    names the caller's own line (not a line of the library)."""
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=".pem") as ca:
        ca.write("not used\n")
        ca.flush()
        sep = "&" if "?" in plain else "?"
        with pytest.warns(MysqlStateWarning, match="ssl-mode=DISABLED: no verification") as seen:
            open_store(plain + f"{sep}ssl-mode=DISABLED&ssl-ca={ca.name}").close()
    assert {w.filename for w in seen} == {__file__}


def test_the_warning_for_a_ca_that_is_not_used_points_at_the_caller(tls):
    with pytest.warns(MysqlStateWarning) as seen:
        open_store(tls.url(query=f"ssl-mode=REQUIRED&ssl-ca={tls.certs.ca}")).close()
    assert {w.filename for w in seen} == {__file__}


def test_preferred_does_not_encrypt_a_unix_socket_and_required_does(tls):
    """The MySQL client's rule: a socket connection is not encrypted under PREFERRED (the
    default); REQUIRED or stricter encrypts it."""
    base = f"mysql://root@localhost/{tls.url().rsplit('/', 1)[1]}?unix_socket={tls.server.socket}"
    with open_store(base) as store:
        roundtrip(store)
        assert cipher(store) == ""
    with open_store(base + "&ssl-mode=PREFERRED") as store:
        assert cipher(store) == ""
    with open_store(base + "&ssl-mode=REQUIRED") as store:
        roundtrip(store)
        assert cipher(store)


def test_an_option_files_socket_is_a_socket_for_the_preferred_rule_too(tls, tmp_path):
    """A socket named by the option file (pymysql connects through it) stays clear text under
    PREFERRED, as one named by the URL does; the file's REQUIRED still encrypts it. Before, only
    the URL's socket counted: the file's was sent a TLS handshake under PREFERRED."""
    base = f"mysql://root@localhost/{tls.url().rsplit('/', 1)[1]}"
    with open_store(base, read_default_file=option_file(tmp_path, f"socket={tls.server.socket}")) as store:
        roundtrip(store)
        assert cipher(store) == ""
    required = option_file(tmp_path, f"socket={tls.server.socket}", "ssl-mode=REQUIRED")
    with open_store(base, read_default_file=required) as store:
        roundtrip(store)
        assert cipher(store)


def test_a_blank_unix_socket_is_refused_not_ignored(tls):
    with pytest.raises(ValueError, match="unix_socket must name a socket file"):
        open_store(tls.url(query="unix_socket="))
    with pytest.raises(ValueError, match="unix_socket must name a socket file"):
        open_store(tls.url(), unix_socket=" ")


def test_a_key_protected_by_a_pass_phrase_is_a_clear_error_and_never_a_prompt(tls, tmp_path):
    """OpenSSL would prompt on the terminal (a service hangs) or fail unclearly: refused,
    naming ssl-key, in a fresh process whose stdin is a terminal-less pipe too."""
    key = tmp_path / "client-enc.key"
    subprocess.run(["openssl", "pkey", "-in", tls.certs.client_key, "-aes256", "-passout", "pass:phrase",
                    "-out", str(key)], check=True, capture_output=True, timeout=60)
    with pytest.raises(ValueError, match="ssl-key .*client-enc.key.* is protected by a pass phrase") as info:
        open_store(tls.url("x509", X509_PASSWORD), ssl_cert=tls.certs.client_cert, ssl_key=str(key))
    assert "phrase'" not in str(info.value) and X509_PASSWORD not in str(info.value)


def test_x509_user_connects_only_with_a_client_certificate(tls):
    url = tls.url("x509", X509_PASSWORD)
    with pytest.raises(MysqlStateError) as info:
        open_store(url, ssl_mode="REQUIRED")
    assert info.value.errno == 1045
    with open_store(url + f"?ssl-cert={tls.certs.client_cert}&ssl-key={tls.certs.client_key}") as store:
        roundtrip(store)  # no mode: PREFERRED, encrypted since the server offers it
        assert cipher(store)
    with open_store(url, ssl_mode="VERIFY_IDENTITY", ssl_ca=tls.certs.ca, ssl_cert=tls.certs.client_cert,
                    ssl_key=tls.certs.client_key) as store:
        assert cipher(store)


def test_keywords_win_over_url_parameters(tls):
    bad = tls.url(query=f"ssl-mode=VERIFY_CA&ssl-ca={tls.certs.other_ca}")
    with open_store(bad, ssl_ca=tls.certs.ca) as store:
        assert cipher(store)
    with open_store(bad, ssl_mode="REQUIRED") as store:
        assert cipher(store)
    refused(tls.url(query="ssl-mode=REQUIRED"), ssl_mode="VERIFY_CA", ssl_ca=tls.certs.other_ca)


def test_async_store_forwards_tls_keywords(tls):
    async def main() -> None:
        store = AsyncMysqlAgentStateStore.from_url(tls.url(), create_if_not_exist=True,
                                                   ssl_mode="VERIFY_IDENTITY", ssl_ca=tls.certs.ca)
        async with store:
            await store.save("alice", "chat-1", "k", [1, 2])
            assert await store.get("alice", "chat-1", "k") == [1, 2]
            assert cipher(store.sync)
        with pytest.raises(TlsVerificationError):
            AsyncMysqlAgentStateStore.from_url(tls.url(), ssl_mode="VERIFY_CA", ssl_ca=tls.certs.other_ca)

    asyncio.run(main())


# ---- no retries: each verification failure costs exactly one connection attempt ----------------


def attempts(tls) -> int:
    """The server's count of connection attempts so far (successful or not), each call
    counting its own: the attempts between two calls are the difference minus one."""
    con = pymysql.connect(host="127.0.0.1", port=tls.port, user="root")
    try:
        with con.cursor() as cur:
            cur.execute("SHOW GLOBAL STATUS LIKE 'Connections'")
            return int(cur.fetchone()[1])
    finally:
        con.close()


def test_a_verification_failure_is_tried_once(tls):
    before = attempts(tls)
    refused(tls.url(query=f"ssl-ca={tls.certs.other_ca}"))
    assert attempts(tls) - before - 1 == 1


def context(cafile: str) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=cafile)
    ctx.check_hostname = False
    return ctx


def given_pool(tls, cafile: str) -> PooledDB:
    """Plain pymysql connections. ping=0, reset=False: DBUtils would otherwise replace a broken
    connection itself (a ping at checkout, or the rollback at check-in, reconnects with these
    kwargs), hiding the store's own behaviour."""
    return PooledDB(pymysql, maxconnections=1, blocking=False, ping=0, reset=False, host="127.0.0.1", port=tls.port, user="tls",
                    password=TLS_PASSWORD, ssl=context(cafile))


def test_a_given_pool_of_plain_pymysql_connections_gets_the_same_error(tls):
    pool = given_pool(tls, tls.certs.other_ca)
    before = attempts(tls)
    with pytest.raises(TlsVerificationError):
        MysqlAgentStateStore(pool, "tls_test", create_if_not_exist=True)
    assert attempts(tls) - before - 1 == 1


@pytest.mark.parametrize("given", [False, True], ids=["from_url", "given pool"])
def test_a_reconnect_that_fails_verification_is_not_retried(tls, given):
    if given:
        store = MysqlAgentStateStore(given_pool(tls, tls.certs.ca), "tls_test", create_if_not_exist=True)
    else:
        store = open_store(tls.url(query=f"ssl-ca={tls.certs.ca}"))
    try:
        raw = store._db.run(lambda cur: cur.connection, "the pooled connection", write=False)
        raw.ctx = context(tls.certs.other_ca)  # its next reconnect meets an unrelated CA
        raw._force_close()  # the socket is gone: the next call reconnects in place
        before = attempts(tls)
        with pytest.raises(TlsVerificationError):
            store.get("alice", "chat-1", "k")
        assert attempts(tls) - before - 1 == 1 and store._db.stats.reconnects == 0
    finally:
        store.close()


# ---- an option file (read_default_file) --------------------------------------------------------


def option_file(tmp_path, *lines: str):
    path = tmp_path / "my.cnf"
    path.write_text("[client]\n" + "".join(f"{line}\n" for line in lines))
    return str(path)


def test_an_option_files_tls_options_apply_as_the_mysql_clients_do(tls, tmp_path):
    """ssl-mode, ssl-ca, ssl-cert and ssl-key in the option file were silently dropped: a file
    that said VERIFY_CA with another CA, or VERIFY_IDENTITY for the wrong name, connected."""
    refused(tls.url(), read_default_file=option_file(tmp_path, f"ssl-ca={tls.certs.other_ca}"))  # a CA alone: VERIFY_CA
    refused(tls.url(host=UNNAMED_HOST), read_default_file=option_file(
        tmp_path, "ssl-mode=VERIFY_IDENTITY", f"ssl-ca={tls.certs.ca}"))
    with open_store(tls.url(), read_default_file=option_file(tmp_path, "ssl-mode=VERIFY_CA",
                                                             f"ssl-ca={tls.certs.ca}")) as store:
        roundtrip(store)
        assert cipher(store)
    cert = option_file(tmp_path, f"ssl-cert={tls.certs.client_cert}", f"ssl-key={tls.certs.client_key}")
    with open_store(tls.url("x509", X509_PASSWORD), read_default_file=cert) as store:  # REQUIRE X509
        roundtrip(store)
    # the URL and the keywords win over the file
    with open_store(tls.url(query="ssl-mode=REQUIRED"),
                    read_default_file=option_file(tmp_path, f"ssl-ca={tls.certs.other_ca}")) as store:
        assert cipher(store)


def test_an_option_file_that_requires_tls_refuses_a_server_without_it(plain, database, tmp_path):
    exc = refused(plain, TlsError, database_name=database,
                  read_default_file=option_file(tmp_path, "ssl-mode=REQUIRED"))
    assert "does not offer TLS" in str(exc) and exc.errno == 2026


@pytest.mark.parametrize("line", ["ssl=1", "ssl-verify-server-cert=1", "tls-version=TLSv1.3", "ssl-cipher=Zq9-AES"])
def test_an_option_file_tls_setting_this_library_does_not_apply_is_refused_naming_it(tls, tmp_path, line):
    key = line.split("=")[0]
    with pytest.raises(ValueError, match=f"sets {key} in \\[client\\]") as info:
        open_store(tls.url(), read_default_file=option_file(tmp_path, line))
    assert "Zq9" not in str(info.value)  # no value of the file is shown


@pytest.mark.parametrize("line", ["!include /etc/mysql/tls.cnf", "!includedir /etc/mysql/conf.d/"])
def test_an_option_file_that_includes_another_is_refused_not_half_read(tls, tmp_path, line):
    """The MySQL client reads what !include names (TLS settings included); this library reads
    one file, so an include would drop those settings in silence."""
    with pytest.raises(ValueError, match=f"has an {line.split()[0]} line in \\[client\\]"):
        open_store(tls.url(), read_default_file=option_file(tmp_path, line, "ssl-mode=REQUIRED"))


def test_a_missing_option_file_is_an_error_naming_it(tls, tmp_path):
    missing = str(tmp_path / "nowhere.cnf")
    with pytest.raises(ValueError, match="read_default_file=.*nowhere.cnf.* cannot be read"):
        open_store(tls.url(), read_default_file=missing)


def test_a_url_without_a_user_takes_the_option_files_user_not_root(tls, tmp_path):
    """The URL named no user, so "root" went with the file's password (to root's account)."""
    path = option_file(tmp_path, "user=tls", f"password={TLS_PASSWORD}")
    url = f"mysql://127.0.0.1:{tls.port}/{tls.url().rsplit('/', 1)[1]}"
    with open_store(url, ssl_mode="REQUIRED", read_default_file=path) as store:
        roundtrip(store)
        assert store._db.run(lambda cur: (cur.execute("SELECT CURRENT_USER()"), cur.fetchone()[0])[1],
                             "who", write=False).startswith("tls@")


# ---- a server without TLS ----------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["REQUIRED", "VERIFY_CA", "VERIFY_IDENTITY"])
def test_encrypted_modes_refuse_a_server_without_tls(plain, database, tls, mode):
    exc = refused(plain, TlsError, database_name=database, ssl_mode=mode, ssl_ca=tls.certs.ca)
    assert "does not offer TLS" in str(exc) and exc.errno == 2026


@pytest.mark.parametrize("query", ["", "?ssl-mode=PREFERRED", "?ssl-mode=DISABLED"])
def test_preferred_and_disabled_connect_in_clear_text_to_a_server_without_tls(plain, database, query):
    with open_store(plain + query, database_name=database) as store:
        roundtrip(store)
        assert cipher(store) == ""


def test_unknown_mode_is_a_value_error_before_any_connection(tls):
    tls.server.kill()  # nothing listens: only a check before connecting can answer ValueError
    try:
        for url, kw in ((tls.url(query="ssl-mode=SOMETIMES"), {}), (tls.url(), {"ssl_mode": "verify"})):
            with pytest.raises(ValueError, match="ssl-mode") as info:
                open_store(url, **kw)
            assert not isinstance(info.value, MysqlStateError)
    finally:
        tls.server.start()


# ---- URLs ---------------------------------------------------------------------------------------


def test_host_lists_parse_and_a_single_host_is_as_before():
    assert parse_hosts("mysql://u:pw@h1:3306,h2:3307,h3/db") == [("h1", 3306), ("h2", 3307), ("h3", 3306)]
    assert parse_hosts("mysql://u:pw@[::1]:3310,Db.Example/db") == [("::1", 3310), ("db.example", 3306)]
    assert parse_hosts("mysql://u@db/x") == [("db", 3306)]
    assert parse_url("mysql://u:p%40ss@DB:3307/agents?unix_socket=/s") == (
        {"user": "u", "password": "p@ss", "host": "db", "port": 3307, "unix_socket": "/s"}, "agents")
    assert parse_url("mysql://root@127.0.0.1/") == ({"user": "root", "password": "", "host": "127.0.0.1"}, None)
    assert parse_url("mysql://u:pw@h1:3306,h2:3307/db")[0]["host"] == "h1"
    with pytest.raises(ValueError, match="empty host"):
        parse_hosts("mysql://u:pw@h1,,h2/db")


def test_a_store_uses_the_first_host_of_a_list(plain, database):
    kwargs, _ = parse_url(plain)
    listed = plain.replace(f"@{kwargs['host']}:{kwargs.get('port', 3306)}",
                           f"@{kwargs['host']}:{kwargs.get('port', 3306)},unreachable.invalid:1", 1)
    assert len(parse_hosts(listed)) == 2
    with open_store(listed, database_name=database) as store:
        roundtrip(store)


def test_redact():
    assert redact("mysql://app:s3cr%40t@db:3306/x?ssl-mode=REQUIRED") == "mysql://app:***@db:3306/x?ssl-mode=REQUIRED"
    assert redact("mysql://app:a/b@c@db/x") == "mysql://app:***@db/x"
    assert redact("mysql://app:a@b/c@db/x") == "mysql://app:***@db/x"
    with pytest.raises(ValueError, match="an '@' after the host part .*percent-encoded") as info:
        parse_url("mysql://app:a@Secret/Tail99x@db:3306/x")
    assert "Secret" not in str(info.value) and "Tail99x" not in str(info.value)
    assert redact("mysql://app@db/x") == "mysql://app@db/x"


# ---- no secret in any message -------------------------------------------------------------------

SECRET = "Sup3r-S3cret-pw"


def messages(exc: BaseException) -> list[str]:
    """str and repr of the exception and of everything along its cause/context chain."""
    out, seen, todo = [], set(), [exc]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        out += [str(e), repr(e), *map(str, getattr(e, "args", ()))]
        todo += [e.__cause__, e.__context__, getattr(e, "original_exception", None)]
    return out


def failing_urls(tls, plain) -> dict[str, tuple[str, dict]]:
    kwargs, _ = parse_url(plain)
    user_host = f"{kwargs['user']}:{SECRET}@{kwargs['host']}:{kwargs.get('port', 3306)}"
    return {
        "bad scheme": (f"postgres://u:{SECRET}@127.0.0.1/db", {}),
        "unknown parameter": (f"mysql://{user_host}/db?sslmode=require", {}),
        "port out of range": (f"mysql://u:{SECRET}@127.0.0.1:99999/db", {}),
        "port not a number": (f"mysql://u:{SECRET}@127.0.0.1:abc/db", {}),
        "unencoded slash": (f"mysql://u:{SECRET}/x@127.0.0.1:1/db", {}),
        "unencoded at and slash": (f"mysql://u:pw@{SECRET}/x@127.0.0.1:1/db", {}),
        "unencoded at and question mark": (f"mysql://u:p@{SECRET}?Tail9=1@127.0.0.1:1/db", {}),
        "unknown mode": (f"mysql://{user_host}/db?ssl-mode=sometimes", {}),
        "unreachable": (f"mysql://u:{SECRET}@127.0.0.1:1/db", {}),
        "access denied": (f"mysql://tls:{SECRET}@127.0.0.1:{tls.port}/db", {}),
        "tls failure": (f"mysql://tls:{SECRET}@127.0.0.1:{tls.port}/db?ssl-ca={tls.certs.other_ca}", {}),
        "no tls": (f"mysql://{user_host}/db?ssl-mode=REQUIRED", {}),
        # a user part that reads as host:port, a password with an unencoded '?' (audit of 2026-12-07)
        "user like host:port, '?' in the password": (f"mysql://app:8080?ssl-mode=Kw{SECRET}@127.0.0.1:1/db", {}),
        "a space in the password": (f"mysql://u:pass word {SECRET}@127.0.0.1:1/db", {}),
    }


def test_an_option_file_without_a_section_is_refused_without_its_password(plain, tmp_path):
    """pymysql reads read_default_file with configparser, whose error quoted the password
    line (audit of 2026-12-07)."""
    cnf = tmp_path / "app.cnf"
    cnf.write_text(f"password={SECRET}\nuser=app\n")
    with pytest.raises(ValueError, match="is not a MySQL option file .* its text is not shown") as info:
        MysqlAgentStateStore.from_url(plain, pool_size=1, read_default_file=str(cnf))
    assert not any(SECRET in t for t in messages(info.value))


def test_cli_never_echoes_a_password_given_with_url_even_with_a_space(plain):
    """argparse echoes a refused argument; a password holding a space was not cut by the URL
    pattern, and --url's own password was not known to the masking (audit of 2026-12-07)."""
    kwargs, _ = parse_url(plain)
    url = f"mysql://app:correct horse {SECRET}@{kwargs['host']}:{kwargs.get('port', 3306)}/x"
    for argv in (["--url", url, "sessions", "--limit", url], [f"--url={url}", url],
                 ["--url", url, "sessions", "--limit", "x"]):
        out = subprocess.run([sys.executable, "-m", "mysql_state", *argv], capture_output=True, text=True, timeout=60)
        assert out.returncode == 2 and "***" in out.stderr or "x" in out.stderr, out.stderr
        assert SECRET not in out.stdout + out.stderr and "correct horse" not in out.stderr, out.stderr


def test_the_password_is_in_no_message_log_or_repr(tls, plain, caplog):
    caplog.set_level(logging.DEBUG)
    for name, (url, kw) in failing_urls(tls, plain).items():
        with pytest.raises((ValueError, MysqlStateError)) as info:
            MysqlAgentStateStore.from_url(url, pool_size=1, connect_timeout=2, **kw)
        for text in messages(info.value):
            assert SECRET not in text, f"{name}: {text}"
        assert "***" in str(info.value) or "mysql://" not in str(info.value), name
    assert not any(SECRET in r.getMessage() for r in caplog.records)


def test_access_denied_names_the_user_but_not_the_password(tls):
    with pytest.raises(MysqlStateError) as info:
        open_store(tls.url(password=SECRET))
    assert info.value.errno == 1045 and "'tls'@" in str(info.value)
    assert not any(SECRET in t for t in messages(info.value))


def test_cli_prints_one_line_without_the_password(tls, plain):
    for name, (url, _) in failing_urls(tls, plain).items():
        out = subprocess.run([sys.executable, "-m", "mysql_state", "--url", url, "sessions", "alice"],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 2, name
        assert SECRET not in out.stdout + out.stderr, f"{name}: {out.stderr}"
        assert out.stdout == "" and len(out.stderr.splitlines()) == 1, f"{name}: {out.stderr}"
        assert "Traceback" not in out.stderr and out.stderr.startswith("mysql-state: "), name


def test_a_url_typed_where_the_command_goes_is_echoed_without_any_of_its_password():
    """argparse echoes the refused command: the password, unencoded '@' and '/' included, is
    masked whole (up to the URL's last '@')."""
    for url in (f"mysql://u:{SECRET}@127.0.0.1:1/db", f"mysql://u:pw@{SECRET}/x@127.0.0.1:1/db",
                f"mysql://u:it's-{SECRET}@127.0.0.1:1/db", f'mysql://u:a"{SECRET}@127.0.0.1:1/db'):
        out = subprocess.run([sys.executable, "-m", "mysql_state", url, "sessions"], capture_output=True,
                             text=True, timeout=60)
        assert out.returncode == 2 and "invalid choice" in out.stderr, out.stderr
        assert SECRET not in out.stderr and "u:***@127.0.0.1:1/db" in out.stderr, out.stderr


def test_cli_with_tls_works(tls):
    url = tls.url(query=f"ssl-mode=VERIFY_IDENTITY&ssl-ca={tls.certs.ca}")
    with open_store(url) as store:
        store.save("alice", "chat-9", "k", 1)
    out = subprocess.run([sys.executable, "-m", "mysql_state", "--url", url, "sessions", "alice"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "chat-9" in out.stdout.split(), out.stderr


def test_secrets_stay_out_of_parsed_reprs():
    from mysql_state.url import parse
    assert SECRET not in repr(parse(f"mysql://u:{SECRET}@h/db"))


# ---- least privilege (the README's GRANT statements) -------------------------------------------


def test_the_store_works_with_only_select_insert_update_delete_on_its_table(tls):
    root = pymysql.connect(host="127.0.0.1", port=tls.port, user="root", autocommit=True)
    try:
        with root.cursor() as cur:
            cur.execute("CREATE DATABASE IF NOT EXISTS least")
            cur.execute("CREATE USER IF NOT EXISTS 'app'@'%%' IDENTIFIED BY %s", (SECRET,))
        with open_store(f"mysql://root@127.0.0.1:{tls.port}/least"):
            pass  # the table, made by an account that may
        with root.cursor() as cur:
            cur.execute("GRANT SELECT, INSERT, UPDATE, DELETE ON least.agentscope_sessions TO 'app'@'%'")
        url = f"mysql://app:{SECRET}@127.0.0.1:{tls.port}/least"
        with MysqlAgentStateStore.from_url(url, pool_size=1) as store:
            store.save_list("alice", "chat-1", "memory", [{"i": i} for i in range(5)])
            assert store.append_list("alice", "chat-1", "memory", [{"i": 5}]) == 6
            store.save_list("alice", "chat-1", "memory", [{"i": 0}])
            store.save("alice", "chat-1", "k", 1)
            assert store.save_if_version("alice", "chat-1", "k", 2, 1)
            assert store.get_list("alice", "chat-1", "memory") == [{"i": 0}] and store.exists("alice", "chat-1")
            assert set(store.list_session_ids("alice")) == {"chat-1"}
            store.delete("alice", "chat-1")
            with pytest.raises(MysqlStateError) as denied:
                store.truncate_all_sessions()
            assert denied.value.errno == 1142  # TRUNCATE needs DROP
        with pytest.raises(MysqlStateError) as denied:  # CREATE is needed to create the table
            MysqlAgentStateStore.from_url(url.replace("/least", "/least2"), create_if_not_exist=True)
        assert denied.value.errno in (1044, 1142)
        with root.cursor() as cur:
            cur.execute("GRANT DROP ON least.agentscope_sessions TO 'app'@'%'")
        with MysqlAgentStateStore.from_url(url, pool_size=1) as store:
            assert store.truncate_all_sessions() == 0
    finally:
        with root.cursor() as cur:
            cur.execute("DROP USER IF EXISTS 'app'@'%'")
            cur.execute("DROP DATABASE IF EXISTS least")
        root.close()


def test_an_idle_tls_connection_the_server_closed_is_reopened(tls):
    """The server closing an idle TLS connection (wait_timeout, a proxy's idle timeout) ends it
    with a TLS end of file, which was taken for a TLS setup failure: TlsError, no reconnect.
    It is a lost connection, re-opened as in clear text."""
    with open_store(tls.url(query="ssl-mode=REQUIRED"), init_command="SET SESSION wait_timeout = 1") as store:
        roundtrip(store)
        for call in (lambda: store.get("alice", "chat-1", "k"), lambda: store.save("alice", "chat-1", "k", {"v": 2})):
            time.sleep(2.2)  # the server closes the idle pooled connection
            call()
        assert store.get("alice", "chat-1", "k") == {"v": 2} and cipher(store)
        assert store.metrics()["reconnects"] >= 2


@pytest.mark.parametrize("query", ["", "ssl-mode=REQUIRED"])
def test_a_host_that_drops_the_tls_handshake_is_passed_over_for_the_next(tls, query):
    """A host that greets, then drops the connection in the TLS handshake (going down, a proxy
    with no backend) did not answer: the next host of the list serves (it was a TlsError)."""
    import socket
    import threading

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    bad_port = listener.getsockname()[1]

    def serve() -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", tls.port))
            client.sendall(upstream.recv(65536))  # the server's greeting
            client.recv(65536)  # the client's TLS request
            client.shutdown(socket.SHUT_RDWR)
            client.close()
            upstream.close()

    threading.Thread(target=serve, daemon=True).start()
    try:
        url = tls.url(query=query).replace(f"@127.0.0.1:{tls.port}/", f"@127.0.0.1:{bad_port},127.0.0.1:{tls.port}/")
        with open_store(url, connect_timeout=3) as store:
            roundtrip(store)
            assert cipher(store)
    finally:
        listener.close()
