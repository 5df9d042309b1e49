"""Read Java object serialization streams (java.io.ObjectOutputStream) as plain data, never as objects.

Flink writes some serializer snapshots with Java serialization: the table runtime's `RowDataSerializerSnapshot`
keeps each field's `LogicalType` as `InstantiationUtil.serializeObject` output (a whole stream, magic included),
not length-prefixed. To find where such a stream ends, and what type it describes, this module walks the grammar of
the Java Object Serialization Specification (section 6.4): class descriptors, field values, arrays, strings, enums,
block data and back references. Nothing is instantiated or executed: an object becomes a `JObject` holding its class
names and field values. A class that writes itself with `writeExternal` in the old protocol (no block data) cannot be
walked and is refused by name.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any

from flinkstate.flink.errors import CorruptFileError, UnsupportedSerializerError

__all__ = ["JClassDesc", "JObject", "JEnum", "JArray", "JBlock", "read_stream", "MAGIC"]

MAGIC = b"\xac\xed\x00\x05"
_TC_NULL, _TC_REFERENCE, _TC_CLASSDESC, _TC_OBJECT, _TC_STRING, _TC_ARRAY, _TC_CLASS = 0x70, 0x71, 0x72, 0x73, 0x74, 0x75, 0x76
_TC_BLOCKDATA, _TC_ENDBLOCKDATA, _TC_RESET, _TC_BLOCKDATALONG, _TC_EXCEPTION, _TC_LONGSTRING = 0x77, 0x78, 0x79, 0x7A, 0x7B, 0x7C
_TC_PROXYCLASSDESC, _TC_ENUM = 0x7D, 0x7E
_BASE_HANDLE = 0x7E0000
_SC_WRITE_METHOD, _SC_SERIALIZABLE, _SC_EXTERNALIZABLE, _SC_BLOCK_DATA = 0x01, 0x02, 0x04, 0x08
_PRIMITIVE = {"B": (">b", 1), "C": (">H", 2), "D": (">d", 8), "F": (">f", 4), "I": (">i", 4), "J": (">q", 8), "S": (">h", 2),
              "Z": (">?", 1)}


@dataclass
class JClassDesc:
    """A class descriptor: name, flags, fields (type code, name, class name of object fields) and its superclass."""

    name: str
    flags: int
    fields: list[tuple[str, str, str | None]]
    superclass: JClassDesc | None = None

    def hierarchy(self) -> list[JClassDesc]:
        """The class and its serializable superclasses, the topmost first (the order of their data)."""
        out: list[JClassDesc] = []
        c: JClassDesc | None = self
        while c is not None:
            out.append(c)
            c = c.superclass
        return out[::-1]


@dataclass
class JObject:
    """An object as data: its class, each class's field values (by class name), and what writeObject methods wrote."""

    cls: JClassDesc
    fields: dict[str, dict[str, Any]] = field(default_factory=dict)
    annotations: dict[str, list[Any]] = field(default_factory=dict)

    @property
    def class_name(self) -> str:
        return self.cls.name

    def get(self, name: str, default: Any = None) -> Any:
        """A field's value, looked up from the most derived class to the topmost."""
        for c in reversed(self.cls.hierarchy()):
            values = self.fields.get(c.name, {})
            if name in values:
                return values[name]
        return default


@dataclass
class JEnum:
    """An enum constant: its class and name."""

    cls: str
    name: str


@dataclass
class JArray:
    """An array: its class ("[I", "[Ljava.lang.Object;") and values."""

    cls: str
    values: list[Any]


@dataclass
class JBlock:
    """Bytes a writeObject method wrote with the stream's primitive writes (block data)."""

    data: bytes


