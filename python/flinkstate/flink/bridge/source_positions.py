"""Source positions as tables, and their rewrites: `source_splits` (one row per split per reader subtask) and
`source_enumerator` (the enumerator's splits and processed paths), on a Flink savepoint read in place and on a
flinkstate root (an imported one keeps the reader state as `SourceReaderState` bytes and the coordinator bytes).

A source operator is one with operator state `SourceReaderState` (FLIP-27 `SourceOperator`). Its kind is told by its
bytes (`flink.sources.codec`) or declared (`kinds`: operator -> "kafka" | "file" | "number_sequence"); a source of no
known kind is listed with `source_kind` "unknown" and its split bytes, never guessed. The legacy FlinkKafkaConsumer's union
state `topic-partition-offset-states` (told by that name and its serializer) is listed as "kafka_legacy", read in place on
a Flink savepoint (`starting_offset`: the next offset, the stored one + 1); it is not rewound. Rewrites (`rewind_root`,
`write_splits`, `write_enumerator`) decode, apply every change to readers and enumerator together, and commit one new
checkpoint with both; any change the state cannot take is a typed error and nothing is written. On a Flink savepoint,
`rewind_savepoint` imports it into a temporary root, rewinds there and exports a new savepoint for the release that
wrote it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from flinkstate.core.descriptors import OperatorStateDescriptor
from flinkstate.core.errors import FlinkStateError, InvalidArgumentError, OperatorNotFoundError
from flinkstate.flink.sources import (
    READER_STATE,
    Edit,
    SourceKind,
    SourceState,
    UnknownSourceError,
    apply_edits,
    decode_source,
    encode_source,
)
from flinkstate.flink.sources.codec import unframe_element
from flinkstate.flink.sources.edits import DropSplit, ForgetPath, MarkProcessed, RereadFile, SetOffset, SetSequence, AddPartition
from flinkstate.flink.sources.kafka import COMMITTED, EARLIEST, LATEST, NO_STOPPING_OFFSET
from flinkstate.flink.sources.kafka_legacy import LEGACY_STATE, SENTINELS, decode_element, is_legacy_serializer
from flinkstate.flink.sources.model import Split

__all__ = ["ENUMERATOR_SCHEMA", "SPLITS_SCHEMA", "load_source", "rewind_root", "rewind_savepoint", "source_enumerator", "source_operators",
           "legacy_elements", "source_splits", "source_summary", "write_enumerator", "write_splits"]

_SPLIT_FIELDS = [
    pa.field("split_id", pa.string()), pa.field("topic", pa.string()), pa.field("partition", pa.int32()),
    pa.field("starting_offset", pa.int64()), pa.field("starting_marker", pa.string()), pa.field("stopping_offset", pa.int64()),
    pa.field("stopping_marker", pa.string()), pa.field("path", pa.string()), pa.field("offset", pa.int64()), pa.field("length", pa.int64()),
    pa.field("modification_time", pa.int64()), pa.field("file_size", pa.int64()), pa.field("hosts", pa.list_(pa.string())),
    pa.field("reader_offset", pa.int64()), pa.field("records_to_skip", pa.int64()), pa.field("number_from", pa.int64()),
    pa.field("number_to", pa.int64()),
]
SPLITS_SCHEMA = pa.schema([pa.field("operator", pa.string()), pa.field("subtask", pa.int32()), pa.field("source_kind", pa.string()),
                           pa.field("split_version", pa.int32()), *_SPLIT_FIELDS, pa.field("split_bytes", pa.binary())])
ENUMERATOR_SCHEMA = pa.schema([pa.field("operator", pa.string()), pa.field("source_kind", pa.string()),
                               pa.field("coordinator_version", pa.int32()), pa.field("enumerator_version", pa.int32()),
                               pa.field("entry", pa.string()), pa.field("status", pa.string()), pa.field("subtask", pa.int32()),
                               *_SPLIT_FIELDS, pa.field("initial_discovery_finished", pa.bool_())])
_START = {EARLIEST: "earliest", LATEST: "latest", COMMITTED: "committed", NO_STOPPING_OFFSET: "migrated"}
_STOP = {LATEST: "latest", COMMITTED: "committed", NO_STOPPING_OFFSET: "none"}


def source_operators(ck: Any) -> list[str]:
    """The operators of a checkpoint that have a FLIP-27 source's reader state, or the legacy FlinkKafkaConsumer's offsets."""
    return sorted(name for name, om in ck.operators.items() if READER_STATE in om.operator_states or LEGACY_STATE in om.operator_states)


def _operator(ck: Any, operator: str) -> str:
    name = ck.name_of(operator) if hasattr(ck, "name_of") else operator
    if name not in ck.operators:
        ck.operator(operator)  # the typed error listing the operators
    if name not in source_operators(ck):
        raise OperatorNotFoundError(f"operator {operator!r} is not a FLIP-27 source (no {READER_STATE} state) nor a legacy "
                                    f"FlinkKafkaConsumer; sources here: {source_operators(ck) or 'none'}")
    return name


def _legacy(ck: Any, name: str) -> bool:
    return READER_STATE not in ck.operators[name].operator_states


def legacy_elements(ck: Any, operator: str) -> list[tuple[int, bytes]]:
    """The legacy FlinkKafkaConsumer's union-state elements (subtask, bytes) of a Flink savepoint read in place: each element
    as its handle's offsets delimit it (its Kryo-serialized KafkaTopicPartition cannot be read by the state's serializer
    here), after checking the state's serializer is the consumer's."""
    from flinkstate.flink._io import DataReader, snappy_unframe
    from flinkstate.flink.files.operator_state import operator_state_headers
    from flinkstate.flink.serde.serializers import read_operator_header

    name = _operator(ck, operator)
    meta = getattr(ck, "meta", None)
    if meta is None:
        raise UnknownSourceError(f"operator {operator!r}: the legacy FlinkKafkaConsumer's offsets are read from a Flink savepoint "
                                 f"in place (an import does not keep this Kryo-serialized state yet)")
    op = meta.operator(ck.uids[name])
    node = operator_state_headers(meta, op.operator_id)[LEGACY_STATE].serializers["VALUE_SERIALIZER"]
    if not is_legacy_serializer(node):
        raise UnknownSourceError(f"operator {operator!r}: state {LEGACY_STATE!r} is not of the legacy FlinkKafkaConsumer's serializer "
                                 f"(Tuple2 of KryoSerializer<KafkaTopicPartition> and Long): {node.cls}")
    out: list[tuple[int, bytes]] = []
    for sub in op.subtasks:
        h = sub.managed_operator
        if h is None or LEGACY_STATE not in h.states:
            continue
        data = h.stream.read(meta.directory)
        where = f"operator {operator!r} subtask {sub.index} state {LEGACY_STATE!r}"
        starts = sorted(int(o) for _, offs in h.states.values() for o in offs)
        compressed, _, _ = read_operator_header(DataReader(data, where=where), where, min(starts, default=len(data)))
        for off in (int(o) for o in h.states[LEGACY_STATE][1]):
            end = next((x for x in starts if x > off), len(data))
            raw = bytes(data[off:end])
            out.append((sub.index, bytes(snappy_unframe(raw, where)) if compressed else raw))
    return out


def _legacy_rows(ck: Any, name: str) -> list[dict[str, Any]]:
    rows = []
    for sub, data in legacy_elements(ck, name):
        e = decode_element(data, f"operator {name!r} subtask {sub} state {LEGACY_STATE!r}")
        marker = SENTINELS.get(e.offset)
        rows.append({"operator": name, "subtask": sub, "source_kind": "kafka_legacy", "split_id": f"{e.topic}-{e.partition}",
                     "topic": e.topic, "partition": e.partition, "starting_offset": None if marker else e.next_offset,
                     "starting_marker": marker, "split_bytes": data})
    return rows


def _raw(ck: Any, name: str) -> tuple[list[tuple[int, bytes]], bytes | None, tuple[int, ...]]:
    t = ck.scan_operator_state(name, READER_STATE).to_arrow()
    elements = list(zip(t.column("subtask").to_pylist(), t.column("value").to_pylist()))
    coordinator = None
    if ck.operators[name].has_coordinator:
        rows = ck.scan_coordinator(name).to_arrow().to_pylist()
        coordinator = next((r["payload"] for r in rows if r["record_type"] == "state"), None)
    parallelism = ck.operators[name].parallelism or 1
    return elements, coordinator, tuple(range(parallelism))


def load_source(ck: Any, operator: str, kind: SourceKind | None = None) -> SourceState:
    """One source operator's decoded state (kind declared, or told by its bytes: UnknownSourceError otherwise)."""
    name = _operator(ck, operator)
    if _legacy(ck, name):
        raise UnknownSourceError(f"operator {operator!r} is a legacy FlinkKafkaConsumer: its offsets read (sourceSplits) but are not "
                                 f"rewound here (import and export do not carry its Kryo-serialized state yet)")
    elements, coordinator, subtasks = _raw(ck, name)
    return decode_source(name, elements, coordinator, kind=kind, subtasks=subtasks)


