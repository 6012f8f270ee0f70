"""The downloader middleware sends a worker the response's body and encoding, decoded there
(nearduppipe/runtime/body.py): the crawl process never decodes a page it drops, and the worker
decodes exactly what ``response.text`` would be."""

from __future__ import annotations

from typing import Any

import pytest
import scrapy
import scrapy.http.response.text as scrapy_text
from scrapy.http import HtmlResponse

from nearduppipe.fingerprint.page import FingerprintParams, fingerprint_html
from nearduppipe.middlewares import NearDuplicatePage
from nearduppipe.runtime.body import fingerprint_body, page_call

from .support.adapters import ARTICLE, html, middleware, page, respond, run, stats

CAFE = "Le café du port ouvre à l'aube ; les pêcheurs y déjeunent avant la marée. " * 12
CHINESE = "港务局计划疏浚北部航道，以便大型货船在退潮时也能安全进港。" * 12


def _cases() -> dict[str, tuple[dict[str, Any], bool]]:
    """name: (HtmlResponse arguments, whether the body goes to the worker undecoded)."""
    bom = b"\xef\xbb\xbf" + page(CAFE).encode("utf-8")
    return {
        "encoding given": ({"body": page(CAFE).encode("utf-8"), "encoding": "utf-8"}, True),
        "header charset": (
            {
                "body": page(CAFE).encode("cp1252"),
                "headers": {"Content-Type": "text/html; charset=windows-1252"},
            },
            True,
        ),
        "meta charset": (
            {
                "body": ('<html><head><meta charset="gb18030"></head>' + page(CHINESE)[6:]).encode(
                    "gb18030"
                ),
                "headers": {"Content-Type": "text/html"},
            },
            True,
        ),
        "bom": ({"body": bom, "headers": {"Content-Type": "text/html"}}, True),
        "wrong charset": (
            {
                "body": page(CAFE).encode("latin-1"),
                "headers": {"Content-Type": "text/html; charset=utf-8"},
            },
            True,
        ),
        # nothing declared: Scrapy infers the encoding by decoding the body, so the text is
        # there already and is sent as it is
        "inferred": (
            {"body": page(CAFE).encode("cp1252"), "headers": {"Content-Type": "text/html"}},
            False,
        ),
    }


@pytest.mark.parametrize("case", list(_cases()))
def test_the_worker_decodes_what_response_text_is(case: str) -> None:
    kwargs, undecoded = _cases()[case]
    params = FingerprintParams()
    url = "http://a/1"
    response = HtmlResponse(url, **kwargs)
    fn, args = page_call(response, url, params, pickled=True)
    assert (fn is fingerprint_body) == undecoded
    expected = fingerprint_html(HtmlResponse(url, **kwargs).text, url, params)
    assert fn(*args) == expected
    assert (expected.skipped == "bad_encoding") == (case == "wrong charset")  # (U+FFFD in it)
    # decoded already (MetaRefreshMiddleware reads the text first): the bytes all the same,
    # unless the encoding was inferred
    decoded = HtmlResponse(url, **kwargs)
    assert decoded.text == HtmlResponse(url, **kwargs).text
    fn, args = page_call(decoded, url, params, pickled=True)
    assert (fn is fingerprint_body) == undecoded and fn(*args) == expected
    # in this process: the text as it is, never the bytes
    fn, args = page_call(HtmlResponse(url, **kwargs), url, params, pickled=False)
    assert fn is fingerprint_html and fn(*args) == expected


def test_a_response_class_with_its_own_text_sends_its_text() -> None:
    class Rewritten(HtmlResponse):
        @property
        def text(self) -> str:
            return page(ARTICLE)

    params = FingerprintParams()
    response = Rewritten("http://a/1", body=b"<html></html>", encoding="utf-8")
    fn, args = page_call(response, response.url, params, pickled=True)
    assert fn is fingerprint_html and args[0] == page(ARTICLE)


def test_a_page_judged_in_a_worker_is_not_decoded_in_the_crawl_process(
    make_crawler: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    decoded: list[str] = []
    decode = scrapy_text.html_to_unicode

    def counted(*args: Any, **kwargs: Any) -> Any:
        decoded.append(args[0])
        return decode(*args, **kwargs)

    mw = middleware(make_crawler, NEARDUP_WORKERS=1)
    assert mw.runtime.executor.processes is not None
    monkeypatch.setattr(scrapy_text, "html_to_unicode", counted)
    kept = html("http://a/1", page(ARTICLE))
    assert respond(mw, kept) is kept
    with pytest.raises(NearDuplicatePage):
        respond(mw, html("http://b/1", page(ARTICLE, "Contact Careers")))
    assert decoded == []  # neither page was decoded here
    assert kept.text == page(ARTICLE)  # (the spider's first ask decodes it, as ever)
    assert stats(mw)["neardup/dropped"] == 1


def test_both_executors_give_a_page_the_same_fingerprints(make_crawler: Any) -> None:
    kwargs, _ = _cases()["meta charset"]
    found = []
    for executor in ("process", "thread"):
        mw = middleware(make_crawler, NEARDUP_EXECUTOR=executor, NEARDUP_WORKERS=1)
        request = scrapy.Request("http://a/zh")
        run(mw.process_response(request, HtmlResponse("http://a/zh", **kwargs)))
        found.append(request.meta["neardup_fingerprint"])
    expected = fingerprint_html(
        HtmlResponse("http://a/zh", **kwargs).text, "http://a/zh", FingerprintParams()
    )
    assert found == [expected.fingerprint] * 2
