"""Forked children in tests: fork quietly, and wait for a child without hanging the suite."""

from __future__ import annotations

import os
import signal
import time
import warnings


def fork() -> int:
    """``os.fork()`` without Python 3.12+'s warning about forking a process with threads."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return os.fork()


def exit_code(pid: int, timeout: float = 60.0) -> int | None:
    """The child's exit code, or ``None`` if it did not finish in ``timeout`` seconds (then it
    is killed and reaped: a hung child is never left behind)."""
    deadline = time.monotonic() + timeout
    while (waited := os.waitpid(pid, os.WNOHANG))[0] == 0:
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return None
        time.sleep(0.05)
    return os.waitstatus_to_exitcode(waited[1])
