"""Which loop the tests run the crawls on.

``NEARDUP_TEST_REACTOR=none`` (a leg of .ci/run, Scrapy >= 2.15) runs every crawl and every
unit test with ``TWISTED_REACTOR_ENABLED = False``: plain asyncio, where importing
``twisted.internet.reactor`` is an error. Otherwise Scrapy's default, the asyncio reactor.
"""

from __future__ import annotations

import os
from typing import Any

NO_REACTOR = os.environ.get("NEARDUP_TEST_REACTOR", "") == "none"


def reactor_settings() -> dict[str, Any]:
    return {"TWISTED_REACTOR_ENABLED": False} if NO_REACTOR else {}


def reactor_args() -> list[str]:
    """``scrapy`` command-line options for the same choice."""
    return ["-s", "TWISTED_REACTOR_ENABLED=False"] if NO_REACTOR else []
