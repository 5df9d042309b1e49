"""Kill this process the instant it makes a hard link (Linux seccomp): a writer killed inside a Delta commit, exactly.

delta-rs's local object store commits `_delta_log/<version>.json` by writing `<version>.json#<n>` and hard-linking
it into place; a process killed between the two leaves the staging file behind. A seccomp filter that kills on
`link`/`linkat` stops a real writer at exactly that point, every time (no timing, no mock of delta-rs).
"""

from __future__ import annotations

import ctypes
import platform
import struct
import sys

__all__ = ["available", "kill_on_hard_link"]

# per machine: the audit arch, the syscall numbers of link and linkat, and of seccomp (asm/unistd_64.h, asm-generic/unistd.h)
_ARCHES = {"x86_64": (0xC000003E, (86, 265), 317), "aarch64": (0xC00000B7, (37,), 277)}
_LD_W_ABS, _JEQ_K, _RET_K = 0x20, 0x15, 0x06
_ALLOW, _KILL_PROCESS = 0x7FFF0000, 0x80000000
_PR_SET_NO_NEW_PRIVS, _SECCOMP_SET_MODE_FILTER, _SECCOMP_FILTER_FLAG_TSYNC = 38, 1, 1


def available() -> bool:
    """Whether this machine can run the filter (Linux on x86_64 or aarch64)."""
    return sys.platform == "linux" and platform.machine() in _ARCHES


def kill_on_hard_link() -> None:
    """From now on, the first link/linkat call of any thread of this process kills it (SIGSYS): the filter is synced to
    the threads that exist already (delta-rs does its file I/O on a pool of its own)."""
    arch, numbers, seccomp = _ARCHES[platform.machine()]
    prog = [(_LD_W_ABS, 0, 0, 4), (_JEQ_K, 1, 0, arch), (_RET_K, 0, 0, _ALLOW), (_LD_W_ABS, 0, 0, 0)]
    for i, nr in enumerate(numbers):
        prog.append((_JEQ_K, len(numbers) - i, 0, nr))  # to the kill after the remaining checks and the allow
    prog += [(_RET_K, 0, 0, _ALLOW), (_RET_K, 0, 0, _KILL_PROCESS)]
    code = ctypes.create_string_buffer(b"".join(struct.pack("HBBI", *f) for f in prog))

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = SockFprog(len(prog), ctypes.cast(code, ctypes.c_void_p))
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 or libc.syscall(
            seccomp, _SECCOMP_SET_MODE_FILTER, _SECCOMP_FILTER_FLAG_TSYNC, ctypes.byref(fprog)) != 0:
        raise OSError(ctypes.get_errno(), "seccomp filter refused")
