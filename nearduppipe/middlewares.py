"""``NearDupMiddleware``: drop near-duplicate pages at crawl time, before any callback runs.

Dropping in the downloader, not in a spider callback, means a near-duplicate page's links are
never followed (Manku et al. §1: duplicates waste crawl resources). Enable with::

    DOWNLOADER_MIDDLEWARES = {"nearduppipe.middlewares.NearDupMiddleware": 543}

Responses pass downloader middlewares from the highest priority number to the lowest, so 543
puts it after HttpCompressionMiddleware (590, the body is decoded), RedirectMiddleware (600) and
RetryMiddleware (550): it fingerprints the final, decompressed page.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scrapy.exceptions import IgnoreRequest
from scrapy.http import HtmlResponse

from .fingerprint.page import fingerprint_html
from .runtime import NearDupRuntime
from .stores import Match

if TYPE_CHECKING:
    from scrapy import Request, Spider
    from scrapy.crawler import Crawler
    from scrapy.http import Response

__all__ = ["NearDupMiddleware", "NearDuplicatePage", "UnchangedPage"]


class NearDuplicatePage(IgnoreRequest):
    """The response was a near-duplicate of an earlier page; it never reaches the spider.

    The request's errback receives it (``failure.check(NearDuplicatePage)``; ``failure.value``
    has ``.url`` and ``.match``), so a spider can record or re-route dropped pages."""

    def __init__(self, url: str, match: Match) -> None:
        super().__init__(f"near-duplicate of {match.key} (distance {match.distance}): {url}")
        self.url = url
        self.match = match


class UnchangedPage(NearDuplicatePage):
    """The page was crawled before (by another crawl job) and has not changed:
    ``NEARDUP_KEEP_UNCHANGED = True`` keeps such pages. ``match`` is its own stored entry."""

    def __init__(self, url: str, match: Match) -> None:
        IgnoreRequest.__init__(self, f"unchanged since an earlier crawl: {url}")
        self.url = url
        self.match = match


class NearDupMiddleware:
    def __init__(self, runtime: NearDupRuntime) -> None:
        self.runtime = runtime
        runtime.middleware_active = True

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> NearDupMiddleware:
        return cls(NearDupRuntime.for_crawler(crawler))

    def _skip_reason(self, request: Request, response: Response) -> str | None:
        if request.meta.get("dont_neardup"):
            return "dont_neardup"
        if response.status != 200:
            return "non_200"
        if not isinstance(response, HtmlResponse):
            return "not_html"
        if len(response.body) > self.runtime.config.limits.max_html_bytes:
            return "html_too_large"
        return None

    async def process_response(
        self, request: Request, response: Response, spider: Spider | None = None
    ) -> Response:
        runtime = self.runtime
        reason = self._skip_reason(request, response)
        if reason is not None:
            runtime.skip("pages", reason)
            return response
        assert isinstance(response, HtmlResponse)
        try:
            outcome = await runtime.check(
                fingerprint_html,
                response.text,
                response.url,
                runtime.params,
                key=response.url,
                source="pages",
            )
        except Exception as e:
            runtime.error("pages", response.url, e)
            return response
        if runtime.record("pages", outcome, response.url):
            assert outcome.match is not None
            runtime.dropped(
                "pages", response.url, outcome.match, request=request, response=response
            )
            if outcome.status == "unchanged":
                raise UnchangedPage(response.url, outcome.match)
            raise NearDuplicatePage(response.url, outcome.match)
        if outcome.fingerprint is not None:
            request.meta["neardup_fingerprint"] = outcome.fingerprint
        return response

    def __repr__(self) -> str:
        return f"<NearDupMiddleware store={self.runtime.store.uri!r}>"
