from __future__ import annotations

import logging
from collections.abc import Iterator

import jieba
import pytest

from .support.redis_server import RedisServer

jieba.setLogLevel(logging.WARNING)

# Unit tests of the Scrapy adapters await their real thread pool on the asyncio reactor's loop.
from scrapy.utils.reactor import install_reactor  # noqa: E402

install_reactor("twisted.internet.asyncioreactor.AsyncioSelectorReactor")


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """One real redis-server for the session; tests isolate themselves by key prefix."""
    server = RedisServer(tmp_path_factory.mktemp("redis")).start()
    yield server
    server.stop()
