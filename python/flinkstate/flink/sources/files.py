"""flink-connector-files' FileSource: `FileSourceSplitSerializer` (version 1) and `PendingSplitsCheckpointSerializer`
(version 1), checked against the jars of Flink 1.20 and 2.3 (their classes decode what this writes: tests).

Split v1: writeUTF id; Path.serializeToDataOutputView (bool: a URI follows; then scheme, user info, host as
StringUtils.writeNullableString, int port, path, query, fragment likewise); long offset, long length, long modification
time, long file size; int n hosts, n x writeUTF; bool has position, [long offset (-1: none), long records after it]
(the reader's CheckpointedPosition: TextLineInputFormat keeps offset -1 and the lines already read).
Enumerator v1 (little-endian!): int 0xDEADBEEF, int split version, int n splits, int n paths, n x (int length,
split), n x (int length, UTF-8 of Path.toString()): the pending splits and every path already enumerated.
"""

from __future__ import annotations

import struct

from flinkstate.flink._io import DataReader
from flinkstate.flink.errors import CorruptFileError
from flinkstate.flink.sources._wire import Out, done, read_string_value
from flinkstate.flink.sources.model import EnumEntry, EnumeratorState, Split

__all__ = ["ENUM_VERSIONS", "MAGIC", "NO_OFFSET", "SPLIT_VERSIONS", "decode_enumerator", "decode_split", "encode_enumerator", "encode_split",
           "path_text"]

SPLIT_VERSIONS = (1,)
ENUM_VERSIONS = (1,)
MAGIC = 0xDEADBEEF
NO_OFFSET = -1


def _nullable(r: DataReader) -> str | None:
    return read_string_value(r) if r.bool() else None


def path_text(uri: tuple) -> str:
    """Flink's Path.toString() of a URI's parts (scheme, user info, host, port, path, query, fragment)."""
    scheme, user, host, port, path, query, fragment = uri
    out = f"{scheme}:" if scheme is not None else ""
    if host is not None:
        out += "//" + (f"{user}@" if user is not None else "") + host + (f":{port}" if port != -1 else "")
    out += path or ""
    if query is not None:
        out += "?" + query
    if fragment is not None:
        out += "#" + fragment
    return out


def decode_split(version: int, data: bytes, where: str) -> Split:
    """One FileSourceSplit's bytes, parsed exactly."""
    if version not in SPLIT_VERSIONS:
        raise CorruptFileError(f"{where}: file split version {version} (known: {SPLIT_VERSIONS})")
    r = DataReader(data, where=where)
    split_id = r.utf()
    if not r.bool():
        raise CorruptFileError(f"{where}: file split {split_id!r} has no path")
    scheme, user, host = _nullable(r), _nullable(r), _nullable(r)
    port = r.i32()
    uri = (scheme, user, host, port, _nullable(r), _nullable(r), _nullable(r))
    offset, length, mtime, size = r.i64(), r.i64(), r.i64(), r.i64()
    n = r.i32()
    if n < 0 or n > r.remaining():
        raise CorruptFileError(f"{where}: file split {split_id!r} claims {n} hosts")
    hosts = tuple(r.utf() for _ in range(n))
    pos = (r.i64(), r.i64()) if r.bool() else (None, None)
    done(r)
    return Split("file", split_id, path=path_text(uri), uri=uri, offset=offset, length=length, modification_time=mtime,
                 file_size=size, hosts=hosts, reader_offset=pos[0], records_to_skip=pos[1])


def encode_split(s: Split, version: int = 1) -> bytes:
    """FileSourceSplitSerializer.serialize."""
    if version not in SPLIT_VERSIONS:
        raise CorruptFileError(f"file split version {version} cannot be written (known: {SPLIT_VERSIONS})")
    if s.uri is None:
        raise CorruptFileError(f"file split {s.split_id!r} has no path to write")
    out = Out().utf(s.split_id).bool(True)
    scheme, user, host, port, path, query, fragment = s.uri
    for part in (scheme, user, host):
        out.bool(part is not None)
        if part is not None:
            out.string_value(part)
    out.i32(port)
    for part in (path, query, fragment):
        out.bool(part is not None)
        if part is not None:
            out.string_value(part)
    out.i64(s.offset or 0).i64(s.length or 0).i64(s.modification_time or 0).i64(s.file_size or 0).i32(len(s.hosts))
    for h in s.hosts:
        out.utf(h)
    out.bool(s.records_to_skip is not None)
    if s.records_to_skip is not None:
        out.i64(NO_OFFSET if s.reader_offset is None else s.reader_offset).i64(s.records_to_skip)
    return out.bytes()


def decode_enumerator(version: int, data: bytes, coordinator_version: int, where: str) -> EnumeratorState:
    """A PendingSplitsCheckpoint: pending splits (status "pending") and the paths already processed."""
    if version not in ENUM_VERSIONS:
        raise CorruptFileError(f"{where}: file enumerator version {version} (known: {ENUM_VERSIONS})")
    if len(data) < 16:
        raise CorruptFileError(f"{where}: a pending-splits checkpoint of {len(data)} bytes")
    magic, split_version, n_splits, n_paths = struct.unpack_from("<Iiii", data, 0)
    if magic != MAGIC:
        raise CorruptFileError(f"{where}: not a pending-splits checkpoint (magic {magic:08X})")
    st = EnumeratorState("file", coordinator_version, version, split_version=split_version)
    pos = 16
    for i in range(n_splits + n_paths):
        if pos + 4 > len(data):
            raise CorruptFileError(f"{where}: truncated pending-splits checkpoint")
        n = struct.unpack_from("<i", data, pos)[0]
        if n < 0 or pos + 4 + n > len(data):
            raise CorruptFileError(f"{where}: entry {i} of {n} bytes runs past the end ({len(data)} bytes)")
        raw = data[pos + 4 : pos + 4 + n]
        pos += 4 + n
        if i < n_splits:
            st.entries.append(EnumEntry("pending", decode_split(split_version, raw, where)))
        else:
            try:
                st.processed_paths.append(raw.decode("utf-8"))
            except UnicodeDecodeError as e:
                raise CorruptFileError(f"{where}: processed path {i - n_splits} is not UTF-8") from e
    if pos != len(data):
        raise CorruptFileError(f"{where}: {len(data) - pos} unexpected bytes after the pending-splits checkpoint")
    return st


def encode_enumerator(st: EnumeratorState) -> bytes:
    """PendingSplitsCheckpointSerializer.serialize (little-endian)."""
    if st.version not in ENUM_VERSIONS:
        raise CorruptFileError(f"file enumerator version {st.version} cannot be written (known: {ENUM_VERSIONS})")
    version = st.split_version if st.split_version is not None else 1
    splits = [encode_split(e.split, version) for e in st.entries]
    paths = [p.encode("utf-8") for p in st.processed_paths]
    out = bytearray(struct.pack("<Iiii", MAGIC, version, len(splits), len(paths)))
    for b in splits + paths:
        out += struct.pack("<i", len(b)) + b
    return bytes(out)
