"""MkDocs hook: the reference pages' tables, generated from the code at build time so they cannot drift.

A page holds a marker line `<!-- generated: NAME -->`; the build replaces it with the Markdown of NAME:

- `spark-options`: every option of `format("flinkstate")`, from `pyspark_flinkstate.options.OPTIONS`;
- `cli`: every command and flag of `flinkstate`, from `flinkstate.cli.build_parser()` (commands other modules
  add included), each at the anchor `#<command>` that the command's `--help` names;
- `errors`: every `FlinkStateError` subclass of the package, the exported ones first, from the classes and their
  docstrings.

A new option, command, flag or error therefore shows in the site with no edit of the docs; tests/test_docs.py
checks that each appears. The functions are plain (Markdown in, Markdown out) so the tests call them too.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import os
import pkgutil
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
for _src in (ROOT / "python", ROOT / "connector"):  # the source tree, as the tests import it
    if str(_src) not in sys.path:
        sys.path.insert(0, str(_src))

MARKER = re.compile(r"^<!-- generated: ([a-z-]+) -->$", re.M)

# guides that show a command at work: the CLI reference links them under the command
COMMAND_GUIDES = {
    "describe": ["guides/inspect-savepoint.md"],
    "import": ["guides/fix-keys.md", "guides/upgrade-flink.md"],
    "export": ["guides/fix-keys.md", "guides/upgrade-flink.md", "guides/rescale.md"],
    "compact": ["guides/shrink.md"],
    "expire": ["guides/shrink.md"],
    "retain": ["guides/shrink.md"],
    "discard": ["guides/shrink.md"],
    "insight": ["guides/hot-keys.md"],
    "report": ["guides/hot-keys.md"],
    "verify": ["guides/inspect-savepoint.md"],
    "demo": ["getting-started.md"],
    "checkpoints": ["getting-started.md"],
    "sources": ["guides/source-positions.md"],
    "rewind": ["guides/source-positions.md"],
}


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _value(v: object) -> str:
    if isinstance(v, bool):
        return f"`{str(v).lower()}`"
    return f"`{v}`"


def spark_options() -> str:
    """One table per use (batch read, write, streaming), every option with its type, default and meaning."""
    from pyspark_flinkstate.options import OPTIONS, READ, STREAM_READ, STREAM_WRITE, WRITE

    out = []
    for title, kind in (("Read", READ), ("Write", WRITE), ("Streaming read", STREAM_READ), ("Streaming write", STREAM_WRITE)):
        out += [f"## {title} options {{#{kind.replace(' ', '-')}}}", "", "| option | type | default | meaning |", "|---|---|---|---|"]
        for o in OPTIONS:
            if kind not in o.applies:
                continue
            typ = o.type + (f": {', '.join(f'`{c}`' for c in o.choices)}" if o.choices else "")
            default = o.default_text or ("" if o.default is None else _value(o.default))
            out.append(f"| `{o.name}` | {_cell(typ)} | {_cell(default) or '-'} | {_cell(o.meaning)} |")
        out.append("")
    return "\n".join(out)


def _parser_commands() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser], dict[str, str]]:
    from flinkstate.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))  # noqa: SLF001 - argparse has no public walk
    helps = {c.dest: c.help or "" for c in sub._choices_actions}  # noqa: SLF001
    return parser, dict(sub.choices), helps


def _flag(a: argparse.Action) -> str:
    if not a.option_strings:
        return f"`{a.metavar or a.dest.upper()}`"
    names = ", ".join(a.option_strings)
    if a.nargs == 0:
        return f"`{names}`"
    meta = a.metavar or a.dest.upper()
    return f"`{names} [{meta}]`" if a.nargs == "?" else f"`{names} {meta}`"


def _usage(parser: argparse.ArgumentParser) -> str:
    """The usage lines without "usage: ", wrapped at 100 columns whatever the terminal."""
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "100"
    try:
        lines = parser.format_usage().strip().splitlines()
    finally:
        if old is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = old
    return "\n".join([lines[0].removeprefix("usage: "), *(line.removeprefix(" " * len("usage: ")) for line in lines[1:])])


def cli_reference() -> str:
    """Every command: its usage, what it does, its arguments and flags with defaults; anchors are the command names."""
    parser, commands, helps = _parser_commands()
    out = ["```text", _usage(parser), "```", ""]
    out += ["| command | what it does |", "|---|---|"]
    out += [f"| [`{n}`](#{n}) | {_cell(helps[n])} |" for n in commands]
    out.append("")
    for name, sp in commands.items():
        out += [f"## `flinkstate {name}` {{#{name}}}", "", _cell(sp.description or helps[name]), ""]
        out += ["```text", _usage(sp), "```", ""]
        rows = []
        for a in sp._actions:  # noqa: SLF001
            if isinstance(a, argparse._HelpAction):  # noqa: SLF001
                continue
            default = "" if a.default in (None, False, argparse.SUPPRESS) or a.nargs == 0 else _value(a.default)
            choices = f" One of {', '.join(f'`{c}`' for c in a.choices)}." if a.choices else ""
            rows.append(f"| {_flag(a)} | {_cell((a.help or '').replace('%(default)s', str(a.default)).replace('%%', '%'))}{choices} | {default or '-'} |")
        if rows:
            out += ["| argument | meaning | default |", "|---|---|---|", *rows, ""]
        guides = COMMAND_GUIDES.get(name, [])
        if guides:
            out += ["See also: " + ", ".join(f"[{_title(g)}](../{g})" for g in guides) + ".", ""]
    return "\n".join(out)


def _title(page: str) -> str:
    text = (ROOT / "docs" / page).read_text()
    m = re.search(r"^# (.+)$", text, re.M)
    return m.group(1).strip() if m else page


def error_classes() -> tuple[list[type], list[type]]:
    """(the errors `flinkstate` exports, every other FlinkStateError subclass the package defines), by name."""
    import flinkstate

    for mod in pkgutil.walk_packages(flinkstate.__path__, "flinkstate."):
        if mod.name.rsplit(".", 1)[-1] != "__main__":  # (running `python -m flinkstate` is not defining anything)
            importlib.import_module(mod.name)  # every class is defined by now (an import error here is a real defect)
    base = flinkstate.FlinkStateError
    seen: set[type] = set()
    todo = [base]
    while todo:
        c = todo.pop()
        if c not in seen:
            seen.add(c)
            todo += c.__subclasses__()
    exported = [getattr(flinkstate, n) for n in flinkstate.__all__ if isinstance(getattr(flinkstate, n), type)
                and issubclass(getattr(flinkstate, n), base)]
    others = sorted((c for c in seen if c not in exported and c.__module__.startswith("flinkstate")), key=lambda c: c.__name__)
    return exported, others


def _doc(c: type) -> str:
    return " ".join(inspect.cleandoc(c.__doc__ or "").split())


def errors_reference() -> str:
    """The exported errors (importable from `flinkstate`) with what they subclass and when they are raised; then the
    more specific subclasses some modules raise, each under the exported class that catches it."""
    import flinkstate

    exported, others = error_classes()

    def bases(c: type) -> str:
        ours = [b.__name__ for b in c.__mro__[1:] if issubclass(b, flinkstate.FlinkStateError)]
        py = [b.__name__ for b in c.__mro__[1:] if not issubclass(b, flinkstate.FlinkStateError) and b not in (Exception, BaseException, object)]
        parts = []
        if ours:
            parts.append("subclass of " + " < ".join(f"[`{n}`](#{n})" for n in ours))
        if py:
            parts.append("also a Python " + ", ".join(f"`{n}`" for n in py))
        return ", ".join(parts)

    out = ["| error | when |", "|---|---|"]
    out += [f"| [`{c.__name__}`](#{c.__name__}) | {_cell(_doc(c).split('. ')[0].rstrip('.'))}. |" for c in exported]
    out.append("")
    for c in exported:
        out += [f"## `{c.__name__}` {{#{c.__name__}}}", "", f"`flinkstate.{c.__name__}`" + (f": {bases(c)}." if bases(c) else "."), "",
                _doc(c), ""]
    if others:
        out += ["## More specific errors {#more-specific}", "",
                "Raised by some commands and modules; each is caught by the exported class it subclasses.", "",
                "| error | module | subclass of | when |", "|---|---|---|---|"]
        for c in others:
            parent = next(b for b in c.__mro__[1:] if b in exported)
            out.append(f"| `{c.__name__}` | `{c.__module__}` | [`{parent.__name__}`](#{parent.__name__}) | {_cell(_doc(c))} |")
        out.append("")
    return "\n".join(out)


GENERATORS = {"spark-options": spark_options, "cli": cli_reference, "errors": errors_reference}


def render(markdown: str) -> str:
    """`markdown` with each generated marker replaced (an unknown name is an error: the build fails on it)."""

    def one(m: re.Match[str]) -> str:
        if m.group(1) not in GENERATORS:
            raise KeyError(f"unknown generated section {m.group(1)!r}; known: {sorted(GENERATORS)}")
        return GENERATORS[m.group(1)]()

    return MARKER.sub(one, markdown)


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    """MkDocs event: fill the generated sections of a page."""
    return render(markdown)
