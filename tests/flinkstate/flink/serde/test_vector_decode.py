"""Canonical streams built by hand that stress the numpy framing and string decoding (public read_keyed_state)."""

from __future__ import annotations

import struct

import pytest
from test_errors import LONG, metadata, utf
from flink_bytes import varint7

from flinkstate.core.errors import CorruptFileError
from flinkstate.flink import parse_metadata, read_keyed_state
from flinkstate.core.keygroups import assign_key_group

STRING = "org.apache.flink.api.common.typeutils.base.StringSerializer$StringSerializerSnapshot"
VOID = "org.apache.flink.runtime.state.VoidNamespaceSerializer$VoidNamespaceSerializerSnapshot"


def string_state_meta(name: str) -> bytes:
    """A StateMetaInfoSnapshot of a VALUE state of String in VoidNamespace."""
    out = utf(name) + struct.pack(">ii", 0, 1) + utf("KEYED_STATE_TYPE") + utf("VALUE") + struct.pack(">i", 2)
    out += utf("VALUE_SERIALIZER") + struct.pack(">i", 2) + utf(STRING) + struct.pack(">i", 3)
    return out + utf("NAMESPACE_SERIALIZER") + struct.pack(">i", 2) + utf(VOID) + struct.pack(">i", 3)


def savepoint(values: dict[int, str | None], maxp: int = 128) -> bytes:
    """`_metadata` with one subtask over maxp key groups: Long key -> String value, records sorted by key group."""
    header = struct.pack(">i?i", 6, False, 2) + utf(LONG) + struct.pack(">ih", 3, 1) + string_state_meta("s")
    by_kg: dict[int, list[int]] = {}
    for key in values:
        by_kg.setdefault(assign_key_group(key, maxp), []).append(key)
    body = b""
    offsets = [0] * maxp
    for kg in sorted(by_kg):
        offsets[kg] = len(header) + len(body)
        body += struct.pack(">H", 0)
        keys = by_kg[kg]
        for i, key in enumerate(keys):
            last = i == len(keys) - 1
            head = kg.to_bytes(1 if maxp <= 128 else 2, "big")
            k = bytes([head[0] | (0x80 if last else 0)]) + head[1:] + struct.pack(">q", key) + b"\x00"
            v = b"\x00" if values[key] is None else java_string(values[key])
            body += struct.pack(">i", len(k)) + k + struct.pack(">i", len(v)) + v
        body += struct.pack(">H", 0xFFFF)
    data = header + body
    keyed = b"\x07" + struct.pack(">ii", 0, maxp) + struct.pack(f">{maxp}q", *offsets)
    keyed += b"\x01" + utf("inline-state") + struct.pack(">i", len(data)) + data
    return metadata(keyed).replace(struct.pack(">qqii", 1, 2, 1, 128), struct.pack(">qqii", 1, 2, 1, maxp), 1)


def java_string(s: str) -> bytes:
    """StringValue.writeString of s (lone surrogates kept, as Java strings may hold them)."""
    raw = s.encode("utf-16-le", "surrogatepass")
    units = struct.unpack(f"<{len(raw) // 2}H", raw)
    return varint7(len(units) + 1) + b"".join(varint7(u) for u in units)


def fake_record(kg: int) -> str:
    """Characters whose bytes look like record headers of key group kg (klen 10 then the prefix byte)."""
    return "\x00\x00\x00\n" + chr(kg) + "\x00" * 9 + "\x00\x00\x00\x01x"


def test_strings_non_ascii_long_null_and_false_record_headers() -> None:
    """Values whose bytes mimic record headers, 2-byte lengths, 2- and 3-byte units, pairs, NUL, empty and null."""
    values: dict[int, str | None] = {}
    samples = ["", "a" * 300, "é€😀" * 50 + "x", "\x00nul", "plain", None, "ÿ", "€" * 200]
    for key in range(400):
        kg = assign_key_group(key, 128)
        values[key] = fake_record(kg) * (key % 8) + "tail" if key % 3 == 0 else samples[key % len(samples)]
    table = read_keyed_state(parse_metadata(savepoint(values)), "op").states["s"]
    got = {r["key"]: r["value"] for r in table.to_pylist()}
    assert got == values
    assert table.column("key_group").to_pylist() == [assign_key_group(k, 128) for k in table.column("key").to_pylist()]


def test_unpaired_surrogate_is_a_typed_error() -> None:
    """A Java string with a lone surrogate cannot become an Arrow string: CorruptFileError naming the key group."""
    kg = assign_key_group(7, 128)
    with pytest.raises(CorruptFileError, match=rf"inline-state.*key group {kg}.*surrogate"):
        read_keyed_state(parse_metadata(savepoint({7: "a\ud800b", 8: "fine"})), "op")


@pytest.mark.parametrize("values", [
    {k: "a\ud800" if k % 2 == 0 else "\udc00b" for k in range(40)},  # each half a pair only across two values
    {7: "\udc00b", 8: "fine"},
    {7: "fine", 8: "ends high\udbff"},
])
def test_surrogates_unpaired_within_a_value_are_a_typed_error(values: dict[int, str]) -> None:
    """Strings are transcoded together: a high surrogate ending one value never pairs with the next value's low one."""
    with pytest.raises(CorruptFileError, match="surrogate"):
        read_keyed_state(parse_metadata(savepoint(values)), "op")


def test_two_byte_key_group_prefixes() -> None:
    """maxParallelism 300: keys carry two-byte key-group prefixes (high byte non-zero too); records mimic headers."""
    values: dict[int, str | None] = {}
    for key in range(1500):
        kg = assign_key_group(key, 300)
        values[key] = ("\x00\x00\x00\x0b" + chr(kg >> 8) + chr(kg & 0x7F)) * (key % 3) + "v"
    table = read_keyed_state(parse_metadata(savepoint(values, maxp=300)), "op").states["s"]
    assert {r["key"]: r["value"] for r in table.to_pylist()} == values
    kgs = table.column("key_group").to_pylist()
    assert kgs == [assign_key_group(k, 300) for k in table.column("key").to_pylist()] and max(kgs) >= 256
