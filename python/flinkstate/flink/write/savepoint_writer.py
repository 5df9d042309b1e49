"""Write canonical Flink savepoints (`_metadata` + keyed and operator state files), the mirror of the readers.

A savepoint is written for one target Flink release (`flink_version`, default the newest): the
`_metadata` version that release writes (4 for 1.18-1.20, which records no operator names or uids;
5 for 2.0; 6 for 2.1-2.3). Everything else is the same bytes for all of them (keyed and operator
header version 6, serializer snapshots, the CheckpointProperties tail), checked against savepoints
each release wrote (flinkjobs/harness.py) and by each release restoring the export (tests). Releases
outside TARGET_VERSIONS are refused by name. Keyed state: one file per subtask with a KeyedBackendSerializationProxy
header and per-key-group streams (KeyGroupsSavepointStateHandle with RelativeFileStateHandle, so the
directory can be moved). The savepoint is written to a temporary folder and renamed into place, in steps that can
run apart (`write_keyed_subtask` per subtask from its key-group range's rows, then `write_metadata`): an export runs
the first as one Spark task per subtask (`flink.bridge.export_task`).
"""

from __future__ import annotations

import os
import struct
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from flinkstate.core.errors import FlinkStateError, InvalidArgumentError
from flinkstate.flink.files.canonical import TIMER_PREFIX, KeyedState
from flinkstate.flink.meta.metadata import MAGIC
from flinkstate.flink.serde._bin import concat
from flinkstate.flink.serde._vencode import column_encoder
from flinkstate.flink.serde.encode import (
    encode_utf,
    murmur3_128,
    write_state_meta,
    write_type,
)
from flinkstate.flink.serde.serializers import StateMeta
from flinkstate.flink.write.keyed_records import (
    ColumnValueError,
    StateRecords,
    frame_key_groups,
    framed_parts,
    state_records,
)
from flinkstate.flink.write.savepoint_folder import (
    KeyedFile,
    discard,
    publish,
    temp_folder,
    write_file,
)

__all__ = [
    "DEFAULT_FLINK_VERSION",
    "KeyedFileWriter",
    "TARGET_VERSIONS",
    "OperatorExport",
    "SavepointExistsError",
    "UnsupportedFlinkVersionError",
    "check_destination",
    "encode_state",
    "metadata_version_for",
    "subtask_ranges",
    "write_keyed_subtask",
    "write_metadata",
    "write_savepoint",
]

# Flink release -> the `_metadata` version it writes (and the newest it reads).
TARGET_VERSIONS = {"1.18": 4, "1.19": 4, "1.20": 4, "2.0": 5, "2.1": 6, "2.2": 6, "2.3": 6}
DEFAULT_FLINK_VERSION = "2.3"


def _savepoint_properties() -> bytes:
    """The java-serialized CheckpointProperties every exported `_metadata` ends with (the same 745 bytes in 1.18 to 2.3):
    package data read through importlib.resources, so an installed package finds it (tests/test_packaging.py)."""
    from importlib.resources import files

    return files("flinkstate.flink.write").joinpath("savepoint_properties.bin").read_bytes()


class SavepointExistsError(FlinkStateError, FileExistsError):
    """The destination already holds a savepoint (`_metadata`)."""


class UnsupportedFlinkVersionError(InvalidArgumentError):
    """A target Flink release that export cannot write for (named, with the ones it can)."""


def _older_than_1_18(line: str) -> bool:
    try:
        return tuple(int(x) for x in line.split(".")) < (1, 18)
    except ValueError:
        return False


def metadata_version_for(flink_version: str) -> int:
    """The `_metadata` version Flink `flink_version` ("1.20", "2.3.0", ...) restores; refused by name if not a target."""
    line = ".".join(str(flink_version).strip().split(".")[:2])
    if line not in TARGET_VERSIONS:
        raise UnsupportedFlinkVersionError(
            f"cannot write a savepoint for Flink {flink_version}: export targets Flink {', '.join(TARGET_VERSIONS)}"
            + (" (Flink supports Java 17 from 1.18; older releases are not tested here)" if _older_than_1_18(line) else "")
        )
    return TARGET_VERSIONS[line]


