"""Which columns each state of each SQL operator holds, by its exec node in the compiled plan.

One rule per stateful exec node of Flink's planner (`StreamExec*`), read from the table runtime's operators: what their
state keys by (the GROUP BY, PARTITION BY, join or unique key columns, the sink's primary key) and which rows their
states keep (the input's, a join side's, a sort key, a unique key, the accumulators of the aggregate calls). A rule
gives names only; a name list that does not fit the state's row (another arity) leaves that row f0..fn
(`decoders._named`), so a plan of another Flink release can never mislabel a column, only leave it unnamed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from flinkstate.flink.sql.decoders import SqlNames

__all__ = ["Column", "node_names", "accumulators", "row_names", "type_root", "NAMED_KINDS"]


class _Plan(Protocol):
    def names(self, node_id: int) -> list[Column]: ...

    def input_names(self, node_id: int, side: int = 0) -> list[str]: ...


class Column(str):
    """A column name from the plan, with the root of its SQL type there (LogicalTypeRoot: INTEGER, VARCHAR, ROW, ...;
    None: unknown): a name is given to a state's field only where the field's own type has that root."""

    root: str | None

    def __new__(cls, name: str, root: str | None = None) -> Column:
        out = super().__new__(cls, name)
        out.root = root
        return out

    def named(self, name: str) -> Column:
        """Another name for the same column (its type root kept)."""
        return Column(name, self.root)


# SQL type names as the plan writes them -> LogicalTypeRoot (the others are their own root)
_ROOTS = {"INT": "INTEGER", "STRING": "VARCHAR", "BYTES": "VARBINARY", "TIME": "TIME_WITHOUT_TIME_ZONE",
          "TIMESTAMP": "TIMESTAMP_WITHOUT_TIME_ZONE", "TIMESTAMP_LTZ": "TIMESTAMP_WITH_LOCAL_TIME_ZONE", "DEC": "DECIMAL",
          "NUMERIC": "DECIMAL", "INTEGER": "INTEGER"}


def type_root(t: Any) -> str | None:
    """The LogicalTypeRoot of a plan's type: text ("VARCHAR(10) NOT NULL", "TIMESTAMP(3) WITH LOCAL TIME ZONE") or JSON."""
    if isinstance(t, dict):
        root = t.get("type")
        return str(root) if root else None
    if not isinstance(t, str) or not t:
        return None
    text = t.strip()
    if "WITH LOCAL TIME ZONE" in text:
        return "TIMESTAMP_WITH_LOCAL_TIME_ZONE"
    if "WITH TIME ZONE" in text:
        return "TIMESTAMP_WITH_TIME_ZONE"
    word = text
    for stop in "(< ":
        word = word.split(stop, 1)[0]
    return _ROOTS.get(word.upper(), word.upper())


def row_names(t: Any) -> tuple[Column, ...]:
    """The fields of a plan's row type with their type roots: "ROW<`a` BIGINT, `b` ROW<`x` INT>>" or JSON
    {"type": "ROW", "fields": [{"name": ..., "fieldType": ...}]}."""
    if isinstance(t, dict):
        return tuple(Column(str(f.get("name")), type_root(f.get("fieldType"))) for f in t.get("fields", ()))
    if not isinstance(t, str) or not t.startswith("ROW<"):
        return ()
    names: list[Column] = []
    depth, i = 0, 4
    while i < len(t):
        c = t[i]
        if c == "`" and depth == 0:
            j = i + 1
            name = []
            while j < len(t):
                if t[j] == "`" and t[j + 1 : j + 2] == "`":
                    name.append("`")
                    j += 2
                    continue
                if t[j] == "`":
                    break
                name.append(t[j])
                j += 1
            i = start = j + 1
            # the field's type, up to the next top-level comma
            while i < len(t) and not (depth == 0 and t[i] in ",>"):
                if t[i] in "<(":
                    depth += 1
                elif t[i] in ">)":
                    depth -= 1
                i += 1
            names.append(Column("".join(name), type_root(t[start:i])))
            continue
        i += 1
    return tuple(names)


# accumulators per aggregate function (built-in DeclarativeAggregateFunction buffers); others hold one
_ACCUMULATORS = {"AVG": ("sum", "count"), "LISTAGG": ("delimiter", "acc"), "SINGLE_VALUE": ("value", "count")}


def _pick(names: list[str], indexes: Any) -> tuple[str, ...]:
    return tuple(names[i] for i in (indexes or ()) if isinstance(i, int) and 0 <= i < len(names))


