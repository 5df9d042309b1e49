"""The numba door (flink/_jit.py): `import flinkstate` does not import numba; the kernels' cache goes to a flinkstate
folder of the user's cache (writable when the package is installed read-only), unless NUMBA_CACHE_DIR is set."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

CHECK = """
import os, sys
import flinkstate
from flinkstate.flink import _jit
assert "numba" not in sys.modules, "import flinkstate imported numba"
numba = _jit._numba()
print(os.environ["NUMBA_CACHE_DIR"], numba.config.CACHE_DIR, sep="\\n")
"""


def _run(env: dict[str, str]) -> list[str]:
    root = Path(__file__).resolve().parents[3]
    env = {**{k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "XDG_CACHE_HOME")}, **env,
           "PYTHONPATH": os.pathsep.join([str(root / "python"), str(root / "connector")])}
    return subprocess.run([sys.executable, "-W", "error", "-c", CHECK], env=env, check=True, capture_output=True, text=True).stdout.split()


def test_numba_is_imported_by_the_first_kernel_only_with_its_cache_in_the_users_cache(tmp_path: Path) -> None:
    want = str(tmp_path / "flinkstate" / "numba")
    assert _run({"XDG_CACHE_HOME": str(tmp_path)}) == [want, want]


def test_a_cache_dir_the_user_set_is_kept(tmp_path: Path) -> None:
    mine = str(tmp_path / "mine")
    assert _run({"NUMBA_CACHE_DIR": mine, "XDG_CACHE_HOME": str(tmp_path)}) == [mine, mine]
