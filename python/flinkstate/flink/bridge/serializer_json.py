"""Flink serializer snapshots as JSON, and the checkpoint properties an import leaves for export.

An import records each operator's Flink operator id and serializer snapshots as checkpoint properties, so an
export writes them back as they were (a POJO stays that POJO, a Kryo payload its bytes).
"""

from __future__ import annotations

import base64
from typing import Any

from flinkstate.flink.serde.serializers import TypeNode
from flinkstate.format.constants import FLINK_OPERATOR_ID_PROPERTY

__all__ = ["IMPORT_CHECKPOINT_PROPERTY", "OPERATOR_ID_PROPERTY", "OPERATOR_NAME_PROPERTY", "OPERATOR_STATE_PREFIX", "SERIALIZERS_PROPERTY", "SOURCE_RELEASE_PROPERTY",
           "node_from_json", "node_to_json"]

#: checkpoint property holding the Flink operator id (hex) of an imported operator, so export keeps it
OPERATOR_ID_PROPERTY = FLINK_OPERATOR_ID_PROPERTY
#: checkpoint property holding the name Flink's `_metadata` (2.x) gave an imported operator, which export writes back
OPERATOR_NAME_PROPERTY = "flink.operator-name."
#: checkpoint property holding an imported operator's serializer snapshots (JSON), so export writes them back
SERIALIZERS_PROPERTY = "flink.serializers."
#: in an operator's serializers: the entry of an operator (list, union or broadcast) state, "_operator_state/<name>"
OPERATOR_STATE_PREFIX = "_operator_state/"
#: checkpoint property holding the Flink releases that may have written an imported operator's state ("1.19,1.20"; "<1.18"
#: for metadata older than Flink 1.18 writes): what its serializers' bytes mean (Kryo 2 in 1.x, Kryo 5 in 2.x)
SOURCE_RELEASE_PROPERTY = "flink.source-release."
#: checkpoint property holding the id of the flinkstate checkpoint an operator was imported in: files created by later
#: checkpoints hold changes, which an export checks against the operator's serializers before it writes anything
IMPORT_CHECKPOINT_PROPERTY = "flink.import-checkpoint."


def node_to_json(n: TypeNode) -> dict[str, Any]:
    """A parsed serializer snapshot as JSON (kind, class, nested serializers, field names, and the bytes an export writes
    back: a Kryo/Avro payload, a table-runtime or unknown snapshot, base64)."""
    d: dict[str, Any] = {"kind": n.kind, "cls": n.cls, "children": [node_to_json(c) for c in n.children], "names": list(n.names),
                         "legacy_row": n.legacy_row}
    for name in ("payload", "snapshot"):
        if getattr(n, name):
            d[name] = base64.b64encode(getattr(n, name)).decode("ascii")
    if n.params:
        d["params"] = list(n.params)
    if n.logical:
        d["logical"] = list(n.logical)
    if n.sql:
        d["sql"] = [t.to_json() for t in n.sql]  # the SQL types of a RowData's fields: a write encodes columns with them
    return d


def node_from_json(d: dict[str, Any]) -> TypeNode:
    """Inverse of `node_to_json`."""
    from flinkstate.flink.serde.sqltypes import sql_type_from_json

    return TypeNode(d["kind"], d["cls"], tuple(node_from_json(c) for c in d["children"]), tuple(d["names"]), bool(d["legacy_row"]),
                    payload=base64.b64decode(d.get("payload", "")), logical=tuple(d.get("logical", ())),
                    snapshot=base64.b64decode(d.get("snapshot", "")), params=tuple(d.get("params", ())),
                    sql=tuple(sql_type_from_json(t) for t in d.get("sql", ())))
