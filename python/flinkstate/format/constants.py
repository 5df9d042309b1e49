"""Constants of the on-storage format: version, column names, file kinds, metadata keys."""

from __future__ import annotations

FORMAT_VERSION = 2  # v2: every operator has its own max parallelism (schemas/FORMAT.md, section 17)
SUPPORTED_FORMAT_VERSIONS = (1, 2)

# directory layout (relative to the job root)
META_DIR = "_flinkstate"
LOG_TABLE = "_flinkstate/log"
MANIFEST_TABLE = "_flinkstate/manifest"
SHARED_DIR = "shared"
SAVEPOINTS_DIR = "savepoints"
TIMERS_SUBDIR = "_timers"
OPERATOR_SUBDIR = "_operator"
COORDINATOR_SUBDIR = "_coordinator"

# data file columns
COL_KEY_GROUP = "key_group"
COL_KEY = "key"
COL_NAMESPACE = "namespace"
COL_USER_KEY = "user_key"
COL_VALUE = "value"
COL_TTL = "ttl_timestamp"  # last access time (epoch ms); expiry = ttl_timestamp + ttl
COL_TOMBSTONE = "tombstone"
COL_TIMESTAMP = "timestamp"
COL_SUBTASK = "subtask"
COL_RECORD_TYPE = "record_type"
COL_SEQ = "seq"
COL_PAYLOAD = "payload"

# file kinds (manifest column `kind`)
KIND_FULL = "full"
KIND_DELTA = "delta"
KIND_TIMERS_FULL = "timers-full"
KIND_TIMERS_DELTA = "timers-delta"
KIND_OPERATOR = "operator"
KIND_COORDINATOR = "coordinator"
FILE_KINDS = (KIND_FULL, KIND_DELTA, KIND_TIMERS_FULL, KIND_TIMERS_DELTA, KIND_OPERATOR, KIND_COORDINATOR)
DELTA_KINDS = (KIND_DELTA, KIND_TIMERS_DELTA)

# checkpoint kinds and log events
CHECKPOINT = "checkpoint"
SAVEPOINT = "savepoint"
EVENT_COMPLETED = "COMPLETED"
EVENT_DISCARDED = "DISCARDED"
# a garbage collection's deletions, announced in the log before any file goes (FORMAT.md section 14)
EVENT_COLLECTING = "COLLECTING"
STATUS_COMPLETED = "completed"
STATUS_DISCARDED = "discarded"

# checkpoint property holding the Flink operator id (hex) of an operator imported from Flink (an export keeps it, a
# read by the operator's uid or id finds it)
FLINK_OPERATOR_ID_PROPERTY = "flink.operator-id."

# Parquet key-value metadata keys
META_FORMAT_VERSION = "flinkstate.format.version"
META_FILE_KIND = "flinkstate.file.kind"
META_OPERATOR = "flinkstate.operator"
META_STATE = "flinkstate.state"
META_STATE_KIND = "flinkstate.state.kind"
META_KG_START = "flinkstate.key_group.start"
META_KG_END = "flinkstate.key_group.end"
META_CHECKPOINT_ID = "flinkstate.checkpoint.id"
META_MAX_PARALLELISM = "flinkstate.max_parallelism"
META_TIMER_DOMAIN = "flinkstate.timer.domain"
META_OPERATOR_STATE_MODE = "flinkstate.operator_state.mode"

# key carrying the format version in the commitInfo of the commit that creates each Delta table
DELTA_FORMAT_VERSION_KEY = "flinkstate.format.version"

DEFAULT_ROW_GROUP_SIZE = 65536
DEFAULT_ROWS_PER_FILE = 500_000
