"""Name the damaged file of a Delta table (the manifest or the log) instead of a bare DeltaError.

delta-rs reports a damaged `_delta_log` as an untyped error without the file, and a cached
read does not notice a table file that is gone. `check_table_files` compares the files a
table version references with storage on every read (a stat per file on local disks, one
listing per folder on object stores); `delta_log_error` and
`table_file_error` run only after a failure, to find and name the culprit.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from flinkstate.core.errors import CorruptFileError

if TYPE_CHECKING:
    from flinkstate.core.io import FileIO

__all__ = ["check_table_files", "delta_log_error", "is_checkpoint", "log_listing", "newest_checkpoint", "remove_table_file",
           "staged_adds", "staged_leftovers", "table_file_error"]

_COMMIT = re.compile(r"^(\d{20})\.json$")
_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint(\.\d+\.\d+)?\.parquet$")
# delta-rs's local object store writes `<file>#<n>` and then links or renames it: a write killed in between leaves it
_STAGED = re.compile(r"#\d+$")


def _what(rel: str) -> str:
    return "checkpoint log" if rel.endswith("log") else "shared-state manifest"


def _located(io: FileIO, rel: str) -> tuple[Any, str]:
    """(filesystem, path) where delta-rs keeps a file of a Delta table (memory:// roots: a local folder)."""
    if io.scheme == "memory":
        import fsspec

        return fsspec.filesystem("file"), io.delta_uri(rel)
    return io.fs, io.fs_path(rel)


def _open(io: FileIO, rel: str) -> Any:
    fsys, path = _located(io, rel)
    return fsys.open(path, "rb")


def _sizes(io: FileIO, rel_dir: str) -> dict[str, int]:
    """File name -> size of the files directly in a folder, freshly listed (empty if the folder is gone)."""
    fsys, path = _located(io, rel_dir)
    if io.scheme != "s3" and isinstance(path, str) and "://" not in path:  # a local folder: one scandir, no per-file stat calls
        try:
            with os.scandir(path) as it:
                return {e.name: e.stat().st_size for e in it if e.is_file()}
        except (FileNotFoundError, NotADirectoryError):
            return {}
    try:
        listing = fsys.ls(path, detail=True, refresh=True) if io.scheme == "s3" else fsys.ls(path, detail=True)
    except FileNotFoundError:
        return {}
    return {posixpath.basename(str(i["name"]).rstrip("/")): int(i.get("size") or 0) for i in listing if i.get("type") == "file"}


def log_listing(io: FileIO, rel: str) -> dict[str, tuple[int, str]]:
    """File name -> (size, modification stamp) of the `_delta_log` entries a load of the table reads: a kept
    DeltaTable is only brought up to date while every one it has read is still there unchanged.

    On a local disk that is `_last_checkpoint`, the checkpoint it names and the commits from there on, found by
    probing their names (the folder may hold a day of older entries); object stores are listed.
    """
    fsys, path = _located(io, f"{rel}/_delta_log")
    if io.scheme != "s3" and isinstance(path, str) and "://" not in path:
        probed = _probe_local_log(path)
        return probed if probed is not None else _list_local_log(path)
    try:
        listing = fsys.ls(path, detail=True, refresh=True) if io.scheme == "s3" else fsys.ls(path, detail=True)
    except FileNotFoundError:
        return {}
    finally:
        if io.scheme == "s3":
            fsys.invalidate_cache(path)  # delta-rs writes behind s3fs: a cached listing would hide its commits from others
    return {posixpath.basename(str(i["name"]).rstrip("/")): (int(i.get("size") or 0), str(i.get("ETag") or i.get("LastModified") or i.get("mtime")))
            for i in listing if i.get("type") == "file"}


def _stamp(path: str) -> tuple[int, str] | None:
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    return st.st_size, str(st.st_mtime_ns)


# `_last_checkpoint` content per (folder, size, mtime): parsed once
_LAST_CHECKPOINT: dict[tuple[str, tuple[int, str]], int | None] = {}


def _probe_local_log(path: str) -> dict[str, tuple[int, str]] | None:
    """The entries a load reads, by name; None when `_last_checkpoint` or its checkpoint is not as expected
    (the full listing then shows what a load will find wrong)."""
    out: dict[str, tuple[int, str]] = {}
    start = 0
    hint = _stamp(os.path.join(path, "_last_checkpoint"))
    if hint is not None:
        out["_last_checkpoint"] = hint
        key = (path, hint)
        if key not in _LAST_CHECKPOINT:
            if len(_LAST_CHECKPOINT) > 4096:
                _LAST_CHECKPOINT.clear()
            try:
                with open(os.path.join(path, "_last_checkpoint"), "rb") as f:
                    doc = json.loads(f.read())
                _LAST_CHECKPOINT[key] = int(doc["version"]) if "parts" not in doc else None  # multi-part: listed
            except (OSError, ValueError, KeyError, TypeError):
                _LAST_CHECKPOINT[key] = None
        version = _LAST_CHECKPOINT[key]
        if version is None:
            return None
        name = f"{version:020d}.checkpoint.parquet"
        stamp = _stamp(os.path.join(path, name))
        if stamp is None:
            return None
        out[name] = stamp
        commit = _stamp(os.path.join(path, f"{version:020d}.json"))
        if commit is not None:
            out[f"{version:020d}.json"] = commit
        start = version + 1
    elif not os.path.isdir(path):
        return {}
    v = start
    while (stamp := _stamp(os.path.join(path, f"{v:020d}.json"))) is not None:
        out[f"{v:020d}.json"] = stamp
        v += 1
    return out


def is_checkpoint(name: str) -> bool:
    """True for a Delta checkpoint file name in `_delta_log` (single or multi-part)."""
    return name.endswith(".parquet") and _CHECKPOINT.match(name) is not None


def newest_checkpoint(names: Iterable[str]) -> str:
    """The zero-padded version of the newest Delta checkpoint among `_delta_log` names ("" when none): every
    entry named below it (`name < newest_checkpoint(...)`) is one a load no longer reads."""
    return max((n[:20] for n in names if is_checkpoint(n)), default="")


def _list_local_log(path: str) -> dict[str, tuple[int, str]]:
    """Every entry of a local `_delta_log`; those before the newest checkpoint are named with a zero size."""
    try:
        names = os.listdir(path)
    except (FileNotFoundError, NotADirectoryError):
        return {}
    last = newest_checkpoint(names)
    out: dict[str, tuple[int, str]] = {n: (-1, "") for n in names if n < last}
    for n in names:
        if n >= last and (stamp := _stamp(os.path.join(path, n))) is not None:
            out[n] = stamp
    return out


def check_table_files(io: FileIO, rel: str, paths: Sequence[str], sizes: Sequence[int | None]) -> None:
    """Raise CorruptFileError naming the table files a version references that are gone or not their recorded size."""
    listed: dict[str, dict[str, int]] = {}
    fsys, base = _located(io, rel)
    local = io.scheme != "s3" and isinstance(base, str) and "://" not in base
    bad = []
    for p, size in zip(paths, sizes):
        d, name = posixpath.split(p)
        if local:  # one stat per referenced file: the folder also holds removed files until they are vacuumed
            try:
                have: int | None = os.stat(os.path.join(base, p)).st_size
            except (FileNotFoundError, NotADirectoryError):
                have = None
        else:
            if d not in listed:  # one listing per folder (a setdefault would list it again for every file)
                listed[d] = _sizes(io, posixpath.join(rel, d) if d else rel)
            have = listed[d].get(name)
        if have is None:
            bad.append(f"{io.url(posixpath.join(rel, p))} is missing")
        elif size is not None and have != size:
            bad.append(f"{io.url(posixpath.join(rel, p))} is {have} bytes, its Delta log records {size}")
    if bad:
        raise CorruptFileError(f"the {_what(rel)} {io.url(rel)} is damaged: {'; '.join(bad)}; nothing was changed")


def staged_leftovers(io: FileIO, rel: str) -> list[tuple[str, float]]:
    """(path relative to the table, modification time in epoch seconds) of the staging files that writes killed
    mid-commit left in a table's folder or its `_delta_log` (`00000000000000000005.json#1`): never part of the table.
    Local folders only: object stores have no staging files."""
    fsys, base = _located(io, rel)
    if io.scheme == "s3" or not isinstance(base, str) or "://" in base or not os.path.isdir(base):
        return []
    out = []
    for dirpath, _, files in os.walk(base):
        for name in files:
            if _STAGED.search(name):
                full = os.path.join(dirpath, name)
                try:
                    out.append((os.path.relpath(full, base).replace(os.sep, "/"), os.path.getmtime(full)))
                except FileNotFoundError:
                    continue  # its write finished (or another collection removed it) meanwhile
    return sorted(out)


def staged_adds(io: FileIO, rel: str) -> set[str]:
    """The data files (relative to the table) that staged, never linked commit files of a table add: the files of
    writes killed inside their commit, which no version of the table will ever reference."""
    fsys, base = _located(io, rel)
    out: set[str] = set()
    for path, _ in staged_leftovers(io, rel):
        if not path.startswith("_delta_log/"):
            continue
        try:
            with fsys.open(posixpath.join(str(base), path), "rb") as f:
                lines = f.read().decode("utf-8", "replace").splitlines()
        except FileNotFoundError:
            continue
        for line in lines:
            try:
                add = json.loads(line).get("add")
            except (json.JSONDecodeError, AttributeError):
                continue  # a staging file cut short by the kill: what it holds is no commit either
            if isinstance(add, dict) and isinstance(add.get("path"), str):
                out.add(add["path"])
    return out


def remove_table_file(io: FileIO, rel: str, path: str) -> bool:
    """Delete one data file of a Delta table (`path` relative to the table); True when it was there."""
    fsys, base = _located(io, rel)
    target = posixpath.join(str(base), path)
    if not fsys.exists(target):
        return False
    fsys.rm(target)
    return True


def table_file_error(io: FileIO, rel: str, paths: Sequence[str], e: BaseException) -> CorruptFileError:
    """The error for a table file that failed to read: the first one that does not parse is named."""
    import pyarrow.parquet as pq

    for p in paths:
        try:
            with _open(io, posixpath.join(rel, p)) as f:
                pq.read_metadata(f)
        except (OSError, pa.ArrowInvalid) as err:
            return CorruptFileError(f"the {_what(rel)} {io.url(rel)} is damaged: {io.url(posixpath.join(rel, p))} is unreadable "
                                    f"({_first_line(err)}); nothing was changed")
    return CorruptFileError(f"the {_what(rel)} {io.url(rel)} cannot be read: {_first_line(e)}")


def delta_log_error(io: FileIO, rel: str, e: BaseException) -> CorruptFileError:
    """The error for a Delta log delta-rs cannot load: names the damaged file in `_delta_log`."""
    culprit = _diagnose(io, f"{rel}/_delta_log")
    return CorruptFileError(
        f"the {_what(rel)} {io.url(rel)} is damaged: {culprit}; refusing to read or write it, nothing was changed "
        f"(Delta: {_first_line(e)})"
    )


def _first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0][:300]


