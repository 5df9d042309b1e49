"""Values of the serializers Flink's DataStream operators and user functions put in state, beyond the basic types.

Each layout was read from the serializer's `serialize` in Flink 2.3 and 1.20 (the same in both):
- `EitherSerializer`: bool isLeft, then the left or right value; `NullableSerializer`: bool isNull, then the value or
  the null padding; `CoGroupedStreams.UnionSerializer` (window joins, coGroup): byte 1 or 2, then that side's value;
- `IntervalJoinOperator.BufferEntrySerializer`: bool hasBeenJoined, then the element;
- `StreamElementSerializer` (evicting windows): tag 0 + i64 timestamp + value, or tag 1 + value (no timestamp);
- CEP: `Lockable` i32 refCounter + element; `EventId` i32 id + i64 timestamp; `NodeId` byte 1 + EventId +
  `StringValue.writeString` page name (byte 0: null); `DeweyNumber` i32 n + n i32; `SharedBufferEdge` NodeId +
  DeweyNumber; `SharedBufferNodeSerializer` i32 n x (i32 refCounter + edge); `NFAStateSerializer` partial and completed
  matches, each i32 n x ComputationState (state name as writeString, NodeId, DeweyNumber, i64 start timestamp,
  [i64 previous timestamp], byte 1 + EventId or byte 0);
- `SetSerializer` i32 n x (bool isNull + element); `DateSerializer` i64 ms (Long.MIN_VALUE: null);
  `StringValue.write` varint length + UTF-16 units as varints (no null); `NullValueSerializer` no bytes;
  `Tuple0Serializer` one byte 42; `VariantSerializer` i32 value length, i32 metadata length, value, metadata;
- `JavaSerializer`: a Java serialization stream, walked to its end (`javaser`), never deserialized: kept as its bytes.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from flinkstate.flink.serde._jstring import read_java_string, read_string_value, write_java_string, write_string_value
from flinkstate.flink.serde._node import TypeNode
from flinkstate.flink.serde._temporal import WRITERS
from flinkstate.flink.serde.javaser import read_stream

__all__ = ["ARROW_TYPES", "datastream_arrow", "datastream_reader", "datastream_writer"]

Reader = Callable[[bytes, int], tuple[Any, int]]
Writer = Callable[[bytearray, Any], None]  # appends one value as the serializer writes it
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_MIN_LONG = -(1 << 63)
_EVENT_ID = pa.struct([("id", pa.int32()), ("timestamp", pa.int64())])
_NODE_ID = pa.struct([("event_id", _EVENT_ID), ("page_name", pa.string())])
_DEWEY = pa.list_(pa.int32())
# kinds whose Arrow type does not depend on nested serializers
ARROW_TYPES: dict[str, pa.DataType] = {
    "void": pa.null(), "nullvalue": pa.null(), "tuple0": pa.null(), "date": pa.timestamp("ms"), "stringvalue": pa.string(),
    "eventid": _EVENT_ID, "dewey": _DEWEY, "variant": pa.struct([("value", pa.binary()), ("metadata", pa.binary())]),
    "javaser": pa.binary(), "refused": pa.binary(),
}


def _computation_state(node: TypeNode, arrow: Callable[[TypeNode], pa.DataType]) -> pa.DataType:
    fields = [("current_state_name", pa.string()), ("previous_buffer_entry", arrow(node.children[1])),
              ("version", arrow(node.children[0])), ("start_timestamp", pa.int64())]
    if node.params and node.params[0]:
        fields.append(("previous_timestamp", pa.int64()))
    fields.append(("start_event_id", arrow(node.children[2])))
    return pa.struct(fields)


def datastream_arrow(node: TypeNode, arrow: Callable[[TypeNode], pa.DataType]) -> pa.DataType | None:
    """The Arrow type of a kind of this module (None: not one); arrow gives nested serializers' types."""
    kind, ch = node.kind, node.children
    if kind in ARROW_TYPES:
        return ARROW_TYPES[kind]
    if kind in ("nullable", "transparent"):
        return arrow(ch[0])
    if kind == "set":
        return pa.list_(arrow(ch[0]))
    if kind == "either":
        return pa.struct([("is_left", pa.bool_()), ("left", arrow(ch[0])), ("right", arrow(ch[1]))])
    if kind == "taggedunion":
        return pa.struct([("is_one", pa.bool_()), ("one", arrow(ch[0])), ("two", arrow(ch[1]))])
    if kind == "bufferentry":
        return pa.struct([("element", arrow(ch[0])), ("has_been_joined", pa.bool_())])
    if kind == "streamrecord":
        return pa.struct([("timestamp", pa.int64()), ("value", arrow(ch[0]))])
    if kind == "lockable":
        return pa.struct([("ref_counter", pa.int32()), ("element", arrow(ch[0]))])
    if kind == "nodeid":
        return pa.struct([("event_id", arrow(ch[0])), ("page_name", pa.string())])
    if kind == "sbedge":
        return pa.struct([("target", arrow(ch[0])), ("dewey_number", arrow(ch[1]))])
    if kind == "sbnode":
        return pa.struct([("edges", pa.list_(pa.struct([("ref_counter", pa.int32()), ("edge", arrow(ch[0]))])))])
    if kind == "nfastate":
        cs = pa.list_(_computation_state(node, arrow))
        return pa.struct([("partial_matches", cs), ("completed_matches", cs)])
    return None


