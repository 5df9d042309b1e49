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
    "OPTIONS",
    "Option",
    "default_of",
    "READ_OPTIONS",
    "SOURCE_TABLES",
    "WRITE_OPTIONS",
    "TABLES",
    "ReadOptions",
    "WriteOptions",
    "parse_read_options",
    "parse_write_options",
    "source_kinds",
    "storage_options_from",
]

TABLES = ("state", "timers", "operatorState", "checkpoints", "files", "states", "operators", "changes",
          "keyGroups", "subtasks", "topKeys", "ttlExpiry", "history", "sourceSplits", "sourceEnumerator")
METADATA_TABLES = ("checkpoints", "files", "states", "operators")
SOURCE_TABLES = ("sourceSplits", "sourceEnumerator")  # flink.bridge.source_positions: the sources' splits and enumerators
INSIGHT_TABLES = ("keyGroups", "subtasks", "topKeys", "ttlExpiry", "history", *SOURCE_TABLES)  # latest (or given) checkpoint; history: all
STATE_KINDS = ("value", "list", "map")
OPERATIONS = ("upsert", "delete")
LIST_MODES = ("append", "overwrite")
WRITE_TABLES = ("state", "timers", "operatorState")
OPERATOR_STATE_KINDS = ("list", "union", "broadcast")
TIME_DOMAINS = ("event", "processing")

READ = "read"
WRITE = "write"
STREAM_READ = "stream read"
STREAM_WRITE = "stream write"


@dataclass(frozen=True)
class Option:
    """One option of `format("flinkstate")`: the one place its name, type, default and meaning are defined.

    The parsers below take their defaults and choices from here, and the documentation's option
    reference (docs/reference/spark-options.md) is generated from `OPTIONS`, so neither can drift.
    """

    name: str  # the documented spelling (Spark hands options to us lower-cased)
    type: str  # what the value is, in words: "integer", "boolean", "string", "JSON object", ...
    meaning: str
    applies: tuple[str, ...]  # READ, WRITE, STREAM_READ, STREAM_WRITE
    default: object = None  # None: no default (the meaning says what happens without it)
    choices: tuple[str, ...] = ()
    default_text: str = ""  # the default in words when it is not a plain value ("the latest checkpoint")
    pattern: bool = False  # a family of options (storage.<name>), not one name


_RW = (READ, WRITE, STREAM_READ, STREAM_WRITE)
_R = (READ, STREAM_READ)
_W = (WRITE, STREAM_WRITE)

