"""LangGraph's long-term memory store on this table: :class:`MysqlStore`, a ``BaseStore``.

Install with ``pip install 'mysql-state[langgraph]'``; the core package never imports this.

It answers as LangGraph's ``InMemoryStore`` does (namespace validation, ``search`` filters
with ``$eq $ne $gt $gte $lt $lte``, ``limit``/``offset``, ``list_namespaces`` with prefix,
suffix, ``"*"`` and ``max_depth``, cosine ranking with the same scores), and adds what it
lacks: persistence, TTL (``supports_ttl``) and a sweeper. Where it lives (one store session per
``user_id``, one row per item; see :mod:`mysql_state.langgraph._memory_layout`) it uses only
the store's public methods, so the operator's tools cover it.

Order: ``search`` without a query lists namespaces in the order they got their first item
(since they were last empty) and, in each, items in the order they were created (an
overwrite keeps its place, a delete and a new put moves it last), as ``InMemoryStore`` does.

Costs: ``get`` of any number of keys is one statement; ``search`` and ``list_namespaces``
read the primary-key range of their namespace prefix (two statements: items and expiries; a
third, the vectors, for ``query=``), so they cost in proportion to what is under the prefix,
never to the table; ``put``/``delete`` of a batch is one transaction.

>>> with MysqlStore.from_url(url, create_if_not_exist=True) as memory:
...     memory.put(("users", "alice"), "prefs", {"theme": "dark"})
...     memory.get(("users", "alice"), "prefs").value
{'theme': 'dark'}
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import logging
import math
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, Optional, Union

try:
    from langgraph.store.base import (
        BaseStore,
        GetOp,
        IndexConfig,
        InvalidNamespaceError,
        Item,
        ListNamespacesOp,
        Op,
        PutOp,
        Result,
        SearchItem,
        SearchOp,
        TTLConfig,
        ensure_embeddings,
        get_text_at_path,
        tokenize_path,
        validate_op_namespace,
    )
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError("mysql_state.langgraph needs LangGraph: pip install 'mysql-state[langgraph]'") from exc

from .. import args, keys
from ..checks import check_count
from ..aio import AsyncMysqlAgentStateStore
from ..errors import CorruptStateError, StaleStateError
from ..store import MysqlAgentStateStore
from ._memory_layout import ITEMS, MAX_KEY_CHARS, SESSION, TTLS, VECTORS, check_fits, fits, item_key, marker_key, parse, prefix_of
from ._memory_query import check_filter, literal_prefix, matches, not_json, rank
from ._memory_query import list_namespaces as listing

__all__ = ["MysqlStore"]

logger = logging.getLogger(__name__)

DEFAULT_SWEEP_MINUTES = 5.0  # as LangGraph's Postgres store, when TTLConfig names no interval
SWEEP_BATCH = 200  # expired items removed per sweep transaction


class _Clock:
    """Creation stamps (nanoseconds) strictly increasing in this process: the order of items
    and namespaces, which the wall clock alone would tie within one batch."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last = 0

    def stamp(self) -> int:
        with self._lock:
            self._last = max(time.time_ns(), self._last + 1)
            return self._last


_CLOCK = _Clock()


def _iso(when: datetime) -> str:
    return when.isoformat(timespec="microseconds")


#: The most minutes a TTL or a sweep interval may be (about 190 years): an expiry must be a
#: date the server and Python hold (year 9999), a wait one the platform's clock can sleep.
MAX_MINUTES = 100_000_000


def _check_minutes(name: str, v: Any, *, allow_none: bool = True) -> Optional[float]:
    if v is None and allow_none:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or not 0 < v <= MAX_MINUTES:
        raise ValueError(f"{name} must be a positive number of minutes, at most {MAX_MINUTES:,}"
                         f"{' (or None: no expiry)' if allow_none else ''}, got {v!r}")
    return float(v)


def _check_ttl_config(ttl: Any) -> Optional[TTLConfig]:
    if ttl is None:
        return None
    if not isinstance(ttl, Mapping):
        raise TypeError(f"ttl must be a TTLConfig dict (default_ttl, refresh_on_read, sweep_interval_minutes), got {ttl!r}")
    known = {"default_ttl", "refresh_on_read", "sweep_interval_minutes", "omit_expired"}
    unknown = set(ttl) - known
    if unknown:
        raise ValueError(f"ttl has unknown keys {sorted(unknown)}; a TTLConfig has {sorted(known)}")
    _check_minutes("ttl['default_ttl']", ttl.get("default_ttl"))
    _check_minutes("ttl['sweep_interval_minutes']", ttl.get("sweep_interval_minutes"))
    if not isinstance(ttl.get("refresh_on_read", True), bool):
        raise TypeError(f"ttl['refresh_on_read'] must be a bool, got {ttl['refresh_on_read']!r}")
    return dict(ttl)  # type: ignore[return-value]