def _count(buf: bytes, pos: int, what: str) -> tuple[int, int]:
    """An i32 element count the bytes left can hold (see `values.read_count`)."""
    n, pos = _i32(buf, pos)
    if n < 0 or n > max(len(buf) - pos, 1 << 24):
        raise ValueError(f"{what} of {n} elements in {len(buf) - pos} bytes")
    return n, pos


def _i32(buf: bytes, pos: int) -> tuple[int, int]:
    if pos + 4 > len(buf):
        raise IndexError("an int runs past the end of its record")
    return _I32.unpack_from(buf, pos)[0], pos + 4


def _i64(buf: bytes, pos: int) -> tuple[int, int]:
    if pos + 8 > len(buf):
        raise IndexError("a long runs past the end of its record")
    return _I64.unpack_from(buf, pos)[0], pos + 8


def _flag(buf: bytes, pos: int) -> tuple[int, int]:
    if pos >= len(buf):
        raise IndexError("a flag runs past the end of its record")
    return buf[pos], pos + 1


def _date(buf: bytes, pos: int) -> tuple[int | None, int]:
    ms, pos = _i64(buf, pos)
    return (None if ms == _MIN_LONG else ms), pos


def _event_id(buf: bytes, pos: int) -> tuple[dict[str, int], int]:
    i, pos = _i32(buf, pos)
    ts, pos = _i64(buf, pos)
    return {"id": i, "timestamp": ts}, pos


def _dewey(buf: bytes, pos: int) -> tuple[list[int], int]:
    n, pos = _count(buf, pos, "a DeweyNumber")
    out = []
    for _ in range(n):
        d, pos = _i32(buf, pos)
        out.append(d)
    return out, pos


def _variant(buf: bytes, pos: int) -> tuple[dict[str, bytes], int]:
    vlen, pos = _i32(buf, pos)
    mlen, pos = _i32(buf, pos)
    if vlen < 0 or mlen < 0 or pos + vlen + mlen > len(buf):
        raise IndexError("a variant runs past the end of its record")
    return {"value": bytes(buf[pos : pos + vlen]), "metadata": bytes(buf[pos + vlen : pos + vlen + mlen])}, pos + vlen + mlen


def _java_serialized(buf: bytes, pos: int) -> tuple[bytes, int]:
    """A Java serialization stream, walked (never deserialized) to find its end: its bytes."""
    _, end = read_stream(buf, pos, "a JavaSerializer value")
    return bytes(buf[pos:end]), end


_PLAIN: dict[str, Reader] = {
    "nullvalue": lambda buf, pos: (None, pos), "tuple0": lambda buf, pos: (None, _flag(buf, pos)[1]), "date": _date,
    "stringvalue": read_string_value, "eventid": _event_id, "dewey": _dewey, "variant": _variant, "javaser": _java_serialized,
}


