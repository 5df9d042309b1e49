"""Big-endian DataInput reading over bytes, the xerial snappy framed stream Flink compresses with, and file access.

`FlinkFiles` is every file access of the Flink reader: local paths, memory:// and s3:// URLs go
through the project's `FileIO` (one per folder, same storage options), whole or by byte range.
"""

from __future__ import annotations

import os
import posixpath
import struct
from typing import Any

import cramjam

from flinkstate.flink.errors import CorruptFileError

__all__ = ["DataReader", "FlinkFiles", "snappy_block", "snappy_block_into", "snappy_fits", "snappy_unframe"]

_I16 = struct.Struct(">h")
_U16 = struct.Struct(">H")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_SNAPPY_MAGIC = b"sNaPpY"


class DataReader:
    """A cursor over a buffer reading java.io.DataInputStream encodings; EOF is a CorruptFileError naming `where`."""

    __slots__ = ("buf", "pos", "where", "skips")

    def __init__(self, buf: bytes | memoryview, pos: int = 0, where: str = "<bytes>") -> None:
        self.buf = memoryview(buf) if not isinstance(buf, memoryview) else buf
        self.pos = pos
        self.where = where
        self.skips: dict[int, tuple[int, str]] | None = None  # start -> (end, why) of snapshots a resync skipped (serde)

    def _need(self, n: int) -> int:
        p = self.pos
        if n < 0 or p + n > len(self.buf):
            raise CorruptFileError(f"{self.where}: truncated (needed {n} bytes at offset {p}, have {len(self.buf) - p})")
        self.pos = p + n
        return p

    def remaining(self) -> int:
        """Bytes left after the cursor."""
        return len(self.buf) - self.pos

    def bytes(self, n: int) -> bytes:
        """The next n bytes."""
        p = self._need(n)
        return bytes(self.buf[p : p + n])

    def u8(self) -> int:
        """An unsigned byte."""
        p = self._need(1)
        return self.buf[p]

    def bool(self) -> bool:
        """A writeBoolean."""
        return self.u8() != 0

    def i16(self) -> int:
        """A writeShort, signed."""
        return _I16.unpack_from(self.buf, self._need(2))[0]

    def u16(self) -> int:
        """A writeShort, unsigned."""
        return _U16.unpack_from(self.buf, self._need(2))[0]

    def i32(self) -> int:
        """A writeInt."""
        return _I32.unpack_from(self.buf, self._need(4))[0]

    def i64(self) -> int:
        """A writeLong."""
        return _I64.unpack_from(self.buf, self._need(8))[0]

    def utf(self) -> str:
        """A writeUTF: u16 length and modified UTF-8."""
        n = self.u16()
        raw = self.bytes(n)
        try:
            return _modified_utf8(raw)
        except UnicodeDecodeError as e:
            raise CorruptFileError(f"{self.where}: bad modified UTF-8 string at offset {self.pos - n}") from e

    def sized(self) -> bytes:
        """An i32 length then that many bytes."""
        return self.bytes(self.i32())


def _modified_utf8(raw: bytes) -> str:
    """Java's modified UTF-8: NUL as C0 80 and supplementary characters as surrogate pairs."""
    if raw.isascii():
        return raw.decode("ascii")
    text = raw.replace(b"\xc0\x80", b"\x00").decode("utf-8", "surrogatepass")
    return text.encode("utf-16", "surrogatepass").decode("utf-16")


_SNAPPY_MAX_RATIO = 32  # a snappy copy of 64 bytes takes 2 bytes at least (3 in fact): no block decompresses to more


def snappy_fits(claimed: Any, compressed: Any) -> Any:
    """Whether a raw snappy block of `compressed` bytes can decompress to the `claimed` bytes of its length preamble
    (ints or numpy arrays, elementwise): a corrupt preamble is refused before its length is allocated (up to 4 GiB)."""
    return claimed <= _SNAPPY_MAX_RATIO * compressed + 64


def snappy_block(src: bytes | memoryview, where: str) -> memoryview:
    """One raw snappy block (its decompressed length in a varint preamble) decompressed; corrupt: CorruptFileError."""
    try:
        claimed = cramjam.snappy.decompress_raw_len(src)
        if not snappy_fits(claimed, len(src)):
            raise CorruptFileError(f"{where}: its preamble says {claimed} bytes, more than {len(src)} compressed bytes can hold")
        return memoryview(cramjam.snappy.decompress_raw(src))
    except cramjam.DecompressionError as e:
        raise CorruptFileError(f"{where}: {e}") from e


def snappy_block_into(src: bytes | memoryview, dst: memoryview, where: str) -> None:
    """One raw snappy block decompressed into dst, which must be exactly as long as its preamble says (RocksDB's blocks
    decompressed into one buffer, with no allocation per block)."""
    try:
        n = cramjam.snappy.decompress_raw_into(src, dst)
    except cramjam.DecompressionError as e:
        raise CorruptFileError(f"{where}: {e}") from e
    if n != len(dst):
        raise CorruptFileError(f"{where}: the block decompressed to {n} bytes, not the {len(dst)} its preamble says")


