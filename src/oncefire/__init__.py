"""oncefire: event-triggered Python functions that fire once in effect."""

from oncefire import errors as _errors
from oncefire.app import App
from oncefire.documents import (
    CollectionReference,
    Database,
    DocumentReference,
    Transaction,
)
from oncefire.engine.worker import DrainSummary
from oncefire.errors import (
    ConfigError,
    DeadLetterNotFoundError,
    DocumentNotFoundError,
    DocumentTooLargeError,
    InvalidDocumentError,
    InvalidMessageError,
    InvalidPathError,
    InvalidPatternError,
    LeaseLostError,
    MissingDependencyError,
    OncefireError,
    PayloadMismatch,
    PayloadMismatchError,
    PermanentError,
    RecordHeldError,
    ReplayError,
    Retry,
    SchemaVersionError,
    StoreError,
    TransactionError,
)
from oncefire.events import Change, DocumentSnapshot, Event, EventType, Message
from oncefire.features.stats import FunctionStats
from oncefire.idempotency import idempotent
from oncefire.operations.deadletters import BoundedCount, DeadLetter, ErrorSearch
from oncefire.retry import Outcome, RetryPolicy
from oncefire.settings import Settings
from oncefire.transforms import DELETE_FIELD, SERVER_TIMESTAMP, Increment

__version__ = "0.1.0"

__all__ = [
    "DELETE_FIELD",
    "SERVER_TIMESTAMP",
    "App",
    "BoundedCount",
    "Change",
    "CollectionReference",
    "ConfigError",
    "Database",
    "DeadLetter",
    "DeadLetterNotFoundError",
    "DocumentNotFoundError",
    "DocumentReference",
    "DocumentSnapshot",
    "DocumentTooLargeError",
    "DrainSummary",
    "ErrorSearch",
    "Event",
    "EventType",
    "FunctionStats",
    "Increment",
    "InvalidDocumentError",
    "InvalidMessageError",
    "InvalidPathError",
    "InvalidPatternError",
    "LeaseLostError",
    "Message",
    "MissingDependencyError",
    "OncefireError",
    "Outcome",
    "PayloadMismatch",
    "PayloadMismatchError",
    "PermanentError",
    "RecordHeldError",
    "ReplayError",
    "Retry",
    "RetryPolicy",
    "SchemaVersionError",
    "Settings",
    "StoreError",
    "Transaction",
    "TransactionError",
    "idempotent",
]


def __getattr__(name: str) -> object:
    # The former names of renamed errors (oncefire.errors._DEPRECATED), with their warning.
    if name in _errors._DEPRECATED:
        return getattr(_errors, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
