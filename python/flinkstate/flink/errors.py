"""Typed errors of the Flink savepoint decoder (subclasses of flinkstate's FlinkStateError)."""

from __future__ import annotations

from flinkstate.core.errors import CorruptFileError, FlinkStateError, InvalidArgumentError, SchemaMismatchError

__all__ = ["CorruptFileError", "IncompatibleReleaseError", "KryoDecodeError", "KryoMigrationError", "SerializerMismatchError", "SourceStateError",
           "SplitNotFoundError", "StateAccountingError", "UnknownSourceError", "UnsupportedFlinkFormatError",
           "UnsupportedSerializerError"]


class UnsupportedFlinkFormatError(FlinkStateError, NotImplementedError):
    """A Flink handle kind, metadata version or state layout this decoder does not read (named)."""


class UnsupportedSerializerError(FlinkStateError, NotImplementedError):
    """A serializer (Kryo, Avro, user-defined...) whose bytes cannot be decoded: names operator, state, class."""


class KryoDecodeError(UnsupportedSerializerError):
    """A Kryo value that cannot be read or written as its state declares: bytes that are not the declared class, an
    unknown registration id, a class without a schema, a value outside the state's type; `cls` names the Java class."""

    def __init__(self, message: str, cls: str, declared: str = "") -> None:
        super().__init__(message)
        self.cls = cls
        self.declared = declared  # the class the serializer snapshot declares (a field's, a state's)


class StateAccountingError(CorruptFileError):
    """What a state's files hold and what was read from them differ (names operator, state and files): never fewer rows silently."""


class SourceStateError(FlinkStateError):
    """A source's reader or enumerator state that cannot be decoded or changed as asked (names operator and what)."""


class UnknownSourceError(SourceStateError, InvalidArgumentError):
    """A source whose state matches no known split/enumerator format, or more than one (names the operator)."""


class SplitNotFoundError(SourceStateError, LookupError):
    """A partition, split or file path the source's state does not hold (named, with what it holds)."""


class SerializerMismatchError(SchemaMismatchError):
    """A state's values no longer have the type of the Flink serializer it was imported with, so an export cannot write
    them with it (names operator, state, column, serializer class and both types); nothing is written."""


class IncompatibleReleaseError(UnsupportedSerializerError):
    """A state holds bytes that the target Flink release would read differently than the release that wrote them (Kryo 2
    bytes of Flink 1.x read by Kryo 5 of Flink 2.x): an export for that release is refused, naming operator, state,
    serializer and both releases; nothing is written."""


class KryoMigrationError(UnsupportedSerializerError):
    """Kryo 2 state that cannot be written for Flink 2.x: named by operator, state and class, with why. `report` holds,
    where an export planned several states, every state's migration or failure (rows as `upgrade_report` gives)."""

    def __init__(self, message: str, report: list[dict[str, str]] | None = None) -> None:
        super().__init__(message)
        self.report = report or []
