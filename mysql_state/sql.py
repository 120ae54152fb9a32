"""Every SQL statement of the store, as named templates plus pure builders.

Templates hold ``{t}`` for the backtick-quoted ``db.table`` (validated in :mod:`keys`) and
``{c}`` for the exact collation; every value is a ``%s`` parameter. Builders return
``(sql, params)`` and do no I/O. The SQL is written for MySQL 8.0.17+ and MariaDB 10.11
(``VALUES(col)`` in ``ON DUPLICATE KEY UPDATE``, not MySQL 8's row alias); only MariaDB 10.11
has run it here (docs/java.md).
"""

from __future__ import annotations

import secrets
from typing import Callable, Iterable, Optional, Sequence, Union, cast

from .keys import CATALOG_SESSION, HASH_SUFFIX  # the catalog rows' session_id, defined once (keys.py)

Statement = tuple[str, tuple]

#: What a catalog row holds: activity is in its timestamps; rows and bytes are counted live.
CATALOG_DATA = b"{}"

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
    " PRIMARY KEY (session_id, state_key, item_index),"
    " KEY by_activity (session_id, updated_at)"
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
# A row lock (innodb_lock_wait_timeout) or a table's metadata lock (lock_wait_timeout: a write
# queued behind an ALTER TABLE) waited for ends in 1205 (rolled back, retried) before the
# driver's read timeout ends the wait from the client's side (error 2013: the statement may
# still run and commit on the server while the caller is told the connection was lost).
# Never raised above the server's own settings. Once per connection the store owns, with
# READ_COMMITTED_SESSION. Both variables exist, session-settable, in MySQL 5.7+/8 and MariaDB.
CAP_LOCK_WAIT = ("SET SESSION innodb_lock_wait_timeout = LEAST(@@innodb_lock_wait_timeout, %s),"
                 " lock_wait_timeout = LEAST(@@lock_wait_timeout, %s)")

# ---- single values --------------------------------------------------------------------------

# A value and, in the same lookup, the hash row that would make the key a list. A row that a
# writer unaware of the version column (the Java store, an old table) left at version 0 reads
# as version 1: version 0 means "absent" in the compare-and-set contract.
# A value read: the key's row 0 and its hash row, and any other row of the key at index 1 or
# below (without its text), so that a key whose rows are there without row 0 (a list that lost
# item 0 and its hash row, a row moved off 0) reads as damaged, never as absent. The first
# column: 1 the hash row, 0 row 0, 2 another row of the key (values.value_of).
SELECT_VALUE = (
    "SELECT IF(state_key = %s, 1, IF(item_index = 0, 0, 2)), IF(item_index = 0, state_data, NULL),"
    " GREATEST(version, 1) FROM {t}"
    " WHERE session_id = %s AND state_key IN (%s, %s) AND item_index <= 1"
)
SELECT_VALUE_FOR_UPDATE = SELECT_VALUE + " FOR UPDATE"
# Before a value replaces whatever is under a key: wait for a list writer (it holds the hash
# row) and learn whether list rows remain. Reads at most three rows, whatever the list's size.
KEY_HEAD = (
    "SELECT state_key = %s, item_index, GREATEST(version, 1) FROM {t}"
    " WHERE session_id = %s AND state_key IN (%s, %s) AND item_index <= 1"
)
LOCK_KEY_HEAD = KEY_HEAD + " FOR UPDATE"
# Remove what a list left under a key that now holds a single value (items 1.. and the hash row).
DELETE_LIST_REMAINS = (
    "DELETE FROM {t} WHERE session_id = %s"
    " AND ((state_key = %s AND item_index <> 0) OR (state_key = %s AND item_index = 0))"
)
# LAST_INSERT_ID(expr) hands the new version back in the OK packet: one round trip.
# The version given is one past what the writer locked; GREATEST keeps versions growing when
# the row it meets is not the one it locked (a list's item 0, a row created beside it).
# The session's catalog row rides along as the second row (touched: its version grows, so
# updated_at moves); the OK packet's id is 0 when the value row was inserted.
UPSERT_VALUE = (
    "INSERT INTO {t} (session_id, state_key, item_index, state_data, version)"
    f" VALUES (%s, %s, 0, %s, %s), ('{CATALOG_SESSION}', %s, 0, '{{}}', 1)"
    " ON DUPLICATE KEY UPDATE state_data = VALUES(state_data),"
    f" version = IF(session_id = '{CATALOG_SESSION}', version + 1,"
    " LAST_INSERT_ID(GREATEST(VALUES(version), GREATEST(version, 1) + 1)))"
)
INSERT_VALUE = (
    "INSERT INTO {t} (session_id, state_key, item_index, state_data, version) VALUES (%s, %s, 0, %s, 1)"
)
# A key created in ONE statement, at version 1, only if neither its row 0 nor a list's hash
# row is there (counted in a derived table: MySQL refuses the target table in a subquery of
# WHERE, not as a derived table); the session's catalog row rides along, touched. When the key
# is there, the SELECT gives no row: nothing is written. Under READ COMMITTED the count does
# not see a creator in flight: its row 0, committed while this waits, meets the duplicate
# branch, which leaves it and sets LAST_INSERT_ID to the caller's nonce (the caller rolls
# back); a list in flight that has only its hash row is the race docs/guarantees.md names for
# a value write. Run on MariaDB 10.11 (MySQL 8's manual allows the target table as a derived
# table of INSERT ... SELECT; not run here). Parameters: session, key, text, session (catalog),
# session, key, hash key, nonce.
CREATE_VALUE = (
    "INSERT INTO {t} (session_id, state_key, item_index, state_data, version)"
    " SELECT p.s, p.k, 0, p.d, 1 FROM"
    f" (SELECT %s AS s, %s AS k, %s AS d UNION ALL SELECT '{CATALOG_SESSION}', %s, '{{}}') AS p,"
    " (SELECT COUNT(*) AS n FROM {t} WHERE session_id = %s"
    " AND state_key IN (%s, %s) AND item_index <= 1) AS probe"
    " WHERE probe.n = 0"
    f" ON DUPLICATE KEY UPDATE version = IF(session_id = '{CATALOG_SESSION}', version + 1,"
    " version + 0 * LAST_INSERT_ID(%s))"
)
#: A row's next version: one past what every reader counts it as (``GREATEST(version, 1)``: the
#: Java store's rows have version 0 and are read as version 1), so a compare-and-set against
#: the version read before any write fails after it.
NEXT_VERSION = "GREATEST(version, 1) + 1"
#: The failure of a one-trip write: BIGINT UNSIGNED out of range (APPEND_FAILED), computed from a
#: column so that it is raised only when its branch runs. At least 1 is added: a row of version
#: 0 (the Java store's) would give the largest unsigned value, no overflow, and then a
#: strict server's "out of range for the column" (1264) or, under a lenient sql_mode, a
#: version clamped to the largest BIGINT and a write that COMMITs although its condition failed.
_FAIL = "18446744073709551615 + GREATEST(version, 1)"
# The same creation and its COMMIT in ONE round trip (a one-trip packet, see
# APPEND_ONE_TRIP_TAIL below), after NOTHING_AT in the same packet (anything under the key: its
# hash row, row 0 or another of its rows at index 1 or below, error APPEND_FAILED): the row and the catalog row in a plain multi-row
# upsert, whose duplicate branch fails (APPEND_FAILED) for a row 0 that is there (a value, or a
# list's first item), before the COMMIT. No INSERT ... SELECT over the table itself: MariaDB runs
# that through a temporary table, ~90 µs more a creation (measured 457 against 546 µs with its
# COMMIT). Parameters: session, key, text, session (catalog).
CREATE_VALUE_ONE_TRIP = (
    "INSERT INTO {t} (session_id, state_key, item_index, state_data, version)"
    f" VALUES (%s, %s, 0, %s, 1), ('{CATALOG_SESSION}', %s, 0, '{{}}', 1)"
    f" ON DUPLICATE KEY UPDATE version = IF(session_id = '{CATALOG_SESSION}', version + 1, {_FAIL})"
)
# A value written in ONE statement, only if its row 0 is still what this process last read or
# wrote: its version AND the SHA-256 of its text (not the version alone: the Java store writes
# rows without changing the version; any write by anyone changes the text; a list writer of
# this store changes the version of row 0, its item 0). An UPDATE, never an INSERT: a row
# deleted since is not brought back (the locked way decides). LAST_INSERT_ID(expr) hands back
# the new version (0: the row was not the one read); the session's catalog row is touched in
# the same statement (the affected-row count tells whether it exists).
# The same without the catalog row (a session whose catalog row this process moved a moment
# ago: see memory.CATALOG_TOUCH_EVERY); parameters as above but the last.
UPDATE_VALUE_IF_SEEN_QUIET = (
    "UPDATE {t} SET state_data = %s, version = LAST_INSERT_ID(%s)"
    " WHERE session_id = %s AND state_key = %s AND item_index = 0"
    " AND GREATEST(version, 1) = %s AND SHA2(state_data, 256) = %s"
)
UPDATE_VALUE_IF_SEEN = (
    "UPDATE {t} SET"
    f" state_data = IF(session_id = '{CATALOG_SESSION}', state_data, %s),"
    f" version = IF(session_id = '{CATALOG_SESSION}', version + 1, LAST_INSERT_ID(%s))"
    " WHERE (session_id = %s AND state_key = %s AND item_index = 0"
    " AND GREATEST(version, 1) = %s AND SHA2(state_data, 256) = %s)"
    f" OR (session_id = '{CATALOG_SESSION}' AND state_key = %s AND item_index = 0)"
)

# ---- keyset scans and prefixes: each written once ---------------------------------------

#: Rows after ``(session_id, state_key, item_index)`` in primary-key order, for keyset scans
#: (export, re-encryption, the doctor); parameters :func:`after` ``(last row)``. The leading
#: ``session_id >= %s`` makes it a primary-key range whatever the optimizer does with the OR.
KEYSET_AFTER = "(session_id >= %s AND (session_id > %s OR state_key > %s OR (state_key = %s AND item_index > %s)))"


def after(last: Sequence) -> tuple:
    """The parameters of :data:`KEYSET_AFTER` for the last row read ``(session_id, state_key,
    item_index, ...)``.

    >>> after(("u:s", "k", 3, "data"))
    ('u:s', 'u:s', 'k', 'k', 3)
    """
    return (last[0], last[0], last[1], last[1], last[2])


def like_prefix(prefix: str) -> str:
    """A ``LIKE ... ESCAPE '!'`` pattern for the strings starting with ``prefix``: its
    wildcards (``%``, ``_``) and the escape itself are escaped, so nothing widens it.

    >>> like_prefix("a_b%!")
    'a!_b!%!!%'
    """
    return prefix.replace("!", "!!").replace("%", "!%").replace("_", "!_") + "%"


def with_ids(template: str, count: int) -> str:
    """``template`` with its ``{ids}`` made ``count`` parameters.

    >>> with_ids("session_id IN ({ids})", 3)
    'session_id IN (%s, %s, %s)'
    """
    return template.replace("{ids}", ", ".join(["%s"] * count))


