"""Read and write real Apache Flink savepoints: the self-contained Flink layer (no pyspark).

Its packages, bottom up (each may import those below it, never one above): `errors`, `_io` and `_jit` (typed
errors; big-endian reading, snappy, file access; numba kernels compiled once per machine); `serde` (serializer snapshots, values, vector
decoders, encoders); `meta` (`_metadata`, its handles, operator names, release guess); `pyflink`
(PyFlink jobs' states), `sql` and `sources` (FLIP-27 sources' split and enumerator formats: Kafka, files, sequences); `files` (canonical, heap native, RocksDB/ForSt SST and MANIFEST, operator
state); `write` (canonical savepoint writer, savepoint rewrite); `bridge` (a savepoint as a pinned
checkpoint and a source, sizes, import, export of a root). The bridge may import flinkstate's `core`,
`format`, `read` and `store`; the rest of `flink` only `core`.

Checked against what Flink 1.18.1, 1.19.3, 1.20.5, 2.0.2, 2.1.3, 2.2.1 and 2.3.0 write (every format
below, flinkjobs/harness.py). Across these only the `_metadata` version changes (v4 in 1.18-1.20: no
operator names or uids, operators are found by the id Flink derives from the uid; v5 in 2.0; v6 from
2.1), the RocksDB release (FRocksDB 6.20.3 with CRC32C SST checksums in 1.x, 8.10.0 with XXH3 in 2.x,
both block-based format_version 5, snappy) and, in 1.18, compressed operator list state (one snappy
stream per state, its start recorded for every element: read in sequence). Keyed and operator header
versions (6), serializer snapshot versions, TTL and timer layouts are the same. `CheckpointMetadata.
flink_version` (`version.guess_flink_version`) says which releases wrote a checkpoint, with the evidence.

Supported now:
- `_metadata` versions 3 to 6 (`metadata.read_metadata`): operators with uid, name, operator id,
  parallelism, max parallelism, coordinator state bytes, and per subtask the managed keyed and
  operator state handles (inline ByteStreamStateHandle, FileStateHandle, RelativeFileStateHandle,
  KeyGroupsStateHandle / KeyGroupsSavepointStateHandle with per-key-group offsets).
- Canonical keyed state of any backend (`canonical.read_keyed_state`), snappy compressed or not:
  one Arrow table per state with key_group, key, [namespace], [user_key], value and, for TTL
  state, ttl_last_access (epoch ms); list state one row per element, map state one row per entry;
  timers per timer service named without `_timer_state/` (key_group, key, [namespace], timestamp).
  Every key's key group is checked against Flink's assignment for the declared key type.
- HashMap (heap) native keyed state (`heap`, through the same `read_keyed_state`): checkpoints and
  NATIVE savepoints (KeyGroupsStateHandle, types 3 and 12), snappy compressed or not, decoded to the
  same tables as canonical; told apart from canonical streams by their per-key-group id headers.
- RocksDB (and ForSt) native savepoints and checkpoints, incremental or full (IncrementalRemoteKeyedStateHandle, `rocksdb`,
  `sst`, `manifest`): the handle's SST files, shared and private, read in pure Python (binary-search or two-level
  index, block-based format_version 2-5, snappy or no compression, column family from the properties block),
  checked against their properties' record counts and against the live files the handle's MANIFEST records;
  put/delete/merge records resolved per key (list merge operands joined with ','), keys outside the subtask's
  key-group range dropped, then decoded like canonical records, one row per live record or a StateAccountingError. Absolute file paths of a checkpoint copied elsewhere are resolved
  against its `shared/`, `taskowned/` and `chk-N/` directories.
- Canonical decoding is vectorised (`_framing`, `_records`, `_vector`): record starts located with
  numpy, keys and values decoded per state at once (record by record only as a fallback).
- Serializers (`serializers`, `values`): Long, Integer, Short, Byte, Double, Float, Boolean, Char,
  String, byte[], Row, Tuple, POJO, List, Map, the TTL wrapper, timers, VoidNamespace.
- Operator state (`operator_state.read_operator_state`): split and union list state, broadcast state.
- Operators named by uid (1.x: matched by Flink's hash of it) or by operator id, one way for reads and
  for every option naming "operator/state" (`names`): a name matching nothing is refused, listing what exists.

Writing (`savepoint_writer.write_savepoint`, `export.rewrite_flink_savepoint`, `store_export.export_savepoint`):
canonical savepoints with `_metadata` v6 (what Flink 2.3 writes; tested: real Flink 2.3 restores them with the
HashMap and RocksDB backends), relative file handles, keyed state of the types above except POJO subclasses,
TTL, timers, split/union/broadcast operator state, optional snappy; serializer snapshots from `encode`.
Import and export run as one job per Flink subtask (`bridge.import_task`, `bridge.export_task`): planned and
committed by the driver (`importer.plan_import`/`run_import`, `store_export.plan_export`/`run_export`), the jobs
one after the other here or as Spark tasks (`pyspark_flinkstate.flink_jobs`).

Refused with a typed error naming them: RocksDB handles without a metadata stream, other SST formats
(hash/partitioned indexes, other compressions, format_version 6), changelog handles,
file-merging segments, unaligned channel state, metadata versions outside 3..6 (UnsupportedFlinkFormatError);
Kryo, Avro and other serializers (UnsupportedSerializerError, naming operator, state and class).
Corrupt or truncated files raise CorruptFileError naming the file and the key group.
Not yet: SST block checksums (XXH3) are not verified; range tombstones are not applied; window namespaces beyond generic decoding, PyFlink coders.
"""

from flinkstate.flink.errors import (
    UnsupportedFlinkFormatError,
    UnsupportedSerializerError,
)
from flinkstate.flink.files.canonical import KeyedState, read_keyed_state
from flinkstate.flink.files.operator_state import (
    operator_state_names,
    read_operator_state,
)
from flinkstate.flink.meta.metadata import (
    CheckpointMetadata,
    parse_metadata,
    read_metadata,
)
from flinkstate.flink.meta.version import FlinkVersionGuess, guess_flink_version

__all__ = [
    "CheckpointMetadata",
    "FlinkVersionGuess",
    "KeyedState",
    "UnsupportedFlinkFormatError",
    "UnsupportedSerializerError",
    "guess_flink_version",
    "operator_state_names",
    "parse_metadata",
    "read_keyed_state",
    "read_metadata",
    "read_operator_state",
]
