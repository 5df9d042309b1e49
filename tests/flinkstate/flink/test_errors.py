"""Corrupt, truncated and unsupported Flink savepoints give typed errors that name the culprit."""

from __future__ import annotations

import shutil
import struct
from pathlib import Path

import pytest
from flink_dump import FIXTURE

from flinkstate.core.errors import CorruptFileError
from flinkstate.flink import (
    UnsupportedFlinkFormatError,
    UnsupportedSerializerError,
    parse_metadata,
    read_keyed_state,
    read_metadata,
)

LONG = "org.apache.flink.api.common.typeutils.base.LongSerializer$LongSerializerSnapshot"
KRYO = "org.apache.flink.api.java.typeutils.runtime.kryo.KryoSerializerSnapshot"


def utf(s: str) -> bytes:
    """writeUTF of an ASCII string."""
    return struct.pack(">H", len(s)) + s.encode()


def metadata(keyed: bytes = b"\x00", version: int = 6, channels: int = 0) -> bytes:
    """A one-operator ('op'), one-subtask `_metadata` with the given managed keyed handle bytes."""
    out = struct.pack(">Iiqi", 0x4960672D, version, 1, 0) + struct.pack(">i", 1)
    if version >= 5:
        out += utf("op") + utf("op")
    out += struct.pack(">qqii", 1, 2, 1, 128) + b"\x00"  # operator id, parallelism, max parallelism, no coordinator
    out += struct.pack(">iiii", 1, 0, 0, 0)  # one subtask (index 0), no operator state
    out += keyed + b"\x00" + struct.pack(">ii", channels, 0)
    return out


def inline_keyed(data: bytes) -> bytes:
    """A KeyGroupsSavepointStateHandle over all 128 key groups (no data offsets) with inline bytes."""
    return b"\x07" + struct.pack(">ii", 0, 128) + bytes(8 * 128) + b"\x01" + utf("file:/gone/state") + struct.pack(">i", len(data)) + data


def copy_fixture(tmp_path: Path, variant: str = "files") -> Path:
    """A writable copy of a checked-in savepoint directory."""
    dst = tmp_path / variant
    shutil.copytree(FIXTURE / variant / "savepoint", dst)
    return dst


def keyed_file(sp: Path, uid: str, subtask: int = 0) -> tuple[Path, list[int], int]:
    """The file of an operator subtask's keyed state, its key groups with data and their offsets."""
    h = read_metadata(str(sp)).operator(uid).subtasks[subtask].managed_keyed
    kgs = [h.start + i for i, o in enumerate(h.offsets) if o > 0]
    return sp / h.stream.path, kgs, [int(o) for o in h.offsets if o > 0]


def test_truncated_keyed_file_names_file_and_key_group(tmp_path: Path) -> None:
    sp = copy_fixture(tmp_path)
    path, kgs, offsets = keyed_file(sp, "long-keyed")
    path.write_bytes(path.read_bytes()[: offsets[-1] + 20])
    with pytest.raises(CorruptFileError, match=rf"{path.name}.*key group {kgs[-1]}\b"):
        read_keyed_state(read_metadata(str(sp)), "long-keyed")


def test_corrupt_record_length_names_key_group(tmp_path: Path) -> None:
    sp = copy_fixture(tmp_path)
    path, kgs, offsets = keyed_file(sp, "string-keyed", 1)
    data = bytearray(path.read_bytes())
    data[offsets[2] + 2 : offsets[2] + 6] = b"\xff\xff\xff\xff"  # the first key's length
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptFileError, match=rf"{path.name}.*key group {kgs[2]}\b"):
        read_keyed_state(read_metadata(str(sp)), "string-keyed")


def test_key_in_wrong_key_group_is_caught(tmp_path: Path) -> None:
    sp = copy_fixture(tmp_path)
    path, kgs, offsets = keyed_file(sp, "long-keyed")
    data = bytearray(path.read_bytes())
    data[offsets[0] + 2 + 4 + 1 + 7] ^= 0x01  # last byte of the first Long key: same framing, other hash
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptFileError, match=rf"stored in key group {kgs[0]} but hashes to key group"):
        read_keyed_state(read_metadata(str(sp)), "long-keyed")


