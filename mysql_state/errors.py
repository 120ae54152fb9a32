"""The error hierarchy, and the one place where driver errors become ours.

Every error the store raises for a database problem is a :class:`MysqlStateError`.
Driver errors are translated by server error number (``exc.args[0]`` in pymysql),
never by message text, and chained with ``from`` so the original stays visible.
"""

from __future__ import annotations

import contextlib
import ssl
from typing import Iterator, Optional, Sequence

import pymysql

__all__ = [
    "MysqlStateError",
    "SchemaNotFoundError",
    "ServerUnavailableError",
    "TlsError",
    "TlsVerificationError",
    "PoolTimeoutError",
    "CommitUnknownError",
    "ValueTooLargeError",
    "ConflictError",
    "QueryError",
    "CorruptStateError",
    "DecryptionError",
    "StaleStateError",
    "LockTimeoutError",
    "LockLostError",
    "NestedTransactionError",
    "StoreClosedError",
    "SessionNotFoundError",
    "SessionExistsError",
    "WrongTypeError",
    "MigrationError",
    "MysqlStateWarning",
    "DamagedExportWarning",
    "errno_of",
    "tls_failure",
    "translate",
    "CONNECTION_ERRNOS",
    "RETRYABLE_LOCK_ERRNOS",
    "UNAVAILABLE_ERRNOS",
    "REPLICATION_FAILED_ERRNOS",
    "SCHEMA_MISSING_ERRNOS",
    "REPLICA_BEHIND_ERRNOS",
]


class MysqlStateError(Exception):
    """Base class of every error raised by mysql-state for a database problem.

    ``errno`` holds the server or client error number when there is one.
    """

    def __init__(self, message: str, errno: Optional[int] = None) -> None:
        super().__init__(message)
        self.errno = errno


class SchemaNotFoundError(MysqlStateError):
    """The database or table is missing and ``create_if_not_exist`` is False.

    ``missing`` is what is missing (``"database"`` or ``"table"``), ``name`` its quoted name
    and ``statements`` the SQL that creates what is missing, in order: the message is made of
    them, and a caller other than the API (the command line) says its own way out from them.
    """

    def __init__(self, missing: str, name: str, statements: Sequence[str], errno: Optional[int] = None,
                 message: Optional[str] = None) -> None:
        self.missing, self.name, self.statements = missing, name, tuple(statements)
        super().__init__(message or (f"{missing} {name} does not exist. Create it with "
                                     f"{'; and then '.join(self.statements)}; or pass create_if_not_exist=True"),
                         errno)


class MigrationError(MysqlStateError):
    """A migration step refused to run, nothing changed: the table holds rows whose meaning the
    step would change (ids spelt in more than one way, by case, accents or trailing spaces, one
    id under the table's collation, would become separate ids). The message names them and the
    way out."""


class ServerUnavailableError(MysqlStateError):
    """The server cannot be reached, or the connection was lost and could not be restored."""


class TlsError(MysqlStateError):
    """TLS could not be set up as ``ssl-mode`` demands (e.g. the server offers none).

    Not a :class:`ServerUnavailableError`: it is configuration, so retrying cannot help and
    the store never retries it.
    """


class TlsVerificationError(TlsError):
    """The server's certificate failed verification (unknown CA, or it does not name the host)."""


class PoolTimeoutError(MysqlStateError):
    """No pooled connection became free within ``pool_timeout`` seconds."""


class CommitUnknownError(MysqlStateError):
    """The connection was lost while COMMIT was in flight: the write may or may not be stored.

    It is never retried automatically, because repeating an append could duplicate it.
    Read the state back to find out.
    """


class ValueTooLargeError(MysqlStateError, ValueError):
    """A single value is larger than the server's ``max_allowed_packet``; nothing was written."""


class ConflictError(MysqlStateError):
    """Lock conflicts (deadlock, lock wait timeout) persisted through every retry."""


class QueryError(MysqlStateError):
    """Any other server error."""


class CorruptStateError(MysqlStateError):
    """Stored rows cannot be read as what they claim to be: JSON that does not parse, or a list
    whose item rows disagree with its hash row. Never taken for "no state yet".

    ``session_id`` (the packed id), ``key`` and ``index`` (None for the list as a whole)
    name the place.
    """

    def __init__(self, message: str, session_id: str, key: str, index: Optional[int] = None) -> None:
        super().__init__(message)
        self.session_id, self.key, self.index = session_id, key, index


