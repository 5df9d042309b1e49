"""Typed errors of the Flink savepoint decoder (subclasses of flinkstate's FlinkStateError)."""

from __future__ import annotations

from flinkstate.core.errors import CorruptFileError, FlinkStateError, InvalidArgumentError

__all__ = ["CorruptFileError", "SourceStateError", "SplitNotFoundError", "StateAccountingError", "UnknownSourceError",
           "UnsupportedFlinkFormatError", "UnsupportedSerializerError"]


class UnsupportedFlinkFormatError(FlinkStateError, NotImplementedError):
    """A Flink handle kind, metadata version or state layout this decoder does not read (named)."""


class UnsupportedSerializerError(FlinkStateError, NotImplementedError):
    """A serializer (Kryo, Avro, user-defined...) whose bytes cannot be decoded: names operator, state, class."""


class StateAccountingError(CorruptFileError):
    """What a state's files hold and what was read from them differ (names operator, state and files): never fewer rows silently."""


class SourceStateError(FlinkStateError):
    """A source's reader or enumerator state that cannot be decoded or changed as asked (names operator and what)."""


class UnknownSourceError(SourceStateError, InvalidArgumentError):
    """A source whose state matches no known split/enumerator format, or more than one (names the operator)."""


class SplitNotFoundError(SourceStateError, LookupError):
    """A partition, split or file path the source's state does not hold (named, with what it holds)."""
