"""An operator's declared state, mapped from the serializer snapshots in its keyed-state headers and its operator-state
headers (nothing decoded): descriptors, the states refused when read and why, the serializer classes per state, and
the operators whose headers (or files) do not read."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flinkstate.core.descriptors import OperatorStateDescriptor, TimerServiceDescriptor
from flinkstate.core.errors import FlinkStateError
from flinkstate.core.ttl import StateTtlConfig
from flinkstate.flink.bridge.mapping import ReadOptions, state_descriptor, subtask_states
from flinkstate.flink.errors import CorruptFileError, UnsupportedFlinkFormatError, UnsupportedSerializerError
from flinkstate.flink.files.canonical import TIMER_PREFIX
from flinkstate.flink.files.operator_state import operator_state_headers, operator_state_names, operator_state_types
from flinkstate.flink.meta.metadata import CheckpointMetadata as FlinkMetadata
from flinkstate.flink.meta.metadata import OperatorState
from flinkstate.flink.serde.serializers import arrow_type, unit_namespace
from flinkstate.format.metadata import OperatorMetadata

__all__ = ["operator_metadata"]

_MODES = {"SPLIT_DISTRIBUTE": "list", "UNION": "union", "BROADCAST": "broadcast"}

# what reading an operator's state headers raises when they (or their files) are not what they should be; a user's wrong
# options (InvalidArgumentError) still stop the open
_HEADER_ERRORS = (CorruptFileError, UnsupportedFlinkFormatError, UnsupportedSerializerError)


def operator_metadata(meta: FlinkMetadata, op: OperatorState, name: str, ttl: Mapping[str, StateTtlConfig | int],
                       unknown: list[str], options: ReadOptions | None = None, refused: dict[str, str] | None = None,
                       serializers: dict[str, tuple[str | None, str]] | None = None,
                       broken: dict[str, FlinkStateError] | None = None) -> OperatorMetadata:
    """An operator's declared state, from the serializer snapshots in its keyed-state headers and its operator states.
    Headers that do not read (with `broken`) leave the operator without those states and record why: every other
    operator, and this one's other kind of state, is still declared."""
    om = OperatorMetadata(uid=name, parallelism=op.parallelism, has_coordinator=op.coordinator_state is not None,
                          max_parallelism=op.max_parallelism)
    try:
        _keyed_metadata(meta, op, name, om, ttl, unknown, options, refused, serializers)
    except _HEADER_ERRORS as e:
        if broken is None:
            raise
        broken[name] = e
        om.keyed_states.clear()
        om.timer_services.clear()
    try:
        _operator_state_metadata(meta, op, name, om, serializers)
    except _HEADER_ERRORS as e:
        if broken is None:
            raise
        broken.setdefault(name, e)
        om.operator_states.clear()
    return om


def _keyed_metadata(meta: FlinkMetadata, op: OperatorState, name: str, om: OperatorMetadata, ttl: Mapping[str, StateTtlConfig | int],
                    unknown: list[str], options: ReadOptions | None, refused: dict[str, str] | None,
                    serializers: dict[str, tuple[str | None, str]] | None) -> None:
    first: dict[str, Any] = {}  # state -> the first subtask's decoder: its descriptor
    for sub in op.subtasks:
        if sub.managed_keyed is None:
            continue
        for dec in subtask_states(meta, op, sub).values():
            short = dec.meta.name.removeprefix(TIMER_PREFIX) if dec.timer else dec.meta.name
            if serializers is not None:
                value = dec.meta.serializers.get("VALUE_SERIALIZER")
                serializers.setdefault(f"{name}/{short}", (dec.key_node.cls, value.cls if value is not None else "<no serializer>"))
            why = getattr(dec, "unreadable", None) or (None if options is not None and options.raw_values else getattr(dec, "raw_error", None))
            seen = first.setdefault(dec.meta.name, dec)
            if why is None and seen is not dec and seen.meta != dec.meta:  # e.g. one subtask's snapshot damaged
                why = (f"operator {op.label}, state {dec.meta.name!r}: subtask {sub.index} holds other serializer snapshots "
                       "than the first subtask's: its rows would not make one table")
            if why is not None and refused is not None and not dec.timer:
                refused.setdefault(f"{name}/{short}", why)
            if seen is not dec:
                continue
            if dec.timer:
                key_type = getattr(dec, "key_type", None)  # a SQL key row of no fields is an empty struct, falsy
                om.timer_services[short] = TimerServiceDescriptor(
                    name=short, domain=short.partition("_")[0], key_type=arrow_type(dec.key_node) if key_type is None else key_type,
                    namespace_type=None if unit_namespace(dec.ns_node) else arrow_type(dec.ns_node))
            else:
                om.keyed_states[dec.meta.name] = state_descriptor(dec, name, ttl, unknown, options, flink_op=op)


def _operator_state_metadata(meta: FlinkMetadata, op: OperatorState, name: str, om: OperatorMetadata,
                             serializers: dict[str, tuple[str | None, str]] | None) -> None:
    headers = operator_state_headers(meta, op.operator_id)  # no element decoded
    if serializers is not None:
        for state, m in headers.items():
            if "VALUE_SERIALIZER" in m.serializers:
                serializers[f"{name}/{state}"] = (None, m.serializers["VALUE_SERIALIZER"].cls)
    types = operator_state_types(headers)
    for state, mode in operator_state_names(meta, op.operator_id).items():
        value_type, key_type = types[state]
        om.operator_states[state] = OperatorStateDescriptor(
            name=state, value_type=value_type, mode=_MODES[mode], key_type=key_type if mode == "BROADCAST" else None)  # type: ignore[arg-type]
