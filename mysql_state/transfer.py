"""Moving rows: ``fork`` (a server-side copy of a session), ``export`` and ``import_rows``.

An export is one JSON object per row, keyed by the table's column names, timestamps included
(``"YYYY-MM-DDTHH:MM:SS"``, the server's clock); an import writes them back as they were, so
an export imported into an empty table reproduces every row byte for byte, and importing it
twice changes nothing. Internal rows (the catalog, archived history) travel with the sessions
they belong to.
"""

from __future__ import annotations

import datetime as dt
import re
import warnings
from typing import Any, Callable, ContextManager, Iterable, Iterator, Optional, Sequence

import orjson

from . import catalog, keys, serde, sql
from .crypto import PREFIX, is_sealed, key_id_of, well_formed
from .listsync import ListHash
from .table import Table
from .errors import (
    DUPLICATE_KEY,
    PACKET_TOO_LARGE,
    ConflictError,
    CorruptStateError,
    DamagedExportWarning,
    DecryptionError,
    ServerUnavailableError,
    SessionExistsError,
    SessionNotFoundError,
    ValueTooLargeError,
    caller_stacklevel,
    errno_of,
    translating,
)

__all__ = ["COLUMNS", "ExportLines", "TornKeys", "fork", "export", "import_rows", "rebuild_catalog"]

COLUMNS = sql.EXPORT_COLUMNS
CHUNK = 1000  # rows per SELECT of an export (constant memory)
IDS_PER_STATEMENT = 500

MAX_INT = 2**31 - 1  # item_index is an INT
MAX_BIGINT = 2**63 - 1  # version is a BIGINT
_HISTORY_ID = re.compile(re.escape(keys.HISTORY_PREFIX) + "[0-9a-f]{40}")


def fork(db: Any, t: Table, src: str, dst: str) -> int:
    """Copy every row of ``src`` (and its history) to ``dst`` in one statement; returns the rows
    copied. Refuses an existing ``dst`` and an unknown ``src``. An encrypted store seals the
    copies again for their new place in the same transaction."""
    statement = t.q(sql.FORK_ROWS)
    lock_session, delete_session = t.statements["LOCK_SESSION"], t.statements["DELETE_SESSION"]
    hsrc, hdst = keys.history_session(src), keys.history_session(dst)

    def tx(cur: Any) -> int:
        cur.execute(lock_session, (src,))  # waits for writers of the source in flight
        if int(cur.fetchone()[0]) == 0:
            raise SessionNotFoundError(f"fork: session {src!r} does not exist (it has no rows)")
        cur.execute(lock_session, (dst,))
        if int(cur.fetchone()[0]) != 0:
            raise SessionExistsError(f"fork: session {dst!r} already exists; fork refuses to overwrite it")
        if not t.sealer.encrypted:  # copies of sealed rows would open nowhere: each is bound to its place
            cur.execute(t.statements["SEALED_ROW_IN"], (src, hsrc, sql.like_prefix(PREFIX)))
            sealed = cur.fetchone()
            if sealed is not None:
                raise DecryptionError(
                    f"fork: session {src!r} holds encrypted rows (key {sealed[0]!r}, item {sealed[1]}), and this "
                    "store has no keyring (encryption=...) to seal their copies for the new session; "
                    "nothing was copied", src, sealed[0], int(sealed[1]), key_id_of(sealed[2]))
        cur.execute(delete_session, (dst, hdst, dst))  # leftovers only: a stale catalog row, history
        copied = cur.execute(statement, (src, dst, hdst, src, hsrc, dst)) - 1
        t.sealer.reseal_copied(cur, t.statements, src, dst, None, 0, 0)
        t.sealer.reseal_copied(cur, t.statements, hsrc, hdst, None, 0, 0)
        return copied

    return db.run(tx, "fork", write=True, session=dst)


