"""flinkstate: Flink-grade keyed state, checkpointed as Parquet files with Delta Lake manifests.

The library, one package per layer, bottom up: `core` (errors, key groups bit-identical with
Flink, descriptors, TTL, IO), `format`, `read`, `store`, then `flink` and `backend` side by side,
`runtime`; this front re-exports the public names, and `demo` and `cli` use it. Each package may
import only those below it (tests/test_layers.py). It never imports Spark; the Spark data source
lives in `pyspark_flinkstate`.
"""

from __future__ import annotations

from flinkstate.core.descriptors import (
    AggregateFunction,
    AggregatingStateDescriptor,
    KeyedStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    OperatorStateDescriptor,
    ReducingStateDescriptor,
    StateKind,
    TimerServiceDescriptor,
    ValueStateDescriptor,
)
from flinkstate.core.errors import (
    CheckpointNotFoundError,
    CommitConflictError,
    CommitOutcomeUnknownError,
    CorruptFileError,
    DuplicateKeyError,
    FlinkStateError,
    InvalidArgumentError,
    KeyGroupOutOfRangeError,
    OperatorNotFoundError,
    ReadOnlyStoreError,
    SchemaMismatchError,
    StateNotFoundError,
    StorageError,
    WorkerPythonError,
)
from flinkstate.core.keygroups import (
    assign_key_group,
    assign_key_groups,
    default_max_parallelism,
    key_group_range,
    operator_index_for_key_group,
)
from flinkstate.core.policy import CompactionPolicy
from flinkstate.core.ttl import CompactionCleanup, IncrementalCleanup, StateTtlConfig
from flinkstate.flink.bridge.source import open_store as open
from flinkstate.flink.errors import (
    IncompatibleReleaseError,
    KryoDecodeError,
    KryoMigrationError,
    SerializerMismatchError,
    SourceStateError,
    SplitNotFoundError,
    StateAccountingError,
    UnknownSourceError,
    UnsupportedFlinkFormatError,
    UnsupportedSerializerError,
)
from flinkstate.format.constants import FORMAT_VERSION
from flinkstate.format.metadata import (
    CheckpointInfo,
    CheckpointMetadata,
    OperatorMetadata,
)
from flinkstate.store.maintenance import MaintenanceResult
from flinkstate.store.store import CheckpointStore

__version__ = "0.1.0"

__all__ = [
    "__version__",
    "FORMAT_VERSION",
    "open",
    "CheckpointStore",
    "CheckpointInfo",
    "CheckpointMetadata",
    "OperatorMetadata",
    "assign_key_group",
    "assign_key_groups",
    "key_group_range",
    "operator_index_for_key_group",
    "default_max_parallelism",
    "StateKind",
    "ValueStateDescriptor",
    "ListStateDescriptor",
    "MapStateDescriptor",
    "ReducingStateDescriptor",
    "AggregatingStateDescriptor",
    "AggregateFunction",
    "KeyedStateDescriptor",
    "TimerServiceDescriptor",
    "OperatorStateDescriptor",
    "StateTtlConfig",
    "IncrementalCleanup",
    "CompactionCleanup",
    "CompactionPolicy",
    "MaintenanceResult",
    "FlinkStateError",
    "InvalidArgumentError",
    "DuplicateKeyError",
    "CheckpointNotFoundError",
    "OperatorNotFoundError",
    "StateNotFoundError",
    "SchemaMismatchError",
    "CorruptFileError",
    "CommitConflictError",
    "CommitOutcomeUnknownError",
    "KeyGroupOutOfRangeError",
    "ReadOnlyStoreError",
    "StorageError",
    "WorkerPythonError",
    "StateAccountingError",
    "UnsupportedFlinkFormatError",
    "UnsupportedSerializerError",
    "SourceStateError",
    "SplitNotFoundError",
    "UnknownSourceError",
    "SerializerMismatchError",
    "IncompatibleReleaseError",
    "KryoDecodeError",
    "KryoMigrationError",
]
