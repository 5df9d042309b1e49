"""Flink's compiled plan (`COMPILE PLAN` JSON) as the source of a SQL job's column names.

A compiled plan lists each exec node with its id, type (`stream-exec-group-aggregate_1`), output row type and the
node's own facts (grouping keys, aggregate calls, join keys, partition and order of a rank). The planner names each
stateful operator `<Kind>[<node id>]`, so an operator is matched to its node by that id, and its states' RowData parts
are named as the SQL names them: a group aggregate's key by its GROUP BY columns and its accumulators by the
aggregate calls (`cnt`, `av_sum`/`av_count` for AVG's two), a deduplication's or rank's rows by the query's columns,
a join's records by each side's columns. Names the planner made up (`$f2`, `$1`) are replaced by the name a later
projection gives the same column where there is one.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from flinkstate.core.errors import InvalidArgumentError
from flinkstate.flink.sql.decoders import SqlNames

__all__ = ["SqlPlan", "load_plan", "parse_plan", "row_names"]

_OP_ID = re.compile(r"\[(\d+)\]\s*$")
_UID = re.compile(r"^(\d+)_[a-z-]+$")
# accumulators per aggregate function (built-in DeclarativeAggregateFunction buffers); others hold one
_ACCUMULATORS = {"AVG": ("sum", "count")}
_PASS = ("stream-exec-exchange", "stream-exec-calc", "stream-exec-drop-update-before", "stream-exec-mini-batch-assigner",
         "stream-exec-watermark-assigner", "stream-exec-changelog-normalize")


def row_names(t: Any) -> tuple[str, ...]:
    """The field names of a plan's row type: "ROW<`a` BIGINT, `b` ROW<`x` INT>>" or {"type": "ROW", "fields": [...]}."""
    if isinstance(t, dict):
        return tuple(str(f.get("name")) for f in t.get("fields", ()))
    if not isinstance(t, str) or not t.startswith("ROW<"):
        return ()
    names, depth, i = [], 0, 4
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
            names.append("".join(name))
            i = j + 1
            # skip the field's type up to the next top-level comma
            while i < len(t) and not (depth == 0 and t[i] in ",>"):
                if t[i] in "<(":
                    depth += 1
                elif t[i] in ">)":
                    depth -= 1
                i += 1
            continue
        i += 1
    return tuple(names)


def _kind(node: dict[str, Any]) -> str:
    return str(node.get("type", "")).rsplit("_", 1)[0]


