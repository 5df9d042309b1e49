"""Which Flink release wrote a savepoint or checkpoint, as far as its bytes tell (`CheckpointMetadata.flink_version`).

Evidence, each checked against what Flink 1.18.1, 1.19.3, 1.20.5, 2.0.2, 2.1.3, 2.2.1 and 2.3.0 write
(flinkjobs/harness.py): the `_metadata` version (v4 from 1.18 to 1.20, v5 from 2.0, v6 from 2.1 to
2.3); for RocksDB native/incremental state the RocksDB release in the OPTIONS file (FRocksDB 6.20.3
in 1.x, 8.10.0 in 2.x; `avoid_flush_during_shutdown` false in 1.18's default options, true from 1.19)
or else the SST footer's checksum type (CRC32C in 1.x, XXH3 in 2.x); and
compressed operator list state whose elements share one offset (one snappy stream per state, the
layout Flink 1.18 and earlier wrote, FLINK-34063; per-element streams from 1.19). Serializer
snapshot versions and the keyed/operator header versions (6) are the same in all of these, so
1.19 and 1.20, and 2.1 to 2.3, cannot be told apart.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from flinkstate.flink._io import DataReader
from flinkstate.flink.errors import CorruptFileError, UnsupportedFlinkFormatError
from flinkstate.flink.serde.serializers import read_operator_header

if TYPE_CHECKING:
    from flinkstate.flink.meta.handles import OperatorState

__all__ = ["KNOWN_VERSIONS", "FlinkVersionGuess", "guess_flink_version", "source_releases"]

class MetadataFacts(Protocol):
    """What the guess reads of a parsed `_metadata` (a `metadata.CheckpointMetadata`)."""

    @property
    def version(self) -> int: ...

    @property
    def operators(self) -> Sequence[OperatorState]: ...

    @property
    def directory(self) -> str: ...


KNOWN_VERSIONS = ("1.18", "1.19", "1.20", "2.0", "2.1", "2.2", "2.3")
_BY_METADATA = {4: ("1.18", "1.19", "1.20"), 5: ("2.0",), 6: ("2.1", "2.2", "2.3")}
_ONE_X = ("1.18", "1.19", "1.20")
_ROCKSDB_VERSION = re.compile(rb"rocksdb_version=(\d+)\.(\d+)\.(\d+)")
_CHECKSUMS = {1: "CRC32C", 2: "xxHash", 3: "xxHash64", 4: "XXH3"}


@dataclass(frozen=True)
class FlinkVersionGuess:
    """The Flink releases (of KNOWN_VERSIONS) that write what a checkpoint holds, and how that was determined."""

    versions: tuple[str, ...]
    evidence: tuple[str, ...]

    @property
    def label(self) -> str:
        """'2.0', '1.19-1.20', or 'unknown' (none of KNOWN_VERSIONS: the evidence says why)."""
        if not self.versions:
            return "unknown"
        if len(self.versions) == 1:
            return self.versions[0]
        return f"{self.versions[0]}-{self.versions[-1]}"

    def __str__(self) -> str:
        """The label and the evidence, for messages and tables."""
        return f"{self.label} ({'; '.join(self.evidence)})"


def guess_flink_version(meta: MetadataFacts) -> FlinkVersionGuess:
    """Narrow the releases that could have written meta by its metadata version, RocksDB files and operator-state layout."""
    evidence = []
    if meta.version in _BY_METADATA:
        cands = set(_BY_METADATA[meta.version])
        evidence.append(f"_metadata version {meta.version} is written by Flink {'/'.join(_BY_METADATA[meta.version])}")
    elif meta.version < 4:
        return FlinkVersionGuess((), (f"_metadata version {meta.version}: older than Flink 1.18, which writes 4",))
    else:
        return FlinkVersionGuess((), (f"_metadata version {meta.version} is none that Flink 1.18 to 2.3 writes",))
    for versions, why in _rocksdb_evidence(meta):
        cands &= versions
        evidence.append(why)
    shared = _shared_compressed_offsets(meta)
    if shared is not None:
        if shared:
            cands &= {"1.18"}
            evidence.append("compressed operator list state with one offset for all elements (Flink 1.18 and earlier)")
        else:
            cands -= {"1.18"}
            evidence.append("compressed operator list state with an offset per element (Flink 1.19 and later)")
    return FlinkVersionGuess(tuple(v for v in KNOWN_VERSIONS if v in cands), tuple(evidence))


def source_releases(meta: MetadataFacts) -> tuple[str, ...]:
    """The releases that may have written meta (`guess_flink_version`), or ("<1.18",) for metadata older than Flink 1.18
    writes; () when not known. What an export needs to know what serializer bytes mean (Kryo 2 in 1.x, Kryo 5 in 2.x)."""
    versions = guess_flink_version(meta).versions
    if versions:
        return versions
    return ("<1.18",) if meta.version < 4 else ()


def _rocksdb_evidence(meta: MetadataFacts) -> list[tuple[set[str], str]]:
    """(possible versions, why) from the first RocksDB native/incremental handle's OPTIONS file, else an SST footer."""
    two_x = set(KNOWN_VERSIONS) - set(_ONE_X)
    for op in meta.operators:
        for sub in op.subtasks:
            h = sub.managed_keyed
            if not isinstance(getattr(h, "shared", None), tuple):
                continue
            try:
                for name, stream in h.private:
                    if not name.startswith("OPTIONS") or stream is None:
                        continue
                    text = stream.read(meta.directory)
                    m = _ROCKSDB_VERSION.search(text)
                    if m is None:
                        continue
                    v = ".".join(x.decode() for x in m.groups())
                    if int(m.group(1)) >= 8:
                        return [(two_x, f"RocksDB {v} in the OPTIONS file (FRocksDB 8 of Flink 2.x)")]
                    out = [(set(_ONE_X), f"RocksDB {v} in the OPTIONS file (FRocksDB 6.20 of Flink 1.x)")]
                    # Flink 1.19 turned avoid_flush_during_shutdown on in its default DBOptions.
                    if b"avoid_flush_during_shutdown=false" in text:
                        out.append(({"1.18"}, "avoid_flush_during_shutdown=false in the OPTIONS file (Flink 1.18's default)"))
                    elif b"avoid_flush_during_shutdown=true" in text:
                        out.append(({"1.19", "1.20"}, "avoid_flush_during_shutdown=true in the OPTIONS file (Flink 1.19 and 1.20's default)"))
                    return out
                for name, stream in (*h.shared, *h.private):  # SSTs: shared when incremental, private when not
                    if name.endswith(".sst") and stream is not None:
                        data = stream.read(meta.directory)
                        if len(data) >= 53 and data[-53] in (1, 4):
                            one = data[-53] == 1
                            return [(set(_ONE_X) if one else two_x,
                                     f"SST checksum type {_CHECKSUMS[data[-53]]} (the RocksDB default of Flink {'1.x' if one else '2.x'})")]
            except (CorruptFileError, UnsupportedFlinkFormatError):
                continue
    return []


def _shared_compressed_offsets(meta: MetadataFacts) -> bool | None:
    """Whether compressed operator list state shares one offset among its elements (None: no such state to tell)."""
    for op in meta.operators:
        for sub in op.subtasks:
            h = sub.managed_operator
            if h is None:
                continue
            lists = [offs for mode, offs in h.states.values() if mode != "BROADCAST" and len(offs) > 1]
            if not lists:
                continue
            try:
                compressed = read_operator_header(DataReader(h.stream.read(meta.directory), where=h.stream.path), op.label)[0]
            except (CorruptFileError, UnsupportedFlinkFormatError):
                continue
            if compressed:
                return any(len(set(offs.tolist())) < len(offs) for offs in lists)
    return None