def _split_row(s: Split) -> dict[str, Any]:
    row = {f.name: getattr(s, f.name) for f in _SPLIT_FIELDS if f.name != "hosts" and not f.name.endswith("_marker")}
    row["hosts"] = list(s.hosts) if s.kind == "file" else None
    if s.kind == "kafka":
        row["starting_marker"] = _START.get(s.starting_offset) if s.starting_offset is not None else "unknown"
        row["stopping_marker"] = _STOP.get(s.stopping_offset) if s.stopping_offset is not None else None
    return row


def _selected(ck: Any, operator: str | None) -> list[str]:
    return [_operator(ck, operator)] if operator is not None else source_operators(ck)


def source_splits(ck: Any, operator: str | None = None, kinds: Mapping[str, SourceKind] | None = None) -> pa.Table:
    """One row per split per reader subtask of every source operator (or one): the table `sourceSplits`."""
    rows: list[dict[str, Any]] = []
    for name in _selected(ck, operator):
        if _legacy(ck, name):
            rows += _legacy_rows(ck, name)
            continue
        elements, coordinator, subtasks = _raw(ck, name)
        try:
            state = decode_source(name, elements, coordinator, kind=(kinds or {}).get(name), subtasks=subtasks)
        except UnknownSourceError:
            for sub, data in elements:  # named as unknown, bytes kept
                version, body = unframe_element(data, f"operator {name!r} subtask {sub}")
                rows.append({"operator": name, "subtask": sub, "source_kind": "unknown", "split_version": version, "split_bytes": body})
            continue
        for rs, (_, data) in zip(state.splits, elements):
            rows.append({"operator": name, "subtask": rs.subtask, "source_kind": state.kind, "split_version": rs.version,
                         **_split_row(rs.split), "split_bytes": unframe_element(data, name)[1]})
    return pa.Table.from_pylist(rows, SPLITS_SCHEMA)