OPTIONS: tuple[Option, ...] = (
    Option("path", "string (URL)", "The job root or Flink savepoint: a local path, `s3://` or `memory://` URL; usually given to "
           "`.load(path)` / `.save(path)`.", _RW),
    Option("operator", "string", "The operator, by uid (or, in a Flink savepoint, its 32-hex-digit operator id). Required for "
           "`state`, `timers`, `operatorState` and `changes`; a filter of the metadata tables.", _RW),
    Option("state", "string", "The keyed state, timer service or operator state of `operator`.", _RW),
    Option("table", "string", "What to read: keyed `state`, `timers`, `operatorState`, the metadata tables `checkpoints`, "
           "`files`, `states`, `operators`, the `changes` between two checkpoints, or the insight tables `keyGroups`, "
           "`subtasks`, `topKeys`, `ttlExpiry`, `history`, or a source's positions `sourceSplits` and `sourceEnumerator`. A write "
           "takes `state`, `timers`, `operatorState`, `sourceSplits` or `sourceEnumerator`.", _RW,
           default="state", choices=TABLES),
    Option("checkpointId", "integer >= 0", "Read: the checkpoint or savepoint to read (time travel). Write: the checkpoint "
           "the write starts from.", (READ, WRITE), default_text="the latest"),
    Option("flattenCollections", "boolean", "List and map state: one row per element (`true`) or one row per key with the "
           "collection in `value` (`false`).", _R, default=True),
    Option("includeExpired", "boolean", "Also return TTL entries expired at the reference time, with an `expired` column.",
           _R, default=False),
    Option("ttlReferenceTime", "epoch ms or `now`", "The time TTL visibility is judged at.", _R,
           default_text="the checkpoint's own time"),
    Option("fromCheckpointId", "integer >= 0", "`table=changes`: the older checkpoint of the pair.", (READ,),
           default_text="the retained checkpoint before `toCheckpointId`"),
    Option("toCheckpointId", "integer >= 0", "`table=changes`: the newer checkpoint of the pair.", (READ,),
           default_text="`checkpointId`, else the latest"),
    Option("timerService", "string", "`table=timers`: the timer service (the same as `state`).", _RW),
    Option("storageOptions", "JSON object", "fsspec/s3fs storage options as one JSON string, e.g. "
           "`{\"endpoint_url\": \"http://127.0.0.1:9000\"}`.", _RW),
    Option("storage.<name>", "string", "One fsspec/s3fs storage option, e.g. `storage.endpoint_url`, `storage.key`, "
           "`storage.secret`, `storage.region`.", _RW, pattern=True),
    Option("startingCheckpointId", "integer >= 0, `earliest` or `latest`", "A streaming read's first checkpoint "
           "(inclusive); `latest`: only checkpoints completed after the query starts.", (STREAM_READ,), default="latest"),
    Option("rawValues", "boolean", "Flink savepoints: read values no decoder can type (Kryo, Avro, custom serializers) as "
           "their serialized bytes instead of raising `UnsupportedSerializerError`.", _R, default=False),
    Option("rowFields", "`op/state=f1,f2;...`", "Flink savepoints: names of a Row state's fields, in field order (Flink "
           "keeps none: `f0..fn` without it).", _R),
    Option("ttl", "`op/state=ms;state=ms`", "Flink savepoints: TTL durations, which a savepoint does not hold (without "
           "them TTL entries never expire).", _R),
    Option("sqlRows", "string", "Flink SQL jobs' savepoints: RowData as typed struct `columns` or as the `bytes` Flink "
           "wrote.", _R, default="columns", choices=("columns", "bytes")),
    Option("sqlPlan", "string (path)", "Flink SQL jobs' savepoints: the job's compiled plan (`COMPILE PLAN`), which names "
           "the columns.", _R),
    Option("kryoClasses", "`com.acme.Order=id:String,tags:List<String>;...`", "Flink savepoints: the fields of user classes "
           "in Kryo values (Kryo writes no field names), so they read as typed columns; without one such values stay bytes "
           "(with `rawValues`) or are an error naming the class.", _R),
    Option("keyGroups", "`0-15,40`", "`table=state` / `timers`: read only these key groups (ranges and single groups), as a "
           "`key_group` filter would; `pyspark_flinkstate.table` uses it for `keys`.", _R),
    Option("topN", "integer >= 1", "`table=topKeys`: keys per state.", _R, default=10),
    Option("ttlBucket", "string", "`table=ttlExpiry`: bucket width.", _R, default="hour", choices=("hour", "day")),
    Option("parallelism", "integer >= 1", "`table=subtasks`: the parallelism whose key-group ranges are shown.", _R,
           default_text="each operator's own"),
    Option("sourceKinds", "`OP=KIND;OP=KIND`", "`table=sourceSplits` / `sourceEnumerator`: the kind of a source whose bytes "
           "fit more than one (`kafka`, `file`, `sequence`); a savepoint does not record which connector wrote them.", _RW),
    Option("savepoint", "boolean", "Commit the write as a self-contained savepoint instead of a checkpoint.", (WRITE,),
           default=False),
    Option("operation", "string", "`upsert` the rows, or `delete` the keys (timers) given.", _W, default="upsert",
           choices=OPERATIONS),
    Option("maxParallelism", "integer 1..32768", "A new root's or a new operator's max parallelism (number of key groups); "
           "an existing operator keeps its own.", _W, default_text="the checkpoint's default"),
    Option("stateKind", "string", "A new state's kind: `value`, `list`, `map` (keyed state) or `list`, `union`, "
           "`broadcast` (`table=operatorState`).", _W, default_text="`value` (`map` when the DataFrame has `user_key`); operator state: `list` (`broadcast` with a `key` column)",
           choices=STATE_KINDS + tuple(k for k in OPERATOR_STATE_KINDS if k not in STATE_KINDS)),
    Option("ttlMs", "integer >= 1", "A new state's TTL, or an existing TTL state's new TTL duration from this checkpoint "
           "on.", _W),
    Option("listMode", "string", "List state under `mode(\"append\")`: `append` the elements to each key's list (Flink's "
           "`ListState.addAll`) or `overwrite` the lists of the keys written.", _W, default_text="append",
           choices=LIST_MODES),
    Option("timeDomain", "string", "`table=timers`: a new timer service's time domain (not needed when its name starts "
           "with `event` or `processing`).", _W, choices=TIME_DOMAINS),
    Option("checkpointLocation", "string (path)", "Spark's own option of a streaming query; the sink also records the "
           "batches it wrote under this query.", (STREAM_WRITE,)),
)
_BY_NAME = {o.name.lower(): o for o in OPTIONS}


