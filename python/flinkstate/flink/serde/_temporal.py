"""Flink's BigDecimal, BigInteger, java.time and java.sql serializers: bytes <-> the ints and strings Arrow takes.

Sources: `BigIntSerializer` (i32 code: 0 null, 1 ZERO, 2 ONE, 3 TEN, else 4 + length of the two's-complement
bytes), `BigDecSerializer` (unscaled BigInteger + i32 scale), `LocalDateSerializer` (i32 year, i8 month, i8 day;
null = MIN_VALUE year), `LocalTimeSerializer` (i8 hour, i8 minute, i8 second, i32 nano; null = hour -128),
`LocalDateTimeSerializer` (date + time), `InstantSerializer` (i64 seconds, i32 nanos; null = MIN_VALUE seconds),
`SqlDateSerializer`/`SqlTimeSerializer` (i64 millis; null = MIN_VALUE), `SqlTimestampSerializer` (i64 millis,
i32 nanos). Checked byte for byte against Flink 2.3's serializers.
"""

from __future__ import annotations

import decimal
import struct
from typing import Any

__all__ = ["READERS", "WRITERS"]

_I = struct.Struct(">i")
_Q = struct.Struct(">q")
_QI = struct.Struct(">qi")
_LONG_MIN = -(1 << 63)
_INT_MIN = -(1 << 31)
_NS = 1_000_000_000
_DAY_NS = 86_400 * _NS


