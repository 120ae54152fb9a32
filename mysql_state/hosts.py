"""Several hosts, one store: the host list in order of preference, and failover through it.

A store talks to one host at a time: the first of its list that answers. :class:`HostPools`
holds, per host, the DBUtils pools of connections to that host (a pool per host: a pooled
connection that is re-opened in place stays on its host) and when the host was last found
down. The :class:`~mysql_state.pool.Connector` asks it which host to use for each call
(:meth:`HostPools.order`) and tells it when a host did not answer (:meth:`HostPools.mark_down`):
the call is then retried on the next host of the list (nothing was committed yet), and the
host is skipped by new calls for a back-off (1 s, doubling up to 5 s) after which it is
tried first again, so a recovered preferred host is used again for new connections.

"Did not answer" means: the connection could not be made (2002, 2003), a re-open of a lost
connection failed, or the server said it cannot serve (1047: a Galera node without quorum,
"WSREP has not yet prepared node for application use").

What ``hosts=[...]`` holds for :class:`~mysql_state.store.MysqlAgentStateStore` users who
build their own pools: one entry per host, in order of preference, each either a pool (with
``.connection()``, e.g. a DBUtils ``PooledDB``), used for reads and writes, or a
``(write_pool, read_pool)`` pair.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any, Optional, Sequence

__all__ = ["Host", "HostPools", "RETRY_AFTER", "RETRY_AFTER_MAX"]

#: Seconds a host that did not answer is skipped by new calls (doubling per failure).
RETRY_AFTER = 1.0
RETRY_AFTER_MAX = 5.0


@dataclass(eq=False)
class Host:
    """One host: its pools, a name for messages (never a password), and its health."""

    pool: Any
    read_pool: Any
    name: str = "host"
    failures: int = 0  # consecutive times it did not answer
    down_until: float = 0.0  # time.monotonic() before which new calls skip it


class HostPools:
    """The hosts of one store in order of preference (see the module's docstring).

    ``skip_down=True`` (the replicas): a host in its back-off is not offered at all, so
    that a read goes elsewhere at once instead of waiting on a dead replica; the primary
    hosts are all offered, the ones in back-off last, since there is nowhere else to go.
    ``spread=True`` (the replicas): successive calls start at successive hosts.
    """

    def __init__(self, hosts: Sequence[Host], *, skip_down: bool = False, spread: bool = False) -> None:
        if not hosts:
            raise ValueError("hosts must name at least one host (pool)")
        self.hosts = list(hosts)
        self.skip_down = skip_down
        self.spread = spread and len(self.hosts) > 1
        self._any_down = False
        self._next = 0
        self._lock = threading.Lock()

    @classmethod
    def of(cls, entries: Sequence[Any], names: Optional[Sequence[str]] = None, **kw: Any) -> "HostPools":
        """From ``hosts=[...]`` entries: pools, or ``(write_pool, read_pool)`` pairs."""
        if isinstance(entries, (str, bytes)) or not isinstance(entries, Sequence):
            raise TypeError(f"hosts must be a list of pools (one per host), got {type(entries).__name__}")
        out = []
        for i, entry in enumerate(entries):
            write, read = entry if isinstance(entry, tuple) and len(entry) == 2 else (entry, entry)
            for p in (write, read):
                if p is None or not callable(getattr(p, "connection", None)):
                    raise TypeError(f"hosts[{i}] must be a pool with .connection() (or a (write_pool, "
                                    f"read_pool) pair), got {type(p).__name__}")
            out.append(Host(write, read, names[i] if names else f"hosts[{i}]"))
        return cls(out, **kw)

    @property
    def first(self) -> Host:
        return self.hosts[0]

    def pools(self) -> list:
        """Every distinct pool of every host."""
        seen: dict = {}
        for h in self.hosts:
            seen.setdefault(id(h.pool), h.pool)
            seen.setdefault(id(h.read_pool), h.read_pool)
        return list(seen.values())

    def order(self) -> list[Host]:
        """The hosts to try for a new call, best first: the ones not in back-off in order of
        preference (rotated when spreading), then (unless ``skip_down``) the others."""
        hosts = self.hosts
        if self.spread:
            with self._lock:
                k = self._next = (self._next + 1) % len(hosts)
            hosts = hosts[k:] + hosts[:k]
        if not self._any_down:
            return hosts
        now = time.monotonic()
        up = [h for h in hosts if h.down_until <= now]
        if self.skip_down:
            return up
        return up + [h for h in hosts if h.down_until > now]

    def mark_down(self, host: Host) -> None:
        """``host`` did not answer: new calls skip it for a back-off that grows per failure."""
        with self._lock:
            host.failures += 1
            host.down_until = time.monotonic() + min(RETRY_AFTER_MAX, RETRY_AFTER * 2 ** (host.failures - 1))
            self._any_down = True

    def mark_up(self, host: Host) -> None:
        """``host`` answered: it is preferred again at once (cheap when it never failed)."""
        if host.failures:
            with self._lock:
                host.failures = 0
                host.down_until = 0.0
                self._any_down = any(h.failures for h in self.hosts)


def host_name(kwargs: dict) -> str:
    """``host:port`` (or the socket) of pymysql connect kwargs, for messages."""
    if kwargs.get("unix_socket"):
        return str(kwargs["unix_socket"])
    return f"{kwargs.get('host', 'localhost')}:{kwargs.get('port', 3306)}"
