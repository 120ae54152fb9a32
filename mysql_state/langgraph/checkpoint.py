"""MysqlSaver: LangGraph's checkpointer on the store's table, lists stored incrementally.

A LangGraph thread is the session ``(user_id, thread_id)`` of the saver's user, so the
operator's tools (``sessions()``, ``prune``, ``export``/``import_rows``, ``forget_user``,
``delete``, ``doctor``, encryption at rest) cover threads with no code of their own. Inside
the session the keys of :mod:`mysql_state.langgraph.layout` hold the checkpoints, their
pending writes, channel values and, for a channel whose value is a list (the messages of
``MessagesState``), an append-only log of items: each version of the list is a short list of
ranges into the log, so a turn that adds one message writes one item, and every earlier
checkpoint still reads back exactly (time travel, forks by ``update_state``).

Only the store's public API is used. Values go through the saver's ``serde`` (LangGraph's
``JsonPlusSerializer`` by default) and are kept as JSON rows (:mod:`.codec`).

>>> from langgraph.graph import START, MessagesState, StateGraph
>>> from mysql_state.langgraph import MysqlSaver
>>> def bot(state):
...     return {"messages": [("ai", "hello")]}
>>> builder = StateGraph(MessagesState).add_node("bot", bot).add_edge(START, "bot")
>>> with MysqlSaver.from_url(url, create_if_not_exist=True) as saver:
...     graph = builder.compile(checkpointer=saver)
...     out = graph.invoke({"messages": [("user", "hi")]}, {"configurable": {"thread_id": "t1"}})
>>> [m.content for m in out["messages"]]
['hi', 'hello']
"""

from __future__ import annotations

import asyncio
import builtins
import operator
import random
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, TypeVar, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
    get_checkpoint_id,
    get_serializable_checkpoint_metadata,
    writes_sort_key,
)
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.checkpoint.serde.types import _DeltaSnapshot

from .. import args, keys
from ..aio import AsyncMysqlAgentStateStore, run_in
from ..errors import CorruptStateError, SessionNotFoundError, StaleStateError, StoreClosedError
from ..pool import DEFAULT_POOL_SIZE
from ..results import UNVERSIONED
from ..store import MysqlAgentStateStore
from . import layout
from .codec import RowError, from_row, from_rows, to_row
from .identity import ListPrint, exact_of, extends, print_of, state_of, states_in

__all__ = ["MysqlSaver", "PRUNE_STRATEGIES"]

T = TypeVar("T")
PRUNE_STRATEGIES = ("keep_latest", "delete")
#: A string channel value at most this long is kept inside the checkpoint row (as Postgres
#: keeps primitives); a longer one gets a row per version.
INLINE_STR_CHARS = 512
#: Checkpoint rows read per statement when listing or walking a parent chain.
PAGE = 64
#: Items (messages) the per-process identity cache may hold, over all threads.
DEFAULT_CACHE_ITEMS = 200_000
#: Objects remembered per log item: each read of a checkpoint decodes new ones, and LangGraph
#: may go on with those of an earlier read (``update_state`` reads the checkpoint twice).
OBJECTS_PER_ITEM = 4
#: Earlier loads of a list, beside the last one, whose objects a put may still be given
#: (``update_state`` reads the checkpoint twice and goes on with the first read's objects);
#: each keeps its messages alive until a newer load replaces it.
PENDING_LOADS = 1


def _length_by(entry: Any) -> Optional[int]:
    """The index's length as its last entry ``[id, parent, position]`` says (None: an entry
    without its position, written the slower way or by a maintenance rewrite)."""
    pos = entry[2] if len(entry) > 2 else None
    return pos + 1 if type(pos) is int and pos >= 0 else None


def _numbered(entries: Sequence[Sequence]) -> list[list]:
    """Index entries ``[id, parent]`` (any position they had dropped) sorted by id, each with its
    position: ``[id, parent, position]``."""
    return [[e[0], e[1], i] for i, e in enumerate(sorted(entries, key=lambda e: e[0]))]


class _LogReset(Exception):
    """Logs of a put shorter than this process knew them: rebuilt elsewhere (their channels)."""

    def __init__(self, channels: list) -> None:
        self.channels = channels


@dataclass
class _Last:
    """The last version of a list this process stored or read: its objects, the marks of
    their states, its ranges, the fingerprint of the whole list (:func:`.identity.print_of`,
    None when it has none). A new version that starts with the same objects, unchanged,
    refers to the same ranges and is walked only from there (its new tail).

    A load does not take the marks of the items it read (one call a message), only their
    states in one ``marshal`` call (:func:`.identity.exact_of`): ``marks[:lazy]`` are then
    None, and are made from ``exact`` when a put needs them (:meth:`MysqlSaver._marks_of`):
    the usual put extends the list it read and never does."""

    items: list
    marks: list
    ranges: list
    print: Optional[ListPrint] = None
    lazy: int = 0  # marks[:lazy] not taken yet: items[:lazy] are as read if ``exact`` says so
    exact: Optional[bytes] = None
    gen: str = ""  # the log ``ranges`` are in (of a lazy one: learned only into that log)


@dataclass
class _View:
    """What this process knows of one list channel's log: the items it holds, by identity."""

    gen: str
    known: dict = field(default_factory=dict)  # id(obj) -> (obj, log index, mark of its state)
    by_index: dict = field(default_factory=dict)  # log index -> ids of its objects, oldest first
    length: int = 0  # the log has at least this many items
    refs: "OrderedDict[Any, dict]" = field(default_factory=OrderedDict)  # version -> reference
    last: Optional[_Last] = None
    #: Loads whose marks are not taken yet, that a later load replaced as ``last``: LangGraph
    #: may go on with their objects (``update_state`` reads the checkpoint twice).
    pending: list = field(default_factory=list)


@dataclass
class _ListPlan:
    """One list channel of one put: the items known by identity, the rows to append."""

    where: tuple  # (thread, ns, channel)
    key: str
    gen: str
    version: Any
    delta: bool
    items: list
    indexes: list  # log index per item from ``head`` on, -1 for an item appended by this put
    missing: list  # positions of the items to append
    rows: list  # their JSON rows
    floor: int  # the log must have at least this many items before the append
    ref: Optional[dict] = None
    start: int = 0
    reused: bool = False  # the reference of this very version, known already
    marks: list = field(default_factory=list)  # the mark of every item's state (``_marks``)
    head: int = 0  # items[:head] are the last version's, unchanged: they are ``base``
    base: list = field(default_factory=list)  # the ranges of items[:head]
    print: Optional[ListPrint] = None  # the fingerprint of the whole list (``check_edits``)
    lazy: int = 0  # marks[:lazy] not taken yet (None), as the last version's (see ``_Last``)
    exact: Optional[bytes] = None


class _LogShort(CorruptStateError):
    """A checkpoint refers to items its list log does not hold: damage, or (read in two
    statements) a prune or delete by another process between the row and its log, which
    the read tells apart by reading again."""


#: Reads of a checkpoint and its logs before a log shorter than the checkpoint says is damage.
READ_ATTEMPTS = 3
#: How many times prune reads a thread that keeps changing (or looks damaged) before it gives up.
PRUNE_ATTEMPTS = 5


def _refs_of(record: dict) -> dict:
    """What a checkpoint row refers to per channel: list references, inline values, blob versions."""
    return {"lists": record.get("lists", {}), "values": record.get("values", {}), "blobs": record.get("blobs", {})}


def _is_list(value: Any) -> bool:
    return type(value) is list or (isinstance(value, _DeltaSnapshot) and type(value.value) is list)


def _inline(value: Any) -> bool:
    return value is None or isinstance(value, (bool, int, float)) or (
        isinstance(value, str) and len(value) <= INLINE_STR_CHARS)


