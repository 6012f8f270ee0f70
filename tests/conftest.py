from __future__ import annotations

import logging

import jieba

jieba.setLogLevel(logging.WARNING)

# Unit tests of the Scrapy adapters await their real thread pool on the asyncio reactor's loop.
from scrapy.utils.reactor import install_reactor  # noqa: E402

install_reactor("twisted.internet.asyncioreactor.AsyncioSelectorReactor")
