"""Benchmark: vectorised key-group assignment vs a Python loop over the scalar function.

Usage: python bench/bench_keygroups.py [--n N] [--max-parallelism P] [--loop-sample M] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys

try:
    import flinkstate.core.keygroups  # noqa: F401
except ImportError:  # running from a source checkout without installing
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "python"))

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from benchutil import best
from flinkstate.core.keygroups import assign_key_group, assign_key_groups

GOAL_KEYS_PER_SECOND = 5_000_000


def _datasets(n: int, seed: int) -> dict[str, pa.Array]:
    rng = np.random.default_rng(seed)
    numbers = pc.cast(pa.array(rng.integers(100_000, 1_000_000, n)), pa.string())
    prefixes = pa.array(["user-", "Zürich-", "東京-", "😀-"]).take(pa.array(rng.integers(0, 4, n)))
    return {
        "int64": pa.array(rng.integers(-(2**63), 2**63 - 1, n, dtype=np.int64, endpoint=True)),
        "ascii string": pc.binary_join_element_wise("user-", numbers, ""),
        "mixed non-ASCII string": pc.binary_join_element_wise(prefixes, numbers, ""),
    }


def run(n: int, max_parallelism: int, loop_sample: int, repeat: int, seed: int) -> list[dict]:
    """Time both paths on each dataset and check they agree on the loop sample."""
    rows = []
    for name, arr in _datasets(n, seed).items():
        vec_s = best(lambda: assign_key_groups(arr, max_parallelism), repeat)
        m = min(loop_sample, n)
        sample = arr.slice(0, m)
        keys = sample.to_pylist()
        key_type = arr.type
        loop_result: list[int] = []

        def loop() -> None:
            loop_result[:] = [assign_key_group(k, max_parallelism, key_type) for k in keys]

        loop_s = best(loop, 1)
        if assign_key_groups(sample, max_parallelism).to_pylist() != loop_result:
            raise AssertionError(f"vectorised and scalar key groups differ for {name}")
        vec_rate = n / vec_s
        loop_rate = m / loop_s
        rows.append(
            {
                "keys": name,
                "n": n,
                "vectorised_seconds": vec_s,
                "vectorised_keys_per_second": vec_rate,
                "loop_sample": m,
                "loop_seconds": loop_s,
                "loop_keys_per_second": loop_rate,
                "speedup": vec_rate / loop_rate,
                "meets_goal": vec_rate >= GOAL_KEYS_PER_SECOND,
            }
        )
    return rows


def _table(rows: list[dict], max_parallelism: int) -> str:
    head = f"{'keys':<24}{'vectorised keys/s':>20}{'python loop keys/s':>21}{'speedup':>10}  goal 5M/s"
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(
            f"{r['keys']:<24}{r['vectorised_keys_per_second']:>20,.0f}{r['loop_keys_per_second']:>21,.0f}"
            f"{r['speedup']:>9,.0f}x  {'yes' if r['meets_goal'] else 'no'}"
        )
    n, m = rows[0]["n"], rows[0]["loop_sample"]
    lines.append(
        f"(n={n:,} keys, max_parallelism={max_parallelism}, best of runs; loop rate measured on "
        f"{m:,} keys and extrapolated; one core; python {platform.python_version()}, "
        f"pyarrow {pa.__version__}, numpy {np.__version__}; the 5M keys/s goal is set for int64 and ASCII keys)"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2_000_000, help="keys per dataset (default 2,000,000)")
    parser.add_argument("--max-parallelism", type=int, default=128)
    parser.add_argument("--loop-sample", type=int, default=100_000, help="keys timed in the Python loop")
    parser.add_argument("--repeat", type=int, default=3, help="vectorised runs; the best is reported")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args(argv)
    if args.n < 1 or args.loop_sample < 1 or args.repeat < 1:
        parser.error("--n, --loop-sample and --repeat must be positive")
    rows = run(args.n, args.max_parallelism, args.loop_sample, args.repeat, args.seed)
    if args.json:
        print(json.dumps({"max_parallelism": args.max_parallelism, "goal_keys_per_second": GOAL_KEYS_PER_SECOND,
                          "results": rows}, indent=2))
    else:
        print(_table(rows, args.max_parallelism))
    return 0


if __name__ == "__main__":
    sys.exit(main())
