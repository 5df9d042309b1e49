"""The exceptions flinkstate raises: one base class and a few meaningful subclasses.

Every message names the thing at fault (file, operator, state, checkpoint, column) so a
user can act on it without reading a stack trace.
"""

from __future__ import annotations

__all__ = [
    "FlinkStateError",
    "InvalidArgumentError",
    "CheckpointNotFoundError",
    "OperatorNotFoundError",
    "StateNotFoundError",
    "SchemaMismatchError",
    "CorruptFileError",
    "CommitConflictError",
    "CommitOutcomeUnknownError",
    "KeyGroupOutOfRangeError",
    "ReadOnlyStoreError",
    "StorageError",
    "WorkerPythonError",
    "DuplicateKeyError",
]


class FlinkStateError(Exception):
    """Base class of every error flinkstate raises on purpose."""


class InvalidArgumentError(FlinkStateError, ValueError):
    """An argument or option has a value that cannot be used (named in the message)."""


class CheckpointNotFoundError(FlinkStateError, LookupError):
    """The requested checkpoint or savepoint is not committed at this path."""


class OperatorNotFoundError(FlinkStateError, LookupError):
    """The requested operator uid is not part of the checkpoint."""


class StateNotFoundError(FlinkStateError, LookupError):
    """The requested state (keyed, timer service or operator state) does not exist."""


class SchemaMismatchError(FlinkStateError, TypeError):
    """Data does not match the declared types of a state (the column is named)."""


class CorruptFileError(FlinkStateError, IOError):
    """A data file or manifest entry is unreadable, missing or does not match its record."""


class CommitConflictError(FlinkStateError):
    """Another writer committed first: the commit was refused and nothing of it is visible."""


class CommitOutcomeUnknownError(FlinkStateError, OSError):
    """A commit's storage call failed and the log could not be read to tell whether it landed: the writer keeps its
    files; call `commit()` on it again (it finds its own landed attempt) instead of writing the same data anew."""


class KeyGroupOutOfRangeError(FlinkStateError, ValueError):
    """A key belongs to a key group outside the range a backend or file owns."""


class ReadOnlyStoreError(FlinkStateError, PermissionError):
    """The store cannot be written (read-only filesystem, permissions, bucket policy): nothing was changed."""


class StorageError(FlinkStateError, OSError):
    """Reading or writing the store failed for a reason that is neither damage nor a conflict (I/O, network, the Delta
    library): the table or file and the Delta version are named; a commit that failed this way made nothing visible (a fresh
    read of the log shows it; where none can be made, the error is a CommitOutcomeUnknownError instead)."""


class WorkerPythonError(FlinkStateError, RuntimeError):
    """Spark's Python workers run an interpreter that cannot import flinkstate (it is named)."""


class DuplicateKeyError(InvalidArgumentError):
    """A full put holds the same entry (key, namespace, user key or timer) more than once (named)."""
