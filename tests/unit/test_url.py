"""url: URLs, TLS rules and redaction, no server."""

from __future__ import annotations

import pytest

from mysql_state import url as u


def test_tls_modes_follow_the_mysql_client_rules():
    assert u.tls_options().mode == "PREFERRED"
    assert u.tls_options(ssl_ca="/ca.pem").mode == "VERIFY_CA"
    assert u.tls_options("verify-identity", "/ca.pem").mode == "VERIFY_IDENTITY"
    assert u.tls_options("required").encrypted and not u.tls_options("disabled").encrypted
    with pytest.raises(ValueError, match="ssl-mode must be one of"):
        u.tls_options("sometimes")
    with pytest.raises(ValueError, match="ssl-key needs ssl-cert"):
        u.tls_options(ssl_key="/k.pem")


def test_redaction_hides_passwords():
    text = u.redact("mysql://app:s3cr3t@db:3306/agents")
    assert "s3cr3t" not in text and "db:3306" in text
    assert "s3cr3t" not in u.scrub("connect to mysql://app:s3cr3t@db failed: s3cr3t", "mysql://app:s3cr3t@db")


def test_a_text_that_is_no_url_is_never_echoed():
    """A URL setting holding a bare string (a password variable swapped in: `MYSQL_URL=$DB_PASSWORD`)
    was echoed whole in its error, `URL hunter2XYZ: must start with mysql://` (a standards audit)."""
    for given in ("hunter2XYZ", "s3cr3t-pw", "localhost:3306"):
        with pytest.raises(ValueError, match="must start with mysql://") as err:
            u.parse_url(given)
        assert given not in str(err.value) and "not shown" in str(err.value), str(err.value)
    assert "pw" not in u.redact("app:pw@db/x")
    assert u.redact("postgres://app:pw@db/x") == "postgres://app:***@db/x"  # a URL of another scheme: shown


def test_parse_takes_hosts_database_and_options():
    kwargs, database = u.parse_url("mysql://app:pw@db1:3307/agents?ssl-mode=DISABLED")
    assert database == "agents" and kwargs["host"] == "db1" and kwargs["port"] == 3307
    assert kwargs["user"] == "app" and kwargs["password"] == "pw"
    assert u.parse_hosts("mysql://u@h1:1,h2:2,h3/") == [("h1", 1), ("h2", 2), ("h3", 3306)]
    for bad in ("postgres://h/", "mysql://u@h:notaport/"):
        with pytest.raises(ValueError):
            u.parse_url(bad)


def test_a_percent_encoded_password_is_decoded_and_never_shown():
    """The docs' rule: a password with ``/ ? # @`` is percent-encoded in the URL."""
    kwargs, database = u.parse_url("mysql://app:p%40ss%2Fw%3F%23@db/agents")
    assert kwargs["password"] == "p@ss/w?#" and kwargs["host"] == "db" and database == "agents"
    parsed = u.parse("mysql://app:s3cret@h1:1,h2:2/x")
    assert "s3cret" not in repr(parsed)
    assert u.redact("mysql://app:s3cret@h1:1,h2:2/x") == "mysql://app:***@h1:1,h2:2/x"


def test_a_unix_socket_and_tls_parameters_come_from_the_url_and_keywords_win():
    kwargs, _ = u.parse_url("mysql://app@localhost/x?unix_socket=/run/mysqld/mysqld.sock")
    assert kwargs["unix_socket"] == "/run/mysqld/mysqld.sock"
    for spelling in ("ssl-mode", "ssl_mode"):
        assert u.parse(f"mysql://app@h/x?{spelling}=REQUIRED").tls == {"ssl_mode": "REQUIRED"}
    kwargs, _ = u.connect_args("mysql://app:pw@h/x?ssl-mode=REQUIRED", ssl_mode="DISABLED")
    assert kwargs["ssl_mode"] == "DISABLED" and kwargs["ssl"] is None


@pytest.mark.parametrize("url", [
    "mysql://app@127.0.0.1:1/db?password=Qp-S3cret-9",
    "mysql://app:pw@127.0.0.1:1/db?ssl-mode=SOMETIMES&pwd=Qp-S3cret-9",
    "mysql://app:pw@127.0.0.1:1/db?connect_timeout=abc&token=Qp-S3cret-9",
])
def test_a_secret_in_a_query_parameter_is_never_shown(url):
    """redact kept the query string: a password given as ?password= was in the error."""
    with pytest.raises(ValueError) as err:
        u.parse_url(url)
    assert "Qp-S3cret-9" not in str(err.value) and "=***" in str(err.value)
    assert "Qp-S3cret-9" not in u.redact(url)
    assert u.redact("mysql://a@h/x?ssl-mode=REQUIRED&read_timeout=3") == "mysql://a@h/x?ssl-mode=REQUIRED&read_timeout=3"