def _days_from_civil(y: int, m: int, d: int) -> int:
    """Days since 1970-01-01 of a proleptic Gregorian date (any year, as java.time)."""
    y -= m <= 2
    era = y // 400  # floor division (Hinnant's (y - 399) / 400 emulates it with C's truncating division)
    yoe = y - era * 400
    doy = (153 * (m + (-3 if m > 2 else 9)) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def _civil_from_days(z: int) -> tuple[int, int, int]:
    z += 719468
    era = z // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    d = doy - (153 * mp + 2) // 5 + 1
    m = mp + (3 if mp < 10 else -9)
    return yoe + era * 400 + (m <= 2), m, d


def _read_bigint(buf: bytes, pos: int) -> tuple[int | None, int]:
    code = _I.unpack_from(buf, pos)[0]
    pos += 4
    if 0 <= code <= 3:
        return (None, 0, 1, 10)[code], pos
    n = code - 4
    if pos + n > len(buf):
        raise IndexError("BigInteger runs past the end of its record")
    return int.from_bytes(buf[pos : pos + n], "big", signed=True), pos + n


def _bigint(buf: bytes, pos: int) -> tuple[str | None, int]:
    v, pos = _read_bigint(buf, pos)
    return (None if v is None else str(v)), pos


def _bigdec(buf: bytes, pos: int) -> tuple[str | None, int]:
    unscaled, pos = _read_bigint(buf, pos)
    if unscaled is None:
        return None, pos
    scale = _I.unpack_from(buf, pos)[0]
    return _decimal_text(unscaled, scale), pos + 4


def _decimal_text(unscaled: int, scale: int) -> str:
    """BigDecimal.toString of unscaled x 10^-scale (scientific notation where Java uses it)."""
    sign, digits = ("-" if unscaled < 0 else ""), str(abs(unscaled))
    adjusted = -scale + len(digits) - 1
    if scale >= 0 and adjusted >= -6:
        if scale == 0:
            return sign + digits
        digits = digits.rjust(scale + 1, "0")
        return f"{sign}{digits[:-scale]}.{digits[-scale:]}"
    mant = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
    return f"{sign}{mant}E{'+' if adjusted > 0 else ''}{adjusted}"


def _date_parts(buf: bytes, pos: int) -> tuple[int | None, int]:
    year = _I.unpack_from(buf, pos)[0]
    if year == _INT_MIN:
        return None, pos + 6
    return _days_from_civil(year, buf[pos + 4], buf[pos + 5]), pos + 6


def _time_parts(buf: bytes, pos: int) -> tuple[int | None, int]:
    h = struct.unpack_from(">b", buf, pos)[0]
    if h == -128:
        return None, pos + 7
    nano = _I.unpack_from(buf, pos + 3)[0]
    return ((h * 60 + buf[pos + 1]) * 60 + buf[pos + 2]) * _NS + nano, pos + 7


def _datetime(buf: bytes, pos: int) -> tuple[int | None, int]:
    days, pos = _date_parts(buf, pos)
    tod, pos = _time_parts(buf, pos)
    return (None if days is None or tod is None else days * _DAY_NS + tod), pos


def _instant(buf: bytes, pos: int) -> tuple[int | None, int]:
    sec, nano = _QI.unpack_from(buf, pos)
    return (None if sec == _LONG_MIN else sec * _NS + nano), pos + 12


def _millis(buf: bytes, pos: int) -> tuple[int | None, int]:
    v = _Q.unpack_from(buf, pos)[0]
    return (None if v == _LONG_MIN else v), pos + 8


def _sqltimestamp(buf: bytes, pos: int) -> tuple[int | None, int]:
    ms, nano = _QI.unpack_from(buf, pos)
    if ms == _LONG_MIN:
        return None, pos + 12
    return (ms // 1000) * _NS + nano, pos + 12


def _sorted_long(buf: bytes, pos: int) -> tuple[int, int]:
    """The table runtime's SortedLongSerializer (a sink materializer's watermark buffer keys): the long with its sign bit
    flipped (MathUtils.flipSignBit), so that its bytes sort as the numbers do."""
    return _Q.unpack_from(buf, pos)[0] ^ _LONG_MIN, pos + 8


def _w_sorted_long(out: bytearray, v: Any) -> None:
    out += _Q.pack(int(v) ^ _LONG_MIN)


READERS = {"sortedlong": _sorted_long, "bigdec": _bigdec, "bigint": _bigint, "localdate": _date_parts, "localtime": _time_parts,
           "localdatetime": _datetime, "instant": _instant, "sqldate": _millis, "sqltime": _millis,
           "sqltimestamp": _sqltimestamp}


def _write_bigint(out: bytearray, v: int | None) -> None:
    if v is None:
        out += _I.pack(0)
        return
    raw = v.to_bytes(max(1, (v + (v < 0)).bit_length() // 8 + 1), "big", signed=True)
    out += _I.pack(len(raw) + 4) + raw


def _w_bigint(out: bytearray, v: Any) -> None:
    _write_bigint(out, None if v is None else int(v))


def _w_bigdec(out: bytearray, v: Any) -> None:
    if v is None:
        _write_bigint(out, None)
        return
    d = v if isinstance(v, decimal.Decimal) else decimal.Decimal(str(v))
    sign, digits, exp = d.as_tuple()
    if not isinstance(exp, int):
        raise ValueError(f"{v!r} is not a finite decimal")
    unscaled = int("".join(map(str, digits)) or "0") * (-1 if sign else 1)
    _write_bigint(out, unscaled)
    out += _I.pack(-exp)


def _w_date(out: bytearray, v: Any) -> None:
    if v is None:
        out += _I.pack(_INT_MIN) + b"\x80\x00"
        return
    y, m, d = _civil_from_days(int(v))
    out += _I.pack(y) + bytes([m, d])


def _w_time(out: bytearray, v: Any) -> None:
    if v is None:
        out += b"\x80\x80\x00" + _I.pack(_INT_MIN)
        return
    sec, nano = divmod(int(v), _NS)
    out += bytes([sec // 3600, sec // 60 % 60, sec % 60]) + _I.pack(nano)


def _w_datetime(out: bytearray, v: Any) -> None:
    if v is None:
        _w_date(out, None)
        _w_time(out, None)
        return
    days, tod = divmod(int(v), _DAY_NS)
    _w_date(out, days)
    _w_time(out, tod)


def _w_instant(out: bytearray, v: Any) -> None:
    if v is None:
        out += _QI.pack(_LONG_MIN, _INT_MIN)
        return
    out += _QI.pack(*divmod(int(v), _NS))


def _w_millis(out: bytearray, v: Any) -> None:
    out += _Q.pack(_LONG_MIN if v is None else int(v) // 1_000_000)  # the writers get nanoseconds


def _w_sqltimestamp(out: bytearray, v: Any) -> None:
    if v is None:
        out += _QI.pack(_LONG_MIN, 0)
        return
    sec, nano = divmod(int(v), _NS)
    out += _QI.pack(sec * 1000 + nano // 1_000_000, nano)


WRITERS = {"sortedlong": _w_sorted_long, "bigdec": _w_bigdec, "bigint": _w_bigint, "localdate": _w_date, "localtime": _w_time,
           "localdatetime": _w_datetime, "instant": _w_instant, "sqldate": _w_millis, "sqltime": _w_millis,
           "sqltimestamp": _w_sqltimestamp}
