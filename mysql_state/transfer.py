"""Moving rows: ``fork`` (a server-side copy of a session), ``export`` and ``import_rows``.

An export is one JSON object per row, keyed by the table's column names, timestamps included
(``"YYYY-MM-DDTHH:MM:SS"``, the server's clock); an import writes them back as they were, so
an export imported into an empty table reproduces every row byte for byte, and importing it
twice changes nothing. Internal rows (the catalog, archived history) travel with the sessions
they belong to.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Callable, Iterable, Iterator, Optional, Sequence

import orjson

from . import catalog, keys, sql
from .errors import SessionExistsError, SessionNotFoundError

__all__ = ["COLUMNS", "fork", "export", "import_rows", "rebuild_catalog"]

COLUMNS = ("session_id", "state_key", "item_index", "state_data", "version", "created_at", "updated_at")
CHUNK = 1000  # rows per SELECT of an export (constant memory)
IDS_PER_STATEMENT = 500

# Every row of a session (and of its history) under the new ids, plus the new catalog row:
# one statement, so no row crosses the network and the copy is atomic.
FORK_ROWS = (
    "INSERT INTO {t} (session_id, state_key, item_index, state_data, version)"
    " SELECT IF(session_id = %s, %s, %s), state_key, item_index, state_data, version FROM {t}"
    " WHERE session_id IN (%s, %s)"
    f" UNION ALL SELECT '{keys.CATALOG_SESSION}', %s, 0, '{{}}', 1"
)
_SELECT = "SELECT " + ", ".join(COLUMNS) + " FROM {t} WHERE {where}"
_AFTER = " AND " + sql.KEYSET_AFTER
_ORDER = " ORDER BY session_id, state_key, item_index LIMIT %s"
_INSERT_HEAD = "INSERT INTO {t} (" + ", ".join(COLUMNS) + ") VALUES "
_ROW = "(%s, %s, %s, %s, %s, %s, %s)"
# "skip": a row whose key exists is left as it is; "replace": it takes the imported content.
_ON_SKIP = " ON DUPLICATE KEY UPDATE session_id = session_id"
_ON_REPLACE = (
    " ON DUPLICATE KEY UPDATE state_data = VALUES(state_data), version = VALUES(version),"
    " created_at = VALUES(created_at), updated_at = VALUES(updated_at)"
)
# The catalog rows of sessions written behind the catalog's back (an import without them, the
# Java store): first write and last activity from the rows; an existing row only widens.
REBUILD_CATALOG = (
    "INSERT INTO {t} (session_id, state_key, item_index, state_data, version, created_at, updated_at)"
    f" SELECT '{keys.CATALOG_SESSION}', session_id, 0, '{{}}', 1, MIN(created_at), MAX(updated_at) FROM {{t}}"
    " WHERE session_id IN ({ids}) GROUP BY session_id"
    " ON DUPLICATE KEY UPDATE created_at = COALESCE(LEAST(created_at, VALUES(created_at)), created_at),"
    " updated_at = COALESCE(GREATEST(updated_at, VALUES(updated_at)), updated_at)"
)

Run = Callable[..., Any]


def fork(run: Run, q: Callable[[str], str], src: str, dst: str, lock_session: str, delete_session: str,
         reseal: Optional[Callable[[Any, str, str, Optional[str], int, int], None]] = None) -> int:
    """Copy every row of ``src`` (and its history) to ``dst`` in one statement; returns the rows
    copied. Refuses an existing ``dst`` and an unknown ``src``. ``reseal`` (an encrypted store)
    re-encrypts the copies for their new place in the same transaction."""
    statement = q(FORK_ROWS)
    hsrc, hdst = keys.history_session(src), keys.history_session(dst)

    def tx(cur: Any) -> int:
        cur.execute(lock_session, (src,))  # waits for writers of the source in flight
        if int(cur.fetchone()[0]) == 0:
            raise SessionNotFoundError(f"fork: session {src!r} does not exist (it has no rows)")
        cur.execute(lock_session, (dst,))
        if int(cur.fetchone()[0]) != 0:
            raise SessionExistsError(f"fork: session {dst!r} already exists; fork refuses to overwrite it")
        cur.execute(delete_session, (dst, hdst, dst))  # leftovers only: a stale catalog row, history
        copied = cur.execute(statement, (src, dst, hdst, src, hsrc, dst)) - 1
        if reseal is not None:
            reseal(cur, src, dst, None, 0, 0)
            reseal(cur, hsrc, hdst, None, 0, 0)
        return copied

    return run(tx, "fork", write=True)


def scopes(user_id: Any, sids: Optional[Sequence[str]], exact: bool) -> list[tuple[str, tuple]]:
    """WHERE clauses (with params) covering what an export of ``user_id``/``sids`` holds."""
    if sids is not None:
        out = []
        for part in catalog.chunks(sids, IDS_PER_STATEMENT):
            marks = ", ".join(["%s"] * len(part))
            out.append((f"session_id IN ({marks})", tuple(part)))
            out.append((f"session_id = %s AND state_key IN ({marks})", (keys.CATALOG_SESSION, *part)))
            hist = [keys.history_session(s) for s in part]
            out.append((f"session_id IN ({marks})", tuple(hist)))
        return out
    if user_id is catalog.ALL_USERS:
        return [("1 = 1", ())]
    rng, params = catalog.user_range(user_id, exact, "session_id")
    crng, cparams = catalog.user_range(user_id, exact, "state_key")
    return [("1 = 1" + rng, params), ("session_id = %s" + crng, (keys.CATALOG_SESSION, *cparams))]


def export(run: Run, q: Callable[[str], str], where: list[tuple[str, tuple]],
           history_of: Optional[Callable[[], list[str]]] = None) -> Iterator[str]:
    """One JSON line per row of the ``where`` scopes (see :func:`scopes`), in key order, read
    ``CHUNK`` rows at a time. ``history_of()`` gives more session ids whose history to add."""
    todo = list(where)
    done_sessions: set = set()
    i = 0
    while i < len(todo):
        clause, params = todo[i]
        i += 1
        last: Optional[tuple] = None
        while True:
            statement = q(_SELECT.replace("{where}", clause) + (_AFTER if last else "") + _ORDER)
            args = params + (sql.after(last) if last else ()) + (CHUNK,)
            rows = run(lambda cur: (cur.execute(statement, args), cur.fetchall())[1], "export", write=False)
            for r in rows:
                if history_of is not None and keys.is_packed(r[0]):
                    done_sessions.add(r[0])
                yield line(r)
            if len(rows) < CHUNK:
                break
            last = rows[-1]
        if i == len(todo) and history_of is not None and done_sessions:
            hist = sorted(keys.history_session(s) for s in done_sessions)
            done_sessions = set()
            history_of = None
            for part in catalog.chunks(hist, IDS_PER_STATEMENT):
                todo.append((f"session_id IN ({', '.join(['%s'] * len(part))})", tuple(part)))


def line(r: Sequence[Any]) -> str:
    """One row as its export line."""
    return orjson.dumps(dict(zip(COLUMNS, r))).decode()


def parse(text: str, number: int) -> tuple:
    """A line of an export as the row's 7 values; ValueError naming the line when it is not one."""
    try:
        obj = orjson.loads(text)
        if not isinstance(obj, dict) or set(obj) != set(COLUMNS):
            raise ValueError(f"its keys must be exactly {list(COLUMNS)}")
        when = [None if obj[c] is None else dt.datetime.fromisoformat(obj[c]) for c in ("created_at", "updated_at")]
        sid, key, index, data, version = (obj[c] for c in COLUMNS[:5])
        if not isinstance(sid, str) or not isinstance(key, str) or not isinstance(data, str):
            raise ValueError("session_id, state_key and state_data must be strings")
        if type(index) is not int or type(version) is not int:
            raise ValueError("item_index and version must be integers")
        return (sid, key, index, data, version, *when)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"import: line {number} is not a row of an export: {exc}") from None