def scopes(user_id: Any, sids: Optional[Sequence[str]], exact: bool) -> list[tuple[str, tuple]]:
    """WHERE clauses (with params) covering the callers' rows and catalog rows an export of
    ``user_id``/``sids`` holds; :func:`export` adds the history of the sessions it met. A
    catalog row comes only with a session that has rows (so an export always imports)."""
    if sids is not None:
        return [scope for part in catalog.chunks(sids, IDS_PER_STATEMENT)
                for scope in sql.export_scopes_of_sessions(part)]
    return sql.export_scopes_of_user(catalog.prefix_of(user_id), exact)


def export(db: Any, t: Table, user_id: Any, sids: Optional[Sequence[str]]) -> "ExportLines":
    """The export of ``user_id``'s sessions ``sids`` (None: all of them; ``ALL_USERS``: every
    user's): :func:`export_lines` of the :func:`scopes` they make, on one connection of ``db``."""
    return ExportLines(lambda check: export_lines(db.hold, t.q, scopes(user_id, sids, t.exact_keys), check))


class ExportLines(Iterator[str]):
    """The lines of an export (what :meth:`MysqlAgentStateStore.export` returns), streamed.

    Once the last line is read, ``damaged`` holds ``(session id, key, why)`` of every key or
    row :class:`TornKeys` found damaged, and the ``next()`` that ends the iteration issues their
    :class:`DamagedExportWarning` where the caller's loop is (so the once-per-location
    default of Python's warning filters is the caller's line). ``warn = False`` leaves the
    warning to whoever drives the iteration from elsewhere: the async store reads an export a
    chunk at a time in worker threads, and issues :meth:`warning` in the caller's task itself.
    ``close()`` ends the export's snapshot early, as a generator's does."""

    def __init__(self, lines: Callable[["TornKeys"], Iterator[str]]) -> None:
        self.check = TornKeys()
        self.damaged: list[tuple[str, str, str]] = []
        self.warn = True
        self.ended = False
        self.lines = lines(self.check)

    def __iter__(self) -> "ExportLines":
        return self

    def __next__(self) -> str:
        try:
            return next(self.lines)
        except StopIteration:
            if not self.ended:
                self.ended = True
                self.damaged = self.check.finish()
                damaged = self.warning()
                if self.warn and damaged is not None:
                    warnings.warn(damaged, stacklevel=caller_stacklevel())
            raise

    def close(self) -> None:
        """End the export's read (its snapshot and connection) before its last line."""
        self.lines.close()  # type: ignore[attr-defined]  # export_lines is a generator

    def warning(self) -> Optional[DamagedExportWarning]:
        """The warning naming :attr:`damaged` (None when the export found nothing damaged)."""
        torn = self.damaged
        if not torn:
            return None
        named = "; ".join(f"key {k!r} of session {sid!r}: {why}" for sid, k, why in torn[:5])
        more = f" (and {len(torn) - 5} more)" if len(torn) > 5 else ""
        return DamagedExportWarning(
            f"export: {len(torn)} key(s) are damaged in the table, and so in this export, which holds their rows as "
            f"they are: {named}{more}. import_rows refuses the file until their lines are removed from it; "
            "doctor() reports them in the table and doctor(fix=True) repairs what it safely can (restore the others "
            "from an older backup, or delete them), then export again", torn)


