"""Integrity checks of a job root: a damaged or missing part is named, never treated as empty.

Small functions the catalog, the writer and the registry call before they trust what they
read: a missing checkpoint log or manifest in a root that holds data, an empty commit file,
a store path that is a file, carried-over data files that are gone.
"""

from __future__ import annotations

import errno
import posixpath
import uuid
from collections.abc import Iterable
from typing import TYPE_CHECKING

from flinkstate.core.errors import (
    CorruptFileError,
    InvalidArgumentError,
    ReadOnlyStoreError,
)
from flinkstate.format import constants as C

if TYPE_CHECKING:
    from flinkstate.core.io import FileIO
    from flinkstate.format.datafile import FileEntry

__all__ = ["check_writable", "read_only_error", "check_root_is_folder", "root_data", "missing_table_error", "check_commit_file", "check_carried_files"]

_FIRST_COMMIT = "_delta_log/" + "0" * 20 + ".json"


def check_root_is_folder(io: FileIO) -> None:
    """Raise InvalidArgumentError when the store path is a regular file (it can hold no checkpoints)."""
    if io.scheme == "memory":
        return
    path = io.root[len("file://"):] if io.scheme == "file" else io.root
    if io.fs.isfile(path):
        raise InvalidArgumentError(f"store path {io.root} is a regular file, not a folder: it cannot be a checkpoint root")


def root_data(io: FileIO) -> list[str]:
    """What the root holds besides two freshly created, empty tables (empty list: a new root)."""
    found = [d + "/" for d in (C.SHARED_DIR, C.SAVEPOINTS_DIR) if io.list_files(d)]
    for rel in (C.LOG_TABLE, C.MANIFEST_TABLE):
        if any(_table_content(p[len(rel) + 1:]) for p in io.list_files(rel)):
            found.append(rel)
    return found


def _table_content(name: str) -> bool:
    """True for a file of a Delta table that only a table in use holds: a data file, a Delta checkpoint or a commit
    after the creating one (not the creating commit, nor the temporary file of a commit being written)."""
    base = posixpath.basename(name)
    if base.startswith(("_", ".")):
        return False  # `_commit_<uuid>.json.tmp` of a commit (the creation too) in progress, `_last_checkpoint`
    if not name.startswith("_delta_log/"):
        return True
    return name != _FIRST_COMMIT and (base.endswith(".json") or base.endswith(".parquet"))


def missing_table_error(io: FileIO, rel: str) -> CorruptFileError | None:
    """The error for a missing Delta table in a root that holds data (None: the root is new and empty)."""
    check_root_is_folder(io)
    data = root_data(io)
    if not data:
        return None
    what = "checkpoint log" if rel == C.LOG_TABLE else "shared-state manifest"
    return CorruptFileError(
        f"the {what} {io.url(rel)}/_delta_log is missing, but {io.root} holds checkpoint data ({', '.join(data)}): "
        f"this is a damaged root, not an empty one; writes and garbage collection are refused and nothing was changed. "
        f"Restore {rel} from a copy of this root (backup or replica) before writing here"
    )


def check_commit_file(io: FileIO, rel: str, version: int) -> None:
    """Raise CorruptFileError when the commit file of a Delta table version is empty (a lost commit)."""
    commit = f"{rel}/_delta_log/{version:020d}.json"
    try:
        size = io.size(commit)
    except FileNotFoundError:
        return  # folded into a Delta checkpoint and cleaned up: the checkpoint carries it
    if size == 0:
        raise CorruptFileError(
            f"commit file {io.url(commit)} is empty (zero bytes): Delta version {version} of {rel} is lost; "
            f"refusing to read or write {io.root} until it is restored"
        )


def check_carried_files(io: FileIO, checkpoint_id: int, entries: Iterable[FileEntry]) -> None:
    """Raise CorruptFileError when a file a new checkpoint carries over is missing or not its recorded size."""
    by_dir: dict[str, list[FileEntry]] = {}
    for e in entries:
        by_dir.setdefault(posixpath.dirname(e.path), []).append(e)
    bad: list[str] = []
    for d, group in sorted(by_dir.items()):
        sizes = _sizes(io, d)
        for e in group:
            got = sizes.get(posixpath.basename(e.path))
            if got is None:
                bad.append(f"{io.url(e.path)} (written by checkpoint {e.created_by_checkpoint_id}) is missing")
            elif got != e.bytes:
                bad.append(f"{io.url(e.path)} (written by checkpoint {e.created_by_checkpoint_id}) is {got} bytes, recorded {e.bytes}")
    if bad:
        more = f" and {len(bad) - 5} more" if len(bad) > 5 else ""
        raise CorruptFileError(
            f"checkpoint {checkpoint_id} would carry over damaged files of its base: {'; '.join(bad[:5])}{more}; nothing was committed"
        )


def _sizes(io: FileIO, rel_dir: str) -> dict[str, int]:
    """File name -> size of the files directly in a folder (freshly listed; empty if it is gone)."""
    path = io.fs_path(rel_dir)
    try:
        listing = io.fs.ls(path, detail=True, refresh=True) if io.scheme == "s3" else io.fs.ls(path, detail=True)
    except FileNotFoundError:
        return {}
    finally:
        if io.scheme == "s3":
            io.fs.invalidate_cache(path)  # a cached listing would hide files other processes write later
    return {posixpath.basename(str(i["name"]).rstrip("/")): int(i.get("size") or 0) for i in listing if i.get("type") == "file"}


_DENIED = ("permission denied", "read-only file system", "operation not permitted", "lacked the necessary privileges", "accessdenied", "403 forbidden")


def read_only_error(io: FileIO, rel: str, e: BaseException) -> ReadOnlyStoreError | None:
    """A ReadOnlyStoreError naming the store and path when `e` says writing was denied (None otherwise)."""
    denied = isinstance(e, PermissionError) or (isinstance(e, OSError) and e.errno in (errno.EACCES, errno.EPERM, errno.EROFS))
    if not denied and not any(m in str(e).lower() for m in _DENIED):
        return None
    return ReadOnlyStoreError(f"the store {io.root} is read-only: writing {io.url(rel)} was denied ({str(e).splitlines()[0][:200]}); nothing was changed")


def check_writable(io: FileIO) -> None:
    """Raise ReadOnlyStoreError unless a file can be created and deleted below the root.

    Run before any Delta write: delta-rs reports a denied write as an untyped error and its
    writer thread panics, so the store is probed with a tiny file first.
    """
    probe = f"{C.META_DIR}/_write-probe-{uuid.uuid4().hex}"
    try:
        with io.open(probe, "wb") as f:
            f.write(b"")
        io.delete(probe)
    except OSError as e:
        check_root_is_folder(io)
        err = read_only_error(io, probe, e)
        if err is None:
            raise
        raise err from e