def datastream_reader(node: TypeNode, ctx: str, make: Callable[[TypeNode, str], Reader]) -> Reader | None:
    """A record-by-record reader for a kind of this module (None: not one); make builds nested serializers' readers."""
    kind = node.kind
    if kind in _PLAIN:
        return _PLAIN[kind]
    if kind == "transparent":
        return make(node.children[0], ctx)
    builder = _BUILDERS.get(kind)
    return None if builder is None else builder(node, ctx, make)


def _nullable(node: TypeNode, ctx: str, make: Callable[[TypeNode, str], Reader]) -> Reader:
    inner, padding = make(node.children[0], ctx), node.params[0] if node.params else 0

    def read(buf: bytes, pos: int) -> tuple[Any, int]:
        isnull, pos = _flag(buf, pos)
        return (None, pos + padding) if isnull else inner(buf, pos)

    return read


def _set(node: TypeNode, ctx: str, make: Callable[[TypeNode, str], Reader]) -> Reader:
    elem = make(node.children[0], ctx)

    def read(buf: bytes, pos: int) -> tuple[list[Any], int]:
        n, pos = _count(buf, pos, "a set")
        out = []
        for _ in range(n):
            isnull, pos = _flag(buf, pos)
            v = None
            if not isnull:
                v, pos = elem(buf, pos)
            out.append(v)
        return out, pos

    return read


def _two_sided(first: str, second: str, flag: str, tags: tuple[int, int]) -> Callable[..., Reader]:
    """Either (bool isLeft) and TaggedUnion (byte 1 or 2): one side's value after a tag."""

    def build(node: TypeNode, ctx: str, make: Callable[[TypeNode, str], Reader]) -> Reader:
        a, b = make(node.children[0], ctx), make(node.children[1], ctx)

        def read(buf: bytes, pos: int) -> tuple[dict[str, Any], int]:
            tag, pos = _flag(buf, pos)
            if tag == tags[0]:
                v, pos = a(buf, pos)
                return {flag: True, first: v, second: None}, pos
            if tag == tags[1]:
                v, pos = b(buf, pos)
                return {flag: False, first: None, second: v}, pos
            raise ValueError(f"{ctx}: {node.cls} tag {tag} is neither {tags[0]} nor {tags[1]}")

        return read

    return build


def _stream_record(node: TypeNode, ctx: str, make: Callable[[TypeNode, str], Reader]) -> Reader:
    value = make(node.children[0], ctx)

    def read(buf: bytes, pos: int) -> tuple[dict[str, Any], int]:
        tag, pos = _flag(buf, pos)
        ts = None
        if tag == 0:
            ts, pos = _i64(buf, pos)
        elif tag != 1:
            raise ValueError(f"{ctx}: stream element tag {tag} is not a record (0: with timestamp, 1: without)")
        v, pos = value(buf, pos)
        return {"timestamp": ts, "value": v}, pos

    return read


def _node_id(node: TypeNode, ctx: str, make: Callable[[TypeNode, str], Reader]) -> Reader:
    event = make(node.children[0], ctx)

    def read(buf: bytes, pos: int) -> tuple[dict[str, Any] | None, int]:
        present, pos = _flag(buf, pos)
        if not present:
            return None, pos
        e, pos = event(buf, pos)
        page, pos = read_java_string(buf, pos)
        return {"event_id": e, "page_name": page}, pos

    return read


def _shared_buffer_node(node: TypeNode, ctx: str, make: Callable[[TypeNode, str], Reader]) -> Reader:
    edge = make(node.children[0], ctx)

    def read(buf: bytes, pos: int) -> tuple[dict[str, Any], int]:
        n, pos = _count(buf, pos, "a shared buffer node's edges")
        edges = []
        for _ in range(n):
            refs, pos = _i32(buf, pos)
            e, pos = edge(buf, pos)
            edges.append({"ref_counter": refs, "edge": e})
        return {"edges": edges}, pos

    return read