def _fields(spec: Any) -> list[int]:
    """Field indexes of a partition or sort spec ({"fields": [0, 1]} or {"fields": [{"index": 0, ...}]})."""
    out = []
    for f in (spec or {}).get("fields") or []:
        out.append(f["index"] if isinstance(f, dict) else f)
    return out


def _arity(dec: Any, part: str) -> int | None:
    """The number of fields of the first RowData in a state's key, map key or value (None: none there)."""
    node = {"key": dec.key_node, "value": dec.elem_node,
            "user_key": dec.value_node.children[0] if getattr(dec, "kind", "") == "MAP" else None}.get(part)

    def first(n: Any) -> int | None:
        if n is None:
            return None
        if n.kind == "rowdata":
            return len(n.sql)
        for c in n.children:
            found = first(c)
            if found is not None:
                return found
        return None

    return first(node)


def accumulators(calls: list[dict[str, Any]], arity: int | None, names: list[str] | None = None) -> tuple[str, ...] | None:
    """The accumulator fields of aggregate calls (AVG keeps sum and count; a retracting aggregate a trailing count1; each
    distinct argument list a state-backed view `distinctAcc_<i>`), when their number matches the state's row."""
    out: list[str] = []
    distinct: list[tuple[Any, ...]] = []
    for i, call in enumerate(calls):
        fn = str(call.get("internalName", "")).strip("$").split("$")[0].upper()
        parts = _ACCUMULATORS.get(fn)
        # an accumulator is not of its call's result type: its name only, no type root
        name = str(names[i]) if names is not None and i < len(names) else str(call.get("name"))
        out += [f"{name}_{p}" for p in parts] if parts else [name]
        if call.get("distinct"):
            args = tuple(call.get("argList") or ())
            if args not in distinct:
                distinct.append(args)
    views = [f"distinctAcc_{i}" for i in range(len(distinct))]
    for candidate in (out + views, out + ["count1"] + views):
        if arity is None or arity == len(candidate):
            return tuple(candidate)
    return None


def _side(state: str) -> int:
    return 1 if "right" in state.lower() else 0


def _aggregate(plan: _Plan, node: dict[str, Any], state: str, dec: Any) -> SqlNames:
    out = plan.names(int(node["id"]))
    key = tuple(out[: len(node.get("grouping") or [])])
    if state in ("accState", "window-aggs"):
        calls = node.get("aggCalls") or []
        names = out[len(key): len(key) + len(calls)]
        return SqlNames(key=key, value=accumulators(calls, _arity(dec, "value"), names))
    return SqlNames(key=key)  # a data view (agg0$map, distinctAcc_0): keys and values of the aggregated column


def _over(plan: _Plan, node: dict[str, Any], state: str, dec: Any) -> SqlNames:
    nid = int(node["id"])
    spec = node.get("overSpec") or {}
    names_in = plan.input_names(nid)
    key = _pick(names_in, _fields(spec.get("partition")))
    if state == "accState":
        calls = [c for g in spec.get("groups") or [] for c in g.get("aggCalls") or []]
        out = plan.names(nid)
        first = int(spec.get("originalInputFields", len(names_in)))
        return SqlNames(key=key, value=accumulators(calls, _arity(dec, "value"), out[first: first + len(calls)]))
    return SqlNames(key=key, value=tuple(names_in))


def _input_rows(key_of: Callable[[dict[str, Any], list[str]], tuple[str, ...]]) -> Callable[..., SqlNames]:
    """A node keyed by some of its input's columns whose states keep its input's rows (dedup, normalize, CEP, sorts)."""

    def rule(plan: _Plan, node: dict[str, Any], state: str, dec: Any) -> SqlNames:
        names_in = plan.input_names(int(node["id"]))
        return SqlNames(key=key_of(node, names_in), value=tuple(names_in))

    return rule


def _rank(plan: _Plan, node: dict[str, Any], state: str, dec: Any) -> SqlNames:
    """Rank, SortLimit, Limit (AppendOnlyTopN, RetractableTopN, UpdatableTopN, FastTop1, AppendOnlyFirstN) and
    WindowRank: keyed by the partition; map keys are sort keys (a retracting Top-N's sorted map too) or, for an
    updatable Top-N, the input's unique key; values are the input's rows."""
    names_in = plan.input_names(int(node["id"]))
    partition = _fields(node.get("partition") or node.get("partitionSpec"))
    order = tuple(_pick(names_in, _fields(node.get("orderBy") or node.get("sortSpec"))))
    key = _pick(names_in, partition)
    if state == "data-state-with-update":
        unique = _pick(names_in, (node.get("rankStrategy") or {}).get("primaryKeys"))
        return SqlNames(key=key, user_key=unique, value=tuple(names_in))
    if state == "sorted-map":
        return SqlNames(key=key, value=order)
    return SqlNames(key=key, user_key=order, value=tuple(names_in))


