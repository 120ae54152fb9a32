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
