"""Scrapy's debug commands run without nearduppipe.

``scrapy shell``, ``fetch``, ``view``, ``parse`` and ``check`` look at one page: a page that is
already in the store must still be shown, and looking at it must not add it. Scrapy's own
dupefilter keeps out of them the same way (``shell`` switches it off; the others send
``dont_filter=True``, which nearduppipe cannot use: start requests carry it too).

Scrapy tells components neither which command runs nor leaves it in ``sys.argv`` (``execute``
deletes it from there). It is a local variable, ``cmdname``, of ``scrapy.cmdline.execute``, which
is on the main thread's stack for as long as any command runs (``scrapy shell`` runs the crawl in
another thread, hence the main thread's stack, not the caller's).
"""

from __future__ import annotations

import sys
import threading
from types import FrameType

__all__ = ["DEBUG_COMMANDS", "debug_command", "fail_command", "running_command"]

DEBUG_COMMANDS = frozenset({"shell", "fetch", "view", "parse", "check"})


def running_command() -> str | None:
    """The ``scrapy`` command this process runs (``scrapy shell URL`` → ``"shell"``), or
    ``None`` outside Scrapy's command line (a script with ``CrawlerProcess``)."""
    frame = _execute_frame()
    name = None if frame is None else frame.f_locals.get("cmdname")
    return name if isinstance(name, str) else None


def _execute_frame() -> FrameType | None:
    """The frame of ``scrapy.cmdline.execute`` on the main thread, if a command runs."""
    cmdline = sys.modules.get("scrapy.cmdline")
    code = getattr(getattr(cmdline, "execute", None), "__code__", None)
    if code is None:
        return None
    frame: FrameType | None = sys._current_frames().get(threading.main_thread().ident or -1)
    while frame is not None and frame.f_code is not code:
        frame = frame.f_back
    return frame


def fail_command() -> bool:
    """Make the running ``scrapy`` command exit with status 1 (``cmd.exitcode``, which
    ``execute`` passes to ``sys.exit``); ``False`` outside Scrapy's command line.

    Scrapy gives a non-zero exit only to a crawl whose start raised, and prints that
    exception's traceback; a crawl nearduppipe refuses to run is said in one line and closed
    before its first request instead, so its command's status is set here (the only place
    that reaches it, as :func:`running_command` reaches its name)."""
    frame = _execute_frame()
    cmd = None if frame is None else frame.f_locals.get("cmd")
    if cmd is None or not hasattr(cmd, "exitcode"):
        return False
    cmd.exitcode = 1
    return True


def debug_command() -> str | None:
    """The debug command that runs, if one does."""
    command = running_command()
    return command if command in DEBUG_COMMANDS else None