def _check_window(name: str, v: Any) -> None:
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError(f"{name} must be an int, got {type(v).__name__}: {v!r}")


@dataclass
class _Plan:
    """A batch validated before any SQL: its reads, its puts (last op per key wins, in order
    of first appearance, as InMemoryStore applies them) and the texts to embed."""

    ops: list
    gets: list = field(default_factory=list)  # (index, GetOp)
    searches: list = field(default_factory=list)  # (index, SearchOp)
    listings: list = field(default_factory=list)  # (index, ListNamespacesOp)
    puts: dict = field(default_factory=dict)  # (namespace, key) -> PutOp
    paths: dict = field(default_factory=dict)  # (namespace, key) -> [(path, text)]
    texts: list = field(default_factory=list)  # unique texts to embed, in first-seen order
    queries: list = field(default_factory=list)  # unique search queries to embed


class _Reads:
    """The rows one batch reads, each key range once (several searches of one prefix share it)."""

    def __init__(self, store: MysqlAgentStateStore, user: Optional[str]) -> None:
        self.store, self.user = store, user
        self.ranges: dict[str, dict] = {}

    def prefix(self, region: str, ns: tuple[str, ...]) -> dict:
        p = prefix_of(region, ns)
        if len(p) > MAX_KEY_CHARS or not fits(ns, ""):
            return {}  # no row can lie under a prefix that long (or that is not Unicode text)
        for have, rows in self.ranges.items():  # a wider range read already holds this one
            if p.startswith(have):
                return {k: v for k, v in rows.items() if k.startswith(p)}
        rows = self.store.get_prefix(self.user, SESSION, p, versioned=True)
        self.ranges[p] = rows
        return rows


