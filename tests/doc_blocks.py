"""The code blocks of our Markdown (README.md and the docs site's pages), and running them as a user does.

One machinery for both: tests/test_readme.py runs the README's blocks with it, tests/test_docs.py every
guide's. A page's `python`, `bash` and `sql` blocks run in document order in one Python process started the
way a user starts a script (`python -W error script.py` in the page's working folder): python blocks as they
are, bash blocks through `bash -euo pipefail`, sql blocks through the `spark` the page created. A block right
after a line `<!-- not run: why -->` is shown only (an install command, a cluster that needs other machines);
`text` blocks are never run.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

RUN_LANGS = ("python", "bash", "sql")
_BLOCK = re.compile(r"^(?P<indent>[ \t]*)```(?P<lang>[a-z]*)[^\n]*\n(?P<code>.*?)^(?P=indent)```[ \t]*$", re.S | re.M)
_NOT_RUN = re.compile(r"<!-- not run: [^>]+-->\s*$")


def code_blocks(text: str, langs: tuple[str, ...] = RUN_LANGS, *, with_skipped: bool = False) -> list[tuple[str, str]]:
    """The (language, code) blocks of `text` in `langs`, in document order, dedented; blocks marked
    `<!-- not run: ... -->` are left out unless `with_skipped`."""
    out = []
    for m in _BLOCK.finditer(text):
        if m.group("lang") not in langs:
            continue
        if not with_skipped and _NOT_RUN.search(text[: m.start()].rstrip("\n ").rsplit("\n", 1)[-1] + "\n"):
            continue
        out.append((m.group("lang"), textwrap.dedent(m.group("code"))))
    return out


def shown_tables(text: str) -> list[int]:
    """Rows of each table `DataFrame.show()` printed in `text`, in order."""
    tables: list[int] = []
    bars = 0
    in_table = False
    for line in text.splitlines() + [""]:
        if line.startswith(("+", "|")):
            in_table = True
            bars += line.startswith("|")
        elif in_table:
            tables.append(bars - 1)
            bars, in_table = 0, False
    return tables


def expected_tables(blocks: list[tuple[str, str]]) -> int:
    """How many tables the blocks print with `show()`: one per `.show()` and per SELECT of a sql block."""
    return sum(code.count(".show(") for lang, code in blocks if lang == "python") + sum(
        1 for lang, code in blocks if lang == "sql" for s in code.split(";") if s.strip().upper().startswith("SELECT"))


def script_of(blocks: list[tuple[str, str]]) -> str:
    """One Python script running `blocks` in order (bash through subprocess, sql through `spark.sql`)."""
    parts = ["import subprocess as _subprocess, sys as _sys"]
    for lang, code in blocks:
        if lang == "python":
            parts.append(code)
        elif lang == "bash":
            parts.append(f"_sys.stdout.flush(); _subprocess.run(['bash', '-euo', 'pipefail', '-c', {code!r}], check=True)")
        else:
            parts += [f"spark.sql({s.strip()!r})" + (".show()" if s.strip().upper().startswith("SELECT") else "")
                      for s in code.split(";") if s.strip()]
    return "\n".join(parts) + "\n"


def run_script(script: str, cwd: Path, env: dict[str, str], *flags: str, timeout: int = 900) -> subprocess.CompletedProcess[str]:
    """`python [flags] script.py` in `cwd` with `env`, as a user runs a script."""
    (cwd / "script.py").write_text(script)
    return subprocess.run([sys.executable, *flags, "script.py"], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
