"""Typed errors of the Flink savepoint decoder (subclasses of flinkstate's FlinkStateError)."""

from __future__ import annotations

from flinkstate.core.errors import CorruptFileError, FlinkStateError

__all__ = ["CorruptFileError", "KryoDecodeError", "StateAccountingError", "UnsupportedFlinkFormatError", "UnsupportedSerializerError"]


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
