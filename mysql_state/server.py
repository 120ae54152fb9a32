"""A real MySQL-compatible server for tests, the demo and the benchmarks.

:func:`server_url` gives one, in this order:

1. the ``MYSQL_URL`` environment variable;
2. where a Docker engine answers, a MySQL 8 container from testcontainers;
3. a private throwaway server started from ``mariadbd``/``mysqld`` on PATH (temporary
   datadir, free port and socket, removed at exit).

>>> server_url() == os.environ["MYSQL_URL"]  # here the test server's
True
>>> server_url().startswith("mysql://")
True
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from typing import Optional

_SBIN = ("/usr/sbin", "/usr/local/sbin", "/usr/local/mysql/bin")
_CACHE: dict = {}


def find_binary(*names: str) -> Optional[str]:
    """The first of ``names`` on PATH or in the usual sbin folders."""
    path = os.environ.get("PATH", "") + os.pathsep + os.pathsep.join(_SBIN)
    for name in names:
        found = shutil.which(name, path=path)
        if found:
            return found
    return None


def docker_available() -> bool:
    """True when a Docker engine answers (not just the client)."""
    if shutil.which("docker") is None:
        return False
    try:
        return subprocess.run(["docker", "info"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def init_datadir(binary: str, datadir: str, user: Optional[str] = None) -> None:
    """Create and initialise an empty datadir for ``binary`` (mariadbd or mysqld).

    ``user`` is the account the server will run as (needed, and only allowed, as root).
    """
    install = find_binary("mariadb-install-db", "mysql_install_db")
    mariadb = "mariadb" in os.path.basename(binary)
    if mariadb and not install:  # mariadbd has no --initialize-insecure: say what is missing
        raise RuntimeError(f"{binary} needs mariadb-install-db to initialise a datadir, and it is not on PATH "
                           "(nor in /usr/sbin, /usr/local/sbin): install MariaDB's server package whole "
                           "(apt-get install mariadb-server), or put it on PATH; nothing was created")
    os.makedirs(datadir)
    if user is not None and user != "root":
        shutil.chown(datadir, user, user)
    as_user = [f"--user={user}"] if user is not None else []
    if install and mariadb:
        # A tmpdir of its own: bootstraps running side by side in /tmp collided on temp tables.
        tmpdir = os.path.join(os.path.dirname(datadir), "bootstrap-tmp")
        os.makedirs(tmpdir, exist_ok=True)
        if user is not None and user != "root":
            shutil.chown(tmpdir, user, user)
        cmd = [install, "--no-defaults", f"--datadir={datadir}", "--auth-root-authentication-method=normal",
               "--skip-test-db", f"--tmpdir={tmpdir}", *as_user]
    else:  # MySQL: mysqld --initialize-insecure
        cmd = [binary, "--no-defaults", "--initialize-insecure", f"--datadir={datadir}", *as_user]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:  # a half-made datadir would trip every later start: removed
        shutil.rmtree(datadir, ignore_errors=True)
        raise RuntimeError(f"could not initialise a datadir with {cmd[0]} (the half-made {datadir} was "
                           f"removed): {out.stderr[-2000:]}")


def read_error_log(base: str) -> str:
    """The ``error.log`` a server of ours writes in ``base`` ("" when there is none yet)."""
    try:
        with open(os.path.join(base, "error.log"), errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def server_command(binary: str, base: str, datadir: str, socket_path: str, port: int, *,
                   buffer_pool: str = "256M", max_connections: int = 500, user: Optional[str] = None) -> list[str]:
    """The command line of a throwaway server of ours, written once for :class:`LocalServer`
    and the Galera nodes of :mod:`mysql_state.cluster` (which add their wsrep options).

    Everything lives under ``base``: the error log, the pid file and a tmpdir of its own
    (made here, owned by ``user``), since servers side by side in /tmp collided on internal
    temp tables. Loopback only, no name resolution, utf8mb4. ``user``: ``--user=`` (as root).
    """
    tmpdir = os.path.join(base, "tmp")
    if not os.path.isdir(tmpdir):
        os.makedirs(tmpdir)
        if user is not None and user != "root":
            shutil.chown(tmpdir, user, user)
    cmd = [
        binary, "--no-defaults", f"--datadir={datadir}", f"--socket={socket_path}", f"--tmpdir={tmpdir}",
        f"--port={port}", "--bind-address=127.0.0.1", "--skip-name-resolve",
        "--character-set-server=utf8mb4", "--collation-server=utf8mb4_unicode_ci",
        f"--innodb-buffer-pool-size={buffer_pool}", f"--max-connections={max_connections}",
        f"--log-error={os.path.join(base, 'error.log')}", f"--pid-file={os.path.join(base, 'pid')}",
    ]
    return cmd + ([f"--user={user}"] if user is not None else [])


class LocalServer:
    """A throwaway ``mariadbd``/``mysqld`` in a temporary datadir; ``stop()`` removes it all.

    ``kill()`` and ``start()`` let fault tests crash and restart the same server and data.
    """

    def __init__(self, *extra_args: str, port: Optional[int] = None) -> None:
        binary = find_binary("mariadbd", "mysqld")
        if binary is None:
            raise RuntimeError(
                "no MySQL-compatible server found: install one (Debian/Ubuntu: "
                "apt-get install -y mariadb-server), or set MYSQL_URL=mysql://user:pw@host:port/"
            )
        self.binary: str = binary
        self.base = tempfile.mkdtemp(prefix="mysql-state-server-")
        self.datadir = os.path.join(self.base, "data")
        self.socket = os.path.join(self.base, "mysqld.sock")
        self.port = port or _free_port()
        self.extra_args = list(extra_args)
        self.proc: Optional[subprocess.Popen] = None
        self._init_datadir()
        self.start()
        atexit.register(self.stop)

    @property
    def url(self) -> str:
        return f"mysql://root@127.0.0.1:{self.port}/"

    def _init_datadir(self) -> None:
        init_datadir(self.binary, self.datadir, "root" if os.geteuid() == 0 else None)

    def start(self, timeout: float = 60.0) -> None:
        """Start (or restart after :meth:`kill`) the server on the same port and data."""
        cmd = server_command(self.binary, self.base, self.datadir, self.socket, self.port,
                             user="root" if os.geteuid() == 0 else None) + self.extra_args
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.binary} exited at start: {self.error_log()[-2000:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    if self._ready():
                        return
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError(f"{self.binary} did not accept connections within {timeout}s")

    def _ready(self) -> bool:
        import pymysql

        try:
            pymysql.connect(host="127.0.0.1", port=self.port, user="root", connect_timeout=2).close()
            return True
        except pymysql.err.Error:
            return False

    def error_log(self) -> str:
        return read_error_log(self.base)

    def kill(self) -> None:
        """SIGKILL the server (a crash, no clean shutdown)."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.base, ignore_errors=True)


