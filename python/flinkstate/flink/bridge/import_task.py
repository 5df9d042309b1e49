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
from flinkstate.core.errors import FlinkStateError
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
from flinkstate.flink.errors import CorruptFileError, KryoDecodeError, UnsupportedSerializerError
from flinkstate.flink.serde.serializers import arrow_type, key_hashing
from flinkstate.format.datafile import FileEntry
from flinkstate.format.schemas import state_schema, timer_schema
from flinkstate.format.writer import RangeFileWriter

__all__ = ["CHUNK_BYTES", "ImportRunner", "StateImported", "SubtaskImport", "SubtaskImported", "discard_files", "discard_state_files",
           "import_subtask", "run_local", "subtask_job_meta"]


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
    refused: dict[str, str] = field(default_factory=dict)  # "operator/state" -> why it was not imported (the others were)


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
    """Append one chunk's rows of every state (key groups checked against Flink's assignment) to its file. A state that
    cannot be imported (values no decoder reads and no record frames, a snapshot refused, a key whose hash flinkstate does
    not model, a value that does not decode) is left out and named in `out.refused`; the other states are imported."""
    meta, op = job.meta, job.flink_operator
    for dec in decoders.values():
        key = f"{job.operator}/{dec.meta.name.removeprefix(TIMER_PREFIX) if dec.timer else dec.meta.name}"
        if key in out.refused:
            continue
        why = _refusal(dec, job)
        if why is not None and any(m[:2] == (op.operator_id, dec.meta.name) for m in getattr(op.kryo, "misfits", ())):
            raise UnsupportedSerializerError(why)  # a class schema the user gave that the bytes do not fit: nothing is written
        if why is not None:
            out.refused[key] = why
            _drop(out, writers, dec.meta.name)
            continue
        if dec.meta.name not in writers:  # the first chunk: every state the header declares
            writers[dec.meta.name] = _open_state(job, out, dec)
        writer, st = writers[dec.meta.name]
        try:
            table = dec.table(job.raw_values)
        except FlinkStateError as e:
            if not isinstance(e, (UnsupportedSerializerError, CorruptFileError)) or not job.raw_values:
                raise  # asked to refuse undecodable states (raw_values=False): the import stops, naming it
            if _given_schema_misfits(e, op):
                raise  # a class schema the user gave that the bytes do not fit: the arguments are wrong, nothing is written
            out.refused[key] = str(e)
            _drop(out, writers, dec.meta.name)
            continue
        _verify(table, op, meta.path, dec.meta.name, dec.key_node)
        st.rows += table.num_rows
        rows = table if dec.timer else stored_rows(table, st.descriptor)  # type: ignore[arg-type]
        del table
        writer.write(rows.drop_columns(["key_group"]))  # the writer computes key groups from the keys


def _refusal(dec: Any, job: SubtaskImport) -> str | None:
    """Why a state is not imported before any of its rows is read, or None: its values cannot be read even as bytes, or
    its keys' key groups cannot be computed again (the root's files place keys by their Java hashCode)."""
    if getattr(dec, "unreadable", None) is not None and job.raw_values:
        return str(dec.unreadable)
    if key_hashing(dec.key_node) != "java":
        return (f"operator {job.flink_operator.label}, state {dec.meta.name!r}: its keys ({dec.key_node.cls}) hash with a "
                "hashCode flinkstate does not model, so a root could not place them in Flink's key groups; it is read "
                "in place (the savepoint) only")
    return None


def _drop(out: SubtaskImported, writers: dict[str, tuple[RangeFileWriter, StateImported]], name: str) -> None:
    """Forget a state this job began to write (its file is aborted): it is refused."""
    got = writers.pop(name, None)
    if got is not None:
        got[0].abort()
    out.as_bytes.pop(f"{out.operator}/{name}", None)


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
            discard_state_files(io, st.entries)


def discard_state_files(io: FileIO, entries: list[FileEntry]) -> None:
    """Delete files a job wrote that no checkpoint will reference."""
    for e in entries:
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


def _given_schema_misfits(e: FlinkStateError, op: Any) -> bool:
    """Whether e is a Kryo value that does not decode with a class schema the user gave (`--kryo-class`): an argument
    to correct, unlike a state no decoder reads by itself (left out and named)."""
    kryo = getattr(op, "kryo", None)
    if not isinstance(e, KryoDecodeError) or kryo is None:
        return False
    return kryo.schemas.origin.get(e.cls) == "user" or kryo.schemas.origin.get(e.declared) == "user"
