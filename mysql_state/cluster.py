"""Throwaway multi-server set-ups on loopback, for tests and benchmarks past one server.

- :class:`GaleraCluster`: an N-node MariaDB Galera cluster (synchronous multi-primary),
  whose nodes can be killed, restarted (rejoining by IST/SST) and cut off from quorum.
- :class:`ReplicatedPair`: a primary and a read-only replica with MariaDB GTID
  asynchronous replication, whose replication can be paused to make the replica lag.

``python -m mysql_state.cluster galera 3`` (or ``... replica``) starts one and prints its
URLs until Ctrl-C.

Galera needs ``galera-4`` and ``rsync`` (``apt-get install galera-4 rsync``); the nodes run
as the ``mysql`` user when started as root (rsync SST drops privileges to ``nobody`` and
fails against a root-owned datadir). Ports are fixed, below the kernel's ephemeral range
(a joiner's rsync transfer failed on a port inside it): 4 per node from a base port chosen
at random in 20000-31999 and checked free, so that two runs at once rarely collide.
"""

from __future__ import annotations

import atexit
import os
import pwd
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from typing import Optional, Union

from .server import LocalServer, find_binary, init_datadir, read_error_log, server_command

GALERA_LIBS = ("/usr/lib/galera/libgalera_smm.so", "/usr/lib/libgalera_smm.so",
               "/usr/lib64/galera-4/libgalera_smm.so", "/usr/lib64/galera/libgalera_smm.so")
MISSING_HINT = "needs galera-4 and rsync (apt-get install galera-4 rsync)"
PORT_RANGE = (20000, 32000)
PORTS_PER_NODE = 4  # client, gcomm, IST, SST

# Failure detection below Galera's defaults (suspect 5 s, inactive 15 s, install 7.5 s) so that
# a killed node is evicted, and writes resume, within ~3-4 s; not lower: on a loaded 2-core box
# 2 s / 3 s made the two survivors of a kill time out installing their view (non-Primary).
# The cache is small (3 nodes/box).
DEFAULT_PROVIDER_OPTIONS = (
    "evs.suspect_timeout=PT3S;evs.inactive_timeout=PT6S;evs.install_timeout=PT6S;"
    "evs.keepalive_period=PT0.5S;evs.inactive_check_period=PT0.5S;gcache.size=64M"
)


class ClusterError(RuntimeError):
    """A cluster/pair could not be started (or did not reach the state waited for); ``node``:
    the index of the node it is about (its error log is in the message), None for the whole."""

    def __init__(self, message: str, node: Optional[int] = None) -> None:
        super().__init__(message)
        self.node = node


def galera_library() -> Optional[str]:
    for path in GALERA_LIBS:
        if os.path.exists(path):
            return path
    return None


def galera_missing() -> Optional[str]:
    """Why a Galera cluster cannot be started here, or None when it can."""
    missing = []
    if find_binary("mariadbd") is None:
        missing.append("mariadbd")
    if galera_library() is None:
        missing.append("libgalera_smm.so")
    if shutil.which("rsync") is None:
        missing.append("rsync")
    if find_binary("wsrep_sst_rsync") is None:
        missing.append("wsrep_sst_rsync")
    if missing:
        return f"{MISSING_HINT}; missing: {', '.join(missing)}"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("mysql")
        except KeyError:
            return "needs a 'mysql' user to run the Galera nodes as (root breaks rsync SST)"
    return None


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def pick_base_port(count: int, attempts: int = 200) -> int:
    """A random base port with ``count`` consecutive free ports, all below 32000."""
    low, high = PORT_RANGE
    for _ in range(attempts):
        base = random.randrange(low, high - count, 16)
        if all(_port_free(base + k) for k in range(count)):
            return base
    raise ClusterError(f"no {count} consecutive free ports found in {low}-{high}")


def _connect(port: int, timeout: float = 2.0, **kw):
    import pymysql

    return pymysql.connect(host="127.0.0.1", port=port, user="root", connect_timeout=timeout,
                           read_timeout=timeout + 3, write_timeout=timeout + 3, autocommit=True, **kw)


def _tail(text: str, lines: int = 40) -> str:
    return "\n".join(text.splitlines()[-lines:])


