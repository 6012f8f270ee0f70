"""Running the nearduppipe command in tests: in this process (fast; an uncaught exception fails
the test as a traceback would) or in a child process (exit status and streams as a shell sees)."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from nearduppipe.cli import main

ROOT = Path(__file__).resolve().parents[2]


def run_python(code: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``python -c CODE ARGS`` (dedented) in a child process: a store opened, written or
    killed by another process than the test's."""
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def run_process(
    *args: str, stdin: str | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m nearduppipe.cli ARGS`` in a child process."""
    return subprocess.run(
        [sys.executable, "-m", "nearduppipe.cli", *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
    )


def run(
    *args: str, stdin: str | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """``main(ARGS)`` in this process with stdout and stderr captured apart (a child process
    when standard input or a working directory is needed)."""
    if stdin is not None or cwd is not None:
        return run_process(*args, stdin=stdin, cwd=cwd)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return subprocess.CompletedProcess(list(args), code, out.getvalue(), err.getvalue())
