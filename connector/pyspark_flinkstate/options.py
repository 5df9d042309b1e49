"""Options of `format("flinkstate")`, parsed once on the driver into typed, picklable objects.

Every bad value raises one of flinkstate's typed errors whose message names the option and
lists what is accepted, so a job fails at planning, not in a task.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from flinkstate.core.errors import InvalidArgumentError

__all__ = [
    "READ_OPTIONS",
    "WRITE_OPTIONS",
    "TABLES",
    "ReadOptions",
    "WriteOptions",
    "parse_read_options",
    "parse_write_options",
    "storage_options_from",
]

TABLES = ("state", "timers", "operatorState", "checkpoints", "files", "states", "operators", "changes",
          "keyGroups", "subtasks", "topKeys", "ttlExpiry", "history")
METADATA_TABLES = ("checkpoints", "files", "states", "operators")
INSIGHT_TABLES = ("keyGroups", "subtasks", "topKeys", "ttlExpiry", "history")  # read.insight: latest (or given) checkpoint; history: all
STATE_KINDS = ("value", "list", "map")
OPERATIONS = ("upsert", "delete")
LIST_MODES = ("append", "overwrite")
WRITE_TABLES = ("state", "timers", "operatorState")
OPERATOR_STATE_KINDS = ("list", "union", "broadcast")
TIME_DOMAINS = ("event", "processing")

# option names in their documented spelling (Spark hands them to us lower-cased)
READ_OPTIONS = (
    "path", "checkpointId", "operator", "state", "table", "flattenCollections", "includeExpired",
    "ttlReferenceTime", "fromCheckpointId", "toCheckpointId", "timerService", "storageOptions",
    "startingCheckpointId",  # streaming reads only (stream_reader.py)
    "rawValues", "rowFields",  # Flink savepoints: Kryo/Avro values as bytes; Row field names per "operator/state"
    "ttl",  # Flink savepoints: TTL durations per "operator/state" (or "state"), "op/state=ms;state=ms"
    "sqlRows", "sqlPlan",  # Flink SQL jobs' savepoints: RowData as columns (default) or bytes; the compiled plan naming them
    "topN", "ttlBucket", "parallelism",  # insight tables: keys per state (topKeys), hour|day (ttlExpiry), subtasks at (subtasks)
    "keyGroups",  # state and timers: only these key groups ("0-15,40"), as a key_group filter would (pyspark_flinkstate.table uses it)
)
WRITE_OPTIONS = (
    "path", "operator", "state", "checkpointId", "savepoint", "operation", "maxParallelism",
    "stateKind", "storageOptions", "ttlMs", "listMode", "table", "timerService", "timeDomain",
)
STORAGE_PREFIX = "storage."


def _lower(options: Mapping[str, Any]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in options.items() if v is not None}


def _known(opts: dict[str, str], allowed: tuple[str, ...], what: str) -> None:
    names = {a.lower(): a for a in allowed}
    for k in opts:
        if k in names or k.startswith(STORAGE_PREFIX):
            continue
        raise InvalidArgumentError(
            f"unknown {what} option {k!r}; options: {', '.join(allowed)} (and storage.<name> for storage options)"
        )


def _int(opts: dict[str, str], name: str, *, low: int | None = None, high: int | None = None) -> int | None:
    raw = opts.get(name.lower())
    if raw is None or raw == "":
        return None
    try:
        v = int(raw.strip())
    except ValueError:
        raise InvalidArgumentError(f"option {name!r} must be an integer, got {raw!r}") from None
    if (low is not None and v < low) or (high is not None and v > high):
        raise InvalidArgumentError(f"option {name!r} must be in [{low}, {high}], got {v}")
    return v


def _bool(opts: dict[str, str], name: str, default: bool) -> bool:
    raw = opts.get(name.lower())
    if raw is None:
        return default
    v = raw.strip().lower()
    if v in ("true", "1", "yes"):
        return True
    if v in ("false", "0", "no"):
        return False
    raise InvalidArgumentError(f"option {name!r} must be true or false, got {raw!r}")


def _choice(opts: dict[str, str], name: str, choices: tuple[str, ...], default: str | None) -> str | None:
    raw = opts.get(name.lower())
    if raw is None:
        return default
    for c in choices:
        if c.lower() == raw.strip().lower():
            return c
    raise InvalidArgumentError(f"option {name!r} must be one of {', '.join(choices)}; got {raw!r}")


def storage_options_from(opts: Mapping[str, Any]) -> dict[str, Any]:
    """Storage options (s3fs naming) from `storageOptions` (JSON) and `storage.<name>` options."""
    lo = _lower(opts)
    out: dict[str, Any] = {}
    raw = lo.get("storageoptions")
    if raw:
        try:
            doc = json.loads(raw)
        except json.JSONDecodeError as e:
            raise InvalidArgumentError(f"option 'storageOptions' must be a JSON object, got {raw!r}: {e}") from None
        if not isinstance(doc, dict):
            raise InvalidArgumentError(f"option 'storageOptions' must be a JSON object, got {raw!r}")
        out.update(doc)
    # original spelling matters for storage option names (endpoint_url, key, ...): they are lower-case anyway
    for k, v in opts.items():
        kl = str(k).lower()
        if kl.startswith(STORAGE_PREFIX):
            out[str(k)[len(STORAGE_PREFIX):]] = v
    return out


def _path(opts: dict[str, str]) -> str:
    p = opts.get("path")
    if not p:
        raise InvalidArgumentError("the job root is missing: use .load(path) / .save(path) or option 'path'")
    return p


@dataclass(frozen=True)
class ReadOptions:
    """What a read asks for (validated syntax; existence is checked against the store)."""

    path: str
    storage_options: dict[str, Any] = field(default_factory=dict)
    table: str = "state"
    checkpoint_id: int | None = None
    operator: str | None = None
    state: str | None = None
    flatten: bool = True
    include_expired: bool = False
    ttl_reference_ms: int | None = None  # None: the checkpoint's own time
    from_checkpoint_id: int | None = None
    to_checkpoint_id: int | None = None
    raw_values: bool = False
    row_fields: str | None = None
    ttl: str | None = None
    sql_rows: str = "columns"
    sql_plan: str | None = None
    top_n: int = 10
    ttl_bucket: str = "hour"
    parallelism: int | None = None
    key_groups: tuple[tuple[int, int], ...] | None = None  # state and timers: read only these key-group ranges

    def flink_options(self) -> dict[str, Any]:
        """The options a Flink savepoint opens with (none given: none, so a flinkstate root opens as usual)."""
        out: dict[str, Any] = {}
        if self.raw_values:
            out["raw_values"] = True
        if self.row_fields:
            out["row_fields"] = self.row_fields
        if self.ttl:
            out["ttl"] = self.ttl
        if self.sql_rows != "columns":
            out["sql_rows"] = self.sql_rows
        if self.sql_plan:
            out["sql_plan"] = self.sql_plan
        return out


def _ttl_reference(opts: dict[str, str]) -> int | None:
    raw = opts.get("ttlreferencetime")
    if raw is None or raw == "":
        return None
    if raw.strip().lower() == "now":
        return int(time.time() * 1000)
    try:
        return int(raw.strip())
    except ValueError:
        raise InvalidArgumentError(f"option 'ttlReferenceTime' must be epoch milliseconds or 'now', got {raw!r}") from None


def parse_read_options(options: Mapping[str, Any]) -> ReadOptions:
    """Parse and check the syntax of read options."""
    opts = _lower(options)
    _known(opts, READ_OPTIONS, "read")
    table = _choice(opts, "table", TABLES, "state")
    state = opts.get("state") or opts.get("timerservice")
    return ReadOptions(
        path=_path(opts),
        storage_options=storage_options_from(options),
        table=table or "state",
        checkpoint_id=_int(opts, "checkpointId", low=0),
        operator=opts.get("operator") or None,
        state=state or None,
        flatten=_bool(opts, "flattenCollections", True),
        include_expired=_bool(opts, "includeExpired", False),
        ttl_reference_ms=_ttl_reference(opts),
        from_checkpoint_id=_int(opts, "fromCheckpointId", low=0),
        to_checkpoint_id=_int(opts, "toCheckpointId", low=0),
        raw_values=_bool(opts, "rawValues", False),
        row_fields=_checked(opts, "rowFields"),
        ttl=_checked(opts, "ttl"),
        sql_rows=_choice(opts, "sqlRows", ("columns", "bytes"), "columns") or "columns",
        sql_plan=opts.get("sqlplan") or None,
        top_n=_int(opts, "topN", low=1) or 10,
        ttl_bucket=_choice(opts, "ttlBucket", ("hour", "day"), "hour") or "hour",
        parallelism=_int(opts, "parallelism", low=1),
        key_groups=_key_group_ranges(opts, table or "state"),
    )


def _key_group_ranges(opts: dict[str, str], table: str) -> tuple[tuple[int, int], ...] | None:
    """Option keyGroups ("0-15,40,64-127"): inclusive key-group ranges a state or timers read keeps to."""
    raw = opts.get("keygroups")
    if raw is None or not raw.strip():
        return None
    if table not in ("state", "timers"):
        raise InvalidArgumentError(f"option 'keyGroups' is for table=state and table=timers, not table={table}")
    out = []
    for part in raw.split(","):
        lo, _, hi = part.strip().partition("-")
        try:
            a, b = int(lo), int(hi or lo)
        except ValueError:
            raise InvalidArgumentError(f"option 'keyGroups' must list key groups and ranges like '0-15,40', got {raw!r}") from None
        if a < 0 or b < a:
            raise InvalidArgumentError(f"option 'keyGroups': {part.strip()!r} is not a range of key groups (0 <= start <= end)")
        out.append((a, b))
    return tuple(out)


def _checked(opts: dict[str, str], name: str) -> str | None:
    """A Flink savepoint option keyed by "operator/state" (rowFields, ttl), its syntax checked; operators are resolved at load."""
    from flinkstate.flink.bridge.mapping import parse_row_fields, parse_ttl

    raw = opts.get(name.lower()) or None
    if raw is not None:
        try:
            (parse_row_fields if name == "rowFields" else parse_ttl)(raw)
        except InvalidArgumentError as e:
            raise InvalidArgumentError(f"option {name!r}: {e}") from e
    return raw


@dataclass(frozen=True)
class WriteOptions:
    """What a write asks for."""

    path: str
    operator: str
    state: str
    storage_options: dict[str, Any] = field(default_factory=dict)
    savepoint: bool = False
    operation: str = "upsert"
    max_parallelism: int | None = None
    state_kind: str | None = None
    checkpoint_id: int | None = None
    ttl_ms: int | None = None
    list_mode: str | None = None  # list state under mode("append"): append elements (default) or overwrite each key's list
    table: str = "state"  # state | timers | operatorState
    time_domain: str | None = None  # timers: event | processing (a new service needs it unless its name starts with one)


def parse_write_options(options: Mapping[str, Any]) -> WriteOptions:
    """Parse and check the syntax of write options."""
    from flinkstate.core.descriptors import validate_name
    from flinkstate.core.keygroups import UPPER_BOUND_MAX_PARALLELISM

    opts = _lower(options)
    _known(opts, WRITE_OPTIONS, "write")
    table = _choice(opts, "table", WRITE_TABLES, "state") or "state"
    op = opts.get("operator")
    st = opts.get("state") or (opts.get("timerservice") if table == "timers" else None)
    if not op:
        raise InvalidArgumentError("option 'operator' (the operator uid to write) is required")
    if not st:
        what = {"state": "the keyed state", "timers": "the timer service ('state' or 'timerService')", "operatorState": "the operator state"}[table]
        raise InvalidArgumentError(f"option 'state' ({what} to write) is required")
    if table == "timers" and opts.get("timerservice") and opts.get("state") and opts["timerservice"] != opts["state"]:
        raise InvalidArgumentError(f"options 'state' ({opts['state']!r}) and 'timerService' ({opts['timerservice']!r}) name different timer services")
    if table != "timers" and opts.get("timerservice"):
        raise InvalidArgumentError(f"option 'timerService' is for table=timers, not table={table}")
    if table != "timers" and opts.get("timedomain"):
        raise InvalidArgumentError(f"option 'timeDomain' is for table=timers, not table={table}")
    if table != "state":
        for name in ("ttlMs", "listMode"):
            if opts.get(name.lower()):
                raise InvalidArgumentError(f"option {name!r} is for keyed state (table=state), not table={table}")
    if table == "timers" and opts.get("statekind"):
        raise InvalidArgumentError("option 'stateKind' does not apply to table=timers; a timer service takes 'timeDomain' (event or processing)")
    if table == "operatorState" and opts.get("operation", "upsert").strip().lower() == "delete":
        raise InvalidArgumentError("option operation=delete is not supported for table=operatorState; mode('overwrite') replaces the state")
    kinds = OPERATOR_STATE_KINDS if table == "operatorState" else STATE_KINDS
    validate_name(op, "operator uid")
    validate_name(st, "state name")
    return WriteOptions(
        path=_path(opts),
        operator=op,
        state=st,
        storage_options=storage_options_from(options),
        savepoint=_bool(opts, "savepoint", False),
        operation=_choice(opts, "operation", OPERATIONS, "upsert") or "upsert",
        max_parallelism=_int(opts, "maxParallelism", low=1, high=UPPER_BOUND_MAX_PARALLELISM),
        state_kind=_choice(opts, "stateKind", kinds, None),
        checkpoint_id=_int(opts, "checkpointId", low=0),
        ttl_ms=_int(opts, "ttlMs", low=1),
        list_mode=_choice(opts, "listMode", LIST_MODES, None),
        table=table,
        time_domain=_choice(opts, "timeDomain", TIME_DOMAINS, None),
    )