class GaleraNode:
    """One ``mariadbd`` of a :class:`GaleraCluster` (its datadir, ports and process)."""

    def __init__(self, index: int, base: str, port: int) -> None:
        self.index = index
        self.base = os.path.join(base, f"node{index}")
        self.datadir = os.path.join(self.base, "data")
        self.socket = os.path.join(self.base, "mysqld.sock")
        self.port, self.gcomm_port, self.ist_port, self.sst_port = port, port + 1, port + 2, port + 3
        self.proc: Optional[subprocess.Popen] = None
        self.stopped = False  # SIGSTOPped by isolate(method="sigstop")

    @property
    def url(self) -> str:
        return f"mysql://root@127.0.0.1:{self.port}/"

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def error_log(self) -> str:
        return read_error_log(self.base)


class GaleraCluster:
    """An N-node Galera cluster on 127.0.0.1 in a temporary directory; :meth:`stop` removes it.

    Nodes are numbered from 0 (``urls[i]``, ``kill(i)``, ``start(i)``); node 0 bootstraps
    the cluster. Every node listens on its own client port (``urls``); ``url_list`` names
    them all in one multi-host URL. Raises :class:`ClusterError` (with the error-log tails)
    when the cluster has not formed within ``timeout`` seconds.
    """

    def __init__(self, nodes: int = 3, base_port: Optional[int] = None, *, timeout: float = 60.0,
                 provider_options: str = DEFAULT_PROVIDER_OPTIONS, extra_args: tuple = ()) -> None:
        why = galera_missing()
        if why:
            raise ClusterError(why)
        binary = find_binary("mariadbd")
        assert binary is not None  # galera_missing() found it
        self.binary = binary
        self.library = galera_library()
        self.user = "mysql" if os.geteuid() == 0 else None
        self.base_port = base_port or pick_base_port(nodes * PORTS_PER_NODE)
        self.provider_options = provider_options
        self.extra_args = list(extra_args)
        self.base = tempfile.mkdtemp(prefix="mysql-state-galera-")
        os.chmod(self.base, 0o755)  # traversable by the mysql user
        self.nodes = [GaleraNode(i, self.base, self.base_port + PORTS_PER_NODE * i) for i in range(nodes)]
        atexit.register(self.stop)
        started = time.monotonic()
        try:
            self._init_datadirs()
            deadline = started + timeout
            self._spawn(0, bootstrap=True)
            self.wait_synced(0, deadline - time.monotonic(), size=1)
            for i in range(1, nodes):  # joiners at once (a busy donor makes the next one retry)
                self._spawn(i)
            for i in [*range(1, nodes), 0]:
                self.wait_synced(i, deadline - time.monotonic(), size=nodes, watch=range(nodes))
        except ClusterError as e:
            others = "".join(f"\n--- node {n.index} (port {n.port}, "
                             f"{'running' if n.running else 'exited'}) error log tail:\n{_tail(n.error_log(), 15)}"
                             for n in self.nodes if n.index != e.node)  # its own log is in the message
            self.stop()
            raise ClusterError(f"{e}{others}") from None
        except BaseException:
            self.stop()
            raise
        self.formation_seconds = time.monotonic() - started

    # ---- addresses -----------------------------------------------------------------------------

    @property
    def urls(self) -> list[str]:
        return [n.url for n in self.nodes]

    @property
    def ports(self) -> list[int]:
        return [n.port for n in self.nodes]

    @property
    def url_list(self) -> str:
        return "mysql://root@" + ",".join(f"127.0.0.1:{n.port}" for n in self.nodes) + "/"

    def connect(self, i: int, timeout: float = 5.0, **kw):
        """A pymysql connection (root, autocommit) to node ``i``."""
        return _connect(self.nodes[i].port, timeout, **kw)

    # ---- life cycle ----------------------------------------------------------------------------

    def _init_datadirs(self) -> None:
        first = self.nodes[0]
        os.makedirs(first.base)
        init_datadir(self.binary, first.datadir, self.user)
        for node in self.nodes[1:]:  # the same system tables; a joiner gets SST anyway
            os.makedirs(node.base)
            shutil.copytree(first.datadir, node.datadir, symlinks=True)
        if self.user:
            for node in self.nodes:
                subprocess.run(["chown", "-R", f"{self.user}:{self.user}", node.base], check=True)

    def _command(self, node: GaleraNode, bootstrap: bool, start_position: Optional[str] = None) -> list[str]:
        gcomm = ",".join(f"127.0.0.1:{n.gcomm_port}" for n in self.nodes)
        options = (f"gmcast.listen_addr=tcp://127.0.0.1:{node.gcomm_port};"
                   f"ist.recv_addr=127.0.0.1:{node.ist_port};{self.provider_options}")
        cmd = server_command(self.binary, node.base, node.datadir, node.socket, node.port, buffer_pool="128M",
                             max_connections=300, user=self.user or None) + [
            "--binlog-format=ROW", "--innodb-autoinc-lock-mode=2", "--default-storage-engine=InnoDB",
            "--wsrep-on=ON", f"--wsrep-provider={self.library}",
            f"--wsrep-cluster-name=mysql-state-{self.base_port}",
            f"--wsrep-cluster-address=gcomm://{gcomm}",
            f"--wsrep-node-address=127.0.0.1:{node.gcomm_port}", f"--wsrep-node-name=node{node.index}",
            f"--wsrep-provider-options={options}",
            f"--wsrep-sst-receive-address=127.0.0.1:{node.sst_port}", "--wsrep-sst-method=rsync",
        ]
        if start_position:
            cmd.append(f"--wsrep-start-position={start_position}")
        if bootstrap:
            cmd.append("--wsrep-new-cluster")
        return cmd + self.extra_args

    def _spawn(self, i: int, bootstrap: bool = False, start_position: Optional[str] = None) -> None:
        node = self.nodes[i]
        node.proc = subprocess.Popen(self._command(node, bootstrap, start_position),
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        node.stopped = False

    def _recover_position(self, i: int) -> Optional[str]:
        """``mariadbd --wsrep-recover``: the node's last committed uuid:seqno after a crash, so
        that it can rejoin by IST (a delta from a peer's gcache) instead of a full SST."""
        node = self.nodes[i]
        log = os.path.join(node.base, "recover.log")
        cmd = self._command(node, False)
        cmd = [c for c in cmd if not c.startswith("--log-error=")]
        cmd += ["--wsrep-recover", f"--log-error={log}"]
        try:
            subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)
            with open(log, errors="replace") as f:
                text = f.read()
        except (OSError, subprocess.TimeoutExpired):
            return None
        for line in reversed(text.splitlines()):
            if "WSREP: Recovered position:" in line:
                position = line.split("Recovered position:")[1].strip()
                return None if position.endswith(":-1") else position
        return None

    def start(self, i: int, timeout: float = 60.0) -> None:
        """Restart node ``i`` after :meth:`kill` (recovering its position first, so that it
        rejoins by IST when the peers' gcache still holds what it missed) and wait until it is
        Synced in a cluster of every running node."""
        if self.nodes[i].running:
            raise ClusterError(f"node {i} is running", node=i)
        position = self._recover_position(i)
        self._spawn(i, start_position=position)
        self.wait_synced(i, timeout, size=sum(n.running for n in self.nodes))

    def kill(self, i: int) -> None:
        """SIGKILL node ``i`` (a crash: no clean shutdown, no goodbye to its peers)."""
        node = self.nodes[i]
        if node.running:
            assert node.proc is not None  # running: it has its process
            if node.stopped:
                node.proc.send_signal(signal.SIGCONT)
            node.proc.send_signal(signal.SIGKILL)
            node.proc.wait()
        node.stopped = False

    def status(self, i: int, timeout: float = 2.0) -> dict:
        """Node ``i``'s ``wsrep_%`` status variables (names lower-case)."""
        con = _connect(self.nodes[i].port, timeout)
        try:
            with con.cursor() as cur:
                cur.execute("SHOW GLOBAL STATUS LIKE 'wsrep\\_%'")
                return {k.lower(): v for k, v in cur.fetchall()}
        finally:
            con.close()

    def wait_synced(self, i: int, timeout: float = 60.0, size: Optional[int] = None,
                    watch: Optional[range] = None) -> dict:
        """Wait until node ``i`` is Synced, ready, in a primary component of ``size`` nodes
        (default: every node of the cluster); its status. :class:`ClusterError` with the
        error-log tail otherwise, at once if node ``i`` (or one of ``watch``) has exited."""
        size = len(self.nodes) if size is None else size
        node = self.nodes[i]
        deadline = time.monotonic() + max(timeout, 0.0)
        last: object = "no answer"
        while True:
            for other in [i, *(watch or ())]:
                n = self.nodes[other]
                if n.proc is None or n.proc.poll() is not None:
                    raise ClusterError(f"node {other} (port {n.port}) is not running "
                                       f"(exit code {n.proc and n.proc.returncode}):\n"
                                       f"{_tail(n.error_log())}", node=other)
            try:
                st = self.status(i)
                last = {k: st.get(k) for k in ("wsrep_local_state_comment", "wsrep_cluster_size",
                                               "wsrep_cluster_status", "wsrep_ready")}
                if (st.get("wsrep_local_state_comment") == "Synced" and st.get("wsrep_ready") == "ON"
                        and st.get("wsrep_cluster_status") == "Primary"
                        and int(st.get("wsrep_cluster_size", 0)) == size):
                    return st
            except Exception as e:  # not up yet
                last = e
            if time.monotonic() >= deadline:
                raise ClusterError(
                    f"node {i} (port {node.port}) not Synced in a cluster of {size} within "
                    f"{timeout:.0f}s (last seen: {last}); error log tail:\n{_tail(node.error_log())}", node=i)
            time.sleep(0.2)

    # ---- losing quorum -------------------------------------------------------------------------

    def isolate(self, i: int, timeout: float = 30.0) -> None:
        """Cut node ``i`` off from its peers (``gmcast.isolate=1``): it drops every group
        connection and stays in a non-primary component, answering 1047 (ER_UNKNOWN_COM_ERROR,
        "WSREP has not yet prepared node for application use") to queries; the others go on
        as a primary component of the rest. Returns once node ``i`` is non-primary."""
        con = _connect(self.nodes[i].port, 5)
        try:
            with con.cursor() as cur:
                cur.execute("SET GLOBAL wsrep_provider_options = 'gmcast.isolate=1'")
        finally:
            con.close()
        deadline = time.monotonic() + timeout
        while True:
            st = self.status(i)
            if st.get("wsrep_cluster_status") != "Primary" and st.get("wsrep_ready") == "OFF":
                return
            if time.monotonic() > deadline:
                raise ClusterError(f"node {i} still {st.get('wsrep_cluster_status')} after isolate", node=i)
            time.sleep(0.2)

    def rejoin(self, i: int, timeout: float = 60.0) -> None:
        """Undo :meth:`isolate`: reconnect node ``i`` and wait until it is Synced again."""
        con = _connect(self.nodes[i].port, 5)
        try:
            with con.cursor() as cur:
                cur.execute("SET GLOBAL wsrep_provider_options = 'gmcast.isolate=0'")
        finally:
            con.close()
        self.wait_synced(i, timeout, size=sum(n.running for n in self.nodes))

    def stop(self) -> None:
        """Stop every node (terminate, then kill after 30 s) and remove all the data."""
        for node in self.nodes:
            if node.running:
                assert node.proc is not None  # running: it has its process
                if node.stopped:
                    node.proc.send_signal(signal.SIGCONT)
                node.proc.terminate()
        for node in self.nodes:
            if node.proc is not None:
                try:
                    node.proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    node.proc.kill()
                    node.proc.wait()
        shutil.rmtree(self.base, ignore_errors=True)

    def __enter__(self) -> "GaleraCluster":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


