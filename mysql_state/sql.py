"""Every SQL statement of the store, as named templates plus pure builders.

Templates hold ``{t}`` for the backtick-quoted ``db.table`` (validated in :mod:`keys`) and
``{c}`` for the exact collation; every value is a ``%s`` parameter. Builders return
``(sql, params)`` and do no I/O. The SQL runs unchanged on MySQL 8 and MariaDB 10.11
(``VALUES(col)`` in ``ON DUPLICATE KEY UPDATE``, not MySQL 8's row alias).
"""

from __future__ import annotations

from typing import Iterable, Sequence

Statement = tuple[str, tuple]

# ---- schema -------------------------------------------------------------------------------

CREATE_DATABASE = (
    "CREATE DATABASE IF NOT EXISTS `{db}` DEFAULT CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci"
)
CREATE_TABLE = (
    "CREATE TABLE IF NOT EXISTS {t} ("
    " session_id VARCHAR(255) CHARACTER SET utf8mb4 COLLATE {c} NOT NULL,"
    " state_key VARCHAR(255) CHARACTER SET utf8mb4 COLLATE {c} NOT NULL,"
    " item_index INT NOT NULL DEFAULT 0,"
    " state_data LONGTEXT NOT NULL,"
    " version BIGINT NOT NULL DEFAULT 0,"
    " created_at DATETIME DEFAULT CURRENT_TIMESTAMP,"
    " updated_at DATETIME DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,"
    " PRIMARY KEY (session_id, state_key, item_index)"
    ") DEFAULT CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci"
)
MAKE_KEYS_EXACT = (
    "ALTER TABLE {t}"
    " MODIFY session_id VARCHAR(255) CHARACTER SET utf8mb4 COLLATE {c} NOT NULL,"
    " MODIFY state_key VARCHAR(255) CHARACTER SET utf8mb4 COLLATE {c} NOT NULL"
)
ADD_VERSION_COLUMN = "ALTER TABLE {t} ADD COLUMN version BIGINT NOT NULL DEFAULT 0"
SCHEMA_EXISTS = "SELECT 1 FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = %s"
TABLE_EXISTS = "SELECT 1 FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s"
TABLE_COLUMNS = (
    "SELECT COLUMN_NAME, COLLATION_NAME FROM information_schema.COLUMNS"
    " WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s"
)
# Exact (binary, NO PAD) collations, best first: MySQL 8, MariaDB; utf8mb4_bin pads spaces.
EXACT_COLLATIONS = ("utf8mb4_0900_bin", "utf8mb4_nopad_bin")
PAD_COLLATION = "utf8mb4_bin"
AVAILABLE_COLLATIONS = (
    "SELECT COLLATION_NAME FROM information_schema.COLLATIONS WHERE COLLATION_NAME IN (%s, %s, %s)"
)
MAX_ALLOWED_PACKET = "SELECT @@max_allowed_packet"
# Writes run in READ COMMITTED: no gap locks, so writers creating lists in neighbouring key
# ranges do not deadlock; the hash row's lock (or, for a new list, its duplicate key)
# serialises writers of one list. Once per connection the store owns; per transaction else.
READ_COMMITTED_SESSION = "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED"
READ_COMMITTED_NEXT = "SET TRANSACTION ISOLATION LEVEL READ COMMITTED"

# ---- single values --------------------------------------------------------------------------

SELECT_VALUE = (
    "SELECT state_data, version FROM {t} WHERE session_id = %s AND state_key = %s AND item_index = 0"
)
# Remove what a list left under a key that now holds a single value (items 1.. and the hash row).
DELETE_LIST_REMAINS = (
    "DELETE FROM {t} WHERE session_id = %s"
    " AND ((state_key = %s AND item_index > 0) OR (state_key = %s AND item_index = 0))"
)
# LAST_INSERT_ID(expr) hands the new version back in the OK packet: one round trip.
UPSERT_VALUE = (
    "INSERT INTO {t} (session_id, state_key, item_index, state_data, version)"
    " VALUES (%s, %s, 0, %s, 1)"
    " ON DUPLICATE KEY UPDATE state_data = VALUES(state_data), version = LAST_INSERT_ID(version + 1)"
)
INSERT_VALUE = (
    "INSERT INTO {t} (session_id, state_key, item_index, state_data, version) VALUES (%s, %s, 0, %s, 1)"
)
UPDATE_IF_VERSION = (
    "UPDATE {t} SET state_data = %s, version = version + 1"
    " WHERE session_id = %s AND state_key = %s AND item_index = 0 AND version = %s"
)

# ---- lists ----------------------------------------------------------------------------------