def _diagnose(io: FileIO, log: str) -> str:
    """What is wrong in a `_delta_log` folder: `_last_checkpoint`, a checkpoint, a gap or a commit file."""
    import pyarrow.parquet as pq

    sizes = _sizes(io, log)
    url = io.url
    commits = sorted(int(m.group(1)) for n in sizes if (m := _COMMIT.match(n)))
    checkpoints: dict[int, list[str]] = {}
    for n in sizes:
        if m := _CHECKPOINT.match(n):
            checkpoints.setdefault(int(m.group(1)), []).append(n)
    start = 0
    if "_last_checkpoint" in sizes:
        hint = f"{log}/_last_checkpoint"
        try:
            with _open(io, hint) as f:
                version = int(json.loads(f.read())["version"])
        except (ValueError, KeyError, TypeError) as err:
            return f"{url(hint)} is not valid JSON with a version ({_first_line(err)})"
        if version not in checkpoints:
            return f"{url(hint)} points to the checkpoint of version {version}, and no such checkpoint file exists in {url(log)}"
        for n in sorted(checkpoints[version]):
            try:
                with _open(io, f"{log}/{n}") as f:
                    pq.read_metadata(f)
            except (OSError, pa.ArrowInvalid) as err:
                return f"the Delta checkpoint {url(f'{log}/{n}')} is unreadable ({_first_line(err)})"
        start = version + 1
    if not commits and not checkpoints:
        return f"{url(log)} holds no commit file"
    expected = range(start, (commits[-1] if commits else start - 1) + 1)
    present = set(commits)
    gaps = [v for v in expected if v not in present]
    if gaps:
        after = [v for v in commits if v > gaps[0]]
        return (f"commit file {url(f'{log}/{gaps[0]:020d}.json')} is missing"
                + (f" (a gap before version {after[0]})" if after else ""))
    for v in expected:
        name = f"{log}/{v:020d}.json"
        with _open(io, name) as f:
            data = f.read()
        if not data.strip():
            return f"commit file {url(name)} is empty"
        try:
            for line in data.decode("utf-8").splitlines():
                if line.strip():
                    json.loads(line)
        except (UnicodeDecodeError, ValueError) as err:
            return f"commit file {url(name)} is not valid JSON, garbage or truncated ({_first_line(err)})"
    return f"{url(log)} cannot be loaded"