def export_lines(hold: Callable[[str], ContextManager[Any]], q: Callable[[str], str],
                 where: list[tuple[str, tuple]], check: "TornKeys") -> Iterator[str]:
    """One JSON line per row of the ``where`` scopes (see :func:`scopes`), then the archived
    history of every session met, in key order, read ``CHUNK`` rows at a time (constant memory:
    a keyset cursor) and all of it from ONE consistent snapshot: one connection of ``hold``,
    ``START TRANSACTION WITH CONSISTENT SNAPSHOT`` under REPEATABLE READ (as ``mysqldump
    --single-transaction``), so a list written while the export streams comes out as it was
    when the export began, never as old items under a new hash row. The snapshot starts at the
    first line read and ends (ROLLBACK) with the last, or when the iterator is closed.

    A key damaged in the table, or a row (``check``, a :class:`TornKeys`: what
    :func:`import_rows` would refuse) goes out as it is; :class:`ExportLines` names every such
    key once the last line is read: the backup is known to be one that does not restore whole
    when it is made."""
    with hold("export") as raw:
        cur = raw.cursor()
        try:
            _execute(cur, sql.REPEATABLE_READ_NEXT)
            _execute(cur, sql.CONSISTENT_SNAPSHOT)
            seen: list[str] = []
            for clause, params in where:
                sent: set = set()  # hash rows sent ahead of their items, not met in the scan yet
                for chunk in _chunks(cur, q, clause, params):
                    heads = _heads(cur, q, chunk)
                    for r in chunk:
                        if keys.is_packed(r[0]) and (not seen or seen[-1] != r[0]):
                            seen.append(r[0])
                        if (r[0], r[1]) in sent:  # sent before its items
                            sent.discard((r[0], r[1]))
                            continue
                        head = heads.get((r[0], keys.hash_key(r[1]))) if r[2] == 0 else None
                        if head is not None:
                            sent.add((head[0], head[1]))
                            check.add(*head[:5])
                            yield line(head)
                        check.add(*r[:5])
                        yield line(r)
            hist = sorted({keys.history_session(s) for s in seen})
            del seen
            for part in catalog.chunks(hist, IDS_PER_STATEMENT):
                for r in _scan(cur, q, *sql.export_sessions(part)):
                    check.add(*r[:5])
                    yield line(r)
        finally:
            try:
                raw.rollback()
            except Exception:  # noqa: BLE001 - a dead connection: hold() drops it
                pass


def _scan(cur: Any, q: Callable[[str], str], clause: str, params: tuple) -> Iterator[tuple]:
    """The rows of one scope in key order (:func:`_chunks`, one by one)."""
    for chunk in _chunks(cur, q, clause, params):
        yield from chunk


def _chunks(cur: Any, q: Callable[[str], str], clause: str, params: tuple) -> Iterator[list]:
    """The rows of one scope in key order, ``CHUNK`` at a time (keyset: after the last row)."""
    last: Optional[tuple] = None
    while True:
        statement, args = sql.export_chunk((clause, params), last, CHUNK)
        rows = _execute(cur, q(statement), args)
        yield rows
        if len(rows) < CHUNK:
            return
        last = rows[-1]


def _heads(cur: Any, q: Callable[[str], str], chunk: Sequence[tuple]) -> dict[tuple[str, str], tuple]:
    """The hash rows of the lists whose first item ``chunk`` holds, by (session, hash key): an
    export sends each before its list's items (a hash row sorts after them), so that a file cut
    inside a list is refused by the import (its hash row counts more items than the file
    holds), never taken for a one-item value (which "replace" would put over the whole list)."""
    firsts = [(r[0], keys.hash_key(r[1])) for r in chunk
              if r[2] == 0 and keys.is_packed(r[0]) and not r[1].endswith(keys.HASH_SUFFIX)]
    found: dict[tuple[str, str], tuple] = {}
    for part in catalog.chunks(firsts, IDS_PER_STATEMENT):
        statement = q(sql.with_pairs(sql.EXPORT_HASH_ROWS, len(part)))
        for r in _execute(cur, statement, tuple(v for pair in part for v in pair)):
            found[(r[0], r[1])] = r
    return found


def _execute(cur: Any, statement: str, args: Any = None) -> list:
    """Run one statement of an export on its held connection; driver errors translated."""
    with translating("export"):
        cur.execute(statement, args)
        return list(cur.fetchall())


def line(r: Sequence[Any]) -> str:
    """One row as its export line."""
    return orjson.dumps(dict(zip(COLUMNS, r))).decode()


