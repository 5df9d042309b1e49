"""The public errors: every error class the README or the docs site names is importable from `flinkstate` and is a FlinkStateError."""

from __future__ import annotations

import builtins
import re
from pathlib import Path

import flinkstate as fs

ROOT = Path(__file__).resolve().parents[3]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def test_every_error_the_docs_name_is_exported_and_typed() -> None:
    named = set(re.findall(r"\b([A-Z][A-Za-z]+Error)\b", "\n".join(p.read_text() for p in DOCS))) - set(dir(builtins))
    assert {"StorageError", "CommitOutcomeUnknownError", "UnsupportedSerializerError"} <= named
    missing = sorted(n for n in named if not isinstance(getattr(fs, n, None), type))
    assert not missing, f"named in README.md or docs/ but not exported by flinkstate: {missing}"
    assert all(issubclass(getattr(fs, n), fs.FlinkStateError) for n in named)
    assert named <= set(fs.__all__)


def test_except_storage_error_catches_what_it_says() -> None:
    try:
        raise fs.StorageError("x")
    except fs.StorageError as e:  # raised AttributeError before: flinkstate did not export it
        assert isinstance(e, OSError)
    assert not issubclass(fs.CommitOutcomeUnknownError, fs.StorageError)  # a caller retrying on StorageError must not rewrite it
