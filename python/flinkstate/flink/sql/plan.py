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
from flinkstate.flink.sql.naming import Column, node_names, row_names

__all__ = ["SqlPlan", "load_plan", "parse_plan", "row_names"]

_OP_ID = re.compile(r"\[(\d+)\]\s*$")
_UID = re.compile(r"^(\d+)_[a-z-]+$")
# nodes whose output keeps each input column at its position (a prefix at least): a made-up name is looked up through them
_PASS = ("stream-exec-exchange", "stream-exec-calc", "stream-exec-drop-update-before", "stream-exec-mini-batch-assigner",
         "stream-exec-watermark-assigner", "stream-exec-changelog-normalize", "stream-exec-deduplicate", "stream-exec-rank",
         "stream-exec-sort-limit", "stream-exec-limit", "stream-exec-temporal-sort", "stream-exec-sort", "stream-exec-window-deduplicate",
         "stream-exec-window-rank", "stream-exec-over-aggregate", "stream-exec-window-table-function", "stream-exec-union",
         "stream-exec-sink")


# exec nodes whose operators' transformations are not named as the node (the planner's *_TRANSFORMATION constants)
_TRANSFORMATIONS = {
    "stream-exec-sort-limit": ("rank",), "stream-exec-limit": ("rank",), "stream-exec-window-table-function": ("window",),
    "stream-exec-table-source-scan": ("source",), "stream-exec-values": ("values",), "stream-exec-process-table-function": ("process",),
    "stream-exec-sink": ("sink", "upsert-materialize", "constraint-validator", "partitioner", "timestamp-inserter",
                         "watermark-timestamp-assigner"),
    "stream-exec-lookup-join": ("lookup-join", "lookup-join-materialize", "lookup-join-key-ordered", "custom-shuffle"),
    "stream-exec-match": ("match", "timestamp-inserter"),
    "stream-exec-interval-join": ("interval-join", "filter-left", "filter-right", "pad-left", "pad-right"),
}


def _made_up(name: str) -> bool:
    """A name the planner made up ($f2, $2, EXPR$0, w0$o0) rather than one the SQL gave."""
    return "$" in name


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
        """The uids a job run from this plan gives its operators (`<id>_<transformation>`, e.g. 6_group-aggregate, 9_rank
        of a SortLimit, 12_upsert-materialize of a sink): Flink 1.x metadata records operators by their hash only, and
        these name them."""
        out = []
        for i, n in sorted(self.nodes.items()):
            kind = _kind(n)
            out += [f"{i}_{t}" for t in _TRANSFORMATIONS.get(kind, (kind.removeprefix("stream-exec-"),))]
        return tuple(out)

    def node_of(self, op: Any) -> dict[str, Any] | None:
        """The exec node of a Flink operator named `<Kind>[<id>]` by the planner (or with uid `<id>_<type>`), if any."""
        m = _OP_ID.search(op.name or "") or _UID.match(op.uid or "") or _UID.match(op.name or "")
        return self.nodes.get(int(m.group(1))) if m else None

    def names(self, node_id: int) -> list[Column]:
        """A node's output names, made-up ones (`$f2`) replaced by what a later projection calls the same column."""
        node = self.nodes[node_id]
        names = list(row_names(node.get("outputType")))
        for i, n in enumerate(names):
            if _made_up(n):
                better = self._downstream(node_id, i, 8)
                if better:
                    names[i] = n.named(better)
        return names

    def _downstream(self, node_id: int, index: int, hops: int) -> str | None:
        for nxt in self.outputs.get(node_id, ()):
            node = self.nodes[nxt]
            kind = _kind(node)
            if kind not in _PASS:
                continue
            at = index
            if kind == "stream-exec-calc" and node.get("projection") is not None:
                refs = [j for j, p in enumerate(node["projection"]) if p.get("kind") == "INPUT_REF" and p.get("inputIndex") == index]
                if not refs:
                    continue
                at = refs[0]
            out = row_names(node.get("outputType"))
            if at < len(out) and not _made_up(out[at]):
                return out[at]
            if hops > 0:
                found = self._downstream(nxt, at, hops - 1)
                if found:
                    return found
        return None

    def input_names(self, node_id: int, side: int = 0) -> list[str]:
        """The column names of a node's input (`side` 1: a join's right input)."""
        ins = self.inputs.get(node_id, [])
        return self.names(ins[side]) if side < len(ins) else []

    def naming(self, op: Any, state: str, dec: Any) -> SqlNames:
        """Column names of one state of a SQL operator (the `sql_states` naming hook); f0..fn where the plan does not say."""
        node = self.node_of(op)
        if node is None:
            return SqlNames(notes=(f"operator {op.name!r} is not a node of the plan {self.path}",))
        return node_names(self, node, _kind(node), state, dec)


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
