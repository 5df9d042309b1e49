"""The one table of serializer snapshot classes flinkstate knows: how each is parsed, what its values become, and which test
shows it.

`flinkjobs/inventory.py` lists every `TypeSerializerSnapshot` class in the Flink jars we target (2.3 and 1.20: flink-dist,
the table runtime and planner, CEP, the connectors in lib/, flink-python) by reading their class files, and
`tests/flinkstate/flink/serde/test_snapshot_registry.py` checks that list against this table both ways: a class the jars
hold and this table lacks, or one this table claims a reader for that the bytecode contradicts, fails the suite. Nothing
outside `flink/serde/` learns a serializer class name.

Stdlib only (the inventory script loads this file by path).

`read` says how a snapshot's payload is read (Flink's `readSnapshot`, per version; checked against the bytecode's
hierarchy by the inventory):
- "simple": a SimpleTypeSerializerSnapshot (version 3: nothing; version 2: a class name, read and dropped);
- "generic": a GenericTypeSerializerSnapshot (the type class name);
- "composite" / "composite:<outer>": a CompositeTypeSerializerSnapshot (magic, outer version, outer payload, nested
  snapshots); <outer> names the class's own `readOuterSnapshot` (see `serializers._OUTER`);
- any other name: a class that implements `readSnapshot` itself (see `serializers._DIRECT`).

`outcome`: "decoded" (values to typed Arrow columns), "bytes" (the snapshot parses, values are read and imported as their
serialized bytes where the layout frames them: a whole value, map value or TTL value, or a length-prefixed one),
"refused" (the snapshot parses, so the rest of the header and every other state stay readable, and a state using it
is an UnsupportedSerializerError naming operator, state and class when that state is read).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["OUTCOMES", "Outcome", "SNAPSHOTS", "SORTED_MAP_SNAPSHOT", "Snapshot", "TESTS"]

Outcome = Literal["decoded", "bytes", "refused"]
OUTCOMES: tuple[Outcome, ...] = ("decoded", "bytes", "refused")

# The tests the table points at (file::function): the test suite checks that each exists.
_DS = "tests/flinkstate/flink/test_datastream_states.py::test_every_state_equals_the_flink_dump"
_DS_IMPORT = "tests/flinkstate/flink/test_datastream_states.py::test_every_state_equals_the_flink_dump_after_import"
_PARSE = "tests/flinkstate/flink/serde/test_snapshot_registry.py::test_parse_only_snapshots_parse_and_keep_the_header_readable"
_SQL = "tests/flinkstate/flink/test_sql_savepoints.py::test_sql_savepoint_opens_lists_serializers_and_reads_every_row"
_KRYO = "tests/flinkstate/flink/serde/test_types_more.py::test_kryo_values_are_a_typed_error_or_raw_bytes"
_SQLOPS = "tests/flinkstate/flink/sql/test_sql_operators.py::test_every_sql_state_reads_as_flink_holds_it"
_PYFLINK = "tests/flinkstate/flink/pyflink/test_pyflink.py::test_fixture_equals_what_pyflink_wrote"
TESTS = (_DS, _DS_IMPORT, _PARSE, _SQL, _KRYO, _PYFLINK, _SQLOPS)


@dataclass(frozen=True)
class Snapshot:
    """One serializer snapshot class: how its payload is read, the kind its values decode as, the outcome and its test."""

    cls: str
    read: str
    kind: str
    outcome: Outcome
    test: str
    note: str = ""
    alias: bool = False  # the same kind as another class, never the class written back for that kind


_B = "org.apache.flink.api.common.typeutils.base."
_R = "org.apache.flink.api.java.typeutils.runtime."
_CEP = "org.apache.flink.cep.nfa."
_TR = "org.apache.flink.table.runtime.typeutils."
#: the table runtime's SortedMapSerializer (a retracting Top-N's sorted map): the SQL decoders read its values
SORTED_MAP_SNAPSHOT = _TR + "SortedMapSerializerSnapshot"
_PY = "org.apache.flink.table.runtime.typeutils.serializers.python."
_SCALA1 = "org.apache.flink.api.scala.typeutils."  # Flink 1.x flink-scala
_SCALA2 = "org.apache.flink.table.api.typeutils."  # Flink 2.x: the same classes, in the table planner

_ROWS: list[Snapshot] = [
    # --- aliases first: a kind written back without its snapshot takes the class listed last for it ---
    Snapshot("org.apache.flink.table.runtime.operators.window.TimeWindow$Serializer$TimeWindowSerializerSnapshot", "simple",
             "timewindow", "decoded", _SQL, "table runtime group windows: i64 start, i64 end", alias=True),
    Snapshot("org.apache.flink.table.runtime.operators.window.CountWindow$Serializer$CountWindowSerializerSnapshot", "simple",
             "long", "decoded", _PARSE, "table runtime count windows: i64 id (no SQL fixture here holds one)", alias=True),
    Snapshot("org.apache.flink.table.runtime.operators.window.GlobalWindow$Serializer$GlobalWindowSerializerSnapshot", "simple",
             "void", "decoded", _PARSE, "one byte 0: a unit namespace, like VoidNamespace", alias=True),
    Snapshot("org.apache.flink.streaming.api.utils.ByteArrayWrapperSerializer$ByteArrayWrapperSerializerSnapshot", "simple",
             "bytes", "decoded", _PYFLINK, "PyFlink map keys: i32 length + bytes", alias=True),
    Snapshot(_B + "BitmapSerializer$BitmapSerializerSnapshot", "simple", "bytes", "bytes", _PARSE,
             "2.x: i32 length + the bitmap's portable bytes", alias=True),
    Snapshot(_B + "VoidSerializer$VoidSerializerSnapshot", "simple", "void", "decoded", _DS, "java.lang.Void: one byte 0",
             alias=True),
    Snapshot("org.apache.flink.streaming.api.windowing.windows.GlobalWindow$Serializer$GlobalWindowSerializerSnapshot", "simple",
             "void", "decoded", _DS, "global and count windows' namespace: one byte 0", alias=True),
    Snapshot("org.apache.flink.queryablestate.client.VoidNamespaceSerializer$VoidNamespaceSerializerSnapshot", "simple", "void",
             "decoded", _PARSE, "queryable state's copy of VoidNamespace", alias=True),
    Snapshot(_B + "IntValueSerializer$IntValueSerializerSnapshot", "simple", "int", "decoded", _DS, alias=True),
    Snapshot(_B + "LongValueSerializer$LongValueSerializerSnapshot", "simple", "long", "decoded", _DS, alias=True),
    Snapshot(_B + "ShortValueSerializer$ShortValueSerializerSnapshot", "simple", "short", "decoded", _DS, alias=True),
    Snapshot(_B + "ByteValueSerializer$ByteValueSerializerSnapshot", "simple", "byte", "decoded", _DS, alias=True),
    Snapshot(_B + "FloatValueSerializer$FloatValueSerializerSnapshot", "simple", "float", "decoded", _DS, alias=True),
    Snapshot(_B + "DoubleValueSerializer$DoubleValueSerializerSnapshot", "simple", "double", "decoded", _DS, alias=True),
    Snapshot(_B + "BooleanValueSerializer$BooleanValueSerializerSnapshot", "simple", "bool", "decoded", _DS, alias=True),
    Snapshot(_B + "CharValueSerializer$CharValueSerializerSnapshot", "simple", "char", "decoded", _DS, alias=True),
    Snapshot("org.apache.flink.runtime.state.ArrayListSerializerSnapshot", "composite", "list", "decoded", _PARSE,
             "the list layout (i32 n + elements); Flink copies operator list state with it, no savepoint here holds it", alias=True),
    Snapshot("org.apache.flink.runtime.state.v2.ttl.TtlStateFactory$TtlSerializerSnapshot", "composite", "ttl", "decoded", _PARSE,
             "2.x async state TTL: i64 last access + value", alias=True),
    # --- basic types ---
    Snapshot(_B + "LongSerializer$LongSerializerSnapshot", "simple", "long", "decoded", _DS),
    Snapshot(_B + "IntSerializer$IntSerializerSnapshot", "simple", "int", "decoded", _DS),
    Snapshot(_B + "ShortSerializer$ShortSerializerSnapshot", "simple", "short", "decoded", _DS),
    Snapshot(_B + "ByteSerializer$ByteSerializerSnapshot", "simple", "byte", "decoded", _DS),
    Snapshot(_B + "DoubleSerializer$DoubleSerializerSnapshot", "simple", "double", "decoded", _DS),
    Snapshot(_B + "FloatSerializer$FloatSerializerSnapshot", "simple", "float", "decoded", _DS),
    Snapshot(_B + "BooleanSerializer$BooleanSerializerSnapshot", "simple", "bool", "decoded", _DS),
    Snapshot(_B + "CharSerializer$CharSerializerSnapshot", "simple", "char", "decoded", _DS),
    Snapshot(_B + "StringSerializer$StringSerializerSnapshot", "simple", "string", "decoded", _DS),
    Snapshot(_B + "array.BytePrimitiveArraySerializer$BytePrimitiveArraySerializerSnapshot", "simple", "bytes", "decoded", _DS),
    Snapshot("org.apache.flink.runtime.state.VoidNamespaceSerializer$VoidNamespaceSerializerSnapshot", "simple", "void", "decoded", _DS),
    Snapshot(_B + "BigDecSerializer$BigDecSerializerSnapshot", "simple", "bigdec", "decoded", _DS),
    Snapshot(_B + "BigIntSerializer$BigIntSerializerSnapshot", "simple", "bigint", "decoded", _DS),
    Snapshot(_B + "LocalDateSerializer$LocalDateSerializerSnapshot", "simple", "localdate", "decoded", _DS),
    Snapshot(_B + "LocalTimeSerializer$LocalTimeSerializerSnapshot", "simple", "localtime", "decoded", _DS),
    Snapshot(_B + "LocalDateTimeSerializer$LocalDateTimeSerializerSnapshot", "simple", "localdatetime", "decoded", _DS),
    Snapshot(_B + "InstantSerializer$InstantSerializerSnapshot", "simple", "instant", "decoded", _DS),
    Snapshot(_B + "SqlDateSerializer$SqlDateSerializerSnapshot", "simple", "sqldate", "decoded", _DS),
    Snapshot(_B + "SqlTimeSerializer$SqlTimeSerializerSnapshot", "simple", "sqltime", "decoded", _DS),
    Snapshot(_B + "SqlTimestampSerializer$SqlTimestampSerializerSnapshot", "simple", "sqltimestamp", "decoded", _DS),
    Snapshot("org.apache.flink.streaming.api.windowing.windows.TimeWindow$Serializer$TimeWindowSerializerSnapshot", "simple",
             "timewindow", "decoded", _DS),
    Snapshot(_B + "DateSerializer$DateSerializerSnapshot", "simple", "date", "decoded", _DS, "java.util.Date: i64 ms, MIN_VALUE = null"),
    Snapshot(_B + "StringValueSerializer$StringValueSerializerSnapshot", "simple", "stringvalue", "decoded", _DS,
             "varint length (no null), UTF-16 units as varints"),
    Snapshot(_B + "NullValueSerializer$NullValueSerializerSnapshot", "simple", "nullvalue", "decoded", _DS, "no bytes"),
    Snapshot(_R + "Tuple0SerializerSnapshot", "simple", "tuple0", "decoded", _DS, "one byte 42"),
    Snapshot(_B + "VariantSerializer$VariantSerializerSnapshot", "simple", "variant", "decoded", _PARSE,
             "2.x: i32 value length, i32 metadata length, value, metadata"),
    # --- arrays ---
    *(Snapshot(f"{_B}array.{name}PrimitiveArraySerializer${name}PrimitiveArraySerializerSnapshot", "simple", "parray", "decoded", _DS)
      for name in ("Boolean", "Char", "Short", "Int", "Long", "Float", "Double")),
    Snapshot(_B + "array.StringArraySerializer$StringArraySerializerSnapshot", "simple", "sarray", "decoded", _DS),
    Snapshot(_B + "GenericArraySerializerSnapshot", "composite:class", "garray", "decoded", _DS),
    # --- composites of flink-core ---
    Snapshot(_B + "ListSerializerSnapshot", "composite", "list", "decoded", _DS),
    Snapshot(_B + "MapSerializerSnapshot", "composite", "map", "decoded", _DS),
    Snapshot(_B + "SetSerializerSnapshot", "composite", "set", "decoded", _DS, "2.x: i32 n, n x (null flag, element)"),
    Snapshot(_R + "RowSerializer$RowSerializerSnapshot", "composite:row", "row", "decoded", _DS),
    Snapshot(_R + "TupleSerializerSnapshot", "composite:class", "tuple", "decoded", _DS),
    Snapshot(_R + "JavaEitherSerializerSnapshot", "composite", "either", "decoded", _DS, "bool isLeft + left or right"),
    Snapshot(_R + "NullableSerializer$NullableSerializerSnapshot", "composite:i32", "nullable", "decoded", _DS,
             "bool isNull (+ padding) + value"),
    Snapshot("org.apache.flink.api.common.typeutils.SingleThreadAccessCheckingTypeSerializer$SingleThreadAccessCheckingTypeSerializerSnapshot",
             "composite", "transparent", "decoded", _PARSE, "a debug wrapper: its nested serializer's bytes"),
    Snapshot("org.apache.flink.runtime.state.ttl.TtlStateFactory$TtlSerializerSnapshot", "composite", "ttl", "decoded", _DS),
    Snapshot("org.apache.flink.runtime.state.ttl.TtlAwareSerializerSnapshot", "ttl_aware", "transparent", "decoded", _PARSE,
             "2.x: bool isTtlEnabled + the wrapped snapshot; values are the wrapped serializer's"),
    Snapshot("org.apache.flink.streaming.api.operators.TimerSerializerSnapshot", "composite", "timer", "decoded", _DS),
    Snapshot(_R + "PojoSerializerSnapshot", "pojo", "pojo", "decoded", _DS),
    Snapshot(_B + "EnumSerializer$EnumSerializerSnapshot", "enum", "enum", "decoded", _DS,
             "i32 ordinal of the snapshot's constants; Flink refuses enums in keys (identity hashCode)"),
    # --- DataStream operators' own state ---
    Snapshot("org.apache.flink.streaming.api.operators.co.IntervalJoinOperator$BufferEntrySerializerSnapshot", "composite",
             "bufferentry", "decoded", _DS, "interval join buffers: bool hasBeenJoined + element"),
    Snapshot("org.apache.flink.streaming.runtime.streamrecord.StreamElementSerializer$StreamElementSerializerSnapshot", "composite",
             "streamrecord", "decoded", _DS, "evicting windows: tag 0 (i64 timestamp) or 1, then the value"),
    Snapshot("org.apache.flink.streaming.api.datastream.CoGroupedStreams$UnionSerializerSnapshot", "composite", "taggedunion",
             "decoded", _DS, "window joins and coGroup: tag 1 or 2 + that side's value"),
    # --- CEP ---
    Snapshot(_CEP + "NFAStateSerializerSnapshot", "composite:nfa", "nfastate", "decoded", _DS),
    Snapshot(_CEP + "sharedbuffer.LockableTypeSerializerSnapshot", "composite", "lockable", "decoded", _DS),
    Snapshot(_CEP + "sharedbuffer.NodeId$NodeIdSerializer$NodeIdSerializerSnapshot", "composite", "nodeid", "decoded", _DS),
    Snapshot(_CEP + "sharedbuffer.EventId$EventIdSerializer$EventIdSerializerSnapshot", "simple", "eventid", "decoded", _DS),
    Snapshot(_CEP + "sharedbuffer.SharedBufferEdge$SharedBufferEdgeSerializer$SharedBufferEdgeSerializerSnapshot", "composite",
             "sbedge", "decoded", _DS),
    Snapshot(_CEP + "sharedbuffer.SharedBufferNodeSerializerSnapshotV2", "composite", "sbnode", "decoded", _DS),
    Snapshot(_CEP + "DeweyNumber$DeweyNumberSerializer$DeweyNumberSerializerSnapshot", "simple", "dewey", "decoded", _DS),
    Snapshot(_CEP + "sharedbuffer.SharedBufferNode$SharedBufferNodeSerializer$SharedBufferNodeSerializerSnapshot", "composite",
             "refused", "refused", _PARSE, "1.x: read to migrate CEP state of Flink < 1.13; no 1.20/2.x job writes it"),
    Snapshot(_CEP + "NFA$MigratedNFASerializerSnapshot", "composite", "refused", "refused", _PARSE,
             "1.x: read to migrate CEP state of Flink < 1.5"),
    Snapshot(_CEP + "SharedBuffer$SharedBufferSerializerSnapshot", "composite", "refused", "refused", _PARSE,
             "1.x: read to migrate CEP state of Flink < 1.5"),
    # --- values kept as their bytes ---
    Snapshot("org.apache.flink.runtime.state.JavaSerializer$JavaSerializerSnapshot", "simple", "javaser", "bytes", _DS,
             "Java serialization: walked to its end, never deserialized"),
    Snapshot(_R + "ValueSerializer$ValueSerializerSnapshot", "generic", "opaque", "bytes", _DS, "a user Value's own write()"),
    Snapshot(_R + "CopyableValueSerializer$CopyableValueSerializerSnapshot", "generic", "opaque", "bytes", _PARSE,
             "a user CopyableValue's own write()"),
    Snapshot(_R + "kryo.KryoSerializerSnapshot", "kryo", "opaque", "bytes", _KRYO,
             "snapshot parsed here; Kryo 2 (1.x) / Kryo 5 (2.x) values are decoded by flink/serde/kryo where it can"),
    Snapshot("org.apache.flink.streaming.api.functions.sink.TwoPhaseCommitSinkFunction$StateSerializerSnapshot", "composite:bool3",
             "opaque", "bytes", _PARSE, "1.x legacy two-phase commit sinks' operator state"),
    Snapshot("org.apache.flink.streaming.api.functions.sink.legacy.TwoPhaseCommitSinkFunction$StateSerializerSnapshot",
             "composite:bool3", "opaque", "bytes", _PARSE, "2.x legacy two-phase commit sinks' operator state"),
    # --- legacy snapshots Flink reads only to migrate very old savepoints ---
    Snapshot(_R + "EitherSerializerSnapshot", "either_v2", "refused", "refused", _PARSE,
             "1.x: pre-1.7 Either snapshot (version 2: nested snapshots); never written by 1.20/2.x"),
    Snapshot(_B + "GenericArraySerializerConfigSnapshot", "garray_v2", "refused", "refused", _PARSE,
             "1.x: pre-1.7 generic array snapshot (version 2: component class + nested); never written by 1.20/2.x"),
    # --- Scala API (flink-scala in 1.x, the table planner in 2.x) ---
    *(Snapshot(pkg + name, read, "opaque", "bytes", _PARSE, note)
      for pkg in (_SCALA1, _SCALA2)
      for name, read, note in (
          ("ScalaCaseClassSerializerSnapshot", "composite:class", "case class fields back to back"),
          ("Tuple2CaseClassSerializerSnapshot", "composite:class", "Scala Tuple2"),
          ("ScalaEitherSerializerSnapshot", "composite", "Scala Either"),
          ("ScalaOptionSerializerSnapshot", "composite", "Scala Option"),
          ("ScalaTrySerializerSnapshot", "composite", "Scala Try (Throwable by Kryo)"),
          ("TraversableSerializerSnapshot", "composite:utf", "Scala collections (outer: the builder's source code)"),
          ("ScalaEnumSerializerSnapshot", "scala_enum", "Scala Enumeration: class + (name, id) pairs"),
          ("UnitSerializer$UnitSerializerSnapshot", "simple", "Scala Unit"))),
    Snapshot(_SCALA1 + "NothingSerializerSnapshot", "simple", "refused", "refused", _PARSE, "Scala Nothing: no value exists"),
    Snapshot(_SCALA2 + "NothingSerializerSnapshot", "simple", "refused", "refused", _PARSE, "Scala Nothing: no value exists"),
    # --- table runtime (SQL and Table API operators: flink/sql/ decodes RowData as columns) ---
    Snapshot(_TR + "RowDataSerializer$RowDataSerializerSnapshot", "table_row", "rowdata", "decoded", _SQL,
             "i32 n, n Java-serialized LogicalTypes, nested snapshots"),
    Snapshot(_TR + "BinaryRowDataSerializer$BinaryRowDataSerializerSnapshot", "table_i32", "rowdata", "bytes", _PARSE,
             "its snapshot holds a field count, no types: rows as their BinaryRowData bytes"),
    Snapshot(_TR + "StringDataSerializer$StringDataSerializerSnapshot", "simple", "stringdata", "decoded", _SQL),
    Snapshot(_TR + "TimestampDataSerializer$TimestampDataSerializerSnapshot", "table_i32", "timestampdata", "decoded", _SQL),
    Snapshot(_TR + "DecimalDataSerializer$DecimalSerializerSnapshot", "table_i32_i32", "decimaldata", "decoded", _PARSE,
             "i64 unscaled (precision <= 18) or i32 length + bytes"),
    Snapshot(_TR + "ArrayDataSerializer$ArrayDataSerializerSnapshot", "table_array", "arraydata", "bytes", _PARSE,
             "element LogicalType and serializer, Java-serialized; arrays as their BinaryArrayData bytes"),
    Snapshot(_TR + "MapDataSerializer$MapDataSerializerSnapshot", "java4", "opaque", "bytes", _PARSE,
             "key/value LogicalTypes and serializers, Java-serialized"),
    Snapshot(SORTED_MAP_SNAPSHOT, "sorted_map", "opaque", "bytes", _PARSE, "a Java-serialized comparator + nested"),
    Snapshot(_TR + "ExternalSerializer$ExternalSerializerSnapshot", "composite:java_bool", "transparent", "decoded", _SQLOPS,
             "its internal serializer's bytes (serialize converts to the internal form): data views' keys and values"),
    Snapshot(_TR + "LinkedListSerializer$LinkedListSerializerSnapshot", "composite:bool2", "opaque", "bytes", _PARSE),
    Snapshot(_TR + "RawValueDataSerializer$RawValueDataSerializerSnapshot", "composite", "opaque", "bytes", _PARSE),
    Snapshot(_TR + "WindowKeySerializer$WindowKeySerializerSnapshot", "composite", "opaque", "bytes", _PARSE),
    Snapshot("org.apache.flink.table.dataview.ListViewSerializerSnapshot", "composite", "opaque", "bytes", _PARSE),
    Snapshot("org.apache.flink.table.dataview.MapViewSerializerSnapshot", "composite", "opaque", "bytes", _PARSE),
    Snapshot("org.apache.flink.table.dataview.NullAwareMapSerializerSnapshot", "composite", "opaque", "bytes", _PARSE),
    Snapshot("org.apache.flink.table.dataview.NullSerializer$NullSerializerSnapshot", "simple", "opaque", "bytes", _PARSE),
    Snapshot("org.apache.flink.table.runtime.operators.sink.SortedLongSerializer$SortedLongSerializerSnapshot", "simple", "sortedlong",
             "decoded", _SQLOPS, "a long with its sign bit flipped (2.x sink materializer's watermark buffer keys)"),
    *(Snapshot("org.apache.flink.table.runtime.sequencedmultisetstate.linked." + name, "composite", "opaque", "bytes", _PARSE, "2.x")
      for name in ("MetaSqnInfoSerializer$MetaSqnInfoSerializerSnapshot", "NodeSerializer$NodeSerializerSnapshot",
                   "RowSqnInfoSerializer$RowSqnInfoSerializerSnapshot")),
    Snapshot("org.apache.flink.table.runtime.sequencedmultisetstate.linked.RowDataKeySerializerSnapshot", "rowdata_key", "transparent",
             "decoded", _SQLOPS, "2.x: two Java-serialized generated classes (i32-framed) + the RowData snapshot; values: the RowData's"),
    # --- flink-python's table serializers (Python UDFs) ---
    Snapshot(_PY + "RowDataSerializer$RowDataSerializerSnapshot", "table_row", "opaque", "bytes", _PARSE),
    Snapshot(_PY + "ArrayDataSerializer$ArrayDataSerializerSnapshot", "table_array", "opaque", "bytes", _PARSE),
    Snapshot(_PY + "MapDataSerializer$BaseMapSerializerSnapshot", "java4", "opaque", "bytes", _PARSE),
    Snapshot(_PY + "DecimalDataSerializer$DecimalSerializerSnapshot", "table_i32_i32", "opaque", "bytes", _PARSE),
    Snapshot(_PY + "TimestampSerializer$TimestampSerializerSnapshot", "table_i32", "opaque", "bytes", _PARSE),
    *(Snapshot(_PY + f"{name}Serializer${name}SerializerSnapshot", "simple", "opaque", "bytes", _PARSE)
      for name in ("BigDec", "Date", "String", "Time")),
    # --- beyond the targeted jars (flink-avro is not in Flink's lib/) ---
    Snapshot("org.apache.flink.formats.avro.typeutils.AvroSerializerSnapshot", "avro", "opaque", "bytes", _PARSE,
             "flink-avro (not in lib/): version 2, type class + schema"),
    Snapshot(_R + "kryo5.KryoSerializerSnapshot", "kryo", "opaque", "bytes", _PARSE,
             "the Kryo 5 package of Flink 1.x's migration builds (not in 1.20.5's flink-dist)"),
]

SNAPSHOTS: dict[str, Snapshot] = {}
for _s in _ROWS:
    if _s.cls in SNAPSHOTS:
        raise ValueError(f"serializer registry lists {_s.cls} twice")
    SNAPSHOTS[_s.cls] = _s
