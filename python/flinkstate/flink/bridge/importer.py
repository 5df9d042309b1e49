"""Import a real Flink savepoint or retained checkpoint into a flinkstate root as one savepoint.

Every operator keeps the max parallelism Flink gave it (derived from its parallelism or set explicitly), so its
key groups are unchanged. Subtask by subtask (one keyed-state handle decoded at a time, so memory is bounded by the largest
subtask's state, not the job's), every keyed state is written as full files over that subtask's
key-group range, with key groups unchanged; timers, split/union/broadcast operator state and
coordinator bytes come along. Descriptors are mapped from the serializer snapshots. A savepoint does
not hold TTL durations: pass them per state (`ttl=`); a TTL state without one keeps its last-access
timestamps under a TTL that never expires. Everything is committed once: a failure leaves nothing.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from flinkstate.core.descriptors import OperatorStateDescriptor, TimerServiceDescriptor
from flinkstate.core.errors import CheckpointNotFoundError, InvalidArgumentError
from flinkstate.core.ttl import StateTtlConfig
from flinkstate.flink.bridge.checkpoint import load_flink_checkpoint
from flinkstate.flink.bridge.mapping import (
    ReadOptions,
    parse_ttl,
    state_descriptor,
    stored_rows,
    subtask_decoders,
    subtask_range,
)
from flinkstate.flink.bridge.source import chk_folders, is_flink_path
from flinkstate.flink.files.canonical import TIMER_PREFIX, _verify
from flinkstate.flink.files.operator_state import (
    operator_state_names,
    read_operator_state,
)
from flinkstate.flink.meta.names import operator_name
from flinkstate.flink.pyflink.coders import refuse_import
from flinkstate.flink.serde.serializers import TypeNode, arrow_type
from flinkstate.store.store import CheckpointStore

__all__ = ["ImportReport", "resolve_flink_path", "OPERATOR_ID_PROPERTY", "SERIALIZERS_PROPERTY", "import_savepoint", "node_from_json", "node_to_json"]

#: checkpoint property holding the Flink operator id (hex) of an imported operator, so export keeps it
OPERATOR_ID_PROPERTY = "flink.operator-id."
#: checkpoint property holding an imported operator's serializer snapshots (JSON), so export writes them back
SERIALIZERS_PROPERTY = "flink.serializers."


def node_to_json(n: TypeNode) -> dict[str, Any]:
    """A parsed serializer snapshot as JSON (kind, class, nested serializers, field names, and the bytes an export writes
    back: a Kryo/Avro payload, a table-runtime or unknown snapshot, base64)."""
    import base64

    d: dict[str, Any] = {"kind": n.kind, "cls": n.cls, "children": [node_to_json(c) for c in n.children], "names": list(n.names),
                         "legacy_row": n.legacy_row}
    for name in ("payload", "snapshot"):
        if getattr(n, name):
            d[name] = base64.b64encode(getattr(n, name)).decode("ascii")
    if n.params:
        d["params"] = list(n.params)
    if n.logical:
        d["logical"] = list(n.logical)
    if n.sql:
        d["sql"] = [t.to_json() for t in n.sql]  # the SQL types of a RowData's fields: a write encodes columns with them
    return d


def node_from_json(d: dict[str, Any]) -> TypeNode:
    """Inverse of `node_to_json`."""
    import base64

    from flinkstate.flink.serde.sqltypes import sql_type_from_json

    return TypeNode(d["kind"], d["cls"], tuple(node_from_json(c) for c in d["children"]), tuple(d["names"]), bool(d["legacy_row"]),
                    payload=base64.b64decode(d.get("payload", "")), logical=tuple(d.get("logical", ())),
                    snapshot=base64.b64decode(d.get("snapshot", "")), params=tuple(d.get("params", ())),
                    sql=tuple(sql_type_from_json(t) for t in d.get("sql", ())))


_MODES = {"SPLIT_DISTRIBUTE": "list", "UNION": "union", "BROADCAST": "broadcast"}


@dataclass
class ImportReport:
    """What an import wrote: the new checkpoint id, and per operator its states and entry counts."""

    checkpoint_id: int
    source: str
    entries: dict[str, dict[str, int]] = field(default_factory=dict)
    ttl_unknown: list[str] = field(default_factory=list)
    as_bytes: dict[str, str] = field(default_factory=dict)  # "operator/state" -> serializers whose values are kept as bytes

    @property
    def total(self) -> int:
        """All entries written (values, list elements, map entries, timers, operator-state elements)."""
        return sum(n for states in self.entries.values() for n in states.values())


def resolve_flink_path(path: str | os.PathLike[str], checkpoint_id: int | None = None) -> str:
    """The savepoint/checkpoint folder at path: itself when it holds `_metadata`, else its `chk-N` (N given, or the latest)."""
    path = os.fspath(path)
    if os.path.isfile(path) or os.path.isfile(os.path.join(path, "_metadata")):
        if checkpoint_id is not None:
            raise InvalidArgumentError(f"{path} is one savepoint/checkpoint; a Flink checkpoint id selects a chk-N of a job's checkpoint folder")
        return path
    found = chk_folders(path)
    if not found:
        raise CheckpointNotFoundError(f"{path}: no Flink _metadata here, and no chk-N folder holding one")
    if checkpoint_id is None:
        return found[max(found)]
    if checkpoint_id not in found:
        raise CheckpointNotFoundError(f"{path}: no retained Flink checkpoint {checkpoint_id} (retained: {sorted(found)})")
    return found[checkpoint_id]


def import_savepoint(
    flink_path: str | os.PathLike[str],
    root: str | os.PathLike[str],
    *,
    flink_checkpoint_id: int | None = None,
    ttl: Mapping[str, StateTtlConfig | int] | None = None,
    storage_options: dict[str, Any] | None = None,
    uids: Iterable[str] = (),
    raw_values: bool = True,
) -> ImportReport:
    """Write a Flink savepoint/checkpoint into root as one savepoint.

    flink_path: a folder with `_metadata`, the file, or a job's checkpoint folder (its chk-N with
    N = flink_checkpoint_id, default the latest). ttl maps "operator/state" (or "state") to a
    StateTtlConfig or a TTL in ms, for states Flink kept with TTL; the operator by uid or operator id. uids
    names the operators that Flink 1.x metadata records only by id (matched by Flink's hash of the uid).
    A uid, or a ttl key, matching no operator or TTL state is refused before anything is written.
    Values of serializers the decoders cannot type (Kryo, Avro, custom; the table runtime's RowData) are kept as their
    serialized bytes (`report.as_bytes` names them; export writes them back as they were); raw_values=False refuses
    such states with an UnsupportedSerializerError instead, as earlier releases did. Before: they stopped it unless kept as
    their serialized bytes (binary).
    """
    uids = tuple(uids)
    # the checkpoint's operators and state headers, with uids and ttl resolved and checked (names.resolve_options)
    ck = load_flink_checkpoint(resolve_flink_path(flink_path, flink_checkpoint_id), ttl=parse_ttl(ttl), uids=uids,
                               options=ReadOptions(raw_values=raw_values, sql_rows="bytes"))  # SQL rows stored as Flink wrote them
    meta, ttl = ck.meta, ck.ttl
    if is_flink_path(os.fspath(root), storage_options):
        raise InvalidArgumentError(f"{os.fspath(root)} is a Flink savepoint or checkpoint: import into a flinkstate root")
    store = CheckpointStore(root, storage_options)
    report = ImportReport(checkpoint_id=-1, source=meta.path)
    with store.begin(kind="savepoint") as w:
        if w.base is None:  # a new root: operators added later get the savepoint's default (the base's otherwise)
            w.set_max_parallelism(meta.default_max_parallelism)
        w.set_property("flink.source", meta.path)
        w.set_property("flink.checkpoint-id", str(meta.checkpoint_id))
        for op in meta.operators:
            name = operator_name(op, uids)
            op_states = operator_state_names(meta, op.operator_id)
            if op_states or op.coordinator_state is not None or any(subtask_range(s) is not None for s in op.subtasks):
                w.set_max_parallelism(op.max_parallelism, name)  # each operator keeps its own, as Flink gave it
            counts: dict[str, int] = {}
            covered: dict[str, tuple[Any, Any, list[tuple[int, int]]]] = {}
            serializers: dict[str, Any] = {}
            ranges: list[tuple[int, int]] = []
            for rng, decoders in subtask_decoders(meta, op):
                ranges.append(rng)
                for dec in decoders.values():
                    refuse_import(dec, op, meta.path)
                    serializers.setdefault("key", node_to_json(dec.key_node))
                    serializers.setdefault(dec.meta.name, {k: node_to_json(v) for k, v in dec.meta.serializers.items()})
                    table = dec.table(raw_values)
                    kept = dec.kept_as_bytes()
                    if kept:
                        report.as_bytes[f"{name}/{dec.meta.name}"] = kept
                    _verify(table, op, meta.path, dec.meta.name)
                    if dec.timer:
                        service = dec.meta.name.removeprefix(TIMER_PREFIX)  # event_user-timers, processing_window-timers, ...
                        tdesc = TimerServiceDescriptor(name=service, domain=service.partition("_")[0], key_type=arrow_type(dec.key_node),
                                                       namespace_type=None if dec.ns_node.kind == "void" else arrow_type(dec.ns_node))
                        w.put_timers(name, tdesc, table.drop_columns(["key_group"]), key_group_range=rng)
                        covered.setdefault(dec.meta.name, (tdesc, table.schema, []))[2].append(rng)
                    else:
                        desc = covered[dec.meta.name][0] if dec.meta.name in covered else state_descriptor(dec, name, ttl, report.ttl_unknown, flink_op=op)
                        rows = stored_rows(table, desc).drop_columns(["key_group"])
                        w.put_state(name, desc, rows, key_group_range=rng)
                        covered.setdefault(dec.meta.name, (desc, rows.schema, []))[2].append(rng)
                    counts[dec.meta.name.removeprefix(TIMER_PREFIX)] = counts.get(dec.meta.name.removeprefix(TIMER_PREFIX), 0) + table.num_rows
            for state, (desc, schema, done) in covered.items():  # states a subtask never registered: empty there
                for rng in ranges:
                    if rng not in done:
                        empty = schema.empty_table().drop_columns([c for c in ("key_group",) if c in schema.names])
                        if isinstance(desc, TimerServiceDescriptor):
                            w.put_timers(name, desc, empty, key_group_range=rng)
                        else:
                            w.put_state(name, desc, empty, key_group_range=rng)
            for state, mode in op_states.items():
                table = read_operator_state(meta, op.operator_id, state)
                value_type = table.schema.field("value").type
                key_type = table.schema.field("key").type if "key" in table.column_names else None
                w.put_operator_state(name, OperatorStateDescriptor(name=state, value_type=value_type, mode=_MODES[mode],
                                                                   key_type=key_type), table)
                counts[state] = table.num_rows
            if op.coordinator_state is not None:
                w.put_coordinator(name, pa.table({"record_type": ["state"], "subtask": pa.array([None], pa.int32()),
                                                   "seq": pa.array([0], pa.int64()), "payload": [op.coordinator_state]}))
            if counts or op.coordinator_state is not None or ranges:
                w.set_parallelism(name, op.parallelism)
                w.set_property(OPERATOR_ID_PROPERTY + name, op.operator_id)
                if serializers:
                    w.set_property(SERIALIZERS_PROPERTY + name, json.dumps(serializers, separators=(",", ":")))
                report.entries[name] = counts
        info = w.commit()
    report.checkpoint_id = info.checkpoint_id
    return report