def _container_url() -> str:
    from testcontainers.mysql import MySqlContainer

    container = MySqlContainer("mysql:8.0", username="root", password="test", dbname="agentscope")
    container.start()
    atexit.register(container.stop)
    host, port = container.get_container_host_ip(), container.get_exposed_port(3306)
    return f"mysql://root:test@{host}:{port}/"


def server_url() -> str:
    """A URL of a real server (see the module doc for the order); started once per process."""
    if "url" not in _CACHE:
        env = os.environ.get("MYSQL_URL")
        if env:
            _CACHE["url"] = env
        elif docker_available():
            _CACHE["url"] = _container_url()
        else:
            server = LocalServer()
            _CACHE["server"] = server
            _CACHE["url"] = server.url
    return _CACHE["url"]


def main(argv: Optional[list] = None) -> None:
    """``python -m mysql_state.server``: start a throwaway server, print its URL, and keep it
    until interrupted (Ctrl-C) or terminated (SIGTERM, a plain ``kill``); either way the server
    stops and its temporary data is removed."""
    import argparse

    argparse.ArgumentParser(
        prog="python -m mysql_state.server",
        description="Start a throwaway MySQL-compatible server (MYSQL_URL if set, else a private mariadbd/mysqld "
                    "in a temporary datadir), print its mysql:// URL on stdout, and keep it until Ctrl-C or "
                    "SIGTERM; the server and its data are removed then.").parse_args(argv)
    # SIGTERM as SystemExit: the atexit hooks (LocalServer.stop) run, so no orphan server is left
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))
    url = server_url()
    print(url, flush=True)
    try:
        signal.pause()
    except KeyboardInterrupt:
        pass


# ---- the embedded default server of the command line (`mysql-state server start`) -----------


def cache_dir() -> str:
    """Where the default server keeps its data: ``$XDG_CACHE_HOME/mysql-state`` (or ~/.cache)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "mysql-state", "server")


def default_server_url() -> Optional[str]:
    """The URL of the default server when it is running, else None."""
    d = cache_dir()
    try:
        with open(os.path.join(d, "url")) as f:
            url = f.read().strip()
        with open(os.path.join(d, "pid")) as f:
            os.kill(int(f.read().strip()), 0)
    except (OSError, ValueError):
        return None
    return url or None


class DefaultServer(LocalServer):
    """A server that outlives the command that started it, its data kept in :func:`cache_dir`."""

    def __init__(self) -> None:  # noqa: D107 - no temporary datadir, nothing started yet
        binary = find_binary("mariadbd", "mysqld")
        if binary is None:
            raise RuntimeError("no MySQL-compatible server found: install one (Debian/Ubuntu: "
                               "apt-get install -y mariadb-server), or pass --url")
        self.binary = binary
        self.base = cache_dir()
        self.datadir = os.path.join(self.base, "data")
        self.socket = os.path.join(self.base, "mysqld.sock")
        self.extra_args = []
        self.proc = None

    def start(self, timeout: float = 60.0) -> str:  # type: ignore[override]
        """Start it unless it runs; returns its URL."""
        running = default_server_url()
        if running:
            return running
        os.makedirs(self.base, exist_ok=True)
        if not os.path.isdir(self.datadir):
            self._init_datadir()
        self.port = _free_port()
        super().start(timeout)
        url = self.url
        with open(os.path.join(self.base, "url"), "w") as f:
            f.write(url)
        self.proc = None  # detached: it keeps running after this process exits
        return url

    def stop(self) -> bool:  # type: ignore[override]
        """Stop it (SIGTERM, a clean shutdown); False when it was not running."""
        if default_server_url() is None:
            return False
        with open(os.path.join(self.base, "pid")) as f:
            pid = int(f.read().strip())
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except OSError:
                break
            time.sleep(0.1)
        with contextlib.suppress(OSError):
            os.remove(os.path.join(self.base, "url"))
        return True


if __name__ == "__main__":
    main()