def import_rows(run: Run, q: Callable[[str], str], lines: Iterable[Any], on_conflict: str, max_bytes: int,
                progress: Optional[Callable[[int], None]] = None) -> int:
    """Write the rows of ``lines`` in multi-row INSERTs under ``max_bytes``; returns the rows
    inserted or changed. Then the catalog of every session imported is made right."""
    if on_conflict not in ("skip", "replace"):
        raise ValueError(f"on_conflict must be 'skip' or 'replace', got {on_conflict!r}")
    skip_sql, replace_sql = q(_INSERT_HEAD), q(_INSERT_HEAD)
    written = 0
    seen = 0
    sessions: set = set()
    batch: list[tuple] = []
    size = 0

    def flush() -> None:
        nonlocal written, batch, size
        if not batch:
            return
        values = ",".join([_ROW] * len(batch))
        params = tuple(v for row in batch for v in row)

        def tx(cur: Any) -> int:
            n = cur.execute(skip_sql + values + _ON_SKIP, params)  # 1 per row inserted
            if on_conflict == "replace":
                n += cur.execute(replace_sql + values + _ON_REPLACE, params) // 2  # 2 per row changed
            return n

        written += run(tx, "import_rows", write=True)
        batch, size = [], 0
        if progress is not None:
            progress(seen)

    for number, text in enumerate(lines, 1):
        if isinstance(text, bytes):
            text = text.decode("utf-8")
        if not text.strip():
            continue
        row = parse(text, number)
        cost = sum(sql.escaped_size(str(v).encode("utf-8")) for v in row) + sql.ROW_OVERHEAD
        if batch and (size + cost > max_bytes or len(batch) >= CHUNK):
            flush()
        batch.append(row)
        size += cost
        seen += 1
        if keys.is_packed(row[0]):
            sessions.add(row[0])
    flush()
    rebuild_catalog(run, q, sorted(sessions))
    return written


def rebuild_catalog(run: Run, q: Callable[[str], str], sids: Sequence[str]) -> int:
    """Create (or widen to the rows' times) the catalog rows of ``sids``; returns rows changed."""
    changed = 0
    for part in catalog.chunks(list(sids), IDS_PER_STATEMENT):
        statement = q(REBUILD_CATALOG.replace("{ids}", ", ".join(["%s"] * len(part))))
        changed += run(lambda cur: cur.execute(statement, tuple(part)), "catalog", write=True)
    return changed