def in_database(template: str, database: str) -> str:
    """``template`` with its ``{db}`` made ``database`` (a name :func:`keys.identifier` checked).

    >>> in_database("CREATE DATABASE IF NOT EXISTS `{db}`", "agents")
    'CREATE DATABASE IF NOT EXISTS `agents`'
    """
    return template.replace("{db}", database)


def user_sessions_by_catalog(prefix: str, exact: bool) -> Statement:
    """The catalog's session ids of the user whose packed ids start with ``prefix`` (which ends
    with ':'): :data:`USER_SESSIONS_BY_CATALOG` (a primary-key range) on exact tables, else
    :data:`USER_SESSIONS_BY_CATALOG_LIKE` (the caller filters the exact prefix too).

    >>> user_sessions_by_catalog("a_b:", exact=True)[1]
    ('__catalog__', 'a_b:', 'a_b;')
    >>> user_sessions_by_catalog("a_b:", exact=False)[1]
    ('__catalog__', 'a!_b:%', 4, 'a_b:')
    """
    statement = USER_SESSIONS_BY_CATALOG if exact else USER_SESSIONS_BY_CATALOG_LIKE
    return statement, (CATALOG_SESSION, *user_ids(prefix, exact)[1])


def with_ids_exact(template: str, column: str, ids: Sequence[str], exact: bool, head: tuple = ()) -> Statement:
    """``template`` with its ``{ids}`` made parameters for ``ids`` (after ``head``, the
    parameters before them) and, on a table whose key columns fold case (``exact`` False: a
    Java-store table not migrated yet), the same ids compared byte for byte on ``column``, so
    that ``alice:s`` never takes ``Alice:s`` with it.

    >>> with_ids_exact("DELETE FROM t WHERE session_id IN ({ids})", "session_id", ["a:s"], False)
    ('DELETE FROM t WHERE session_id IN (%s) AND CAST(session_id AS BINARY) IN (CAST(%s AS BINARY))', ('a:s', 'a:s'))
    """
    statement = with_ids(template, len(ids))
    if exact:
        return statement, (*head, *ids)
    return (statement + f" AND CAST({column} AS BINARY) IN ({', '.join(['CAST(%s AS BINARY)'] * len(ids))})",
            (*head, *ids, *ids))


def with_pairs(template: str, count: int) -> str:
    """``template`` with its ``{pairs}`` made ``count`` pairs of parameters.

    >>> with_pairs("(a, b) IN ({pairs})", 2)
    '(a, b) IN ((%s, %s), (%s, %s))'
    """
    return template.replace("{pairs}", ", ".join(["(%s, %s)"] * count))


# ---- lists ----------------------------------------------------------------------------------

LOCK_HASH_ROW = (
    "SELECT state_data, GREATEST(version, 1) FROM {t}"
    " WHERE session_id = %s AND state_key = %s AND item_index = 0 FOR UPDATE"
)
# The hash rows of several lists of one session, and the row 0 of values written beside, locked
# in one statement ({ids}: one %s per key): an append to several lists (a LangGraph step's
# log and index, its checkpoint row) reads them once.
LOCK_HASH_ROWS = (
    "SELECT state_key, state_data, version FROM {t}"
    " WHERE session_id = %s AND state_key IN ({ids}) AND item_index = 0 FOR UPDATE"
)
# What the item rows are (count, lowest and highest index): a save that finds nothing to
# write checks them against the hash row, so a row lost behind its back is written again; the
# length of a list without a hash row of this store is its count, when they are 0..n-1.
ITEMS_SHAPE = (
    "SELECT COUNT(*), MIN(item_index), MAX(item_index) FROM {t} WHERE session_id = %s AND state_key = %s"
)
# The lowest and highest item index of a list: two index dives, whatever its length (a pop
# checks that it removes the list's last item and nothing past it).
ITEMS_ENDS = "SELECT MIN(item_index), MAX(item_index) FROM {t} WHERE session_id = %s AND state_key = %s"
# A new list's hash row; its version is one past a value's that it replaces (versions of a
# key never go back, so a compare-and-set cannot mistake a new list for an old value), handed
# back by LAST_INSERT_ID(expr) in the OK packet (the version a save reports).
INSERT_HASH_ROW = (
    "INSERT INTO {t} (session_id, state_key, item_index, state_data, version)"
    " SELECT %s, %s, 0, %s, LAST_INSERT_ID(COALESCE(MAX(GREATEST(version, 1)), 0) + 1) FROM {t}"
    " WHERE session_id = %s AND state_key = %s AND item_index = 0"
)
SELECT_HASH_ROW = "SELECT state_data FROM {t} WHERE session_id = %s AND state_key = %s AND item_index = 0"
LOCK_ITEMS = (
    "SELECT item_index, state_data FROM {t} WHERE session_id = %s AND state_key = %s"
    " ORDER BY item_index FOR UPDATE"
)
#: The index a list read gives its hash row: below every item index (an INT, -2**31 at the
#: least), so an item row left at a negative index (damage) is never taken for the hash row.
HEAD_INDEX = -(1 << 32)
# Reads of a list bring its hash row in the same statement (one snapshot), so the items can
# be checked against it: rows are (item_index, state_data, version); the hash row has index
# HEAD_INDEX. The whole list: ONE primary-key range over the items and the hash row (``k``
# sorts before ``k:_hash`` in every collation), in key order; rows (item_index, state_data),
# the hash row's first column being HEAD_INDEX minus its version, so a short read pays no
# sub-query and no UNION's materialisation (issue 21: 1.5x a bare SELECT at N = 10 before).
SELECT_ITEMS = (
    f"SELECT IF(state_key = %s, item_index, {HEAD_INDEX} - GREATEST(version, 1)), state_data FROM {{t}}"
    " WHERE session_id = %s AND state_key IN (%s, %s) ORDER BY state_key, item_index"
)
# A long list (its hash row, last seen, says more than list_read.LONG_LIST items): one column, so the
# driver parses one field a row, the hash row marked "\x1f<version>,<lowest>,<highest>\x1f"
# (its MIN/MAX computed in its branch only, once): no UNION either.
def marked_head(table: str) -> str:
    """The column a one-column list read gives the list's hash row: ``HEAD_MARK``, its version,
    the lowest and highest item index (computed in this branch only, once), ``HEAD_MARK``, its
    text (what ``list_read`` parses). Parameters: the session, the list key, twice."""
    return (
        "CONCAT(CHAR(31), GREATEST(version, 1), ',',"
        f" COALESCE((SELECT MIN(item_index) FROM {table} WHERE session_id = %s AND state_key = %s), ''), ',',"
        f" COALESCE((SELECT MAX(item_index) FROM {table} WHERE session_id = %s AND state_key = %s), ''),"
        " CHAR(31), state_data)"
    )


def marked_since(table: str) -> str:
    """The column a read of the items after the first ``m`` gives the list's hash row:
    ``HEAD_MARK``, its version, then, over every item of the list (one sub-query, computed in
    this branch only, once), their count, lowest and highest index and the sum over the items
    below ``m`` of ``CRC32(state_data) * (item_index + 1)``; ``HEAD_MARK``, its text (what
    ``list_read.check_since`` parses). Parameters: ``m``, the session, the list key."""
    return (
        "CONCAT(CHAR(31), GREATEST(version, 1), ',',"
        " (SELECT CONCAT(COUNT(*), ',', COALESCE(MIN(item_index), ''), ',', COALESCE(MAX(item_index), ''), ',',"
        " COALESCE(SUM(IF(item_index < %s, CRC32(state_data) * (item_index + 1), 0)), 0))"
        f" FROM {table} WHERE session_id = %s AND state_key = %s),"
        " CHAR(31), state_data)"
    )


SELECT_ITEMS_LONG = (
    "SELECT IF(state_key = %s, state_data, " + marked_head("{t}") + ")"
    " FROM {t} WHERE session_id = %s AND state_key IN (%s, %s) ORDER BY state_key, item_index"
)
# A long window ``[offset, end)`` (``offset >= 0``) in the same one-column shape: the items in it,
# the hash row last, marked with the lowest and highest index of the whole list, which prove the
# window's rows exactly ``offset..`` when their count is the one the hash row gives
# (list_read.check_range); anything else is read again with the indexes. No UNION, one field a row.
SELECT_RANGE_LONG = (
    "SELECT IF(state_key = %s, state_data, " + marked_head("{t}") + ")"
    " FROM {t} WHERE session_id = %s AND ((state_key = %s AND item_index >= %s AND item_index < %s)"
    " OR (state_key = %s AND item_index = 0)) ORDER BY state_key, item_index"
)
# A tail (the last ``%s`` items) in the same shape: the items above the list's highest index
# minus the count (a sub-query the server computes once, before it reads the range).
SELECT_TAIL_LONG = (
    "SELECT IF(state_key = %s, state_data, " + marked_head("{t}") + ")"
    " FROM {t} WHERE session_id = %s AND ((state_key = %s AND item_index >"
    " (SELECT MAX(item_index) FROM {t} WHERE session_id = %s AND state_key = %s) - %s)"
    " OR (state_key = %s AND item_index = 0)) ORDER BY state_key, item_index"
)
# The items from ``m`` on (a process that read the first ``m`` before) in the same one-column
# shape, the hash row last, marked with what proves the items not sent unchanged
# (``marked_since``): list_read.check_since. Parameters: the key, m, the session, the key, the
# session, the key, m, the hash key.
SELECT_ITEMS_SINCE = (
    "SELECT IF(state_key = %s, state_data, " + marked_since("{t}") + ")"
    " FROM {t} WHERE session_id = %s AND ((state_key = %s AND item_index >= %s)"
    " OR (state_key = %s AND item_index = 0)) ORDER BY state_key, item_index"
)
HEAD_MARK = "\x1f"
#: The bytes of a packet a multi-row statement leaves for the header and the SQL around its
#: rows (see ``Table.statement_bytes``).
PACKET_MARGIN = 1024
#: ``LAST_INSERT_ID`` of an append against one of several stored states packs the new version
#: and the 1-based pick that held: ``(version + 1) * PICK_CODE + pick`` (:func:`picked`).
PICK_CODE = 64
#: A LIMIT no list reaches (item_index is an INT), yet valid SQL: "no limit" in a window.
NO_LIMIT = 1 << 62
_HASH_PART = (
    f" UNION ALL SELECT {HEAD_INDEX}, state_data, GREATEST(version, 1) FROM {{t}}"
    " WHERE session_id = %s AND state_key = %s AND item_index = 0"
)
SELECT_WINDOW = (
    "(SELECT item_index, state_data, 0 FROM {t} WHERE session_id = %s AND state_key = %s"
    " AND item_index >= %s ORDER BY item_index LIMIT %s)" + _HASH_PART
)
SELECT_TAIL = (
    "(SELECT item_index, state_data, 0 FROM {t} WHERE session_id = %s AND state_key = %s"
    " ORDER BY item_index DESC LIMIT %s)" + _HASH_PART
)
SELECT_ITEMS_FROM = (
    "SELECT item_index, state_data FROM {t} WHERE session_id = %s AND state_key = %s AND item_index >= %s"
    " ORDER BY item_index"
)
SELECT_ITEM = "SELECT state_data FROM {t} WHERE session_id = %s AND state_key = %s AND item_index = %s"
DELETE_ITEMS_FROM = "DELETE FROM {t} WHERE session_id = %s AND state_key = %s AND item_index >= %s"
UPSERT_ROWS_HEAD = "INSERT INTO {t} (session_id, state_key, item_index, state_data, version) VALUES "
UPSERT_ROW = "(%s, %s, %s, %s, 1)"
# An append in one statement: the hash row (first, so it is locked first) is updated only if it
# still holds what this process last saw (the SHA-256 of its text: 64 bytes sent, not the text
# twice); item rows are written whatever is there (a row left at a new item's index by hand or
# by another program is overwritten, never taken for the item). LAST_INSERT_ID(expr) hands the
# hash row's new version back in the OK packet only when its condition held (else 0: the caller
# rolls back). The session's catalog row rides last and is always touched.
APPEND_IF_HASH_TAIL = (
    " ON DUPLICATE KEY UPDATE"
    " version = IF(state_key = %s AND SHA2(state_data, 256) = %s,"
    f" LAST_INSERT_ID({NEXT_VERSION}), IF(session_id = '{CATALOG_SESSION}', version + 1, version)),"
    " state_data = IF(state_key = %s, IF(SHA2(state_data, 256) = %s, VALUES(state_data), state_data),"
    " VALUES(state_data))"
)
ROLLBACK = "ROLLBACK"
# The same append and its COMMIT in ONE round trip (sent as "<statement>; COMMIT" on a connection
# that allows several statements a packet): every outcome but "the hash row held what this
# process last saw" is an ERROR, which stops the packet before its COMMIT and undoes the whole
# statement (InnoDB undoes a failed statement; nothing else is in the transaction). The error is
# an unsigned overflow, raised only when its branch runs, as error 1690 whatever the sql_mode
# (APPEND_FAILED). The rows: the hash row FIRST with the text '' (a sentinel no hash row has),
# the items, the catalog row, and the hash row AGAIN with the text '-' (the check). The first
# takes the new text (a parameter) only if the stored one still has the SHA-256 given, else
# fails; a hash row that was gone is inserted with the sentinel, which the check row finds and
# fails on. LAST_INSERT_ID is the new version. Parameters: the hash key, the SHA-256, the hash
# key, the new text.


