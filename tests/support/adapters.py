"""Helpers for driving the Scrapy adapters directly: built responses, a real thread and process
pool, and the asyncio reactor's loop (installed by conftest.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

import scrapy
from scrapy.http import HtmlResponse, Response

from nearduppipe.middlewares import NearDupMiddleware
from nearduppipe.pipelines import NearDupPipeline

T = TypeVar("T")

ARTICLE = " ".join(
    f"Paragraph {w} explains how the harbour authority plans to dredge the northern channel."
    for w in ("one", "two", "three", "four", "five", "six", "seven", "eight")
)
OTHER = " ".join(
    f"Section {w} of the cookbook describes slow roasting vegetables with rosemary and garlic."
    for w in ("one", "two", "three", "four", "five", "six", "seven", "eight")
)


def page(text: str, extra: str = "") -> str:
    return (
        f"<html><body><nav>Home | About {extra}</nav><article><p>{text}</p></article></body></html>"
    )


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.get_event_loop().run_until_complete(coro)


def middleware(make_crawler: Any, **settings: Any) -> NearDupMiddleware:
    return NearDupMiddleware.from_crawler(make_crawler(**settings))


def respond(mw: NearDupMiddleware, response: Response, **meta: Any) -> Response:
    request = scrapy.Request(response.url, meta=meta)
    return run(mw.process_response(request, response))


def html(url: str, body: str, status: int = 200) -> HtmlResponse:
    return HtmlResponse(url, body=body.encode("utf-8"), encoding="utf-8", status=status)


def stats(mw: NearDupMiddleware | NearDupPipeline) -> dict[str, Any]:
    return {k: v for k, v in mw.runtime.stats.get_stats().items() if k.startswith("neardup/")}
