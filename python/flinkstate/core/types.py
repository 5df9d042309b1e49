"""Arrow type helpers: exact (de)serialization of types and inference from Python values.

Descriptors keep their types as Arrow types; on storage a type is written as the base64
of a one-field Arrow IPC schema, which round-trips every Arrow type exactly (nesting,
decimals, timezones, nullability), plus a readable string for people.
"""

from __future__ import annotations

import base64
import datetime as _dt
import decimal as _decimal
from typing import Any

import pyarrow as pa

from flinkstate.core.errors import InvalidArgumentError

__all__ = ["type_to_json", "type_from_json", "infer_type", "type_name"]


def type_to_json(t: pa.DataType) -> dict[str, str]:
    """Serialize an Arrow type to a JSON-able dict that round-trips exactly."""
    if not isinstance(t, pa.DataType):
        raise InvalidArgumentError(f"expected a pyarrow DataType, got {t!r}")
    schema = pa.schema([pa.field("t", t)])
    return {"arrow": base64.b64encode(schema.serialize().to_pybytes()).decode("ascii"), "name": str(t)}


def type_from_json(d: dict[str, str]) -> pa.DataType:
    """Inverse of `type_to_json`."""
    try:
        buf = base64.b64decode(d["arrow"])
        return pa.ipc.read_schema(pa.py_buffer(buf)).field(0).type
    except (KeyError, ValueError, TypeError, pa.ArrowInvalid) as e:
        raise InvalidArgumentError(f"cannot decode stored Arrow type {d!r}: {e}") from e


def type_name(t: pa.DataType | None) -> str | None:
    """Readable name of a type (None stays None)."""
    return None if t is None else str(t)


def infer_type(value: Any) -> pa.DataType:
    """Infer the Arrow key type of a Python value: str, int, bool, float, tuple, bytes, ..."""
    if isinstance(value, bool):
        return pa.bool_()
    if isinstance(value, int):
        return pa.int64()
    if isinstance(value, float):
        return pa.float64()
    if isinstance(value, str):
        return pa.string()
    if isinstance(value, (bytes, bytearray)):
        return pa.binary()
    if isinstance(value, tuple):
        return pa.struct([pa.field(f"f{i}", infer_type(v)) for i, v in enumerate(value)])
    if isinstance(value, _dt.datetime):
        return pa.timestamp("us", tz="UTC" if value.tzinfo else None)
    if isinstance(value, _dt.date):
        return pa.date32()
    if isinstance(value, _decimal.Decimal):
        return pa.scalar(value).type
    raise InvalidArgumentError(f"cannot infer an Arrow type for {type(value).__name__} value {value!r}")