def _one_trip_tail(held: str, code: str) -> str:
    """A one-trip tail (see above) whose hash row branch takes the new text when ``held``, then
    sets the version by ``code`` (a ``LAST_INSERT_ID(...)``), and fails otherwise."""
    return (
        " ON DUPLICATE KEY UPDATE"
        f" version = IF(state_key <> %s, IF(session_id = '{CATALOG_SESSION}', version + 1, version),"
        f" IF(VALUES(state_data) = '', IF({held}, {code}, {_FAIL}), IF(state_data = '', {_FAIL}, version))),"
        " state_data = IF(state_key <> %s, VALUES(state_data), IF(VALUES(state_data) = '', %s, state_data))"
    )


APPEND_ONE_TRIP_TAIL = _one_trip_tail("SHA2(state_data, 256) = %s", f"LAST_INSERT_ID({NEXT_VERSION})")
#: The error a one-trip append raises when the hash row did not hold (BIGINT UNSIGNED out of range).
APPEND_FAILED = 1690
#: What follows a one-trip statement in its packet.
AND_COMMIT = ";\nCOMMIT"
#: How many stored states one conditional append may accept (:func:`append_if_one_of_tail`).
MAX_PICKS = 16


def _pick(count: int) -> str:
    """Which of ``count`` hash row heads (parameters) the stored hash row starts with: 1-based,
    0 for none (:func:`append_if_one_of_tail`)."""
    if not 1 <= count <= MAX_PICKS:
        raise ValueError(f"count {count} must be within 1..{MAX_PICKS}")
    return "FIELD(CAST(SUBSTRING_INDEX(state_data, ',\"p\":', 1) AS BINARY), " + ", ".join(["%s"] * count) + ")"


def picked(code: int) -> tuple[int, int]:
    """The new version and the 0-based index of the pick that held, from the ``LAST_INSERT_ID``
    an append against one of several stored states handed back (:func:`append_if_one_of_tail`).

    >>> picked(5 * PICK_CODE + 2)
    (5, 1)
    """
    return code // PICK_CODE, code % PICK_CODE - 1


def append_if_one_of_tail(count: int) -> str:
    """The tail of a multi-row upsert that writes the hash row only if the stored one says
    one of ``count`` states ``(n, sum)``, given as the leading bytes of their hash row texts up
    to ``,"p":`` (:meth:`ListHash.head`); then ``LAST_INSERT_ID`` is ``(version + 1) * 64 + j``,
    ``j`` the 1-based pick that held (0: none did; the caller rolls back). Item rows are written
    whatever is there, as in ``APPEND_IF_HASH_TAIL`` (those the stored list already has get the
    text they hold: its digest sum proved them equal). Parameters: the hash key, the picks
    twice, the hash key, the picks.

    >>> append_if_one_of_tail(2).count("%s")
    8
    """
    pick = _pick(count)
    return (
        " ON DUPLICATE KEY UPDATE"
        f" version = IF(state_key = %s AND {pick} > 0, LAST_INSERT_ID(({NEXT_VERSION}) * {PICK_CODE} + {pick}) DIV {PICK_CODE},"
        f" IF(session_id = '{CATALOG_SESSION}', version + 1, version)),"
        f" state_data = IF(state_key = %s, IF({pick} > 0, VALUES(state_data), state_data), VALUES(state_data))"
    )


def append_if_one_of_one_trip_tail(count: int) -> str:
    """:func:`append_if_one_of_tail` for a statement that carries its COMMIT, as
    :data:`APPEND_ONE_TRIP_TAIL` is for ``APPEND_IF_HASH_TAIL``: the hash row first with the
    sentinel text, the check row last; no pick holding, or no hash row, is error
    :data:`APPEND_FAILED`. ``LAST_INSERT_ID`` as there. Parameters: the hash key, the picks
    twice, the hash key, the new hash row's text.

    >>> append_if_one_of_one_trip_tail(2).count("%s")
    7
    """
    pick = _pick(count)
    return _one_trip_tail(f"{pick} > 0", f"LAST_INSERT_ID(({NEXT_VERSION}) * {PICK_CODE} + {pick}) DIV {PICK_CODE}")


def append_lists_one_trip_tail(lists: int, values: int, checked: int = 0) -> str:
    """The tail of ONE multi-row upsert that appends to ``lists`` lists of a session and creates
    ``values`` new values beside, the statement carrying its COMMIT (a one-trip packet, as
    :data:`APPEND_ONE_TRIP_TAIL` for one list): every hash row goes first with the sentinel
    text '' and takes its new text (a parameter) only if the stored one has the SHA-256 given
    for it (picked by ``FIELD`` over the hash keys), and is checked again last (a hash row that
    was gone is inserted with the sentinel, which its check row refuses); a value row that is
    already there fails too (the caller then goes the locked way, which writes over it). Every
    failure is error :data:`APPEND_FAILED`. ``checked`` of the lists get no items (their
    length is only checked, a compare-and-set's ``at``): their hash rows must have the SHA-256
    given and are left as they are, version and text, as the locked way leaves them.
    Parameters: the hash keys, the value keys (when any), the hash keys and their SHA-256s, the
    checked lists' hash keys (when any), the hash keys, the checked lists' hash keys (when
    any), the hash keys and their new texts.

    >>> append_lists_one_trip_tail(2, 1).count("%s")
    13
    >>> append_lists_one_trip_tail(2, 0, checked=1).count("%s")
    14
    """
    if not 1 <= lists <= MAX_PICKS or values < 0 or not 0 <= checked <= lists:
        raise ValueError(f"lists {lists} must be within 1..{MAX_PICKS}, values {values} at least 0,"
                         f" checked {checked} within 0..{lists}")
    hks = ", ".join(["%s"] * lists)
    pick = f"ELT(FIELD(state_key, {hks}), {hks})"
    other = f"IF(session_id = '{CATALOG_SESSION}', version + 1, version)"
    if values:
        other = (f"IF(session_id = '{CATALOG_SESSION}', version + 1,"
                 f" IF(state_key IN ({', '.join(['%s'] * values)}), {_FAIL}, version))")
    bump, text = NEXT_VERSION, pick
    if checked:
        only = ", ".join(["%s"] * checked)
        bump = f"IF(state_key IN ({only}), version, {NEXT_VERSION})"
        text = f"IF(state_key IN ({only}), state_data, {pick})"
    return (
        " ON DUPLICATE KEY UPDATE"
        f" version = IF(state_key NOT IN ({hks}), {other},"
        f" IF(VALUES(state_data) = '', IF(SHA2(state_data, 256) = {pick}, {bump}, {_FAIL}),"
        f" IF(state_data = '', {_FAIL}, version))),"
        f" state_data = IF(state_key NOT IN ({hks}), VALUES(state_data),"
        f" IF(VALUES(state_data) = '', {text}, state_data))"
    )


#: Before a one-trip append that creates values: an error (:data:`APPEND_FAILED`) when any of
#: the values' keys holds a list (its hash row is there), else one row. Parameters: the session,
#: then the keys' hash keys (``{ids}``).
NO_LIST_UNDER = (
    "SELECT 18446744073709551615 + COUNT(*) FROM {t}"
    " WHERE session_id = %s AND state_key IN ({ids}) AND item_index = 0"
)
#: :data:`NO_LIST_UNDER` for one key: parameters the session and the key's hash key.
NO_LIST_AT = NO_LIST_UNDER.replace("{ids}", "%s")  # noqa: house - built here, once
#: Before a one-trip create of a value (compare-and-set at version 0): an error
#: (:data:`APPEND_FAILED`) when anything is under the key: its hash row, its row 0, or another
#: of its rows at index 1 or below (a list that lost item 0 and its hash row is not absent),
#: else one row. Parameters: the session, the key, its hash key.
NOTHING_AT = (
    "SELECT 18446744073709551615 + COUNT(*) FROM {t}"
    " WHERE session_id = %s AND state_key IN (%s, %s) AND item_index <= 1"
)

#: Single values that ride in a list's one-statement append (:func:`with_riders`) mark that
#: they held with ``LAST_INSERT_ID`` values from a nonce drawn per statement at or above this;
#: the list's own codes (a version, ``(version + 1) * PICK_CODE + pick``) stay far below it.
RIDER_FLOOR = 1 << 61
#: At most this many values ride along (more go their own way).
MAX_RIDERS = 8


