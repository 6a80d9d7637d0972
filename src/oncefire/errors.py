"""Every exception oncefire raises, under one base class."""

from __future__ import annotations

import warnings


class OncefireError(Exception):
    """Base class of every error oncefire raises."""


class InvalidPathError(OncefireError, ValueError):
    """A document or collection path, or an id inside one, is malformed."""


class InvalidPatternError(OncefireError, ValueError):
    """A trigger's path pattern has a malformed wildcard or the wrong depth."""


class InvalidDocumentError(OncefireError, ValueError):
    """Document data cannot be stored: not JSON, or too large."""


class DocumentTooLargeError(InvalidDocumentError):
    """A document's JSON encoding is over the 1 MiB limit."""


class InvalidMessageError(OncefireError, ValueError):
    """A topic message cannot be published: its attributes or data are not as required."""


class DocumentNotFoundError(OncefireError, LookupError):
    """An update named a document that does not exist."""


class DeadLetterNotFoundError(OncefireError, LookupError):
    """No dead letter has that id (it was replayed, dismissed or never existed)."""


class ReplayError(OncefireError):
    """A dead letter cannot be replayed (its payload was truncated)."""


class ConfigError(OncefireError, ValueError):
    """A setting, trigger option or store URL is invalid."""


class PriceTableError(ConfigError):
    """A price table for `oncefire cost` cannot be read or holds a bad value."""


class StoreError(OncefireError):
    """The store failed; the driver's error is chained as the cause."""


class StoreUnavailableError(StoreError):
    """The store could not be reached, or stayed busy, full or read-only: the same operation
    may succeed later (never a reason to give up on the data it carried)."""


class StoreConflictError(StoreError):
    """Two transactions waited on each other (a deadlock) and the store ended this one:
    running it again may succeed."""


class SchemaVersionError(StoreError):
    """The store's schema is newer than this oncefire understands."""


class ForeignDatabaseError(ConfigError):
    """The store's database holds another application's tables and no oncefire schema: only
    `oncefire migrate` adds oncefire's tables there."""


class MissingDependencyError(OncefireError, ImportError):
    """An optional dependency is not installed; the message says what to install."""


class TransactionError(OncefireError):
    """A document transaction was used wrongly (after commit, or nested)."""


class TransactionAbortedError(TransactionError, ValueError):
    """A transaction met contention on every attempt and gave up (Firestore's client raises
    a ValueError then, the Realtime Database's a TransactionAbortedError)."""


class FunctionError(OncefireError):
    """Control-flow errors a function raises to steer its own delivery."""


class Retry(FunctionError):
    """Raised by a function to ask for its next attempt after `delay` seconds."""

    def __init__(self, delay: float | None = None, reason: str = "") -> None:
        if delay is not None and delay < 0:
            raise ConfigError(f"Retry(delay={delay}) must not be negative.")
        self.delay = delay
        super().__init__(
            reason or (f"retry requested in {delay} s" if delay else "retry requested")
        )


class PermanentError(FunctionError):
    """Raised by a function to make its delivery a dead letter at once, never retried."""


class UndecodablePayloadError(PermanentError):
    """An event's stored payload cannot be decoded: its delivery is a dead letter at once."""


class PayloadMismatchError(PermanentError):
    """An idempotency key was reused with a different payload."""


PayloadMismatch = PayloadMismatchError


class RecordHeldError(OncefireError):
    """An @idempotent record is held by a live lease elsewhere; the attempt is retried later."""

    def __init__(self, message: str, delay: float | None = None) -> None:
        super().__init__(message)
        self.delay = delay


class LeaseLostError(OncefireError):
    """A function's transaction found its delivery no longer leased to its attempt (taken
    over after a stall, or lost in a failover): nothing of the transaction was written."""


class EventNotFoundError(OncefireError, LookupError):
    """No event with that id is stored."""


class FunctionNotFoundError(OncefireError, LookupError):
    """No function of that name is registered with the app or kept in its store."""


# Former names, still importable; each warns when used.
_DEPRECATED = {"ClaimHeldError": "RecordHeldError"}


def __getattr__(name: str) -> type[OncefireError]:
    if name in _DEPRECATED:
        warnings.warn(
            f"oncefire.{name} is now {_DEPRECATED[name]}: import that name instead.",
            DeprecationWarning,
            stacklevel=2,
        )
        found: type[OncefireError] = globals()[_DEPRECATED[name]]
        return found
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
