"""A TCP proxy between the store and the real server that can cut connections on cue.

It forwards bytes unchanged and parses only the client's MySQL packet headers, so it can
drop every connection (a network cut, like ``KILL CONNECTION`` or ``wait_timeout``), or cut
a connection exactly around a ``COMMIT``: ``"before"`` (the server never sees it) or
``"after"`` (the server commits, the client never hears back). It can also answer one
statement with a server error in the server's place (:meth:`FaultProxy.fail_next`): the server
never sees that statement, as when a server refuses one before running it.
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Optional


class FaultProxy:
    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.port = self.listener.getsockname()[1]
        self.cut_on_commit: Optional[str] = None  # None | "before" | "after"
        #: While set, nothing is forwarded either way: a host that froze (SIGSTOP, a VM paused)
        #: with its connections open, and that accepts new ones but never greets them.
        self.frozen = False
        self.commits_cut = 0
        self.cuts = 0
        #: (errno, message, marker): the next statement whose text holds ``marker`` is answered
        #: with that error by the proxy, not forwarded (see fail_next); None once used.
        self.failing: Optional[tuple[int, str, bytes]] = None
        self.failed = 0
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        self._lock = threading.Lock()
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            for s in (client, server):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            pair = (client, server)
            with self._lock:
                self._pairs.append(pair)
            state = {"swallow_reply": False}
            threading.Thread(target=self._client_to_server, args=(pair, state), daemon=True).start()
            threading.Thread(target=self._server_to_client, args=(pair, state), daemon=True).start()

    def _client_to_server(self, pair, state) -> None:
        client, server = pair
        buf = b""
        try:
            while True:
                data = client.recv(65536)
                if not data:
                    break
                self._hold()
                buf += data
                out = b""
                while len(buf) >= 4:
                    length = int.from_bytes(buf[:3], "little")
                    if len(buf) < 4 + length:
                        break
                    packet, buf = buf[: 4 + length], buf[4 + length :]
                    failing = self.failing
                    if failing and packet[4:5] == b"\x03" and failing[2] in packet[5:]:
                        self.failing = None
                        self.failed += 1
                        server.sendall(out)
                        out = b""
                        client.sendall(_error_packet(packet[3] + 1, failing[0], failing[1]))
                        continue
                    if self.cut_on_commit and packet[4:5] == b"\x03" and packet[5:].strip().upper().endswith(b"COMMIT"):
                        mode, self.cut_on_commit = self.cut_on_commit, None
                        self.commits_cut += 1
                        if mode == "before":
                            server.sendall(out)
                            self._close(pair)
                            return
                        state["swallow_reply"] = True  # forward it; drop the answer and cut
                    out += packet
                if out:
                    server.sendall(out)
        except OSError:
            pass
        self._close(pair)

    def _server_to_client(self, pair, state) -> None:
        client, server = pair
        try:
            while True:
                data = server.recv(65536)
                if not data:
                    break
                self._hold()
                if state["swallow_reply"]:
                    self._close(pair)
                    return
                client.sendall(data)
        except OSError:
            pass
        self._close(pair)

    def fail_next(self, errno: int, message: str, marker: bytes) -> None:
        """Answer the next statement (COM_QUERY) whose text contains ``marker`` with server
        error ``errno`` instead of forwarding it: the server never runs it."""
        self.failing = (errno, message, marker)

    def _hold(self) -> None:
        """Wait while the proxy is frozen (what arrived meanwhile is forwarded after)."""
        while self.frozen and not self._closed:
            time.sleep(0.01)

    def _close(self, pair) -> None:
        for s in pair:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()
        with self._lock:
            if pair in self._pairs:
                self._pairs.remove(pair)

    def cut_all(self) -> int:
        """Drop every open connection; returns how many."""
        with self._lock:
            pairs = list(self._pairs)
        for pair in pairs:
            self._close(pair)
        self.cuts += len(pairs)
        return len(pairs)

    def close(self) -> None:
        self._closed = True
        self.listener.close()
        self.cut_all()


def _error_packet(sequence: int, errno: int, message: str, sqlstate: str = "HY000") -> bytes:
    """A MySQL ERR packet (0xFF, the error number, ``#`` and the SQL state, the message)."""
    payload = b"\xff" + errno.to_bytes(2, "little") + b"#" + sqlstate.encode() + message.encode()
    return len(payload).to_bytes(3, "little") + bytes([sequence & 0xFF]) + payload
