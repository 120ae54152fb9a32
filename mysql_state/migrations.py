"""Schema versions: ordered, idempotent migration steps, and a doctor that checks the table.

Each :class:`MigrationStep` says whether it is needed by looking at the table itself (never only at a
record), so a step that crashed half way (MySQL commits DDL implicitly) is simply needed
again; what was applied is recorded in ``mysql_state_migrations`` of the same database.
``doctor`` checks the schema, then reads every row once in key order (a session at a time):
lists whose items are not ``0..n-1``, without a hash row or whose hash row disagrees, rows
that are not JSON (sealed rows are opened with the store's keyring, or checked for the
envelope's form without one), catalog rows that disagree with the data, history rows of no
session. Its repairs (like :func:`relist`, which re-encryption uses too) keep versions and
activity times: maintenance never looks like a caller's write.

Migrations are safe to run from several processes at once (workers starting together): each
step is checked again right before it runs, and a step another process finished meanwhile
(error 1060 duplicate column, 1061 duplicate key name, 1091 nothing to drop) counts as done.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Optional, cast

import orjson

from . import catalog, keys, listsync, sql, transfer
from .crypto import digest_kid, is_sealed, well_formed
from .errors import (ALREADY_DONE_ERRNOS, DecryptionError, MigrationError, MysqlStateError, MysqlStateWarning,
                     caller_stacklevel)
from .table import Table
from .listsync import Digester, ListHash

__all__ = ["MigrationStep", "DoctorFinding", "STEPS", "pending", "migrate", "doctor", "relist", "whole", "Step",
           "Problem", "Ctx"]

ACTIVITY_COLUMNS = "session_id,updated_at"
WANTED_COLUMNS = {"session_id", "state_key", "item_index", "state_data", "version", "created_at", "updated_at"}
PRIMARY_KEY = "session_id,state_key,item_index"


class Ctx:
    """What the steps need, from the connector ``db`` and the table context ``t``: ``run``
    (writes of the whole table: they name no session), ``q`` the renderer, the names, the
    collation chosen; for the doctor's repairs and re-encryption: the packet size and the
    table's sealer (``plain`` opens a row, ``seal`` seals one again in its place, ``digester(dk, sid, key)`` and
    ``current(sid, key)`` the digesters of a list's hash rows, ``current_dk`` the ``dk`` new
    ones record, ``keyring``: is there one); ``forget((sid, key))`` drops what the process
    remembers of a list rewritten."""

    def __init__(self, db: Any, t: Table, forget: Callable[..., None] = lambda *args, **kwargs: None) -> None:
        sealer = t.sealer
        self.run: Callable[..., Any] = functools.partial(db.run, session=None)
        self.db, self.t, self.q = db, t, t.q
        self.database, self.table, self.collation, self.statement_bytes = t.database, t.name, t.collation, t.statement_bytes
        self.plain: Callable[[str, str, int, Any], bytes] = sealer.open
        # rows sealed again in their own place (re-encryption, repairs): rows an earlier version
        # stored under an id with NUL, which new rows may not use, rotate and repair too
        self.seal: Callable[[str, str, int, bytes], bytes] = sealer.reseal
        self.digester: Callable[[Optional[str], str, str], Optional[Digester]] = sealer.digester_of
        self.current: Callable[[str, str], Digester] = sealer.digester_for
        self.current_dk: Optional[str] = sealer.current_dk
        self.keyring = sealer.encrypted
        self.forget = forget


@dataclass(frozen=True)
class MigrationStep:
    """One migration step: ``name`` (ordered), the ``sql`` it runs (for ``--dry-run``)."""

    name: str
    sql: str


@dataclass
class DoctorFinding:
    """Something wrong with the table; ``fixed`` when ``doctor(fix=True)`` repaired it."""

    kind: str
    message: str
    session_id: Optional[str] = None
    key: Optional[str] = None
    fixed: bool = False


#: The names of ``migrate``'s and ``doctor``'s results before they said what they are (the
#: README shows them); kept as aliases.
Step = MigrationStep
Problem = DoctorFinding


def _columns(ctx: Ctx) -> dict[str, tuple[str, Optional[str]]]:
    rows = ctx.run(lambda cur: (cur.execute(sql.TABLE_COLUMN_TYPES, (ctx.database, ctx.table)), cur.fetchall())[1],
                   "read the schema", write=False)
    return {r[0]: (r[1], r[2]) for r in rows}


def _indexes(ctx: Ctx) -> dict[str, str]:
    rows = ctx.run(lambda cur: (cur.execute(sql.TABLE_INDEXES, (ctx.database, ctx.table)), cur.fetchall())[1],
                   "read the schema", write=False)
    return {r[0]: r[1] for r in rows}


def _one(ctx: Ctx, statement: str, params: tuple = ()) -> Any:
    return ctx.run(lambda cur: (cur.execute(statement, params), cur.fetchone())[1], "migrate", write=False)


# ---- the steps -------------------------------------------------------------------------------


def _need_exact(ctx: Ctx) -> bool:
    cols = _columns(ctx)
    return not {cols.get("session_id", (None, None))[1], cols.get("state_key", (None, None))[1]} <= set(sql.EXACT_COLLATIONS)


def _do_exact(ctx: Ctx, advance: Callable[[int], None]) -> None:
    ctx.run(lambda cur: cur.execute(ctx.q(sql.MAKE_KEYS_EXACT)), "migrate", write=True)


def key_variants(ctx: Ctx) -> list[str]:
    """Ids of the table equal under its collation (case, accents, trailing spaces) but spelt
    differently: one id now, several once the key columns are exact. A session spelt more than
    one way (its keys would part: a value read as missing, rows under another user), or within
    a session a key spelt more than one way (a list's hash row counted with its key: the list
    would lose it). A few of each at most, each as ``"session 'alice:s1' / 'Alice:s1' (4 rows)"``
    or ``"key 'memory' / 'Memory' of session 'alice:s1' (4 rows)"``. Full scans: run before the
    step that makes the key columns exact, never on a table whose keys are exact already."""
    if not {"session_id", "state_key"} <= set(_columns(ctx)):
        return []  # not this store's table: the doctor says what is missing, the step fails on it

    def text(b: Any) -> str:
        return bytes(b).decode("utf-8", "replace") if isinstance(b, (bytes, bytearray)) else str(b)

    out = []
    for what, statement in (("session", sql.SESSION_VARIANTS), ("catalog", sql.CATALOG_VARIANTS),
                            ("key", sql.KEY_VARIANTS)):
        rows = ctx.run(lambda cur: (cur.execute(ctx.q(statement)), cur.fetchall())[1], "migrate", write=False)
        for low, high, sid, n in rows:
            if what == "catalog":
                out.append(f"session {text(high)!r}, whose catalog row (and archived history) spells it {text(low)!r}")
                continue
            where = f" of session {text(sid)!r}" if what == "key" else ""
            out.append(f"{what} {text(low)!r} / {text(high)!r}{where} ({n} rows)")
    return out


def refuse_key_variants(ctx: Ctx) -> None:
    """:class:`MigrationError` when making the key columns exact would split an id in two
    (:func:`key_variants`). Nothing is changed; the message says how to give each id one
    spelling (the table's collation still lets an UPDATE merge them: no two rows collide)."""
    found = key_variants(ctx)
    if found:
        raise MigrationError(
            f"table `{ctx.database}`.`{ctx.table}` holds ids spelt in more than one way (case, accents or trailing "
            f"spaces), which its collation reads as one id and exact key columns would split: {'; '.join(found)}. "
            "Nothing was changed. Give each one spelling first (the collation matches every spelling, so one UPDATE "
            "does it; keep the activity time): for a session, the spelling of its catalog row (SELECT state_key "
            "FROM the table WHERE session_id = '__catalog__' AND state_key = '<id>'; its archived history is filed "
            "under it), then UPDATE the table SET session_id = '<that spelling>', updated_at = updated_at WHERE "
            "session_id = '<that spelling>'; for a key, the spelling the application reads, then UPDATE the table "
            "SET state_key = '<it>', updated_at = updated_at WHERE session_id = '<the session>' AND state_key = "
            "'<it>' (and '<it>:_hash' the same way); then migrate. Spellings that are different users or sessions "
            "to the application must not be merged so: docs/operating.md, 'Migrate and doctor'")


def _need_version(ctx: Ctx) -> bool:
    return "version" not in _columns(ctx) or _one(ctx, ctx.q(sql.HAS_UNVERSIONED)) is not None


def _do_version(ctx: Ctx, advance: Callable[[int], None]) -> None:
    if "version" not in _columns(ctx):
        ctx.run(lambda cur: cur.execute(ctx.q(sql.ADD_VERSION_COLUMN)), "migrate", write=True)
    # Rows written unaware of the column read as version 1 already: make it so, in short batches.
    while given := ctx.run(lambda cur: cur.execute(ctx.q(sql.BACKFILL_VERSION)), "migrate", write=True):
        advance(given)


def _need_index(ctx: Ctx) -> bool:
    return ACTIVITY_COLUMNS not in _indexes(ctx).values()


def _do_index(ctx: Ctx, advance: Callable[[int], None]) -> None:
    ctx.run(lambda cur: cur.execute(ctx.q(sql.ADD_ACTIVITY_INDEX)), "migrate", write=True)


def _need_catalog(ctx: Ctx) -> bool:
    return _one(ctx, ctx.q(sql.STALE_CATALOG), (1,)) is not None


#: Sessions whose catalog rows the catalog step builds per batch (a transaction each).
CATALOG_BATCH = 500


def _do_catalog(ctx: Ctx, advance: Callable[[int], None]) -> None:
    for part in session_batches(ctx, CATALOG_BATCH):
        transfer.rebuild_catalog(ctx.db, ctx.t, part)
        advance(len(part))  # a catalog row each, made or brought up to date


def session_batches(ctx: Ctx, size: int = CATALOG_BATCH) -> Iterator[list[str]]:
    """Every packed session id of the table, ``size`` at a time (a loose index scan)."""
    last = ""
    statement = ctx.q(sql.SESSION_IDS_AFTER)
    while True:
        rows = ctx.run(lambda cur: (cur.execute(statement, (last, size)), cur.fetchall())[1], "migrate", write=False)
        if not rows:
            return
        last = rows[-1][0]
        packed = [r[0] for r in rows if keys.is_packed(r[0])]
        if packed:
            yield packed


def _version_sql(ctx: Ctx) -> str:
    """What :func:`_do_version` runs on this table: the column only where it is missing."""
    return (sql.BACKFILL_VERSION if "version" in _columns(ctx)
            else sql.ADD_AND_BACKFILL_VERSION)


#: Each step: its name, the SQL it shows, whether the table needs it, and what does it (given
#: ``advance(rows)``, called after each batch of a step that runs in batches).
_STEPS: list[tuple[str, Callable[[Ctx], str], Callable[[Ctx], bool], Callable[[Ctx, Callable[[int], None]], None]]] = [
    ("0001_exact_key_collation", lambda ctx: sql.MAKE_KEYS_EXACT, _need_exact, _do_exact),
    ("0002_version_column", _version_sql, _need_version, _do_version),
    ("0003_activity_index", lambda ctx: sql.ADD_ACTIVITY_INDEX, _need_index, _do_index),
    ("0004_session_catalog", lambda ctx: sql.REBUILD_CATALOG, _need_catalog, _do_catalog),
]
STEPS = [name for name, *_ in _STEPS]


def pending(ctx: Ctx) -> list[MigrationStep]:
    """The steps the table still needs, in order, with the SQL each would run on it (a step
    that is half done shows only what is left: a version column already there is not added)."""
    return [MigrationStep(name, ctx.q(text(ctx))) for name, text, need, _ in _STEPS if need(ctx)]


def migrate(ctx: Ctx, dry_run: bool,
            progress: Optional[Callable[[int, Optional[int]], None]] = None) -> list[MigrationStep]:
    """Apply (or with ``dry_run`` only list) the steps needed; each recorded once applied.

    Safe beside another process migrating the same table (see the module doc).

    ``progress(done, None)`` once the steps to apply are known (a dry run, or a table that
    needs none, makes no call), then after each batch of the steps that run in batches: the
    version back-fill (``BACKFILL_VERSION``, 10 000 rows a statement) and the catalog build
    (``CATALOG_BATCH``, 500 sessions a batch, each committed). ``done`` is the rows
    migrated so far, across the steps: rows given a version, then catalog rows made or brought
    up to date (one a session); a step of one statement (an ``ALTER TABLE``) adds none, and
    there is no total (counting the rows due would be a scan of its own). A callback that
    raises stops the migration there, the batches before it committed and the step it was in
    not recorded: a migration run again does what is left."""
    todo = pending(ctx)
    if any(step.name == "0001_exact_key_collation" for step in todo):
        refuse_key_variants(ctx)  # a dry run says so too: the real run would refuse
    if dry_run or not todo:
        return todo
    done = 0

    def advance(rows: int) -> None:
        nonlocal done
        done += rows
        if progress is not None:
            progress(done, None)

    advance(0)
    ctx.run(lambda cur: cur.execute(sql.in_database(sql.MIGRATIONS_RECORD_TABLE, ctx.database)), "migrate", write=True)
    applied = []
    for name, text, need, do in _STEPS:
        # Each step looked at again right before it runs: another process may have done it, and
        # an earlier step may have made it needed (the catalog, read again once the key columns
        # compare exactly, may name spellings that now differ).
        planned = next((step for step in todo if step.name == name), None)
        if not need(ctx):
            if planned is not None:  # done meanwhile by another process: recorded all the same
                applied.append(planned)
                ctx.run(lambda cur: cur.execute(sql.in_database(sql.MIGRATIONS_RECORD_STEP, ctx.database),
                                                (ctx.table, name)), "migrate", write=True)
            continue
        step = planned or MigrationStep(name, ctx.q(text(ctx)))
        try:
            do(ctx, advance)
        except MysqlStateError as exc:
            if exc.errno not in ALREADY_DONE_ERRNOS:
                raise
        ctx.run(lambda cur: cur.execute(sql.in_database(sql.MIGRATIONS_RECORD_STEP, ctx.database), (ctx.table, name)),
                "migrate", write=True)
        applied.append(step)
    return applied


# ---- the doctor ------------------------------------------------------------------------------

CHUNK = 2000
BATCH = 500


def scan(ctx: Ctx, between: Optional[Callable[[], None]] = None) -> Iterator[tuple[str, list]]:
    """Every row, a session at a time: ``(session_id, [(key, index, data, updated_at)])``;
    ``between()`` before each chunk after the first is read (what was yielded before is done)."""
    statement = ctx.q(sql.DOCTOR_SCAN)
    last = ("", "", -1)
    current: Optional[str] = None
    rows: list = []
    while True:
        args = sql.after(last) + (CHUNK,)
        got = ctx.run(lambda cur: (cur.execute(statement, args), cur.fetchall())[1], "doctor", write=False)
        for sid, key, index, data, updated in got:
            if sid != current:
                if current is not None:
                    yield current, rows
                current, rows = sid, []
            rows.append((key, index, data, updated))
        if len(got) < CHUNK:
            break
        last = got[-1][:3]
        if between is not None:
            between()
    if current is not None:
        yield current, rows


def _schema_problems(ctx: Ctx) -> list[DoctorFinding]:
    out = []
    cols = _columns(ctx)
    missing = WANTED_COLUMNS - set(cols)
    if missing:
        out.append(DoctorFinding("columns", f"columns {sorted(missing)} are missing"))
    idx = _indexes(ctx)
    if idx.get("PRIMARY") != PRIMARY_KEY:
        out.append(DoctorFinding("primary_key", f"the primary key is ({idx.get('PRIMARY')}), not ({PRIMARY_KEY})"))
    if _need_exact(ctx):
        split = key_variants(ctx)
        out.append(DoctorFinding("collation", "session_id/state_key do not compare exactly (case, trailing spaces): "
                                              "migrate makes them exact" + (
                                     f"; but it refuses until these keys, one under the table's collation, have one "
                                     f"spelling each: {'; '.join(split)}" if split else "")))
    if ACTIVITY_COLUMNS not in idx.values():
        out.append(DoctorFinding("index", "the index by_activity (session_id, updated_at) is missing: migrate adds it"))
    return out


def doctor(ctx: Ctx, fix: bool, progress: Optional[Callable[[int, Optional[int]], None]] = None) -> list[DoctorFinding]:
    """Check the table (see the module doc); with ``fix`` repair what is safe and say so.

    ``progress(done, None)`` once the schema is checked (and, with ``fix``, migrated), then
    after each chunk of the scan (``CHUNK`` rows read, the sessions they complete checked and
    repaired), and once more when the catalog and history are checked too: ``done`` is the
    sessions (``<user>:<session>`` ids) checked so far; there is no total (counting the sessions
    would be a scan of its own). A callback that raises stops the doctor there, without its
    findings; the repairs made before it stay (each committed), and a doctor run again finds
    what is left."""
    problems = _schema_problems(ctx)
    if fix and problems:
        try:
            migrate(ctx, dry_run=False)
            migrated = ""
        except MigrationError as exc:
            migrated = str(exc)
        for p in problems:
            if p.kind in ("collation", "index") and not migrated:
                p.fixed = True
                p.message += " (fixed: migrated)"
            elif p.kind in ("collation", "index"):
                p.message += f" (not fixed: {migrated})"
    if any(p.kind in ("columns", "primary_key") for p in problems):
        return problems  # the rows cannot be read as this store's
    started = _one(ctx, sql.DOCTOR_NOW)[0]
    catalog_rows: dict[str, Optional[dt.datetime]] = {}  # None: a catalog row without activity time
    last_write: dict[str, Optional[dt.datetime]] = {}  # None: no row of the session has a time
    history: dict[str, int] = {}
    unchecked = 0  # sealed rows a doctor without the keyring checks by their envelope's form only
    checked = 0  # sessions checked, for progress

    def report() -> None:
        if progress is not None:
            progress(checked, None)

    report()
    for sid, rows in scan(ctx, report):
        if sid == keys.CATALOG_SESSION:
            problems += _catalog_rows_malformed(ctx, rows, fix)
            catalog_rows.update((key, updated) for key, index, _, updated in rows
                                if index == 0 and transfer.is_packed_id(key))
            continue
        found = _row_problems(ctx, sid, rows, False)
        if found:  # the scan's chunks may have read a list before and after a write: a second look
            rows = _session_rows(ctx, sid)
            found = _row_problems(ctx, sid, rows, fix)
        problems += found
        if not ctx.keyring:
            unchecked += sum(1 for key, _, data, _ in rows if not key.endswith(keys.HASH_SUFFIX) and is_sealed(data))
        if not keys.is_packed(sid) and not sid.startswith(keys.HISTORY_PREFIX):  # not the store's: said, left
            problems.append(DoctorFinding(
                "foreign", f"{len(rows)} row(s) of session id {sid!r}, which is neither a '<user>:<session>' id nor "
                "one of the store's own: no read, export, stats or prune reaches them (truncate_all_sessions "
                "deletes them); move or delete them by hand", sid))
        if sid.startswith(keys.HISTORY_PREFIX):
            history[sid] = len(rows)
        if keys.is_packed(sid):
            last_write[sid] = max((r[3] for r in rows if r[3] is not None), default=None)
            checked += 1
    problems += _catalog_problems(ctx, catalog_rows, last_write, fix, started)
    problems += _history_problems(ctx, history, last_write, started, fix)
    report()
    if unchecked:  # found nothing wrong is not "healthy" for rows it could not open: said
        warnings.warn(f"doctor checked {unchecked} encrypted row(s) by their envelope's form only: this store has no "
                      "keyring (encryption=...), so their content, and the lists they are items of against their "
                      "hash rows, were not checked; run the doctor with the keyring to check them",
                      MysqlStateWarning, stacklevel=caller_stacklevel())
    return problems


_SEALED = b""  # an item sealed that this doctor cannot open (no keyring): checked by form only


def _row_problems(ctx: Ctx, sid: str, rows: list, fix: bool) -> list[DoctorFinding]:
    """What is wrong with one session's rows: unreadable ones, lists not whole (repaired with
    ``fix``)."""
    found: list[DoctorFinding] = []
    opened = _open_rows(ctx, sid, rows, found)
    if keys.is_packed(sid):
        found += _list_problems(ctx, sid, rows, opened, fix)
    return found


def _session_rows(ctx: Ctx, sid: str) -> list:
    """One session's rows ``(key, index, data, updated_at)`` now, in one statement."""
    statement = ctx.q(sql.DOCTOR_SESSION)
    return list(ctx.run(lambda cur: (cur.execute(statement, (sid,)), cur.fetchall())[1], "doctor", write=False))


def _open_item(ctx: Ctx, sid: str, key: str, index: int, position: int, text: Any) -> bytes:
    """A row's plaintext JSON; an item moved off its place (the list's ``position``-th row,
    stored at another index) is opened where it was sealed. Raises DecryptionError."""
    try:
        return ctx.plain(sid, key, index, text)
    except DecryptionError:
        if position == index or not ctx.keyring:
            raise
        return ctx.plain(sid, key, position, text)


def _open_rows(ctx: Ctx, sid: str, rows: list, problems: list[DoctorFinding]) -> dict[tuple[str, int], Optional[bytes]]:
    """Each value or item row's JSON, ``None`` when it is unreadable (reported in ``problems``),
    ``_SEALED`` when it is sealed and this doctor has no keyring (its envelope's form checked)."""
    out: dict[tuple[str, int], Optional[bytes]] = {}
    position: dict[str, int] = {}
    for key, index, data, _ in rows:
        if key.endswith(keys.HASH_SUFFIX):
            continue  # the hash row (the Java store's is not JSON): checked with its list
        p = position[key] = position.get(key, -1) + 1
        where = f"row ({sid!r}, {key!r}, {index})"
        if is_sealed(data) and not ctx.keyring:
            out[(key, index)] = _SEALED if well_formed(data) else None
            if out[(key, index)] is None:
                problems.append(DoctorFinding("sealed", f"{where} is not a well-formed encrypted envelope", sid, key))
            continue
        try:
            text = _open_item(ctx, sid, key, index, p, data)
        except DecryptionError as exc:
            out[(key, index)] = None
            why = (f"cannot be decrypted (key id {exc.key_id!r})" if exc.key_id is not None else
                   "is not encrypted, and the keyring refuses plaintext rows (allow_plaintext=False)")
            problems.append(DoctorFinding("sealed", f"{where} {why}", sid, key))
            continue
        out[(key, index)] = text if _is_json(text) else None
        if out[(key, index)] is None:
            problems.append(DoctorFinding("json", f"{where} is not valid JSON", sid, key))
    return out


def _is_json(data: Any) -> bool:
    try:
        orjson.loads(data)
        return True
    except orjson.JSONDecodeError:
        return False


def _list_problems(ctx: Ctx, sid: str, rows: list, opened: dict, fix: bool) -> list[DoctorFinding]:
    """What is wrong with the lists of one session, each repaired with ``fix`` only where the
    repair cannot change what a read of the list returns, or puts back what its hash row proves
    (see :func:`_fixed`): a checkpoint of LangGraph refers to log items by position, so rows are
    never renumbered on a guess."""
    by_key: dict[str, list] = {}
    for key, index, data, _ in rows:
        by_key.setdefault(key, []).append((index, data))
    out = []
    for key, items in by_key.items():
        if key.endswith(keys.HASH_SUFFIX):
            base = key[: -len(keys.HASH_SUFFIX)]
            text = items[0][1]
            stored = ListHash.parse(text)
            if stored is None and ListHash.damaged(text if isinstance(text, str) else None):
                have = [i for i, _ in by_key.get(base, [])]
                said = _LENGTH.search(text)  # what is left of the row: its count, when not cut before it
                out.append(_fixed(ctx, fix, DoctorFinding("hash_row", f"list {base!r} of {sid!r}: its hash row cannot "
                                                    "be read (cut short, or changed by hand), so every read of the list "
                                                    "fails", sid, base),
                                  None if have == list(range(len(have))) and said and int(said.group(1)) == len(have)
                                  else f"its item rows are at {_few(have)}, and what is left of its hash row "
                                       + (f"says {said.group(1)} items" if said else "does not say how many items")
                                       + ": nothing tells which rows the list had"))
            elif base not in by_key and stored is not None and stored.n != 0:
                out.append(_fixed(ctx, fix, DoctorFinding("list_rows", f"list {base!r} of {sid!r}: its hash row says "
                                                    f"{stored.n} items but it has none", sid, base),
                                  "its items are gone: restore them from a backup, or delete the key"))
            continue
        head = by_key.get(keys.hash_key(key))
        indexes = [i for i, _ in items]
        if head is None:
            if indexes != [0]:
                out.append(_fixed(ctx, fix, DoctorFinding("no_hash_row", f"list {key!r} of {sid!r} has item rows "
                                                    f"{indexes[:5]}... but no hash row", sid, key),
                                  None if indexes == list(range(len(indexes))) else _GUESS))
            continue
        stored = ListHash.parse(head[0][1])
        strays = (_strays(ctx, sid, stored, key, indexes, opened)
                  if stored is not None and stored.n != len(items) else [])
        if indexes != list(range(len(items))) or strays:
            if strays:
                assert stored is not None  # strays are looked for only under a hash row of ours
                p = DoctorFinding("list_rows", f"list {key!r} of {sid!r}: rows at item_index {_few(strays)} lie "
                                               f"outside the {stored.n} items its hash row proves (0..{stored.n - 1})",
                                  sid, key)
                out.append(_set_aside(ctx, fix, p, head[0][1], strays, indexes))
            else:
                out.append(_fixed(ctx, fix, DoctorFinding("list_rows", f"list {key!r} of {sid!r}: item rows are at "
                                                    f"{_few(indexes)}, not 0..{len(items) - 1}", sid, key),
                                  None if _proven_in_order(ctx, sid, stored, key, indexes, opened) else
                                  _GUESS if ctx.keyring or not any(opened.get((key, i)) is _SEALED for i in indexes) else
                                  "its items are sealed and this doctor has no keyring to check them"))
            continue
        if stored is None:
            continue  # a hash row of another format (the Java store's): the next save rewrites it
        datas = [opened.get((key, i)) for i in indexes]
        if any(d is None for d in datas):
            continue  # reported as json or sealed; not repairable here
        dig = ctx.digester(stored.dk, sid, key)
        if dig is None and ctx.keyring:
            out.append(DoctorFinding("hash_row", f"list {key!r} of {sid!r}: its hash row's digests are under key id "
                                                 f"{digest_kid(stored.dk or '')!r}, which the keyring lacks, so "
                                                 "nothing can check its "
                                                 "items against it (not fixed: give the keyring that key, then "
                                                 "doctor(fix=True); or save the list again)", sid, key))
            continue
        if stored.n != len(items):
            out.append(_fixed(ctx, fix, DoctorFinding("hash_row", f"list {key!r} of {sid!r}: its hash row says "
                                                f"{stored.n} items, {len(items)} are stored", sid, key),
                              "an item row was lost or added by hand: restore the list from a backup, or save it again"))
        elif (dig is not None and _SEALED not in datas  # (and no data is None: skipped above)
              and not listsync.verify(stored, cast(list[bytes], datas), dig)):
            # The rows are the list's, in place: a read returns them as they are; the fix makes the
            # hash row theirs (it changes no read).
            out.append(_fixed(ctx, fix, DoctorFinding("hash_row", f"list {key!r} of {sid!r}: its hash row disagrees "
                                                f"with its {len(items)} items (changed by hand, or an old row put "
                                                "back)", sid, key)))
    return out


#: The item count at the start of a hash row of this store (``{"fmt":...,"n":3,...``).
_LENGTH = re.compile(r'^\{"fmt":"mysql-state/[^"]*","n":(\d+),')
#: Why a list with rows missing or misplaced is not renumbered by the doctor's fix.
_GUESS = ("nothing proves which rows are the list, and renumbering them would shift its items (a LangGraph "
          "checkpoint refers to log items by position): restore the list from a backup, or save it again")


def _proves(ctx: Ctx, sid: str, key: str, stored: ListHash, datas: list) -> bool:
    """Whether a hash row of this store proves ``datas`` (items ``0..n-1``, in order) the list
    it records: the store has its digest key, every item was opened (none unreadable, none
    sealed beyond this doctor's keyring), and its count and digests, which depend on each
    item's position, agree (:func:`listsync.verify`)."""
    dig = ctx.digester(stored.dk, sid, key)
    return dig is not None and not any(d is None or d is _SEALED for d in datas) and listsync.verify(stored, datas, dig)


def _proven_in_order(ctx: Ctx, sid: str, stored: Optional[ListHash], key: str, indexes: list[int],
                     opened: dict) -> bool:
    """Whether the rows of a list, renumbered ``0..n-1`` in the order of their indexes, are the
    list its hash row (this store's) records (a row stored at a wrong index, in order)."""
    return stored is not None and _proves(ctx, sid, key, stored, [opened.get((key, i)) for i in indexes])


def _few(indexes: list[int]) -> str:
    return str(indexes[:8])[:-1] + (", ...]" if len(indexes) > 8 else "]")


def _strays(ctx: Ctx, sid: str, stored: Optional[ListHash], key: str, indexes: list[int],
            opened: dict) -> list[int]:
    """The rows of a list its hash row (this store's) does not count, when the rows it counts,
    ``0..n-1``, are all there and its digests prove them the list saved; else [] (nothing
    proves which rows are the list)."""
    if stored is None:
        return []
    inside = [i for i in indexes if 0 <= i < stored.n]
    if inside != list(range(stored.n)) or not _proves(ctx, sid, key, stored, [opened.get((key, i)) for i in inside]):
        return []
    return [i for i in indexes if not 0 <= i < stored.n]


def _set_aside(ctx: Ctx, fix: bool, p: DoctorFinding, head_text: Any, strays: list[int],
               indexes: list[int]) -> DoctorFinding:
    """Move the rows ``strays`` of a list out of it, nothing lost: each archived under the
    session's history id (``get_history`` reads them, oldest first; sealed again for the new
    place), then deleted, under the hash row's lock and only if the hash row is still the one
    that proved them outside. The list's other rows, versions and activity times are left."""
    if not fix or p.key is None or p.session_id is None:
        return p
    sid, k, hsid = p.session_id, p.key, keys.history_session(p.session_id)

    def move(cur: Any) -> int:
        cur.execute(ctx.q(sql.RELIST_LOCK_HEAD), (sid, keys.hash_key(k)))
        head = cur.fetchone()
        if head is None or head[0] != head_text:
            return 0  # written since: the next doctor looks again
        cur.execute(sql.with_ids(ctx.q(sql.DOCTOR_ROWS_AT), len(strays)), (sid, k, *strays))
        found = sorted(cur.fetchall())
        cur.execute(ctx.q(sql.NEXT_ARCHIVE_INDEX), (hsid, k))
        at = int(cur.fetchone()[0])
        for j, (index, text) in enumerate(found):
            plain = _open_item(ctx, sid, k, index, indexes.index(index), text)  # as the doctor opened it
            cur.execute(ctx.q(sql.DOCTOR_ARCHIVE_ROW), (hsid, k, at + j, ctx.seal(hsid, k, at + j, plain).decode()))
        cur.execute(sql.with_ids(ctx.q(sql.DOCTOR_DELETE_AT), len(strays)), (sid, k, *strays))
        return len(found)

    try:
        moved = ctx.run(move, "doctor --fix", write=True)
    except DecryptionError:
        p.message += " (not fixed: a row cannot be decrypted" + ("" if ctx.keyring else " without the keyring") + ")"
        return p
    if moved:
        ctx.forget((sid, k))
        p.fixed = True
        p.message += f" (fixed: {moved} row{'' if moved == 1 else 's'} moved to the key's history, get_history reads them)"
    else:
        p.message += " (not fixed: the list was written meanwhile; run the doctor again)"
    return p


def relist(cur: Any, ctx: Ctx, sid: str, k: str, skip: Callable[[Optional[str]], bool] = lambda text: False,
           require_json: bool = False, whole_only: bool = False) -> int:
    """Write one list anew as maintenance, under its hash row's lock: the items in the order of
    their rows, renumbered ``0..n-1`` and sealed for their place under the current key, the hash
    row recomputed with the current digester. Versions and activity times stay (a row it must
    insert takes the list's last activity time) and the catalog is not touched, so a repair or a
    re-encryption never looks like a caller's write. Returns the rows written; 0 when
    ``skip(the hash row's text)`` (None: it is missing) says so, and, with ``whole_only``
    (re-encryption), when the list is not whole (:func:`whole`): a list the doctor would report
    is left as it is (its rows are sealed again in place, one by one), never renumbered into a
    list nobody saved, so its damage stays visible to reads and to the doctor. Raises
    ``DecryptionError`` for an item that cannot be opened, ``ValueError`` (``require_json``)
    for one not JSON.
    """
    hk = keys.hash_key(k)
    cur.execute(ctx.q(sql.RELIST_LOCK_HEAD), (sid, hk))
    head = cur.fetchone()
    if skip(head[0] if head is not None else None):
        return 0
    cur.execute(ctx.q(sql.RELIST_ITEMS), (sid, k))
    have = cur.fetchall()
    datas = [_open_item(ctx, sid, k, r[0], p, r[1]) for p, r in enumerate(have)]
    if whole_only and not whole(ctx, sid, k, head[0] if head is not None else None, [r[0] for r in have], datas):
        return 0
    if require_json and not all(_is_json(d) for d in datas):
        raise ValueError(f"list {k!r} of {sid!r} has an item that is not JSON")
    new_hash = listsync.hash_of(datas, ctx.current(sid, k))
    rows = [(k, i, ctx.seal(sid, k, i, d)) for i, d in enumerate(datas)] + [(hk, 0, new_hash.to_json())]
    for statement, params in sql.upsert_rows((ctx.q(sql.UPSERT_ROWS_HEAD), ctx.q(sql.RELIST_KEEP_TAIL)), sid, rows,
                                              ctx.statement_bytes):
        cur.execute(statement, params)
    cur.execute(ctx.q(sql.RELIST_DELETE_OUTSIDE), (sid, k, len(datas)))
    if head is None:  # a new hash row: the key keeps the version its row 0 had
        cur.execute(ctx.q(sql.RELIST_SET_VERSION), (next((r[2] for r in have if r[0] == 0), 1), sid, hk))
    last = max((r[-1] for r in (*have, *([head] if head else ())) if r[-1] is not None), default=None)
    if last is not None:
        cur.execute(ctx.q(sql.RELIST_BACK_DATE), (last, sid, k, hk, last))
    ctx.forget((sid, k))
    return len(rows)


def whole(ctx: Ctx, sid: str, key: str, head: Optional[str], indexes: list[int], datas: list[bytes]) -> bool:
    """Whether a list's rows are the list its hash row describes: items ``0..n-1`` with no gap,
    and, under a hash row of this store, ``n`` of them whose digests it proves (with the digest
    key it names, which the store must have). A hash row of another writer (the Java store's)
    is only checked for the items' numbering; one of this store that cannot be read is not
    whole."""
    if indexes != list(range(len(indexes))) or any(not _is_json(d) for d in datas):
        return False
    stored = ListHash.parse(head)
    if stored is None:
        return not ListHash.damaged(head)
    return _proves(ctx, sid, key, stored, datas)


def _fixed(ctx: Ctx, fix: bool, p: DoctorFinding, unsafe: Optional[str] = None) -> DoctorFinding:
    """Repair a list (numbered 0..n-1 in order, its hash row recomputed) under its lock; not
    when ``unsafe`` says why the repair could change what a read returns (a typed error made a
    list nobody saved): the finding then says so and stays."""
    if not fix or p.key is None:
        return p
    if unsafe is not None:
        p.message += f" (not fixed: {unsafe})"
        return p
    sid, key = p.session_id, p.key
    assert sid is not None  # a list's finding names its session (every caller's does)
    try:
        ctx.run(lambda cur: relist(cur, ctx, sid, key, require_json=True), "doctor --fix", write=True)
    except DecryptionError:
        p.message += " (not fixed: an item cannot be decrypted" + ("" if ctx.keyring else " without the keyring") + ")"
        return p
    except ValueError:
        return p
    p.fixed = True
    p.message += " (fixed: items renumbered in order, hash row recomputed)"
    return p


def _recheck(ctx: Ctx, sids: list[str]) -> tuple[dict, dict]:
    """The catalog times and last writes of ``sids`` now, each batch in one statement (one
    snapshot): the doctor's scan reads the catalog rows first and the sessions' rows up to
    seconds later, so a session written, made or deleted meanwhile looks wrong in it."""
    have: dict[str, Any] = {}
    last: dict[str, Any] = {}
    for part in catalog.chunks(sids, 500):
        statement = sql.with_ids(ctx.q(sql.DOCTOR_CATALOG_RECHECK), len(part))
        rows = ctx.run(lambda cur: (cur.execute(statement, (*part, *part)), cur.fetchall())[1], "doctor", write=False)
        for kind, sid, when in rows:
            (have if kind == "c" else last)[sid] = when
    return have, last


def _catalog_wrong(catalog_rows: dict, last_write: dict, now: Any = None) -> tuple[list, list, list, list]:
    """Sessions with rows but no catalog row, sessions whose catalog row is behind their last
    write by more than ``catalog.ACTIVITY_LAG``, catalog rows that name no session with rows,
    and (given the server's ``now``) catalog rows whose activity time is ahead of it by more than
    that lag (set by hand: such a session is never pruned)."""
    missing = [sid for sid in last_write if catalog_rows.get(sid) is None]
    behind = [sid for sid, last in last_write.items()
              if last is not None and catalog_rows.get(sid) is not None and catalog_rows[sid] < last - catalog.ACTIVITY_LAG]
    orphans = [sid for sid in catalog_rows if sid not in last_write]
    ahead = [] if now is None else [sid for sid in last_write if catalog_rows.get(sid) is not None
                                    and catalog_rows[sid] > now + catalog.ACTIVITY_LAG]
    return missing, behind, orphans, ahead


def _catalog_problems(ctx: Ctx, catalog_rows: dict, last_write: dict, fix: bool,
                      now: Any = None) -> list[DoctorFinding]:
    doubtful = [sid for found in _catalog_wrong(catalog_rows, last_write, now) for sid in found]
    if not doubtful:
        return []
    # A second look at those alone, in one snapshot: only what is still wrong is a problem.
    catalog_rows, last_write = _recheck(ctx, doubtful)
    missing, behind, orphans, ahead = _catalog_wrong(catalog_rows, last_write, now)
    wrong = set(missing) | set(behind)
    stale = [sid for sid in last_write if sid in wrong]  # in the order the table holds them
    out = [DoctorFinding("catalog", f"session {sid!r} has no catalog row (written behind the catalog's back)", sid)
           if sid not in catalog_rows else
           DoctorFinding("catalog", f"the catalog row of {sid!r} has no activity time (updated_at is NULL); its rows "
                                    f"were written at {last_write[sid]}", sid)
           if catalog_rows[sid] is None else
           DoctorFinding("catalog", f"the catalog row of {sid!r} says {catalog_rows[sid]}, its rows were written at "
                                    f"{last_write[sid]}", sid) for sid in stale]
    out += [DoctorFinding("catalog", f"catalog row {sid!r} names a session with no rows", sid) for sid in orphans]
    out += [DoctorFinding("catalog", f"the catalog row of {sid!r} says {catalog_rows[sid]}, after the server's clock "
                                     f"({now}): the session would never look idle to prune; its rows were written at "
                                     f"{last_write[sid]}", sid) for sid in ahead]
    if fix:
        transfer.rebuild_catalog(ctx.db, ctx.t, stale)
        for part in catalog.chunks(ahead, 500):  # back to the rows' last write (rebuild only widens)
            statement = sql.with_ids(ctx.q(sql.CATALOG_BACK_TO_ROWS), len(part))
            ctx.run(lambda cur: cur.execute(statement, tuple(part)), "doctor --fix", write=True)

        def drop(cur: Any, sid: str) -> None:
            cur.execute(ctx.q(sql.DOCTOR_SESSION_ROWS), (sid,))
            if int(cur.fetchone()[0]) == 0:
                cur.execute(ctx.q(sql.CATALOG_DELETE), (sid,))

        for sid in orphans:
            ctx.run(lambda cur: drop(cur, sid), "doctor --fix", write=True)
        for p in out:
            p.fixed = True
            p.message += " (fixed)"
    return out


def _catalog_rows_malformed(ctx: Ctx, rows: list, fix: bool) -> list[DoctorFinding]:
    """Catalog rows an import of the table's export would refuse (:func:`transfer.check_row`):
    at an index other than 0, naming no valid session, or whose text is not ``{}``. ``fix``
    makes the text ``{}`` (the activity time kept) and deletes the others."""
    out = []
    for key, index, data, _ in rows:
        try:
            transfer.check_row(keys.CATALOG_SESSION, key, index, data if isinstance(data, str) else str(data), 0)
            continue
        except ValueError as exc:
            why = str(exc)
        p = DoctorFinding("catalog", f"catalog row ({key[:60]!r}, item_index {index}) is malformed, so an export of "
                                     f"the table would not import: {why}", key)
        if fix:
            text_only = index == 0 and transfer.is_packed_id(key)
            statement = ctx.q(sql.DOCTOR_CATALOG_TEXT if text_only else sql.DOCTOR_CATALOG_DROP)
            params = (key,) if text_only else (key, index)
            ctx.run(lambda cur: cur.execute(statement, params), "doctor --fix", write=True)
            p.fixed = True
            p.message += " (fixed: its text made '{}', its activity time kept)" if text_only else " (fixed: deleted)"
        out.append(p)
    return out


def _history_problems(ctx: Ctx, history: dict[str, int], last_write: dict, started: Any, fix: bool) -> list[DoctorFinding]:
    """History rows whose session has no data rows left (erased, or every key deleted): no read,
    ``sessions()`` or ``prune`` reaches them. ``fix`` deletes those archived before the doctor
    started, in batches."""
    reachable = {keys.history_session(sid) for sid in last_write}
    if any(hsid not in reachable for hsid in history):
        # A second look: a session made after the scan passed its place (an import of it with
        # its history, say) owns its history again; one deleted meanwhile took its history
        # with it (its rows, counted again, are gone): neither is a problem.
        reachable |= {keys.history_session(sid) for part in session_batches(ctx) for sid in part}
    out = []
    count = ctx.q(sql.DOCTOR_HISTORY_ROWS)
    for hsid in history:
        if hsid in reachable:
            continue
        n = int(_one(ctx, count, (hsid,))[0])
        if not n:
            continue  # deleted with its session while the doctor ran
        p = DoctorFinding("orphaned_history", f"{n} archived history rows under {hsid!r} belong to no session "
                                        "(it has no data rows): orphaned history", hsid)
        if fix:
            statement = ctx.q(sql.DOCTOR_DELETE_HISTORY)
            deleted = 0
            while True:
                got = ctx.run(lambda cur: cur.execute(statement, (hsid, started, BATCH)), "doctor --fix", write=True)
                deleted += got
                if got < BATCH:
                    break
            p.fixed = True
            p.message += f" (fixed: {deleted} deleted" + (f"; {n - deleted} archived since the doctor began are left"
                                                          if deleted < n else "") + ")"
        out.append(p)
    return out