def nonce(room: int = 0) -> int:
    """A random ``LAST_INSERT_ID`` mark at or above :data:`RIDER_FLOOR`, with ``room`` marks
    after it still below ``2 * RIDER_FLOOR`` (one statement's riders, :func:`with_riders`).

    >>> RIDER_FLOOR <= nonce(MAX_RIDERS) < 2 * RIDER_FLOOR - MAX_RIDERS
    True
    """
    return RIDER_FLOOR + secrets.randbelow(RIDER_FLOOR - room - 1)


_UPDATE_VERSION = " ON DUPLICATE KEY UPDATE version = "


def with_riders(tail: str, count: int) -> str:
    """``tail`` (:data:`APPEND_IF_HASH_TAIL` or :func:`append_if_one_of_tail`) with ``count``
    single values riding in the same statement, their rows FIRST. A value row takes its new
    version only if it still is what this process read or wrote (its version and the SHA-256 of
    its text, as :data:`UPDATE_VALUE_IF_SEEN`) and the value before it held; it then sets
    ``LAST_INSERT_ID`` to the statement's nonce plus its place, which the next row checks
    (``LAST_INSERT_ID(expr)`` "is remembered as the next value to be returned by
    ``LAST_INSERT_ID()``", the rows being handled in the order given). The hash row is written
    only if the last value held; the statement's ``LAST_INSERT_ID`` is then the list's code, and
    below :data:`RIDER_FLOOR` exactly when everything held (else the caller rolls back). A value
    row's text is written whatever the outcome: a miss is rolled back whole. Parameters: per
    value its key, version, digest, (from the second on: the previous mark), its mark, its new
    version; then the tail's, with the last mark right after the hash key.

    >>> with_riders(APPEND_IF_HASH_TAIL, 2).count("%s") - APPEND_IF_HASH_TAIL.count("%s")
    12
    """
    if not tail.startswith(_UPDATE_VERSION + "IF(state_key = %s AND ") or not 1 <= count <= MAX_RIDERS:
        raise ValueError(f"not a list append's tail, or count {count} not within 1..{MAX_RIDERS}")
    version, sep, rest = tail[len(_UPDATE_VERSION):].partition(", state_data = ")
    branches = "".join(
        f"IF(state_key = %s AND session_id <> '{CATALOG_SESSION}' AND item_index = 0 AND GREATEST(version, 1) = %s"
        f" AND SHA2(state_data, 256) = %s{' AND LAST_INSERT_ID() = %s' if j else ''},"
        " IF(LAST_INSERT_ID(%s), %s, 0), " for j in range(count))
    chained = version.replace("IF(state_key = %s AND ", "IF(state_key = %s AND LAST_INSERT_ID() = %s AND ", 1)
    return _UPDATE_VERSION + branches + chained + ")" * count + sep + rest

def with_one_trip_riders(tail: str, count: int) -> str:
    """A one-trip ``tail`` (:data:`APPEND_ONE_TRIP_TAIL`, :func:`append_if_one_of_one_trip_tail`)
    with ``count`` single values riding in the same statement, as :func:`with_riders` for the
    tails that do not carry their COMMIT; here every failure is an error, so no chain of marks:
    a value row FIRST takes its new version only if it still is what this process read or
    wrote (its version and the SHA-256 of its text), else fails (:data:`APPEND_FAILED`); a row
    that was gone is inserted (at version 1, which no written value has: a new version is at
    least 2), and the value's check row at the statement's end (the text '', which no value
    has) fails on it. Parameters: :func:`one_trip_rider_params`.

    >>> with_one_trip_riders(APPEND_ONE_TRIP_TAIL, 2).count("%s") - APPEND_ONE_TRIP_TAIL.count("%s")
    16
    """
    if not tail.startswith(_UPDATE_VERSION) or ", state_data = " not in tail or not 1 <= count <= MAX_RIDERS:
        raise ValueError(f"not a one-trip append's tail, or count {count} not within 1..{MAX_RIDERS}")
    version, sep, rest = tail[len(_UPDATE_VERSION):].partition(", state_data = ")
    keys = ", ".join(["%s"] * count)
    pick = f"ELT(FIELD(state_key, {keys}), {keys})"
    rider = f"session_id <> '{CATALOG_SESSION}' AND item_index = 0 AND state_key IN ({keys})"
    return (
        f"{_UPDATE_VERSION}IF({rider}, IF(VALUES(state_data) = '', IF(version = 1, {_FAIL}, version),"
        f" IF(GREATEST(version, 1) = {pick} AND SHA2(state_data, 256) = {pick}, {pick}, {_FAIL})), {version})"
        f"{sep}IF({rider} AND VALUES(state_data) = '', state_data, {rest})"
    )


def one_trip_rider_params(tail: str, keys: Sequence[str], seen: Sequence[tuple[int, str]], condition: tuple) -> tuple:
    """The parameters of :func:`with_one_trip_riders` ``(tail, len(keys))``: the value keys,
    the keys with the versions ``seen``, the keys with the SHA-256s ``seen``, the keys with
    their new versions, then ``tail``'s own (``condition``), the value keys again within it.

    >>> one_trip_rider_params(APPEND_ONE_TRIP_TAIL, ["v"], [(3, "d")], ("hk", "h", "hk", "new"))
    ('v', 'v', 3, 'v', 'd', 'v', 4, 'hk', 'h', 'v', 'hk', 'new')
    """
    in_version = tail[len(_UPDATE_VERSION):].partition(", state_data = ")[0].count("%s")
    ks = tuple(keys)
    return (*ks, *ks, *(v for v, _ in seen), *ks, *(d for _, d in seen), *ks, *(v + 1 for v, _ in seen),
            *condition[:in_version], *ks, *condition[in_version:])


# The session's catalog row, on paths whose own statement cannot carry it (a plain INSERT that
# must fail on a duplicate key; a key deleted); its version grows so updated_at moves.
CATALOG_TOUCH = (
    "INSERT INTO {t} (session_id, state_key, item_index, state_data, version)"
    f" VALUES ('{CATALOG_SESSION}', %s, 0, '{{}}', 1) ON DUPLICATE KEY UPDATE version = version + 1"
)
CATALOG_DELETE = f"DELETE FROM {{t}} WHERE session_id = '{CATALOG_SESSION}' AND state_key = %s AND item_index = 0"
# Maintenance that rewrites rows (a prune keeping what it compacts) leaves the session's
# activity as it was: the catalog row is locked and read first, then its version and
# updated_at put back (an explicit updated_at is kept: ON UPDATE does not apply).
CATALOG_PIN = (
    f"SELECT version, updated_at FROM {{t}} WHERE session_id = '{CATALOG_SESSION}' AND state_key = %s"
    " AND item_index = 0 FOR UPDATE"
)
CATALOG_RESTORE = (
    f"UPDATE {{t}} SET version = %s, updated_at = %s WHERE session_id = '{CATALOG_SESSION}' AND state_key = %s"
    " AND item_index = 0"
)
# The rows of a key a maintenance write rewrote take the session's pinned activity time, not
# now (a row written later than its session's catalog row says would be a write the doctor
# reports, and its fix would make the idle session active); their versions stay new. Only the
# key's own rows (and its hash row), whose lock the maintenance write took when it read the
# key (a row of it newer than the pinned time that it did not rewrite moves back too, by at
# most the catalog's lag). Parameters: the time, the session, the key, its hash key, the time.
MAINTENANCE_BACK_DATE = (
    "UPDATE {t} SET updated_at = %s WHERE session_id = %s AND state_key IN (%s, %s) AND updated_at > %s"
)
UPSERT_ROWS_TAIL = f" ON DUPLICATE KEY UPDATE state_data = VALUES(state_data), version = {NEXT_VERSION}"

# ---- history (keep_history=True) -----------------------------------------------------------

# A save that shrinks a list or replaces items archives the stored items from the first
# changed index to the old end, in the same transaction, server-side (the items never cross
# the network): they go under the session's history id, numbered after what the key already
# has there.
NEXT_ARCHIVE_INDEX = "SELECT COALESCE(MAX(item_index) + 1, 0) FROM {t} WHERE session_id = %s AND state_key = %s"
# Rows copied server-side (a fork, an archive) of an encrypted store are sealed again for their
# new place: read here, re-encrypted, written back by primary key.
COPIED_ROWS = (
    "SELECT state_key, item_index, state_data FROM {t} WHERE session_id = %s AND item_index >= %s"
    " AND (%s IS NULL OR state_key = %s)"
)
RESEAL_AT = "UPDATE {t} SET state_data = %s WHERE session_id = %s AND state_key = %s AND item_index = %s"
# A sealed row of the sessions given (a fork by a store without a keyring refuses them: it
# cannot seal the copies again for their new place). Parameters: two ids, the sealed prefix.
SEALED_ROW_IN = (
    "SELECT state_key, item_index, LEFT(state_data, 40) FROM {t} WHERE session_id IN (%s, %s)"
    " AND state_data LIKE %s LIMIT 1"
)
ARCHIVE_ITEMS = (
    "INSERT INTO {t} (session_id, state_key, item_index, state_data, version)"
    " SELECT %s, %s, (SELECT COALESCE(MAX(h.item_index) + 1, 0) FROM {t} h"
    " WHERE h.session_id = %s AND h.state_key = %s) + item_index - %s, state_data, 1"
    " FROM {t} WHERE session_id = %s AND state_key = %s AND item_index >= %s ORDER BY item_index"
)

# ---- sessions -------------------------------------------------------------------------------

SESSION_EXISTS = "SELECT 1 FROM {t} WHERE session_id = %s LIMIT 1"
# Deletes first lock what they delete: under READ COMMITTED a DELETE skips rows a concurrent
# writer inserted but had not committed, so it waits on the session's rows (and on every list
# writer, who holds its list's hash row) before deleting; then no row is left behind.
LOCK_SESSION = "SELECT COUNT(*) FROM {t} WHERE session_id = %s FOR UPDATE"
# The session's rows, its history rows and its catalog row.
DELETE_SESSION = (
    "DELETE FROM {t} WHERE session_id IN (%s, %s)"
    f" OR (session_id = '{CATALOG_SESSION}' AND state_key = %s AND item_index = 0)"
)
# The same on a table whose key columns fold case and accents (the Java store's, before
# migrate()): there 'alice:s1' would also match 'Alice:s1', another user's session; the ids are
# compared as bytes too. Parameters: the session, its history id, the session; the same three
# again (as bytes).
DELETE_SESSION_BYTES = (
    "DELETE FROM {t} WHERE (session_id IN (%s, %s)"
    f" OR (session_id = '{CATALOG_SESSION}' AND state_key = %s AND item_index = 0))"
    f" AND (CAST(session_id AS BINARY) IN (CAST(%s AS BINARY), CAST(%s AS BINARY))"
    f" OR (session_id = '{CATALOG_SESSION}' AND CAST(state_key AS BINARY) = CAST(%s AS BINARY)))"
)
DELETE_KEY = "DELETE FROM {t} WHERE session_id = %s AND state_key IN (%s, %s)"
# ---- one user's packed ids: ONE predicate (sessions, erasure, the catalog, prune, export) -----