class MysqlStore(BaseStore):
    """LangGraph's ``BaseStore`` (long-term memory) in this store's table.

    ``store``: a :class:`MysqlAgentStateStore` or :class:`AsyncMysqlAgentStateStore` (its
    ``.sync`` is used; one object serves sync and async calls); never closed by this object.
    ``user_id``: the store user whose session holds the memory (None: anonymous). ``ttl``: a
    LangGraph ``TTLConfig`` (``default_ttl`` and ``sweep_interval_minutes`` in minutes,
    ``refresh_on_read``). ``index``: a LangGraph ``IndexConfig`` (``dims``, ``embed`` an
    ``Embeddings`` or a function, ``fields``) for ``search(query=...)``.

    >>> memory = MysqlStore(store, user_id="alice")
    >>> memory.put(("memories",), "m1", {"text": "likes MySQL"})
    >>> [(item.key, item.value) for item in memory.search(("memories",))]
    [('m1', {'text': 'likes MySQL'})]
    """

    supports_ttl: bool = True

    def __init__(
        self,
        store: Union[MysqlAgentStateStore, AsyncMysqlAgentStateStore],
        *,
        user_id: Optional[str] = None,
        ttl: Optional[TTLConfig] = None,
        index: Optional[IndexConfig] = None,
    ) -> None:
        if isinstance(store, AsyncMysqlAgentStateStore):
            store = store.sync
        if not isinstance(store, MysqlAgentStateStore):
            raise TypeError(f"MysqlStore needs a MysqlAgentStateStore or an AsyncMysqlAgentStateStore, got {type(store).__name__}")
        keys.pack(user_id, SESSION)  # validates user_id before anything else
        if not store.exact_keys:
            raise ValueError(
                f"MysqlStore needs a table whose session_id/state_key compare exactly: table "
                f"`{store.database_name}`.`{store.table_name}` ignores case or trailing spaces, so namespaces "
                "('users', 'Alice') and ('users', 'alice') would share rows; run store.migrate() to make it exact"
            )
        self.store = store
        self.user_id = user_id
        self.ttl_config = _check_ttl_config(ttl)
        self.index_config: Optional[dict] = None
        self.embeddings = None
        if index:
            if not isinstance(index, Mapping) or "embed" not in index:
                raise ValueError(f"index must be an IndexConfig dict with 'embed' (and 'dims', 'fields'), got {index!r}")
            self.index_config = dict(index)
            self.embeddings = ensure_embeddings(index.get("embed"))
            self.index_config["__tokenized_fields"] = [
                (p, tokenize_path(p)) if p != "$" else (p, p) for p in (index.get("fields") or ["$"])
            ]
        self._owned = False
        self._stop = threading.Event()
        self._sweeper: Optional[threading.Thread] = None
        self._sweeper_done: concurrent.futures.Future = concurrent.futures.Future()  # the running one's
        self._task: Optional[asyncio.Task] = None

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        user_id: Optional[str] = None,
        ttl: Optional[TTLConfig] = None,
        index: Optional[IndexConfig] = None,
        database_name: Optional[str] = None,
        create_if_not_exist: bool = False,
        **store_options: Any,
    ) -> "MysqlStore":
        """A MysqlStore with a store of its own (``MysqlAgentStateStore.from_url`` with
        ``store_options``), closed by :meth:`close`.

        >>> with MysqlStore.from_url(url, user_id="bob", create_if_not_exist=True) as m:
        ...     m.list_namespaces()
        []
        """
        store = MysqlAgentStateStore.from_url(url, database_name=database_name,
                                              create_if_not_exist=create_if_not_exist, **store_options)
        try:
            memory = cls(store, user_id=user_id, ttl=ttl, index=index)
        except BaseException:
            store.close()
            raise
        memory._owned = True
        return memory

    def close(self) -> None:
        """Stop the sweepers; close the store if :meth:`from_url` made it.

        >>> memory = MysqlStore.from_url(url, user_id="close-demo")
        >>> done = memory.start_ttl_sweeper(0.5)
        >>> memory.close(); done.done()  # the sweeper thread has ended
        True
        >>> memory.get(("notes",), "n1")  # and the store from_url made is closed
        Traceback (most recent call last):
        ...
        mysql_state.errors.StoreClosedError: get_many: the store of ... is closed; it opens no new connection
        """
        self.stop_ttl_sweeper(timeout=10)
        task = self._task
        if task is not None and not task.done():
            task.get_loop().call_soon_threadsafe(task.cancel)
        if self._owned:
            self.store.close()

    def __enter__(self) -> "MysqlStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> "MysqlStore":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.astop_ttl_sweeper(timeout=10)
        await asyncio.to_thread(self.close)

    # ---- batches -------------------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run LangGraph store operations (what ``get``/``put``/``search``/... call): reads
        first, on the state before the batch, then every put and delete in one transaction.

        >>> from langgraph.store.base import GetOp, PutOp
        >>> memory = MysqlStore(store, user_id="batch-demo")
        >>> memory.batch([PutOp(("notes",), "n1", {"text": "hi"}), GetOp(("notes",), "n1")])  # the get ran first
        [None, None]
        >>> memory.batch([GetOp(("notes",), "n1")])[0].value
        {'text': 'hi'}
        """
        plan = self._plan(ops)
        texts: dict = {}
        queries: dict = {}
        if plan.texts or plan.queries:
            embeddings = self.embeddings
            assert embeddings is not None  # _plan gathers texts and queries only with embeddings
            texts = self._embedded(plan.texts, embeddings.embed_documents(plan.texts)) if plan.texts else {}
            queries = {q: embeddings.embed_query(q) for q in plan.queries}
        return self._execute(plan, texts, queries)

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """:meth:`batch` for ``aget``/``aput``/``asearch``/...: embeddings awaited with the
        ``Embeddings``' async methods, the statements run in a worker thread.

        >>> from langgraph.store.base import GetOp, PutOp
        >>> memory = MysqlStore(store, user_id="abatch-demo")
        >>> asyncio.run(memory.abatch([PutOp(("notes",), "n1", {"text": "hi"})]))
        [None]
        >>> asyncio.run(memory.abatch([GetOp(("notes",), "n1")]))[0].value
        {'text': 'hi'}
        """
        plan = self._plan(ops)
        texts: dict = {}
        queries: dict = {}
        if plan.texts or plan.queries:
            embeddings = self.embeddings
            assert embeddings is not None  # _plan gathers texts and queries only with embeddings
            if plan.texts:
                texts = self._embedded(plan.texts, await embeddings.aembed_documents(plan.texts))
            vectors = await asyncio.gather(*(embeddings.aembed_query(q) for q in plan.queries))
            queries = dict(zip(plan.queries, vectors))
        return await asyncio.to_thread(self._execute, plan, texts, queries)

    @staticmethod
    def _embedded(texts: list, vectors: Any) -> dict:
        """text -> its vector (floats), checked: one vector per text, before anything is written."""
        vectors = list(vectors)
        if len(vectors) != len(texts):
            raise ValueError(f"the embeddings returned {len(vectors)} vectors for {len(texts)} texts; nothing was written")
        return {t: [float(x) for x in v] for t, v in zip(texts, vectors)}

    def _plan(self, ops: Iterable[Op]) -> _Plan:
        """Validate every op (the errors InMemoryStore and BaseStore raise) before any SQL."""
        plan = _Plan(list(ops))
        for i, op in enumerate(plan.ops):
            if isinstance(op, GetOp):
                validate_op_namespace(op)
                plan.gets.append((i, op))
            elif isinstance(op, SearchOp):
                validate_op_namespace(op)
                _check_window("limit", op.limit)
                _check_window("offset", op.offset)
                check_filter(op.filter)
                plan.searches.append((i, op))
                if op.query and self.embeddings is not None and op.query not in plan.queries:
                    plan.queries.append(op.query)
            elif isinstance(op, ListNamespacesOp):
                validate_op_namespace(op)
                for c in op.match_conditions or ():
                    if c.match_type not in ("prefix", "suffix"):
                        raise ValueError(f"Unsupported match type: {c.match_type}")
                if op.max_depth is not None:
                    _check_window("max_depth", op.max_depth)
                _check_window("limit", op.limit)
                _check_window("offset", op.offset)
                plan.listings.append((i, op))
            elif isinstance(op, PutOp):
                self._check_put(op)
                plan.puts[(op.namespace, op.key)] = op
            else:
                raise ValueError(f"Unknown operation type: {type(op)}")
        if self.embeddings is not None:
            seen: set = set()
            for (ns, key), op in plan.puts.items():
                if op.value is None or op.index is False:
                    continue
                found = self._texts(op)
                if found:
                    plan.paths[(ns, key)] = found
                for _, text in found:
                    if text not in seen:
                        seen.add(text)
                        plan.texts.append(text)
        return plan

    def _check_put(self, op: PutOp) -> None:
        validate_op_namespace(op)
        if not isinstance(op.key, str):
            raise TypeError(f"key must be a str, got {type(op.key).__name__}: {op.key!r}")
        if op.value is None:
            return  # a delete: any namespace may be asked, one that cannot exist holds nothing
        if not op.namespace:
            raise InvalidNamespaceError("Namespace cannot be empty.")
        if op.namespace[0] == "langgraph":
            raise InvalidNamespaceError(f'Root label for namespace cannot be "langgraph". Got: {op.namespace}')
        if not isinstance(op.value, dict):
            raise TypeError(f"the value put at {op.namespace!r} {op.key!r} must be a dict, got {type(op.value).__name__}")
        bad = not_json(op.value)
        if bad is not None:
            raise TypeError(f"the value put at {op.namespace!r} {op.key!r} must be what JSON holds: {bad}"
                            " (JSON holds str, finite numbers, bool, None, and lists and dicts of them)")
        _check_minutes(f"ttl of {op.namespace!r} {op.key!r}", op.ttl)
        if op.index is not None and op.index is not False and (
                not isinstance(op.index, (list, tuple)) or not all(isinstance(p, str) for p in op.index)):
            raise TypeError(f"index must be None, False or a list of field paths, got {op.index!r}")
        check_fits(op.namespace, op.key)

    def _texts(self, op: PutOp) -> list[tuple[str, str]]:
        """(path, text) pairs to embed for a put, as InMemoryStore extracts them."""
        assert self.index_config is not None and op.index is not False  # _plan asks only then
        if op.index is None:
            paths = self.index_config["__tokenized_fields"]
        else:
            paths = [(p, tokenize_path(p)) for p in op.index]
        out: list[tuple[str, str]] = []
        for path, tokens in paths:
            texts = get_text_at_path(op.value, tokens)
            if len(texts) > 1:
                out.extend((f"{path}.{i}", t) for i, t in enumerate(texts))
            elif texts:
                out.append((path, texts[0]))
        return out

    def _execute(self, plan: _Plan, texts: dict, queries: dict) -> list[Result]:
        results: list[Result] = [None] * len(plan.ops)
        now = datetime.now(timezone.utc)
        reads = _Reads(self.store, self.user_id)
        refresh: dict[str, tuple[int, float]] = {}  # TTL key -> (its version, minutes)
        if plan.gets:
            self._gets(plan.gets, now, results, refresh)
        for i, op in plan.searches:
            results[i] = self._search(op, reads, now, queries.get(op.query) if op.query else None, refresh)
        for i, op in plan.listings:
            results[i] = self._list(op, reads, now)
        if refresh:
            self._refresh(refresh, now)
        if plan.puts:
            vectors = {nk: {path: texts[t] for path, t in pairs} for nk, pairs in plan.paths.items()}
            self._write(plan.puts, vectors, now)
        return results

    # ---- reads ---------------------------------------------------------------------------------

    def _gets(self, gets: list, now: datetime, results: list, refresh: dict) -> None:
        wanted = {}
        for i, op in gets:
            # a key that is not a str names no item (a put refuses it): None, as InMemoryStore
            if isinstance(op.key, str) and op.namespace and fits(op.namespace, op.key):
                wanted[i] = (item_key(ITEMS, op.namespace, op.key),
                             item_key(TTLS, op.namespace, op.key))
        names = sorted({k for pair in wanted.values() for k in pair})
        rows = self.store.get_many(self.user_id, SESSION, values=names, versioned=True) if names else {}
        for i, op in gets:
            if i not in wanted:
                continue
            ik, tk = wanted[i]
            row, expiry = rows.get(ik), rows.get(tk)
            if row is None or self._expired(expiry.value if expiry is not None else None, tk, now):
                continue
            results[i] = self._item(Item, row.value, ik, op.namespace, op.key)
            if op.refresh_ttl and expiry is not None:
                refresh[tk] = (expiry.version, float(expiry.value["ttl_minutes"]))

    def _live(self, reads: _Reads, prefix: tuple[str, ...], now: datetime) -> tuple[list, dict]:
        """Unexpired items under ``prefix`` in listing order: [(namespace, key, row)], and
        their TTL rows (key -> VersionedState)."""
        rows = reads.prefix(ITEMS, prefix)
        ttls = reads.prefix(TTLS, prefix)
        ns_seq: dict[tuple[str, ...], int] = {}  # from the markers
        items = []
        for k, vs in rows.items():
            where = parse(k)
            if where is None:
                raise self._corrupt(k, "its key is not one MysqlStore writes")
            _, ns, key = where
            if not isinstance(vs.value, dict) or not isinstance(vs.value.get("seq"), int):
                raise self._corrupt(k, "it holds no 'seq'")
            if key is None:
                ns_seq[ns] = vs.value["seq"]
                continue
            tk = item_key(TTLS, ns, key)
            if self._expired(ttls[tk].value if tk in ttls else None, tk, now):
                continue
            items.append((ns, key, vs.value))
        oldest: dict[tuple[str, ...], int] = {}  # a namespace with no marker sorts by its oldest item
        for ns, _, row in items:
            oldest[ns] = min(oldest.get(ns, row["seq"]), row["seq"])
        place = {**oldest, **ns_seq}
        items.sort(key=lambda it: (place[it[0]], it[0], it[2]["seq"], it[1]))
        return items, ttls

    def _search(self, op: SearchOp, reads: _Reads, now: datetime, qv: Optional[list], refresh: dict) -> list:
        items, ttls = self._live(reads, op.namespace_prefix, now)
        found = []
        for ns, key, row in items:
            value = row.get("value")
            if not isinstance(value, dict):
                raise self._corrupt(item_key(ITEMS, ns, key), "its 'value' is not a dict")
            if matches(value, op.filter):
                found.append((ns, key, row))
        if qv is not None and found:
            vrows = reads.prefix(VECTORS, op.namespace_prefix)
            candidates = []
            for ns, key, row in found:
                vk = item_key(VECTORS, ns, key)
                vs = vrows.get(vk)
                candidates.append(((ns, key, row), self._vectors(vk, vs.value) if vs is not None else []))
            kept = rank(qv, candidates, op.limit, op.offset, ident=lambda it: (it[0], it[1]))
        else:
            kept = [(None, it) for it in found[op.offset : op.offset + op.limit]]
        out = []
        for score, (ns, key, row) in kept:
            item = self._item(SearchItem, row, item_key(ITEMS, ns, key), ns, key)
            item.score = score
            out.append(item)
            tk = item_key(TTLS, ns, key)
            if op.refresh_ttl and tk in ttls:
                refresh[tk] = (ttls[tk].version, float(ttls[tk].value["ttl_minutes"]))
        return out

    def _list(self, op: ListNamespacesOp, reads: _Reads, now: datetime) -> list:
        conditions = [(c.match_type, tuple(c.path)) for c in op.match_conditions or ()]
        prefix: tuple[str, ...] = ()
        for t, p in conditions:
            if t == "prefix" and len(literal_prefix(p)) > len(prefix):
                prefix = literal_prefix(p)
        items, _ = self._live(reads, prefix, now)
        namespaces = list(dict.fromkeys(ns for ns, _, _ in items))
        return listing(namespaces, conditions, op.max_depth, op.limit, op.offset)

    def _item(self, cls: type, row: dict, k: str, ns: tuple[str, ...], key: str) -> Any:
        if not isinstance(row, dict) or not isinstance(row.get("value"), dict):  # an item's value is a dict
            raise self._corrupt(k, "its 'value' is not a dict")
        try:
            return cls(namespace=ns, key=key, value=row["value"], created_at=datetime.fromisoformat(row["created_at"]),
                       updated_at=datetime.fromisoformat(row["updated_at"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise self._corrupt(k, f"it is not an item row ({exc})") from exc

    def _expired(self, expiry: Optional[dict], k: str, now: datetime) -> bool:
        """Whether a TTL row (None: the item has no TTL) says the item has expired by ``now``."""
        if expiry is None:
            return False
        try:
            float(expiry["ttl_minutes"])
            return datetime.fromisoformat(expiry["expires_at"]) <= now
        except (KeyError, TypeError, ValueError) as exc:
            raise self._corrupt(k, f"its expiry is unreadable ({exc})") from exc

    def _row(self, row: Any, k: str, field: str = "created_at") -> Optional[dict]:
        """An item (or marker) row read for a write, checked: a typed error, never a guess (a
        marker's ``items`` a count)."""
        if row is not None and not (isinstance(row, dict) and isinstance(row.get("seq"), int) and field in row
                                    and (field != "items" or type(row["items"]) is int)):
            raise self._corrupt(k, f"it holds no 'seq' or no {field!r}")
        return row

    def _vectors(self, k: str, row: Any) -> list:
        """The vectors of an item's vector row, checked: lists of numbers of the index's dims."""
        vectors = row.get("vectors") if isinstance(row, dict) else None
        dims = self.index_config["dims"] if self.index_config else None
        if not isinstance(vectors, dict) or not all(
                isinstance(v, list) and (dims is None or len(v) == dims)
                and all(type(x) in (int, float) for x in v) for v in vectors.values()):
            raise self._corrupt(k, "its 'vectors' are not lists of numbers of the index's dims")
        return list(vectors.values())

    def _corrupt(self, k: str, why: str) -> CorruptStateError:
        sid = keys.pack(self.user_id, SESSION)
        return CorruptStateError(f"MysqlStore row {k!r} of session {sid!r} cannot be read: {why}", sid, k, 0)

    def _refresh(self, refresh: dict, now: datetime) -> None:
        """Extend the expiry of what a read returned (``refresh_on_read``): compare-and-set on
        each TTL row, so an item deleted or put again meanwhile is left as that writer left it."""
        values = {tk: self._ttl_row(now, minutes) for tk, (_, minutes) in refresh.items()}
        expected = {tk: version for tk, (version, _) in refresh.items()}
        try:
            self.store.save_many(self.user_id, SESSION, values=values, expected_versions=expected)
        except StaleStateError:
            for tk, value in values.items():
                self.store.save_if_version(self.user_id, SESSION, tk, value, expected[tk])

    @staticmethod
    def _ttl_row(now: datetime, minutes: float) -> dict:
        return {"expires_at": _iso(now + timedelta(minutes=minutes)), "ttl_minutes": minutes}

    # ---- writes --------------------------------------------------------------------------------

    def _write(self, puts: dict, vectors: dict, now: datetime) -> None:
        """Every put and delete of a batch in ONE transaction whose reads lock what they read;
        each namespace's marker counts its item rows (created with the first, deleted with the last)."""
        stamps = {nk: _CLOCK.stamp() for nk in puts}  # in the order InMemoryStore applies them
        ns_stamps = {ns: stamps[(ns, k)] for (ns, k) in reversed(list(stamps))}  # a namespace's first
        user, session, iso = self.user_id, SESSION, _iso(now)

        def tx_fn(tx: Any) -> None:
            delta: dict[tuple[str, ...], int] = {}
            for (ns, key), op in puts.items():
                if not fits(ns, key) or not ns:
                    continue  # a delete of what cannot be stored
                ik, tk, vk = (item_key(r, ns, key) for r in (ITEMS, TTLS, VECTORS))
                old, old_ttl = self._row(tx.get(user, session, ik), ik), tx.get(user, session, tk)
                if op.value is None:
                    if old is None:
                        continue
                    tx.delete(user, session, ik)
                    if old_ttl is not None:
                        tx.delete(user, session, tk)
                    if old.get("indexed"):
                        tx.delete(user, session, vk)
                    delta[ns] = delta.get(ns, 0) - 1
                    continue
                kept = old if old is not None and not self._expired(old_ttl, tk, now) else None
                vec = vectors.get((ns, key))
                tx.save(user, session, ik, {
                    "value": dict(op.value),
                    "created_at": kept["created_at"] if kept is not None else iso,
                    "updated_at": iso,
                    "seq": kept["seq"] if kept is not None else stamps[(ns, key)],
                    "indexed": bool(vec),
                })
                if op.ttl is not None:
                    tx.save(user, session, tk, self._ttl_row(now, float(op.ttl)))
                elif old_ttl is not None:
                    tx.delete(user, session, tk)
                if vec:
                    tx.save(user, session, vk, {"vectors": vec})
                elif old is not None and old.get("indexed"):
                    tx.delete(user, session, vk)
                if old is None:
                    delta[ns] = delta.get(ns, 0) + 1
            for ns, d in sorted(delta.items()):
                if d == 0:
                    continue
                mk = marker_key(ns)
                marker = self._row(tx.get(user, session, mk), mk, "items")
                n = (marker["items"] if marker else 0) + d
                if n > 0:
                    seq = marker["seq"] if marker else ns_stamps.get(ns, _CLOCK.stamp())
                    tx.save(user, session, mk, {"namespace": list(ns), "seq": seq, "items": n})
                elif marker is not None:
                    tx.delete(user, session, mk)

        self.store.transaction(tx_fn)

    # ---- TTL -----------------------------------------------------------------------------------

    def sweep_ttl(self, *, batch: int = SWEEP_BATCH,
                  progress: Optional[Callable[[int, int], None]] = None) -> int:
        """Delete the expired items (with their expiry, vectors and, for a namespace's last,
        its marker), ``batch`` items per transaction; returns the number of items removed.

        Reads the TTL rows of this store's session (one statement; only items put with a TTL
        have one), then re-checks each expiry under lock, so an item refreshed or put again
        meanwhile stays.

        ``progress(done, total)`` once the expired items are found, then after each batch (each
        committed): ``done`` the items removed so far (the last call's is what the call returns),
        ``total`` those found expired; ``done`` ends below it by the items refreshed, put again
        or deleted meanwhile. A callback that raises stops the sweep there, the batches before it
        removed: the next sweep removes the rest.

        >>> import time
        >>> memory = MysqlStore(store, user_id="sweep-demo")
        >>> memory.put(("notes",), "n1", {"text": "soon gone"}, ttl=0.001)  # minutes
        >>> memory.put(("notes",), "n2", {"text": "stays"})
        >>> time.sleep(0.25)
        >>> memory.sweep_ttl(progress=lambda done, total: print(f"{done}/{total} expired items removed"))
        0/1 expired items removed
        1/1 expired items removed
        1
        >>> [item.key for item in memory.search(("notes",))]
        ['n2']
        """
        check_count("batch", batch)  # the store's rule for every batch: TypeError, or ValueError naming it
        args.callback(progress, "progress")
        now = datetime.now(timezone.utc)
        ttls = self.store.get_prefix(self.user_id, SESSION, TTLS)
        due = []
        for tk, row in ttls.items():
            where = parse(tk)
            if where is None or where[2] is None:
                raise self._corrupt(tk, "its key is not one MysqlStore writes")
            if self._expired(row, tk, now):
                due.append((tk, where[1], where[2]))
        removed = 0
        if progress is not None:
            progress(0, len(due))
        for start in range(0, len(due), batch):
            if self._stop.is_set() and self._sweeping_in_thread():
                break
            removed += self.store.transaction(functools.partial(self._sweep_tx, chunk=due[start : start + batch]))
            if progress is not None:
                progress(removed, len(due))
        return removed

    def _sweeping_in_thread(self) -> bool:
        return self._sweeper is not None and threading.current_thread() is self._sweeper

    def _sweep_tx(self, tx: Any, chunk: list) -> int:
        user, session = self.user_id, SESSION
        now = datetime.now(timezone.utc)
        delta: dict[tuple[str, ...], int] = {}
        removed = 0
        doomed: list[str] = []
        for tk, ns, key in chunk:
            expiry = tx.get(user, session, tk)
            if expiry is None or not self._expired(expiry, tk, now):
                continue  # refreshed, put again or deleted since it was read
            ik = item_key(ITEMS, ns, key)
            item = self._row(tx.get(user, session, ik), ik)
            doomed.append(tk)
            if item is None:
                continue
            doomed.append(ik)
            if item.get("indexed"):
                doomed.append(item_key(VECTORS, ns, key))
            delta[ns] = delta.get(ns, 0) + 1
            removed += 1
        for ns, d in sorted(delta.items()):
            mk = marker_key(ns)
            marker = self._row(tx.get(user, session, mk), mk, "items")
            if marker is None:
                continue
            if marker["items"] - d > 0:
                tx.save(user, session, mk, {**marker, "items": marker["items"] - d}, maintenance=True)
            else:
                doomed.append(mk)
        # maintenance: the memory's activity (its catalog row) stays as the user left it
        tx.delete_keys(user, session, doomed, maintenance=True)
        return removed

    def _interval(self, sweep_interval_minutes: Optional[float]) -> float:
        minutes = _check_minutes("sweep_interval_minutes", sweep_interval_minutes)
        if minutes is None:
            minutes = (self.ttl_config or {}).get("sweep_interval_minutes") or DEFAULT_SWEEP_MINUTES
        return float(minutes) * 60.0

    def start_ttl_sweeper(self, sweep_interval_minutes: Optional[float] = None) -> concurrent.futures.Future:
        """Sweep (:meth:`sweep_ttl`) every ``sweep_interval_minutes`` (default: the TTLConfig's,
        else 5) in a daemon thread, until :meth:`stop_ttl_sweeper` or :meth:`close`. Returns a
        future done when the thread ends (cancelling it stops the thread). Sweeps run whether or
        not a TTLConfig was given, since ``put(..., ttl=)`` works without one.

        >>> memory = MysqlStore(store, user_id="sweeper-demo")
        >>> done = memory.start_ttl_sweeper(0.5)  # every 30 seconds
        >>> memory.stop_ttl_sweeper(timeout=5)
        True
        """
        interval = self._interval(sweep_interval_minutes)
        running = self._sweeper
        if running is not None and running.is_alive():
            if not self._stop.is_set():
                return self._sweeper_done  # the one running: its future (one thread at a time)
            running.join()  # stopping: it ends after its current batch, then a new one starts
        future: concurrent.futures.Future = concurrent.futures.Future()
        future.add_done_callback(lambda f: self._stop.set() if f.cancelled() else None)
        self._sweeper_done = future
        self._stop.clear()

        def loop() -> None:
            try:
                while not self._stop.wait(interval):
                    try:
                        n = self.sweep_ttl()
                        if n:
                            logger.info("MysqlStore swept %d expired items", n)
                    except Exception:  # noqa: BLE001 - the next round tries again
                        logger.exception("MysqlStore TTL sweep failed")
            finally:
                if not future.done():
                    future.set_result(None)

        self._sweeper = threading.Thread(target=loop, daemon=True, name="mysql-state-ttl-sweeper")
        self._sweeper.start()
        return future

    def stop_ttl_sweeper(self, timeout: Optional[float] = None) -> bool:
        """Stop the sweeper thread (it wakes at once; a sweep under way ends after its current
        batch); True when it is stopped (or was not running) within ``timeout`` seconds.

        >>> memory = MysqlStore(store, user_id="stop-demo")
        >>> memory.stop_ttl_sweeper()  # none running: nothing to wait for
        True
        >>> done = memory.start_ttl_sweeper(0.5)
        >>> memory.stop_ttl_sweeper(timeout=5), done.done()
        (True, True)
        """
        self._stop.set()
        thread = self._sweeper
        if thread is None or not thread.is_alive():
            self._sweeper = None
            return True
        thread.join(timeout)
        if thread.is_alive():
            return False
        self._sweeper = None
        return True

    async def asweep_ttl(self, *, batch: int = SWEEP_BATCH,
                         progress: Optional[Callable[[int, int], None]] = None) -> int:
        """:meth:`sweep_ttl` in a worker thread (``progress`` is called there).

        >>> import time
        >>> memory = MysqlStore(store, user_id="asweep-demo")
        >>> memory.put(("notes",), "n1", {"text": "soon gone"}, ttl=0.001)  # minutes
        >>> time.sleep(0.25)
        >>> asyncio.run(memory.asweep_ttl()), memory.get(("notes",), "n1")
        (1, None)
        """
        return await asyncio.to_thread(self.sweep_ttl, batch=batch, progress=progress)

    async def astart_ttl_sweeper(self, sweep_interval_minutes: Optional[float] = None) -> asyncio.Task:
        """The sweeper as an asyncio task of the running loop (each sweep in a worker thread),
        until :meth:`astop_ttl_sweeper`; returns the task.

        >>> memory = MysqlStore(store, user_id="asweeper-demo")
        >>> async def main():
        ...     task = await memory.astart_ttl_sweeper(0.5)  # every 30 seconds
        ...     return task.get_name(), await memory.astop_ttl_sweeper(timeout=5)
        >>> asyncio.run(main())
        ('mysql-state-ttl-sweeper', True)
        """
        interval = self._interval(sweep_interval_minutes)
        if self._task is not None and not self._task.done():
            return self._task

        async def loop() -> None:
            while True:
                await asyncio.sleep(interval)
                try:
                    n = await self.asweep_ttl()
                    if n:
                        logger.info("MysqlStore swept %d expired items", n)
                except Exception:  # noqa: BLE001 - the next round tries again
                    logger.exception("MysqlStore TTL sweep failed")

        self._task = asyncio.create_task(loop(), name="mysql-state-ttl-sweeper")
        return self._task

    async def astop_ttl_sweeper(self, timeout: Optional[float] = None) -> bool:
        """Cancel the sweeper task; True when it has ended within ``timeout`` seconds (a sweep
        under way in its worker thread still finishes its current transaction).

        >>> memory = MysqlStore(store, user_id="astop-demo")
        >>> async def main():
        ...     task = await memory.astart_ttl_sweeper(0.5)
        ...     return await memory.astop_ttl_sweeper(timeout=5), task.cancelled()
        >>> asyncio.run(main())
        (True, True)
        """
        task = self._task
        if task is None or task.done():
            self._task = None
            return True
        task.cancel()
        try:
            await asyncio.wait_for(asyncio.shield(task), timeout)
        except asyncio.CancelledError:
            pass
        except asyncio.TimeoutError:
            return False
        self._task = None
        return True

    def __del__(self) -> None:
        stop = getattr(self, "_stop", None)
        if stop is not None:
            stop.set()

