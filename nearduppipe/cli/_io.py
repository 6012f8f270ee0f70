"""What every command shares about output: one-line errors, credentials never printed, page
text never reaching the terminal as escape sequences, files replaced atomically, and an output
that is never one of the inputs.

Scripts read stdout; everything meant for people (progress, summaries, warnings) goes to
stderr, so ``--format json`` output always parses.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import stat
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TextIO

from ..errors import NearDupError
from ..report.render import safe_text as clean
from ..stores.redaction import redact

__all__ = [
    "CliError",
    "atomic_output",
    "bounded_int",
    "clean",
    "emit",
    "redact",
    "refuse_overwriting_inputs",
    "say",
    "write_output",
]


class CliError(NearDupError):
    """A problem with what the user asked for (a missing file, a bad URI, a contradiction):
    printed as one line naming the argument, exit status 2, no traceback."""

    def __init__(self, message: str, status: int = 2) -> None:
        super().__init__(message)
        self.status = status


def bounded_int(low: int, high: int | None = None) -> Callable[[str], int]:
    """An argparse type: an integer in ``[low, high]``, so a bad value is a usage error (exit 2)
    rather than a traceback from deep inside."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if value < low or (high is not None and value > high):
            where = f"between {low} and {high}" if high is not None else f"at least {low}"
            raise argparse.ArgumentTypeError(f"must be {where}, not {value}")
        return value

    return parse


def say(message: str) -> None:
    """A message for people: stderr, credentials redacted, control characters (which field
    names or keys read from a feed may carry) made harmless."""
    print(clean(redact(message)), file=sys.stderr)


def emit(text: str) -> None:
    """A result for stdout (flushed here, so a closed pipe is seen inside main's handler)."""
    sys.stdout.write(text)
    sys.stdout.flush()


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.exists() and b.exists() and os.path.samefile(a, b)
    except OSError:
        return False


def refuse_overwriting_inputs(output: str | None, inputs: list[str], what: str = "-o") -> None:
    """An output that is one of the inputs would destroy it before (or while) it is read."""
    if not output or output == "-":
        return
    out = Path(output)
    for name in inputs:
        if name == "-":
            continue
        path = Path(name)
        if _same_file(out, path) or out.resolve() == path.resolve():
            raise CliError(f"{what} {output}: is the input {name}; choose another output file")


def refuse_directory(path: str | None, what: str = "") -> None:
    """Refuse an output path that is a directory before any work is done for it."""
    if path and path != "-" and Path(path).is_dir():
        raise CliError(f"{what + ' ' if what else ''}{path}: is a directory; name a file to write")


def refuse_unreachable_url(path: str | None, what: str) -> None:
    """An output URL (``s3://``: ``batch/fs.py``) whose library, credentials or bucket (or
    folder) is missing is refused before any work is done for it."""
    if path and "://" in path and _is_url(path):
        from ..batch.fs import check_output

        try:
            check_output(path)
        except NearDupError as e:
            raise CliError(f"{what} {e}") from None


def _written_in_place(target: Path) -> bool:
    """An existing path that is not a regular file: a FIFO, a device (/dev/null, /dev/full) or a
    symlink (/dev/stdout). Renaming a file over it would put a regular file in its place (as
    root, even in /dev) and nothing would reach the reader; it is written through instead."""
    try:
        return not stat.S_ISREG(os.lstat(target).st_mode)
    except OSError:
        return False  # (a new path: written atomically)


class _Raw(io.FileIO):
    """An output's file: a failed write (a full disk, /dev/full, a FIFO whose reader left) is a
    :class:`CliError` naming the output, never an ``OSError`` a command could take for its
    input's."""

    def __init__(self, file: int | str, shown: str) -> None:
        super().__init__(file, "w")
        self.shown = shown

    def write(self, b: Any, /) -> int:
        try:
            return super().write(b)
        except OSError as e:
            raise CliError(f"{self.shown}: cannot write there: {e.strerror or e}") from None


def _text(file: int | str, shown: str, newline: str | None) -> TextIO:
    raw = _Raw(file, shown)
    return io.TextIOWrapper(io.BufferedWriter(raw), encoding="utf-8", newline=newline)


@contextlib.contextmanager
def _closing(f: TextIO) -> Iterator[TextIO]:
    """Close ``f`` whatever happens; after a failed write its close fails again (the same
    unwritten buffer): that second error is dropped, the file is closed all the same."""
    try:
        yield f
        f.flush()
    except BaseException:
        with contextlib.suppress(CliError):
            f.close()
        raise
    f.close()


@contextlib.contextmanager
def atomic_output(path: str, newline: str | None = None) -> Iterator[TextIO]:
    """A text file that appears at ``path`` only when complete: written to a temporary file in
    the same directory (same file system) and renamed over the target, so an interrupted run
    never leaves half a file where a good one was. Only a regular file or a new path is
    replaced; anything else (a FIFO, a device, a symlink) is written in place, as a shell's
    ``>`` writes it (a FIFO waits for its reader). A URL (``s3://``, ``gs://``, ``hdfs://``:
    ``batch/fs.py``) is written to a local temporary file, then uploaded whole."""
    if "://" in path and _is_url(path):
        with _url_output(path, newline) as f:
            yield f
        return
    target = Path(path)
    directory = target.parent if str(target.parent) else Path(".")
    if not directory.is_dir():
        raise CliError(f"{path}: directory {directory} does not exist")
    refuse_directory(path)
    if _written_in_place(target):
        try:
            f = _text(path, path, newline)
        except OSError as e:
            raise CliError(f"{path}: cannot write there: {e.strerror or e}") from None
        with _closing(f):
            yield f
        return
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=directory)
    except OSError as e:
        raise CliError(f"{path}: cannot write there: {e.strerror or e}") from e
    try:
        with _closing(_text(fd, path, newline)) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        if target.exists():
            with contextlib.suppress(OSError):
                os.chmod(tmp, target.stat().st_mode & 0o777)
        else:
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o666 & ~umask)
        try:
            os.replace(tmp, target)
        except OSError as e:  # (named for the target, not the temporary file)
            raise CliError(f"{path}: cannot write there: {e.strerror or e}") from None
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _is_url(path: str) -> bool:
    from ..batch.fs import is_url

    return is_url(path)


@contextlib.contextmanager
def _url_output(path: str, newline: str | None) -> Iterator[TextIO]:
    """Written under ``$TMPDIR``, put at the URL when complete: an object appears whole or
    not at all, so a failed run leaves nothing there."""
    from ..batch.fs import check_output

    try:
        target = check_output(path)
    except NearDupError as e:
        raise CliError(str(e)) from None
    with tempfile.TemporaryDirectory(prefix="nearduppipe-") as tmp:
        local = os.path.join(tmp, target.name or "output")
        with _closing(_text(local, str(target), newline)) as f:
            yield f
        try:
            target.upload(local)
        except NearDupError as e:
            raise CliError(str(e)) from None


def write_output(text: str, path: str | None) -> None:
    """``text`` to ``path`` atomically, or to stdout when no path (or ``-``) is given."""
    if path and path != "-":
        with atomic_output(path) as f:
            f.write(text)
    else:
        emit(text)