#: One user's packed ids in a key column (``{col}``, :func:`user_ids`): a range on the primary
#: key instead of LIKE, so no wildcard in a user id can widen it. ';' is the code point after
#: ':', so [user + ':', user + ';') is exactly that user's ids (on an exact, binary table).
USER_IDS_RANGE = "{col} >= %s AND {col} < %s"
#: The same on a table whose key columns fold case and accents (the Java store's, before
#: migrate()): there ';' may sort before ':' (the range would be empty) and 'alice:' matches
#: 'Alice:'; an escaped LIKE and the exact prefix compared as bytes, so that ``"alice"`` never
#: takes ``"Alice"``'s rows.
USER_IDS_LIKE = "{col} LIKE %s ESCAPE '!' AND CAST(LEFT({col}, %s) AS BINARY) = CAST(%s AS BINARY)"
_KEY_COLUMNS = ("session_id", "state_key")


def _on(fragment: str, column: str) -> str:
    """``fragment`` (``{col}``) on the key column ``column`` (an identifier of the table, never input)."""
    if column not in _KEY_COLUMNS:
        raise ValueError(f"column must be one of {_KEY_COLUMNS}, got {column!r}")
    return fragment.replace("{col}", column)


def user_ids(prefix: Optional[str], exact: bool, column: str = "state_key") -> Statement:
    """A WHERE fragment (`` AND ...``) keeping the ids in ``column`` that start with ``prefix``
    (a user's packed prefix, ending with ':'), and its parameters; ``("", ())`` for None (every
    user). :data:`USER_IDS_RANGE` on exact tables, else :data:`USER_IDS_LIKE`.

    >>> user_ids("a_b:", True, "session_id")
    (' AND session_id >= %s AND session_id < %s', ('a_b:', 'a_b;'))
    >>> user_ids("a_b:", False)
    (" AND state_key LIKE %s ESCAPE '!' AND CAST(LEFT(state_key, %s) AS BINARY) = CAST(%s AS BINARY)", ('a!_b:%', 4, 'a_b:'))
    >>> user_ids(None, True)
    ('', ())
    """
    if prefix is None:
        return "", ()
    if exact:
        return " AND " + _on(USER_IDS_RANGE, column), (prefix, prefix[:-1] + ";")
    return " AND " + _on(USER_IDS_LIKE, column), (like_prefix(prefix), len(prefix), prefix)


SESSIONS_OF_USER = "SELECT DISTINCT session_id FROM {t} WHERE " + _on(USER_IDS_RANGE, "session_id")
# On a table whose key collation is not binary: USER_IDS_LIKE (the store filters the result by
# the exact prefix as well). DISTINCT over the ids as bytes: over the folding collation it gives
# one spelling of 'alice:s1' and 'Alice:s1', maybe the other user's, and the exact filter then
# dropped the user's own.
SESSIONS_OF_USER_LIKE = "SELECT DISTINCT CAST(session_id AS BINARY) FROM {t} WHERE " + _on(USER_IDS_LIKE, "session_id")
# The callers' rows (internal ones, the catalog and history, have no ':' in session_id).
COUNT_ROWS = "SELECT COUNT(*) FROM {t} WHERE session_id LIKE '%:%'"

# ---- erasing a user and rotating keys (bounded batches) ---------------------------------------

# A user's sessions, as the catalog and the data rows know them (forget_user deletes each whole,
# as delete_session does): USER_IDS_RANGE on an exact table, USER_IDS_LIKE on one whose key
# columns fold case and accents. Parameters: the catalog id, then user_ids'.
USER_SESSIONS_BY_CATALOG = "SELECT state_key FROM {t} WHERE session_id = %s AND " + _on(USER_IDS_RANGE, "state_key")
USER_SESSIONS_BY_CATALOG_LIKE = "SELECT state_key FROM {t} WHERE session_id = %s AND " + _on(USER_IDS_LIKE, "state_key")
# Keyset scan (primary-key order) for rows to re-encrypt: user rows only (a packed id has ':'),
# value and item rows not sealed under the current key, or hash rows not keyed with it.
_AFTER = (
    " " + KEYSET_AFTER + " AND (LOCATE(':', session_id) > 0 OR session_id LIKE '!_!_history!_!_%%' ESCAPE '!')"
)
REENCRYPT_ROWS = (
    "SELECT session_id, state_key, item_index, state_data FROM {t} WHERE" + _AFTER +
    " AND RIGHT(state_key, 6) <> ':_hash' AND CAST(LEFT(state_data, %s) AS BINARY) <> CAST(%s AS BINARY)"
    " ORDER BY session_id, state_key, item_index LIMIT %s"
)
REENCRYPT_HASH_ROWS = (
    "SELECT session_id, state_key, item_index, state_data FROM {t} WHERE" + _AFTER +
    " AND RIGHT(state_key, 6) = ':_hash' AND LOCATE(%s, state_data) = 0"
    " ORDER BY session_id, state_key, item_index LIMIT %s"
)
# Replace a row's text only if it is still what was read (a concurrent write wins); the
# activity time and the version stay: re-encryption is not a write of the caller's data.
RESEAL_ROW = (
    "UPDATE {t} SET state_data = %s, updated_at = updated_at WHERE session_id = %s AND state_key = %s"
    " AND item_index = %s AND CAST(state_data AS BINARY) = CAST(%s AS BINARY)"
)

# ---- session locks (GET_LOCK: one server, or one node of a cluster) --------------------------

GET_LOCK = "SELECT GET_LOCK(%s, %s)"
RELEASE_LOCK = "SELECT RELEASE_LOCK(%s)"
#: 1 while this connection holds the named lock (a lease's check).
LOCK_IS_MINE = "SELECT IS_USED_LOCK(%s) = CONNECTION_ID()"
TRUNCATE = "TRUNCATE TABLE {t}"

# Bytes a row costs in a multi-row INSERT beyond its escaped values: "(...,1)," and quoting.
ROW_OVERHEAD = 40


# ---- the columns of an export line, in order
EXPORT_COLUMNS = ("session_id", "state_key", "item_index", "state_data", "version", "created_at", "updated_at")


# ---- history: archived list items (history.py) -------------------------------

#: Archived items of one key, oldest first (a window as get_list's).
SELECT_HISTORY = (
    "SELECT item_index, state_data, created_at FROM {t} WHERE session_id = %s AND state_key = %s"
    " ORDER BY item_index LIMIT %s, %s"
)
DELETE_KEY_HISTORY = "DELETE FROM {t} WHERE session_id = %s AND state_key = %s"
DELETE_HISTORY = "DELETE FROM {t} WHERE session_id = %s"


# ---- retention: prune (retention.py) -----------------------------------------

PRUNE_CANDIDATES = (
    "SELECT state_key, updated_at FROM {t} WHERE session_id = %s AND updated_at < %s{user}{after}"
    " ORDER BY updated_at, state_key LIMIT %s"
)
PRUNE_AFTER = " AND (updated_at > %s OR (updated_at = %s AND state_key > %s))"
PRUNE_COUNT = "SELECT COUNT(*) FROM {t} WHERE session_id = %s AND updated_at < %s{user}"


def prune_count(prefix: Optional[str], exact: bool, when: object) -> Statement:
    """:data:`PRUNE_COUNT`: the catalog rows idle since ``when`` of the user whose packed prefix is
    ``prefix`` (None: every user's).

    >>> prune_count("u:", True, "T")
    ('SELECT COUNT(*) FROM {t} WHERE session_id = %s AND updated_at < %s AND state_key >= %s AND state_key < %s', ('__catalog__', 'T', 'u:', 'u;'))
    """
    user, params = user_ids(prefix, exact)
    return PRUNE_COUNT.replace("{user}", user), (CATALOG_SESSION, when, *params)


def prune_candidates(prefix: Optional[str], exact: bool, when: object, last: Optional[Sequence],
                     batch: int) -> Statement:
    """:data:`PRUNE_CANDIDATES`: the next ``batch`` catalog rows idle since ``when`` (of ``prefix``'s
    user, None: every user's), after ``last`` (the last ``(state_key, updated_at)`` read; None: from
    the first).

    >>> prune_candidates(None, True, "T", ("u:s", "W"), 10)[1]
    ('__catalog__', 'T', 'W', 'W', 'u:s', 10)
    """
    user, params = user_ids(prefix, exact)
    statement = PRUNE_CANDIDATES.replace("{user}", user).replace("{after}", PRUNE_AFTER if last else "")
    return statement, (CATALOG_SESSION, when, *params, *((last[1], last[1], last[0]) if last else ()), batch)
PRUNE_LOCK_SESSIONS = "SELECT COUNT(*) FROM {t} WHERE session_id IN ({ids}) FOR UPDATE"
# Idle: the catalog row says so, and no row of the session was written since either (the
# index by_activity answers that, one range probe a session). The catalog row may lag the
# session's last write (the one-statement writes move it at most once a second, and the Java
# store, writing the same table, never moves it); maintenance that rewrites rows (a TTL sweep,
# a saver's prune) gives them the session's pinned activity time, so it never makes an idle
# session look active. Parameters: the catalog id, the sessions, the cutoff, the cutoff.
PRUNE_IDLE = (
    "SELECT c.state_key FROM {t} c WHERE c.session_id = %s AND c.state_key IN ({ids}) AND c.item_index = 0"
    " AND c.updated_at < %s AND NOT EXISTS (SELECT 1 FROM {t} r"
    " WHERE r.session_id = c.state_key AND r.updated_at >= %s)"
)
PRUNE_STILL_IDLE = PRUNE_IDLE + " FOR UPDATE"
PRUNE_COUNT_ROWS = "SELECT COUNT(*) FROM {t} WHERE session_id IN ({ids})"
PRUNE_DELETE_ROWS = "DELETE FROM {t} WHERE session_id IN ({ids})"
PRUNE_DELETE_CATALOG = "DELETE FROM {t} WHERE session_id = %s AND state_key IN ({ids}) AND item_index = 0"
# The server's clock, for a cutoff given as a duration, and its offset from UTC.
SERVER_CUTOFF = "SELECT NOW() - INTERVAL %s SECOND"
SERVER_UTC_OFFSET = "SELECT TIMESTAMPDIFF(SECOND, UTC_TIMESTAMP(), NOW())"
SERVER_NOW = "SELECT NOW(6)"


# ---- catalog: pages of sessions (catalog.py) ---------------------------------

# The page: catalog rows newest first, by_activity's order (updated_at, then the primary key).
CATALOG_PAGE = (
    "SELECT state_key, created_at, updated_at FROM {t} WHERE session_id = %s{where}"
    " ORDER BY updated_at DESC, state_key DESC LIMIT %s"
)
# One user's sessions: that user's catalog rows by the primary key (a range), sorted after.
CATALOG_PAGE_OF_USER = (
    "SELECT state_key, created_at, updated_at FROM {t} FORCE INDEX (PRIMARY) WHERE session_id = %s{where}"
    " ORDER BY updated_at DESC, state_key DESC LIMIT %s"
)
CATALOG_SHAPE = (
    "SELECT session_id, state_key, COUNT(*), COALESCE(SUM(LENGTH(state_data)), 0) FROM {t}"
    " WHERE session_id IN ({ids}) GROUP BY session_id, state_key"
)
# The page's filters, after the user's ids: activity before, after a time, and the keyset
# cursor (strictly after the last row of the page before, in the page's order).
CATALOG_UPDATED_BEFORE = " AND updated_at < %s"
CATALOG_UPDATED_AFTER = " AND updated_at > %s"
CATALOG_PAGE_AFTER = " AND (updated_at < %s OR (updated_at = %s AND state_key < %s))"


