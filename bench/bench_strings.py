"""Times the vector Java-string reader (`string_reader`) on columns of StringValue strings of several shapes.

Usage: python bench/bench_strings.py ROOT [ROOT ...] — each ROOT is a checkout whose python/ is imported in turn (a
subprocess each), so a branch and its base can be compared in one run; rounds alternate between them (the machine is
shared). Prints, per distribution and root, the minimum over the rounds of the per-call time and ns per string.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

DISTRIBUTIONS = ["bench", "ascii", "wide", "long", "few", "cjk"]

_CHILD = r'''
import json, sys, time
sys.path[:0] = [sys.argv[1] + "/python"]
import numpy as np
from flinkstate.flink.serde._vbuf import Source
from flinkstate.flink.serde._vstring import string_reader

def enc(s):
    out = bytearray()
    n = len(s.encode("utf-16-le", "surrogatepass")) // 2 + 1
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80); n >>= 7
    out.append(n)
    for c in np.frombuffer(s.encode("utf-16-le", "surrogatepass"), "<u2").tolist():
        while c >= 0x80:
            out.append((c & 0x7F) | 0x80); c >>= 7
        out.append(c)
    return bytes(out)

def column(kind):
    tails = ["", "\u00e9", "\u20ac", "\U0001F600", ""]
    if kind == "bench":  # the large savepoint's strings: 3 of 5 with a non-ASCII last character
        return [f"s{i}{tails[i % 5]}" for i in range(300_000)], 8
    if kind == "ascii":
        return [f"s{i}" for i in range(300_000)], 8
    if kind == "wide":  # every string non-ASCII
        return [f"s{i}{tails[1 + i % 3]}" for i in range(300_000)], 8
    if kind == "long":  # a few hundred units, mostly ASCII with a few non-ASCII
        return [("word%d é€ " % i) * 30 + tails[i % 5] for i in range(20_000)], 8
    if kind == "few":
        return [f"s{i}{tails[i % 5]}" for i in range(5)], 8
    if kind == "cjk":  # 3-byte units throughout
        return ["".join(chr(0x4E00 + (i * 7 + j) % 20000) for j in range(12)) for i in range(100_000)], 8
    raise ValueError(kind)

kind, rounds, cache = sys.argv[2], int(sys.argv[3]), sys.argv[4]
values, gap = column(kind)
try:
    with open(cache, "rb") as f:
        src, pos = Source(f.read()), np.load(cache + ".npy")
except FileNotFoundError:
    parts, pos, at = [], [], 0
    for v in values:
        b = b"\x00" * gap + enc(v)
        parts.append(b); pos.append(at + gap); at += len(b)
    src, pos = Source(b"".join(parts)), np.array(pos)
    with open(cache, "wb") as f:
        f.write(src.buf)
    np.save(cache + ".npy", pos)
string_reader(src, pos, None)
reps = max(1, 50_000 // len(values))
best = cpu = float("inf")
for _ in range(rounds):
    t, c = time.perf_counter(), time.process_time()
    for _ in range(reps):
        out, end = string_reader(src, pos, None)
    best = min(best, (time.perf_counter() - t) / reps)
    cpu = min(cpu, (time.process_time() - c) / reps)
assert out.to_pylist() == values
print(json.dumps({"s": best, "cpu": cpu, "n": len(values)}))
'''


def main(roots: list[str], rounds: int = 5, inner: int = 5, kinds: list[str] | None = None) -> None:
    """Alternate the roots `rounds` times per distribution; each child takes the best of `inner` calls."""
    tmp = tempfile.mkdtemp(prefix="bench_strings")
    for kind in kinds or DISTRIBUTIONS:
        best: dict[str, float] = {}
        cpu: dict[str, float] = {}
        n = 0
        for _ in range(rounds):
            for root in roots:
                res = json.loads(subprocess.run([sys.executable, "-c", _CHILD, root, kind, str(inner),
                                                 os.path.join(tmp, kind)], check=True,
                                                capture_output=True, text=True).stdout)
                best[root] = min(best.get(root, float("inf")), res["s"])
                cpu[root] = min(cpu.get(root, float("inf")), res["cpu"])
                n = res["n"]
        print(kind, n, "  ".join(f"{root}: {best[root] * 1e3:.3f} ms wall, {cpu[root] * 1e3:.3f} ms CPU "
                                 f"({best[root] / n * 1e9:.0f} ns/string)" for root in roots))


if __name__ == "__main__":
    kinds = os.environ.get("BENCH_STRINGS_KINDS")
    main(sys.argv[1:], kinds=kinds.split(",") if kinds else None)
