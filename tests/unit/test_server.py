"""mysql_state.server's datadir set-up when MariaDB's install tool is missing (a new user's
walk-through of 2026-12-07: `mysql-state server start` fell back to MySQL's
--initialize-insecure, which mariadbd refuses, and left a half-made datadir that every later
start tripped over)."""

from __future__ import annotations

import os

import pytest

from mysql_state.server import find_binary, init_datadir


def test_mariadbd_without_its_install_tool_says_what_is_missing_and_creates_nothing(tmp_path, monkeypatch):
    binary = find_binary("mariadbd")
    if binary is None:
        pytest.skip("needs mariadbd (make test installs it)")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # mariadb-install-db is in /usr/bin: off PATH
    datadir = tmp_path / "data"
    with pytest.raises(RuntimeError, match="needs mariadb-install-db"):
        init_datadir(binary, str(datadir))
    assert not os.path.exists(datadir)