LOCK_HASH_ROW = (
    "SELECT state_data FROM {t} WHERE session_id = %s AND state_key = %s AND item_index = 0 FOR UPDATE"
)
INSERT_HASH_ROW = (
    "INSERT INTO {t} (session_id, state_key, item_index, state_data, version) VALUES (%s, %s, 0, %s, 1)"
)
SELECT_HASH_ROW = "SELECT state_data FROM {t} WHERE session_id = %s AND state_key = %s AND item_index = 0"
LOCK_ITEMS = (
    "SELECT item_index, state_data FROM {t} WHERE session_id = %s AND state_key = %s"
    " ORDER BY item_index FOR UPDATE"
)
SELECT_ITEMS = "SELECT state_data FROM {t} WHERE session_id = %s AND state_key = %s ORDER BY item_index"
SELECT_WINDOW = (
    "SELECT state_data FROM {t} WHERE session_id = %s AND state_key = %s AND item_index >= %s"
    " ORDER BY item_index LIMIT %s"
)
SELECT_TAIL = (
    "SELECT state_data FROM {t} WHERE session_id = %s AND state_key = %s"
    " ORDER BY item_index DESC LIMIT %s"
)
COUNT_ITEMS = "SELECT COUNT(*) FROM {t} WHERE session_id = %s AND state_key = %s"
DELETE_ITEMS_FROM = "DELETE FROM {t} WHERE session_id = %s AND state_key = %s AND item_index >= %s"
UPSERT_ROWS_HEAD = "INSERT INTO {t} (session_id, state_key, item_index, state_data, version) VALUES "
UPSERT_ROW = "(%s, %s, %s, %s, 1)"
UPSERT_ROWS_TAIL = " ON DUPLICATE KEY UPDATE state_data = VALUES(state_data), version = version + 1"

# ---- sessions -------------------------------------------------------------------------------

SESSION_EXISTS = "SELECT 1 FROM {t} WHERE session_id = %s LIMIT 1"
DELETE_SESSION = "DELETE FROM {t} WHERE session_id = %s"
DELETE_KEY = "DELETE FROM {t} WHERE session_id = %s AND state_key IN (%s, %s)"
# A range on the primary key instead of LIKE: no wildcard in a user id can widen it.
# ';' is the code point after ':', so [user + ':', user + ';') is exactly that user's ids.
SESSIONS_OF_USER = "SELECT DISTINCT session_id FROM {t} WHERE session_id >= %s AND session_id < %s"
# On a table whose key collation is not binary (the range above assumes code point order):
# an escaped LIKE prefix; the store filters the result by the exact prefix as well.
SESSIONS_OF_USER_LIKE = "SELECT DISTINCT session_id FROM {t} WHERE session_id LIKE %s ESCAPE '!'"
COUNT_ROWS = "SELECT COUNT(*) FROM {t}"
TRUNCATE = "TRUNCATE TABLE {t}"

# Bytes a row costs in a multi-row INSERT beyond its escaped values: "(...,1)," and quoting.
ROW_OVERHEAD = 40


def render(template: str, table: str, collation: str = "") -> str:
    """Fill ``{t}`` (quoted table) and ``{c}`` (collation) once, at store construction."""
    return template.replace("{t}", table).replace("{c}", collation)


def escaped_size(text: bytes) -> int:
    """The bytes a JSON text takes on the wire once pymysql has escaped it.

    JSON from orjson has no raw control characters, so only quotes and backslashes double.
    """
    return len(text) + text.count(b"\\") + text.count(b'"') + text.count(b"'")


def upsert_rows(
    table_sql: Sequence[str],
    session: str,
    rows: Iterable[tuple[str, int, bytes]],
    max_bytes: int,
) -> list[Statement]:
    """Multi-row upserts of ``(state_key, item_index, json)``, each statement under ``max_bytes``.

    ``table_sql`` is ``(head, tail)`` rendered for the table. A single row larger than
    ``max_bytes`` still gets a statement of its own; the caller checks sizes beforehand.
    """
    head, tail = table_sql
    fixed = len(head) + len(tail) + 2 * len(session.encode("utf-8"))
    out: list[Statement] = []
    parts: list[str] = []
    params: list = []
    size = fixed
    for key, index, data in rows:
        cost = escaped_size(data) + len(key.encode("utf-8")) + len(session.encode("utf-8")) + ROW_OVERHEAD
        if parts and size + cost > max_bytes:
            out.append((head + ",".join(parts) + tail, tuple(params)))
            parts, params, size = [], [], fixed
        parts.append(UPSERT_ROW)
        params += (session, key, index, data.decode("utf-8"))
        size += cost
    if parts:
        out.append((head + ",".join(parts) + tail, tuple(params)))
    return out


def sessions_of_user(prefix: str, exact: bool) -> Statement:
    """The query for ids starting with ``prefix`` (which ends with ':'); no wildcard can widen it.

    >>> sessions_of_user("a_b:", exact=False)[1]
    ('a!_b:%',)
    """
    if exact:
        return SESSIONS_OF_USER, (prefix, prefix[:-1] + ";")
    escaped = prefix.replace("!", "!!").replace("%", "!%").replace("_", "!_")
    return SESSIONS_OF_USER_LIKE, (escaped + "%",)