def _nfa_state(node: TypeNode, ctx: str, make: Callable[[TypeNode, str], Reader]) -> Reader:
    version, node_id, event_id = (make(c, ctx) for c in node.children)
    previous = bool(node.params and node.params[0])

    def states(buf: bytes, pos: int) -> tuple[list[dict[str, Any]], int]:
        n, pos = _count(buf, pos, "an NFA's computation states")
        out = []
        for _ in range(n):
            cs: dict[str, Any] = {}
            cs["current_state_name"], pos = read_java_string(buf, pos)
            cs["previous_buffer_entry"], pos = node_id(buf, pos)
            cs["version"], pos = version(buf, pos)
            cs["start_timestamp"], pos = _i64(buf, pos)
            if previous:
                cs["previous_timestamp"], pos = _i64(buf, pos)
            present, pos = _flag(buf, pos)
            cs["start_event_id"] = None
            if present == 1:
                cs["start_event_id"], pos = event_id(buf, pos)
            out.append(cs)
        return out, pos

    def read(buf: bytes, pos: int) -> tuple[dict[str, Any], int]:
        partial, pos = states(buf, pos)
        completed, pos = states(buf, pos)
        return {"partial_matches": partial, "completed_matches": completed}, pos

    return read


def _bool(buf: bytes, pos: int) -> tuple[bool, int]:
    flag, pos = _flag(buf, pos)
    return bool(flag), pos


def _fields(*parts: tuple[str, int | Reader]) -> Callable[..., Reader]:
    """A value of fields one after another, each read by a reader or by the serializer nested at an index."""

    def build(node: TypeNode, ctx: str, make: Callable[[TypeNode, str], Reader]) -> Reader:
        readers = [(name, make(node.children[p], ctx) if isinstance(p, int) else p) for name, p in parts]

        def read(buf: bytes, pos: int) -> tuple[dict[str, Any], int]:
            out = {}
            for name, rd in readers:
                out[name], pos = rd(buf, pos)
            return out, pos

        return read

    return build


_BUILDERS: dict[str, Callable[[TypeNode, str, Callable[[TypeNode, str], Reader]], Reader]] = {
    "nullable": _nullable, "set": _set, "either": _two_sided("left", "right", "is_left", (1, 0)),
    "taggedunion": _two_sided("one", "two", "is_one", (1, 2)), "bufferentry": _fields(("has_been_joined", _bool), ("element", 0)),
    "streamrecord": _stream_record, "lockable": _fields(("ref_counter", _i32), ("element", 0)), "nodeid": _node_id,
    "sbedge": _fields(("target", 0), ("dewey_number", 1)),
    "sbnode": _shared_buffer_node, "nfastate": _nfa_state,
}


# Writers: the mirror of each reader above, so a state of these serializers is exported (changed or not) with them.
def _w_event_id(out: bytearray, v: dict[str, int]) -> None:
    out += _I32.pack(v["id"]) + _I64.pack(v["timestamp"])


def _w_dewey(out: bytearray, v: list[int]) -> None:
    out += _I32.pack(len(v)) + struct.pack(f">{len(v)}i", *v)


def _w_variant(out: bytearray, v: dict[str, bytes]) -> None:
    out += _I32.pack(len(v["value"])) + _I32.pack(len(v["metadata"])) + bytes(v["value"]) + bytes(v["metadata"])


def _w_i32(out: bytearray, v: int) -> None:
    out += _I32.pack(v)


def _w_bool(out: bytearray, v: bool) -> None:
    out.append(1 if v else 0)


_PLAIN_W: dict[str, Writer] = {
    "nullvalue": lambda out, v: None, "tuple0": lambda out, v: out.append(42), "date": WRITERS["sqldate"],  # i64 ms, MIN = null
    "stringvalue": write_string_value, "eventid": _w_event_id, "dewey": _w_dewey, "variant": _w_variant,
    "javaser": lambda out, v: out.extend(bytes(v)),  # the stream as it was read
}


def datastream_writer(node: TypeNode, ctx: str, make: Callable[[TypeNode, str], Writer]) -> Writer | None:
    """The writer of a kind of this module (None: not one), the mirror of `datastream_reader`; make builds nested writers."""
    if node.kind in _PLAIN_W:
        return _PLAIN_W[node.kind]
    builder = _W_BUILDERS.get(node.kind)
    return None if builder is None else builder(node, ctx, make)


