"""The handles and operator states a Flink `_metadata` file holds (parsed by `metadata`).

Plain data: what each subtask's managed keyed and operator state handles point at (files, key-group
offsets, RocksDB shared and private file lists), per operator with its ids, parallelism and max parallelism.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from flinkstate.flink._io import FlinkFiles, join_url
from flinkstate.flink.errors import CorruptFileError
from flinkstate.flink.serde.kryo.bind import KryoOptions

__all__ = ["MODES", "KeyGroupsHandle", "OperatorState", "OperatorStateHandle", "StreamHandle", "SubtaskState", "UnsupportedKeyedHandle"]

MODES = ("SPLIT_DISTRIBUTE", "UNION", "BROADCAST")


@dataclass(frozen=True)
class StreamHandle:
    """A stream of bytes: inline in `_metadata` ('inline'), an absolute file ('file') or relative to the directory ('relative')."""

    kind: str
    path: str
    size: int
    data: bytes | None = None
    files: FlinkFiles = field(default_factory=FlinkFiles, compare=False, repr=False)

    def location(self, base_dir: str) -> str:
        """The file path or URL to read (inline handles return their recorded name).

        An absolute path whose folder no longer exists (a checkpoint copied away from where Flink
        wrote it) is read from the copied layout (`files.relocated`, decided once per `_metadata`).
        """
        if self.kind == "relative":
            return join_url(base_dir, self.path)
        if self.kind == "inline":
            return self.path
        return self.files.location(self.path)

    def read(self, base_dir: str, offset: int = 0, length: int | None = None) -> bytes:
        """The stream's bytes (or a range of them); a missing file is a CorruptFileError naming the handle."""
        if self.data is not None:
            return self.data if offset == 0 and length is None else self.data[offset : None if length is None else offset + length]
        path = self.location(base_dir)
        try:
            return self.files.read(path, offset, length)
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
    """A RocksDB/ForSt keyed handle (IncrementalRemoteKeyedStateHandle), read by `flink.rocksdb`: its header stream and files.

    shared lists the SSTs of an incremental snapshot; private the SSTs of a full one (Flink's
    default) and the MANIFEST, CURRENT and OPTIONS files of both.
    """

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
    # how a read decodes its Kryo values (`serde.kryo.bind`: the Kryo of the release that wrote them, class schemas, the
    # types of the values; set by `bridge.kryo_types`): None keeps them as their bytes, where framed
    kryo: KryoOptions | None = field(default=None, compare=False, repr=False)

    @property
    def label(self) -> str:
        """The operator's uid, else its name, else its id (for messages)."""
        return self.uid or self.name or self.operator_id
