"""Numba-compiled kernels for sequential byte work (issue 46), compiled once per machine and imported only when used.

A kernel is a plain Python function of numpy arrays and ints decorated with `@kernel`: on its first call numba is
imported and the function compiled with `cache=True`, so later processes (Spark's Python workers included) load the
machine code from numba's on-disk cache instead of compiling. The cache lives in NUMBA_CACHE_DIR; when the user has
not set it, in `$XDG_CACHE_HOME/flinkstate/numba` (default ~/.cache/flinkstate/numba), so that a package installed
read-only in site-packages still caches. `import flinkstate` never imports numba.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["kernel", "cache_dir"]

_LOCK = threading.Lock()
_LOG = logging.getLogger(__name__)


def cache_dir() -> str:
    """Where numba keeps the compiled kernels: NUMBA_CACHE_DIR if set, else a flinkstate folder of the user's cache."""
    if os.environ.get("NUMBA_CACHE_DIR"):
        return os.environ["NUMBA_CACHE_DIR"]
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return str(Path(base) / "flinkstate" / "numba")


def _numba() -> Any:
    """numba, imported after NUMBA_CACHE_DIR has its default (numba reads it once, when first imported)."""
    if not os.environ.get("NUMBA_CACHE_DIR"):  # unset or empty (numba's "none")
        os.environ["NUMBA_CACHE_DIR"] = cache_dir()
    import numba  # noqa: PLC0415 (imported on the first kernel call only)

    return numba


class kernel:  # noqa: N801 (used as a decorator)
    """A function compiled by numba (nopython, cached on disk, releasing the GIL) on its first call."""

    def __init__(self, py_func: Callable[..., Any]) -> None:
        self.py_func = py_func
        self._compiled: Callable[..., Any] | None = None
        self.__name__ = py_func.__name__
        self.__qualname__ = py_func.__qualname__
        self.__module__ = py_func.__module__
        self.__doc__ = py_func.__doc__
        self.__wrapped__ = py_func

    def __call__(self, *args: Any) -> Any:
        fn = self._compiled
        if fn is None:
            with _LOCK:
                if self._compiled is None:
                    numba = _numba()
                    try:
                        self._compiled = numba.njit(cache=True, nogil=True, boundscheck=False)(self.py_func)
                    except RuntimeError as e:  # no writable cache folder anywhere: compile in every process
                        _LOG.warning("flinkstate: numba cannot cache %s (%s); it is compiled in each process", self.__qualname__, e)
                        self._compiled = numba.njit(nogil=True, boundscheck=False)(self.py_func)
                fn = self._compiled
        return fn(*args)
