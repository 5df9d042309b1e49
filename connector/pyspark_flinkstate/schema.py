"""Type mapping between a state's Arrow types and Spark SQL types, both directions.

Reads: every Arrow type of a state gets a Spark type; the batches a reader yields are cast
to exactly the Arrow schema Spark expects for that Spark schema (nullable, but for the columns
the read declares never null).
Writes: the Arrow types Spark hands to the writer are mapped back to the state's types
(the declared types of an existing state, or inferred ones for a new state).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import pyarrow as pa
from flinkstate.core.errors import SchemaMismatchError

__all__ = ["spark_type", "spark_schema", "arrow_schema_for", "to_spark_arrow", "storage_type"]


def spark_type(t: pa.DataType) -> Any:
    """The Spark SQL type for an Arrow type (unsigned ints widen; unknown types become strings)."""
    from pyspark.sql import types as T

    if pa.types.is_dictionary(t):
        return spark_type(t.value_type)
    if pa.types.is_boolean(t):
        return T.BooleanType()
    if pa.types.is_int8(t):
        return T.ByteType()
    if pa.types.is_int16(t) or pa.types.is_uint8(t):
        return T.ShortType()
    if pa.types.is_int32(t) or pa.types.is_uint16(t):
        return T.IntegerType()
    if pa.types.is_int64(t) or pa.types.is_uint32(t):
        return T.LongType()
    if pa.types.is_uint64(t):
        return T.DecimalType(20, 0)
    if pa.types.is_float16(t) or pa.types.is_float32(t):
        return T.FloatType()
    if pa.types.is_float64(t):
        return T.DoubleType()
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return T.StringType()
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t) or pa.types.is_binary_view(t):
        return T.BinaryType()
    if pa.types.is_date(t):
        return T.DateType()
    if pa.types.is_timestamp(t):
        return T.TimestampType() if t.tz is not None else T.TimestampNTZType()
    if pa.types.is_decimal(t):
        if t.precision <= 38:
            return T.DecimalType(t.precision, t.scale)
        return T.StringType()
    if pa.types.is_duration(t):
        return T.DayTimeIntervalType()
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t) or pa.types.is_list_view(t):
        return T.ArrayType(spark_type(t.value_type), True)
    if pa.types.is_map(t):
        return T.MapType(spark_type(t.key_type), spark_type(t.item_type), True)
    if pa.types.is_struct(t):
        return T.StructType([T.StructField(t.field(i).name, spark_type(t.field(i).type), True) for i in range(t.num_fields)])
    if pa.types.is_null(t):
        return T.NullType()
    return T.StringType()  # time-of-day and other exotic types are shown as text


def spark_schema(fields: list[tuple[str, pa.DataType]], non_null: Collection[str] = ()) -> Any:
    """A Spark StructType for (name, Arrow type) pairs: nullable, but for the columns named in `non_null`."""
    from pyspark.sql import types as T

    return T.StructType([T.StructField(n, spark_type(t), n not in non_null) for n, t in fields])


def arrow_schema_for(schema: Any) -> pa.Schema:
    """The exact Arrow schema Spark expects from a Python data source for a Spark schema."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schema, timezone="UTC")


def _cast_array(arr: pa.Array | pa.ChunkedArray, target: pa.DataType) -> pa.Array | pa.ChunkedArray:
    src = arr.type
    if src == target:
        return arr
    if pa.types.is_string(target) and not (pa.types.is_string(src) or pa.types.is_large_string(src)):
        if pa.types.is_decimal(src) or pa.types.is_time(src):
            return arr.cast(pa.string())
    return arr.cast(target, safe=False) if pa.types.is_decimal(target) and pa.types.is_integer(src) else arr.cast(target)


def to_spark_arrow(table: pa.Table, target: pa.Schema) -> pa.Table:
    """Select, order and cast a table's columns to the Arrow schema Spark expects."""
    cols = []
    for f in target:
        if f.name not in table.column_names:
            if not f.nullable and table.num_rows:
                raise SchemaMismatchError(f"column {f.name!r} is declared NOT NULL but the rows read have no such column; got {table.column_names}")
            cols.append(pa.nulls(table.num_rows, f.type))
            continue
        col = table.column(f.name)
        if not f.nullable and col.null_count:
            raise SchemaMismatchError(f"column {f.name!r} is declared NOT NULL but {col.null_count} of the rows read hold null")
        try:
            cols.append(_cast_array(col, f.type))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
            raise SchemaMismatchError(f"column {f.name!r} of type {col.type} cannot be shown as {f.type}: {e}") from e
    return pa.Table.from_arrays(cols, schema=target)


def storage_type(t: pa.DataType) -> pa.DataType:
    """The type a new state stores for an Arrow type coming from Spark (large/view types narrowed)."""
    if pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return pa.string()
    if pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        return pa.binary()
    if pa.types.is_timestamp(t):
        return pa.timestamp("us", tz=t.tz)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_list_view(t) or pa.types.is_fixed_size_list(t):
        return pa.list_(storage_type(t.value_type))
    if pa.types.is_map(t):
        return pa.map_(storage_type(t.key_type), storage_type(t.item_type))
    if pa.types.is_struct(t):
        return pa.struct([pa.field(t.field(i).name, storage_type(t.field(i).type)) for i in range(t.num_fields)])
    return t