def _names(kind: str) -> tuple[str, ...]:
    return tuple(o.name for o in OPTIONS if kind in o.applies and not o.pattern)


# option names in their documented spelling (Spark hands them to us lower-cased)
READ_OPTIONS = _names(READ) + tuple(n for n in _names(STREAM_READ) if n not in _names(READ))
WRITE_OPTIONS = _names(WRITE)


def default_of(name: str) -> Any:
    """The default of option `name` (any spelling), as the parsers apply it."""
    return _BY_NAME[name.lower()].default


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
    kryo_classes: str | None = None
    top_n: int = 10
    ttl_bucket: str = "hour"
    parallelism: int | None = None
    key_groups: tuple[tuple[int, int], ...] | None = None  # state and timers: read only these key-group ranges
    source_kinds: dict[str, str] = field(default_factory=dict)

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
        if self.kryo_classes:
            out["kryo_classes"] = self.kryo_classes
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
    table = _choice(opts, "table", TABLES, default_of("table"))
    state = opts.get("state") or opts.get("timerservice")
    return ReadOptions(
        path=_path(opts),
        storage_options=storage_options_from(options),
        table=table or "state",
        checkpoint_id=_int(opts, "checkpointId", low=0),
        operator=opts.get("operator") or None,
        state=state or None,
        flatten=_bool(opts, "flattenCollections", default_of("flattenCollections")),
        include_expired=_bool(opts, "includeExpired", default_of("includeExpired")),
        ttl_reference_ms=_ttl_reference(opts),
        from_checkpoint_id=_int(opts, "fromCheckpointId", low=0),
        to_checkpoint_id=_int(opts, "toCheckpointId", low=0),
        raw_values=_bool(opts, "rawValues", default_of("rawValues")),
        row_fields=_checked(opts, "rowFields"),
        ttl=_checked(opts, "ttl"),
        sql_rows=_choice(opts, "sqlRows", _BY_NAME["sqlrows"].choices, default_of("sqlRows")) or "columns",
        sql_plan=opts.get("sqlplan") or None,
        kryo_classes=_kryo_classes(opts),
        top_n=_int(opts, "topN", low=1) or default_of("topN"),
        ttl_bucket=_choice(opts, "ttlBucket", _BY_NAME["ttlbucket"].choices, default_of("ttlBucket")) or "hour",
        parallelism=_int(opts, "parallelism", low=1),
        key_groups=_key_group_ranges(opts, table or "state"),
        source_kinds=source_kinds(opts.get("sourcekinds")),
    )


def source_kinds(raw: str | None) -> dict[str, str]:
    """The sourceKinds option ("OP=KIND;OP=KIND") as a mapping."""
    out: dict[str, str] = {}
    for item in (raw or "").split(";"):
        if item.strip():
            op, sep, kind = item.partition("=")
            if not sep or not op.strip() or not kind.strip():
                raise InvalidArgumentError(f"option 'sourceKinds': {item!r} is not OPERATOR=KIND")
            out[op.strip()] = kind.strip()
    return out


def _kryo_classes(opts: dict[str, str]) -> str | None:
    """The kryoClasses option, its syntax checked (`flink.serde.kryo.schema.parse_class_specs`)."""
    from flinkstate.flink.bridge.mapping import kryo_specs

    raw = opts.get("kryoclasses") or None
    if raw is not None:
        try:
            kryo_specs(raw)
        except InvalidArgumentError as e:
            raise InvalidArgumentError(f"option 'kryoClasses': {e}") from e
    return raw


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
    table = _choice(opts, "table", WRITE_TABLES, default_of("table")) or "state"
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
        savepoint=_bool(opts, "savepoint", default_of("savepoint")),
        operation=_choice(opts, "operation", OPERATIONS, default_of("operation")) or "upsert",
        max_parallelism=_int(opts, "maxParallelism", low=1, high=UPPER_BOUND_MAX_PARALLELISM),
        state_kind=_choice(opts, "stateKind", kinds, None),
        checkpoint_id=_int(opts, "checkpointId", low=0),
        ttl_ms=_int(opts, "ttlMs", low=1),
        list_mode=_choice(opts, "listMode", LIST_MODES, None),
        table=table,
        time_domain=_choice(opts, "timeDomain", TIME_DOMAINS, None),
    )