class ReplicatedPair:
    """A primary and a read-only replica (MariaDB GTID asynchronous replication).

    ``primary_url`` is a non-admin writer (SELECT, INSERT, UPDATE, DELETE, CREATE, ALTER,
    INDEX on the databases matching ``writer_databases``); ``replica_url`` a non-admin reader
    (SELECT only: root would ignore ``read_only``); ``primary_root_url``/``replica_root_url``
    are root. :meth:`pause_replication` stops the replica's SQL thread (it keeps fetching
    the binlog, applies nothing) so that a test can make it lag deterministically.
    """

    READER = ("reader", "reader-pw")
    WRITER = ("writer", "writer-pw")
    REPL = ("repl", "repl-pw")

    def __init__(self, writer_databases: tuple = ("t\\_%", "agentscope%", "mysql\\_state%"),
                 timeout: float = 60.0) -> None:
        self.primary = LocalServer("--server-id=1", "--log-bin=mysql-bin", "--binlog-format=ROW")
        try:
            self.replica = LocalServer("--server-id=2", "--read-only", "--relay-log=relay-bin",
                                       "--log-bin=mysql-bin", "--log-slave-updates")
        except BaseException:
            self.primary.stop()
            raise
        atexit.register(self.stop)
        try:
            self._setup(writer_databases, timeout)
        except BaseException:
            self.stop()
            raise

    def _root(self, server: LocalServer):
        return _connect(server.port, 5)

    def _setup(self, writer_databases: tuple, timeout: float) -> None:
        (ru, rp), (wu, wp), (lu, lp) = self.READER, self.WRITER, self.REPL
        con = self._root(self.primary)
        with con.cursor() as cur:
            cur.execute(f"CREATE USER '{lu}'@'%' IDENTIFIED BY '{lp}'")
            cur.execute(f"GRANT REPLICATION SLAVE ON *.* TO '{lu}'@'%'")
            cur.execute(f"CREATE USER '{ru}'@'%' IDENTIFIED BY '{rp}'")
            cur.execute(f"GRANT SELECT ON *.* TO '{ru}'@'%'")
            cur.execute(f"CREATE USER '{wu}'@'%' IDENTIFIED BY '{wp}'")
            for db in writer_databases:
                cur.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE, CREATE, ALTER, INDEX "
                            f"ON `{db}`.* TO '{wu}'@'%'")
        con.close()
        # The replica starts from an empty gtid_slave_pos: it replays the primary's whole
        # binlog, users included.
        con = self._root(self.replica)
        with con.cursor() as cur:
            cur.execute(f"CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT={self.primary.port}, "
                        f"MASTER_USER='{lu}', MASTER_PASSWORD='{lp}', MASTER_USE_GTID=slave_pos, "
                        "MASTER_CONNECT_RETRY=1")
            cur.execute("START SLAVE")
        con.close()
        self.wait_caught_up(timeout)

    @property
    def primary_url(self) -> str:
        u, p = self.WRITER
        return f"mysql://{u}:{p}@127.0.0.1:{self.primary.port}/"

    @property
    def replica_url(self) -> str:
        u, p = self.READER
        return f"mysql://{u}:{p}@127.0.0.1:{self.replica.port}/"

    @property
    def primary_root_url(self) -> str:
        return self.primary.url

    @property
    def replica_root_url(self) -> str:
        return self.replica.url

    def gtid(self) -> str:
        """The primary's current binlog GTID position (``@@gtid_binlog_pos``)."""
        con = self._root(self.primary)
        try:
            with con.cursor() as cur:
                cur.execute("SELECT @@gtid_binlog_pos")
                return cur.fetchone()[0]
        finally:
            con.close()

    def wait_caught_up(self, timeout: float = 30.0) -> None:
        """Wait until the replica has applied everything the primary has committed so far."""
        gtid = self.gtid()
        con = self._root(self.replica)
        try:
            with con.cursor() as cur:
                cur.execute("SELECT MASTER_GTID_WAIT(%s, %s)", (gtid, timeout))
                if cur.fetchone()[0] != 0:
                    cur.execute("SHOW SLAVE STATUS")
                    cols = [d[0] for d in cur.description]
                    row = dict(zip(cols, cur.fetchone() or ()))
                    raise ClusterError(
                        f"replica not at {gtid} within {timeout}s: IO {row.get('Slave_IO_Running')} "
                        f"SQL {row.get('Slave_SQL_Running')} {row.get('Last_IO_Error')} "
                        f"{row.get('Last_SQL_Error')}")
        finally:
            con.close()

    def pause_replication(self) -> None:
        """Stop applying on the replica (``STOP SLAVE SQL_THREAD``); it keeps fetching."""
        con = self._root(self.replica)
        with con.cursor() as cur:
            cur.execute("STOP SLAVE SQL_THREAD")
        con.close()

    def resume_replication(self) -> None:
        con = self._root(self.replica)
        with con.cursor() as cur:
            cur.execute("START SLAVE")
        con.close()

    def stop(self) -> None:
        for server in (getattr(self, "replica", None), self.primary):
            if server is not None:
                server.stop()

    def __enter__(self) -> "ReplicatedPair":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def main(argv: Optional[list] = None) -> int:
    """``python -m mysql_state.cluster galera [N] | replica``: start one, print its URLs,
    wait for Ctrl-C (or SIGTERM), then stop it and remove its data."""
    args = list(sys.argv[1:] if argv is None else argv)
    kind = args[0] if args else "galera"
    thing: Union[GaleraCluster, ReplicatedPair]
    signal.signal(signal.SIGINT, signal.default_int_handler)  # even when started in background
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        if kind == "galera":
            n = int(args[1]) if len(args) > 1 else 3
            t0 = time.monotonic()
            thing = GaleraCluster(n)
            print(f"galera cluster of {n} formed in {time.monotonic() - t0:.1f}s", flush=True)
            for i, url in enumerate(thing.urls):
                print(f"node {i}: {url}", flush=True)
            print(f"all:    {thing.url_list}", flush=True)
        elif kind in ("replica", "replicated", "pair"):
            thing = ReplicatedPair()
            print(f"primary (writer): {thing.primary_url}", flush=True)
            print(f"replica (reader): {thing.replica_url}", flush=True)
            print(f"primary (root):   {thing.primary_root_url}", flush=True)
            print(f"replica (root):   {thing.replica_root_url}", flush=True)
        else:
            print("usage: python -m mysql_state.cluster galera [N] | replica", file=sys.stderr)
            return 2
    except ClusterError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print("Ctrl-C to stop", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        thing.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