def _w_two_sided(first: str, second: str, flag: str, tags: tuple[int, int]) -> Callable[..., Writer]:
    """Either and TaggedUnion: the mirror of `_two_sided`."""

    def build(node: TypeNode, ctx: str, make: Callable[[TypeNode, str], Writer]) -> Writer:
        a, b = make(node.children[0], ctx), make(node.children[1], ctx)

        def write(out: bytearray, v: dict[str, Any]) -> None:
            if v[flag]:
                out.append(tags[0])
                a(out, v[first])
            else:
                out.append(tags[1])
                b(out, v[second])

        return write

    return build


def _w_fields(*parts: tuple[str, int | Writer]) -> Callable[..., Writer]:
    """The mirror of `_fields`: fields one after another, each by a writer or by the serializer nested at an index."""

    def build(node: TypeNode, ctx: str, make: Callable[[TypeNode, str], Writer]) -> Writer:
        writers = [(name, make(node.children[p], ctx) if isinstance(p, int) else p) for name, p in parts]

        def write(out: bytearray, v: dict[str, Any]) -> None:
            for name, w in writers:
                w(out, v[name])

        return write

    return build


def _w_stream_record(node: TypeNode, ctx: str, make: Callable[[TypeNode, str], Writer]) -> Writer:
    value = make(node.children[0], ctx)

    def write(out: bytearray, v: dict[str, Any]) -> None:
        if v["timestamp"] is None:
            out.append(1)
        else:
            out.append(0)
            out += _I64.pack(v["timestamp"])
        value(out, v["value"])

    return write


def _w_node_id(node: TypeNode, ctx: str, make: Callable[[TypeNode, str], Writer]) -> Writer:
    event = make(node.children[0], ctx)

    def write(out: bytearray, v: dict[str, Any] | None) -> None:
        if v is None:
            out.append(0)
            return
        out.append(1)
        event(out, v["event_id"])
        write_java_string(out, v["page_name"])

    return write


def _w_shared_buffer_node(node: TypeNode, ctx: str, make: Callable[[TypeNode, str], Writer]) -> Writer:
    edge = make(node.children[0], ctx)

    def write(out: bytearray, v: dict[str, Any]) -> None:
        out += _I32.pack(len(v["edges"]))
        for e in v["edges"]:
            out += _I32.pack(e["ref_counter"])
            edge(out, e["edge"])

    return write


def _w_nfa_state(node: TypeNode, ctx: str, make: Callable[[TypeNode, str], Writer]) -> Writer:
    version, node_id, event_id = (make(c, ctx) for c in node.children)
    previous = bool(node.params and node.params[0])

    def states(out: bytearray, css: list[dict[str, Any]]) -> None:
        out += _I32.pack(len(css))
        for cs in css:
            write_java_string(out, cs["current_state_name"])
            node_id(out, cs["previous_buffer_entry"])
            version(out, cs["version"])
            out += _I64.pack(cs["start_timestamp"])
            if previous:
                out += _I64.pack(cs["previous_timestamp"])
            if cs["start_event_id"] is None:
                out.append(0)
            else:
                out.append(1)
                event_id(out, cs["start_event_id"])

    def write(out: bytearray, v: dict[str, Any]) -> None:
        states(out, v["partial_matches"])
        states(out, v["completed_matches"])

    return write


_W_BUILDERS: dict[str, Callable[[TypeNode, str, Callable[[TypeNode, str], Writer]], Writer]] = {
    "either": _w_two_sided("left", "right", "is_left", (1, 0)), "taggedunion": _w_two_sided("one", "two", "is_one", (1, 2)),
    "bufferentry": _w_fields(("has_been_joined", _w_bool), ("element", 0)), "streamrecord": _w_stream_record,
    "lockable": _w_fields(("ref_counter", _w_i32), ("element", 0)), "nodeid": _w_node_id,
    "sbedge": _w_fields(("target", 0), ("dewey_number", 1)), "sbnode": _w_shared_buffer_node, "nfastate": _w_nfa_state,
}