class MysqlSaver(BaseCheckpointSaver[str]):
    """A LangGraph checkpointer (``BaseCheckpointSaver``) on a :class:`MysqlAgentStateStore`.

    ``store`` is a ``MysqlAgentStateStore`` or an ``AsyncMysqlAgentStateStore`` (its ``.sync``
    store is used; the saver never closes a store it was given). Threads are sessions of
    ``user_id`` (None: the anonymous user). ``serde`` is LangGraph's serializer protocol
    (default ``JsonPlusSerializer``). One saver serves ``invoke`` and ``ainvoke`` from many
    threads and event loops: every ``a`` method runs its sync twin in a bounded thread pool
    (as many threads as the store has connections), so the loop never waits on the network.

    >>> from langgraph.graph import START, MessagesState, StateGraph
    >>> builder = StateGraph(MessagesState).add_node("bot", lambda s: {"messages": [("ai", "hello")]})
    >>> saver = MysqlSaver(store, user_id="alice")
    >>> graph = builder.add_edge(START, "bot").compile(checkpointer=saver)
    >>> config = {"configurable": {"thread_id": "t2"}}
    >>> _ = graph.invoke({"messages": [("user", "hi")]}, config)
    >>> _ = graph.invoke({"messages": [("user", "again")]}, config)  # the thread goes on
    >>> [m.content for m in graph.get_state(config).values["messages"]]
    ['hi', 'hello', 'again', 'hello']
    >>> store.list_session_ids("alice")  # a thread is a session of the saver's user
    {'t2'}
    >>> saver.close()
    """

    #: Items (messages) this saver remembers by identity, over all threads (0: none).
    cache_items: int = DEFAULT_CACHE_ITEMS
    #: Whether a remembered item must also have the state it had (its fingerprint, taken at
    #: each put: ~0.5 µs a message for a list that goes on, :func:`.identity.print_of`; ~1.3 µs
    #: item by item) to be taken for unchanged. False: being the same object is
    #: enough, which is exact only for graphs that never edit state objects in place (what
    #: LangGraph's state model asks: reducers make new objects); an edited object would be
    #: stored as it was.
    check_edits: bool = True

    def __init__(
        self,
        store: Any,
        *,
        user_id: Optional[str] = None,
        serde: Optional[SerializerProtocol] = None,
    ) -> None:
        super().__init__(serde=serde)
        if isinstance(store, AsyncMysqlAgentStateStore):
            store = store.sync
        if not isinstance(store, MysqlAgentStateStore):
            raise TypeError(
                f"store must be a MysqlAgentStateStore or an AsyncMysqlAgentStateStore, got {type(store).__name__}")
        keys.user_part(user_id)  # validates before any SQL
        self.store: MysqlAgentStateStore = store
        self.user_id = user_id
        self._owned = False
        self._closed = False
        self._executor = ThreadPoolExecutor(max_workers=store.pool_size or DEFAULT_POOL_SIZE,
                                            thread_name_prefix="mysql-saver")
        self._lock = threading.Lock()
        self._views: "OrderedDict[tuple, _View]" = OrderedDict()
        self._cached = 0
        #: (thread, ns) -> (the newest id its index holds, the index's length), known together
        self._indexes: "OrderedDict[tuple, tuple[str, int]]" = OrderedDict()
        #: (thread, ns) -> (id, channel versions, references) of the checkpoint last put or
        #: loaded there: what the next put carries over for channels it names but leaves out
        self._carried: "OrderedDict[tuple, tuple[str, dict, dict]]" = OrderedDict()
        self._seq = 0

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        user_id: Optional[str] = None,
        database_name: Optional[str] = None,
        create_if_not_exist: bool = False,
        serde: Optional[SerializerProtocol] = None,
        **store_options: Any,
    ) -> "MysqlSaver":
        """A saver with a store of its own (closed by :meth:`close`); ``store_options`` go to
        :meth:`MysqlAgentStateStore.from_url` (``pool_size``, ``encryption``, ...).

        >>> with MysqlSaver.from_url(url, user_id="bob", create_if_not_exist=True) as saver:
        ...     list(saver.list(None))  # bob has no thread yet
        []
        """
        keys.user_part(user_id)
        store = MysqlAgentStateStore.from_url(url, database_name=database_name,
                                              create_if_not_exist=create_if_not_exist, **store_options)
        try:
            saver = cls(store, user_id=user_id, serde=serde)
        except BaseException:
            store.close()
            raise
        saver._owned = True
        return saver

    # ---- where things are ------------------------------------------------------------------------

    @staticmethod
    def _where(config: RunnableConfig) -> tuple[str, str]:
        conf = config["configurable"]
        ns = conf.get("checkpoint_ns") or ""
        return layout.thread_of(conf["thread_id"]), ns

    def _corrupt(self, thread: str, key: str, exc: Exception) -> CorruptStateError:
        sid = keys.pack(self.user_id, thread)
        return CorruptStateError(f"LangGraph row {key!r} of session {sid!r} cannot be read: {exc}", sid, key)

    def _decode(self, thread: str, key: str, row: Any) -> Any:
        try:
            return from_row(self.serde, row)
        except RowError as exc:
            raise self._corrupt(thread, key, exc) from exc

    def _part(self, thread: str, r: dict, what: str) -> dict:
        """A checkpoint row's ``checkpoint`` or ``metadata``, decoded: a map, else damage."""
        key = layout.checkpoint_key(r["ns"], r["id"])
        decoded = self._decode(thread, key, r[what])
        if not isinstance(decoded, dict):
            raise self._corrupt(thread, key, ValueError(f"its {what} is not a map: {str(decoded)[:60]!r}"))
        return decoded

    def _record(self, thread: str, key: str, record: Any) -> dict:
        fault = layout.record_fault(key, record)
        if fault is not None:
            raise self._corrupt(thread, key, ValueError(fault))
        return record

    def _entries(self, thread: str, ns: str, entries: list) -> list:
        """Items of a namespace's index, each checked (:func:`layout.entry_fault`)."""
        for i, e in enumerate(entries):
            fault = layout.entry_fault(e)
            if fault is not None:
                sid = keys.pack(self.user_id, thread)
                raise CorruptStateError(f"LangGraph index {layout.index_key(ns)!r} of session {sid!r} cannot be "
                                        f"read: an item {fault}", sid, layout.index_key(ns), i)
        return entries

    # ---- the per-process identity cache of list items --------------------------------------------

    def _view(self, where: tuple) -> Optional[_View]:
        view = self._views.get(where)
        if view is not None:
            self._views.move_to_end(where)
        return view

    def _learn(self, where: tuple, gen: str, triples: Sequence[tuple[Any, int, Any]], length: int,
               version: Any = None, ref: Optional[dict] = None, last: Optional[_Last] = None) -> None:
        """Remember items of a log by identity with their fingerprints (and a version's
        reference, the last version seen), within the budget."""
        if self.cache_items <= 0:
            return
        with self._lock:
            view = self._views.get(where)
            if view is None or view.gen != gen:
                if view is not None:
                    self._cached -= len(view.known)
                view = self._views[where] = _View(gen)
            self._views.move_to_end(where)
            before = len(view.known)
            for obj, index, mark in triples:
                ids = view.by_index.setdefault(index, [])
                view.known[id(obj)] = (obj, index, mark)
                if id(obj) in ids:
                    continue
                ids.append(id(obj))
                if len(ids) > OBJECTS_PER_ITEM:  # the oldest copy read of this item goes
                    old = ids.pop(0)
                    if view.known.get(old, (None, index))[1] == index:
                        view.known.pop(old, None)
            self._cached += len(view.known) - before
            view.length = max(view.length, length)
            if version is not None and ref is not None:
                view.refs[version] = ref
                while len(view.refs) > 8:
                    view.refs.popitem(last=False)
            if last is not None:
                prev = view.last
                if prev is not None and prev.lazy and prev.exact is not last.exact:
                    view.pending = [*view.pending, prev][-PENDING_LOADS:] if PENDING_LOADS else []
                view.last = last
            while self._cached > self.cache_items and len(self._views) > 1:
                _, old = self._views.popitem(last=False)
                self._cached -= len(old.known)

    def _forget(self, thread: Optional[str] = None) -> None:
        with self._lock:
            for where in [w for w in self._views if thread is None or w[0] == thread]:
                self._cached -= len(self._views.pop(where).known)
            for where in [w for w in self._indexes if thread is None or w[0] == thread]:
                del self._indexes[where]
            for where in [w for w in self._carried if thread is None or w[0] == thread]:
                del self._carried[where]

    def _known_index(self, where: tuple, newest: Optional[str], length: Optional[int]) -> None:
        """Remember a namespace's index as last read or written (bounded): its newest id and
        its length, taken together. The usual step appends its entry only to an index that is
        still that long (so no entry came since, and ``newest`` is still its greatest id): an
        index of another length sends it the way that reads the index and keeps it sorted.
        None: not known."""
        with self._lock:
            if newest is None or length is None:
                self._indexes.pop(where, None)
                return
            self._indexes[where] = (newest, length)
            self._indexes.move_to_end(where)
            while len(self._indexes) > 10_000:
                self._indexes.popitem(last=False)

    def _next_seq(self) -> int:
        """An increasing number per process (nanoseconds since the epoch, or one more)."""
        with self._lock:
            self._seq = max(self._seq + 1, time.time_ns())
            return self._seq

    # ---- put ---------------------------------------------------------------------------------------

    def _marks(self, items: Sequence[Any]) -> list:
        """The mark of each item's state: a 64-bit hash (Python's keyed SipHash) of its
        fingerprint (:mod:`.identity`) or, for an item that cannot tell, of what the
        serializer makes of it (an ``EncryptedSerializer``'s inner serializer: its ciphertext
        changes at each call). Kept small: the cache holds one int per item."""
        if not self.check_edits:
            return [0] * len(items)
        states: list = list(map(state_of, items))
        if None in states:
            serde = self.serde.serde if isinstance(self.serde, EncryptedSerializer) else self.serde
            for pos in [p for p, m in enumerate(states) if m is None]:
                kind, data = serde.dumps_typed(items[pos])
                states[pos] = (kind, bytes(data))  # bytes: a bytearray item comes back as one, unhashable
        return list(map(hash, states))

    def _marks_of(self, where: tuple, last: _Last) -> list:
        """The marks of ``last``'s items as they were when it was taken (the states a load
        read, not the states now: an item edited in place since must not match its stored
        item). Marks a load left untaken are made from its ``exact`` states, and the items of
        ``last`` and of the loads it replaced (``_View.pending``) are then learned by identity
        (:meth:`_learn`) for the walk item by item."""
        with self._lock:
            view = self._views.get(where)
            pending = view.pending if view is not None else []
            if view is not None:
                view.pending = []
        for old in pending:  # loads before the last one: their objects known by identity too
            if old is not last:
                self._take(where, old)
        return self._take(where, last)

    def _take(self, where: tuple, last: _Last) -> list:
        """:meth:`_marks_of` for one version."""
        n = last.lazy
        if not n:
            return last.marks
        if self.check_edits and last.exact is not None:  # the marks the items had when read (they may differ now)
            marks = list(map(hash, states_in(last.exact))) + last.marks[n:]
        else:  # no marks; or check_edits turned on after a load it was off for, which took no states:
            marks = [0] * len(last.items)  # the items are not known unchanged and are written again
        with self._lock:
            view = self._views.get(where)
            same_log = view is not None and view.gen == last.gen
        if same_log:
            self._learn(where, last.gen, list(zip(last.items, layout.expand(last.ranges), marks)), 0)
        last.marks, last.lazy = marks, 0
        return marks

    def _plan_list(self, thread: str, ns: str, channel: str, value: Any, version: Any, fresh: bool) -> _ListPlan:
        """Which items of a list version this process has stored or read, unchanged (the
        same object, the same fingerprint), and where; the others get rows to append. A
        version that starts with the last version's objects (what ``add_messages`` hands)
        takes its ranges as they are and is walked only over its new tail."""
        delta = isinstance(value, _DeltaSnapshot)
        items = list(value.value if delta else value)
        where = (thread, ns, channel)
        with self._lock:
            view = None if fresh else self._view(where)
            if view is not None and version is not None and version in view.refs:
                ref = view.refs[version]
                if ref.get("d", 0) == int(delta) and ref["n"] == len(items) and ref["g"] == view.gen:
                    # the log is checked as long as this process knows it (floor): a prune by
                    # another process may have rebuilt it under another name meanwhile
                    return _ListPlan(where, layout.log_key(ns, channel, ref["g"]), ref["g"], version, delta,
                                     items, [], [], [], view.length, ref=ref, reused=True)
            last = view.last if view is not None else None
        # Outside the lock: the pass over every item. A version that starts with the last one's
        # objects is proven unchanged over them by one fingerprint of the whole list (one
        # marshal call, one byte comparison), else item by item.
        fingerprint = print_of(items) if self.check_edits else None
        head, lazy = 0, 0
        base: list = []
        marks: Optional[list] = None
        exact: Optional[bytes] = None
        same = last is not None and len(items) >= len(last.items) and all(map(operator.is_, items, last.items))
        if last is not None and same and (not self.check_edits or extends(fingerprint, last.print)):
            head, base = len(last.items), last.ranges
            lazy, exact = last.lazy, last.exact  # marks a load left untaken stay so
            marks = last.marks + self._marks(items[head:])
        if marks is None:
            marks = self._marks(items)
            old = self._marks_of(where, last) if last is not None and not fresh else None
            if last is not None and same and old is not None and all(map(operator.eq, marks, old)):
                head, base = len(last.items), last.ranges
        with self._lock:
            view = None if fresh else self._view(where)
            if view is None or (head and view.last is not last):
                head, base = 0, []  # forgotten (or another version came) meanwhile: the whole walk
            known = view.known if view is not None else {}
            indexes, missing = [], []
            for pos in range(head, len(items)):
                obj = items[pos]
                hit = known.get(id(obj))
                if hit is not None and hit[0] is obj and hit[2] == marks[pos]:
                    indexes.append(hit[1])
                else:
                    indexes.append(-1)
                    missing.append(pos)
            gen = view.gen if view is not None else secrets.token_hex(4)
            floor = view.length if view is not None else 0
        rows = [to_row(self.serde, items[p]) for p in missing]
        return _ListPlan(where, layout.log_key(ns, channel, gen), gen, version, delta, items, indexes, missing,
                         rows, floor, marks=marks, head=head, base=base, print=fingerprint, lazy=lazy, exact=exact)

    def _prepare(self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata,
                 new_versions: ChannelVersions, fresh: set) -> tuple:
        thread, ns = self._where(config)
        parent = config["configurable"].get("checkpoint_id")
        values = checkpoint["channel_values"]
        versions = checkpoint.get("channel_versions", {})
        body = {k: v for k, v in checkpoint.items() if k != "channel_values"}
        record: dict = {
            "ns": ns,
            "id": checkpoint["id"],
            "parent": parent,
            "checkpoint": to_row(self.serde, body),
            "metadata": to_row(self.serde, get_serializable_checkpoint_metadata(config, metadata)),
            "values": {},
            "lists": {},
            "blobs": {},
        }
        blobs: dict[str, dict] = {}
        plans: list[_ListPlan] = []
        for ch, v in values.items():
            version = versions.get(ch, new_versions.get(ch))
            if _is_list(v):
                plans.append(self._plan_list(thread, ns, ch, v, version, (thread, ns, ch) in fresh))
            elif _inline(v) or version is None:
                record["values"][ch] = to_row(self.serde, v)
            else:
                record["blobs"][ch] = version
                if ch in new_versions:
                    blobs[layout.blob_key(ns, ch, new_versions[ch])] = to_row(self.serde, v)
        omitted = [ch for ch, v in versions.items()
                   if v is not None and ch not in values and ch not in new_versions] if parent else []
        if omitted and parent:  # (omitted only under a parent)
            self._carry_over(thread, ns, parent, omitted, versions, record, plans, fresh)
        return thread, ns, record, blobs, plans

    def _carry_over(self, thread: str, ns: str, parent: str, channels: Sequence[str], versions: Mapping,
                    record: dict, plans: list, fresh: set) -> None:
        """Channels a checkpoint names a version of but leaves out of its values: LangGraph
        writes a ``DeltaChannel``'s snapshot once, and the checkpoints after it that do not
        write the channel keep the snapshot's version and leave the value out. Each refers to
        what its parent holds for that same version, so it reads back with the value, as
        ``InMemorySaver`` and ``PostgresSaver`` load values by version (else every load
        walked the ancestors, and ``delete_for_runs`` of the run that wrote the snapshot lost
        the channel). A version the parent does not hold (the channel empty): nothing."""
        reread = any((thread, ns, ch) in fresh for ch in channels)  # a log rebuilt: the row as stored now
        source = self._parent_refs(thread, ns, parent, reread)
        if source is None:
            return
        held, refs = source
        for ch in channels:
            if held.get(ch) != versions[ch]:
                continue
            if ch in refs["lists"]:  # the same items: checked as long as the reference needs
                ref = refs["lists"][ch]
                with self._lock:
                    view = None if reread else self._view((thread, ns, ch))
                    floor = view.length if view is not None and view.gen == ref["g"] else layout.span_of(ref["r"])[1]
                plans.append(_ListPlan((thread, ns, ch), layout.log_key(ns, ch, ref["g"]), ref["g"], versions[ch],
                                       bool(ref.get("d")), [], [], [], [], floor, ref=ref, reused=True))
            elif ch in refs["values"]:
                record["values"][ch] = refs["values"][ch]
            elif ch in refs["blobs"]:
                record["blobs"][ch] = refs["blobs"][ch]

    def _parent_refs(self, thread: str, ns: str, parent: str, reread: bool) -> Optional[tuple[dict, dict]]:
        """The channel versions and references of checkpoint ``parent``: as this process last
        put or loaded it, else its row read (one statement); None when it has none."""
        with self._lock:
            hit = None if reread else self._carried.get((thread, ns))
        if hit is not None and hit[0] == parent:
            return hit[1], hit[2]
        key = layout.checkpoint_key(ns, parent)
        row = self.store.get(self.user_id, thread, key)
        if row is None:
            return None
        r = self._record(thread, key, row)
        return self._part(thread, r, "checkpoint").get("channel_versions", {}), _refs_of(r)

    def _remember(self, thread: str, ns: str, cid: str, versions: Mapping, record: dict) -> None:
        """The checkpoint just put or loaded in a namespace, for :meth:`_carry_over` (bounded)."""
        with self._lock:
            self._carried[(thread, ns)] = (cid, dict(versions), _refs_of(record))
            self._carried.move_to_end((thread, ns))
            while len(self._carried) > 10_000:
                self._carried.popitem(last=False)

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store a checkpoint in ONE transaction: the new items of its list channels appended
        to their logs, its other new channel values, its row, its place in the index. The
        usual step (this process stored the thread's newest checkpoint, and its logs are as
        long as it knows) is ONE ``store.append_lists``: the logs, the index, the blobs and the
        row together, one statement that carries its COMMIT when this process wrote the logs
        last (one round trip), else their hash rows locked, every row written, the COMMIT.

        Items of a list that this process already stored or read (the same objects, in the
        same state: see :attr:`check_edits`) are not serialised again: the new version refers
        to them; a version that extends the last one is walked only over its new tail.

        >>> from langgraph.checkpoint.base import empty_checkpoint
        >>> saver, config = MysqlSaver(store, user_id="alice"), {"configurable": {"thread_id": "saver-put-1"}}
        >>> saver.put(config, {**empty_checkpoint(), "channel_values": {"messages": messages}}, {"step": 0}, {})
        {'configurable': {'thread_id': 'saver-put-1', 'checkpoint_ns': '', 'checkpoint_id': '...'}}
        >>> saver.get_tuple(config).checkpoint["channel_values"]
        {'messages': [{'role': 'user', 'text': 'hi'}, {'role': 'assistant', 'text': 'hello'}]}
        >>> saver.close()
        """
        fresh: set = set()
        exact = True
        attempt = 0
        while True:
            attempt += 1
            thread, ns, record, blobs, plans = self._prepare(config, checkpoint, metadata, new_versions, fresh)
            with self._lock:
                newest, length = self._indexes.get((thread, ns), (None, None))
            try:
                if exact and newest is not None and checkpoint["id"] > newest:  # the usual step
                    assert length is not None  # known with newest
                    appends, at, values = self._exact(ns, record, blobs, plans, length)
                    self.store.append_lists(self.user_id, thread, appends, at=at, values=values)
                    known: dict = {"newest": checkpoint["id"], "ix": length + 1}
                else:
                    known = {}
                    self.store.transaction(lambda tx: self._put_tx(tx, thread, ns, record, blobs, plans, exact, known))
                break
            except StaleStateError as stale:
                if stale.key == layout.index_key(ns):  # another entry came: the index the slower way
                    self._known_index((thread, ns), None, None)
                elif stale.expected == stale.stored and any(p.key == stale.key for p in plans):
                    # as long, but another log (a copy over a deleted thread): the thread's other
                    # logs may be copies too, and what is known of them went with the rollback
                    fresh.update(p.where for p in plans)
                else:
                    exact = False  # a log is not as long as this process knew: read its length
            except _LogReset as reset:
                fresh.update(reset.channels)  # rebuilt by another process (prune): write them anew
            # each attempt learns something (a log rewritten, rebuilt or longer, the index): bounded
            if attempt >= 3 + len(plans):  # pragma: no cover - needs other writers at every attempt
                raise RuntimeError("put: the list logs kept being rebuilt under this put")
        for p in plans:
            if p.ref is not None:
                triples = [(p.items[pos], p.start + j, p.marks[pos]) for j, pos in enumerate(p.missing)]
                last = None if p.reused else _Last(p.items, p.marks, p.ref["r"], p.print, p.lazy, p.exact, p.gen)
                self._learn(p.where, p.gen, triples, p.start + len(p.missing), p.version, p.ref, last)
        self._known_index((thread, ns), known.get("newest"), known.get("ix"))
        self._remember(thread, ns, checkpoint["id"], checkpoint.get("channel_versions", {}), record)
        return {"configurable": {"thread_id": thread, "checkpoint_ns": ns, "checkpoint_id": checkpoint["id"]}}

    def _put_tx(self, tx: Any, thread: str, ns: str, record: dict, blobs: dict, plans: list,
                exact: bool, out: dict) -> None:
        u = self.user_id
        ix = layout.index_key(ns)
        cid, parent = record["id"], record["parent"]
        # The logs' new items appended together (their hash rows locked in one statement, the
        # rows written in one). ``exact``: each log is taken to be as long as this process knows
        # it, so the references (and the checkpoint row, the blobs) are known before and ride in
        # the same statement; a log of another length raises StaleStateError and put goes the
        # other way. Then the index: its tail read, the entry put where it keeps the index
        # sorted (``out["ix"]``: the index's length after, when known).
        if exact:
            appends, at, values = self._exact(ns, record, blobs, plans, None)
            tx.append_lists(u, thread, appends, at=at, values=values)
        else:
            appends = {p.key: p.rows for p in plans if not p.reused and p.rows}
            lengths = tx.append_lists(u, thread, appends) if appends else {}
            # every log rebuilt elsewhere at once, so that one more attempt writes them all anew
            reset = [p.where for p in plans if (lengths[p.key] - len(p.rows) < p.floor if not p.reused and p.rows
                                                else p.floor and tx.list_length(u, thread, p.key) < p.floor)]
            if reset:
                raise _LogReset(reset)
            for p in plans:
                self._refer(p, record, lengths[p.key] - len(p.rows) if p.key in lengths else 0)
            for key, row in blobs.items():
                tx.save(u, thread, key, row)
        n = tx.list_length(u, thread, ix)  # its hash row locked: another put of the thread waits
        tail = tx.get_list(u, thread, ix, offset=-1) if n else []
        if not tail or tail[-1][0] < cid:
            tx.append_list(u, thread, ix, [[cid, parent, n]])
            out.update(newest=cid, ix=n + 1)
        elif tail[-1][:2] == [cid, parent]:  # there already: the same put again
            out.update(newest=cid, ix=n)
        else:  # an older id than the newest, or the newest put again with another parent
            entries = _numbered([e for e in tx.get_list(u, thread, ix) if e[0] != cid] + [[cid, parent]])
            tx.save_list(u, thread, ix, entries)
            out.update(newest=entries[-1][0], ix=len(entries))
        if not exact:
            tx.save(u, thread, layout.checkpoint_key(ns, cid), record)

    def _exact(self, ns: str, record: dict, blobs: dict, plans: list, index: Optional[int]) -> tuple[dict, dict, dict]:
        """``append_lists``' ``(appends, at, values)`` for a put that takes each log to be as long
        as this process knows (the references, so the row, known before): the logs' new items
        (a log with none, or a version this process stored before, only checked), the blobs and
        the checkpoint row; and, when the id is known to be the newest, its index entry
        ``[id, parent, position]``, appended only if the index is still ``index`` long."""
        appends = {p.key: p.rows for p in plans if p.rows or p.floor}
        for p in plans:
            self._refer(p, record, p.floor)
        at = {p.key: p.floor for p in plans if p.key in appends}
        if index is not None:
            ix = layout.index_key(ns)
            appends[ix], at[ix] = [[record["id"], record["parent"], index]], index
        return appends, at, {**blobs, layout.checkpoint_key(ns, record["id"]): record}

    @staticmethod
    def _refer(p: _ListPlan, record: dict, start: int) -> None:
        """The plan's reference (its items' ranges in the log, its new items from ``start``),
        into the checkpoint row."""
        if not p.reused:
            p.start = start
            fill = iter(range(start, start + len(p.rows)))
            indexes = [i if i >= 0 else next(fill) for i in p.indexes]
            p.ref = {"g": p.gen, "r": layout.ranges_of(indexes, p.base), "n": p.head + len(indexes)}
            if p.delta:
                p.ref["d"] = 1
        record["lists"][p.where[2]] = p.ref

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store a task's writes beside the checkpoint: one row per call, a new key created in
        one statement (``store.save_if_version(..., 0)``) and its COMMIT.

        Write indexes are LangGraph's: the position in ``writes``, or ``WRITES_IDX_MAP``'s
        negative index for the special channels (error, interrupt, resume, scheduled). Read
        back, a regular write stored twice counts once (the first), a special one is replaced
        (the last), as in LangGraph's own savers: a special write has a row per (task, index)
        that each call writes over, so the last one committed wins whichever process, and
        whichever clock, wrote it.

        >>> from langgraph.checkpoint.base import empty_checkpoint
        >>> saver = MysqlSaver(store, user_id="alice")
        >>> config = saver.put({"configurable": {"thread_id": "saver-writes-1"}}, empty_checkpoint(), {"step": 0}, {})
        >>> saver.put_writes(config, [("topic", "dogs")], task_id="task-1")
        >>> saver.get_tuple(config).pending_writes  # (task id, channel, value)
        [('task-1', 'topic', 'dogs')]
        >>> saver.close()
        """
        thread, ns = self._where(config)
        cid = config["configurable"]["checkpoint_id"]
        rows: list[dict[str, Any]] = [{"i": WRITES_IDX_MAP.get(ch, i), "ch": ch, "v": to_row(self.serde, v)}
                                      for i, (ch, v) in enumerate(writes)]
        regular = [r for r in rows if r["i"] >= 0]
        special = {layout.special_write_key(ns, cid, str(task_id), r["i"]):
                   {"cp": cid, "task": task_id, "path": task_path, "w": [r]} for r in rows if r["i"] < 0}
        if regular:
            key = layout.writes_key(ns, cid, str(task_id), self._next_seq())
            row = {"cp": cid, "task": task_id, "path": task_path, "w": regular}
            if special:  # both, in one transaction
                self.store.save_many(self.user_id, thread, values={key: row, **special})
            # a new key (a per-process increasing number): created in one statement and its
            # COMMIT; there already (the same call made again), written over as before
            elif self.store.save_if_version(self.user_id, thread, key, row, 0) == UNVERSIONED:
                self.store.save(self.user_id, thread, key, row)
        elif special:
            self.store.save_many(self.user_id, thread, values=special)

    # ---- reading checkpoints -------------------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> Optional[CheckpointTuple]:
        """The checkpoint ``config`` names (its ``checkpoint_id``, else the namespace's newest,
        i.e. the greatest id), with its pending writes in ``writes_sort_key`` order; None when
        there is none. The items it reads are remembered, so the next put of the thread in
        this process does not serialise them again.

        >>> from langgraph.checkpoint.base import empty_checkpoint
        >>> saver, config = MysqlSaver(store, user_id="alice"), {"configurable": {"thread_id": "saver-get-tuple-1"}}
        >>> print(saver.get_tuple(config))  # no checkpoint yet
        None
        >>> saved = saver.put(config, {**empty_checkpoint(), "channel_values": {"topic": "cats"}}, {"step": 0}, {})
        >>> tup = saver.get_tuple(config)  # the newest; ``saved`` names this one by its id
        >>> tup.checkpoint["channel_values"], tup.metadata, tup.config == saved, saver.get_tuple(saved) == tup
        ({'topic': 'cats'}, {'step': 0}, True, True)
        >>> saver.close()
        """
        thread, ns = self._where(config)
        u = self.user_id
        for attempt in range(READ_ATTEMPTS):
            cid = get_checkpoint_id(config)
            if not cid:
                tail = self._entries(thread, ns, self.store.get_list(u, thread, layout.index_key(ns), offset=-4))
                if not tail:
                    if self._no_index(thread, ns):
                        return None
                    if attempt == READ_ATTEMPTS - 1:  # checkpoint rows, and no index lists them: damage
                        raise self._unindexed(thread, ns)
                    continue  # the first put of the thread came between the two reads: read again
                cid = max(e[0] for e in tail)
                self._known_index((thread, ns), cid, _length_by(tail[-1]))
            key = layout.checkpoint_key(ns, cid)
            record = self.store.get(u, thread, key)
            if record is None:
                if get_checkpoint_id(config):  # an id the caller names: none such, unless the index lists it
                    if cid in {e[0] for e in self._index(thread, ns)}:
                        self._missing(thread, [key])
                    return None
                if attempt == READ_ATTEMPTS - 1:  # the index lists it, the row is not there: damage
                    self._missing(thread, [key])
                continue  # the newest one, pruned or deleted between the two reads: read again
            try:
                return self._load(thread, [self._record(thread, key, record)], learn=True)[0]
            except _LogShort:  # the row and its log read apart: another process pruned or deleted between
                if attempt == READ_ATTEMPTS - 1:
                    raise
        return None  # pragma: no cover - the loop returns or raises

    def _load(self, thread: str, records: Sequence[dict], *, learn: bool = False) -> list[CheckpointTuple]:
        """Checkpoint tuples of rows of one thread: their blobs and pending writes in one
        statement, each list log in one more (the window the rows refer to)."""
        u = self.user_id
        blob_keys = sorted({layout.blob_key(r["ns"], ch, v) for r in records for ch, v in r.get("blobs", {}).items()})
        found = self.store.get_many(u, thread, values=blob_keys) if blob_keys else {}
        writes = self._writes(thread, [(r["ns"], r["id"]) for r in records])
        spans: dict[str, list] = {}
        for r in records:
            for ch, ref in r.get("lists", {}).items():
                lo, hi = layout.span_of(ref["r"])
                if hi > lo:
                    k = layout.log_key(r["ns"], ch, ref["g"])
                    s = spans.setdefault(k, [lo, hi, (thread, r["ns"], ch), ref["g"]])
                    s[0], s[1] = min(s[0], lo), max(s[1], hi)
        logs = {k: (lo, self._window(thread, k, lo, hi, where, gen)) for k, (lo, hi, where, gen) in spans.items()}
        out = []
        for r in records:
            values: dict[str, Any] = {}
            for ch, row in r.get("values", {}).items():
                values[ch] = self._decode(thread, layout.checkpoint_key(r["ns"], r["id"]), row)
            for ch, version in r.get("blobs", {}).items():
                bk = layout.blob_key(r["ns"], ch, version)
                if bk in found:
                    values[ch] = self._decode(thread, bk, found[bk])
            for ch, ref in r.get("lists", {}).items():
                values[ch] = self._list_value(thread, r["ns"], ch, ref, logs, learn)
            out.append(self._tuple(thread, r, values, writes[(r["ns"], r["id"])]))
            if learn:  # each list's version as read: a put naming it again refers to it, as stored
                versions = out[-1].checkpoint.get("channel_versions", {})
                self._remember(thread, r["ns"], r["id"], versions, r)
                for ch, ref in r.get("lists", {}).items():
                    if versions.get(ch) is not None:
                        self._learn((thread, r["ns"], ch), ref["g"], [], 0, versions[ch], ref)
        return out

    def _window(self, thread: str, key: str, lo: int, hi: int, where: tuple, gen: str) -> list:
        """The rows ``[lo, hi)`` of the list log ``key`` (of channel ``where``, generation
        ``gen``). A window from the start that reaches as far as this process knows the log to
        be long (the usual load: the newest checkpoint refers to the whole log) is read as the
        whole list: the store then sends only the items after those its last whole read of
        the log saw (:func:`mysql_state.list_read.check_since`), not every item again at every
        load. Any other window, or a log this process knows nothing of, is read as a window."""
        with self._lock:
            view = self._views.get(where)
            known = view.length if view is not None and view.gen == gen else None
        if lo == 0 and known is not None and hi >= known:
            return self.store.get_list(self.user_id, thread, key)[:hi]
        return self.store.get_list(self.user_id, thread, key, offset=lo, limit=hi - lo)

    def _list_value(self, thread: str, ns: str, ch: str, ref: dict, logs: dict, learn: bool) -> Any:
        k = layout.log_key(ns, ch, ref["g"])
        indexes = layout.expand(ref["r"])
        items: list = []
        if indexes:
            lo, rows = logs[k]
            if max(indexes) - lo >= len(rows):
                short = self._corrupt(thread, k, ValueError(
                    f"the list log has {lo + len(rows)} items, a checkpoint refers to item {max(indexes)}"))
                raise _LogShort(str(short), short.session_id, short.key) from None
            order = list(dict.fromkeys(indexes))  # each item decoded once, all in one call
            try:
                decoded = dict(zip(order, from_rows(self.serde, [rows[i - lo] for i in order])))
            except RowError as exc:
                raise self._corrupt(thread, k, exc) from exc
            items = [decoded[i] for i in indexes]
            if learn and self.cache_items > 0:
                exact = exact_of(items) if self.check_edits else None
                if exact is not None or not self.check_edits:  # the marks taken when a put needs them
                    last = _Last(list(items), [None] * len(items), ref["r"],
                                 print_of(items) if self.check_edits else None, len(items), exact, ref["g"])
                    self._learn((thread, ns, ch), ref["g"], [], max(indexes) + 1, last=last)
                else:  # items no fingerprint covers: their marks now, item by item
                    marks = dict(zip(decoded, self._marks(list(decoded.values()))))
                    self._learn((thread, ns, ch), ref["g"], [(decoded[i], i, marks[i]) for i in decoded],
                                max(indexes) + 1, last=_Last(list(items), [marks[i] for i in indexes], ref["r"]))
        return _DeltaSnapshot(items) if ref.get("d") else items

    def _tuple(self, thread: str, r: dict, values: dict, writes: list) -> CheckpointTuple:
        checkpoint, metadata = self._part(thread, r, "checkpoint"), self._part(thread, r, "metadata")
        checkpoint["channel_values"] = values
        conf = {"thread_id": thread, "checkpoint_ns": r["ns"]}
        parent = r.get("parent")
        return CheckpointTuple(
            config={"configurable": {**conf, "checkpoint_id": r["id"]}},
            checkpoint=cast(Checkpoint, checkpoint),  # the body put stored, decoded: a map (_part)
            metadata=cast(CheckpointMetadata, metadata),
            parent_config={"configurable": {**conf, "checkpoint_id": parent}} if parent else None,
            pending_writes=self._pending(thread, layout.writes_prefix(r["ns"], r["id"]), writes),
        )

    def _pending(self, thread: str, key: str, rows: Sequence[dict]) -> list:
        """Stored writes as LangGraph's pending writes: one per (task, index), sorted."""
        chosen: dict[tuple, dict] = {}
        for w in rows:
            k = (w["task"], w["i"])
            if w["i"] < 0 or k not in chosen:
                chosen[k] = w
        ordered = sorted(chosen.values(), key=lambda w: writes_sort_key(w.get("path", ""), w["task"], w["i"]))
        return [(w["task"], w["ch"], self._decode(thread, key, w["v"])) for w in ordered]

    def _writes(self, thread: str, wanted: Sequence[tuple[str, str]]) -> dict[tuple, list]:
        """The stored writes of checkpoints ``(ns, id)``, each call's in key (arrival) order: a
        key-range read per checkpoint for a few, of the whole namespace for more."""
        out: dict[tuple, list] = {w: [] for w in wanted}
        by_ns: dict[str, list] = {}
        for ns, cid in out:
            by_ns.setdefault(ns, []).append(cid)
        for ns, ids in by_ns.items():
            prefixes = [layout.writes_prefix(ns, c) for c in ids] if len(ids) <= 4 else [layout.writes_prefix(ns)]
            for prefix in prefixes:
                for key, row in self.store.get_prefix(self.user_id, thread, prefix).items():
                    fault = layout.writes_fault(row)
                    if fault is not None:
                        raise self._corrupt(thread, key, ValueError(fault))
                    found = out.get((ns, row.get("cp")))
                    if found is not None:
                        found.extend({"task": row["task"], "path": row.get("path") or "", **w} for w in row["w"])
        return out

    def _index(self, thread: str, ns: str) -> list:
        return self._entries(thread, ns, self.store.get_list(self.user_id, thread, layout.index_key(ns)))

    def _no_index(self, thread: str, ns: str) -> bool:
        """Whether a namespace whose index reads empty has no checkpoint row either (a new
        thread); rows without an index are damage (they would read as no checkpoint yet, and the
        next put would start the conversation anew over them), reported when they stay so."""
        rows = self.store.get_prefix(self.user_id, thread, layout.checkpoint_prefix(ns))
        return not rows

    def _records(self, thread: str, ns: str, ids: Sequence[str]) -> list[dict]:
        """Checkpoint rows by id, in the order given, one statement. Ids read from the index
        whose rows are missing: left out when the index no longer lists them (a prune or a
        delete by another process between the two reads), else read once more, and a row the
        index lists that is still missing is damage (:class:`CorruptStateError`), never a
        checkpoint silently left out."""
        wanted = [layout.checkpoint_key(ns, i) for i in ids]
        found = self.store.get_many(self.user_id, thread, values=wanted) if wanted else {}
        if len(found) < len(wanted):
            listed = {e[0] for e in self._index(thread, ns)}
            gone = [k for i, k in zip(ids, wanted) if k not in found and i in listed]
            if gone:
                found.update(self.store.get_many(self.user_id, thread, values=gone))
                self._missing(thread, [k for k in gone if k not in found])
        return [self._record(thread, k, found[k]) for k in wanted if k in found]

    def _unindexed(self, thread: str, ns: str) -> CorruptStateError:
        sid = keys.pack(self.user_id, thread)
        ix = layout.index_key(ns)
        return CorruptStateError(f"LangGraph thread of session {sid!r} has checkpoint rows but no index {ix!r} "
                                 "listing them: the index was deleted behind the saver's back (restore it from a "
                                 "backup, or delete_thread and start again)", sid, ix)

    def _missing(self, thread: str, lost: Sequence[str]) -> None:
        """Checkpoint rows the thread's index lists and the table does not hold: damage."""
        if lost:
            sid = keys.pack(self.user_id, thread)
            raise CorruptStateError(f"LangGraph checkpoint row {lost[0]!r} of session {sid!r} is missing, but the "
                                    "thread's index lists it: the row was deleted behind the saver's back (doctor, "
                                    "or delete_thread and start again)", sid, lost[0])

    def _namespaces(self, thread: str) -> list[str]:
        rows = self.store.get_prefix(self.user_id, thread, layout.RECORDS)
        return sorted({r["ns"] for r in rows.values() if isinstance(r, dict) and "ns" in r})

    def list(
        self,
        config: Optional[RunnableConfig],
        *,
        filter: Optional[dict[str, Any]] = None,
        before: Optional[RunnableConfig] = None,
        limit: Optional[int] = None,
    ) -> Iterator[CheckpointTuple]:
        """Checkpoints newest first (descending id): of the thread of ``config`` (of its
        ``checkpoint_ns`` when given, else of all; only its ``checkpoint_id`` when given), or
        of every thread of the saver's user when ``config`` is None; ``filter`` keeps those
        whose metadata has these values, ``before`` those with a smaller id than its
        checkpoint, ``limit`` the first ones. Rows are read a page at a time.

        >>> from langgraph.checkpoint.base import empty_checkpoint
        >>> saver, config = MysqlSaver(store, user_id="alice"), {"configurable": {"thread_id": "saver-list-1"}}
        >>> first = saver.put(config, empty_checkpoint(), {"step": 0}, {})
        >>> second = saver.put(first, empty_checkpoint(), {"step": 1}, {})  # a child of the first
        >>> steps = lambda **kw: [t.metadata["step"] for t in saver.list(config, **kw)]
        >>> steps(), steps(limit=1), steps(filter={"step": 0}), steps(before=second)
        ([1, 0], [1], [0], [0])
        >>> saver.close()
        """
        if config is None:
            threads = sorted(self.store.list_session_ids(self.user_id) - {layout.MEMORY_SESSION})
            conf: Mapping[str, Any] = {}
        else:
            conf = config["configurable"]
            threads = [layout.thread_of(conf["thread_id"])]
        want_ns = conf.get("checkpoint_ns")
        want_id = conf.get("checkpoint_id")
        before_id = get_checkpoint_id(before) if before else None
        left = limit
        for thread in threads:
            namespaces = [want_ns] if want_ns is not None else self._namespaces(thread)
            # an id indexed twice (a put retried after its COMMIT's answer was lost) is listed once
            entries = sorted({(e[0], ns) for ns in namespaces for e in self._index(thread, ns)}, reverse=True)
            entries = [e for e in entries if (not want_id or e[0] == want_id) and (not before_id or e[0] < before_id)]
            for start in range(0, len(entries), PAGE):
                if left is not None and left <= 0:
                    return
                page = entries[start:start + PAGE]
                for attempt in range(READ_ATTEMPTS):
                    records = []
                    for ns in dict.fromkeys(ns for _, ns in page):
                        records += self._records(thread, ns, [i for i, n in page if n == ns])
                    records.sort(key=lambda r: r["id"], reverse=True)
                    if filter:
                        records = [r for r in records if self._matches(thread, r, filter)]
                    if left is not None:
                        records = records[:left]
                    try:
                        loaded = self._load(thread, records) if records else []
                        break
                    except _LogShort:  # read apart from their log, which a prune or delete moved
                        if attempt == READ_ATTEMPTS - 1:
                            raise
                if left is not None:
                    left -= len(loaded)
                yield from loaded

    def _matches(self, thread: str, record: dict, filter: Mapping[str, Any]) -> bool:
        metadata = self._part(thread, record, "metadata")
        return all(metadata.get(k) == v for k, v in filter.items())

    # ---- DeltaChannel ------------------------------------------------------------------------------

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """Per channel, the writes of the target's ancestors (oldest first) back to the nearest
        one that stores the channel's value (its ``seed``), as LangGraph's base method walks
        them, in a bounded number of statements: the index, the ancestors' rows a page of
        64 per statement, then every needed write list and seed in one statement.

        >>> from langgraph.checkpoint.base import empty_checkpoint
        >>> saver = MysqlSaver(store, user_id="alice")
        >>> config = {"configurable": {"thread_id": "saver-delta-1"}}
        >>> first = saver.put(config, {**empty_checkpoint(), "channel_values": {"log": ["a"]}}, {"step": 0}, {})
        >>> saver.put_writes(first, [("log", "b")], task_id="task-1")  # a delta written after the snapshot
        >>> second = saver.put(first, empty_checkpoint(), {"step": 1}, {})
        >>> saver.get_delta_channel_history(config=second, channels=["log"])
        {'log': {'writes': [('task-1', 'log', 'b')], 'seed': ['a']}}
        >>> saver.close()
        """
        if not channels:
            return {}
        channels = list(channels)
        thread, ns = self._where(config)
        entries = self._index(thread, ns)
        parent_of = {e[0]: e[1] for e in entries}
        target = get_checkpoint_id(config) or max(parent_of, default=None)
        chain: list[str] = []
        current = parent_of.get(target) if target in parent_of else None
        while current is not None and current in parent_of and len(chain) <= len(parent_of):
            chain.append(current)
            current = parent_of[current]
        remaining = set(channels)
        records: list[dict] = []
        seed_at: dict[str, dict] = {}
        for start in range(0, len(chain), PAGE):
            if not remaining:
                break
            for r in self._records(thread, ns, chain[start:start + PAGE]):
                if not remaining:
                    break
                records.append(r)
                for ch in list(remaining):
                    if ch in r.get("values", {}) or ch in r.get("lists", {}) or ch in r.get("blobs", {}):
                        seed_at[ch] = r
                        remaining.discard(ch)
        seeds = list({id(r): r for r in seed_at.values()}.values())
        loaded = {r["id"]: t for r, t in zip(seeds, self._load(thread, seeds))} if seeds else {}
        found = self._writes(thread, [(ns, r["id"]) for r in records])
        collected: dict[str, list] = {ch: [] for ch in channels}
        open_ = set(channels)
        for r in records:
            wk = layout.writes_prefix(ns, r["id"])
            for w in reversed(self._pending(thread, wk, found[(ns, r["id"])])):
                if w[1] in open_:
                    collected[w[1]].append(w)
            for ch in [c for c in open_ if seed_at.get(c) is r]:
                open_.discard(ch)
        result: dict[str, DeltaChannelHistory] = {}
        for ch in channels:
            entry: DeltaChannelHistory = {"writes": list(reversed(collected[ch]))}
            seeded = loaded[seed_at[ch]["id"]].checkpoint["channel_values"] if ch in seed_at else {}
            if ch in seeded:
                entry["seed"] = seeded[ch]
            result[ch] = entry
        return result

    # ---- deleting, copying, pruning ------------------------------------------------------------

    def delete_thread(self, thread_id: str) -> None:
        """Delete the thread: its session, every row of it (one statement).

        >>> from langgraph.checkpoint.base import empty_checkpoint
        >>> saver, config = MysqlSaver(store, user_id="alice"), {"configurable": {"thread_id": "saver-delete-1"}}
        >>> _ = saver.put(config, empty_checkpoint(), {"step": 0}, {})
        >>> saver.delete_thread("saver-delete-1")
        >>> saver.get_tuple(config) is None, store.exists("alice", "saver-delete-1")
        (True, False)
        >>> saver.close()
        """
        thread = layout.thread_of(thread_id)
        self.store.delete(self.user_id, thread)
        self._forget(thread)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every checkpoint, write and list log of a thread to a new thread, server-side
        in ONE statement (the store's ``fork``): the whole parent chain, so delta channels
        rebuild on the copy. A source with no rows copies nothing; an existing target raises
        :class:`SessionExistsError` and nothing is written.

        >>> from langgraph.checkpoint.base import empty_checkpoint
        >>> saver, config = MysqlSaver(store, user_id="alice"), {"configurable": {"thread_id": "saver-copy-1"}}
        >>> _ = saver.put(config, {**empty_checkpoint(), "channel_values": {"topic": "cats"}}, {"step": 0}, {})
        >>> saver.copy_thread("saver-copy-1", "saver-copy-2")
        >>> saver.get_tuple({"configurable": {"thread_id": "saver-copy-2"}}).checkpoint["channel_values"]
        {'topic': 'cats'}
        >>> saver.close()
        """
        try:
            self.store.fork(self.user_id, layout.thread_of(source_thread_id), layout.thread_of(target_thread_id))
        except SessionNotFoundError:
            return

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the checkpoints (and their writes) whose metadata ``run_id`` is one of
        ``run_ids``, in every thread of the saver's user: one transaction per thread touched.
        It reads every checkpoint row of the user (as a metadata scan does in other savers).
        Channel values and list items they alone used stay until :meth:`prune`.

        >>> from langgraph.checkpoint.base import empty_checkpoint
        >>> saver, config = MysqlSaver(store, user_id="alice"), {"configurable": {"thread_id": "saver-runs-1"}}
        >>> first = saver.put(config, empty_checkpoint(), {"step": 0, "run_id": "run-1"}, {})
        >>> _ = saver.put(first, empty_checkpoint(), {"step": 1, "run_id": "run-2"}, {})
        >>> saver.delete_for_runs(["run-1"])
        >>> [t.metadata["run_id"] for t in saver.list(config)]
        ['run-2']
        >>> saver.close()
        """
        if isinstance(run_ids, str):
            raise TypeError("run_ids must be a sequence of run ids, not one str")
        runs = {str(r) for r in run_ids}
        if not runs:
            return
        for thread in sorted(self.store.list_session_ids(self.user_id) - {layout.MEMORY_SESSION}):
            rows = self.store.get_prefix(self.user_id, thread, layout.RECORDS)
            doomed = [r for k, r in rows.items()
                      if self._part(thread, self._record(thread, k, r), "metadata").get("run_id") in runs]
            if doomed:
                prefixes = tuple(layout.writes_prefix(r["ns"], r["id"]) for r in doomed)
                writes = [k for k in self.store.get_prefix(self.user_id, thread, "wr/") if k.startswith(prefixes)]
                self.store.transaction(lambda tx: self._drop_tx(tx, thread, doomed, writes))

    def _drop_tx(self, tx: Any, thread: str, doomed: Sequence[dict], writes: Sequence[str]) -> None:
        u = self.user_id
        by_ns: dict[str, set] = {}
        doomed_keys: list[str] = []
        for r in doomed:
            by_ns.setdefault(r["ns"], set()).add(r["id"])
        for ns, ids in by_ns.items():
            ix = layout.index_key(ns)
            entries = tx.get_list(u, thread, ix)
            kept = [[e[0], e[1], i] for i, e in enumerate(x for x in entries if x[0] not in ids)]  # positions anew
            if len(kept) != len(entries):
                if kept:
                    tx.save_list(u, thread, ix, kept, maintenance=True)
                else:
                    tx.delete(u, thread, ix, maintenance=True)
            doomed_keys += [layout.checkpoint_key(ns, cid) for cid in sorted(ids)]
        tx.delete_keys(u, thread, doomed_keys + list(writes), maintenance=True)

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest",
              progress: Optional[Callable[[int, int], None]] = None) -> None:
        """Prune threads. ``"delete"`` removes them whole, in one transaction.

        ``"keep_latest"`` keeps, per namespace, the newest checkpoint with its pending writes,
        the values it refers to and only the list items it uses (each log rewritten compact),
        and deletes the rest; a kept checkpoint whose parent goes is left with no parent. It
        is ``DeltaChannel``-aware, as LangGraph requires: for each delta channel the kept
        checkpoint does not store (its metadata's ``counters_since_delta_snapshot``), the
        ancestors back to the one holding the channel's snapshot are kept too, with their
        writes, so the channel rebuilds as before. One transaction per thread; a thread
        written meanwhile is read again and pruned on what it holds then.

        ``progress(done, total)`` (keyword-only, as LangGraph's signature has no such argument)
        before the first thread, then after each thread's transaction (``"delete"``: after its
        one): ``done`` the threads pruned, ``total`` the threads given. A callback that raises
        stops the prune there, the threads before it pruned (each whole): run it again to finish.

        >>> from langgraph.checkpoint.base import empty_checkpoint
        >>> saver, config = MysqlSaver(store, user_id="alice"), {"configurable": {"thread_id": "saver-prune-1"}}
        >>> first = saver.put(config, empty_checkpoint(), {"step": 0}, {})
        >>> _ = saver.put(first, empty_checkpoint(), {"step": 1}, {})
        >>> saver.prune(["saver-prune-1"], progress=lambda done, total: print(f"{done}/{total} threads"))  # keep_latest
        0/1 threads
        1/1 threads
        >>> [(t.metadata["step"], t.parent_config) for t in saver.list(config)]  # the kept one has no parent now
        [(1, None)]
        >>> saver.prune(["saver-prune-1"], strategy="delete"); store.exists("alice", "saver-prune-1")
        False
        >>> saver.close()
        """
        if isinstance(thread_ids, str):
            raise TypeError("thread_ids must be a sequence of thread ids, not one str")
        if strategy not in PRUNE_STRATEGIES:
            raise ValueError(f"unknown prune strategy {strategy!r}: use one of {', '.join(PRUNE_STRATEGIES)}")
        args.callback(progress, "progress")
        threads = [layout.thread_of(t) for t in thread_ids]
        for t in threads:
            keys.pack(self.user_id, t)
        total = len(threads)
        if progress is not None:
            progress(0, total)
        if not threads:
            return
        if strategy == "delete":
            def delete(tx: Any) -> None:
                for t in threads:
                    tx.delete(self.user_id, t)

            self.store.transaction(delete)
            for t in threads:
                self._forget(t)
            if progress is not None:
                progress(total, total)
            return
        for done, t in enumerate(threads, 1):
            self._keep_latest(t)
            self._forget(t)  # before the callback, which may raise: this thread is pruned
            if progress is not None:
                progress(done, total)

    def _keep_latest(self, thread: str) -> None:
        u = self.user_id
        for attempt in range(PRUNE_ATTEMPTS):
            rows = {k: r for k, r in self.store.get_prefix(u, thread, "").items() if k.startswith(layout.OWN_VALUES)}
            records = {k: r for k, r in rows.items() if k.startswith(layout.RECORDS)}
            if not records:
                return
            by_ns: dict[str, dict[str, dict]] = {}
            for k, r in records.items():
                r = self._record(thread, k, r)
                by_ns.setdefault(r["ns"], {})[r["id"]] = r
            indexes = {ns: self._index(thread, ns) for ns in by_ns}
            newest = {ns: max((e[0] for e in indexes[ns]), default=None) for ns in by_ns}  # None: no index
            unlisted = [ns for ns in by_ns if newest[ns] not in by_ns[ns]]
            if unlisted:  # the newest entry's row is not there, or no index: read again, then damage
                if attempt == PRUNE_ATTEMPTS - 1:
                    ns = unlisted[0]
                    top = newest[ns]
                    if top is None:
                        raise self._unindexed(thread, ns)
                    self._missing(thread, [layout.checkpoint_key(ns, top)])
                continue
            # every newest id is a record's now (unlisted is empty): none is None
            kept: dict[str, builtins.list[dict]] = {ns: self._kept(thread, recs, recs[cast(str, newest[ns])])
                                                   for ns, recs in by_ns.items()}
            plan = self._compaction(thread, kept)
            if self.store.transaction(lambda tx: self._prune_tx(tx, thread, rows, indexes, kept, plan)):
                return
        raise RuntimeError(f"prune: thread {thread!r} kept changing while being pruned; try again")

    def _kept(self, thread: str, records: dict[str, dict], latest: dict) -> builtins.list[dict]:
        """The newest checkpoint of a namespace (``latest``, one of its ``records``) and the
        ancestors its delta channels need."""
        metadata = self._part(thread, latest, "metadata")
        self._part(thread, latest, "checkpoint")  # what is kept must read: a damaged one is not pruned to
        stored = lambda r, ch: ch in r.get("values", {}) or ch in r.get("lists", {}) or ch in r.get("blobs", {})  # noqa: E731
        need = {ch for ch in (metadata.get("counters_since_delta_snapshot") or {}) if not stored(latest, ch)}
        out = [latest]
        current = latest.get("parent")
        while need and current in records and len(out) <= len(records):
            r = records[current]
            out.append(r)
            need = {ch for ch in need if not stored(r, ch)}
            current = r.get("parent")
        return out

    def _compaction(self, thread: str, kept: dict[str, builtins.list[dict]]) -> dict:
        """New logs holding only the items the kept checkpoints use: ``{old key: (new key,
        rows, {old index: new index})}``, only for logs with unused items."""
        u = self.user_id
        used: dict[tuple, set] = {}
        for ns, recs in kept.items():
            for r in recs:
                for ch, ref in r.get("lists", {}).items():
                    used.setdefault((ns, ch, ref["g"]), set()).update(layout.expand(ref["r"]))
        plan: dict[str, tuple] = {}
        for (ns, ch, gen), indexes in used.items():
            old = layout.log_key(ns, ch, gen)
            length = self.store.list_length(u, thread, old)
            if len(indexes) == length:
                continue
            new_gen = secrets.token_hex(4)
            if not indexes:  # the kept checkpoints hold the list empty: a new, empty log
                plan[old] = (layout.log_key(ns, ch, new_gen), new_gen, [], {})
                continue
            lo, hi = min(indexes), max(indexes) + 1
            window = self.store.get_list(u, thread, old, offset=lo, limit=hi - lo)
            if len(window) != hi - lo:  # the checkpoints refer to items the log does not hold
                sid = keys.pack(u, thread)
                raise CorruptStateError(f"LangGraph list log {old!r} of session {sid!r} holds {lo + len(window)} "
                                        f"items, but the kept checkpoints refer to item {hi - 1}", sid, old)
            order = sorted(indexes)
            plan[old] = (layout.log_key(ns, ch, new_gen), new_gen, [window[i - lo] for i in order],
                         {i: j for j, i in enumerate(order)})
        return plan

    def _prune_tx(self, tx: Any, thread: str, rows: dict, indexes: dict, kept: dict, plan: dict) -> bool:
        u = self.user_id
        for ns, entries in indexes.items():  # locks the indexes: puts wait; changed: read again
            if tx.get_list(u, thread, layout.index_key(ns)) != entries:
                return False
        keep_keys: set[str] = set()
        for ns, recs in kept.items():
            ids = {r["id"] for r in recs}
            for r in recs:
                r = dict(r, lists=dict(r.get("lists", {})))
                if r.get("parent") not in ids:
                    r["parent"] = None
                for ch, ref in r["lists"].items():
                    old = layout.log_key(ns, ch, ref["g"])
                    if old in plan:
                        new_key, gen, _, moved = plan[old]
                        r["lists"][ch] = dict(ref, g=gen, r=layout.ranges_of([moved[i] for i in layout.expand(ref["r"])]))
                        keep_keys.add(new_key)
                    else:
                        keep_keys.add(old)
                ck = layout.checkpoint_key(ns, r["id"])
                keep_keys.add(ck)
                keep_keys |= {k for k in rows if k.startswith(layout.writes_prefix(ns, r["id"]))}
                keep_keys |= {layout.blob_key(ns, ch, v) for ch, v in r.get("blobs", {}).items()}
                if r != rows.get(ck):
                    tx.save(u, thread, ck, r, maintenance=True)
            ix = layout.index_key(ns)
            new_index = _numbered([[r["id"], r["parent"]] for r in recs])
            keep_keys.add(ix)
            if new_index != indexes[ns]:
                tx.save_list(u, thread, ix, new_index, maintenance=True)
        for old, (new_key, _, items, _) in plan.items():
            tx.save_list(u, thread, new_key, items, maintenance=True)
        # everything else the thread holds: checkpoints, writes, values and logs no longer used
        doomed = set(rows) - keep_keys
        doomed |= {layout.log_key(r["ns"], ch, ref["g"]) for k, r in rows.items()
                   if k.startswith(layout.RECORDS) and isinstance(r, dict)
                   for ch, ref in r.get("lists", {}).items()} - keep_keys
        tx.delete_keys(u, thread, sorted(doomed), maintenance=True)
        return True

    # ---- versions ----------------------------------------------------------------------------------

    def get_next_version(self, current: Optional[str], channel: None) -> str:
        """LangGraph's version scheme (as its in-memory and Postgres savers): an increasing
        counter and a random fraction, so versions written on two forks of a thread differ.

        >>> saver = MysqlSaver(store)
        >>> saver.get_next_version(None, None)
        '00000000000000000000000000000001.0...'
        >>> saver.get_next_version("00000000000000000000000000000001.0.5", None)  # the counter goes on
        '00000000000000000000000000000002.0...'
        >>> saver.close()
        """
        if current is None:
            current_v = 0
        elif isinstance(current, int):
            current_v = current
        else:
            current_v = int(str(current).split(".")[0])
        return f"{current_v + 1:032}.{random.random():016}"

    # ---- async twins: the sync methods in a bounded thread pool --------------------------------

    async def _run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        # As the async store runs its operations (aio.run_in): a cancelled aput that already
        # runs ends before the cancellation reaches the caller, never after the next write.
        if self._closed:
            raise StoreClosedError("this MysqlSaver is closed (close() was called); it runs no new operation")
        return await run_in(self._executor, fn, *args, **kwargs)

    async def aget_tuple(self, config: RunnableConfig) -> Optional[CheckpointTuple]:
        """:meth:`get_tuple` without blocking the loop.

        >>> from langgraph.checkpoint.base import empty_checkpoint
        >>> saver, config = MysqlSaver(store, user_id="alice"), {"configurable": {"thread_id": "saver-aget-tuple-1"}}
        >>> config = saver.put(config, empty_checkpoint(), {"step": 0}, {})
        >>> asyncio.run(saver.aget_tuple(config)) == saver.get_tuple(config)
        True
        >>> saver.close()
        """
        return await self._run(self.get_tuple, config)

    async def alist(
        self,
        config: Optional[RunnableConfig],
        *,
        filter: Optional[dict[str, Any]] = None,
        before: Optional[RunnableConfig] = None,
        limit: Optional[int] = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """:meth:`list` without blocking the loop (read in the pool, then yielded).

        >>> from langgraph.checkpoint.base import empty_checkpoint
        >>> saver, config = MysqlSaver(store, user_id="alice"), {"configurable": {"thread_id": "saver-alist-1"}}
        >>> _ = saver.put(saver.put(config, empty_checkpoint(), {"step": 0}, {}), empty_checkpoint(), {"step": 1}, {})
        >>> async def steps():
        ...     return [t.metadata["step"] async for t in saver.alist(config)]
        >>> asyncio.run(steps())  # newest first, as list()
        [1, 0]
        >>> saver.close()
        """
        found = await self._run(lambda: list(self.list(config, filter=filter, before=before, limit=limit)))
        for tup in found:
            yield tup

    async def aput(self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata,
                   new_versions: ChannelVersions) -> RunnableConfig:
        """:meth:`put` without blocking the loop.

        >>> from langgraph.checkpoint.base import empty_checkpoint
        >>> saver, config = MysqlSaver(store, user_id="alice"), {"configurable": {"thread_id": "saver-aput-1"}}
        >>> cats = {**empty_checkpoint(), "channel_values": {"topic": "cats"}}
        >>> asyncio.run(saver.aput(config, cats, {"step": 0}, {}))
        {'configurable': {'thread_id': 'saver-aput-1', 'checkpoint_ns': '', 'checkpoint_id': '...'}}
        >>> saver.get_tuple(config).checkpoint["channel_values"]
        {'topic': 'cats'}
        >>> saver.close()
        """
        return await self._run(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str,
                          task_path: str = "") -> None:
        """:meth:`put_writes` without blocking the loop.

        >>> from langgraph.checkpoint.base import empty_checkpoint
        >>> saver, config = MysqlSaver(store, user_id="alice"), {"configurable": {"thread_id": "saver-aput-writes-1"}}
        >>> config = saver.put(config, empty_checkpoint(), {"step": 0}, {})
        >>> asyncio.run(saver.aput_writes(config, [("topic", "dogs")], task_id="task-1"))
        >>> saver.get_tuple(config).pending_writes
        [('task-1', 'topic', 'dogs')]
        >>> saver.close()
        """
        return await self._run(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        """:meth:`delete_thread` without blocking the loop.

        >>> from langgraph.checkpoint.base import empty_checkpoint
        >>> saver = MysqlSaver(store, user_id="alice")
        >>> _ = saver.put({"configurable": {"thread_id": "saver-adelete-1"}}, empty_checkpoint(), {"step": 0}, {})
        >>> asyncio.run(saver.adelete_thread("saver-adelete-1")); store.exists("alice", "saver-adelete-1")
        False
        >>> saver.close()
        """
        return await self._run(self.delete_thread, thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """:meth:`delete_for_runs` without blocking the loop.

        >>> from langgraph.checkpoint.base import empty_checkpoint
        >>> saver, config = MysqlSaver(store, user_id="alice"), {"configurable": {"thread_id": "saver-aruns-1"}}
        >>> _ = saver.put(config, empty_checkpoint(), {"step": 0, "run_id": "run-1"}, {})
        >>> asyncio.run(saver.adelete_for_runs(["run-1"])); list(saver.list(config))
        []
        >>> saver.close()
        """
        return await self._run(self.delete_for_runs, run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """:meth:`copy_thread` without blocking the loop.

        >>> from langgraph.checkpoint.base import empty_checkpoint
        >>> saver = MysqlSaver(store, user_id="alice")
        >>> _ = saver.put({"configurable": {"thread_id": "saver-acopy-1"}}, empty_checkpoint(), {"step": 0}, {})
        >>> asyncio.run(saver.acopy_thread("saver-acopy-1", "saver-acopy-2"))
        >>> saver.get_tuple({"configurable": {"thread_id": "saver-acopy-2"}}).metadata
        {'step': 0}
        >>> saver.close()
        """
        return await self._run(self.copy_thread, source_thread_id, target_thread_id)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest",
                     progress: Optional[Callable[[int, int], None]] = None) -> None:
        """:meth:`prune` without blocking the loop (``progress`` is called in the worker thread).

        >>> from langgraph.checkpoint.base import empty_checkpoint
        >>> saver, config = MysqlSaver(store, user_id="alice"), {"configurable": {"thread_id": "saver-aprune-1"}}
        >>> _ = saver.put(saver.put(config, empty_checkpoint(), {"step": 0}, {}), empty_checkpoint(), {"step": 1}, {})
        >>> asyncio.run(saver.aprune(["saver-aprune-1"])); [t.metadata["step"] for t in saver.list(config)]
        [1]
        >>> saver.close()
        """
        return await self._run(self.prune, thread_ids, strategy=strategy, progress=progress)

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """:meth:`get_delta_channel_history` without blocking the loop.

        >>> from langgraph.checkpoint.base import empty_checkpoint
        >>> saver, config = MysqlSaver(store, user_id="alice"), {"configurable": {"thread_id": "saver-adelta-1"}}
        >>> first = saver.put(config, {**empty_checkpoint(), "channel_values": {"log": ["a"]}}, {"step": 0}, {})
        >>> second = saver.put(first, empty_checkpoint(), {"step": 1}, {})
        >>> asyncio.run(saver.aget_delta_channel_history(config=second, channels=["log"]))
        {'log': {'writes': [], 'seed': ['a']}}
        >>> saver.close()
        """
        return await self._run(self.get_delta_channel_history, config=config, channels=channels)

    # ---- lifecycle ---------------------------------------------------------------------------------

    def close(self) -> None:
        """Stop the thread pool (after running calls) and close the store if the saver made it
        (:meth:`from_url`). Idempotent.

        >>> saver = MysqlSaver(store, user_id="alice")
        >>> saver.close(); saver.close()  # idempotent; the store it was given stays open
        >>> store.exists("alice", "saver-close-1")
        False
        >>> asyncio.run(saver.aget_tuple({"configurable": {"thread_id": "saver-close-1"}}))
        Traceback (most recent call last):
        ...
        mysql_state.errors.StoreClosedError: this MysqlSaver is closed (close() was called); it runs no new operation
        """
        if self._closed:
            return
        self._closed = True
        self._executor.shutdown(wait=True)
        self._forget()
        if self._owned:
            self.store.close()

    def __enter__(self) -> "MysqlSaver":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> "MysqlSaver":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.to_thread(self.close)
