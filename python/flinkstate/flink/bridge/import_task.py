"""One Flink subtask of an import: decode its keyed-state handle, write its key-group range's data files, commit nothing.

The driver (`importer.run_import`) plans one `SubtaskImport` per subtask handle holding keyed state and commits
every file the jobs return in one checkpoint. A job is picklable (a Spark task): it carries the checkpoint's
metadata cut down to its own operator and subtask, the root's FileIO and the checkpoint it writes for. A job decodes
its subtask a chunk of key groups at a time (about `chunk_bytes` of the file) and appends each chunk's rows to one file
per state over the subtask's range: memory per job is one chunk's bytes and rows, never a subtask's or an operator's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from flinkstate.core.descriptors import KeyedStateDescriptor, TimerServiceDescriptor
from flinkstate.core.io import FileIO
from flinkstate.core.ttl import StateTtlConfig
from flinkstate.flink.bridge.mapping import (
    decode_subtask_chunks,
    state_descriptor,
    stored_rows,
)
from flinkstate.flink.bridge.serializer_json import node_to_json
from flinkstate.flink.files.canonical import TIMER_PREFIX, _verify
from flinkstate.flink.meta.metadata import CheckpointMetadata, OperatorState
from flinkstate.flink.pyflink.coders import refuse_import
from flinkstate.flink.serde.serializers import arrow_type
from flinkstate.format.datafile import FileEntry
from flinkstate.format.schemas import state_schema, timer_schema
from flinkstate.format.writer import RangeFileWriter

__all__ = ["CHUNK_BYTES", "ImportRunner", "StateImported", "SubtaskImport", "SubtaskImported", "discard_files", "import_subtask", "run_local", "subtask_job_meta"]


CHUNK_BYTES = 8 << 20


@dataclass(frozen=True)
class SubtaskImport:
    """One subtask handle of one operator to import (picklable: a Spark task).

    meta holds only this operator with only this subtask (`subtask_job_meta`), so a job does not carry the whole
    job's handles; operator is the flinkstate name the operator gets (its uid, else its id).
    """

    meta: CheckpointMetadata
    operator: str
    key_group_range: tuple[int, int]
    io: FileIO
    checkpoint_id: int
    checkpoint_kind: str
    max_parallelism: int
    seq: int
    ttl: Mapping[str, StateTtlConfig | int] = field(default_factory=dict)
    raw_values: bool = True
    chunk_bytes: int = CHUNK_BYTES  # key groups decoded at a time: about this many bytes of the subtask's file

    @property
    def flink_operator(self) -> OperatorState:
        """The Flink operator (with this job's subtask only)."""
        return self.meta.operators[0]


@dataclass
class StateImported:
    """One keyed state or timer service of a subtask, written: its descriptor, files and entries (timers: a timer service)."""

    flink_name: str  # Flink's name (timer services `_timer_state/<service>`)
    descriptor: KeyedStateDescriptor | TimerServiceDescriptor
    schema: pa.Schema  # the rows' schema without key_group: a range without this state gets an empty file of it
    entries: list[FileEntry]
    rows: int

    @property
    def timers(self) -> bool:
        """Whether this is a timer service."""
        return isinstance(self.descriptor, TimerServiceDescriptor)


@dataclass
class SubtaskImported:
    """What one subtask job wrote (nothing committed): per state its files, plus serializers and what was kept as bytes."""

    operator: str
    key_group_range: tuple[int, int]
    states: list[StateImported] = field(default_factory=list)
    serializers: dict[str, Any] = field(default_factory=dict)  # "key" and Flink state name -> serializer snapshots as JSON
    as_bytes: dict[str, str] = field(default_factory=dict)  # "operator/state" -> serializers whose values are kept as bytes
    ttl_unknown: list[str] = field(default_factory=list)


ImportRunner = Callable[[list[SubtaskImport]], list[SubtaskImported]]


def subtask_job_meta(meta: CheckpointMetadata, op: OperatorState, index: int) -> CheckpointMetadata:
    """meta with only operator op, and of it only subtask `index` (no coordinator bytes): what one job needs to decode."""
    sub = op.subtasks[index]
    return dataclasses.replace(meta, operators=[dataclasses.replace(op, subtasks=[sub], coordinator_state=None)])


def import_subtask(job: SubtaskImport) -> SubtaskImported:
    """Decode the job's subtask handle and write every keyed state and timer service of it as full files over its
    key-group range (key groups unchanged, checked against Flink's assignment); returns the files, commits nothing."""
    out = SubtaskImported(job.operator, job.key_group_range)
    try:
        _write_subtask(job, out)
    except BaseException:
        discard_files(job.io, [out])  # this job's own files: a retried or failed job leaves none behind
        raise
    return out


def _write_subtask(job: SubtaskImport, out: SubtaskImported) -> None:
    """Decode the subtask a chunk of key groups at a time (`decode_subtask_chunks`) and append each chunk's rows of every
    state to that state's file over the subtask's range (`RangeFileWriter`): memory holds one chunk, not the subtask."""
    meta, op = job.meta, job.flink_operator
    writers: dict[str, tuple[RangeFileWriter, StateImported]] = {}
    try:
        for _, decoders in decode_subtask_chunks(meta, op, op.subtasks[0], job.chunk_bytes):
            _write_chunk(job, out, decoders, writers)
            del decoders  # this chunk's rows: not held while the next chunk decodes
            if sum(w.pending_bytes for w, _ in writers.values()) > job.chunk_bytes:
                for w, _ in writers.values():  # rows held for full row groups: at most about a chunk's
                    w.flush()
        for writer, st in writers.values():
            st.entries = writer.close()
            out.states.append(st)
    except BaseException:
        for writer, st in writers.values():
            if st not in out.states:
                writer.abort()
        raise


def _write_chunk(job: SubtaskImport, out: SubtaskImported, decoders: dict[str, Any],
                 writers: dict[str, tuple[RangeFileWriter, StateImported]]) -> None:
    """Append one chunk's rows of every state (key groups checked against Flink's assignment) to its file."""
    meta, op = job.meta, job.flink_operator
    for dec in decoders.values():
        if dec.meta.name not in writers:  # the first chunk: every state the header declares
            writers[dec.meta.name] = _open_state(job, out, dec)
        writer, st = writers[dec.meta.name]
        table = dec.table(job.raw_values)
        _verify(table, op, meta.path, dec.meta.name)
        st.rows += table.num_rows
        rows = table if dec.timer else stored_rows(table, st.descriptor)  # type: ignore[arg-type]
        del table
        writer.write(rows.drop_columns(["key_group"]))  # the writer computes key groups from the keys


def _open_state(job: SubtaskImport, out: SubtaskImported, dec: Any) -> tuple[RangeFileWriter, StateImported]:
    """A state's file writer over the job's range and its report (descriptor, serializers, what is kept as bytes),
    from its decoder's serializers, before any row."""
    op, name = job.flink_operator, job.operator
    refuse_import(dec, op, job.meta.path)
    out.serializers.setdefault("key", node_to_json(dec.key_node))
    out.serializers.setdefault(dec.meta.name, {k: node_to_json(v) for k, v in dec.meta.serializers.items()})
    kept = dec.kept_as_bytes()
    if kept:
        out.as_bytes[f"{name}/{dec.meta.name}"] = kept
    desc: KeyedStateDescriptor | TimerServiceDescriptor
    if dec.timer:
        service = dec.meta.name.removeprefix(TIMER_PREFIX)  # event_user-timers, processing_window-timers, ...
        desc = TimerServiceDescriptor(name=service, domain=service.partition("_")[0], key_type=arrow_type(dec.key_node),
                                      namespace_type=None if dec.ns_node.kind == "void" else arrow_type(dec.ns_node))
        schema = _without_key_group(timer_schema(desc))
    else:
        desc = state_descriptor(dec, name, job.ttl, out.ttl_unknown, flink_op=op)
        schema = _without_key_group(state_schema(desc))
    writer = RangeFileWriter(job.io, name, desc, checkpoint_id=job.checkpoint_id, checkpoint_kind=job.checkpoint_kind,
                             max_parallelism=job.max_parallelism, key_group_range=job.key_group_range, seq=job.seq)
    return writer, StateImported(dec.meta.name, desc, schema, [], 0)


def _without_key_group(schema: pa.Schema) -> pa.Schema:
    return schema.remove(schema.get_field_index("key_group")) if "key_group" in schema.names else schema


def discard_files(io: FileIO, results: list[SubtaskImported]) -> None:
    """Delete the files jobs wrote (a failed import: nothing references them)."""
    for res in results:
        for st in res.states:
            for e in st.entries:
                try:
                    io.delete(e.path)
                except OSError:
                    continue  # left for collect_orphans: no checkpoint references it


def run_local(jobs: list[SubtaskImport]) -> list[SubtaskImported]:
    """Run the subtask jobs one after the other in this process (one chunk of a subtask in memory at a time); a failure
    deletes the files of the jobs done before it."""
    done: list[SubtaskImported] = []
    try:
        for j in jobs:
            done.append(import_subtask(j))
    except BaseException:
        if jobs:
            discard_files(jobs[0].io, done)
        raise
    return done
