"""Parse a Flink checkpoint/savepoint `_metadata` file (format versions 3 to 6).

Layout: Flink's `Checkpoints`, `MetadataV2V3SerializerBase` and `MetadataV3..V6Serializer`.
Handles this decoder reads: inline ByteStreamStateHandle, FileStateHandle, RelativeFileStateHandle,
KeyGroupsStateHandle (V1, V2 and savepoint) and OperatorStreamStateHandle. RocksDB incremental
handles are parsed but refused when read; changelog handles, file-merging segments and unaligned
channel state are refused with UnsupportedFlinkFormatError naming them.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from flinkstate.errors import OperatorNotFoundError
from flinkstate.flink._io import DataReader
from flinkstate.flink.encode import murmur3_128
from flinkstate.flink.errors import CorruptFileError, UnsupportedFlinkFormatError
from flinkstate.flink.version import FlinkVersionGuess, guess_flink_version

__all__ = [
    "MAGIC",
    "CheckpointMetadata",
    "KeyGroupsHandle",
    "OperatorState",
    "OperatorStateHandle",
    "StreamHandle",
    "SubtaskState",
    "UnsupportedKeyedHandle",
    "parse_metadata",
    "read_metadata",
]

MAGIC = 0x4960672D
_MASTER_MAGIC = 0xC96B1696 - (1 << 32)
SUPPORTED_VERSIONS = (3, 4, 5, 6)

# StreamStateHandle / KeyedStateHandle type bytes (MetadataV2V3SerializerBase).
_NULL, _BYTES, _FILE, _KG, _OP, _INCR, _RELATIVE, _SP_KG = 0, 1, 2, 3, 4, 5, 6, 7
_INCR_V2, _KG_V2 = 11, 12
_CHANGELOG = {8: "ChangelogStateBackendHandle", 9: "ChangelogStateHandleStreamImpl", 10: "InMemoryChangelogStateHandle",
              13: "ChangelogStateBackendHandle (v2)", 14: "ChangelogStateHandleStreamImpl (v2)"}
_STREAM_KINDS = {15: "SegmentFileStateHandle (file-merging)", 16: "EmptyFileMergingOperatorStreamStateHandle",
                 17: "FileMergingOperatorStreamStateHandle", 18: "EmptySegmentFileStateHandle (file-merging)"}
MODES = ("SPLIT_DISTRIBUTE", "UNION", "BROADCAST")
_LOG = logging.getLogger(__name__)
_RELOCATED: set[str] = set()


@dataclass(frozen=True)
class StreamHandle:
    """A stream of bytes: inline in `_metadata` ('inline'), an absolute file ('file') or relative to the directory ('relative')."""

    kind: str
    path: str
    size: int
    data: bytes | None = None

    def location(self, base_dir: str) -> str:
        """The file path to read (inline handles return their recorded name).

        An absolute path that no longer exists (a checkpoint copied away from where Flink wrote
        it) is resolved against the copied layout: `<job dir>/shared/`, `<job dir>/taskowned/`
        or the checkpoint's own `chk-N/` directory, when the file is there.
        """
        if self.kind == "relative":
            return os.path.join(base_dir, self.path)
        path = self.path
        if path.startswith("file://"):
            path = path[7:]
        elif path.startswith("file:"):
            path = path[5:]
        if self.kind == "file" and base_dir and not os.path.exists(path):
            parent, name = os.path.split(path)
            folder = os.path.basename(parent)
            base = os.path.normpath(base_dir)
            moved = os.path.join(base, name) if folder == os.path.basename(base) else os.path.join(os.path.dirname(base), folder, name)
            if folder in ("shared", "taskowned", os.path.basename(base)) and os.path.exists(moved):
                if base not in _RELOCATED:
                    _RELOCATED.add(base)
                    _LOG.info("%s: state files recorded under %s are read from the copied checkpoint layout", base, os.path.dirname(parent))
                return moved
        return path

    def read(self, base_dir: str) -> bytes:
        """The whole stream's bytes; a missing file is a CorruptFileError naming the handle."""
        if self.data is not None:
            return self.data
        path = self.location(base_dir)
        try:
            with open(path, "rb") as f:
                return f.read()
        except FileNotFoundError as e:
            raise CorruptFileError(f"state file {path} of {self.kind} handle {self.path!r} is missing") from e


@dataclass(frozen=True)
class KeyGroupsHandle:
    """Keyed state of one subtask: key groups [start, start+len(offsets)) with per-key-group offsets (0 = none)."""

    kind: str
    start: int
    offsets: np.ndarray
    stream: StreamHandle

    @property
    def end(self) -> int:
        """The last key group of the range (inclusive)."""
        return self.start + len(self.offsets) - 1


@dataclass(frozen=True)
class UnsupportedKeyedHandle:
    """A keyed handle that is parsed but not decoded (RocksDB native/incremental), with its files."""

    kind: str
    start: int
    count: int
    checkpoint_id: int = -1
    meta_stream: StreamHandle | None = None
    shared: tuple[tuple[str, StreamHandle | None], ...] = ()
    private: tuple[tuple[str, StreamHandle | None], ...] = ()