def test_truncated_snappy_key_group(tmp_path: Path) -> None:
    sp = copy_fixture(tmp_path, "snappy")
    path, kgs, offsets = keyed_file(sp, "long-keyed")
    path.write_bytes(path.read_bytes()[: offsets[-1] + 12])
    with pytest.raises(CorruptFileError, match=rf"{path.name}.*key group {kgs[-1]}\b"):
        read_keyed_state(read_metadata(str(sp)), "long-keyed")


def test_missing_state_file_names_handle(tmp_path: Path) -> None:
    sp = copy_fixture(tmp_path)
    path, _, _ = keyed_file(sp, "long-keyed", 1)
    path.unlink()
    with pytest.raises(CorruptFileError, match=rf"{path.name}.*missing"):
        read_keyed_state(read_metadata(str(sp)), "long-keyed")


def test_truncated_metadata(tmp_path: Path) -> None:
    sp = copy_fixture(tmp_path)
    meta = sp / "_metadata"
    meta.write_bytes(meta.read_bytes()[:700])
    with pytest.raises(CorruptFileError, match=r"/_metadata: (truncated|invalid number of \w+ \(\d+\))"):
        read_metadata(str(sp))


def test_unsupported_metadata_version() -> None:
    with pytest.raises(UnsupportedFlinkFormatError, match=r"metadata version 7"):
        parse_metadata(metadata(version=7))


def test_rocksdb_incremental_handle_refused_when_read() -> None:
    handle = b"\x0b" + struct.pack(">q", 3) + utf("uuid") + struct.pack(">iiq", 0, 128, 10) + b"\x00" + struct.pack(">ii", 0, 0) + utf("id")
    meta = parse_metadata(metadata(handle))
    assert meta.operator("op").max_parallelism == 128
    with pytest.raises(UnsupportedFlinkFormatError, match=r"operator op subtask 0 uses IncrementalRemoteKeyedStateHandle"):
        read_keyed_state(meta, "op")


def test_changelog_handle_refused() -> None:
    with pytest.raises(UnsupportedFlinkFormatError, match=r"operator op subtask 0 uses ChangelogStateBackendHandle"):
        parse_metadata(metadata(b"\x08"))


def test_unaligned_channel_state_refused() -> None:
    with pytest.raises(UnsupportedFlinkFormatError, match=r"InputChannelStateHandle"):
        parse_metadata(metadata(channels=1))


VOID_NAMESPACE = "org.apache.flink.runtime.state.VoidNamespaceSerializer$VoidNamespaceSerializerSnapshot"
_EMPTY_OPTIONAL_MAP = struct.pack(">qi", 0x4F2C69A3D70, 0)


@pytest.mark.parametrize("cls,payload", [
    (KRYO, utf("com.example.Opaque") + 3 * _EMPTY_OPTIONAL_MAP),  # parsed, its values refused
    ("com.example.CustomSerializerSnapshot", b""),  # unknown: its snapshot cannot even be skipped
])
def test_kryo_serializer_names_operator_state_and_class(cls: str, payload: bytes) -> None:
    header = struct.pack(">i?i", 6, False, 2) + utf(LONG) + struct.pack(">ih", 3, 1)
    header += utf("kryo-state") + struct.pack(">ii", 0, 1) + utf("KEYED_STATE_TYPE") + utf("VALUE")
    header += struct.pack(">i", 2) + utf("VALUE_SERIALIZER") + struct.pack(">i", 2) + utf(cls) + struct.pack(">i", 2) + payload
    header += utf("NAMESPACE_SERIALIZER") + struct.pack(">i", 2) + utf(VOID_NAMESPACE) + struct.pack(">i", 3)
    meta = parse_metadata(metadata(inline_keyed(header)))
    with pytest.raises(UnsupportedSerializerError, match=rf"operator op, state 'kryo-state'.*{cls}"):
        read_keyed_state(meta, "op")


