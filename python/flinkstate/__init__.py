"""flinkstate: Flink-grade keyed state, checkpointed as Parquet files with Delta Lake manifests.

The core library: key groups (bit-identical with Flink), state descriptors and TTL, the
storage format, the checkpoint store, the embedded state backend and the CLI. It never
imports Spark; the Spark data source lives in `pyspark_flinkstate`.
"""

from __future__ import annotations

from flinkstate.descriptors import (
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
from flinkstate.errors import (
    CheckpointNotFoundError,
    CommitConflictError,
    CorruptFileError,
    DuplicateKeyError,
    FlinkStateError,
    InvalidArgumentError,
    KeyGroupOutOfRangeError,
    OperatorNotFoundError,
    ReadOnlyStoreError,
    SchemaMismatchError,
    StateNotFoundError,
)
from flinkstate.format.constants import FORMAT_VERSION
from flinkstate.keygroups import (
    assign_key_group,
    assign_key_groups,
    default_max_parallelism,
    key_group_range,
    operator_index_for_key_group,
)
from flinkstate.maintenance import MaintenanceResult
from flinkstate.metadata import CheckpointInfo, CheckpointMetadata, OperatorMetadata
from flinkstate.policy import CompactionPolicy
from flinkstate.store import CheckpointStore
from flinkstate.store import open_store as open
from flinkstate.ttl import CompactionCleanup, IncrementalCleanup, StateTtlConfig

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
    "KeyGroupOutOfRangeError",
    "ReadOnlyStoreError",
]