def catalog_page(prefix: Optional[str], exact: bool, before: object, after: object,
                 cursor: Optional[tuple], limit: int) -> Statement:
    """A page of the catalog (one row more than ``limit``, to tell whether another follows): the
    sessions of the user whose packed prefix is ``prefix`` (None: every user's,
    :data:`CATALOG_PAGE`; else :data:`CATALOG_PAGE_OF_USER`), updated before ``before`` and after
    ``after`` (None: no bound), after ``cursor`` (``(updated_at, packed id)`` of the last row of
    the page before; None: the first page).

    >>> catalog_page(None, True, "B", None, ("T", "u:s"), 10)
    ('SELECT state_key, created_at, updated_at FROM {t} WHERE session_id = %s AND updated_at < %s AND (updated_at < %s OR (updated_at = %s AND state_key < %s)) ORDER BY updated_at DESC, state_key DESC LIMIT %s', ('__catalog__', 'B', 'T', 'T', 'u:s', 11))
    """
    where, params = user_ids(prefix, exact)
    for fragment, when in ((CATALOG_UPDATED_BEFORE, before), (CATALOG_UPDATED_AFTER, after)):
        if when is not None:
            where += fragment
            params += (when,)
    if cursor is not None:
        at, sid = cursor
        where += CATALOG_PAGE_AFTER
        params += (at, at, sid)
    template = CATALOG_PAGE if prefix is None else CATALOG_PAGE_OF_USER
    return template.replace("{where}", where), (CATALOG_SESSION, *params, limit + 1)


# ---- transfer: fork, export, import (transfer.py) ----------------------------

# Every row of a session (and of its history) under the new ids, plus the new catalog row:
# one statement, so no row crosses the network and the copy is atomic.
FORK_ROWS = (
    "INSERT INTO {t} (session_id, state_key, item_index, state_data, version)"
    " SELECT IF(session_id = %s, %s, %s), state_key, item_index, state_data, version FROM {t}"
    " WHERE session_id IN (%s, %s)"
    f" UNION ALL SELECT '{CATALOG_SESSION}', %s, 0, '{{}}', 1"
)
# An export reads one snapshot: the next transaction REPEATABLE READ, opened at once.
REPEATABLE_READ_NEXT = "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ"
CONSISTENT_SNAPSHOT = "START TRANSACTION WITH CONSISTENT SNAPSHOT"
EXPORT_SELECT = "SELECT " + ", ".join(EXPORT_COLUMNS) + " FROM {t} o WHERE {where}"
# The hash rows of lists whose first item an export chunk holds, sent before those items (so a
# file cut inside a list holds a hash row that counts more items than it does: refused).
EXPORT_HASH_ROWS = ("SELECT " + ", ".join(EXPORT_COLUMNS) + " FROM {t} WHERE item_index = 0"
                    " AND (session_id, state_key) IN ({pairs})")
# A catalog row is exported only with a session that has rows.
EXPORT_HAS_ROWS = " AND EXISTS (SELECT 1 FROM {t} d WHERE d.session_id = o.state_key)"
# The scopes of an export: WHERE clauses of EXPORT_SELECT (its table is ``o``). Sessions by
# id (and archived history by its id); every user's rows (a packed id has ':'); one user's
# ({user}: user_ids). The catalog rows of those sessions come in a scope of their own.
EXPORT_SESSIONS = "session_id IN ({ids})"
EXPORT_CATALOG_OF = "session_id = %s AND state_key IN ({ids})" + EXPORT_HAS_ROWS
EXPORT_EVERY_SESSION = "LOCATE(':', session_id) > 0"
EXPORT_EVERY_CATALOG = "session_id = %s" + EXPORT_HAS_ROWS
EXPORT_USER_SESSIONS = "1 = 1{user}"
EXPORT_USER_CATALOG = "session_id = %s{user}" + EXPORT_HAS_ROWS


def export_sessions(sids: Sequence[str]) -> Statement:
    """The scope of the rows of the sessions (or history ids) ``sids``.

    >>> export_sessions(["u:a", "u:b"])
    ('session_id IN (%s, %s)', ('u:a', 'u:b'))
    """
    return with_ids(EXPORT_SESSIONS, len(sids)), tuple(sids)


def export_scopes_of_sessions(sids: Sequence[str]) -> list[Statement]:
    """The scopes of an export of the sessions ``sids``: their rows, then their catalog rows."""
    return [export_sessions(sids), (with_ids(EXPORT_CATALOG_OF, len(sids)), (CATALOG_SESSION, *sids))]


def export_scopes_of_user(prefix: Optional[str], exact: bool) -> list[Statement]:
    """The scopes of an export of every session of the user whose packed prefix is ``prefix``
    (None: every user's): their rows, then their catalog rows.

    >>> export_scopes_of_user(None, True)[0]
    ("LOCATE(':', session_id) > 0", ())
    >>> export_scopes_of_user("u:", True)[0]
    ('1 = 1 AND session_id >= %s AND session_id < %s', ('u:', 'u;'))
    """
    if prefix is None:
        return [(EXPORT_EVERY_SESSION, ()), (EXPORT_EVERY_CATALOG, (CATALOG_SESSION,))]
    rows, params = user_ids(prefix, exact, "session_id")
    cat, cparams = user_ids(prefix, exact, "state_key")
    return [(EXPORT_USER_SESSIONS.replace("{user}", rows), params),
            (EXPORT_USER_CATALOG.replace("{user}", cat), (CATALOG_SESSION, *cparams))]


# "replace": the rows of keys the import does not hold (conditions by key, OR-ed): a key's items
# from the first it does not hold on, but those it holds past a gap ({kept}); its hash row when
# the import has none.
IMPORT_DELETE_WHERE = "DELETE FROM {t} WHERE "
IMPORT_DROP_ITEMS = "(session_id = %s AND state_key = %s AND item_index >= %s{kept})"
IMPORT_KEEP_ITEMS = " AND item_index NOT IN ({ids})"
IMPORT_DROP_ROW = "(session_id = %s AND state_key = %s)"


def import_drop_the_rest(held: Iterable[tuple[str, str, int, Sequence[int], Optional[str]]]) -> Statement:
    """One DELETE of the rows of keys the import does not hold; ``held`` has, a key, ``(session,
    key, the first index not held, the indexes held past it, the hash key to delete or None)``.

    >>> import_drop_the_rest([("u:s", "k", 2, [5], "k:_hash"), ("u:s", "m", 1, [], None)])
    ('DELETE FROM {t} WHERE (session_id = %s AND state_key = %s AND item_index >= %s AND item_index NOT IN (%s)) OR (session_id = %s AND state_key = %s) OR (session_id = %s AND state_key = %s AND item_index >= %s)', ('u:s', 'k', 2, 5, 'u:s', 'k:_hash', 'u:s', 'm', 1))
    """
    where: list[str] = []
    params: list = []
    for sid, key, first, extra, hash_key in held:
        where.append(IMPORT_DROP_ITEMS.replace("{kept}", with_ids(IMPORT_KEEP_ITEMS, len(extra)) if extra else ""))
        params += [sid, key, first, *extra]
        if hash_key is not None:
            where.append(IMPORT_DROP_ROW)
            params += [sid, hash_key]
    return IMPORT_DELETE_WHERE + " OR ".join(where), tuple(params)
# "skip": which of the keys met (with their hash rows, as (session_id, state_key) pairs) exist.
IMPORT_EXISTING_KEYS = "SELECT DISTINCT session_id, state_key FROM {t} WHERE (session_id, state_key) IN ({pairs})"
EXPORT_AFTER = " AND " + KEYSET_AFTER
EXPORT_ORDER = " ORDER BY session_id, state_key, item_index LIMIT %s"


def export_chunk(scope: Statement, last: Optional[Sequence], limit: int) -> Statement:
    """The next ``limit`` rows of an export's ``scope`` in key order, after the row ``last``
    (None: from the first).

    >>> export_chunk(("session_id IN (%s)", ("u:s",)), None, 5)
    ('SELECT session_id, state_key, item_index, state_data, version, created_at, updated_at FROM {t} o WHERE session_id IN (%s) ORDER BY session_id, state_key, item_index LIMIT %s', ('u:s', 5))
    """
    clause, params = scope
    return (EXPORT_SELECT.replace("{where}", clause) + (EXPORT_AFTER if last else "") + EXPORT_ORDER,
            params + (after(last) if last else ()) + (limit,))


IMPORT_INSERT_HEAD = "INSERT INTO {t} (" + ", ".join(EXPORT_COLUMNS) + ") VALUES "
IMPORT_ROW = "(%s, %s, %s, %s, %s, %s, %s)"


def import_insert(head: str, rows: Sequence[tuple], tail: str = "") -> Statement:
    """One multi-row INSERT of export ``rows`` (7 values each): ``head`` (:data:`IMPORT_INSERT_HEAD`,
    rendered), a :data:`IMPORT_ROW` a row, ``tail`` (an ``ON DUPLICATE KEY UPDATE``, or none).

    >>> import_insert("INSERT ... VALUES ", [tuple("abcdefg")], IMPORT_ON_SKIP)[0]
    'INSERT ... VALUES (%s, %s, %s, %s, %s, %s, %s) ON DUPLICATE KEY UPDATE session_id = session_id'
    """
    return head + ",".join([IMPORT_ROW] * len(rows)) + tail, tuple(v for r in rows for v in r)
# "skip": a row whose key exists is left as it is; "replace": it takes the imported content.
IMPORT_ON_SKIP = " ON DUPLICATE KEY UPDATE session_id = session_id"
IMPORT_ON_REPLACE = (
    " ON DUPLICATE KEY UPDATE state_data = VALUES(state_data), version = VALUES(version),"
    " created_at = VALUES(created_at), updated_at = VALUES(updated_at)"
)
# "replace" for the store's catalog rows: a session's first write and last activity only widen
# (an older export does not set the activity of a session that moved on since back; so a
# second import of it changes nothing), as REBUILD_CATALOG does.
IMPORT_ON_MERGE_CATALOG = (
    " ON DUPLICATE KEY UPDATE version = GREATEST(version, VALUES(version)),"
    " created_at = COALESCE(LEAST(created_at, VALUES(created_at)), created_at),"
    " updated_at = COALESCE(GREATEST(updated_at, VALUES(updated_at)), updated_at)"
)
# The catalog rows of sessions written behind the catalog's back (an import without them, the
# Java store): first write and last activity from the rows; an existing row only widens.
REBUILD_CATALOG = (
    "INSERT INTO {t} (session_id, state_key, item_index, state_data, version, created_at, updated_at)"
    f" SELECT '{CATALOG_SESSION}', session_id, 0, '{{}}', 1, MIN(created_at), MAX(updated_at) FROM {{t}}"
    " WHERE session_id IN ({ids}) GROUP BY session_id"
    " ON DUPLICATE KEY UPDATE created_at = COALESCE(LEAST(created_at, VALUES(created_at)), VALUES(created_at), created_at),"
    " updated_at = COALESCE(GREATEST(updated_at, VALUES(updated_at)), VALUES(updated_at), updated_at)"
)

