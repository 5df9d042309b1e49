"""The numba kernels of issue 46 against the numpy code they replaced, in one process: decoding the bench savepoints.

    python bench/flink_jit_kernels.py [--against REV] [--kinds files,rocksdb] [--rounds 3] [--keys 300000]

Decodes every keyed operator (`read_keyed_state`, as `flink_large_savepoint.py`'s decode row) of the cached bench
savepoints (written by real Flink the first time, see that bench), alternating this tree's code with revision REV's
(default bf39b2d, before the kernels) SST block parser (files/sst_blocks.py), Java string reader (serde/_vstring.py
with _vrun.py) and canonical stream framing (serde/_framing.py), loaded from git into this process. CPU seconds, pyarrow on one thread; the best of
--rounds for each, and their ratio. Then the cold start: the first kernel call of a fresh process with numba's cache
warm (the import of numba, then the first kernel) and the first decode without the cache (compiling).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType

import pyarrow as pa

import flink_large_savepoint as large
import flinkstate.flink.files.canonical as canonical
import flinkstate.flink.files.sst as sst
import flinkstate.flink.serde._vector as vector

ROOT = Path(__file__).resolve().parents[1]
COLD = """
import time, sys
sys.path.insert(0, {bench!r})
import flinkstate, numpy as np, pyarrow as pa
t = time.perf_counter()
import numba
t1 = time.perf_counter()
from flinkstate.flink.serde.rowdata import _scatter
_scatter(np.zeros(8, np.uint8), np.zeros(1, np.int64), np.zeros(8, np.uint8), 8, np.ones(1, bool))
t2 = time.perf_counter()
import flink_large_savepoint as large
large.step_decode({path!r})
print(f"{{t1 - t:.3f}} {{t2 - t1:.3f}} {{time.perf_counter() - t2:.3f}}")
"""


def _module_at(rev: str, path: str, name: str) -> ModuleType:
    """The module at path as it was at git revision rev, imported as name (its imports from this tree or sys.modules)."""
    text = subprocess.run(["git", "show", f"{rev}:{path}"], cwd=ROOT, check=True, capture_output=True, text=True).stdout
    file = Path(tempfile.mkdtemp()) / Path(path).name
    file.write_text(text, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(name, file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def compare(kinds: list[str], rev: str, rounds: int, keys: int) -> None:
    old_blocks = _module_at(rev, "python/flinkstate/flink/files/sst_blocks.py", "rev_sst_blocks")
    _module_at(rev, "python/flinkstate/flink/serde/_vrun.py", "flinkstate.flink.serde._vrun")  # what the old reader imports
    old_strings = _module_at(rev, "python/flinkstate/flink/serde/_vstring.py", "rev_vstring")
    old_framing = _module_at(rev, "python/flinkstate/flink/serde/_framing.py", "rev_framing")
    impl = {"numba": (sst.parse_blocks, vector.string_reader, canonical.frame_records),
            rev: (old_blocks.parse_blocks, old_strings.string_reader, old_framing.frame_records)}
    for kind in kinds:
        path = str(large.savepoint(kind, keys))
        runs: dict[str, list[float]] = {name: [] for name in impl}
        for name, (blocks, strings, framing) in [*impl.items()] * (rounds + 1):
            sst.parse_blocks, vector.string_reader, canonical.frame_records = blocks, strings, framing
            canonical._FRAMED.clear()  # framings are cached per file
            t = time.process_time()
            n = large.step_decode(path)
            runs[name].append(time.process_time() - t)
        best = {name: min(times[1:]) for name, times in runs.items()}  # the first run of each warms up
        sst.parse_blocks, vector.string_reader, canonical.frame_records = impl["numba"]
        print(f"{kind}: decode {n:,} entries: numba {best['numba']:.2f} s ({n / best['numba']:,.0f}/s), {rev} "
              f"{best[rev]:.2f} s ({n / best[rev]:,.0f}/s): {best[rev] / best['numba']:.2f}x", flush=True)


def cold(keys: int) -> None:
    path = str(large.savepoint("rocksdb", keys))
    code = COLD.format(bench=str(ROOT / "bench"), path=path)
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "NUMBA_CACHE_DIR": cache}
        for label in ("without cache", "cache warm"):
            out = subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True, text=True).stdout.split()
            numba_s, first, decode = map(float, out)
            print(f"cold start, {label}: import numba {numba_s:.3f} s, first kernel {first:.3f} s, then a RocksDB decode "
                  f"{decode:.2f} s wall (its kernels {'compiled' if label == 'without cache' else 'loaded'})")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--against", default="bf39b2d")
    parser.add_argument("--kinds", default="files,rocksdb")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--keys", type=int, default=300_000)
    args = parser.parse_args()
    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)
    compare(args.kinds.split(","), args.against, args.rounds, args.keys)
    cold(args.keys)