def parse(text: str, number: int) -> tuple:
    """A line of an export as the row's 7 values; ValueError naming the line when it is not one
    that this store could have written: column types and ranges (``item_index`` an INT >= 0,
    ids at most 255 characters, ``state_data`` JSON unless sealed or a hash row), and the
    store's reserved ids well formed (a catalog row names a valid packed id at index 0; a
    history id is ``__history__`` and a digest; no other id without ':')."""
    try:
        obj = orjson.loads(text)
        if not isinstance(obj, dict) or set(obj) != set(COLUMNS):
            raise ValueError(f"its keys must be exactly {list(COLUMNS)}")
        when = [None if obj[c] is None else dt.datetime.fromisoformat(obj[c]) for c in ("created_at", "updated_at")]
        if any(w is not None and w.tzinfo is not None for w in when):  # the column keeps no offset: it would go
            raise ValueError("created_at and updated_at must be the table's DATETIME as an export writes it, "
                             f"without a UTC offset, got {obj['created_at']!r}, {obj['updated_at']!r}")
        sid, key, index, data, version = (obj[c] for c in COLUMNS[:5])
        if not isinstance(sid, str) or not isinstance(key, str) or not isinstance(data, str):
            raise ValueError("session_id, state_key and state_data must be strings")
        if type(index) is not int or type(version) is not int:
            raise ValueError("item_index and version must be integers")
        check_row(sid, key, index, data, version)
        # The column keeps whole seconds: cut here, as MariaDB stores it (MySQL would round
        # 23:59:59.6 to the next day), so the same file imports the same on both.
        return (sid, key, index, data, version, *(w if w is None else w.replace(microsecond=0) for w in when))
    except (ValueError, TypeError) as exc:
        raise ValueError(f"import: line {number} is not a row of an export: {exc}") from None


def check_row(sid: str, key: str, index: int, data: str, version: int) -> None:
    """ValueError unless the row fits the table's columns and the store's rules (see :func:`parse`)."""
    for name, text in (("session_id", sid), ("state_key", key)):
        if not text.strip():
            raise ValueError(f"{name} {text!r} is blank")
        if len(text) > keys.MAX_ID_CHARS:
            raise ValueError(f"{name} of {len(text)} characters is longer than the column ({keys.MAX_ID_CHARS})")
    if not 0 <= index <= MAX_INT:
        raise ValueError(f"item_index {index} is outside 0..{MAX_INT} (the column is an INT; no item is negative)")
    if not 0 <= version <= MAX_BIGINT:
        raise ValueError(f"version {version} is outside 0..{MAX_BIGINT}")
    if sid == keys.CATALOG_SESSION:
        if index != 0 or data != "{}" or not is_packed_id(key):
            raise ValueError(f"a catalog row must be ({keys.CATALOG_SESSION!r}, <a valid '<user>:<session>' id>, 0,"
                             f" '{{}}'), got state_key {key[:60]!r}, item_index {index}, state_data {data[:20]!r}")
        return
    if not keys.is_packed(sid):
        if _HISTORY_ID.fullmatch(sid) is None:
            raise ValueError(f"session_id {sid[:60]!r} has no ':': such ids are reserved for the store's own rows"
                             f" ({keys.CATALOG_SESSION!r}, {keys.HISTORY_PREFIX!r}<digest>)")
    elif not is_packed_id(sid):
        raise ValueError(f"session_id {sid[:60]!r} is not a valid '<user>:<session>' id")
    if key.endswith(keys.HASH_SUFFIX):
        if index != 0 or key[: -len(keys.HASH_SUFFIX)].endswith(keys.HASH_SUFFIX):
            raise ValueError(f"a hash row is row 0 of '<key>:_hash' for a key that does not end with "
                             f"{keys.HASH_SUFFIX!r}, got state_key {key[:60]!r}, item_index {index}")
        return  # a hash row's format is the writer's (a foreign one reads as missing)
    if is_sealed(data):  # opaque, but of the envelope's form (what the doctor checks without the key)
        if not well_formed(data):
            raise ValueError(f"state_data {data[:30]!r}... starts as an encrypted row but is not a well-formed "
                             "envelope (key id, then base64 of nonce, ciphertext and tag)")
        return
    try:
        orjson.loads(data)
    except orjson.JSONDecodeError:
        raise ValueError(f"state_data {data[:40]!r} is not JSON") from None


def is_packed_id(sid: str) -> bool:
    """Whether ``sid`` is exactly what :func:`keys.pack` makes of some (user, session)."""
    try:
        return keys.pack(*keys.unpack(sid)) == sid
    except (ValueError, TypeError):
        return False