class DecryptionError(CorruptStateError):
    """An encrypted row that cannot be decrypted: its key id is not in the keyring, it was
    tampered with or moved, or the store has no keyring. ``key_id`` names the key it needs."""

    def __init__(self, message: str, session_id: str, key: str, index: Optional[int], key_id: Optional[str]) -> None:
        super().__init__(message, session_id, key, index)
        self.key_id = key_id


class StaleStateError(MysqlStateError):
    """A versioned save found another version stored than the one it was based on (or an
    append at a length, another length: ``what="length"``); nothing written. ``stored`` is -1
    for a key whose rows have no version (no row 0 and no list's hash row: damaged)."""

    def __init__(self, key: str, expected: int, stored: int, what: str = "version") -> None:
        if stored < 0:  # rows under the key, but no row 0 and no list's hash row: no version
            said = (f"key {key!r}: expected {what} {expected}, but the key holds rows with no {what}: neither "
                    "row 0 nor a list's hash row (damaged: every read of it raises CorruptStateError); nothing "
                    "was written: save it without a version to replace it")
        elif expected == stored:  # the same number, another list
            said = (f"key {key!r}: {what} {expected} is stored, but not the list this process last read or "
                    f"wrote at it (another writer changed it and left its {what} as it was: the Java store's list "
                    "save leaves the version, a copy over a deleted list can leave the length); nothing was "
                    "written: read the list again and retry")
        else:
            said = (f"key {key!r}: expected {what} {expected}, but {what} {stored} is stored "
                    "(another writer saved in between); nothing was written")
        super().__init__(said)
        self.key, self.expected, self.stored = key, expected, stored


class LockTimeoutError(MysqlStateError):
    """``session_lock`` could not take the session's lock within its timeout."""


class LockLostError(MysqlStateError):
    """A ``session_lock`` lease was lost while held: its lock connection died (killed, cut, or
    the server restarted), so the server released the lock and another run may hold it now.
    Raised by the next store call made inside the lease, by ``check()`` and at the block's end."""


class NestedTransactionError(MysqlStateError, RuntimeError):
    """A write through the store (or a nested ``store.transaction``) inside ``transaction(fn)``'s
    ``fn`` on the same thread: it would wait for the transaction's own row locks. Use ``tx``."""


class StoreClosedError(MysqlStateError, RuntimeError):
    """The store was closed; it opens no new connection."""


class SessionNotFoundError(MysqlStateError, LookupError):
    """An operation on a whole session (``fork``, ``show``) named a session with no rows."""


class SessionExistsError(MysqlStateError):
    """``fork`` was asked to create a session that already has rows; nothing was written."""


class WrongTypeError(MysqlStateError, TypeError):
    """A list operation (``pop_list``, ``append_list``) on a key that holds a single value, as
    Redis answers WRONGTYPE: a key is a value or a list, never both. Nothing was written.

    ``session_id`` (the packed id), ``key`` and ``operation`` name the refused call.
    """

    def __init__(self, session_id: str, key: str, operation: str) -> None:
        super().__init__(
            f"{operation} {key!r} of session {session_id!r}: the key holds a single value, not a list; "
            "nothing was written (read it with get, or replace it by a list with save_list)"
        )
        self.session_id, self.key, self.operation = session_id, key, operation


class MysqlStateWarning(UserWarning):
    """A configuration that works but weakens a guarantee (e.g. a case-insensitive table)."""


class DamagedExportWarning(MysqlStateWarning):
    """An export streamed keys or rows that are damaged in the table (a list whose rows are not
    the ones its hash row counts, a gap, rows without row 0, a row the import's line rules
    refuse): every row went out as it is, and ``import_rows`` refuses such a file whole.
    ``keys``: ``(session id, key, why)`` of each."""

    def __init__(self, message: str, keys: list) -> None:
        super().__init__(message)
        self.keys = keys


def caller_stacklevel() -> int:
    """The ``stacklevel`` that makes a ``warnings.warn`` (called by the function that calls
    this) point at the first line outside this package: the user's own call, so that warning
    filters by module and the once-per-location default act on the caller's code, whatever
    path inside the package led there."""
    import inspect
    import os

    package = os.path.dirname(os.path.abspath(__file__)) + os.sep
    here = inspect.currentframe()
    level, frame = 1, here.f_back if here is not None else None
    while frame is not None and frame.f_code.co_filename.startswith(package):
        frame, level = frame.f_back, level + 1
    return level