def _join(plan: _Plan, node: dict[str, Any], state: str, dec: Any) -> SqlNames:
    """Regular joins (JoinRecordStateViews): a side whose unique key is in the join key keeps its row per join key; a
    side with a unique key outside it keeps rows by that key (the smallest of the side's upsert keys, as
    JoinUtil.analyzeJoinInput picks it); a side without keeps each distinct row with its count (outer joins: with the
    number of rows of the other side it joined)."""
    spec = node.get("joinSpec") or {}
    side = _side(state)
    names_in = plan.input_names(int(node["id"]), side)
    key = _pick(names_in, spec.get("rightKeys" if side else "leftKeys"))
    user_key: tuple[str, ...] | None = tuple(names_in)
    upsert = node.get("rightUpsertKeys" if side else "leftUpsertKeys") or node.get("rightUniqueKeys" if side else "leftUniqueKeys")
    arity = _arity(dec, "user_key")
    if upsert and arity is not None and arity != len(names_in):
        smallest = upsert[0]
        for k in upsert[1:]:
            smallest = smallest if len(smallest) <= len(k) else k
        user_key = _pick(names_in, smallest)
    return SqlNames(key=key, user_key=user_key, value=tuple(names_in))


def _two_sided(spec_of: Callable[[dict[str, Any]], dict[str, Any]]) -> Callable[..., SqlNames]:
    """Interval, temporal and window joins: each side's states keep that side's rows, keyed by its join key columns."""

    def rule(plan: _Plan, node: dict[str, Any], state: str, dec: Any) -> SqlNames:
        spec = spec_of(node)
        side = _side(state)
        names_in = plan.input_names(int(node["id"]), side)
        return SqlNames(key=_pick(names_in, spec.get("rightKeys" if side else "leftKeys")), value=tuple(names_in))

    return rule


def _sink(plan: _Plan, node: dict[str, Any], state: str, dec: Any) -> SqlNames:
    """The sink's upsert materializer (SinkUpsertMaterializer, its 2.x successors): keyed by the sink's primary key,
    keeping the rows the sink got."""
    table = ((node.get("dynamicTableSink") or {}).get("table") or {}).get("resolvedTable") or {}
    schema = table.get("schema") or {}
    columns = [c.get("name") for c in schema.get("columns") or [] if c.get("kind", "PHYSICAL") == "PHYSICAL"]
    key = tuple((schema.get("primaryKey") or {}).get("columns") or ())
    rows = tuple(plan.input_names(int(node["id"])) or columns)
    return SqlNames(key=key, user_key=rows, value=rows)  # 2.x MAP strategy: rows are map keys too (rowToSqnState)


def _lookup(plan: _Plan, node: dict[str, Any], state: str, dec: Any) -> SqlNames:
    """A lookup join whose input updates (KeyedLookupJoinWrapper, `requireUpsertMaterialize`): keyed by its input's
    upsert key (2.x; 1.x: the input fields its lookup keys refer to), keeping the dimension table's rows it found
    (projected as the join reads them)."""
    temporal = node.get("temporalTable") or {}
    dim = list(row_names(temporal.get("outputType") or ((temporal.get("lookupTableSource") or {}).get("outputType"))))
    projection = node.get("projectionOnTemporalTable")
    if projection:
        dim = [dim[p["inputIndex"]] for p in projection if p.get("kind") == "INPUT_REF" and p.get("inputIndex", -1) < len(dim)]
    key_fields = node.get("inputUpsertKey")
    if key_fields is None:  # Flink 1.x: keyed by the input fields the lookup keys refer to, in field order
        key_fields = sorted(k["index"] for k in (node.get("lookupKeys") or {}).values() if k.get("type") == "FieldRef")
    key = _pick(plan.input_names(int(node["id"])), key_fields)
    return SqlNames(key=key or None, value=tuple(dim) or None)


