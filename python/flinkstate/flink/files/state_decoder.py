"""One keyed state's decoder: its records' key, namespace, user key and value readers, and the rows decoded so far.

Records come located (`_framing`) and are decoded per state at once through a record plan (`_records`) where every
part has a vector reader, else one by one (`add`); heap-native entries come decoded (`add_decoded`). The rows of
every key group fed to one decoder make one Arrow table (`table`).
"""

from __future__ import annotations

import struct
from collections.abc import Callable

import numpy as np
import pyarrow as pa

from flinkstate.core.errors import FlinkStateError
from flinkstate.flink.errors import (
    UnsupportedFlinkFormatError,
    UnsupportedSerializerError,
)
from flinkstate.flink.serde._records import record_plan
from flinkstate.flink.serde._vector import Source
from flinkstate.flink.serde.serializers import (
    StateMeta,
    TypeNode,
    arrow_type,
    opaque_part,
    unit_namespace,
)
from flinkstate.flink.serde.kryo.bind import KryoOptions, bind_state, learnt, settle, with_shapes
from flinkstate.flink.serde.values import Reader, make_reader, read_rest

__all__ = ["KeyGroupCorrupt", "StateDecoder"]

_U64 = struct.Struct(">Q")
_I64 = struct.Struct(">q")
_SIGN = 1 << 63


class KeyGroupCorrupt(ValueError):
    """A record of key group kg does not decode."""

    def __init__(self, kg: int, message: str) -> None:
        super().__init__(message)
        self.kg = kg



def _type_of(node: TypeNode) -> str:
    """" (type <class>)" of a Kryo/Avro serializer, "" where the snapshot does not name it."""
    return f" (type {node.names[0]})" if node.names else ""


def _why(node: TypeNode) -> str:
    """Why a Kryo serializer's values stay bytes (a class without a schema among them: `kryo.bind`), as ": ...", or ""."""
    return f" ({node.logical[0]})" if node.kind == "opaque" and node.logical else ""


