"""mysql-state: persist AI-agent state in MySQL.

The Python port of AgentScope Java's ``MysqlAgentStateStore``: one table, a generic
key / item-index store, incremental lists with change detection.

``url`` is ``mysql://user:password@host:port/database``:

>>> from mysql_state import MysqlAgentStateStore
>>> with MysqlAgentStateStore.from_url(url, create_if_not_exist=True) as store:
...     store.save_list("alice", "chat-1", "memory", [{"role": "user", "text": "hi"}])
...     store.append_list("alice", "chat-1", "memory", [{"role": "assistant", "text": "hello"}])
2
"""

from .errors import (
    CommitUnknownError,
    ConflictError,
    CorruptStateError,
    DecryptionError,
    LockLostError,
    LockTimeoutError,
    MigrationError,
    NestedTransactionError,
    StaleStateError,
    StoreClosedError,
    MysqlStateError,
    MysqlStateWarning,
    DamagedExportWarning,
    PoolTimeoutError,
    QueryError,
    SchemaNotFoundError,
    ServerUnavailableError,
    SessionExistsError,
    SessionNotFoundError,
    TlsError,
    TlsVerificationError,
    ValueTooLargeError,
    WrongTypeError,
)
from .crypto import Keyring
from .catalog import ALL_USERS, SessionInfo, SessionPage
from .history import HistoryItem
from .retention import PruneReport
from .migrations import DoctorFinding, MigrationStep, Problem, Step  # noqa: F401 (old names)
from .results import UNVERSIONED, SavedMany, SaveReport, VersionedState
from .locks import SessionLock
from .transaction import Transaction
from .store import MysqlAgentStateStore
from .aio import AsyncMysqlAgentStateStore  # noqa: E402 (it imports the store)

__all__ = [
    "MysqlAgentStateStore",
    "AsyncMysqlAgentStateStore",
    "VersionedState",
    "UNVERSIONED",
    "SaveReport",
    "SavedMany",
    "Transaction",
    "SessionLock",
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
    "Keyring",
    "StaleStateError",
    "LockTimeoutError",
    "LockLostError",
    "NestedTransactionError",
    "MigrationError",
    "StoreClosedError",
    "MysqlStateWarning",
    "DamagedExportWarning",
    "SessionNotFoundError",
    "SessionExistsError",
    "WrongTypeError",
    "ALL_USERS",
    "SessionInfo",
    "SessionPage",
    "HistoryItem",
    "PruneReport",
    "DoctorFinding",
    "MigrationStep",
]
__version__ = "0.1.0"