class _Reader:
    def __init__(self, buf: bytes, pos: int, where: str) -> None:
        self.buf, self.pos, self.where = buf, pos, where
        self.handles: list[Any] = []

    def take(self, n: int) -> bytes:
        if self.pos + n > len(self.buf):
            raise CorruptFileError(f"{self.where}: a Java-serialized object ends after {len(self.buf) - self.pos} of {n} bytes")
        out = self.buf[self.pos : self.pos + n]
        self.pos += n
        return bytes(out)

    def u8(self) -> int:
        return self.take(1)[0]

    def unpack(self, fmt: str, n: int) -> Any:
        return struct.unpack(fmt, self.take(n))[0]

    def utf(self) -> str:
        return self.take(self.unpack(">H", 2)).decode("utf-8", "surrogatepass")

    def new_handle(self, value: Any) -> int:
        self.handles.append(value)
        return len(self.handles) - 1

    def content(self) -> Any:
        tc = self.u8()
        if tc == _TC_BLOCKDATA:
            return JBlock(self.take(self.u8()))
        if tc == _TC_BLOCKDATALONG:
            return JBlock(self.take(self.unpack(">i", 4)))
        return self.object(tc)

    def object(self, tc: int | None = None) -> Any:
        tc = self.u8() if tc is None else tc
        if tc == _TC_NULL:
            return None
        if tc == _TC_REFERENCE:
            h = self.unpack(">i", 4) - _BASE_HANDLE
            if not 0 <= h < len(self.handles):
                raise CorruptFileError(f"{self.where}: a Java-serialized object refers to handle {h} of {len(self.handles)}")
            return self.handles[h]
        if tc == _TC_STRING:
            h = self.new_handle(None)
            self.handles[h] = s = self.utf()
            return s
        if tc == _TC_LONGSTRING:
            h = self.new_handle(None)
            self.handles[h] = s = self.take(self.unpack(">q", 8)).decode("utf-8", "surrogatepass")
            return s
        if tc in (_TC_CLASSDESC, _TC_PROXYCLASSDESC):
            return self.class_desc(tc)
        if tc == _TC_CLASS:
            desc = self.class_desc()
            self.new_handle(desc)
            return desc
        if tc == _TC_ENUM:
            desc = self.class_desc()
            h = self.new_handle(None)
            self.handles[h] = e = JEnum(desc.name if desc else "?", self.object())
            return e
        if tc == _TC_ARRAY:
            desc = self.class_desc()
            h = self.new_handle(None)
            n = self.unpack(">i", 4)
            code = desc.name[1] if desc and len(desc.name) > 1 else "L"
            if code in _PRIMITIVE:
                fmt, size = _PRIMITIVE[code]
                values = [struct.unpack(fmt, self.take(size))[0] for _ in range(n)]
            else:
                values = [self.object() for _ in range(n)]
            self.handles[h] = a = JArray(desc.name if desc else "?", values)
            return a
        if tc == _TC_OBJECT:
            desc = self.class_desc()
            if desc is None:
                raise CorruptFileError(f"{self.where}: a Java-serialized object has no class")
            obj = JObject(desc)
            self.new_handle(obj)
            for c in desc.hierarchy():
                if c.flags & _SC_EXTERNALIZABLE:
                    if not c.flags & _SC_BLOCK_DATA:
                        raise UnsupportedSerializerError(f"{self.where}: class {c.name} is written by writeExternal without block data "
                                                         "(Java serialization protocol 1): its extent cannot be told")
                    obj.annotations[c.name] = self.annotation()
                    continue
                obj.fields[c.name] = {name: self.value(code, cls) for code, name, cls in c.fields}
                if c.flags & _SC_WRITE_METHOD:
                    obj.annotations[c.name] = self.annotation()
            return obj
        if tc == _TC_RESET:
            self.handles.clear()
            return self.object()
        raise CorruptFileError(f"{self.where}: unexpected byte 0x{tc:02x} at {self.pos - 1} in a Java-serialized object")

    def annotation(self) -> list[Any]:
        """Contents up to TC_ENDBLOCKDATA (what a writeObject/writeExternal method wrote)."""
        out = []
        while True:
            if self.pos >= len(self.buf):
                raise CorruptFileError(f"{self.where}: a Java-serialized object ends inside a class annotation")
            if self.buf[self.pos] == _TC_ENDBLOCKDATA:
                self.pos += 1
                return out
            out.append(self.content())

    def value(self, code: str, cls: str | None) -> Any:
        if code in _PRIMITIVE:
            fmt, size = _PRIMITIVE[code]
            return struct.unpack(fmt, self.take(size))[0]
        return self.object()

    def class_desc(self, tc: int | None = None) -> JClassDesc | None:
        tc = self.u8() if tc is None else tc
        if tc == _TC_NULL:
            return None
        if tc == _TC_REFERENCE:
            h = self.unpack(">i", 4) - _BASE_HANDLE
            found = self.handles[h] if 0 <= h < len(self.handles) else None
            if not isinstance(found, JClassDesc):
                raise CorruptFileError(f"{self.where}: a Java-serialized class refers to handle {h}, not a class")
            return found
        if tc == _TC_PROXYCLASSDESC:
            desc = JClassDesc("$Proxy", 0, [])
            self.new_handle(desc)
            for _ in range(self.unpack(">i", 4)):
                self.utf()
            self.annotation()
            desc.superclass = self.class_desc()
            return desc
        if tc != _TC_CLASSDESC:
            raise CorruptFileError(f"{self.where}: expected a class descriptor, found byte 0x{tc:02x} at {self.pos - 1}")
        name = self.utf()
        self.take(8)  # serialVersionUID
        desc = JClassDesc(name, 0, [])
        self.new_handle(desc)
        desc.flags = self.u8()
        fields = []
        for _ in range(self.unpack(">h", 2)):
            code = chr(self.u8())
            fname = self.utf()
            fields.append((code, fname, self.object() if code in "[L" else None))
        desc.fields = fields
        self.annotation()
        desc.superclass = self.class_desc()
        return desc


def read_stream(buf: bytes, pos: int, where: str) -> tuple[Any, int]:
    """The first object of the Java serialization stream at `pos` (magic and version included) and the position
    after it: what `InstantiationUtil.serializeObject` wrote for one object."""
    if bytes(buf[pos : pos + 4]) != MAGIC:
        raise CorruptFileError(f"{where}: no Java serialization stream at offset {pos} (found {bytes(buf[pos:pos + 4]).hex()})")
    r = _Reader(buf, pos + 4, where)
    value = r.object()
    return value, r.pos