# A catalog row whose activity time was set ahead of the server's clock (by hand): set back to
# its session's last write (the aggregate is materialised, so the table may be updated).
CATALOG_BACK_TO_ROWS = (
    f"UPDATE {{t}} c JOIN (SELECT session_id, MAX(updated_at) AS last FROM {{t}} WHERE session_id IN ({{ids}})"
    f" GROUP BY session_id) r ON c.session_id = '{CATALOG_SESSION}' AND c.state_key = r.session_id"
    " AND c.item_index = 0 SET c.updated_at = r.last"
)

# ---- migrations and the doctor (migrations.py) -------------------------------

MIGRATIONS_RECORD_TABLE = (
    "CREATE TABLE IF NOT EXISTS `{db}`.`mysql_state_migrations` (table_name VARCHAR(64) NOT NULL,"
    " step VARCHAR(64) NOT NULL, applied_at DATETIME DEFAULT CURRENT_TIMESTAMP,"
    " PRIMARY KEY (table_name, step)) DEFAULT CHARACTER SET utf8mb4"
)
MIGRATIONS_RECORD_STEP = (
    "INSERT INTO `{db}`.`mysql_state_migrations` (table_name, step) VALUES (%s, %s)"
    " ON DUPLICATE KEY UPDATE applied_at = CURRENT_TIMESTAMP"
)
TABLE_INDEXES = (
    "SELECT INDEX_NAME, GROUP_CONCAT(COLUMN_NAME ORDER BY SEQ_IN_INDEX) FROM information_schema.STATISTICS"
    " WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s GROUP BY INDEX_NAME"
)
TABLE_COLUMN_TYPES = (
    "SELECT COLUMN_NAME, DATA_TYPE, COLLATION_NAME FROM information_schema.COLUMNS"
    " WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s"
)
ADD_ACTIVITY_INDEX = "ALTER TABLE {t} ADD KEY by_activity (session_id, updated_at)"
HAS_UNVERSIONED = "SELECT 1 FROM {t} WHERE version < 1 LIMIT 1"
BACKFILL_VERSION = "UPDATE {t} SET version = 1, updated_at = updated_at WHERE version < 1 LIMIT 10000"
#: What the version step shows it runs on a table without the column (two statements).
ADD_AND_BACKFILL_VERSION = ADD_VERSION_COLUMN + "; " + BACKFILL_VERSION
# Sessions whose catalog row is missing or older than their rows (written behind its back).
STALE_CATALOG = (
    "SELECT s.session_id FROM (SELECT session_id, MAX(updated_at) AS last FROM {t}"
    " WHERE session_id LIKE '%%:%%' GROUP BY session_id) s"
    f" LEFT JOIN {{t}} c ON c.session_id = '{CATALOG_SESSION}' AND c.state_key = s.session_id"
    " AND c.item_index = 0 WHERE c.state_key IS NULL OR c.updated_at < s.last LIMIT %s"
)
SESSION_IDS_AFTER = "SELECT DISTINCT session_id FROM {t} WHERE session_id > %s ORDER BY session_id LIMIT %s"
DOCTOR_SCAN = (
    "SELECT session_id, state_key, item_index, state_data, updated_at FROM {t} WHERE " + KEYSET_AFTER +
    " ORDER BY session_id, state_key, item_index LIMIT %s"
)
DOCTOR_SESSION_ROWS = "SELECT COUNT(*) FROM {t} WHERE session_id = %s FOR UPDATE"
# The doctor's second look at a session its scan found a problem in: its rows in ONE statement
# (one snapshot), where the scan's chunks may have read a list before and after a write.
DOCTOR_SESSION = (
    "SELECT state_key, item_index, state_data, updated_at FROM {t} WHERE session_id = %s"
    " ORDER BY state_key, item_index"
)
# The doctor's second look at the sessions its scan found in doubt, in ONE statement (one
# snapshot: the scan is not one): ('c', id, catalog time) per catalog row, ('r', id, last
# write) per session with rows. ``{ids}``: one %s per session id; the ids given twice.
DOCTOR_CATALOG_RECHECK = (
    f"SELECT 'c', state_key, updated_at FROM {{t}} WHERE session_id = '{CATALOG_SESSION}'"
    " AND state_key IN ({ids}) AND item_index = 0"
    " UNION ALL SELECT 'r', session_id, MAX(updated_at) FROM {t} WHERE session_id IN ({ids}) GROUP BY session_id"
)
DOCTOR_NOW = "SELECT NOW()"
# Keys the migration to exact key columns would split: ids equal under the table's collation
# (case-insensitive, accent-insensitive, PAD SPACE) but spelt differently are one id; exact, they
# are several. A session spelt more than one way (its keys would part), and within a session a
# key spelt more than one way, a list's hash row counted with its key (its list would lose it).
# A few of each at most, as (the lowest and highest spelling, their session, rows): the
# migration refuses, naming them. Only aggregates are selected (ONLY_FULL_GROUP_BY holds).
SESSION_VARIANTS = (
    "SELECT MIN(CAST(session_id AS BINARY)), MAX(CAST(session_id AS BINARY)), '', COUNT(*) FROM {t}"
    " GROUP BY session_id HAVING COUNT(DISTINCT CAST(session_id AS BINARY)) > 1 LIMIT 10"
)
# A session whose catalog row spells it otherwise than its rows do (the Java store wrote the
# session again under another spelling): its catalog row and its archived history (filed under
# the catalog's spelling) would part from its rows. A catalog row is found by primary key; its
# session's rows by the primary key's prefix.
CATALOG_VARIANTS = (
    "SELECT * FROM (SELECT CAST(c.state_key AS BINARY) AS kept, (SELECT MIN(CAST(d.session_id AS BINARY))"
    " FROM {t} d WHERE d.session_id = c.state_key AND CAST(d.session_id AS BINARY) <> CAST(c.state_key AS BINARY))"
    f" AS other, '' AS sid, 1 AS n FROM {{t}} c WHERE c.session_id = '{CATALOG_SESSION}') v WHERE other IS NOT NULL"
    " LIMIT 10"
)
_BASE_KEY = "IF(RIGHT(state_key, 6) = ':_hash', LEFT(state_key, CHAR_LENGTH(state_key) - 6), state_key)"
KEY_VARIANTS = (
    f"SELECT MIN(CAST({_BASE_KEY} AS BINARY)), MAX(CAST({_BASE_KEY} AS BINARY)), MIN(session_id), COUNT(*)"
    f" FROM {{t}} GROUP BY session_id, {_BASE_KEY}"
    f" HAVING COUNT(DISTINCT CAST({_BASE_KEY} AS BINARY)) > 1 LIMIT 10"
)
# A list's rows its hash row does not count (the doctor sets them aside): read, each archived
# under the session's history id, then deleted. ``{ids}``: one %s per item_index.
DOCTOR_ROWS_AT = "SELECT item_index, state_data FROM {t} WHERE session_id = %s AND state_key = %s AND item_index IN ({ids})"
DOCTOR_DELETE_AT = "DELETE FROM {t} WHERE session_id = %s AND state_key = %s AND item_index IN ({ids})"
DOCTOR_ARCHIVE_ROW = "INSERT INTO {t} (session_id, state_key, item_index, state_data, version) VALUES (%s, %s, %s, %s, 1)"
# A catalog row an import would refuse: its text made '{}' (its activity time kept), or, at an
# index other than 0 or naming no valid session, deleted.
DOCTOR_CATALOG_TEXT = (
    f"UPDATE {{t}} SET state_data = '{{}}', updated_at = updated_at WHERE session_id = '{CATALOG_SESSION}'"
    " AND state_key = %s AND item_index = 0"
)
DOCTOR_CATALOG_DROP = f"DELETE FROM {{t}} WHERE session_id = '{CATALOG_SESSION}' AND state_key = %s AND item_index = %s"
DOCTOR_HISTORY_ROWS = "SELECT COUNT(*) FROM {t} WHERE session_id = %s"
# Orphaned history rows, archived before the doctor started (a session reborn since keeps its own).
DOCTOR_DELETE_HISTORY = (
    "DELETE FROM {t} WHERE session_id = %s AND (created_at IS NULL OR created_at <= %s) LIMIT %s"
)
# A list rewritten as maintenance (relist): under its hash row's lock, rows with their version
# and activity time; the rewrite keeps both (``updated_at = updated_at``), deletes the rows
# outside 0..n-1, and gives the rows it had to insert the list's last activity time.
RELIST_LOCK_HEAD = (
    "SELECT state_data, GREATEST(version, 1), updated_at FROM {t}"
    " WHERE session_id = %s AND state_key = %s AND item_index = 0 FOR UPDATE"
)
RELIST_ITEMS = (
    "SELECT item_index, state_data, GREATEST(version, 1), updated_at FROM {t}"
    " WHERE session_id = %s AND state_key = %s ORDER BY item_index FOR UPDATE"
)
RELIST_KEEP_TAIL = " ON DUPLICATE KEY UPDATE state_data = VALUES(state_data), updated_at = updated_at"
RELIST_DELETE_OUTSIDE = "DELETE FROM {t} WHERE session_id = %s AND state_key = %s AND (item_index < 0 OR item_index >= %s)"
RELIST_SET_VERSION = "UPDATE {t} SET version = %s, updated_at = updated_at WHERE session_id = %s AND state_key = %s AND item_index = 0"
RELIST_BACK_DATE = "UPDATE {t} SET updated_at = %s WHERE session_id = %s AND state_key IN (%s, %s) AND updated_at > %s"

# ---- replicas: read-your-writes by GTID (replicas.py) -----------------------------------

# The GTID of the commit just made on this connection (MariaDB), or the server's executed set (MySQL).
# The primary's position once a write has committed (every domain's last GTID, this write's
# included): a session read waits for it. Not @@last_gtid, the connection's own last GTID: a
# write that changed nothing (an unchanged save, a delete of nothing) logs no event, so that is
# an older GTID or none, and the read would not wait for what another writer committed before.
LAST_GTID_MARIADB = "SELECT @@global.gtid_binlog_pos"
LAST_GTID_MYSQL = "SELECT @@global.gtid_executed"
# A replica waits (at most the seconds given) until it has applied that GTID: 0 when it has.
GTID_WAIT_MARIADB = "SELECT MASTER_GTID_WAIT(%s, %s)"
GTID_WAIT_MYSQL = "SELECT WAIT_FOR_EXECUTED_GTID_SET(%s, %s)"


