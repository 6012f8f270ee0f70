"""What the downloader middleware sends a worker process to fingerprint: the response's body
and encoding, decoded in the worker, rather than ``response.text`` decoded in the crawl process.

Scrapy decodes a response's body the first time something asks for ``response.text`` and keeps
the string. Sending that string to a worker costs the crawl process the decoding and then its
UTF-8 encoding again, to pickle it (on the real set's pages, 104 KB on average: 0.21 ms and
0.14 ms of CPU per page, on the crawl's busiest process); the body's bytes pickle as they are
(0.01 ms). The worker decodes them as ``TextResponse.text`` does: ``html_to_unicode`` with the
response's encoding. A page the middleware drops is then never decoded in the crawl process;
one that reaches the spider is decoded there only if something asks for its text, as without
nearduppipe.

A page whose text was decoded already from a declared encoding (Scrapy's
``MetaRefreshMiddleware``, on by default, reads every HTML response's text before this
middleware) is sent as bytes all the same: decoding it again in the worker (0.06 ms) costs less
than encoding the text to pickle it. The string is sent when the text was decoded with an
encoding inferred from the body (found by decoding it, with a fallback that a declared charset
would name differently), when the response's class has a ``text`` of its own, or when the work
runs on the crawl's own threads (``NEARDUP_EXECUTOR = "thread"``: nothing to pickle).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from scrapy.http import TextResponse
from w3lib.encoding import html_to_unicode

from ..fingerprint.page import Fingerprinted, FingerprintParams, fingerprint_html

__all__ = ["fingerprint_body", "page_call"]

_TEXT = TextResponse.text  # (the property: a subclass that overrides it keeps its own)


def fingerprint_body(
    body: bytes, encoding: str, url: str | None, params: FingerprintParams
) -> Fingerprinted:
    """In a worker: ``fingerprint_html`` of the text ``TextResponse.text`` would give."""
    return fingerprint_html(html_to_unicode(f"charset={encoding}", body)[1], url, params)


def page_call(
    response: TextResponse, url: str, params: FingerprintParams, *, pickled: bool
) -> tuple[Callable[..., Fingerprinted], tuple[Any, ...]]:
    """The function and arguments that fingerprint ``response``'s page (``pickled``: they go to
    a worker process)."""
    if pickled and type(response).text is _TEXT:
        encoding = response.encoding  # (an inferred one decodes the body: then it is cached)
        declared = getattr(response, "_declared_encoding", None)
        if getattr(response, "_cached_ubody", "") is None or (
            # decoded already (Scrapy's MetaRefreshMiddleware reads every HTML response's
            # text), but from a declared encoding: TextResponse.text's own line, again
            declared is not None and declared() is not None
        ):
            return fingerprint_body, (response.body, encoding, url, params)
    return fingerprint_html, (response.text, url, params)
