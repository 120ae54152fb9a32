"""Counters of one store (``store.metrics()``), and their Prometheus view (``register``).

The kinds of a list save are the words of ``save_list_report``: ``unchanged``, ``append``
(``append_list`` counts here), ``suffix``, ``shrink`` (the list got shorter: a compaction),
``rewrite``, ``clear``; single values count as ``value``. Retries by error number come from the
connector's :class:`~mysql_state.pool.Stats`. Counting is a few integer additions under a lock
per operation. A :class:`Metrics` is the connector's observer (``Connector(...,
observer=metrics)``, see :class:`~mysql_state.pool.Observer`): the connector tells it the
latency of each call and the wait for each pooled connection; nothing is wrapped.

The rules, one each:

* ``errors`` counts every error a database call raised, by class, including those raised
  while its rows are decoded (``CorruptStateError``, ``DecryptionError``: a wrong key in
  production shows here), but not a stale version.
* ``stale_conflicts`` counts versioned saves refused because another version is stored,
  whether the call returns ``UNVERSIONED`` (``save_if_version``, ``save_list_if_version``) or
  raises :class:`~mysql_state.errors.StaleStateError` (``save_many``): a compare-and-set
  losing is an answer, not a failure, so it is never in ``errors``.
* ``bytes_written`` counts the plaintext JSON of what a save wrote, values and list items
  alike, on plain and encrypted stores (the size of the state, not of its envelope).
* ``saves`` counts each key a call saved: ``save_many`` and ``append_lists`` one save per
  list (an ``append`` for each list given items) and one ``value`` per value. Saves made
  through ``transaction(fn)`` count the same, once it commits (a transaction rolled back
  counts none; a run again after a deadlock, its last run's); a ``maintenance=True`` write is
  not a save (it is the operator's, as it is not the session's activity).

``prometheus_client`` is optional (the extra ``mysql-state[metrics]``): the store itself never
needs it, and a deployment that does not scrape Prometheus should not install it.
"""

from __future__ import annotations

import inspect
import threading
import weakref
from typing import Any, Optional, Union

from .errors import StaleStateError

__all__ = ["Metrics", "KINDS", "register", "store_label"]

KINDS = ("unchanged", "append", "suffix", "shrink", "rewrite", "clear", "value")


class Metrics:
    """Thread-safe counters; :meth:`snapshot` returns them as a plain dict."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.saves = dict.fromkeys(KINDS, 0)
        self.rows_written = 0
        self.bytes_written = 0
        self.reads = 0
        self.writes = 0
        self.errors: dict[str, int] = {}
        self.stale_conflicts = 0
        self.pool_wait_seconds = 0.0
        self.latency: dict[str, list] = {}  # op -> [count, total seconds, max seconds]

    def saved(self, kind: str, rows: int, nbytes: int) -> None:
        """One save of ``kind`` that wrote ``rows`` rows of ``nbytes`` bytes of plaintext JSON."""
        with self._lock:
            self.saves[kind] = self.saves.get(kind, 0) + 1
            self.rows_written += rows
            self.bytes_written += nbytes

    def stale(self) -> None:
        """A versioned save found another version and returned ``UNVERSIONED``."""
        with self._lock:
            self.stale_conflicts += 1

    def ran(self, what: str, write: bool, seconds: float, error: Optional[BaseException]) -> None:
        """The connector's observer: one call of operation ``what`` (its first word) ended."""
        op = what.split(" ", 1)[0]
        with self._lock:
            if write:
                self.writes += 1
            else:
                self.reads += 1
            lat = self.latency.setdefault(op, [0, 0.0, 0.0])
            lat[0] += 1
            lat[1] += seconds
            lat[2] = max(lat[2], seconds)
            if isinstance(error, StaleStateError):
                self.stale_conflicts += 1
            elif error is not None:
                name = type(error).__name__
                self.errors[name] = self.errors.get(name, 0) + 1

    def checked_out(self, seconds: float) -> None:
        """The connector's observer: a checkout waited ``seconds`` for a pooled connection."""
        with self._lock:
            self.pool_wait_seconds += seconds

    def snapshot(self, stats: Any) -> dict:
        """Every counter, with ``stats`` (the connector's) for retries."""
        with self._lock:
            return {
                "saves": dict(self.saves),
                "rows_written": self.rows_written,
                "bytes_written": self.bytes_written,
                "reads": self.reads,
                "writes": self.writes,
                "retries": stats.retries(),
                "reconnects": stats.reconnects,
                "errors": dict(self.errors),
                "stale_conflicts": self.stale_conflicts,
                "pool_wait_seconds": self.pool_wait_seconds,
                "latency": {op: {"count": c, "sum_seconds": s, "max_seconds": m}
                            for op, (c, s, m) in self.latency.items()},
            }


def store_label(store: Any) -> str:
    """The default ``store`` label of a store's series: ``<database>.<table>``."""
    return f"{store.database_name}.{store.table_name}"