@pytest.mark.parametrize("password", ["4711/Xy-hidden", "4711?Xy-hidden", "4711#Xy-hidden", "4711?s=Xy-hidden"])
def test_a_password_with_an_unencoded_slash_question_mark_or_hash_is_refused_unseen(password):
    """It parsed as another host, port and database (the error showed the rest of the password),
    or with # connected somewhere else as root. Refused, with the hint to percent-encode."""
    url = f"mysql://app:{password}@127.0.0.1:1/agents"
    with pytest.raises(ValueError, match="must be percent-encoded") as err:
        u.parse(url)
    assert "Xy-hidden" not in str(err.value) and "4711" not in str(err.value)
    # a value holding an '@' is given as %40: "app:8080?ssl-mode=x@db" cannot be told from a host,
    # a port and a query, and echoed the password's tail (audit of 2026-12-07)
    assert u.parse("mysql://db/x?ssl-ca=/certs/a%40b/ca.pem").tls == {"ssl_ca": "/certs/a@b/ca.pem"}
    for url in ("mysql://db/x?ssl-ca=/certs/a@b/ca.pem", "mysql://app:8080?ssl-mode=Kw9pQ@127.0.0.1:3306/agents"):
        with pytest.raises(ValueError, match="an '@' after the host part") as err:
            u.parse(url)
        assert "Kw9pQ" not in str(err.value) and "certs" not in str(err.value)
    with pytest.raises(ValueError, match="'#' has no meaning"):
        u.parse("mysql://app:pw@h/x#frag")


def test_a_blank_tls_option_is_refused_never_a_weaker_mode():
    """A blank ssl-mode was PREFERRED, even over the URL's REQUIRED when given as a keyword."""
    for given in ("", "  "):
        with pytest.raises(ValueError, match="ssl-mode must be one of"):
            u.tls_options(given)
        with pytest.raises(ValueError, match="ssl-mode must be one of"):
            u.connect_args("mysql://app:pw@h/x?ssl-mode=REQUIRED", ssl_mode=given)
        with pytest.raises(ValueError, match="ssl-ca must name a file"):
            u.tls_options(ssl_ca=given)
    with pytest.raises(ValueError, match="ssl-mode must be one of"):
        u.connect_args("mysql://app:pw@h/x?ssl-mode=")


def test_tls_files_that_cannot_be_read_are_refused_in_every_mode(tmp_path):
    for query in ("ssl-mode=DISABLED&ssl-ca=/nonexistent/ca.pem",
                  "ssl-mode=DISABLED&ssl-cert=/nonexistent/c.pem&ssl-key=/nonexistent/k.pem"):
        with pytest.raises(ValueError, match="cannot be read"):
            u.connect_args(f"mysql://app:pw@h/x?{query}")
    ca = tmp_path / "ca.pem"
    ca.write_text("not read in DISABLED, only opened")
    kwargs, _ = u.connect_args(f"mysql://app:pw@h/x?ssl-mode=DISABLED&ssl-ca={ca}")
    assert kwargs["ssl"] is None and kwargs["ssl_mode"] == "DISABLED"


@pytest.mark.parametrize("value", ["inf", "nan", "-1", "0", "abc"])
def test_a_timeout_in_the_url_is_checked_as_the_keyword_is(value):
    with pytest.raises(ValueError, match="read_timeout must be a positive, finite number of seconds"):
        u.parse(f"mysql://app:pw@h/x?read_timeout={value}")


def test_a_timeout_keyword_wins_over_the_url_which_wins_over_the_default():
    from mysql_state.pool import DEFAULT_READ_TIMEOUT, make_pools

    url = "mysql://app:pw@127.0.0.1:1/x?connect_timeout=30&read_timeout=300"
    _, reads, _ = make_pools(url, connect_timeout=1, read_timeout=2)
    assert (reads._kwargs["connect_timeout"], reads._kwargs["read_timeout"]) == (1, 2)
    _, reads, _ = make_pools(url)
    assert (reads._kwargs["connect_timeout"], reads._kwargs["read_timeout"]) == (30, 300)
    _, reads, _ = make_pools("mysql://app:pw@127.0.0.1:1/x")
    assert reads._kwargs["read_timeout"] == DEFAULT_READ_TIMEOUT


@pytest.mark.parametrize("url", ["mysql://db.example:3306/app?password=hunter@2secret",
                                 "mysql://root:pw@db.example/app?password=ab@cd2secret",
                                 "mysql://app:pa?ss2secret@h/db", "mysql://app:pa#ss2secret@h/db"])
def test_an_at_sign_after_the_query_hides_the_whole_url(url):
    """redact took the last '@' for the end of the password: with one inside a query value, the
    text after it (the rest of a ?password=) was shown."""
    shown = u.redact(url)
    assert "2secret" not in shown and "hunter" not in shown and shown.startswith("mysql://***")
    with pytest.raises(ValueError) as err:
        u.parse_url(url)
    assert "2secret" not in str(err.value)