@dataclass(frozen=True)
class OperatorStateHandle:
    """Operator state of one subtask: per state name its distribution mode and element offsets."""

    states: dict[str, tuple[str, np.ndarray]]
    stream: StreamHandle


@dataclass(frozen=True)
class SubtaskState:
    """What one subtask of an operator checkpointed."""

    index: int
    managed_operator: OperatorStateHandle | None = None
    raw_operator: OperatorStateHandle | None = None
    managed_keyed: KeyGroupsHandle | UnsupportedKeyedHandle | None = None
    raw_keyed: KeyGroupsHandle | UnsupportedKeyedHandle | None = None


@dataclass(frozen=True)
class OperatorState:
    """One operator of the checkpoint: identity, parallelism and its subtasks' state handles."""

    name: str | None
    uid: str | None
    operator_id: str
    parallelism: int
    max_parallelism: int
    coordinator_state: bytes | None
    subtasks: list[SubtaskState] = field(default_factory=list)
    finished: bool = False

    @property
    def label(self) -> str:
        """The operator's uid, else its name, else its id (for messages)."""
        return self.uid or self.name or self.operator_id


@dataclass(frozen=True)
class CheckpointMetadata:
    """A parsed `_metadata`: version, checkpoint id, master states and operators."""

    path: str
    version: int
    checkpoint_id: int
    master_states: list[tuple[str, int, bytes]]
    operators: list[OperatorState]
    options: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)  # read options (PyFlink declarations)

    @property
    def directory(self) -> str:
        """The directory relative file handles are resolved against."""
        return os.path.dirname(self.path)

    @cached_property
    def flink_version(self) -> FlinkVersionGuess:
        """Which Flink release(s) wrote this, and the evidence (metadata version, RocksDB files, operator-state layout)."""
        return guess_flink_version(self)

    def operator(self, uid_or_name: str) -> OperatorState:
        """The operator with this uid (or name, or hex operator id)."""
        for op in self.operators:
            if uid_or_name in (op.uid, op.operator_id):
                return op
        for op in self.operators:
            if op.name == uid_or_name:
                return op
        # Metadata before v5 (Flink 1.x) records no uid: match the operator id Flink derives from it.
        hashed = murmur3_128(uid_or_name.encode("utf-8")).hex()
        for op in self.operators:
            if op.uid is None and op.operator_id == hashed:
                return op
        known = ", ".join(op.label for op in self.operators)
        raise OperatorNotFoundError(f"operator {uid_or_name!r} is not in {self.path} (operators: {known})")


def read_metadata(path: str) -> CheckpointMetadata:
    """Parse the `_metadata` file at path (or inside the directory path)."""
    if os.path.isdir(path):
        path = os.path.join(path, "_metadata")
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError as e:
        raise CorruptFileError(f"{path}: no _metadata file") from e
    return parse_metadata(data, path)


def parse_metadata(data: bytes, path: str = "_metadata") -> CheckpointMetadata:
    """Parse `_metadata` bytes; path names the file in error messages and anchors relative handles."""
    r = DataReader(data, where=path)
    if r.i32() & 0xFFFFFFFF != MAGIC:
        raise CorruptFileError(f"{path}: not a Flink _metadata file (bad magic number)")
    version = r.i32()
    if version not in SUPPORTED_VERSIONS:
        raise UnsupportedFlinkFormatError(f"{path}: Flink metadata version {version} is not supported (versions 3 to 6 are)")
    checkpoint_id = r.i64()
    if checkpoint_id < 0:
        raise CorruptFileError(f"{path}: invalid checkpoint id {checkpoint_id}")
    masters = [_master_state(r) for _ in range(_count(r, "master states"))]
    operators = [_operator_state(r, version) for _ in range(_count(r, "operators"))]
    return CheckpointMetadata(path, version, checkpoint_id, masters, operators)


def _count(r: DataReader, what: str) -> int:
    n = r.i32()
    if n < 0 or n > r.remaining():
        raise CorruptFileError(f"{r.where}: invalid number of {what} ({n}) at offset {r.pos - 4}")
    return n


def _master_state(r: DataReader) -> tuple[str, int, bytes]:
    if r.i32() != _MASTER_MAGIC:
        raise CorruptFileError(f"{r.where}: bad master state magic number at offset {r.pos - 4}")
    inner = DataReader(r.sized(), where=r.where)
    version = inner.i32()
    name = inner.utf()
    return name, version, inner.sized()


