"""A parsed serializer snapshot: its kind, class, nested serializers and what its snapshot configured (`TypeNode`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from flinkstate.flink.serde.sqltypes import SqlType

__all__ = ["FIXED_WIDTH", "TypeNode"]

# Serialized width in bytes of fixed-length kinds (where Flink's TypeSerializer.getLength() is >= 0; "void" is the one
# byte VoidNamespace, GlobalWindow and Void write, though VoidNamespaceSerializer.getLength() says 0).
FIXED_WIDTH = {"long": 8, "sortedlong": 8, "int": 4, "short": 2, "byte": 1, "double": 8, "float": 4, "bool": 1, "char": 2, "void": 1,
               "localdate": 6, "localtime": 7, "localdatetime": 13, "instant": 12, "sqldate": 8, "sqltime": 8, "sqltimestamp": 12,
               "enum": 4, "timewindow": 16, "date": 8, "nullvalue": 0, "tuple0": 1, "eventid": 12}


@dataclass(frozen=True)
class TypeNode:
    """One serializer: its kind, snapshot class and nested serializers (fields for row/tuple/pojo)."""

    kind: str
    cls: str
    children: tuple[TypeNode, ...] = ()
    names: tuple[str, ...] = ()
    legacy_row: bool = False
    payload: bytes = b""  # an opaque (Kryo/Avro) snapshot's payload, kept to write it back unchanged
    logical: tuple[str, ...] = ()  # table runtime: the SQL types of a RowData's fields (or an array's element)
    snapshot: bytes = b""  # the whole versioned snapshot as read (table runtime, unknown classes, and every state's top-level serializer): written back verbatim
    params: tuple[int, ...] = ()  # precision (and scale) of table-runtime timestamps and decimals; flags of other kinds
    sql: tuple[SqlType, ...] = ()  # table runtime: the SQL types of a RowData's fields (or an array's element)
    # why an "unknown" snapshot could not be parsed (its extent was found by the rest of the header); it names the file it
    # was read from, so two subtasks' equal snapshots stay equal
    error: str = field(default="", compare=False)

    @property
    def fixed_width(self) -> int:
        """The serialized width when fixed, else -1 (Flink's getLength)."""
        if self.kind in FIXED_WIDTH:
            return FIXED_WIDTH[self.kind]
        if self.kind == "tuple" and self.children and all(c.fixed_width >= 0 for c in self.children):
            return sum(c.fixed_width for c in self.children)
        if self.kind == "timestampdata":
            return 8 if self.params[0] <= 3 else 12
        if self.kind == "decimaldata" and self.params[0] <= 18:
            return 8
        if self.kind == "nullable" and self.params and self.params[0] > 0:
            return 1 + self.params[0]  # NullableSerializer with padding: a null takes as many bytes as a value
        if self.kind == "transparent":
            return self.children[0].fixed_width
        return -1
