"""What a store is wired from: its pools, its hosts, its replicas and its metrics.

``MysqlAgentStateStore(pool, ...)`` and ``MysqlAgentStateStore.from_url(url, ...)`` differ
only in where the pools come from: given by the caller (never closed by the store) or made
from the URL (owned, closed by ``close()``). Both describe them as :class:`Parts`
(:func:`given`, :func:`from_url`), and :meth:`Parts.connect` assembles the connection floor
of one store, a :class:`Wiring`:

* the primary's :class:`~mysql_state.pool.Connector` over the host list (failover,
  :mod:`mysql_state.hosts`);
* with replicas, a second connector over them, behind a :class:`~mysql_state.replicas.Router`
  given to the primary's connector (reads by consistency, and the GTID of each write recorded
  for the session the write names);
* the store's :class:`~mysql_state.metrics.Metrics`, the primary connector's observer.

Nothing here opens a connection: pools connect on first use, and the store's set-up
transaction is its first.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

from .hosts import HostPools
from .metrics import Metrics
from .checks import check_int, check_seconds
from .pool import DEFAULT_POOL_SIZE, DEFAULT_POOL_TIMEOUT, DEFAULT_RETRIES, Connector, make_host_pools
from .replicas import DEFAULT_SESSION_WAIT, Router

__all__ = ["Parts", "Wiring", "given", "from_url"]


@dataclass
class Wiring:
    """The connection floor of one store: the primary's connector (its router and observer
    attached), the metrics it reports to, and the connections per pool (None for a given
    pool; the async store sizes its threads to it)."""

    db: Connector
    metrics: Metrics
    pool_size: Optional[int]


@dataclass
class Parts:
    """The pools of one store, not connected yet (see the module docstring)."""

    pool: Any = None
    read_pool: Any = None
    hosts: Optional[HostPools] = None
    replicas: Optional[HostPools] = None
    owned: bool = False  # the store made the pools: close() closes them
    pool_size: Optional[int] = None
    pool_timeout: float = DEFAULT_POOL_TIMEOUT
    retries: int = DEFAULT_RETRIES
    session_wait: float = DEFAULT_SESSION_WAIT

    def connect(self, name: str, guard: Optional[Callable[[Any, str, bool], None]] = None) -> Wiring:
        """The connectors of a store named ``name`` (for messages), its router and metrics;
        ``guard`` (the primary's ``Connector.guard``) is called before every call."""
        router = None
        if self.replicas is not None:
            replica_db = Connector(None, hosts=self.replicas, reconnects=0,
                                   name=f"the replicas of {name.removeprefix('the ')}", owned=self.owned,
                                   pool_size=self.pool_size, pool_timeout=self.pool_timeout, retries=self.retries)
            router = Router(replica_db, self.session_wait)
        metrics = Metrics()
        try:
            db = Connector(self.pool, read_pool=self.read_pool, name=name, hosts=self.hosts, router=router,
                           observer=metrics, guard=guard, owned=self.owned, pool_size=self.pool_size,
                           pool_timeout=self.pool_timeout, retries=self.retries)
        except BaseException:
            if router is not None:
                router.close()
            raise
        return Wiring(db, metrics, self.pool_size)


def given(
    pool: Any,
    hosts: Optional[Sequence[Any]],
    replicas: Optional[Sequence[Any]],
    *,
    pool_timeout: float = DEFAULT_POOL_TIMEOUT,
    retries: int = DEFAULT_RETRIES,
    session_wait: float = DEFAULT_SESSION_WAIT,
) -> Parts:
    """The parts of a store over pools the caller made (and closes).

    ``hosts``: one pool (or ``(write_pool, read_pool)`` pair) per host, in order of
    preference, ``pool`` (if given) first; ``replicas``: one read pool per replica.
    """
    check_seconds("session_wait", session_wait)
    host_list = None
    if hosts is not None and not isinstance(hosts, HostPools):
        entries = list(hosts) if not isinstance(hosts, (str, bytes)) else hosts
        if pool is not None and all(e is not pool and e != (pool, pool) for e in entries):
            entries = [(pool, pool), *entries]
        host_list = HostPools.of(entries)
    elif hosts is not None:
        host_list = hosts
    replica_pools = None
    if replicas is not None and not isinstance(replicas, HostPools):
        replica_pools = HostPools.of(replicas, [f"replicas[{i}]" for i in range(len(replicas))],
                                     skip_down=True, spread=True)
    elif replicas is not None:
        replica_pools = replicas
    return Parts(pool=pool, hosts=host_list, replicas=replica_pools, pool_timeout=pool_timeout, retries=retries,
                 session_wait=session_wait)


def from_url(url: str, replica_urls: Optional[Sequence[str]] = None, *, pool_size: int = DEFAULT_POOL_SIZE,
             pool_timeout: float = DEFAULT_POOL_TIMEOUT, retries: int = DEFAULT_RETRIES,
             session_wait: float = DEFAULT_SESSION_WAIT, **options: Any) -> tuple[Parts, Optional[str]]:
    """The parts of a store with pools of its own made from ``url`` (a host list is an order
    of preference) and ``replica_urls``; and the URL's database. ``options`` (timeouts,
    pymysql keywords) go to :func:`~mysql_state.pool.make_pools`. Options are checked before
    any pool is made."""
    check_int("retries", retries, 0)
    check_seconds("pool_timeout", pool_timeout)
    check_seconds("session_wait", session_wait)
    if isinstance(replica_urls, str):
        replica_urls = [replica_urls]
    hosts, database = make_host_pools(url, pool_size=pool_size, **options)
    replicas = None
    if replica_urls is not None:  # pools open no connection until used
        made = [make_host_pools(u, reads_only=True, pool_size=pool_size, **options)[0] for u in replica_urls]
        replicas = HostPools([h for m in made for h in m.hosts], skip_down=True, spread=True)
    parts = Parts(hosts=hosts, replicas=replicas, owned=True, pool_size=pool_size, pool_timeout=pool_timeout,
                  retries=retries, session_wait=session_wait)
    return parts, database