def _operator_state(r: DataReader, version: int) -> OperatorState:
    name = uid = None
    if version >= 5:
        name = r.utf() or None
        uid = r.utf() or None
    lower, upper = r.i64(), r.i64()
    op_id = (lower & (2**64 - 1)).to_bytes(8, "big").hex() + (upper & (2**64 - 1)).to_bytes(8, "big").hex()
    parallelism, max_parallelism = r.i32(), r.i32()
    label = uid or name or op_id
    coord = _stream_handle(r, f"coordinator state of operator {label}")
    n = r.i32()
    if n == -1:
        return OperatorState(name, uid, op_id, parallelism, max_parallelism, coord.data if coord else None, [], True)
    if n < 0 or n > r.remaining():
        raise CorruptFileError(f"{r.where}: invalid number of subtasks ({n}) of operator {label}")
    subtasks = []
    for _ in range(n):
        index = r.i32()
        if index < 0:  # a finished subtask: nothing follows
            continue
        where = f"operator {label} subtask {index}"
        managed_op = _operator_handle(r, where) if r.i32() != 0 else None
        raw_op = _operator_handle(r, where) if r.i32() != 0 else None
        managed_kg = _keyed_handle(r, where)
        raw_kg = _keyed_handle(r, where)
        for kind in ("InputChannelStateHandle", "ResultSubpartitionStateHandle"):
            if r.i32() != 0:
                raise UnsupportedFlinkFormatError(
                    f"{r.where}: {where} holds unaligned checkpoint channel state ({kind}), which is not supported"
                )
        subtasks.append(SubtaskState(index, managed_op, raw_op, managed_kg, raw_kg))
    coord_bytes = coord.data if coord is not None else None
    return OperatorState(name, uid, op_id, parallelism, max_parallelism, coord_bytes, subtasks)


def _stream_handle(r: DataReader, where: str) -> StreamHandle | None:
    t = r.u8()
    if t == _NULL:
        return None
    if t == _BYTES:
        name = r.utf()
        data = r.sized()
        return StreamHandle("inline", name, len(data), data)
    if t == _FILE:
        size = r.i64()
        return StreamHandle("file", r.utf(), size)
    if t == _RELATIVE:
        rel = r.utf()
        return StreamHandle("relative", rel, r.i64())
    if t in _STREAM_KINDS:
        raise UnsupportedFlinkFormatError(f"{r.where}: {where} uses {_STREAM_KINDS[t]}, which is not supported")
    raise CorruptFileError(f"{r.where}: {where}: unknown stream state handle type {t} at offset {r.pos - 1}")


def _offsets(r: DataReader, n: int) -> np.ndarray:
    if n < 0 or 8 * n > r.remaining():
        raise CorruptFileError(f"{r.where}: invalid number of offsets ({n}) at offset {r.pos}")
    p = r._need(8 * n)
    return np.frombuffer(r.buf[p : p + 8 * n], dtype=">i8").astype(np.int64)


def _keyed_handle(r: DataReader, where: str) -> KeyGroupsHandle | UnsupportedKeyedHandle | None:
    t = r.u8()
    if t == _NULL:
        return None
    if t in (_KG, _KG_V2, _SP_KG):
        start, n = r.i32(), r.i32()
        offsets = _offsets(r, n)
        stream = _stream_handle(r, where)
        if t == _KG_V2:
            r.utf()  # stateHandleId
        if stream is None:
            raise CorruptFileError(f"{r.where}: {where}: key-groups handle without a stream")
        kind = {_KG: "KeyGroupsStateHandle", _KG_V2: "KeyGroupsStateHandle", _SP_KG: "KeyGroupsSavepointStateHandle"}[t]
        return KeyGroupsHandle(kind, start, offsets, stream)
    if t in (_INCR, _INCR_V2):
        checkpoint_id = r.i64()
        r.utf()  # backend UUID
        start, n = r.i32(), r.i32()
        if t == _INCR_V2:
            r.i64()  # checkpointed size
        meta_stream = _stream_handle(r, where)
        files = []
        for _ in range(2):  # shared (SST files), private (MANIFEST, CURRENT, OPTIONS): local name -> handle
            files.append(tuple((r.utf(), _stream_handle(r, where)) for _ in range(_count(r, "incremental handle files"))))
        if t == _INCR_V2:
            r.utf()  # state handle id
        return UnsupportedKeyedHandle("IncrementalRemoteKeyedStateHandle (RocksDB native/incremental)", start, n,
                                      checkpoint_id, meta_stream, files[0], files[1])
    if t in _CHANGELOG:
        raise UnsupportedFlinkFormatError(f"{r.where}: {where} uses {_CHANGELOG[t]} (changelog state backend), which is not supported")
    raise CorruptFileError(f"{r.where}: {where}: unknown keyed state handle type {t} at offset {r.pos - 1}")


def _operator_handle(r: DataReader, where: str) -> OperatorStateHandle | None:
    t = r.u8()
    if t == _NULL:
        return None
    if t in _STREAM_KINDS:
        raise UnsupportedFlinkFormatError(f"{r.where}: {where} uses {_STREAM_KINDS[t]}, which is not supported")
    if t != _OP:
        raise CorruptFileError(f"{r.where}: {where}: unknown operator state handle type {t} at offset {r.pos - 1}")
    states: dict[str, tuple[str, np.ndarray]] = {}
    for _ in range(_count(r, "operator states")):
        name = r.utf()
        mode = r.u8()
        if mode >= len(MODES):
            raise CorruptFileError(f"{r.where}: {where}: operator state {name!r} has unknown mode {mode}")
        states[name] = (MODES[mode], _offsets(r, r.i32()))
    stream = _stream_handle(r, where)
    if stream is None:
        raise CorruptFileError(f"{r.where}: {where}: operator state handle without a stream")
    return OperatorStateHandle(states, stream)
