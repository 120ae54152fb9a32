"""Counters of one store (``store.metrics()``), and their Prometheus view (``register``).

The kinds of a list save are the words of ``save_list_report``: ``unchanged``, ``append``
(``append_list`` counts here), ``suffix``, ``shrink`` (the list got shorter: a compaction),
``rewrite``, ``clear``; single values count as ``value``. Retries by error number come from the
connector's :class:`~mysql_state.pool.Stats`. Counting is a few integer additions under a lock
per operation; operation latency and the wait for a pooled connection are measured around the
connector's ``run`` and checkout (wrapped per instance, see :func:`instrument`).

``prometheus_client`` is optional (the extra ``mysql-state[metrics]``): the store itself never
needs it, and a deployment that does not scrape Prometheus should not install it.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Optional

__all__ = ["Metrics", "KINDS", "instrument", "register"]

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
        """One save of ``kind`` that wrote ``rows`` rows of ``nbytes`` bytes of JSON."""
        with self._lock:
            self.saves[kind] = self.saves.get(kind, 0) + 1
            self.rows_written += rows
            self.bytes_written += nbytes

    def stale(self) -> None:
        with self._lock:
            self.stale_conflicts += 1

    def timed(self, op: str, write: bool, seconds: float, error: Optional[BaseException]) -> None:
        with self._lock:
            if write:
                self.writes += 1
            else:
                self.reads += 1
            lat = self.latency.setdefault(op, [0, 0.0, 0.0])
            lat[0] += 1
            lat[1] += seconds
            lat[2] = max(lat[2], seconds)
            if error is not None:
                name = type(error).__name__
                self.errors[name] = self.errors.get(name, 0) + 1
                if name == "StaleStateError":
                    self.stale_conflicts += 1

    def waited(self, seconds: float) -> None:
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
                "retries": {int(k): v for k, v in stats.retries_by_errno.items()},
                "reconnects": stats.reconnects,
                "errors": dict(self.errors),
                "stale_conflicts": self.stale_conflicts,
                "pool_wait_seconds": self.pool_wait_seconds,
                "latency": {op: {"count": c, "sum_seconds": s, "max_seconds": m}
                            for op, (c, s, m) in self.latency.items()},
            }


def instrument(connector: Any, metrics: Metrics) -> None:
    """Measure ``connector.run`` (latency by operation, reads, writes, errors by class) and its
    checkout (pool wait), by wrapping the two methods of this one instance."""
    run, checkout = connector.run, connector._checkout

    def timed_run(fn: Any, what: str, *, write: bool, **kw: Any) -> Any:
        start = time.perf_counter()
        error: Optional[BaseException] = None
        try:
            return run(fn, what, write=write, **kw)
        except Exception as exc:
            error = exc
            raise
        finally:
            metrics.timed(what.split(" ", 1)[0], write, time.perf_counter() - start, error)

    def timed_checkout(pool: Any, what: str) -> Any:
        start = time.perf_counter()
        try:
            return checkout(pool, what)
        finally:
            metrics.waited(time.perf_counter() - start)

    connector.run = timed_run
    connector._checkout = timed_checkout


def register(store: Any, registry: Any = None) -> Any:
    """Expose ``store.metrics()`` to Prometheus (``pip install 'mysql-state[metrics]'``):
    ``mysql_state_saves_total{kind="shrink"}``, ``mysql_state_rows_written_total``, ...
    Returns the collector; ``registry`` defaults to prometheus_client's global one.

    >>> from mysql_state import metrics
    >>> metrics.register(store)  # doctest: +SKIP
    """
    try:
        from prometheus_client import REGISTRY
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
    except ImportError as exc:  # pragma: no cover - depends on the extra
        raise ImportError("mysql_state.metrics.register needs prometheus_client: "
                          "pip install 'mysql-state[metrics]'") from exc

    class Collector:
        def collect(self) -> Any:
            m = store.metrics()
            saves = CounterMetricFamily("mysql_state_saves", "Saves by kind", labels=["kind"])
            for kind, n in m["saves"].items():
                saves.add_metric([kind], n)
            yield saves
            for name, doc in (("rows_written", "Rows written"), ("bytes_written", "Bytes of JSON written"),
                              ("reads", "Read operations"), ("writes", "Write transactions"),
                              ("stale_conflicts", "Versioned saves refused (stale version)"),
                              ("reconnects", "Connections re-opened")):
                yield CounterMetricFamily(f"mysql_state_{name}", doc, value=m[name])
            retries = CounterMetricFamily("mysql_state_retries", "Transactions retried by error number",
                                          labels=["errno"])
            for errno, n in m["retries"].items():
                retries.add_metric([str(errno)], n)
            yield retries
            errors = CounterMetricFamily("mysql_state_errors", "Errors by class", labels=["error"])
            for name, n in m["errors"].items():
                errors.add_metric([name], n)
            yield errors
            yield CounterMetricFamily("mysql_state_pool_wait_seconds", "Time spent waiting for a connection",
                                      value=m["pool_wait_seconds"])
            count = CounterMetricFamily("mysql_state_operations", "Operations by name", labels=["op"])
            total = CounterMetricFamily("mysql_state_operation_seconds", "Operation latency, summed",
                                        labels=["op"])
            worst = GaugeMetricFamily("mysql_state_operation_max_seconds", "Slowest operation", labels=["op"])
            for op, lat in m["latency"].items():
                count.add_metric([op], lat["count"])
                total.add_metric([op], lat["sum_seconds"])
                worst.add_metric([op], lat["max_seconds"])
            yield count
            yield total
            yield worst

    collector = Collector()
    (registry if registry is not None else REGISTRY).register(collector)
    return collector