@dataclass(frozen=True)
class SqlPlan:
    """A parsed compiled plan: its nodes by id and the edges between them."""

    path: str
    nodes: dict[int, dict[str, Any]]
    inputs: dict[int, list[int]]
    outputs: dict[int, list[int]]

    def uids(self) -> tuple[str, ...]:
        """The uids a job run from this plan gives its operators (`<id>_<type>`, e.g. 6_group-aggregate): Flink 1.x
        metadata records operators by their hash only, and these name them."""
        return tuple(f"{i}_{_kind(n).removeprefix('stream-exec-')}" for i, n in sorted(self.nodes.items()))

    def node_of(self, op: Any) -> dict[str, Any] | None:
        """The exec node of a Flink operator named `<Kind>[<id>]` by the planner (or with uid `<id>_<type>`), if any."""
        m = _OP_ID.search(op.name or "") or _UID.match(op.uid or "") or _UID.match(op.name or "")
        return self.nodes.get(int(m.group(1))) if m else None

    def _names(self, node_id: int) -> list[str]:
        """A node's output names, made-up ones (`$f2`) replaced by what a later projection calls the same column."""
        node = self.nodes[node_id]
        names = list(row_names(node.get("outputType")))
        for i, n in enumerate(names):
            if n.startswith("$"):
                better = self._downstream(node_id, i, 4)
                if better:
                    names[i] = better
        return names

    def _downstream(self, node_id: int, index: int, hops: int) -> str | None:
        for nxt in self.outputs.get(node_id, ()):
            node = self.nodes[nxt]
            kind = _kind(node)
            if kind not in _PASS:
                continue
            if kind == "stream-exec-calc" and node.get("projection") is not None:
                at = [j for j, p in enumerate(node["projection"]) if p.get("kind") == "INPUT_REF" and p.get("inputIndex") == index]
                if not at:
                    continue
                index = at[0]
            out = row_names(node.get("outputType"))
            if index < len(out) and not out[index].startswith("$"):
                return out[index]
            if hops > 0:
                found = self._downstream(nxt, index, hops - 1)
                if found:
                    return found
        return None

    def _input_names(self, node_id: int, side: int = 0) -> list[str]:
        ins = self.inputs.get(node_id, [])
        return self._names(ins[side]) if side < len(ins) else []

    def naming(self, op: Any, state: str, dec: Any) -> SqlNames:
        """Column names of one state of a SQL operator (the `sql_states` naming hook); f0..fn where the plan does not say."""
        node = self.node_of(op)
        if node is None:
            return SqlNames(notes=(f"operator {op.name!r} is not a node of the plan {self.path}",))
        kind = _kind(node)
        nid = int(node["id"])
        out = self._names(nid)
        arity = _arities(dec)
        if kind in ("stream-exec-group-aggregate", "stream-exec-global-group-aggregate", "stream-exec-group-window-aggregate",
                    "stream-exec-window-aggregate", "stream-exec-global-window-aggregate", "stream-exec-incremental-group-aggregate"):
            grouping = node.get("grouping") or []
            key = tuple(out[: len(grouping)])
            value = _accumulators(node, arity.get("value"))
            return SqlNames(key=key, value=value, node=node["type"])
        if kind == "stream-exec-deduplicate":
            keys = node.get("uniqueKeys") or []
            return SqlNames(key=tuple(out[i] for i in keys if i < len(out)), value=tuple(out), node=node["type"])
        if kind == "stream-exec-rank":
            fields = (node.get("partition") or {}).get("fields") or []
            order = [f["index"] for f in ((node.get("orderBy") or {}).get("fields") or [])]
            names_in = self._input_names(nid) or out
            if len(out) >= len(names_in):  # the rank's output starts with its input's columns, named further down
                names_in = [o if n.startswith("$") else n for n, o in zip(names_in, out, strict=False)]
            return SqlNames(key=tuple(names_in[i] for i in fields), user_key=tuple(names_in[i] for i in order),
                            value=tuple(names_in), value_element=tuple(names_in), node=node["type"])
        if kind == "stream-exec-join":
            spec = node.get("joinSpec") or {}
            left = "left" in state
            names_in = self._input_names(nid, 0 if left else 1)
            keys = spec.get("leftKeys" if left else "rightKeys") or []
            return SqlNames(key=tuple(names_in[i] for i in keys if i < len(names_in)), user_key=tuple(names_in),
                            value=tuple(names_in), node=node["type"])
        names_in = self._input_names(nid) or out
        return SqlNames(value=tuple(names_in), node=node["type"])


def _arities(dec: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    if getattr(dec, "elem_node", None) is not None and dec.elem_node.kind == "rowdata":
        out["value"] = len(dec.elem_node.sql)
    return out


def _accumulators(node: dict[str, Any], arity: int | None) -> tuple[str, ...] | None:
    """The accumulator fields of an aggregate node's calls, when their number matches the state's row (else None)."""
    names: list[str] = []
    for call in node.get("aggCalls") or []:
        fn = str(call.get("internalName", "")).strip("$").split("$")[0].upper()
        parts = _ACCUMULATORS.get(fn)
        name = str(call.get("name"))
        names += [f"{name}_{p}" for p in parts] if parts else [name]
    if arity is not None and arity == len(names) + 1 and node.get("needRetraction"):
        names.append("count1")  # the row count a retracting aggregate keeps after its calls' accumulators
    return tuple(names) if arity is None or arity == len(names) else None


def parse_plan(text: str, path: str = "<plan>") -> SqlPlan:
    """A compiled plan from its JSON text; an InvalidArgumentError naming the file when it is not one."""
    try:
        doc = json.loads(text)
        nodes = {int(n["id"]): n for n in doc["nodes"]}
        edges = [(int(e["source"]), int(e["target"])) for e in doc.get("edges", ())]
    except (ValueError, KeyError, TypeError) as e:
        raise InvalidArgumentError(f"{path} is not a Flink compiled plan (COMPILE PLAN JSON with nodes and edges): {e}") from e
    inputs: dict[int, list[int]] = {}
    outputs: dict[int, list[int]] = {}
    for s, t in edges:
        inputs.setdefault(t, []).append(s)
        outputs.setdefault(s, []).append(t)
    return SqlPlan(path, nodes, inputs, outputs)


def load_plan(path: str, files: Any = None) -> SqlPlan:
    """The compiled plan at path (local or a URL the checkpoint's FileIO reads)."""
    try:
        if files is not None and "://" in path:
            text = files.read(path).decode("utf-8")
        else:
            with open(path, encoding="utf-8") as f:
                text = f.read()
    except OSError as e:
        raise InvalidArgumentError(f"sql_plan {path}: cannot be read: {e}") from e
    return parse_plan(text, path)