@dataclass
class OperatorExport:
    """One operator to write: uid, parallelism, keyed state and operator states (name -> (mode, table, meta))."""

    uid: str
    parallelism: int
    max_parallelism: int
    keyed: KeyedState | None = None
    operator_states: dict[str, tuple[str, pa.Table, StateMeta]] = field(default_factory=dict)
    name: str | None = None
    coordinator_state: bytes | None = None
    operator_id: str | None = None  # hex; default Flink's hash of the uid (an imported operator without uid keeps its id)
    source_releases: tuple[str, ...] = ()  # the Flink releases that may have written its state (what Kryo bytes mean); () unknown


def _ranges(p: int, maxp: int) -> list[tuple[int, int]]:
    return [((i * maxp + p - 1) // p, ((i + 1) * maxp - 1) // p) for i in range(p)]


def _state_records(name: str, meta: StateMeta, table: pa.Table, ks: KeyedState, maxp: int) -> StateRecords:
    """The sorted records (key bytes without the flag, value bytes) of one state, by key group (a StateRecords mapping)."""
    return state_records(meta, table, ks.key_type, maxp, f"state {name!r}")


def encode_state(op: OperatorExport, m: StateMeta, tables: dict[str, pa.Table]) -> StateRecords:
    """One state's records (`_state_records`); bad input (missing table or column, null key, a value its serializer cannot
    write) is an InvalidArgumentError naming operator, state, column and serializer."""
    where = f"operator {op.uid!r}, state {m.name!r}"
    if m.name not in tables:
        raise InvalidArgumentError(f"{where}: declared in the keyed state but no table was given")
    try:
        return _state_records(m.name, m, tables[m.name], op.keyed, op.max_parallelism)
    except ColumnValueError as e:
        raise InvalidArgumentError(f"{where}, {e}") from e
    except KeyError as e:
        raise InvalidArgumentError(f"{where}: missing column {e}; got columns {tables[m.name].column_names}") from e
    except (struct.error, TypeError, AttributeError, OverflowError, ValueError) as e:
        raise InvalidArgumentError(f"{where}: a value does not fit its Flink serializer: {e}") from e


def _keyed_header(op: OperatorExport, metas: list[StateMeta], compress: bool) -> bytes:
    """A keyed state file's header (KeyedBackendSerializationProxy: version 6, compression, key serializer, states)."""
    out = bytearray(struct.pack(">i?i", 6, compress, 2))
    write_type(out, op.keyed.key_type)
    out += struct.pack(">h", len(metas))
    for m in metas:
        write_state_meta(out, m)
    return bytes(out)


def _keyed_file(op: OperatorExport, kg_range: tuple[int, int], records: list[Mapping[int, list[tuple[bytes, bytes]]]],
                metas: list[StateMeta], compress: bool) -> tuple[bytes, list[int]]:
    """One subtask's keyed state file (header + key-group streams of kg_range) and each key group's offset (0: empty).
    records: per state, a StateRecords (or any key group -> sorted [(key, value)] mapping)."""
    return frame_key_groups([StateRecords.of(r) for r in records], kg_range, _keyed_header(op, metas, compress), compress)


class KeyedFileWriter:
    """One subtask's keyed-state file written a chunk of key groups at a time: the header, then per chunk (consecutive
    key-group ranges, in order) its states encoded and its key-group streams appended, their offsets recorded. Memory:
    one chunk's rows and bytes, not the subtask's. `close` returns the KeyedFile; `abort` removes the partial file."""

    def __init__(self, folder: str, op: OperatorExport, key_group_range: tuple[int, int], compression: bool = False) -> None:
        self.op, self.range, self.compression = op, (int(key_group_range[0]), int(key_group_range[1])), compression
        self.metas = list(op.keyed.meta.values())
        self.rel = uuid.uuid4().hex
        self.path = os.path.join(folder, self.rel)
        head = _keyed_header(op, self.metas, compression)
        self.file = open(self.path, "wb")
        self.file.write(head)
        self.size = len(head)
        self.offsets: list[int] = []
        self.next_kg = self.range[0]

    def write(self, kg_range: tuple[int, int], tables: dict[str, pa.Table]) -> None:
        """Append key groups kg_range (the next ones) from tables holding, per state and timer service, their rows there."""
        lo, hi = kg_range
        if lo != self.next_kg or not lo <= hi <= self.range[1]:
            raise InvalidArgumentError(f"operator {self.op.uid!r}: key groups {lo}..{hi} do not follow {self.next_kg - 1} "
                                       f"inside {self.range[0]}..{self.range[1]}")
        records = [encode_state(self.op, m, tables) for m in self.metas]
        for m, r in zip(self.metas, records):  # rows outside the chunk would be left out of the file silently
            if len(r.kgs) and (r.kgs[0] < lo or r.kgs[-1] > hi):
                raise InvalidArgumentError(f"operator {self.op.uid!r}, state {m.name!r}: rows of key groups outside {lo}..{hi}")
        parts, offsets = framed_parts(records, kg_range, b"", self.compression, base=self.size)
        self.file.writelines(parts)  # views of the records' bytes: written without joining them first
        self.size += sum(len(p) for p in parts)
        del records, parts
        self.offsets += offsets
        self.next_kg = hi + 1

    def close(self) -> KeyedFile:
        """Finish the file (every key group of the range written); its name, size and key-group offsets."""
        if self.next_kg != self.range[1] + 1:
            raise InvalidArgumentError(f"operator {self.op.uid!r}: key groups {self.next_kg}..{self.range[1]} were not written")
        self.file.close()
        return KeyedFile(self.rel, self.size, tuple(self.offsets))

    def abort(self) -> None:
        """Remove the partial file (the export's temporary folder goes too on a failure)."""
        self.file.close()
        try:
            os.remove(self.path)
        except FileNotFoundError:
            pass  # never written




def _operator_file(op: OperatorExport, index: int) -> tuple[bytes, dict[str, tuple[int, list[int]]]] | None:
    lists = {n: s for n, s in op.operator_states.items() if s[0] != "BROADCAST"}
    bcast = {n: s for n, s in op.operator_states.items() if s[0] == "BROADCAST"}
    out = bytearray(struct.pack(">i?h", 6, False, len(lists)))
    for _, (_, _, m) in lists.items():
        write_state_meta(out, m)
    out += struct.pack(">h", len(bcast))
    for _, (_, _, m) in bcast.items():
        write_state_meta(out, m)
    handles: dict[str, tuple[int, list[int]]] = {}
    modes = {"SPLIT_DISTRIBUTE": 0, "UNION": 1, "BROADCAST": 2}
    for name, (mode, table, m) in op.operator_states.items():  # this subtask's elements, encoded at once
        ctx = f"operator {op.uid}, state {name!r}"
        rows = pa.array(np.flatnonzero(table.column("subtask").to_numpy() % op.parallelism == index))
        values = column_encoder(m.serializers["VALUE_SERIALIZER"], ctx)(table.column("value").take(rows).combine_chunks())
        if mode == "BROADCAST":
            keys = column_encoder(m.serializers["KEY_SERIALIZER"], ctx)(table.column("key").take(rows).combine_chunks())
            offs = [len(out)]
            out += struct.pack(">i", len(rows))
            out += concat([keys, values]).as_var()[1].tobytes()
        else:
            at, data = values.as_var()
            offs = (len(out) + at[:-1]).tolist()
            out += data.tobytes()
        handles[name] = (modes[mode], offs)
    return bytes(out), handles


def _stream(rel: str, size: int) -> bytes:
    return b"\x06" + encode_utf(rel) + struct.pack(">q", size)


def check_destination(dest: str) -> str:
    """The absolute dest, if a savepoint may be written there (a new or empty folder); SavepointExistsError otherwise."""
    dest = os.path.abspath(dest)
    if os.path.exists(os.path.join(dest, "_metadata")):
        raise SavepointExistsError(f"{dest} already holds a savepoint (_metadata); choose an empty destination")
    if os.path.isdir(dest) and os.listdir(dest):
        raise SavepointExistsError(f"{dest} is not empty; choose an empty destination")
    return dest


def subtask_ranges(parallelism: int, max_parallelism: int) -> list[tuple[int, int]]:
    """The key-group range of each subtask, as Flink assigns them (KeyGroupRangeAssignment)."""
    return _ranges(parallelism, max_parallelism)


def write_keyed_subtask(folder: str, op: OperatorExport, key_group_range: tuple[int, int], tables: dict[str, pa.Table],
                        compression: bool = False) -> KeyedFile:
    """Encode one subtask's keyed state and write its file into the savepoint folder: tables hold, per state and per
    timer service (`_timer_state/<service>`) of op.keyed.meta, the rows of key_group_range only (op.keyed's own
    tables are not read). Memory: that range's rows and their encoded bytes."""
    w = KeyedFileWriter(folder, op, key_group_range, compression)
    try:
        w.write(key_group_range, tables)
        return w.close()
    except BaseException:
        w.abort()
        raise


def _write_keyed(folder: str, op: OperatorExport, key_group_range: tuple[int, int],
                 records: list[Mapping[int, list[tuple[bytes, bytes]]]], metas: list[StateMeta], compression: bool) -> KeyedFile:
    data, offsets = _keyed_file(op, key_group_range, records, metas, compression)
    rel, size = write_file(folder, data)
    return KeyedFile(rel, size, tuple(offsets))


def write_metadata(folder: str, operators: list[OperatorExport], keyed_files: Mapping[tuple[str, int], KeyedFile], *,
                   checkpoint_id: int = 1, flink_version: str = DEFAULT_FLINK_VERSION) -> None:
    """Write each operator's operator-state files and the savepoint's `_metadata` into folder; keyed_files holds the
    keyed-state file of every subtask (operator uid, subtask index) of an operator with keyed state."""
    version = metadata_version_for(flink_version)
    meta = bytearray(struct.pack(">iiqii", MAGIC, version, checkpoint_id, 0, len(operators)))
    for op in operators:
        h = bytes.fromhex(op.operator_id) if op.operator_id else murmur3_128(op.uid.encode("utf-8"))
        if version >= 5:  # 1.x metadata has no names or uids: Flink finds operators by the id hashed from the uid
            meta += encode_utf(op.name or "") + encode_utf(op.uid)
        meta += h
        meta += struct.pack(">ii", op.parallelism, op.max_parallelism)
        if op.coordinator_state is not None:
            meta += b"\x01" + encode_utf(f"coordinator-{op.uid}") + struct.pack(">i", len(op.coordinator_state)) + op.coordinator_state
        else:
            meta += b"\x00"
        meta += struct.pack(">i", op.parallelism)
        for i, rng in enumerate(_ranges(op.parallelism, op.max_parallelism)):
            meta += struct.pack(">i", i)
            if op.operator_states:
                data, handles = _operator_file(op, i)
                rel, size = write_file(folder, data)
                meta += struct.pack(">ib", 1, 4) + struct.pack(">i", len(handles))
                for name, (mode, offs) in handles.items():
                    meta += encode_utf(name) + struct.pack(">bi", mode, len(offs)) + np.asarray(offs, ">i8").tobytes()
                meta += _stream(rel, size)
            else:
                meta += struct.pack(">i", 0)
            meta += struct.pack(">i", 0)
            if op.keyed is not None:
                kf = keyed_files[(op.uid, i)]
                meta += struct.pack(">bii", 7, rng[0], len(kf.offsets)) + np.asarray(kf.offsets, ">i8").tobytes()
                meta += _stream(kf.rel, kf.size)
            else:
                meta += b"\x00"
            meta += b"\x00" + struct.pack(">ii", 0, 0)
    meta += _savepoint_properties()
    write_file(folder, bytes(meta), "_metadata")


def write_savepoint(dest: str, operators: list[OperatorExport], *, checkpoint_id: int = 1, compression: bool = False,
                    flink_version: str = DEFAULT_FLINK_VERSION) -> str:
    """Write a canonical savepoint directory at dest for Flink `flink_version` (refused if dest holds `_metadata`); returns dest.

    The same steps as an export run as Spark tasks: each subtask's keyed file (`write_keyed_subtask`; here every state
    is encoded once, before any file is written, and cut by subtask), then `write_metadata`, in a temporary folder
    renamed into place (nothing at dest on a failure)."""
    metadata_version_for(flink_version)
    dest = check_destination(dest)
    encoded = []
    for op in operators:  # type errors surface before any file is written
        if op.keyed is not None:
            metas = list(op.keyed.meta.values())
            tables = {**op.keyed.states, **{TIMER_PREFIX + k: v for k, v in op.keyed.timers.items()}}
            encoded.append((op, metas, [encode_state(op, m, tables) for m in metas]))
    folder = temp_folder(dest)
    try:
        keyed_files: dict[tuple[str, int], KeyedFile] = {}
        for op, metas, records in encoded:
            for i, rng in enumerate(_ranges(op.parallelism, op.max_parallelism)):
                keyed_files[(op.uid, i)] = _write_keyed(folder, op, rng, records, metas, compression)
        write_metadata(folder, operators, keyed_files, checkpoint_id=checkpoint_id, flink_version=flink_version)
        return publish(folder, dest)
    except BaseException:
        discard(folder)
        raise