# Client/server error numbers that mean "the connection is gone" (MySQL and MariaDB).
#   0     pymysql InterfaceError on a closed connection
#   1053  server shutdown in progress        1927  MariaDB: connection killed
#   2002  can't connect through socket       2003  can't connect to host
#   2006  server has gone away               2013  lost connection during query
#   2055  lost connection (system error)     4031  MySQL 8: disconnected for inactivity
CONNECTION_ERRNOS = frozenset({0, 1053, 1927, 2002, 2003, 2006, 2013, 2055, 4031})
#: Error numbers that mean "could not connect at all" (nothing was sent).
CONNECT_ERRNOS = frozenset({2002, 2003})
#: Error numbers of a connection that could not be opened (refused, unreachable, lost or timed
#: out during the handshake): nothing of a call was sent on it, so the next host may be tried.
OPEN_ERRNOS = CONNECT_ERRNOS | {2006, 2013}
#: The server answers but cannot serve: 1047 (ER_UNKNOWN_COM_ERROR) is what a Galera node
#: without quorum answers ("WSREP has not yet prepared node for application use"). The
#: node is unavailable (not a query bug): the store moves on to the next host.
WSREP_NOT_READY = 1047
UNAVAILABLE_ERRNOS = frozenset({WSREP_NOT_READY})
#: 1180 (ER_ERROR_DURING_COMMIT): the transaction failed in a replication or commit step of the
#: server. On Galera it is what a node answers when it lost the primary component while
#: replicating the transaction ("... (provider status: Not connected to Primary Component)"),
#: either while a statement appended a streaming-replication fragment, or at COMMIT. Before
#: COMMIT nothing can have been committed (the transaction, and any fragment sent, is rolled
#: back): the call moves on as for 1047. At COMMIT it is never retried but raised as
#: CommitUnknownError: the write set may have been sent to the group before the node left it,
#: and the rest of the cluster may have ordered and committed it (and without Galera the
#: error can follow the binary log's write of the transaction).
ERROR_DURING_COMMIT = 1180
REPLICATION_FAILED_ERRNOS = frozenset({ERROR_DURING_COMMIT})
# Lock conflicts that a retry of the whole transaction resolves: deadlock, lock wait timeout.
RETRYABLE_LOCK_ERRNOS = frozenset({1213, 1205})
DUPLICATE_KEY = 1062
#: DDL that another process already ran (concurrent migrations): duplicate column, duplicate
#: key name, can't drop (already gone). A migration step that meets one is done.
DUPLICATE_COLUMN = 1060
ALREADY_DONE_ERRNOS = frozenset({DUPLICATE_COLUMN, 1061, 1091})
UNKNOWN_DATABASE = 1049
NO_SUCH_TABLE = 1146
#: The database or the table does not exist (on a replica: it has not applied their CREATE yet).
SCHEMA_MISSING_ERRNOS = frozenset({UNKNOWN_DATABASE, NO_SUCH_TABLE})
#: A replica whose copy of the table is older than the statements expect: no database or table
#: yet, or a column or index a migration added on the primary (1054 unknown column, 1176
#: unknown key) not applied yet. Its read goes to the primary.
REPLICA_BEHIND_ERRNOS = SCHEMA_MISSING_ERRNOS | {1054, 1176}
PACKET_TOO_LARGE = 1153
#: The client's "SSL connection error": any TLS failure, including "the server has no TLS".
SSL_CONNECTION_ERROR = 2026
#: OpenSSL's X509_V_ERR_HOSTNAME_MISMATCH and X509_V_ERR_IP_ADDRESS_MISMATCH: the certificate
#: does not name the host (a name, an address).
X509_NAME_MISMATCHES = frozenset({62, 64})


def is_driver_error(exc: BaseException) -> bool:
    """Whether ``exc`` is the driver's (pymysql's): the only exceptions :func:`translate` maps
    by number; anything else (an ``OSError`` whose ``args[0]`` is an OS error number, a bug) is
    never taken for a server error.

    >>> is_driver_error(pymysql.err.OperationalError(2013, "lost")), is_driver_error(OSError(104, "reset"))
    (True, False)
    """
    return isinstance(exc, pymysql.err.Error)


def errno_of(exc: BaseException) -> Optional[int]:
    """The error number pymysql put in ``exc.args[0]`` of a driver error, else None.

    >>> errno_of(pymysql.err.OperationalError(1213, "deadlock")), errno_of(OSError(104, "reset"))
    (1213, None)
    """
    args = exc.args if is_driver_error(exc) else ()
    return args[0] if args and isinstance(args[0], int) else None