def source_enumerator(ck: Any, operator: str | None = None, kinds: Mapping[str, SourceKind] | None = None) -> pa.Table:
    """The enumerators' entries: splits (assigned / unassigned / pending) and processed paths: the table `sourceEnumerator`.
    A source of no known kind has none here (its coordinator bytes stay in the coordinator table)."""
    rows: list[dict[str, Any]] = []
    for name in _selected(ck, operator):
        if _legacy(ck, name):
            continue  # the legacy consumer has no enumerator
        try:
            state = load_source(ck, name, (kinds or {}).get(name))
        except UnknownSourceError:
            continue
        e = state.enumerator
        if e is None:
            continue
        base = {"operator": name, "source_kind": state.kind, "coordinator_version": e.coordinator_version,
                "enumerator_version": e.version, "initial_discovery_finished": e.initial_discovery_finished}
        for entry in e.entries:
            rows.append({**base, "entry": "split", "status": entry.status, "subtask": entry.subtask, **_split_row(entry.split)})
        for p in e.processed_paths:
            rows.append({**base, "entry": "processed_path", "path": p})
    return pa.Table.from_pylist(rows, ENUMERATOR_SCHEMA)


def source_summary(ck: Any, kinds: Mapping[str, SourceKind] | None = None) -> list[dict[str, Any]]:
    """Per source operator (for `describe`): its kind (or "unknown" and why), splits, and the enumerator's entries by status."""
    out = []
    for name in source_operators(ck):
        try:
            if _legacy(ck, name):
                out.append({"operator": name, "kind": "kafka_legacy", "splits": len(legacy_elements(ck, name)),
                            "subtasks": len({s for s, _ in legacy_elements(ck, name)})})
                continue
            state = load_source(ck, name, (kinds or {}).get(name))
        except FlinkStateError as e:  # a source that cannot be read stays with its own line: describe goes on
            out.append({"operator": name, "kind": "unknown", "why": f"{type(e).__name__}: {e}"})
            continue
        doc: dict[str, Any] = {"operator": name, "kind": state.kind, "splits": len(state.splits),
                               "subtasks": len({rs.subtask for rs in state.splits})}
        e = state.enumerator
        if e is not None:
            by: dict[str, int] = {}
            for entry in e.entries:
                by[entry.status] = by.get(entry.status, 0) + 1
            doc["enumerator"] = {"coordinator_version": e.coordinator_version, "version": e.version, "splits": by,
                                 "processed_paths": len(e.processed_paths)}
        out.append(doc)
    return out