def import_rows(db: Any, t: Table, lines: Iterable[Any], on_conflict: str,
                progress: Optional[Callable[[int], None]] = None) -> int:
    """Write the rows of ``lines`` in multi-row INSERTs under half ``max_allowed_packet``, ALL IN ONE
    TRANSACTION (all or nothing: a bad line, a row over ``max_allowed_packet`` or a lost
    connection leaves the table as it was); returns the rows inserted or changed. Then, in the
    same transaction, the catalog of every session imported is made right.

    A caller's key is imported whole: ``"replace"`` first deletes every row of each key the
    import holds (items and hash row), ``"skip"`` leaves a key that has any row as it is and
    imports none of its rows (so neither mixes old and new rows of one list). Catalog and
    history rows go row by row; each must belong to a session with rows in the import.
    """
    if on_conflict not in ("skip", "replace"):
        raise ValueError(f"on_conflict must be 'skip' or 'replace', got {on_conflict!r}")
    q, max_bytes = t.q, t.max_allowed_packet // 2
    state = {"started": False}
    # With a keyring, every sealed row must open where it lands: a row is bound to its table,
    # session, key and index, so rows sealed for another table (a restore under another table
    # name) or under a key not in the ring are refused before anything is written.
    opens = t.sealer.open if t.sealer.encrypted else None

    def tx(cur: Any) -> int:
        if state["started"]:  # the transaction was lost with the connection: the lines are spent
            raise ServerUnavailableError("import_rows: the connection was lost during the import; its transaction "
                                         "rolled back, nothing was imported: run the import again")
        cur.execute(sql.MAX_ALLOWED_PACKET)
        packet = int(cur.fetchone()[0])
        state["started"] = True
        return _import(cur, q, lines, on_conflict, min(max_bytes, packet // 2), packet, progress, opens)

    return db.run(tx, "import_rows", write=True, lock_retry=False, session=None)  # many sessions


class _KeyRows:
    """What an import holds of one caller's key: rows ``0..next-1`` of the key itself (and any
    other indexes, kept only when rows came out of order), and its hash row's text (None: none)."""

    __slots__ = ("next", "extra", "head")

    def __init__(self) -> None:
        self.next = 0
        self.extra: Optional[set[int]] = None
        self.head: Optional[str] = None

    @property
    def hash(self) -> bool:
        return self.head is not None

    def add(self, state_key: str, index: int, data: str) -> bool:
        """Take the row; False when the import holds it already (the same primary key)."""
        if state_key.endswith(keys.HASH_SUFFIX):
            if self.head is not None:
                return False
            self.head = data
        elif index < self.next or (self.extra is not None and index in self.extra):
            return False
        elif self.extra is None and index == self.next:
            self.next += 1
        else:
            self.extra = (self.extra or set()) | {index}
        return True

    def torn(self, holder: str = "the import") -> Optional[str]:
        """Why the key's rows are not a whole value or list (None: they are): a list must hold
        items ``0..n-1`` where its hash row (this store's) says ``n``, items ``0..`` with no gap
        under another writer's hash row, and a key without a hash row is one value (row 0),
        as ``doctor`` has it. An export cut at a line, or a list damaged where it was exported.
        ``holder`` names what holds the rows in the reason."""
        count = self.next + len(self.extra or ())
        top = max(self.extra) if self.extra else self.next - 1
        held = f"items {sorted({*range(self.next), *(self.extra or ())})[:5]}..." if self.extra else (
            f"items 0..{top}" if count else "no item")
        if self.head is None:
            return None if top <= 0 else f"it holds {held} and no hash row"
        stored = ListHash.parse(self.head)
        if stored is not None and (count != stored.n or top != count - 1):
            return f"its hash row says {stored.n} items, {holder} holds {held}"
        if stored is None and top != count - 1:
            return f"it holds {held}: a gap"
        return None


class TornKeys:
    """The rows and keys, met in an export's order (a session's rows together, each key's rows
    together, its hash row sent ahead of its items), that :func:`import_rows` would refuse: a
    row that fails the import's line rules (:func:`check_row`: an index below 0, text that is
    not JSON...), and a caller's key that is not whole (:meth:`_KeyRows.torn`: a list whose rows
    are not the ones its hash row counts, a gap, rows without row 0). Found as an export
    streams, so that a backup of a damaged table says so when it is made, not when it is
    restored. A key is judged when the next key starts if its row 0 was met (all its rows are
    then past), else at the end of its session (its hash row may still come): memory for the
    current key and the keys without row 0, whatever the number of keys of a session.

    >>> check = TornKeys()
    >>> check.add("u:s", "memory:_hash", 0, '{"n":3}')
    >>> check.add("u:s", "memory", 0, '"a"')
    >>> check.add("u:s", "memory", 2, '"c"')
    >>> check.add("u:s", "plan", 0, '{}')
    >>> check.add("u:s", "plan", -1, '{}')
    >>> [(sid, key) for sid, key, _ in check.finish()]
    [('u:s', 'memory'), ('u:s', 'plan')]
    """

    def __init__(self) -> None:
        self.sid: Optional[str] = None
        self.key: Optional[str] = None  # the caller's key of the last row
        self.held: dict[str, _KeyRows] = {}
        self.torn: list[tuple[str, str, str]] = []

    def add(self, sid: str, state_key: str, index: int, data: str, version: int = 0) -> None:
        """Take one exported row (its session id, key, index, text and version)."""
        try:
            check_row(sid, state_key, index, data, version)
        except ValueError as exc:
            self.torn.append((sid, _base_key(state_key) if keys.is_packed(sid) else state_key,
                              f"its row at item_index {index} is not one an import takes: {exc}"))
            return
        if not keys.is_packed(sid):
            return
        if sid != self.sid:
            self._close(list(self.held))
            self.sid, self.key = sid, None
        base = _base_key(state_key)
        if self.key is not None and base != self.key:
            last = self.held.get(self.key)
            if last is not None and last.next > 0:  # its row 0 was met: every row of it is past
                self._close([self.key])
        self.key = base
        self.held.setdefault(base, _KeyRows()).add(state_key, index, data)

    def finish(self) -> list[tuple[str, str, str]]:
        """``(session id, key, why)`` of every row or key met that an import refuses, in order."""
        self._close(list(self.held))
        return self.torn

    def _close(self, names: list) -> None:
        for k in names:
            why = self.held.pop(k).torn("the export")
            if why is not None:
                self.torn.append((self.sid or "", k, why))


#: Why a line is refused that is not UTF-8 text (a binary or compressed file given as an export).
NOT_UTF8 = ("is not UTF-8 text: an export is UTF-8 JSON lines, one row a line (a compressed backup must be "
            "decompressed first, e.g. `gunzip -c rows.jsonl.gz | mysql-state import`); nothing was imported")


def _utf8_lines(lines: Iterable[Any]) -> Iterator[str]:
    """The lines of an import as text: bytes decoded, and a line that is not UTF-8 refused
    naming its number (the iterator of a file opened as text raises while reading; a str
    read with ``surrogateescape``, as a binary stdin gives, holds lone surrogates)."""
    it = iter(lines)
    number = 0
    while True:
        number += 1
        try:
            text = next(it)
        except StopIteration:
            return
        except UnicodeDecodeError:
            raise ValueError(f"import: line {number} {NOT_UTF8}") from None
        if isinstance(text, bytes):
            try:
                text = text.decode("utf-8")
            except UnicodeDecodeError:
                raise ValueError(f"import: line {number} {NOT_UTF8}") from None
        elif not isinstance(text, str):
            raise TypeError(f"import: line {number} is a {type(text).__name__} ({serde.cut_repr(text)}), not a line "
                            "of an export (a str or bytes); nothing was imported")
        elif not text.isascii():
            try:
                text.encode("utf-8")
            except UnicodeEncodeError:  # lone surrogates: bytes that were not UTF-8, escaped
                raise ValueError(f"import: line {number} {NOT_UTF8}") from None
        yield text


def _import(cur: Any, q: Callable[[str], str], lines: Iterable[Any], on_conflict: str, max_bytes: int,
            packet: int, progress: Optional[Callable[[int], None]],
            opens: Optional[Callable[[str, str, int, str], bytes]] = None) -> int:
    head = q(sql.IMPORT_INSERT_HEAD)
    fixed = len(head) + len(sql.IMPORT_ON_REPLACE) + 64
    written = seen = 0
    sessions: set = set()  # packed ids with rows in the import
    reserved: dict[str, tuple[str, int]] = {}  # catalog/history id -> (its id, first line)
    held: dict[tuple[str, str], _KeyRows] = {}  # what the import holds of each key: whole?
    decided: set = set()  # "skip": keys looked up
    kept: set = set()  # "skip": keys that exist, whose rows are not imported
    batch: list[tuple] = []
    size = 0

    def flush() -> None:
        nonlocal written, batch, size
        rows = batch if on_conflict == "replace" else _unclaimed(cur, q, batch, decided, kept)
        if rows and on_conflict == "skip":  # keys found absent: a plain INSERT (a writer's row meanwhile fails it)
            own = [r for r in rows if keys.is_packed(r[0])]
            written += _insert_new(cur, head, own) if own else 0
            rows = [r for r in rows if not keys.is_packed(r[0])]
        if rows:
            written += cur.execute(*sql.import_insert(head, rows, sql.IMPORT_ON_SKIP))  # 1 per row inserted
        if rows and on_conflict == "replace":  # 2 per row changed
            catalog_rows = [r for r in rows if r[0] == keys.CATALOG_SESSION]
            others = [r for r in rows if r[0] != keys.CATALOG_SESSION] if catalog_rows else rows
            for part, tail in ((others, sql.IMPORT_ON_REPLACE), (catalog_rows, sql.IMPORT_ON_MERGE_CATALOG)):
                if part:
                    written += cur.execute(*sql.import_insert(head, part, tail)) // 2
        batch, size = [], 0
        if progress is not None:
            progress(seen)

    for number, text in enumerate(_utf8_lines(lines), 1):
        if not text.strip():
            continue
        row = parse(text, number)
        # A sealed row (history rows too) must open where it lands; a plaintext value or item row
        # needs a ring that allows them (catalog rows and hash rows are plaintext by design).
        if opens is not None and row[0] != keys.CATALOG_SESSION and (
                is_sealed(row[3]) or not row[1].endswith(keys.HASH_SUFFIX)):
            try:
                opens(row[0], row[1], row[2], row[3])
            except CorruptStateError as exc:
                if is_sealed(row[3]):
                    raise ValueError(f"import: line {number} is a sealed row that does not open in this table "
                                     f"({q('{t}')}): it was sealed for another table, place or key ({exc}); "
                                     "nothing was imported") from exc
                raise ValueError(f"import: line {number} is not encrypted, and this store's keyring refuses plaintext "
                                 "rows (allow_plaintext=False): import it with a ring that allows them, then "
                                 f"reencrypt(); nothing was imported ({exc})") from exc
        cost = sum(sql.escaped_size(str(v).encode("utf-8")) for v in row) + sql.ROW_OVERHEAD
        if cost + fixed > packet:
            raise ValueTooLargeError(f"import: line {number}: the row ({row[0][:40]!r}, {row[1][:40]!r}, {row[2]}) "
                                     f"takes {cost} bytes in a statement, more than the server's max_allowed_packet"
                                     f" of {packet} bytes; nothing was imported", PACKET_TOO_LARGE)
        if batch and (size + cost > max_bytes or len(batch) >= CHUNK):
            flush()
        batch.append(row)
        size += cost
        seen += 1
        sid = row[0]
        if keys.is_packed(sid):
            sessions.add(sid)
            if not held.setdefault((sid, _base_key(row[1])), _KeyRows()).add(row[1], row[2], row[3]):
                raise ValueError(f"import: line {number} repeats the row ({sid[:60]!r}, {row[1][:60]!r}, {row[2]}) "
                                 "of an earlier line (an export holds each row once); nothing was imported")
        elif sid == keys.CATALOG_SESSION:
            reserved.setdefault("c" + row[1], (row[1], number))
        else:
            reserved.setdefault("h" + sid, (sid, number))
    if batch:
        flush()
    history_of = {keys.history_session(s) for s in sessions}
    for tag, (ident, number) in reserved.items():
        if not (ident in sessions if tag[0] == "c" else ident in history_of):
            what = "the catalog row of" if tag[0] == "c" else "an archived item of"
            raise ValueError(f"import: line {number} is {what} a session that has no rows in this import "
                             f"({ident[:60]!r}): the store's own rows come only with their session; nothing was imported")
    for (sid, k), got in held.items():
        why = got.torn()
        if why is not None:
            raise ValueError(f"import: key {k!r} of session {sid!r} is not whole in this import: {why}; the file "
                             "was cut, or the list was damaged where it was exported (doctor reports it there); "
                             "nothing was imported (remove the key's lines from the file to import the rest)")
    if on_conflict == "replace":
        written += _drop_the_rest(cur, q, held)
    catalog.rebuild(cur, q, sorted(sessions))
    return written


def _drop_the_rest(cur: Any, q: Callable[[str], str], held: dict) -> int:
    """"replace": delete each key's rows that the import does not hold (the items past its end,
    a hash row it has not), so the key is what the export held, whole; returns rows deleted."""
    deleted = 0
    for part in catalog.chunks(list(held.items()), IDS_PER_STATEMENT):
        statement, params = sql.import_drop_the_rest(
            (sid, k, got.next, sorted(got.extra or ()), None if got.hash else keys.hash_key(k))
            for (sid, k), got in part)
        deleted += cur.execute(q(statement), params)
    return deleted


def _unclaimed(cur: Any, q: Callable[[str], str], batch: list[tuple], decided: set, kept: set) -> list[tuple]:
    """"skip": the rows of ``batch`` to write. A caller's key met for the first time is kept
    whole, none of its rows imported, if the table has any row of it. Internal rows pass."""
    new = []
    for row in batch:
        if keys.is_packed(row[0]):
            k = (row[0], _base_key(row[1]))
            if k not in decided:
                decided.add(k)
                new.append(k)
    for part in catalog.chunks(new, IDS_PER_STATEMENT):
        pairs = tuple(v for sid, k in part for v in (sid, k, sid, keys.hash_key(k)))
        cur.execute(q(sql.with_pairs(sql.IMPORT_EXISTING_KEYS, 2 * len(part))), pairs)
        kept.update((sid, _base_key(k)) for sid, k in cur.fetchall())
    if not kept:
        return batch
    return [r for r in batch if not keys.is_packed(r[0]) or (r[0], _base_key(r[1])) not in kept]


def _insert_new(cur: Any, head: str, rows: Sequence[tuple]) -> int:
    """"skip": the rows of keys found absent, in a plain INSERT. The lookup is a plain read:
    a key another writer is creating (not committed yet) looks absent, and an INSERT that
    kept the existing rows would wait for that writer, then add the import's rows to its
    (a list of both). A row there now fails the whole import instead, nothing written."""
    try:
        return cur.execute(*sql.import_insert(head, rows))
    except Exception as exc:
        if errno_of(exc) != DUPLICATE_KEY:
            raise
        raise ConflictError("import_rows: a key the import found absent was written by another writer while the "
                            "import ran; nothing was imported (on_conflict='skip' never mixes rows of two writers "
                            "in one key): run the import again, which leaves that key as it is") from exc


def _base_key(state_key: str) -> str:
    """The caller's key a row belongs to (a hash row's key without its suffix)."""
    return state_key[: -len(keys.HASH_SUFFIX)] if state_key.endswith(keys.HASH_SUFFIX) else state_key


def rebuild_catalog(db: Any, t: Table, sids: Sequence[str]) -> int:
    """Create (or widen to the rows' times) the catalog rows of ``sids``; returns rows changed."""
    return db.run(lambda cur: catalog.rebuild(cur, t.q, sids), "catalog", write=True, session=None)