def snappy_unframe(buf: bytes | memoryview, where: str) -> bytes:
    """Decompress a snappy framed stream (stream identifier + chunks) chunk by chunk as raw snappy blocks.

    Chunk CRC32C checksums are not verified (no CRC32C in the standard library); lengths are.
    """
    mv = memoryview(buf)
    out: list[bytes | memoryview] = []
    pos = 0
    n = len(mv)
    while pos < n:
        if pos + 4 > n:
            raise CorruptFileError(f"{where}: truncated snappy chunk header at offset {pos}")
        ctype = mv[pos]
        clen = mv[pos + 1] | (mv[pos + 2] << 8) | (mv[pos + 3] << 16)
        start = pos + 4
        end = start + clen
        if end > n:
            raise CorruptFileError(f"{where}: truncated snappy chunk at offset {pos} ({clen} bytes declared)")
        if ctype == 0xFF:
            if bytes(mv[start:end]) != _SNAPPY_MAGIC:
                raise CorruptFileError(f"{where}: bad snappy stream identifier at offset {pos}")
        elif ctype == 0x00:
            out.append(snappy_block(mv[start + 4 : end], f"{where}: bad snappy chunk at offset {pos}"))
        elif ctype == 0x01:
            out.append(mv[start + 4 : end])
        elif ctype < 0x80:
            raise CorruptFileError(f"{where}: reserved snappy chunk type {ctype:#x} at offset {pos}")
        pos = end
    return b"".join(out)


def _split_url(url: str) -> tuple[str, str]:
    """(folder URL, file name) of a local path or URL; Flink's `file:` URIs become local paths."""
    if url.startswith("file://"):
        url = url[7:]
    elif url.startswith("file:"):
        url = url[5:]
    if "://" in url:
        scheme, rest = url.split("://", 1)
        if scheme in ("s3a", "s3n", "s3p"):
            scheme = "s3"
        folder, name = posixpath.split(rest.rstrip("/"))
        return f"{scheme}://{folder}", name
    folder, name = os.path.split(os.path.abspath(url))
    return folder, name


def join_url(base: str, rel: str) -> str:
    """A path relative to a folder (local path or URL)."""
    return posixpath.join(base, rel) if "://" in base else os.path.join(base, rel)


class FlinkFiles:
    """Reads the files of a Flink savepoint/checkpoint through FileIO (local, memory://, s3://); picklable.

    `relocated` maps folders recorded in `_metadata` that no longer exist to the copied layout's
    folders they are read from; `bytes_read` and `read_calls` count what was read in this process.
    """

    def __init__(self, storage_options: dict[str, Any] | None = None) -> None:
        self.storage_options: dict[str, Any] = dict(storage_options or {})
        self.relocated: dict[str, str] = {}
        self._ios: dict[str, Any] = {}

    def __getstate__(self) -> dict[str, Any]:
        return {"storage_options": self.storage_options, "relocated": self.relocated}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.storage_options = state["storage_options"]
        self.relocated = state["relocated"]
        self._ios = {}

    def __repr__(self) -> str:
        return f"FlinkFiles(relocated={self.relocated!r})"

    def _io(self, folder: str) -> Any:
        io = self._ios.get(folder)
        if io is None:
            from flinkstate.core.io import FileIO

            io = self._ios[folder] = FileIO(folder, self.storage_options if "://" in folder else None)
        return io

    def resolve(self, url: str) -> tuple[Any, str]:
        """The FileIO of a file's folder (after relocation) and the file's name in it."""
        folder, name = _split_url(url)
        return self._io(self.relocated.get(folder, folder)), name

    def location(self, url: str) -> str:
        """Where a recorded file is read from (relocated when its folder was copied away)."""
        folder, name = _split_url(url)
        return join_url(self.relocated.get(folder, folder), name)

    def read(self, url: str, offset: int = 0, length: int | None = None) -> bytes:
        """A file's bytes, or a byte range of it; FileNotFoundError when it is missing."""
        io, name = self.resolve(url)
        try:
            return io.read_bytes(name, offset, length)
        except FileNotFoundError:
            raise
        except OSError as e:
            if not io.exists(name):
                raise FileNotFoundError(url) from e
            raise

    def exists(self, url: str) -> bool:
        """True when the file (after relocation) exists."""
        io, name = self.resolve(url)
        return bool(io.exists(name))

    def is_dir(self, url: str) -> bool:
        """True when url is a folder (on object stores: a prefix with objects below it)."""
        folder, name = _split_url(url)
        io = self._io(folder)
        return bool(io.fs.isdir(io.fs_path(name)))

    def list_dir(self, url: str) -> list[str]:
        """The names directly inside a folder (empty when it does not exist)."""
        folder, name = _split_url(url)
        io = self._io(folder)
        path = io.fs_path(name)
        if io.scheme == "s3":
            io._forget_listings(path)
        try:
            entries = io.fs.ls(path, detail=False)
        except FileNotFoundError:
            return []
        return sorted({posixpath.basename(str(e).rstrip("/")) for e in entries})

    def modified_ms(self, url: str) -> int:
        """A file's modification time in epoch milliseconds."""
        io, name = self.resolve(url)
        return int(io.modified_ms(name))

    @property
    def bytes_read(self) -> int:
        """Bytes read through this object's FileIOs in this process."""
        return sum(io.bytes_read for io in self._ios.values())

    @property
    def read_calls(self) -> int:
        """Reads (whole files or ranges) made through this object's FileIOs in this process."""
        return sum(io.read_calls for io in self._ios.values())