def _commit(store: Any, changed: Mapping[str, SourceState], ck: Any) -> Any:
    """One new checkpoint of store with each changed source's reader state and coordinator state."""
    with store.begin() as w:
        for name, state in changed.items():
            elements, coordinator = encode_source(state)
            desc = ck.operators[name].operator_states[READER_STATE]
            table = pa.table({"subtask": pa.array([s for s, _ in elements], pa.int32()), "value": pa.array([b for _, b in elements], pa.binary())})
            w.put_operator_state(name, OperatorStateDescriptor(name=READER_STATE, value_type=desc.value_type, mode=desc.mode), table)
            if coordinator is not None:
                old = ck.scan_coordinator(name).to_arrow()
                payloads = [coordinator if r == "state" else p for r, p in zip(old.column("record_type").to_pylist(), old.column("payload").to_pylist())]
                w.put_coordinator(name, old.set_column(old.schema.get_field_index("payload"), "payload", pa.array(payloads, pa.binary())))
        return w.commit()


def _writable(store: Any) -> None:
    if not hasattr(store, "begin"):
        raise InvalidArgumentError(f"{store.root} is a Flink savepoint (read only): rewind it into a new savepoint "
                                   f"(`flinkstate rewind SRC DEST ...`, `rewind_savepoint`), or import it first")


def rewind_root(store: Any, edits: Mapping[str, Sequence[Edit]], *, kinds: Mapping[str, SourceKind] | None = None) -> Any:
    """Apply edits (operator -> edits) to the latest checkpoint of a flinkstate root as one new checkpoint; its info.
    Every edit is checked before anything is written (typed errors name the operator, partition or file)."""
    _writable(store)
    ck = store.checkpoint()
    changed = {}
    for operator, ops in edits.items():
        state = load_source(ck, operator, (kinds or {}).get(operator))
        changed[state.operator] = apply_edits(state, list(ops), parallelism=ck.operators[state.operator].parallelism)
    if not changed:
        raise InvalidArgumentError("no source edit given")
    return _commit(store, changed, ck)


def rewind_savepoint(src: str | os.PathLike[str], dest: str | os.PathLike[str], edits: Mapping[str, Sequence[Edit]], *,
                     kinds: Mapping[str, SourceKind] | None = None, flink_version: str | None = None, uids: Sequence[str] = ()) -> str:
    """A new Flink savepoint at dest: src's state with the edits applied (src is not changed). Imported into a temporary
    root, rewound there, exported for flink_version (default: the newest release of those that could have written src)."""
    from flinkstate.flink.bridge.importer import import_savepoint, resolve_flink_path
    from flinkstate.flink.bridge.source import FlinkSource
    from flinkstate.flink.bridge.store_export import export_savepoint
    from flinkstate.flink.write.savepoint_writer import TARGET_VERSIONS, check_destination
    from flinkstate.store.store import CheckpointStore

    check_destination(os.fspath(dest))
    src_ck = FlinkSource(resolve_flink_path(src), uids=uids).checkpoint()
    for operator, ops in edits.items():  # checked on the savepoint first: nothing is imported for a bad edit
        apply_edits(load_source(src_ck, operator, (kinds or {}).get(operator)), list(ops), parallelism=src_ck.operators[src_ck.name_of(operator)].parallelism)
    if flink_version is None:
        wrote = [v for v in src_ck.meta.flink_version.versions if v in TARGET_VERSIONS]
        flink_version = wrote[-1] if wrote else None
    tmp = tempfile.mkdtemp(prefix="flinkstate-rewind-")
    try:
        import_savepoint(src, tmp, uids=uids)
        store = CheckpointStore(tmp)
        rewind_root(store, {src_ck.name_of(op): ops for op, ops in edits.items()},
                    kinds={src_ck.name_of(op): k for op, k in (kinds or {}).items()})
        return export_savepoint(store, dest, **({"flink_version": flink_version} if flink_version else {}))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _kafka_offset_of(row: Mapping[str, Any]) -> int | str | None:
    if row.get("starting_marker") in ("earliest", "latest", "committed"):
        return row["starting_marker"]
    return row.get("starting_offset")


