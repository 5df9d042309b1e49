"""Flink serializer snapshots as JSON, and the checkpoint properties an import leaves for export.

An import records each operator's Flink operator id and serializer snapshots as checkpoint properties, so an
export writes them back as they were (a POJO stays that POJO, a Kryo payload its bytes).
"""

from __future__ import annotations

import base64
from typing import Any

from flinkstate.flink.serde.serializers import TypeNode
from flinkstate.format.constants import FLINK_OPERATOR_ID_PROPERTY

__all__ = ["OPERATOR_ID_PROPERTY", "SERIALIZERS_PROPERTY", "node_from_json", "node_to_json"]

#: checkpoint property holding the Flink operator id (hex) of an imported operator, so export keeps it
OPERATOR_ID_PROPERTY = FLINK_OPERATOR_ID_PROPERTY
#: checkpoint property holding an imported operator's serializer snapshots (JSON), so export writes them back
SERIALIZERS_PROPERTY = "flink.serializers."


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
