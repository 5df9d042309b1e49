"""File IO over fsspec URLs, deliberately picklable so Spark can ship it to executors.

A `FileIO` holds only the root URL and storage options; the fsspec filesystem is created
lazily in each process. Local paths, memory:// and s3:// (s3fs) are supported; a memory:// root keeps
its Delta tables in the local folder its `delta_location` storage option names.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Callable
from typing import Any, TypeVar
from urllib.parse import urlparse

from flinkstate.core.errors import InvalidArgumentError

_T = TypeVar("_T")

__all__ = ["FileIO", "normalize_root", "DELTA_LOCATION", "S3_ENDPOINT", "S3_KEY", "S3_SECRET", "S3_REGION", "S3_TOKEN"]

# storage option keys (s3fs naming); translated for delta-rs by `delta_storage_options`
S3_ENDPOINT = "endpoint_url"
S3_KEY = "key"
S3_SECRET = "secret"
S3_REGION = "region"
S3_TOKEN = "token"
# storage option of memory:// roots: the local folder holding their Delta tables (delta-rs cannot see fsspec's memory filesystem)
DELTA_LOCATION = "delta_location"

_SUPPORTED = ("file", "memory", "s3", "s3a")


def normalize_root(path: str | os.PathLike[str]) -> str:
    """Turn a path or URL into a canonical root URL without a trailing slash."""
    p = os.fspath(path)
    if not isinstance(p, str) or not p:
        raise InvalidArgumentError(f"path must be a non-empty string, got {path!r}")
    if "\0" in p:
        raise InvalidArgumentError(f"path {p!r} contains a NUL character: no filesystem or object store can hold it")
    parsed = urlparse(p)
    scheme = parsed.scheme.lower()
    if scheme in ("", "file") or (len(scheme) == 1 and os.name == "nt"):
        local = parsed.path if scheme == "file" else p
        return "file://" + os.path.abspath(os.path.expanduser(local))
    if scheme not in _SUPPORTED:
        raise InvalidArgumentError(f"unsupported URL scheme {scheme!r} in path {p!r}; use a local path, memory:// or s3://")
    if scheme == "s3a":
        p = "s3" + p[3:]
    return p.rstrip("/")


class FileIO:
    """Filesystem access rooted at a checkpoint directory URL; picklable."""

    def __init__(self, root: str | os.PathLike[str], storage_options: dict[str, Any] | None = None) -> None:
        self.root = normalize_root(root)
        self.storage_options: dict[str, Any] = dict(storage_options or {})
        self._fs: Any = None
        self.bytes_read = 0  # bytes returned by read_bytes in this process (a counter for tests and benches)
        self.read_calls = 0

    # -- pickling: never ship a live filesystem object
    def __getstate__(self) -> dict[str, Any]:
        return {"root": self.root, "storage_options": self.storage_options}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.root = state["root"]
        self.storage_options = state["storage_options"]
        self._fs = None
        self.bytes_read = 0
        self.read_calls = 0

    def __repr__(self) -> str:
        return f"FileIO({self.root!r})"

    @property
    def scheme(self) -> str:
        """URL scheme of the root: file, memory or s3."""
        return urlparse(self.root).scheme

    @property
    def fs(self) -> Any:
        """The fsspec filesystem (created on first use in each process)."""
        if self._fs is None:
            import fsspec

            if self.scheme == "s3":
                opts = dict(self.storage_options)
                region = opts.pop(S3_REGION, None)
                if region:
                    opts.setdefault("client_kwargs", {})["region_name"] = region
                self._fs = fsspec.filesystem("s3", **opts)
            elif self.scheme == "memory":
                self._fs = fsspec.filesystem("memory")
            else:
                self._fs = fsspec.filesystem("file")
        return self._fs

    @property
    def arrow_fs(self) -> Any:
        """A pyarrow filesystem for datasets: native for local files, fsspec-wrapped otherwise."""
        import pyarrow.fs as pafs

        if self.scheme == "file":
            return pafs.LocalFileSystem()
        return pafs.PyFileSystem(pafs.FSSpecHandler(self.fs))

    def url(self, rel: str) -> str:
        """Absolute URL of a path relative to the root (validated to stay inside it)."""
        rel = rel.replace("\\", "/")
        norm = posixpath.normpath(rel)
        if norm.startswith("/") or norm == ".." or norm.startswith("../"):
            raise InvalidArgumentError(f"path {rel!r} escapes the checkpoint root {self.root!r}")
        return f"{self.root}/{norm}"

    def fs_path(self, rel: str) -> str:
        """Path as the fsspec filesystem wants it (no scheme for local files)."""
        u = self.url(rel)
        if self.scheme == "file":
            return u[len("file://") :]
        return u

    def exists(self, rel: str) -> bool:
        """True when the file exists."""
        return bool(self.fs.exists(self.fs_path(rel)))

    def open(self, rel: str, mode: str = "rb") -> Any:
        """Open a file; for writing, parent directories are created."""
        path = self.fs_path(rel)
        if "w" in mode and self.scheme == "file":
            return self._in_folder(path, lambda: self.fs.open(path, mode))
        return self.fs.open(path, mode)

    def _in_folder(self, path: str, act: Callable[[], _T]) -> _T:
        """Create a local file's folder and act; again when another process's clean-up (`remove_empty_dirs`) removed
        the folder, still empty, in between."""
        folder = os.path.dirname(path)
        for _ in range(5):
            try:
                os.makedirs(folder, exist_ok=True)  # (raises too when a parent it just made is removed before the next level)
                return act()
            except FileNotFoundError:
                if os.path.isdir(folder):
                    raise
        os.makedirs(folder, exist_ok=True)
        return act()

    def read_bytes(self, rel: str, offset: int = 0, length: int | None = None) -> bytes:
        """Bytes [offset, offset+length) of a file (to its end when length is None): ranged reads on object stores; counted."""
        # one (ranged) request: a buffered file would read ahead a whole block on object stores
        end = None if length is None else offset + length
        data = self.fs.cat_file(self.fs_path(rel), start=offset or None, end=end)
        self.bytes_read += len(data)
        self.read_calls += 1
        return bytes(data)

    def modified_ms(self, rel: str) -> int:
        """A file's modification time in epoch milliseconds (its creation time on stores without one)."""
        import datetime as dt

        path = self.fs_path(rel)
        if self.scheme == "file":
            return int(os.path.getmtime(path) * 1000)
        info = self.fs.info(path)
        t = info.get("LastModified") or info.get("mtime") or info.get("created")
        if t is None:
            t = self.fs.modified(path)
        if isinstance(t, dt.datetime):
            if t.tzinfo is None:
                t = t.replace(tzinfo=dt.timezone.utc)
            return int(t.timestamp() * 1000)
        return int(float(t) * 1000)

    def size(self, rel: str) -> int:
        """Size of a file in bytes."""
        return int(self.fs.size(self.fs_path(rel)))

    def delete(self, rel: str) -> bool:
        """Delete a file if it exists; True when it did."""
        path = self.fs_path(rel)
        if not self.fs.exists(path):
            return False
        try:
            self.fs.rm(path)
        except FileNotFoundError:
            return False  # another process deleted it first
        return True

    def remove_empty_dirs(self, rel_dir: str) -> None:
        """Remove empty folders at and below rel_dir (local roots; object stores have no folders to leave behind)."""
        if self.scheme != "file":
            return
        top = self.fs_path(rel_dir)
        if not os.path.isdir(top):
            return
        for dirpath, _, _ in sorted(os.walk(top), key=lambda w: -len(w[0])):
            try:
                os.rmdir(dirpath)
            except OSError:
                continue  # not empty: something else lives there

    def copy(self, src_rel: str, dst_rel: str) -> None:
        """Copy one file inside the root."""
        src, dst = self.fs_path(src_rel), self.fs_path(dst_rel)
        if self.scheme == "file":
            if not os.path.exists(src):
                raise FileNotFoundError(f"{self.url(src_rel)} does not exist")
            self._in_folder(dst, lambda: self.fs.copy(src, dst))
            return
        self.fs.copy(src, dst)

    def list_files(self, rel_dir: str) -> list[str]:
        """Every file below a directory, as root-relative paths (empty if it doesn't exist)."""
        base = self.fs_path(rel_dir)
        self._forget_listings(base)  # other processes (executors, delta-rs) write behind s3fs's cache
        if not self.fs.exists(base):
            return []
        prefix = self.fs_path("x")[:-1]
        out = []
        found = self.fs.find(base)
        self._forget_listings(base)  # a cached listing would hide files written later by others
        for p in found:
            p = str(p)
            if self.scheme == "s3" and not p.startswith("s3://"):
                p = "s3://" + p
            if self.scheme == "memory" and not p.startswith("memory://"):
                p = "memory://" + p.lstrip("/")
                pre = prefix if prefix.startswith("memory://") else "memory://" + prefix.lstrip("/")
            else:
                pre = prefix
            if p.startswith(pre):
                out.append(p[len(pre) :])
        return sorted(out)

    def _forget_listings(self, path: str) -> None:
        """Drop s3fs's cached listings of a folder and everything below it (no-op elsewhere)."""
        if self.scheme != "s3":
            return
        self.fs.invalidate_cache(path)  # the folder and its parents
        key = self.fs._strip_protocol(path).rstrip("/")
        for k in [k for k in list(self.fs.dircache) if k.startswith(key + "/")]:
            self.fs.dircache.pop(k, None)

    # -- Delta tables (delta-rs cannot use fsspec, so it gets its own location and options)
    def delta_uri(self, rel: str) -> str:
        """Location delta-rs uses for a Delta table below the root."""
        if self.scheme == "memory":
            location = self.storage_options.get(DELTA_LOCATION)
            if not location:
                raise InvalidArgumentError(
                    f"{self.root} keeps its checkpoint log and manifest (Delta tables) in a local folder, which delta-rs can "
                    f"reach and fsspec's memory filesystem is not: pass storage_options={{'{DELTA_LOCATION}': '/a/folder'}}")
            return os.path.join(os.fspath(location), rel)
        if self.scheme == "file":
            return self.fs_path(rel)
        return self.url(rel)

    def delta_storage_options(self) -> dict[str, str] | None:
        """Storage options in delta-rs (object_store) naming."""
        if self.scheme != "s3":
            return None
        o = self.storage_options
        out: dict[str, str] = {}
        if o.get(S3_ENDPOINT):
            out["AWS_ENDPOINT_URL"] = str(o[S3_ENDPOINT])
            if str(o[S3_ENDPOINT]).startswith("http://"):
                out["AWS_ALLOW_HTTP"] = "true"
        if o.get(S3_KEY):
            out["AWS_ACCESS_KEY_ID"] = str(o[S3_KEY])
        if o.get(S3_SECRET):
            out["AWS_SECRET_ACCESS_KEY"] = str(o[S3_SECRET])
        if o.get(S3_TOKEN):
            out["AWS_SESSION_TOKEN"] = str(o[S3_TOKEN])
        out["AWS_REGION"] = str(o.get(S3_REGION) or "us-east-1")
        # S3 has conditional put (If-None-Match) now: Delta commits stay atomic without a lock
        out.setdefault("conditional_put", "etag")
        for k, v in o.items():
            if k.isupper():
                out[k] = str(v)
        return out