class StateDecoder:
    """Accumulates the decoded entries of one state across key groups."""

    def __init__(self, meta: StateMeta, key_type: TypeNode, prefix: int, ctx: str, kryo: KryoOptions | None = None,
                 op_id: str = "") -> None:
        self.header_meta = meta  # as the file's header declares it (subtasks' headers are compared by it)
        meta, key_type = bind_state(meta, key_type, kryo, op_id)  # Kryo serializers read by the Kryo that wrote them
        self.meta = meta
        self.ctx = ctx
        self.prefix = prefix
        self.timer = meta.backend_type == "PRIORITY_QUEUE"
        self.failed: FlinkStateError | None = None  # a value of this state did not decode: reading it raises this
        self.starts: list[int] = []
        self.kg_runs: list[tuple[int, int]] = []
        self.vector_chunks: list[dict[str, pa.Array]] = []
        try:
            self._setup(meta, key_type, prefix, ctx)
        except (KeyError, IndexError, UnsupportedSerializerError, UnsupportedFlinkFormatError) as e:
            self._broken(meta, key_type, ctx, e)

    def _setup(self, meta: StateMeta, key_type: TypeNode, prefix: int, ctx: str) -> None:
        self.rows: dict[str, list] = {"key_group": [], "key": []}
        if self.timer:
            node = meta.serializers["VALUE_SERIALIZER"]
            if node.kind != "timer":
                raise UnsupportedFlinkFormatError(f"{ctx}: priority queue state {meta.name!r} is not a timer service ({node.cls})")
            self.key_node, self.ns_node = node.children
            self.value_node = None
            if not unit_namespace(self.ns_node):
                self.rows["namespace"] = []
            self.rows["timestamp"] = []
        else:
            self.key_node = key_type
            self.ns_node = meta.serializers["NAMESPACE_SERIALIZER"]
            self.value_node = meta.serializers["VALUE_SERIALIZER"]
            if not unit_namespace(self.ns_node):
                self.rows["namespace"] = []
        self.kind = "TIMER" if self.timer else meta.keyed_type
        self.key_reader = make_reader(self.key_node, ctx)
        self.ns_reader = make_reader(self.ns_node, ctx)
        self.ambiguous = self.key_node.fixed_width < 0 and self.ns_node.fixed_width < 0
        self.user_key_reader: Reader | None = None
        self.ttl = False
        elem = self.value_node
        self.elem_path = "VALUE_SERIALIZER"  # where elem_node is in the state's serializers (Kryo types are kept by path)
        if self.kind == "MAP":
            self.rows["user_key"] = []
            self.user_key_reader = make_reader(elem.children[0], ctx)
            elem = elem.children[1]
            self.elem_path += "/1"
        elif self.kind == "LIST":
            elem = elem.children[0]
            self.elem_path += "/0"
        if elem is not None:
            self.elem_reader = make_reader(elem, ctx)  # a TTL wrapper reads (timestamp, value)
            self.rows["value"] = []
        if elem is not None and elem.kind == "ttl":
            self.ttl = True
            elem = elem.children[1]
            self.elem_path += "/1"
        self.elem_node = elem
        if self.ttl:
            self.rows["ttl_last_access"] = []
        # States whose parts all have vector readers are decoded from their records' start offsets at once.
        self.plan = record_plan(self.kind, prefix, self.key_node, self.ns_node, self.value_node, ctx)
        self._opaque(ctx)

    def _broken(self, meta: StateMeta, key_type: TypeNode, ctx: str, e: Exception) -> None:
        """A state whose serializers do not make a decoder (one missing, or of a layout that cannot be read): it is
        declared, and reading it raises an UnsupportedSerializerError naming it; the other states are unaffected."""
        missing = TypeNode("unknown", "<no serializer>")
        value = meta.serializers.get("VALUE_SERIALIZER", missing)
        self.key_node = value.children[0] if self.timer and value.kind == "timer" else key_type
        self.ns_node = meta.serializers.get("NAMESPACE_SERIALIZER", value.children[1] if self.timer and value.kind == "timer" else missing)
        self.value_node = None if self.timer else value
        self.kind = "TIMER" if self.timer else meta.keyed_type
        self.elem_node = None if self.timer else missing
        self.ttl = False
        self.ambiguous = False
        self.plan = None
        self.user_key_reader = None
        self.rows = {"key_group": [], "key": []}
        what = f"missing serializer {e}" if isinstance(e, KeyError) else str(e)
        self.unreadable = f"{ctx}: its serializers do not make a decoder ({what}); the other states are read"
        self.raw_error = None

    def _opaque(self, ctx: str) -> None:
        """Values no decoder types (Kryo, Avro, user Values, unknown or refused snapshots): the whole value's bytes where a
        record frames it (a value, map value or TTL value, also when the undecodable part is nested in it), else the
        state cannot be read; a refused serializer's state is never read."""
        self.unreadable: str | None = None
        self.raw_error: str | None = None
        value = opaque_part(self.elem_node) if self.value_node is not None else None
        user_key = opaque_part(self.value_node.children[0]) if self.kind == "MAP" else None
        other = opaque_part(self.key_node) or opaque_part(self.ns_node) or user_key
        if value is None and other is None:
            return
        self.plan = None
        o = other or value
        assert o is not None
        why = f" ({o.error})" if o.error else _why(o)
        if o.kind == "refused":
            self.unreadable = (f"{ctx}: serializer {o.cls} is refused: Flink reads it only to migrate state written by releases "
                               "before 1.20 (or no value of it exists); flinkstate neither decodes nor keeps its values")
            return
        if other is not None or self.kind == "LIST":
            self.unreadable = (f"{ctx}: serializer {o.cls}{_type_of(o)}{why} cannot be decoded, nor read as raw bytes: only "
                               "a whole value, map value or TTL value is length-framed (not list elements, keys or namespaces)")
            return
        whole = "" if o is self.elem_node else f", nested in {self.elem_node.cls}: the whole value is kept"
        self.raw_error = (f"{ctx}: serializer {o.cls}{_type_of(o)}{why} cannot be decoded{whole}; read with raw_values=True "
                          "(Spark: .option('rawValues', 'true')) to get its values as raw serialized bytes")
        if o is not self.elem_node:  # the value's own serializer decodes, but not a part of it: the value as its bytes
            self.elem_node = TypeNode("opaque", self.elem_node.cls, names=(f"{self.elem_node.cls} holding {o.cls}",))
        if self.ttl:
            self.elem_reader = lambda buf, pos: ((_I64.unpack_from(buf, pos)[0], bytes(buf[pos + 8 :])), len(buf))
        else:
            self.elem_reader = read_rest
        # the same bytes at once when key and namespace have vector readers
        self.plan = record_plan(self.kind, self.prefix, self.key_node, self.ns_node, self.value_node, ctx, raw_rest=True)

    def fail(self, error: FlinkStateError) -> None:
        """A value of this state did not decode: the state is not read (its table raises error), the others are."""
        if self.failed is None:
            self.failed = error
        self.starts, self.kg_runs, self.vector_chunks = [], [], []

    def kept_as_bytes(self) -> str | None:
        """The serializers of this state whose values are read as their serialized bytes (Kryo, Avro and unknown classes,
        the table runtime's BinaryRowData), as "class, class"; None when every part is decoded."""
        found: list[str] = []

        def walk(node: TypeNode | None) -> None:
            if node is None:
                return
            if node.kind in ("opaque", "unknown", "rowdata", "arraydata") and node.cls not in found:
                found.append(node.cls + (f" ({node.names[0]})" if node.kind == "opaque" and node.names else "")
                             + (f": {node.logical[0]}" if node.kind == "opaque" and node.logical else ""))
                return
            for c in node.children:
                walk(c)

        for node in (self.key_node, self.ns_node, self.value_node):
            walk(node)
        return ", ".join(found) or None

    def row_count(self) -> int:
        """Rows decoded so far (column chunks and rows added one by one)."""
        return sum(len(c["key_group"]) for c in self.vector_chunks) + len(self.rows["key_group"])

    def flush(self, src: Source) -> None:
        """Decode the records collected from src (one file's stream) into column chunks."""
        if not self.starts:
            return
        starts = np.array(self.starts, dtype=np.int64)
        kgs = np.repeat(np.array([k for k, _ in self.kg_runs], np.int32), [n for _, n in self.kg_runs])
        self.starts, self.kg_runs = [], []
        self.decode_records(src, starts, kgs)

    def decode_records(self, src: Source, starts: np.ndarray, kgs: np.ndarray,
                       lengths: tuple[np.ndarray, np.ndarray] | None = None) -> None:
        """Decode the records starting at these offsets of src (key groups kgs) into a column chunk. lengths: their key
        and value lengths, when framing read them and checked the key groups of their keys."""
        plan = self.plan
        assert plan is not None
        self._chunk(lambda s: plan.columns(src, starts[s], kgs[s], None if lengths is None else (lengths[0][s], lengths[1][s])), kgs)

    def decode_split(self, keys: tuple[Source, np.ndarray, np.ndarray], values: tuple[Source, np.ndarray, np.ndarray],
                     kgs: np.ndarray) -> None:
        """Decode records whose keys and values are held apart, each (source, offsets, lengths): a RocksDB column
        family's, without framing them into one stream first."""
        plan = self.plan
        assert plan is not None
        (ksrc, kpos, klen), (vsrc, vpos, vlen) = keys, values
        self._chunk(lambda s: plan.split_columns(ksrc, kpos[s], klen[s], vsrc, vpos[s], vlen[s], kgs[s]), kgs)

    def _chunk(self, columns: Callable[[slice | np.ndarray], dict[str, pa.Array]], kgs: np.ndarray) -> None:
        """columns(every record) as a new column chunk; when that fails, the first key group whose records fail on
        their own is a KeyGroupCorrupt."""
        try:
            self.vector_chunks.append(columns(slice(None)))
        except (IndexError, ValueError) as e:
            for kg in dict.fromkeys(kgs.tolist()):
                try:
                    columns(kgs == kg)
                except (IndexError, ValueError) as inner:
                    raise KeyGroupCorrupt(kg, str(inner)) from e
            raise

    def _skip_len(self, key: bytes, pos: int, start: int) -> int:
        n = pos - start
        pos += 1
        n >>= 8
        while n:
            pos += 1
            n >>= 8
        return pos

    def add(self, kg: int, key: bytes, value: bytes) -> None:
        """Decode one (key, value) record of key group kg."""
        if self.unreadable is not None or self.failed is not None:
            return
        rows = self.rows
        pos = self.prefix
        if self.timer:
            ts = _U64.unpack_from(key, pos)[0] ^ _SIGN
            if ts >= _SIGN:
                ts -= 1 << 64
            k, pos = self.key_reader(key, pos + 8)
            ns, pos = self.ns_reader(key, pos)
            rows["key_group"].append(kg)
            rows["key"].append(k)
            if "namespace" in rows:
                rows["namespace"].append(ns)
            rows["timestamp"].append(ts)
            return
        start = pos
        k, pos = self.key_reader(key, pos)
        if self.ambiguous:
            pos = self._skip_len(key, pos, start)
        start = pos
        ns, pos = self.ns_reader(key, pos)
        if self.ambiguous:
            pos = self._skip_len(key, pos, start)
        if self.kind == "MAP":
            uk, pos = self.user_key_reader(key, pos)
            if value[0]:
                v = None
                vpos = 1
            else:
                v, vpos = self.elem_reader(value, 1)
            self._row(kg, k, ns, v, vpos, len(value))
            rows["user_key"].append(uk)
        elif self.kind == "LIST":
            vpos = 0
            n = len(value)
            while vpos < n:
                v, vpos = self.elem_reader(value, vpos)
                self._row(kg, k, ns, v, vpos, vpos)
                if vpos < n:
                    if value[vpos] != 0x2C:
                        raise ValueError("list elements are not ','-delimited")
                    vpos += 1
        else:
            v, vpos = self.elem_reader(value, 0)
            self._row(kg, k, ns, v, vpos, len(value))
        if pos != len(key):
            raise ValueError(f"{len(key) - pos} unread bytes in a key")

    def add_decoded(self, kg: int, k: object, ns: object, state: object) -> None:
        """Add one decoded heap-native entry: a value, a list of elements, a list of map (key, value) or a timestamp."""
        if self.timer:
            rows = self.rows
            rows["key_group"].append(kg)
            rows["key"].append(k)
            if "namespace" in rows:
                rows["namespace"].append(ns)
            rows["timestamp"].append(state)
        elif self.kind == "MAP":
            for uk, v in state:
                self._row(kg, k, ns, v, 0, 0)
                self.rows["user_key"].append(uk)
        elif self.kind == "LIST":
            for v in state:
                self._row(kg, k, ns, v, 0, 0)
        else:
            self._row(kg, k, ns, state, 0, 0)

    def _row(self, kg: int, k: object, ns: object, v: object, vpos: int, vend: int) -> None:
        if vpos != vend:
            raise ValueError(f"{vend - vpos} unread bytes in a value")
        rows = self.rows
        rows["key_group"].append(kg)
        rows["key"].append(k)
        if "namespace" in rows:
            rows["namespace"].append(ns)
        if self.ttl:
            if v is None:
                rows["ttl_last_access"].append(None)
                rows["value"].append(None)
            else:
                rows["ttl_last_access"].append(v[0])
                rows["value"].append(v[1])
        else:
            rows["value"].append(v)

    def _parts(self) -> list[tuple[str, str, TypeNode | None]]:
        """(rows column, path in the state's serializers, serializer) of the parts a row holds."""
        if self.timer:
            return [("key", "VALUE_SERIALIZER/0", self.key_node), ("namespace", "VALUE_SERIALIZER/1", self.ns_node)]
        parts = [("key", "KEY", self.key_node), ("namespace", "NAMESPACE_SERIALIZER", self.ns_node),
                 ("value", self.elem_path, self.elem_node)]
        if self.kind == "MAP":
            parts.append(("user_key", "VALUE_SERIALIZER/0", self.value_node.children[0]))
        return parts

    def _settle_kryo(self) -> None:
        """Kryo values read without a known type: typed by the values read (`kryo.bind.settle`), the serializers with
        their shapes (`kryo_shapes`)."""
        shapes: dict[str, TypeNode] = {}
        for col, path, node in self._parts():
            if node is None or col not in self.rows:
                continue
            typed, self.rows[col] = settle(node, self.rows[col], self.ctx)
            shapes.update(learnt(typed, path))
        if not shapes:
            return
        self.meta, self.key_node = with_shapes(self.meta, self.key_node, shapes)
        if self.timer:
            self.key_node, self.ns_node = self.meta.serializers["VALUE_SERIALIZER"].children
            return
        self.ns_node = self.meta.serializers["NAMESPACE_SERIALIZER"]
        self.value_node = self.meta.serializers["VALUE_SERIALIZER"]
        elem = self.value_node
        for i in self.elem_path.split("/")[1:]:
            elem = elem.children[int(i)]
        self.elem_node = elem

    def kryo_shapes(self) -> dict[str, TypeNode]:
        """The types of this state's Kryo values (by path in its serializers), as far as the values read tell."""
        if self.unreadable is None:
            self._settle_kryo()
        out: dict[str, TypeNode] = {}
        for role, node in [("KEY", self.key_node), *self.meta.serializers.items()]:
            out.update(learnt(node, role))
        return out

    def table(self, raw_values: bool = False) -> pa.Table:
        """The decoded entries as an Arrow table (Kryo/Avro values as raw bytes only when raw_values is set)."""
        if self.unreadable is not None:
            raise UnsupportedSerializerError(self.unreadable)
        if self.failed is not None:
            raise self.failed
        if self.raw_error is not None and not raw_values:
            raise UnsupportedSerializerError(self.raw_error)
        self._settle_kryo()
        types = {"key_group": pa.int32(), "key": arrow_type(self.key_node), "timestamp": pa.int64(), "ttl_last_access": pa.int64()}
        if "namespace" in self.rows:
            types["namespace"] = arrow_type(self.ns_node)
        if "user_key" in self.rows:
            types["user_key"] = arrow_type(self.value_node.children[0])
        if "value" in self.rows:
            types["value"] = arrow_type(self.elem_node)
        order = ["key_group", "key", "namespace", "user_key", "timestamp", "value", "ttl_last_access"]
        if self.vector_chunks:
            names = [c for c in order if c in self.rows]
            return pa.Table.from_batches(
                [pa.record_batch([ch[c].cast(types[c]) for c in names], names=names) for ch in self.vector_chunks]
            )
        cols = {c: pa.array(self.rows[c], type=types[c]) for c in order if c in self.rows}
        return pa.table(cols)

