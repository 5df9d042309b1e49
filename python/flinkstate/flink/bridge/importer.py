"""Import a real Flink savepoint or retained checkpoint into a flinkstate root as one savepoint.

Every operator keeps the max parallelism Flink gave it (derived from its parallelism or set explicitly), so its
key groups are unchanged. One job per subtask handle (`import_task.import_subtask`: a handle decoded a chunk of key
groups at a time, so memory is bounded by a chunk, not by the subtask's or the job's state) writes every keyed state as full
files over that subtask's key-group range, with key groups unchanged; the jobs run here one after the other or as
Spark tasks (`pyspark_flinkstate.flink_jobs`), and the driver commits their files; timers, split/union/broadcast operator state and
coordinator bytes come along. Descriptors are mapped from the serializer snapshots. A savepoint does
not hold TTL durations: pass them per state (`ttl=`); a TTL state without one keeps its last-access
timestamps under a TTL that never expires. Everything is committed once: a failure leaves nothing.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from flinkstate.core.descriptors import OperatorStateDescriptor, TimerServiceDescriptor
from flinkstate.core.errors import CheckpointNotFoundError, InvalidArgumentError
from flinkstate.core.ttl import StateTtlConfig
from flinkstate.flink.bridge.checkpoint import load_flink_checkpoint
from flinkstate.flink.bridge.import_task import (
    ImportRunner,
    discard_state_files,
    SubtaskImport,
    SubtaskImported,
    run_local,
    subtask_job_meta,
)
from flinkstate.flink.bridge.mapping import (
    ReadOptions,
    kryo_specs,
    parse_ttl,
    subtask_range,
    subtask_states,
)
from flinkstate.flink.bridge.serializer_json import (
    IMPORT_CHECKPOINT_PROPERTY,
    OPERATOR_ID_PROPERTY,
    OPERATOR_NAME_PROPERTY,
    OPERATOR_STATE_PREFIX,
    SERIALIZERS_PROPERTY,
    SOURCE_RELEASE_PROPERTY,
    node_from_json,
    node_to_json,
)
from flinkstate.flink.bridge.source import chk_folders, is_flink_path
from flinkstate.flink.files.canonical import TIMER_PREFIX
from flinkstate.flink.files.operator_state import (
    operator_state_headers,
    operator_state_names,
    read_operator_state,
)
from flinkstate.flink.meta.metadata import CheckpointMetadata, OperatorState
from flinkstate.flink.meta.names import operator_name
from flinkstate.flink.meta.version import source_releases
from flinkstate.flink.pyflink.coders import refuse_import
from flinkstate.store.store import CheckpointStore

if TYPE_CHECKING:
    from flinkstate.store.writer import CheckpointWriter

__all__ = ["ImportPlan", "ImportReport", "resolve_flink_path", "OPERATOR_ID_PROPERTY", "SERIALIZERS_PROPERTY", "import_savepoint",
           "node_from_json", "node_to_json", "plan_import", "run_import"]


_MODES = {"SPLIT_DISTRIBUTE": "list", "UNION": "union", "BROADCAST": "broadcast"}


@dataclass
class ImportReport:
    """What an import wrote: the new checkpoint id, and per operator its states and entry counts."""

    checkpoint_id: int
    source: str
    entries: dict[str, dict[str, int]] = field(default_factory=dict)
    ttl_unknown: list[str] = field(default_factory=list)
    as_bytes: dict[str, str] = field(default_factory=dict)  # "operator/state" -> serializers whose values are kept as bytes
    refused: dict[str, str] = field(default_factory=dict)  # "operator/state" -> why it was not imported (the others were)

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


@dataclass(frozen=True)
class ImportPlan:
    """An import checked and ready to run (nothing written yet): the Flink checkpoint's metadata with the uids given and
    the TTLs resolved against it, and the root it goes into."""

    meta: CheckpointMetadata
    ttl: Mapping[str, StateTtlConfig | int]
    uids: tuple[str, ...]
    raw_values: bool
    root: str
    storage_options: dict[str, Any] | None = None


def plan_import(
    flink_path: str | os.PathLike[str],
    root: str | os.PathLike[str],
    *,
    flink_checkpoint_id: int | None = None,
    ttl: Mapping[str, StateTtlConfig | int] | None = None,
    storage_options: dict[str, Any] | None = None,
    uids: Iterable[str] = (),
    raw_values: bool = True,
    kryo_classes: str | Iterable[str] | Mapping[str, str] | None = None,
) -> ImportPlan:
    """Load and check an import (the arguments of `import_savepoint`): a uid or ttl key matching nothing, a root that is a
    Flink savepoint, a PyFlink operator (from its handles' headers) are refused here, before anything is written."""
    uids = tuple(uids)
    # the checkpoint's operators and state headers, with uids and ttl resolved and checked (names.resolve_options)
    options = ReadOptions(raw_values=raw_values, sql_rows="bytes", kryo_classes=kryo_specs(kryo_classes))  # SQL rows as Flink wrote them
    ck = load_flink_checkpoint(resolve_flink_path(flink_path, flink_checkpoint_id), ttl=parse_ttl(ttl), uids=uids, options=options)
    if is_flink_path(os.fspath(root), storage_options):
        raise InvalidArgumentError(f"{os.fspath(root)} is a Flink savepoint or checkpoint: import into a flinkstate root")
    for op in ck.meta.operators:
        first = next((s for s in op.subtasks if subtask_range(s) is not None), None)
        if first is not None:
            for dec in subtask_states(ck.meta, op, first).values():  # the header only
                refuse_import(dec, op, ck.meta.path)
    return ImportPlan(ck.meta, ck.ttl, uids, raw_values, os.fspath(root), storage_options)


def run_import(plan: ImportPlan, run: ImportRunner = run_local) -> ImportReport:
    """Run a planned import: one job per subtask handle with keyed state (`run` runs them: here one after the other,
    or as Spark tasks), then the driver registers their files, writes operator and coordinator state, and commits once.
    A failure leaves nothing committed."""
    meta = plan.meta
    store = CheckpointStore(plan.root, plan.storage_options)
    report = ImportReport(checkpoint_id=-1, source=meta.path)
    with store.begin(kind="savepoint") as w:
        if w.base is None:  # a new root: operators added later get the savepoint's default (the base's otherwise)
            w.set_max_parallelism(meta.default_max_parallelism)
        w.set_property("flink.source", meta.path)
        w.set_property("flink.checkpoint-id", str(meta.checkpoint_id))
        jobs: list[SubtaskImport] = []
        for op in meta.operators:
            name = operator_name(op, plan.uids)
            if operator_state_names(meta, op.operator_id) or op.coordinator_state is not None or any(subtask_range(s) is not None for s in op.subtasks):
                w.set_max_parallelism(op.max_parallelism, name)  # each operator keeps its own, as Flink gave it
            for i, sub in enumerate(op.subtasks):
                rng = subtask_range(sub)
                if rng is not None:
                    jobs.append(SubtaskImport(subtask_job_meta(meta, op, i), name, rng, w.io, w.checkpoint_id, w.kind,
                                              w.max_parallelism_of(name), len(jobs) + 1, plan.ttl, plan.raw_values))
        results = run(jobs) if jobs else []
        try:
            by_op: dict[str, list[SubtaskImported]] = {}
            for res in results:
                by_op.setdefault(res.operator, []).append(res)
            releases = ",".join(source_releases(meta))  # what the serializers' bytes mean (Kryo 2 in 1.x, Kryo 5 in 2.x)
            for op in meta.operators:
                _finish_operator(w, meta, op, operator_name(op, plan.uids), by_op.get(operator_name(op, plan.uids), []), report, releases)
            info = w.commit()
        except BaseException:
            w.adopt([e for res in results for st in res.states for e in st.entries])  # their files go with the abort
            raise
    report.checkpoint_id = info.checkpoint_id
    return report


def _finish_operator(w: CheckpointWriter, meta: CheckpointMetadata, op: OperatorState, name: str, results: list[SubtaskImported],
                     report: ImportReport, releases: str) -> None:
    """Register one operator's subtask files (in subtask order), empty files where a subtask lacks a state, then its
    operator states, coordinator state, parallelism, Flink operator id, the releases that wrote it, and the serializers
    of its keyed, timer and operator states (snapshot bytes included) that an export writes back."""
    counts: dict[str, int] = {}
    covered: dict[str, tuple[Any, pa.Schema, list[tuple[int, int]]]] = {}
    serializers: dict[str, Any] = {}
    ranges = [res.key_group_range for res in results]
    refused = {k: v for res in results for k, v in res.refused.items()}  # a state refused by one subtask: by all of them
    report.refused.update(refused)
    for res in results:
        rng = res.key_group_range
        for key, ser in res.serializers.items():
            serializers.setdefault(key, ser)
        report.as_bytes.update({k: v for k, v in res.as_bytes.items() if k not in refused})
        report.ttl_unknown.extend(u for u in res.ttl_unknown if u not in report.ttl_unknown)
        for st in res.states:
            if f"{name}/{st.flink_name.removeprefix(TIMER_PREFIX)}" in refused:
                discard_state_files(w.io, st.entries)  # written by a subtask that could read it: not committed
                continue
            desc = covered[st.flink_name][0] if st.flink_name in covered else st.descriptor
            if st.timers:
                w.add_timer_files(name, desc, st.entries, mode="full", key_group_range=rng)
            else:
                w.add_state_files(name, desc, st.entries, mode="full", key_group_range=rng)
            covered.setdefault(st.flink_name, (desc, st.schema, []))[2].append(rng)
            short = st.flink_name.removeprefix(TIMER_PREFIX)
            counts[short] = counts.get(short, 0) + st.rows
    for desc, schema, done in covered.values():  # states a subtask never registered: empty there
        for rng in ranges:
            if rng not in done:
                if isinstance(desc, TimerServiceDescriptor):
                    w.put_timers(name, desc, schema.empty_table(), key_group_range=rng)
                else:
                    w.put_state(name, desc, schema.empty_table(), key_group_range=rng)
    modes = operator_state_names(meta, op.operator_id)
    headers = operator_state_headers(meta, op.operator_id) if modes else {}
    for state, mode in modes.items():
        # the serializers Flink wrote it with (snapshot bytes included): export writes them back (a Tuple2 stays a Tuple2)
        serializers[OPERATOR_STATE_PREFIX + state] = {k: node_to_json(v) for k, v in headers[state].serializers.items()}
        table = read_operator_state(meta, op.operator_id, state)
        value_type = table.schema.field("value").type
        key_type = table.schema.field("key").type if "key" in table.column_names else None
        w.put_operator_state(name, OperatorStateDescriptor(name=state, value_type=value_type, mode=_MODES[mode], key_type=key_type), table)
        counts[state] = table.num_rows
    if op.coordinator_state is not None:
        w.put_coordinator(name, pa.table({"record_type": ["state"], "subtask": pa.array([None], pa.int32()),
                                           "seq": pa.array([0], pa.int64()), "payload": [op.coordinator_state]}))
    if counts or op.coordinator_state is not None or ranges:
        w.set_parallelism(name, op.parallelism)
        w.set_property(OPERATOR_ID_PROPERTY + name, op.operator_id)
        if op.name:
            w.set_property(OPERATOR_NAME_PROPERTY + name, op.name)
        w.set_property(SOURCE_RELEASE_PROPERTY + name, releases)
        w.set_property(IMPORT_CHECKPOINT_PROPERTY + name, str(w.checkpoint_id))
        if serializers:
            w.set_property(SERIALIZERS_PROPERTY + name, json.dumps(serializers, separators=(",", ":")))
        report.entries[name] = counts


def import_savepoint(
    flink_path: str | os.PathLike[str],
    root: str | os.PathLike[str],
    *,
    flink_checkpoint_id: int | None = None,
    ttl: Mapping[str, StateTtlConfig | int] | None = None,
    storage_options: dict[str, Any] | None = None,
    uids: Iterable[str] = (),
    raw_values: bool = True,
    kryo_classes: str | Iterable[str] | Mapping[str, str] | None = None,
) -> ImportReport:
    """Write a Flink savepoint/checkpoint into root as one savepoint, in this process (`plan_import`, then `run_import`
    with the subtask jobs one after the other; `pyspark_flinkstate.flink_jobs.import_savepoint` runs them as Spark tasks).

    flink_path: a folder with `_metadata`, the file, or a job's checkpoint folder (its chk-N with
    N = flink_checkpoint_id, default the latest). ttl maps "operator/state" (or "state") to a
    StateTtlConfig or a TTL in ms, for states Flink kept with TTL; the operator by uid or operator id. uids
    names the operators that Flink 1.x metadata records only by id (matched by Flink's hash of the uid).
    A uid, or a ttl key, matching no operator or TTL state is refused before anything is written.
    Kryo values (Flink 1.x's Kryo 2, 2.x's Kryo 5) are stored as typed columns: JDK types, collections and maps as they
    are, user classes by kryo_classes ("com.acme.Order=id:String,tags:List<String>;..."); export writes them with Kryo
    again, or for a Flink 2.x target with the serializers 2.x gives the same types (`serde.kryo.migrate`).
    Values of serializers the decoders cannot type (Avro, custom, Kryo classes without a schema; the table runtime's
    RowData) are kept as their serialized bytes (`report.as_bytes` names them; export writes them back as they were);
    raw_values=False refuses such states with an UnsupportedSerializerError instead, as earlier releases did. A state
    that cannot be imported even so (values not framed, a refused serializer, keys whose hash flinkstate does not model,
    values that do not decode) is left out and named in `report.refused`: every other state is imported.
    """
    return run_import(plan_import(flink_path, root, flink_checkpoint_id=flink_checkpoint_id, ttl=ttl, storage_options=storage_options,
                                  uids=uids, raw_values=raw_values, kryo_classes=kryo_classes))
