"""Set-up of a store's table: the collation probe, ``max_allowed_packet``, the table created
or checked, the ``version`` column added, and the warning for key columns that are not exact.

Runs once when a store opens (on the primary: replicas get no DDL); :func:`key_collation_exact`
again after ``migrate``/``doctor`` changed the schema.
"""

from __future__ import annotations

import warnings
from typing import Any, NamedTuple

from . import keys, sql
from .errors import DUPLICATE_COLUMN, MysqlStateWarning, SchemaNotFoundError, caller_stacklevel, errno_of

__all__ = ["Found", "set_up", "key_collation_exact"]

_WARNED: set[tuple[str, str]] = set()  # tables warned about once per process


class Found(NamedTuple):
    """What :func:`set_up` learnt of the server and the table."""

    collation: str  # the best exact collation the server has (else the padding binary one)
    max_allowed_packet: int
    exact_keys: bool  # session_id/state_key compare exactly (case and trailing spaces)


def set_up(cur: Any, db: str, table: str, create: bool) -> Found:
    """Probe the server, create or check the table, add the version column; see the module doc."""
    quoted = keys.quote_table(db, table)
    cur.execute(sql.AVAILABLE_COLLATIONS, (*sql.EXACT_COLLATIONS, sql.PAD_COLLATION))
    have = {r[0] for r in cur.fetchall()}
    collation = next((c for c in sql.EXACT_COLLATIONS if c in have), sql.PAD_COLLATION)
    cur.execute(sql.MAX_ALLOWED_PACKET)
    max_allowed_packet = int(cur.fetchone()[0])
    create_table = sql.render(sql.CREATE_TABLE, quoted, collation)
    if create:
        cur.execute(sql.in_database(sql.CREATE_DATABASE, db))
        cur.execute(create_table)
    else:
        cur.execute(sql.SCHEMA_EXISTS, (db,))
        if cur.fetchone() is None:
            raise SchemaNotFoundError("database", f"`{db}`", (sql.in_database(sql.CREATE_DATABASE, db), create_table))
        cur.execute(sql.TABLE_EXISTS, (db, table))
        if cur.fetchone() is None:
            raise SchemaNotFoundError("table", f"`{db}`.`{table}`", (create_table,))
    columns = _columns(cur, db, table)
    if "version" not in columns:
        try:
            cur.execute(sql.render(sql.ADD_VERSION_COLUMN, quoted))
        except Exception as exc:
            if errno_of(exc) != DUPLICATE_COLUMN:  # another worker added it meanwhile
                raise
    key_collations = {columns.get("session_id"), columns.get("state_key")}
    exact = key_collations <= set(sql.EXACT_COLLATIONS)
    if not exact and (db, table) not in _WARNED:
        _WARNED.add((db, table))
        fix = sql.render(sql.MAKE_KEYS_EXACT, quoted, collation)
        warnings.warn(
            f"table `{db}`.`{table}` compares session_id/state_key with collation "
            f"{sorted(c or '?' for c in key_collations)}, which is not exact (case or "
            f"trailing spaces): ids that differ only so would share rows. Make it exact "
            f"with: {fix}",
            MysqlStateWarning,
            stacklevel=caller_stacklevel(),
        )
    return Found(collation, max_allowed_packet, exact)


def key_collation_exact(cur: Any, db: str, table: str) -> bool:
    """Whether the key columns compare exactly now (after a migration changed them)."""
    columns = _columns(cur, db, table)
    return {columns.get("session_id"), columns.get("state_key")} <= set(sql.EXACT_COLLATIONS)


def _columns(cur: Any, db: str, table: str) -> dict:
    cur.execute(sql.TABLE_COLUMNS, (db, table))
    return dict(cur.fetchall())

