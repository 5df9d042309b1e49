"""The public errors: every error class the README names is importable from `flinkstate` and is a FlinkStateError."""

from __future__ import annotations

import re
from pathlib import Path

import flinkstate as fs

README = Path(__file__).resolve().parents[3] / "README.md"


def test_every_error_the_readme_names_is_exported_and_typed() -> None:
    named = set(re.findall(r"\b([A-Z][A-Za-z]+Error)\b", README.read_text()))
    assert {"StorageError", "CommitOutcomeUnknownError", "UnsupportedSerializerError"} <= named
    missing = sorted(n for n in named if not isinstance(getattr(fs, n, None), type))
    assert not missing, f"named in README.md but not exported by flinkstate: {missing}"
    assert all(issubclass(getattr(fs, n), fs.FlinkStateError) for n in named)
    assert named <= set(fs.__all__)


def test_except_storage_error_catches_what_it_says() -> None:
    try:
        raise fs.StorageError("x")
    except fs.StorageError as e:  # raised AttributeError before: flinkstate did not export it
        assert isinstance(e, OSError)
    assert not issubclass(fs.CommitOutcomeUnknownError, fs.StorageError)  # a caller retrying on StorageError must not rewrite it