@pytest.mark.parametrize("scheme", ["", "file:", "file://"])
def test_absolute_file_state_handle(tmp_path: Path, scheme: str) -> None:
    """A FileStateHandle (absolute path, as in retained checkpoints) is read like a relative one."""
    sp = copy_fixture(tmp_path)
    h = read_metadata(str(sp)).operator("long-keyed").subtasks[0].managed_keyed
    moved = tmp_path / "elsewhere" / "state-file"
    moved.parent.mkdir()
    shutil.move(str(sp / h.stream.path), moved)
    handle = b"\x07" + struct.pack(">ii", h.start, len(h.offsets)) + h.offsets.astype(">i8").tobytes()
    handle += b"\x02" + struct.pack(">q", moved.stat().st_size) + utf(scheme + str(moved))
    got = read_keyed_state(parse_metadata(metadata(handle), str(tmp_path / "_metadata")), "op")
    want = read_keyed_state(read_metadata(str(FIXTURE / "files" / "savepoint")), "long-keyed")
    for name, table in want.states.items():
        assert got.states[name].to_pylist() == [r for r in table.to_pylist() if r["key_group"] <= h.end], name


@pytest.mark.parametrize("version", [3, 4, 5, 6])
def test_metadata_versions_3_to_6(version: int) -> None:
    """Versions 3 and 4 have no operator name/uid (the operator is found by its hex id); 5 and 6 have both."""
    meta = parse_metadata(metadata(version=version))
    assert meta.version == version
    op = meta.operators[0]
    assert op.operator_id == "0000000000000001" + "0000000000000002"
    assert (op.uid, op.name) == (("op", "op") if version >= 5 else (None, None))
    assert meta.operator(op.operator_id) is op


def long_state_meta(name: str) -> bytes:
    """A StateMetaInfoSnapshot of a VALUE state of Long in VoidNamespace."""
    void = "org.apache.flink.runtime.state.VoidNamespaceSerializer$VoidNamespaceSerializerSnapshot"
    out = utf(name) + struct.pack(">ii", 0, 1) + utf("KEYED_STATE_TYPE") + utf("VALUE") + struct.pack(">i", 2)
    out += utf("VALUE_SERIALIZER") + struct.pack(">i", 2) + utf(LONG) + struct.pack(">i", 3)
    return out + utf("NAMESPACE_SERIALIZER") + struct.pack(">i", 2) + utf(void) + struct.pack(">i", 3)


def keyed_file_bytes(states: list[str], key: int, kg: int, values: dict[str, int]) -> tuple[bytes, int]:
    """A canonical keyed-state stream: header listing states, one key group kg holding key's values; (bytes, offset)."""
    header = struct.pack(">i?i", 6, False, 2) + utf(LONG) + struct.pack(">ih", 3, len(states))
    header += b"".join(long_state_meta(s) for s in states)
    body = b""
    for i, s in enumerate(states):
        k = bytes([kg | 0x80]) + struct.pack(">q", key) + b"\x00"  # every run has one record: flagged
        body += (struct.pack(">H", i) if i == 0 else b"") + struct.pack(">i", len(k)) + k + struct.pack(">iq", 8, values[s])
        body += struct.pack(">H", i + 1 if i + 1 < len(states) else 0xFFFF)
    return header + body, len(header)


def test_subtasks_listing_states_in_different_orders() -> None:
    """State ids are per file: each subtask's ids are mapped to states by name."""
    from flinkstate.core.keygroups import assign_key_group

    handles = b""
    for index, (states, key) in enumerate([(["a", "b"], 1), (["b", "a"], 2)]):
        kg = assign_key_group(key, 128)
        data, offset = keyed_file_bytes(states, key, kg, {"a": 10 * key, "b": 100 * key})
        offsets = [0] * 128
        offsets[kg] = offset
        handles += struct.pack(">i", index) + struct.pack(">ii", 0, 0)
        handles += b"\x07" + struct.pack(">ii", 0, 128) + struct.pack(">128q", *offsets)
        handles += b"\x01" + utf(f"inline-{index}") + struct.pack(">i", len(data)) + data + b"\x00" + struct.pack(">ii", 0, 0)
    raw = metadata()
    head = raw[: raw.index(struct.pack(">qqii", 1, 2, 1, 128))] + struct.pack(">qqii", 1, 2, 2, 128) + b"\x00"
    ks = read_keyed_state(parse_metadata(head + struct.pack(">i", 2) + handles), "op")
    assert sorted(ks.states["a"].to_pylist(), key=lambda r: r["key"]) == [
        {"key_group": assign_key_group(1, 128), "key": 1, "value": 10},
        {"key_group": assign_key_group(2, 128), "key": 2, "value": 20},
    ]
    assert sorted(r["value"] for r in ks.states["b"].to_pylist()) == [100, 200]
