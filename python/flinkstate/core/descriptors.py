"""State descriptors: the declared shape of keyed state, timers and operator state.

They mirror Flink's descriptors (ValueStateDescriptor, ListStateDescriptor, ...) with Arrow
types instead of serializers. Descriptors are stored with every checkpoint (`to_dict`) and
restored exactly (`descriptor_from_dict`); user functions are never stored.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Union

import pyarrow as pa

from flinkstate.core.errors import InvalidArgumentError
from flinkstate.core.ttl import StateTtlConfig
from flinkstate.core.types import type_from_json, type_to_json

__all__ = [
    "StateKind",
    "same_schema",
    "ValueStateDescriptor",
    "ListStateDescriptor",
    "MapStateDescriptor",
    "ReducingStateDescriptor",
    "AggregatingStateDescriptor",
    "KeyedStateDescriptor",
    "TimerServiceDescriptor",
    "OperatorStateDescriptor",
    "AggregateFunction",
    "descriptor_from_dict",
    "validate_name",
]

StateKind = Literal["value", "list", "map", "reducing", "aggregating"]
STATE_KINDS: tuple[str, ...] = ("value", "list", "map", "reducing", "aggregating")

# '$' too: the table runtime names its state-backed data views so (`agg0$map`, `distinctAcc_0`), and Flink SQL jobs
# have them wherever an aggregate retracts through a MapView or ListView
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.$\-]{0,199}$")
# operator state names may also start with '_' (their files live under `_operator/<name>/`, clear of the layout's own
# names): Flink's AsyncWaitOperator keeps `_async_wait_operator_state_` (async lookups and calls of SQL jobs too)
_OPERATOR_STATE_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.$\-]{0,199}$")


def same_schema(a: Any, b: Any) -> bool:
    """True when two declarations of a state or timer service store the same data.

    As in Flink (FLIP-25: "the TTL configuration is not part of check- or savepoints"), the
    TTL duration, update type, visibility and cleanup may change on restore; only turning
    TTL on or off changes what is stored (the TTL timestamp), so it is a schema change.
    """
    da, db = a.to_dict(), b.to_dict()
    if "ttl" in da or "ttl" in db:
        da["ttl"], db["ttl"] = bool(getattr(a, "ttl_enabled", False)), bool(getattr(b, "ttl_enabled", False))
    return bool(da == db)


def validate_name(name: object, what: str, *, leading_underscore: bool = False) -> str:
    """Check an operator uid or state name that becomes a path component; return it (leading_underscore: an operator
    state's name, which may start with '_')."""
    pattern = _OPERATOR_STATE_RE if leading_underscore else _NAME_RE
    if not isinstance(name, str) or not pattern.match(name) or ".." in name:
        start = "a letter, digit or '_'" if leading_underscore else "a letter or digit"
        raise InvalidArgumentError(
            f"invalid {what} {name!r}: use 1-200 characters of letters, digits, '_', '.', '-', '$', "
            f"starting with {start} and without '..' (it becomes a path component)"
        )
    return name


def _opt_to_json(t: pa.DataType | None) -> dict[str, str] | None:
    return None if t is None else type_to_json(t)


def _opt_from_json(d: dict[str, str] | None) -> pa.DataType | None:
    return None if d is None else type_from_json(d)


def _check_type(t: object, what: str, name: str) -> None:
    if not isinstance(t, pa.DataType):
        raise InvalidArgumentError(f"{what} of state {name!r} must be a pyarrow DataType, got {t!r}")


@dataclass(frozen=True)
class AggregateFunction:
    """Flink's AggregateFunction: create_accumulator, add, get_result (merge is unused here)."""

    create_accumulator: Callable[[], Any]
    add: Callable[[Any, Any], Any]
    get_result: Callable[[Any], Any]


@dataclass(frozen=True, kw_only=True)
class _KeyedBase:
    name: str
    key_type: pa.DataType = field(default_factory=pa.string)
    namespace_type: pa.DataType | None = None
    ttl: StateTtlConfig | None = None

    kind: Literal["value", "list", "map", "reducing", "aggregating"] = dataclasses.field(init=False, default="value")

    def __post_init__(self) -> None:
        validate_name(self.name, "state name")
        _check_type(self.key_type, "key_type", self.name)
        if self.namespace_type is not None:
            _check_type(self.namespace_type, "namespace_type", self.name)
        if self.ttl is not None and not isinstance(self.ttl, StateTtlConfig):
            raise InvalidArgumentError(f"ttl of state {self.name!r} must be a StateTtlConfig")

    @property
    def ttl_enabled(self) -> bool:
        """True when a TTL config is set and its update type is not Disabled."""
        return self.ttl is not None and self.ttl.enabled

    def with_ttl_ms(self, ttl_ms: int) -> Any:
        """This declaration with another TTL duration (update type, visibility and cleanup kept): a change Flink allows
        on restore (FLIP-25). SchemaMismatchError when the state has no TTL: turning it on changes what is stored."""
        from flinkstate.core.errors import SchemaMismatchError

        if self.ttl is None or not self.ttl.enabled:
            raise SchemaMismatchError(f"state {self.name!r} is declared without TTL: a TTL of {ttl_ms} ms would turn it on, which "
                                      "changes what is stored; write the state anew with a TTL instead")
        return dataclasses.replace(self, ttl=dataclasses.replace(self.ttl, ttl_ms=ttl_ms))

    def _types(self) -> dict[str, pa.DataType]:
        raise NotImplementedError

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form stored in checkpoint metadata."""
        d: dict[str, Any] = {
            "name": self.name,
            "kind": self.kind,
            "key_type": type_to_json(self.key_type),
            "namespace_type": _opt_to_json(self.namespace_type),
            "ttl": None if self.ttl is None else self.ttl.to_dict(),
        }
        for k, t in self._types().items():
            d[k] = type_to_json(t)
        return d


@dataclass(frozen=True, kw_only=True)
class ValueStateDescriptor(_KeyedBase):
    """A single value per key and namespace."""

    value_type: pa.DataType  # type: ignore[assignment]
    kind: Literal["value"] = dataclasses.field(init=False, default="value")

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_type(self.value_type, "value_type", self.name)

    def _types(self) -> dict[str, pa.DataType]:
        return {"value_type": self.value_type}


@dataclass(frozen=True, kw_only=True)
class ListStateDescriptor(_KeyedBase):
    """A list of elements per key and namespace (value_type is the element type)."""

    value_type: pa.DataType  # type: ignore[assignment]
    kind: Literal["list"] = dataclasses.field(init=False, default="list")

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_type(self.value_type, "value_type", self.name)

    def _types(self) -> dict[str, pa.DataType]:
        return {"value_type": self.value_type}


@dataclass(frozen=True, kw_only=True)
class MapStateDescriptor(_KeyedBase):
    """A map of user keys to user values per key and namespace."""

    user_key_type: pa.DataType
    user_value_type: pa.DataType
    kind: Literal["map"] = dataclasses.field(init=False, default="map")

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_type(self.user_key_type, "user_key_type", self.name)
        _check_type(self.user_value_type, "user_value_type", self.name)

    @property
    def value_type(self) -> pa.DataType:
        return self.user_value_type

    def _types(self) -> dict[str, pa.DataType]:
        return {"user_key_type": self.user_key_type, "user_value_type": self.user_value_type}


@dataclass(frozen=True, kw_only=True)
class ReducingStateDescriptor(_KeyedBase):
    """A value folded with a reduce function (value_type is the reduced type)."""

    value_type: pa.DataType  # type: ignore[assignment]
    reduce_function: Callable[[Any, Any], Any] | None = field(default=None, compare=False, repr=False)
    kind: Literal["reducing"] = dataclasses.field(init=False, default="reducing")

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_type(self.value_type, "value_type", self.name)

    def _types(self) -> dict[str, pa.DataType]:
        return {"value_type": self.value_type}


@dataclass(frozen=True, kw_only=True)
class AggregatingStateDescriptor(_KeyedBase):
    """An accumulator updated by an AggregateFunction (value_type is the accumulator type)."""

    value_type: pa.DataType  # type: ignore[assignment]
    aggregate_function: AggregateFunction | None = field(default=None, compare=False, repr=False)
    kind: Literal["aggregating"] = dataclasses.field(init=False, default="aggregating")

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_type(self.value_type, "value_type", self.name)

    def _types(self) -> dict[str, pa.DataType]:
        return {"value_type": self.value_type}


KeyedStateDescriptor = Union[
    ValueStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    AggregatingStateDescriptor,
]

_KEYED_CLASSES: dict[str, type] = {
    "value": ValueStateDescriptor,
    "list": ListStateDescriptor,
    "map": MapStateDescriptor,
    "reducing": ReducingStateDescriptor,
    "aggregating": AggregatingStateDescriptor,
}


@dataclass(frozen=True, kw_only=True)
class TimerServiceDescriptor:
    """A named timer service: timers of one time domain, keyed and namespaced."""

    name: str
    domain: Literal["event", "processing"] = "event"
    key_type: pa.DataType = field(default_factory=pa.string)
    namespace_type: pa.DataType | None = None

    def __post_init__(self) -> None:
        validate_name(self.name, "timer service name")
        if self.domain not in ("event", "processing"):
            raise InvalidArgumentError(f"domain of timer service {self.name!r} must be 'event' or 'processing'")
        _check_type(self.key_type, "key_type", self.name)
        if self.namespace_type is not None:
            _check_type(self.namespace_type, "namespace_type", self.name)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form stored in checkpoint metadata."""
        return {"name": self.name, "domain": self.domain, "key_type": type_to_json(self.key_type), "namespace_type": _opt_to_json(self.namespace_type)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TimerServiceDescriptor:
        """Inverse of `to_dict`."""
        return cls(name=d["name"], domain=d["domain"], key_type=type_from_json(d["key_type"]), namespace_type=_opt_from_json(d.get("namespace_type")))


@dataclass(frozen=True, kw_only=True)
class OperatorStateDescriptor:
    """Non-keyed operator state: list (split on rescale), union (all to all) or broadcast (a map)."""

    name: str
    value_type: pa.DataType
    mode: Literal["list", "union", "broadcast"] = "list"
    key_type: pa.DataType | None = None  # broadcast state only

    def __post_init__(self) -> None:
        validate_name(self.name, "operator state name", leading_underscore=True)
        if self.mode not in ("list", "union", "broadcast"):
            raise InvalidArgumentError(f"mode of operator state {self.name!r} must be list, union or broadcast")
        _check_type(self.value_type, "value_type", self.name)
        if self.mode == "broadcast":
            if self.key_type is None:
                raise InvalidArgumentError(f"broadcast state {self.name!r} needs a key_type")
            _check_type(self.key_type, "key_type", self.name)
        elif self.key_type is not None:
            raise InvalidArgumentError(f"operator state {self.name!r}: key_type is only for broadcast state")

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form stored in checkpoint metadata."""
        return {"name": self.name, "mode": self.mode, "value_type": type_to_json(self.value_type), "key_type": _opt_to_json(self.key_type)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> OperatorStateDescriptor:
        """Inverse of `to_dict`."""
        return cls(name=d["name"], mode=d["mode"], value_type=type_from_json(d["value_type"]), key_type=_opt_from_json(d.get("key_type")))


def descriptor_from_dict(d: dict[str, Any]) -> KeyedStateDescriptor:
    """Rebuild a keyed state descriptor from its stored dict (user functions are not stored)."""
    kind = d.get("kind")
    cls = _KEYED_CLASSES.get(str(kind))
    if cls is None:
        raise InvalidArgumentError(f"unknown state kind {kind!r} for state {d.get('name')!r}")
    kwargs: dict[str, Any] = {
        "name": d["name"],
        "key_type": type_from_json(d["key_type"]),
        "namespace_type": _opt_from_json(d.get("namespace_type")),
        "ttl": None if d.get("ttl") is None else StateTtlConfig.from_dict(d["ttl"]),
    }
    if kind == "map":
        kwargs["user_key_type"] = type_from_json(d["user_key_type"])
        kwargs["user_value_type"] = type_from_json(d["user_value_type"])
    else:
        kwargs["value_type"] = type_from_json(d["value_type"])
    return cls(**kwargs)  # type: ignore[no-any-return]