def register(store: Any, registry: Any = None, *, name: Optional[str] = None) -> Any:
    """Expose ``store.metrics()`` to Prometheus (``pip install 'mysql-state[metrics]'``):
    ``mysql_state_saves_total{store="agentscope.agentscope_sessions",kind="shrink"}``,
    ``mysql_state_rows_written_total{store=...}``, ...

    Every series has a ``store`` label, ``name`` (default ``<database>.<table>``), so several
    stores share one registry: the stores of one registry are served by one collector (the
    one returned), each store once under its own label; a second store under a label taken
    is a ValueError (give it ``name=``), and so is a store registered again under another
    label (its counters would be exposed twice, and summed twice). An
    ``AsyncMysqlAgentStateStore`` is registered as the store it runs (its ``sync``: the same
    counters). ``registry`` defaults to prometheus_client's global one. A store that is
    garbage-collected drops out.

    >>> from prometheus_client import CollectorRegistry, generate_latest
    >>> from mysql_state import metrics
    >>> registry = CollectorRegistry()  # default: prometheus_client's global one
    >>> _ = metrics.register(store, registry)
    >>> store.save("alice", "metrics-1", "plan", 1)
    >>> [line for line in generate_latest(registry).decode().splitlines()
    ...  if line.startswith('mysql_state_saves_total{kind="value"')]
    ['mysql_state_saves_total{kind="value",store="..."} 1.0']
    """
    try:
        from prometheus_client import REGISTRY
    except ImportError as exc:  # pragma: no cover - depends on the extra
        raise ImportError("mysql_state.metrics.register needs prometheus_client: "
                          "pip install 'mysql-state[metrics]'") from exc
    store = getattr(store, "sync", store)  # the async twin: the store it runs, whose counters it shows
    if not callable(getattr(store, "metrics", None)) or inspect.iscoroutinefunction(store.metrics):
        raise TypeError(f"register needs a MysqlAgentStateStore (or its async twin), got {type(store).__name__}")
    label = store_label(store) if name is None else name
    if not isinstance(label, str) or not label:
        raise ValueError(f"name must be a non-empty str, got {name!r}")
    registry = registry if registry is not None else REGISTRY
    with _REGISTERED_LOCK:
        collector = _REGISTERED.get(registry)
        if collector is None:
            collector = _Collector()
            collector.add(label, store)
            registry.register(collector)
            _REGISTERED[registry] = collector
        else:
            collector.add(label, store)
    return collector


_REGISTERED: "weakref.WeakKeyDictionary[Any, _Collector]" = weakref.WeakKeyDictionary()
_REGISTERED_LOCK = threading.Lock()

_COUNTERS = (("rows_written", "Rows written"), ("bytes_written", "Bytes of plaintext JSON written"),
             ("reads", "Read operations"), ("writes", "Write transactions"),
             ("stale_conflicts", "Versioned saves refused (stale version)"),
             ("reconnects", "Connections re-opened"))


class _Collector:
    """One Prometheus collector per registry: every store registered there, by its label."""

    def __init__(self) -> None:
        self._stores: dict[str, Any] = {}  # label -> weakref to the store
        self._lock = threading.Lock()

    def add(self, label: str, store: Any) -> None:
        with self._lock:
            ref = self._stores.get(label)
            if ref is not None and ref() is not None:
                if ref() is store:
                    return
                raise ValueError(f"a store is already registered under store={label!r} in this registry; "
                                 "register this one with name=...")
            other = next((name for name, r in self._stores.items() if r() is store), None)
            if other is not None:
                raise ValueError(f"this store is already registered under store={other!r} in this registry: "
                                 f"under store={label!r} too, its counters would be exposed (and summed) twice")
            self._stores[label] = weakref.ref(store)

    def collect(self) -> Any:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        with self._lock:
            live = [(label, ref()) for label, ref in sorted(self._stores.items())]
        live = [(label, s) for label, s in live if s is not None]
        families: dict[str, Union[CounterMetricFamily, GaugeMetricFamily]] = {
            "saves": CounterMetricFamily("mysql_state_saves", "Saves by kind", labels=["store", "kind"]),
            **{n: CounterMetricFamily(f"mysql_state_{n}", doc, labels=["store"]) for n, doc in _COUNTERS},
            "retries": CounterMetricFamily("mysql_state_retries", "Transactions retried by error number",
                                           labels=["store", "errno"]),
            "errors": CounterMetricFamily("mysql_state_errors", "Errors by class", labels=["store", "error"]),
            "pool_wait": CounterMetricFamily("mysql_state_pool_wait_seconds", "Time spent waiting for a connection",
                                             labels=["store"]),
            "count": CounterMetricFamily("mysql_state_operations", "Operations by name", labels=["store", "op"]),
            "total": CounterMetricFamily("mysql_state_operation_seconds", "Operation latency, summed",
                                         labels=["store", "op"]),
            "worst": GaugeMetricFamily("mysql_state_operation_max_seconds", "Slowest operation",
                                       labels=["store", "op"]),
        }
        for label, store in live:
            m = store.metrics()
            for kind, n in m["saves"].items():
                families["saves"].add_metric([label, kind], n)
            for n, _ in _COUNTERS:
                families[n].add_metric([label], m[n])
            for errno, n in m["retries"].items():
                families["retries"].add_metric([label, str(errno)], n)
            for error, n in m["errors"].items():
                families["errors"].add_metric([label, error], n)
            families["pool_wait"].add_metric([label], m["pool_wait_seconds"])
            for op, lat in m["latency"].items():
                families["count"].add_metric([label, op], lat["count"])
                families["total"].add_metric([label, op], lat["sum_seconds"])
                families["worst"].add_metric([label, op], lat["max_seconds"])
        yield from families.values()
