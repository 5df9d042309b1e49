"""A savepoint folder being written: a temporary folder beside the destination, its files, and the rename into place.

Every file of an export (the subtasks' keyed-state files, written by tasks anywhere that see the folder, then
operator-state files and `_metadata` by the driver) lands in the temporary folder; only the final rename makes
the savepoint appear at its destination, so a failure leaves nothing there (`discard` removes the folder).
"""

from __future__ import annotations

import os
import shutil
import uuid
from dataclasses import dataclass

__all__ = ["KeyedFile", "discard", "publish", "temp_folder", "write_file"]


@dataclass(frozen=True)
class KeyedFile:
    """One subtask's keyed-state file in the folder: its name relative to the folder (so the savepoint can be moved),
    its size, and the offset of each key group of the subtask's range (0: the key group holds nothing)."""

    rel: str
    size: int
    offsets: tuple[int, ...]


def temp_folder(dest: str) -> str:
    """Create and return a new temporary folder beside dest (the same filesystem, so `publish` is a rename)."""
    parent = os.path.dirname(os.path.abspath(dest))
    os.makedirs(parent, exist_ok=True)
    tmp = os.path.join(parent, f".{os.path.basename(os.path.abspath(dest))}.tmp-{uuid.uuid4().hex}")
    os.makedirs(tmp)
    return tmp


def write_file(folder: str, data: bytes, rel: str | None = None) -> tuple[str, int]:
    """Write data as a new file in folder (a fresh random name unless rel is given); returns (name, size)."""
    rel = rel or uuid.uuid4().hex
    with open(os.path.join(folder, rel), "wb") as f:
        f.write(data)
    return rel, len(data)


def publish(folder: str, dest: str) -> str:
    """Rename the finished folder into place at dest (an empty dest folder is replaced); returns dest."""
    dest = os.path.abspath(dest)
    if os.path.isdir(dest):
        os.rmdir(dest)
    os.rename(folder, dest)
    return dest


def discard(folder: str) -> None:
    """Remove a temporary folder and everything written into it (a failed export)."""
    shutil.rmtree(folder, ignore_errors=True)
