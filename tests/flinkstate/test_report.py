"""`flinkstate insight` and `flinkstate report`: the tables as JSON, the HTML page offline, and rendered in a real browser."""

from __future__ import annotations

import io
import json
import re
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest

import flinkstate as fs
from flinkstate.cli import main
from flinkstate.report import render_report
from fsc_helpers import HOT, SKEW_SAVEPOINT, TTL_2H, skewed_root

pytest.importorskip("plotly", reason="the report needs the 'report' extra (plotly)")


def _cli(*argv: str) -> str:
    out = io.StringIO()
    assert main(list(argv), out) == 0
    return out.getvalue()


def _hot_key_groups() -> set[int]:
    import pyarrow as pa

    return {fs.assign_key_group(k, 128, pa.string()) for k in HOT}


def test_insight_json_points_at_the_hot_key_groups_and_keys(tmp_path: Path) -> None:
    skewed_root(tmp_path / "job")
    rows = json.loads(_cli("insight", str(tmp_path / "job"), "key-groups", "--json"))
    seen = sorted((r for r in rows if r["state"] == "seen"), key=lambda r: -r["entries"])
    assert {r["key_group"] for r in seen[:3]} == _hot_key_groups()
    top = json.loads(_cli("insight", str(tmp_path / "job"), "top-keys", "--top", "3", "--json"))
    assert {r["key"] for r in top if r["state"] == "events" and r["ranked_by"] == "elements"} == set(HOT)
    hist = json.loads(_cli("insight", str(tmp_path / "job"), "history", "--json"))
    assert {r["checkpoint_id"] for r in hist} == {1, 2}
    sub = json.loads(_cli("insight", str(tmp_path / "job"), "subtasks", "--parallelism", "4", "--json"))
    assert [r["key_group_start"] for r in sub] == [0, 32, 64, 96]


def _page(source: object) -> str:
    page = render_report(source, top=3)
    assert not re.search(r"<script[^>]+src=", page)  # offline: every script inline
    assert "Plotly.newPlot" in page and "plotly.js" in page  # the library itself is embedded
    return page


def test_the_report_of_a_root_names_the_hot_keys(tmp_path: Path) -> None:
    page = _page(skewed_root(tmp_path / "job"))
    assert all(f'"{k}"' in page for k in HOT) and "Growth over checkpoints" in page and "TTL expiry" in page


def test_the_report_of_a_flink_savepoint_names_the_hot_keys() -> None:
    if not (SKEW_SAVEPOINT / "_metadata").exists():
        pytest.skip("tests/fixtures/flink-2.3-skew is missing: python tests/fixtures/make_flink_fixture.py skew")
    page = _page(fs.open(str(SKEW_SAVEPOINT), ttl={"skewed/last": TTL_2H}))
    assert all(f'"{k}"' in page for k in HOT) and "parallelism 2 and 4" in page


# ---------------------------------------------------------------------------------------------- in a real browser
def _chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if exe is None:
        pytest.skip("no chromium on PATH (Debian: apt-get install chromium): the report is not rendered in a browser")
    return exe


def _render(exe: str, page: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    cmd = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--enable-logging=stderr", "--v=0",
           "--virtual-time-budget=10000", "--window-size=1280,4000", *extra, page.resolve().as_uri()]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=180)


def _console(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if ":CONSOLE" in line]


def _png_colours(png: bytes) -> int:
    """Distinct byte values in the decompressed image data of a PNG (a blank page has very few)."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat = 8, b""
    while pos < len(png):
        n, kind = struct.unpack(">I4s", png[pos : pos + 8])
        if kind == b"IDAT":
            idat += png[pos + 8 : pos + 8 + n]
        pos += 12 + n
    return len(set(zlib.decompress(idat)))


@pytest.mark.slow
def test_the_report_renders_in_a_headless_browser_without_console_errors(tmp_path: Path) -> None:
    exe = _chromium()
    bad = tmp_path / "bad.html"  # the check sees a page's console errors at all
    bad.write_text("<html><body><script>console.error('broken'); missing();</script></body></html>", encoding="utf-8")
    assert len(_console(_render(exe, bad, "--dump-dom").stderr)) == 2

    report = tmp_path / "report.html"
    skewed_root(tmp_path / "job")
    assert "wrote" in _cli("report", str(tmp_path / "job"), "-o", str(report), "--parallelism", "4")
    dom = _render(exe, report, "--dump-dom")
    assert dom.returncode == 0 and _console(dom.stderr) == []
    assert dom.stdout.count('class="main-svg"') >= 6  # plotly drew every figure (its SVG is in the rendered DOM)
    assert all(k in dom.stdout for k in HOT)
    shot = tmp_path / "report.png"
    _render(exe, report, f"--screenshot={shot}")
    assert shot.stat().st_size > 20_000 and _png_colours(shot.read_bytes()) > 50
