"""The README's Python examples that need no Spark run as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"


def _blocks(marker: str) -> str:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    found = [b for b in blocks if marker in b]
    assert found, f"no README example containing {marker!r}"
    return found[0]


@pytest.mark.parametrize("marker", ["store.begin(max_parallelism=128)", "KeyedStateBackend("])
def test_readme_example_runs(marker: str, tmp_path: Path) -> None:
    code = _blocks(marker).replace('"/tmp/job"', repr(str(tmp_path / "job")))
    namespace: dict[str, object] = {}
    exec(compile(code, f"README.md example {marker}", "exec"), namespace)  # noqa: S102 - our own docs
    import flinkstate as fs

    assert fs.open(tmp_path / "job").checkpoints()