def _row_edits(state: SourceState, rows: Sequence[Mapping[str, Any]], delete: bool) -> list[Edit]:
    """The edits a written `sourceSplits` DataFrame means for one source: upsert by (subtask, split_id), or delete."""
    held = {(rs.subtask, rs.split.split_id): rs.split for rs in state.splits}
    out: list[Edit] = []
    for row in rows:
        sid, sub = row.get("split_id"), row.get("subtask")
        if sid is None:
            raise InvalidArgumentError(f"operator {state.operator!r}: a row without split_id")
        if delete:
            out.append(DropSplit(sid, sub))
            continue
        exists = any(k[1] == sid and (sub is None or k[0] == sub) for k in held)
        if state.kind == "kafka":
            offset = _kafka_offset_of(row)
            if offset is None:
                raise InvalidArgumentError(f"operator {state.operator!r} split {sid!r}: starting_offset (or starting_marker) is needed")
            topic, _, part = sid.rpartition("-")
            topic = row.get("topic") or topic
            partition = row.get("partition") if row.get("partition") is not None else int(part)
            out.append(SetOffset(topic, partition, offset) if exists else AddPartition(topic, partition, offset, sub))
        elif state.kind == "file":
            if not exists:
                raise InvalidArgumentError(f"operator {state.operator!r}: no reader holds file split {sid!r}: new file splits are not "
                                           f"written (forget the file's path in the enumerator to read it again)")
            path = next(s.path for k, s in held.items() if k[1] == sid)
            out.append(RereadFile(path or "", row.get("reader_offset") if row.get("reader_offset") not in (None, -1) else None,
                                  row.get("records_to_skip") or 0))
        else:
            if row.get("number_from") is None:
                raise InvalidArgumentError(f"operator {state.operator!r} split {sid!r}: number_from is needed")
            out.append(SetSequence(sid, row["number_from"]))
    return out


def write_splits(store: Any, table: pa.Table, *, delete: bool = False, kinds: Mapping[str, SourceKind] | None = None) -> Any:
    """The `sourceSplits` table written: rows upsert splits by (operator, subtask, split_id) (Kafka: a new partition is
    added; files: a split's reader position; sequences: number_from), or with delete drop them; enumerators follow."""
    return _write(store, table, kinds, lambda state, rows: _row_edits(state, rows, delete))


def write_enumerator(store: Any, table: pa.Table, *, delete: bool = False, kinds: Mapping[str, SourceKind] | None = None) -> Any:
    """The `sourceEnumerator` table written: `processed_path` rows are added (the file is skipped) or, with delete,
    forgotten (read again); `split` rows with delete drop unassigned or pending splits."""
    def edits(state: SourceState, rows: Sequence[Mapping[str, Any]]) -> list[Edit]:
        out: list[Edit] = []
        for row in rows:
            entry = row.get("entry") or ("processed_path" if row.get("split_id") is None else "split")
            if entry == "processed_path":
                if not row.get("path"):
                    raise InvalidArgumentError(f"operator {state.operator!r}: a processed_path row without path")
                out.append(ForgetPath(row["path"]) if delete else MarkProcessed(row["path"]))
            elif entry == "split" and delete:
                out.append(DropSplit(row.get("split_id") or "", None, enumerator_only=True))
            else:
                raise InvalidArgumentError(f"operator {state.operator!r}: enumerator rows of entry {entry!r} can only be deleted "
                                           f"(write sourceSplits to add or move a split)")
        return out

    return _write(store, table, kinds, edits)


def _write(store: Any, table: pa.Table, kinds: Mapping[str, SourceKind] | None, to_edits: Any) -> Any:
    _writable(store)
    if "operator" not in table.column_names:
        raise InvalidArgumentError(f"a source table write needs an operator column (columns: {table.column_names})")
    ck = store.checkpoint()
    by_op: dict[str, list[dict[str, Any]]] = {}
    for row in table.to_pylist():
        by_op.setdefault(row["operator"], []).append(row)
    changed = {}
    for operator, rows in by_op.items():
        state = load_source(ck, operator, (kinds or {}).get(operator))
        changed[state.operator] = apply_edits(state, to_edits(state, rows), parallelism=ck.operators[state.operator].parallelism)
    if not changed:
        raise InvalidArgumentError("no rows to write")
    return _commit(store, changed, ck)