@contextlib.contextmanager
def translating(what: str) -> Iterator[None]:
    """The choke point: a driver error raised in the block leaves it as the
    :class:`MysqlStateError` :func:`translate` maps it to, chained ``from`` it; anything else
    passes as it is.

    >>> with translating("get 'plan'"):
    ...     raise pymysql.err.OperationalError(1205, "Lock wait timeout exceeded")
    Traceback (most recent call last):
        ...
    mysql_state.errors.ConflictError: get 'plan': ...
    """
    try:
        yield
    except pymysql.err.Error as exc:
        raise translate(exc, what) from exc


#: TLS errors that only say the other end closed the connection (an end of file, a close
#: alert): on an established connection it was lost (an idle one cut by ``wait_timeout`` or a
#: proxy), during the handshake the host dropped it. Neither is a TLS setup problem: the
#: connection is re-opened, or the next host tried, as without TLS.
TLS_CONNECTION_ENDS = (ssl.SSLEOFError, ssl.SSLZeroReturnError)


def tls_failure(exc: BaseException) -> Optional[BaseException]:
    """The TLS failure behind ``exc``, found by type, never by message: an ``ssl.SSLError``
    along ``__cause__``/``__context__`` (pymysql wraps it in error 2003), or ``exc`` itself
    when its number is 2026. None when ``exc`` is not about TLS, or only says that the
    connection ended (:data:`TLS_CONNECTION_ENDS`).
    """
    seen: set = set()
    todo: list = [exc]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, ssl.SSLError) and not isinstance(e, TLS_CONNECTION_ENDS):
            return e
        todo += [e.__cause__, e.__context__, getattr(e, "original_exception", None)]
    return exc if errno_of(exc) == SSL_CONNECTION_ERROR else None


def translate(exc: BaseException, what: str) -> MysqlStateError:
    """Map a driver exception to the matching :class:`MysqlStateError` subclass.

    ``what`` names the operation (e.g. ``"save_list 'memory'"``) for the message.
    The caller raises the result ``from exc``.
    """
    if isinstance(exc, MysqlStateError):
        return exc
    errno = errno_of(exc)
    detail = exc.args[1] if len(getattr(exc, "args", ())) > 1 else str(exc)
    tls = tls_failure(exc)
    if isinstance(tls, ssl.SSLCertVerificationError):
        host = getattr(exc, "host", None)
        where = f"host {host}" if host else "the host"
        reason = tls.verify_message or tls.reason or "verification failed"
        # By OpenSSL's verify code, not its text: 62 and 64 are a name or an address the
        # certificate does not hold (VERIFY_IDENTITY); anything else is the chain to ssl-ca
        # (VERIFY_CA checks no name).
        check = ("the names the certificate was issued for (ssl-mode=VERIFY_IDENTITY checks them)"
                 if tls.verify_code in X509_NAME_MISMATCHES else "that ssl-ca is the CA that signed it")
        return TlsVerificationError(
            f"{what}: the server's certificate failed verification for {where} ({reason}); check {check}",
            errno,
        )
    if tls is not None:
        return TlsError(f"{what}: TLS could not be set up (error {errno}: {detail})", errno)
    if errno in CONNECTION_ERRNOS:
        return ServerUnavailableError(
            f"{what}: the MySQL server is unreachable or dropped the connection "
            f"(error {errno}: {detail})",
            errno,
        )
    if errno in UNAVAILABLE_ERRNOS:
        return ServerUnavailableError(
            f"{what}: the server is not ready to serve (error {errno}: {detail}); a Galera node "
            "without quorum answers so, and no other host of the list answered",
            errno,
        )
    if errno in RETRYABLE_LOCK_ERRNOS or errno == DUPLICATE_KEY:
        return ConflictError(f"{what}: conflict with concurrent writers persisted after retries "
                             f"(error {errno}: {detail})", errno)
    if errno in SCHEMA_MISSING_ERRNOS:
        # gone under an open store (dropped by hand, a restore in progress): nothing to create it with here
        missing = "database" if errno == UNKNOWN_DATABASE else "table"
        return SchemaNotFoundError(missing, "", (), errno,
                                   f"{what}: the {missing} no longer exists ({detail}, error {errno}); it was "
                                   "dropped while the store was open: create it again (create_if_not_exist=True)")
    if errno == PACKET_TOO_LARGE:
        return ValueTooLargeError(f"{what}: the server rejected a packet larger than max_allowed_packet", errno)
    return QueryError(f"{what}: server error {errno}: {detail}", errno)