def _multi_join(plan: _Plan, node: dict[str, Any], state: str, dec: Any) -> SqlNames:
    """Flink 2.x MultiJoin (StreamingMultiJoinOperator, `multi-join-input-<i>`): each input's state keyed by the common
    join key, keeping its rows by the input's unique key (values: the rows), else each row with its count (for inputs
    after the first, wrapped with its join key row: that wrapper's fields stay f0, f1)."""
    i = int(state.rsplit("-", 1)[-1]) if state.rsplit("-", 1)[-1].isdigit() else 0
    names_in = plan.input_names(int(node["id"]), i)
    attrs = (node.get("joinAttributeMap") or {}).get(str(i)) or []
    key = _pick(names_in, [a.get("rightFieldIndex") for a in attrs if a.get("rightInputId") == i])
    unique = (node.get("inputUniqueKeys") or [])
    keys = unique[i] if i < len(unique) else []
    user_key: tuple[str, ...] = tuple(names_in)
    if keys:
        smallest = keys[0]
        for k in keys[1:]:
            smallest = smallest if len(smallest) <= len(k) else k
        user_key = _pick(names_in, smallest)
    return SqlNames(key=key or None, user_key=user_key, value=tuple(names_in))


def _incremental(plan: _Plan, node: dict[str, Any], state: str, dec: Any) -> SqlNames:
    """A split distinct aggregate's IncrementalGroupAggregate: keyed by its partial grouping (the group and the
    distinct bucket), its distinct views' keys and counts."""
    return SqlNames(key=_pick(plan.input_names(int(node["id"])), node.get("partialAggGrouping")) or None)


def _session_tvf(plan: _Plan, node: dict[str, Any], state: str, dec: Any) -> SqlNames:
    names_in = plan.input_names(int(node["id"]))
    window = (node.get("windowing") or {}).get("window") or {}
    return SqlNames(key=_pick(names_in, window.get("partition_key_indices") or window.get("partitionKeyIndices")),
                    value=tuple(names_in))


NAMERS: dict[str, Callable[..., SqlNames]] = {
    "stream-exec-incremental-group-aggregate": _incremental,
    "stream-exec-multi-join": _multi_join,
    **dict.fromkeys(("stream-exec-group-aggregate", "stream-exec-global-group-aggregate",
                     "stream-exec-group-window-aggregate", "stream-exec-window-aggregate", "stream-exec-global-window-aggregate",
                     "stream-exec-group-table-aggregate"), _aggregate),
    "stream-exec-over-aggregate": _over,
    "stream-exec-deduplicate": _input_rows(lambda n, names: _pick(names, n.get("uniqueKeys"))),
    "stream-exec-changelog-normalize": _input_rows(lambda n, names: _pick(names, n.get("uniqueKeys"))),
    "stream-exec-window-deduplicate": _input_rows(lambda n, names: _pick(names, n.get("partitionKeys"))),
    "stream-exec-match": _input_rows(lambda n, names: _pick(names, _fields((n.get("matchSpec") or {}).get("partition")))),
    "stream-exec-temporal-sort": _input_rows(lambda n, names: ()),
    "stream-exec-sort": _input_rows(lambda n, names: ()),
    **dict.fromkeys(("stream-exec-rank", "stream-exec-sort-limit", "stream-exec-limit", "stream-exec-window-rank"), _rank),
    "stream-exec-join": _join,
    "stream-exec-interval-join": _two_sided(lambda n: (n.get("intervalJoinSpec") or {}).get("joinSpec") or {}),
    "stream-exec-temporal-join": _two_sided(lambda n: n.get("joinSpec") or {}),
    "stream-exec-window-join": _two_sided(lambda n: n.get("joinSpec") or {}),
    "stream-exec-sink": _sink,
    "stream-exec-lookup-join": _lookup,
    "stream-exec-window-table-function": _session_tvf,
}
NAMED_KINDS = tuple(sorted(NAMERS))


def node_names(plan: _Plan, node: dict[str, Any], kind: str, state: str, dec: Any) -> SqlNames:
    """The column names of one state of the operator of exec node `node` (kind: its type without the version)."""
    rule = NAMERS.get(kind)
    if rule is None:
        names_in = plan.input_names(int(node["id"]))
        return SqlNames(value=tuple(names_in) or None, node=node.get("type"),
                        notes=(f"exec node {node.get('type')} has no naming rule: its rows take its input's column names",))
    got = rule(plan, node, state, dec)
    return SqlNames(got.key, got.value, got.user_key, got.value_element, node.get("type"), got.notes)