def render(template: str, table: str, collation: str = "") -> str:
    r"""Fill ``{t}`` (quoted table) and ``{c}`` (collation) once, at store construction."""
    return template.replace("{t}", table).replace("{c}", collation)


_ESCAPED = (b"\\", b"'", b'"', b"\0", b"\n", b"\r", b"\x1a")


def escaped_size(text: bytes) -> int:
    """The bytes a text takes on the wire once pymysql has quoted and escaped it.

    pymysql writes each of backslash, both quotes, NUL, LF, CR and ^Z as two bytes.
    """
    return len(text) + sum(text.count(c) for c in _ESCAPED) + 2


def literal(value: object, backslashes: bool = True) -> "str | None":
    r"""``value`` as an SQL literal for a utf8mb4 connection, or None when the driver must do it.

    The same literal the server reads from pymysql's escaping, without its per-character
    ``str.translate`` (the cost of a statement carrying list items): a text is scanned once
    per special character it may hold. ``backslashes``: False when the session runs with
    ``NO_BACKSLASH_ESCAPES`` (then only ``'`` is doubled, as pymysql does). Bytes become a
    ``_binary'...'`` literal (the binary string pymysql sends as ``X'...'``, half the bytes)
    when they are UTF-8; anything else but str, int and None is left to the driver.

    >>> literal("it's"), literal(b"a\\b"), literal(7), literal(None), literal("it's", False)
    ("'it\\'s'", "_binary'a\\\\b'", '7', 'NULL', "'it''s'")
    """
    kind = type(value)
    if kind is int:
        return str(value)
    if value is None:
        return "NULL"
    prefix = ""
    if kind is bytes:
        try:
            text = cast(bytes, value).decode("utf-8")  # ``kind is bytes``
        except UnicodeDecodeError:
            return None
        prefix = "_binary"
    elif kind is str:
        text = value  # type: ignore[assignment]
    else:
        return None
    if not backslashes:
        return prefix + "'" + text.replace("'", "''") + "'"
    if "\\" in text:
        text = text.replace("\\", "\\\\")
    if "'" in text:
        text = text.replace("'", "\\'")
    if "\0" in text:
        text = text.replace("\0", "\\0")
    if "\x1a" in text:
        text = text.replace("\x1a", "\\Z")
    return prefix + "'" + text + "'"


def bind(query: str, params: Sequence, backslashes: bool, escape: Callable[[object], str]) -> str:
    r"""``query`` with its ``%s`` parameters as literals (:func:`literal`; ``escape``, the
    driver's, for the kinds it leaves): the text pymysql would send, escaped faster.

    >>> bind("SELECT %s, %s", ("a'b", 1.5), True, repr)
    "SELECT 'a\\'b', 1.5"
    """
    out = []
    for value in params:
        text = literal(value, backslashes)
        out.append(escape(value) if text is None else text)
    return query % tuple(out)


def upsert_rows(
    table_sql: Sequence[str],
    session: str,
    rows: Iterable[tuple[str, int, bytes]],
    max_bytes: int,
    extra: Sequence[tuple[str, str, int, bytes]] = (),
    lead: Sequence[tuple[str, str, int, bytes]] = (),
) -> list[Statement]:
    """Multi-row upserts of ``(state_key, item_index, json)``, each statement under ``max_bytes``.

    ``table_sql`` is ``(head, tail)`` rendered for the table. A single row larger than
    ``max_bytes`` still gets a statement of its own; the caller checks sizes beforehand.
    ``extra`` rows carry their own session id (``(session_id, state_key, item_index, json)``,
    e.g. the session's catalog row) and ride last in the last statement: no extra round trip;
    ``lead`` rows, of the same form, come first (values riding in a list's append).
    """
    head, tail = table_sql
    fixed = len(head) + len(tail)
    out: list[Statement] = []
    parts: list[str] = []
    params: list = []
    size = fixed
    full = [*lead, *((session, key, index, data) for key, index, data in rows)]
    # Escaping at most doubles a text (a str's UTF-8 is at most 4 bytes a character): when that
    # bound fits, one statement, without scanning every text for the bytes escaping doubles.
    bound = fixed + sum(2 * len(data) + 8 * (len(key) + len(sid)) + 6 + ROW_OVERHEAD
                        for sid, key, _, data in (*full, *extra))
    if bound <= max_bytes:
        for sid, key, index, data in (*full, *extra):
            params += (sid, key, index, data.decode("utf-8"))
        return [(head + ",".join([UPSERT_ROW] * (len(full) + len(extra))) + tail, tuple(params))]
    for sid, key, index, data in (*full, *extra):
        cost = escaped_size(data) + escaped_size(key.encode("utf-8")) + escaped_size(sid.encode("utf-8")) + ROW_OVERHEAD
        if parts and size + cost > max_bytes:
            out.append((head + ",".join(parts) + tail, tuple(params)))
            parts, params, size = [], [], fixed
        parts.append(UPSERT_ROW)
        params += (sid, key, index, data.decode("utf-8"))
        size += cost
    if parts:
        out.append((head + ",".join(parts) + tail, tuple(params)))
    return out


#: How :func:`select_many` marks its rows other than the first list's items and hash row:
#: ``"\x1f\x1f<key>\x1f<index>\x1f<version>\x1f<data>"`` (the first list's hash row is marked as
#: in ``SELECT_ITEMS_LONG``: ``HEAD_MARK``; no JSON text, nor a sealed row, starts with either).
ROW_MARK = "\x1f\x1f"


def select_many(
    table: str, session: str, value_keys: Sequence[str], list_keys: Sequence[str], hash_keys: Sequence[str],
    since: Optional[int] = None,
) -> Statement:
    """One statement for several values (row 0) and whole lists (items and hash rows) of one
    session, in key order, ONE column a row (the driver parses one field a row: the read of an
    agent's turn is mostly the items of its conversation): the first list's items as they are
    stored; its hash row marked ``HEAD_MARK`` with its version and the lowest and highest item
    index (computed in its branch only, once), as ``SELECT_ITEMS_LONG`` does; every other row
    marked ``ROW_MARK`` with its key, index and version.

    ``hash_keys`` are the hash keys of every key asked for, so a value key that holds a list
    is recognised (and a value key's item 1, so is a list that has no hash row). ``since``: only the first list's items from that index on, its hash row
    marked as ``SELECT_ITEMS_SINCE`` marks it (``marked_since``).

    >>> statement, params = select_many("t", "u:s", ["a"], ["m"], ["a:_hash", "m:_hash"])
    >>> params
    ('m', 'm:_hash', 'u:s', 'm', 'u:s', 'm', 'u:s', 'a', 'a:_hash', 'm:_hash', 'm')
    >>> statement, params = select_many("t", "u:s", [], ["m"], ["m:_hash"], since=40)
    >>> params
    ('m', 'm:_hash', 40, 'u:s', 'm', 'u:s', 'm:_hash', 'm', 40)
    """
    parts: list[str] = []
    params: list[Union[str, int]] = [session]
    if value_keys or hash_keys:
        keys0 = [*value_keys, *hash_keys]
        # item 1 too: a value key whose rows are a list left without a hash row is told from a value
        parts.append(f"(state_key IN ({', '.join(['%s'] * len(keys0))}) AND item_index <= 1)")
        params += keys0
    if list_keys and since is not None:  # the first list from ``since`` on, the others whole
        if len(list_keys) > 1:
            parts.append(f"state_key IN ({', '.join(['%s'] * (len(list_keys) - 1))})")
            params += list_keys[1:]
        parts.append("(state_key = %s AND item_index >= %s)")
        params += [list_keys[0], since]
    elif list_keys:
        parts.append(f"state_key IN ({', '.join(['%s'] * len(list_keys))})")
        params += list_keys
    marked = ("CONCAT(CHAR(31), CHAR(31), state_key, CHAR(31), item_index, CHAR(31), GREATEST(version, 1),"
              " CHAR(31), state_data)")
    if list_keys:
        first = list_keys[0]
        head, head_params = ((marked_head(table), [session, first, session, first]) if since is None
                             else (marked_since(table), [since, session, first]))
        column = f"IF(state_key = %s, state_data, IF(state_key = %s AND item_index = 0, {head}, {marked}))"
        params = [first, first + HASH_SUFFIX, *head_params, *params]
    else:
        column = marked
    statement = (
        f"SELECT {column} FROM {table}"
        f" WHERE session_id = %s AND ({' OR '.join(parts)}) ORDER BY state_key, item_index"
    )
    return statement, tuple(params)


def select_prefix(table: str, session: str, prefix: str, exact: bool) -> Statement:
    """Row 0 of every key of one session that starts with ``prefix``, and its rows at index 1
    and below without their text (hash rows included, and a list's item 1, so that a key
    holding a list is recognised even without its hash row): rows ``(state_key, state_data,
    version, item_index)`` in key order. A primary-key range on exact tables; an escaped LIKE
    otherwise (the caller then tests the exact prefix too).

    >>> select_prefix("t", "u:s", "ns/", exact=True)[1]
    ('u:s', 'ns/', 'ns0')
    >>> select_prefix("t", "u:s", "a_", exact=False)[1]
    ('u:s', 'a!_%')
    """
    head = (f"SELECT state_key, IF(item_index = 0, state_data, NULL), GREATEST(version, 1), item_index FROM {table}"
            " WHERE session_id = %s AND item_index <= 1")
    if not prefix:
        return head + " ORDER BY state_key", (session,)
    if exact:
        above = above_prefix(prefix)
        if above is None:  # the prefix is all U+10FFFF: no key sorts above every key it starts
            return head + " AND state_key >= %s ORDER BY state_key", (session, prefix)
        return head + " AND state_key >= %s AND state_key < %s ORDER BY state_key", (session, prefix, above)
    return head + " AND state_key LIKE %s ESCAPE '!' ORDER BY state_key", (session, like_prefix(prefix))


def above_prefix(prefix: str) -> Optional[str]:
    r"""The least string above every string that starts with ``prefix``, in code point order
    (a binary utf8mb4 collation's): its last character that is not U+10FFFF moved to the next
    code point, the surrogates (no text holds them) skipped; None when there is none.

    >>> above_prefix("ns/"), above_prefix("a\ud7ff"), above_prefix("a\U0010ffff"), above_prefix("\U0010ffff")
    ('ns0', 'a\ue000', 'b', None)
    """
    head = prefix.rstrip("\U0010ffff")
    if not head:
        return None
    nxt = ord(head[-1]) + 1
    return head[:-1] + chr(0xE000 if 0xD800 <= nxt <= 0xDFFF else nxt)


def sessions_of_user(prefix: str, exact: bool) -> Statement:
    """The query for ids starting with ``prefix`` (which ends with ':'); no wildcard can widen it,
    and no other spelling of the prefix matches it (the same predicate as :func:`user_ids`).

    >>> sessions_of_user("a_b:", exact=False)[1]
    ('a!_b:%', 4, 'a_b:')
    """
    return (SESSIONS_OF_USER if exact else SESSIONS_OF_USER_LIKE), user_ids(prefix, exact, "session_id")[1]
