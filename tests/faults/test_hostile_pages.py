"""Hostile and odd pages through the real middleware: each has one defined outcome and stat, the
page is always passed on (never lost), and nothing crashes."""

from __future__ import annotations

from typing import Any

import pytest
from scrapy.http import HtmlResponse, Response, TextResponse

from ..support.adapters import ARTICLE, html, middleware, page, respond, stats

ZH = "城市轨道交通十二号线一期工程已完成全部车站主体结构施工,预计明年六月开通初期运营。" * 8
BOMB = (
    '<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
    + "".join(
        f'<!ENTITY lol{i} "{("&lol" + (str(i - 1) if i > 2 else "") + ";") * 10}">'
        for i in range(2, 10)
    )
    + "]><html><body><p>&lol9;</p></body></html>"
)


def cases() -> dict[str, tuple[Response, str]]:
    gbk = page(ZH).encode("gbk")
    return {
        "50 MB page": (
            HtmlResponse("http://h/big", body=b"<p>" + b"x" * 50_000_000 + b"</p>"),
            "skipped/html_too_large",
        ),
        "deep nesting": (
            html("http://h/deep", "<div>" * 150_000 + ARTICLE + "</div>" * 150_000),
            "skipped/too_many_elements",
        ),
        "entity bomb": (html("http://h/bomb", BOMB), "skipped/no_text"),
        "binary as text/html": (
            HtmlResponse(
                "http://h/bin", body=bytes(range(256)) * 400, headers={"Content-Type": "text/html"}
            ),
            "skipped/no_text",
        ),
        "wrong charset": (
            HtmlResponse(
                "http://h/gbk-as-utf8",
                body=gbk,
                headers={"Content-Type": "text/html; charset=utf-8"},
            ),
            "skipped/bad_encoding",
        ),
        "missing charset": (
            HtmlResponse(
                "http://h/gbk-no-charset", body=gbk, headers={"Content-Type": "text/html"}
            ),
            "checked",
        ),
        "right charset": (
            HtmlResponse(
                "http://h/gbk", body=gbk, headers={"Content-Type": "text/html; charset=gbk"}
            ),
            "checked",
        ),
        "mixed scripts": (
            html(
                "http://h/mixed",
                page(ZH[:150] + " " + ARTICLE[:300] + " 東京タワーの展望台から見る夜景"),
            ),
            "checked",
        ),
        "empty body": (html("http://h/empty", ""), "skipped/empty_body"),
        "no main text": (
            html(
                "http://h/chrome",
                "<html><body><nav>Home | About</nav><footer>© 2026</footer></body></html>",
            ),
            "skipped/too_short",
        ),
        "short text": (html("http://h/short", page("Only a few words here.")), "skipped/too_short"),
        "404": (html("http://h/404", page(ARTICLE), status=404), "skipped/non_200"),
        "json": (
            TextResponse("http://h/api", body=b'{"a": [1, 2, 3]}', encoding="utf-8"),
            "skipped/not_html",
        ),
        "image": (
            Response("http://h/img.png", body=b"\x89PNG\r\n\x1a\n" + b"\x00" * 100),
            "skipped/not_html",
        ),
    }


@pytest.mark.parametrize("name", list(cases()))
def test_hostile_page_has_a_defined_outcome(make_crawler: Any, name: str) -> None:
    response, stat = cases()[name]
    mw = middleware(make_crawler)
    assert respond(mw, response) is response  # passed on, never lost
    got = {
        k.removeprefix("neardup/"): v
        for k, v in stats(mw).items()
        if not k.startswith("neardup/store_size")
    }
    expected = {stat: 1} if stat != "checked" else {"checked": 1, "unique": 1}
    assert got == {"responses": 1, **expected}, got  # (every response seen is accounted for)
