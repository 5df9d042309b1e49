"""Keep PySpark's closed-pipe tracebacks out of a user's console.

When Spark has what it needs before a Python worker has written everything (`df.limit(5).show()`),
the JVM closes the worker's socket and PySpark's daemon prints a `BrokenPipeError` traceback from its
final flush (pyspark/daemon.py `worker()`, re-raised when PYTHON_DAEMON_KILL_WORKER_ON_FLUSH_FAILURE is
set and printed by `manager()`). Every Python UDF does this under a limit, not only this data source,
and the result is correct. The data source cannot stop the flush, so a worker that reads flinkstate
state wraps its stderr once: a traceback raised in PySpark's own modules that ends in
BrokenPipeError or ConnectionResetError is dropped; every other line passes through unchanged.
"""

from __future__ import annotations

import sys
from typing import Any, TextIO

__all__ = ["ClosedPipeFilter", "quiet_closed_pipes"]

_HEADER = "Traceback (most recent call last):"
_CLOSED = ("BrokenPipeError", "ConnectionResetError")


class ClosedPipeFilter:
    """A text stream that forwards to `inner`, minus PySpark tracebacks of a closed worker socket."""

    def __init__(self, inner: TextIO) -> None:
        self.inner = inner
        self._partial = ""
        self._traceback: list[str] | None = None

    def write(self, s: str) -> int:
        self._partial += s
        while "\n" in self._partial:
            line, self._partial = self._partial.split("\n", 1)
            self._line(line + "\n")
        return len(s)

    def _line(self, line: str) -> None:
        if self._traceback is None:
            if line.rstrip("\n") == _HEADER:
                self._traceback = [line]
            else:
                self.inner.write(line)
            return
        self._traceback.append(line)
        if line[:1].isspace():
            return  # a frame or source line: the traceback goes on
        lines, self._traceback = self._traceback, None
        text = "".join(lines)
        if line.startswith(_CLOSED) and "pyspark" in text:
            return
        self.inner.write(text)

    def flush(self) -> None:
        if self._traceback is None and self._partial:
            self.inner.write(self._partial)
            self._partial = ""
        self.inner.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def quiet_closed_pipes() -> None:
    """Install the filter on this process's stderr (once; a no-op when already installed)."""
    if not isinstance(sys.stderr, ClosedPipeFilter):
        sys.stderr = ClosedPipeFilter(sys.stderr)  # type: ignore[assignment]
