"""The extractor setting: resiliparse's path (the ``nearduppipe[resiliparse]`` extra) returns the
article of a realistic portal page without its navigation and link farms, obeys the limits and
skip reasons of trafilatura's path, and keeps a near-copy near; without resiliparse it fails
with the command to install it. ``trafilatura-fast`` (trafilatura's ``fast=True``) obeys the
same limits."""

from __future__ import annotations

import html
import importlib.util
import random
import sys
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nearduppipe import TextLimits, open_store
from nearduppipe.fingerprint.fast_clean import clean
from nearduppipe.fingerprint.fast_text import INSTALL_HINT
from nearduppipe.fingerprint.page import FingerprintParams, fingerprint_html
from nearduppipe.fingerprint.text import (
    EXTRACTORS,
    Extractor,
    ExtractorUnavailable,
    extract,
    extract_text,
    require_extractor,
)

HAVE_RESILIPARSE = importlib.util.find_spec("resiliparse") is not None
needs_resiliparse = pytest.mark.skipif(
    not HAVE_RESILIPARSE, reason=f"resiliparse is not installed ({INSTALL_HINT})"
)

ARTICLE = " ".join(
    f"Sentence number {i} of the article explains how crawlers meet copies of one page."
    for i in range(40)
)
ZH_SENTENCES = [
    "记者从市交通运输局获悉，地铁十二号线一期工程已于昨日完成全部车站主体结构施工。",
    "十二号线一期全长二十八点六公里，共设车站二十一座，其中换乘站七座。",
    "在施工过程中，建设单位采用了盾构掘进、装配式车站等新技术，减少了对周边居民生活的影响。",
    "市交通运输局有关负责人表示，十二号线建成后，通勤时间将由七十分钟缩短到四十分钟左右。",
    "沿线的公交线路也将同步优化调整，新增和调整接驳公交线路十五条，方便市民换乘。",
    "全线车站均设置无障碍电梯、母婴室和自助售票设备，乘客可以使用手机二维码直接进站。",
]
ZH_OTHER = [
    "气象台今天上午发布暴雨蓝色预警信号，预计夜间到明天白天我市大部分地区将出现大到暴雨。",
    "据气象专家分析，此次降雨过程是受副热带高压边缘暖湿气流和北方冷空气共同影响形成的。",
    "防汛指挥部要求各区加强值守，及时转移低洼地区和危旧房屋中的群众，确保人员安全。",
    "城管部门已对全市易积水路段的排水设施进行了检查和疏通，并在重点路段预置抽水设备。",
    "交警部门提醒市民雨天出行注意安全，尽量选择公共交通，途经积水路段时减速慢行。",
    "教育部门通知，如遇红色预警，全市中小学和幼儿园将停课一天，具体安排另行通知。",
]
NAV_WORDS = ["新闻", "财经", "体育", "娱乐", "科技", "汽车", "Video", "App"]


def page(body: str, nav: str = "Home | News | Sports | Contact") -> str:
    """The page of tests/fingerprint/test_text.py."""
    return (
        f"<html><head><title>t</title></head><body><nav>{nav}</nav>"
        f"<article><h1>Title</h1><p>{body}</p></article>"
        "<footer>Copyright 2026 Example Corp. All rights reserved.</footer></body></html>"
    )


def links(rng: random.Random, n: int, prefix: str) -> str:
    return "".join(
        f'<li class="c{i}"><a href="/{prefix}/{rng.randrange(10**6)}.html?pos={i}">'
        f"{rng.choice(NAV_WORDS)}{rng.choice(NAV_WORDS)}频道{i}</a></li>"
        for i in range(n)
    )


def portal(title: str, paragraphs: list[str], seed: int = 1) -> str:
    """A ~45 KB news portal page in the style of benchmarks/pages.py: inline CSS and scripts,
    a top navigation of 60 links, an ad, a byline, captions, comments, two sidebar link lists
    and a footer link farm around the article."""
    rng = random.Random(seed)
    css = "\n".join(
        f".c{i}{{margin:{i % 7}px {i % 5}px;padding:{i % 3}px;color:#{i * 40503 % 0xFFFFFF:06x};"
        f"font-size:{12 + i % 6}px;line-height:1.{i % 9}}}"
        for i in range(120)
    )
    js = "\n".join(
        f"window.__track{i}=function(e){{var d={{id:{i},t:Date.now(),u:location.href}};"
        f"navigator.sendBeacon&&navigator.sendBeacon('/log?e='+e+'&i={i}',JSON.stringify(d));}};"
        for i in range(80)
    )
    body = []
    for i, p in enumerate(paragraphs):
        cut = len(p) // 3
        body.append(
            f"<p><span>{html.escape(p[:cut])}</span><strong>{html.escape(p[cut : cut + 6])}"
            f"</strong>{html.escape(p[cut + 6 :])}</p>"
        )
        if i % 4 == 1:
            body.append(
                f'<figure><img src="/i/{i}.jpg" alt=""><figcaption>图{i} 资料图片</figcaption></figure>'
            )
    comments = "".join(
        f'<div class="cm">网友{rng.randrange(10**4)}:说得好!{i}</div>' for i in range(15)
    )
    return f"""<!DOCTYPE html><html lang="zh-CN"><head><meta charset="utf-8">
<title>{html.escape(title)} - 城市门户网</title><style>{css}</style><script>{js}</script></head>
<body><div id="topbar"><ul>{links(rng, 60, "nav")}</ul></div>
<div class="ad">广告:家电大促,全场五折起 · 限时抢购 · 立即下单</div>
<div class="main"><div class="left"><article><h1>{html.escape(title)}</h1>
<div class="info">2026-11-22 08:00 来源:城市门户网 编辑:张三</div>{"".join(body)}</article>
<div class="comments">{comments}</div></div>
<div class="right"><h3>热门排行</h3><ol>{links(rng, 40, "hot")}</ol>
<h3>推荐阅读</h3><ul>{links(rng, 40, "rec")}</ul></div></div>
<div id="footer"><ul>{links(rng, 100, "site")}</ul>
<p>版权所有 © 2026 城市门户网 · 京ICP备00000000号</p></div></body></html>"""


def article(seed: int, n: int = 12, pool: list[str] = ZH_SENTENCES) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.sample(pool, 3)) for _ in range(n)]


@needs_resiliparse
def test_portal_page_gives_its_article_without_chrome() -> None:
    paragraphs = article(3)
    doc = portal("地铁十二号线主体结构完工", paragraphs)
    assert len(doc) > 40_000
    text = extract_text(doc, extractor="resiliparse")
    assert text is not None
    for p in paragraphs:
        assert p in text
    for chrome in ("频道", "热门排行", "推荐阅读", "版权所有", "ICP", "广告", "网友", "资料图片"):
        assert chrome not in text, chrome
    assert "编辑:张三" not in text and "2026-11-22" not in text  # the byline and date
    assert "\n" not in text  # white space is normalised, as for trafilatura
    # what trafilatura keeps of the same page differs by little more than the title
    reference = extract_text(doc)
    assert reference is not None and abs(len(text) - len(reference)) < 0.05 * len(reference)


@needs_resiliparse
def test_main_text_without_boilerplate() -> None:
    """tests/fingerprint/test_text.py's first check, on the resiliparse path."""
    text = extract_text(page(ARTICLE), extractor="resiliparse")
    assert text is not None and "Sentence number 39" in text
    assert "Copyright" not in text and "Sports" not in text
    assert "\n" not in text


def test_cleaning_drops_navigation_link_farms_and_short_chrome() -> None:
    reduced = "\n\n".join(
        [
            '<a href="/">Home</a> · <a href="/n">News</a> · <a href="/s">Sport</a>',
            "<h1>A title</h1>",
            "<p>Published 2026-11-22 08:00 · 1,024 views</p>",
            "<p>The first paragraph of the article, long enough to be prose and ending well.</p>",
            '<p>See <a href="/x">the report</a> for the figures, which the council published.</p>',
            "<p>Figure 2 file photo</p>",
            "<h3>Most read</h3>",
            "<ol>\n"
            + "\n".join(f'  <li><a href="/{i}">Story {i}</a></li>' for i in range(9))
            + "\n</ol>",
            "<ul>\n"
            + "\n".join(
                f"  <li>Point {i}: a list item of the article that is a full sentence.</li>"
                for i in range(3)
            )
            + "\n</ul>",
            "<p>Copyright © 2026 Example Media. All rights reserved.</p>",
            "<p>The first paragraph of the article, long enough to be prose and ending well.</p>",
        ]
    )
    # the navigation bar, the byline, the caption, the "Most read" list with its heading, the
    # copyright line and the repeated paragraph go; the title stays (a byline between it and the
    # text does not take it), so do a paragraph with a link and a list of sentences
    assert clean(reduced) == [
        "A title",
        "The first paragraph of the article, long enough to be prose and ending well.",
        "See the report for the figures, which the council published.",
        "\n".join(
            f"Point {i}: a list item of the article that is a full sentence." for i in range(3)
        ),
    ]


@pytest.mark.parametrize(
    "extractor",
    ["trafilatura", "trafilatura-fast", pytest.param("resiliparse", marks=needs_resiliparse)],
)
def test_limits_and_reasons(extractor: Extractor) -> None:
    """The checks tests/fingerprint/test_text.py makes of trafilatura's path, and the bound on the tree."""
    assert extract(page(ARTICLE), limits=TextLimits(max_html_bytes=100), extractor=extractor) == (
        None,
        "html_too_large",
        False,
    )
    assert extract("   ", extractor=extractor).reason == "empty_body"
    assert extract("<html><body><div></div></body></html>", extractor=extractor).reason == "no_text"
    assert extract(123, extractor=extractor).reason == "not_text"  # type: ignore[arg-type]
    cut = extract(page(ARTICLE), limits=TextLimits(max_text_chars=50), extractor=extractor)
    assert cut.text is not None and len(cut.text) == 50 and cut.truncated
    assert extract(page(ARTICLE).encode("utf-8"), extractor=extractor).text == extract_text(
        page(ARTICLE), extractor=extractor
    )
    limits = TextLimits(max_tree_size=500)
    many = "<html><body>" + "<p>x</p>" * 1001 + "</body></html>"
    assert extract(many, limits=limits, extractor=extractor).reason == "too_many_elements"
    # parsed, but more paragraphs of text than the tree size: refused, as trafilatura does
    long = "<html><body>" + "".join(f"<p>Paragraph {i} of a page.</p>" for i in range(600))
    assert extract(long, limits=limits, extractor=extractor).reason == "no_text"
    assert extract(long, extractor=extractor).text
    assert all(extract_text(page(ARTICLE), extractor=extractor) for _ in range(6))


@needs_resiliparse
def test_resiliparse_decodes_bytes_by_their_charset() -> None:
    paragraphs = article(5)
    doc = portal("标题", paragraphs).replace('charset="utf-8"', 'charset="gbk"')
    text = extract_text(doc.encode("gbk", errors="xmlcharrefreplace"), extractor="resiliparse")
    assert text is not None and paragraphs[0] in text


@needs_resiliparse
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.one_of(st.text(max_size=400), st.binary(max_size=400)))
def test_resiliparse_never_raises_on_hostile_input(data: str | bytes) -> None:
    doc = "<html><body><p>" + data + "</p>" if isinstance(data, str) else data
    result = extract(doc, extractor="resiliparse")
    assert (result.text is None) == (result.reason is not None)
    assert result.reason in {None, "no_text", "empty_body", "extract_error", "too_many_elements"}


@pytest.mark.parametrize(
    "extractor", ["trafilatura", pytest.param("resiliparse", marks=needs_resiliparse)]
)
def test_near_copy_under_other_chrome_is_near(extractor: Extractor) -> None:
    """One article on the portal and, lightly edited, on a plain page: a near-duplicate under
    either extractor; another article on the same portal is not."""
    params = FingerprintParams(extractor=extractor)
    paragraphs = article(7)
    edited = [*paragraphs[:-1], paragraphs[-1][:-10]]
    plain = (
        "<html><head><title>t</title></head><body><header><nav><a href='/'>首页</a> | "
        "<a href='/n'>新闻</a></nav></header><article><h1>地铁十二号线主体结构完工</h1>"
        + "".join(f"<p>{html.escape(p)}</p>" for p in edited)
        + "</article><footer>© 2026 别的网站</footer></body></html>"
    )
    other = article(8, pool=ZH_OTHER)
    with open_store("memory:") as store:
        first = fingerprint_html(portal("地铁十二号线主体结构完工", paragraphs), "u1", params)
        assert first.fingerprints is not None
        assert store.check_and_add(first.fingerprints, "u1") is None
        distinct = fingerprint_html(portal("另一篇文章", other, seed=2), "u3", params)
        assert distinct.fingerprints is not None
        assert store.check_and_add(distinct.fingerprints, "u3") is None
        copy = fingerprint_html(plain, "u2", params)
        assert copy.fingerprints is not None
        match = store.check_and_add(copy.fingerprints, "u2")
        assert match is not None and match.key == "u1"


def test_missing_resiliparse_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [m for m in sys.modules if m == "resiliparse" or m.startswith("resiliparse.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "resiliparse", None)  # as if the extra were not installed
    for call in (
        lambda: require_extractor("resiliparse"),
        lambda: FingerprintParams(extractor="resiliparse"),
        lambda: extract(page(ARTICLE), extractor="resiliparse"),
    ):
        with pytest.raises(ExtractorUnavailable, match=r"pip install 'nearduppipe\[resiliparse\]'"):
            call()
    assert issubclass(ExtractorUnavailable, ImportError)
    # the other extractors do not need it
    assert extract_text(page(ARTICLE), extractor="trafilatura-fast")
    assert FingerprintParams().extractor == "trafilatura"


def test_unknown_extractor_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown extractor 'readability'"):
        require_extractor("readability")
    with pytest.raises(ValueError, match="trafilatura"):
        FingerprintParams(extractor="readability")  # type: ignore[arg-type]
    assert EXTRACTORS[0] == "trafilatura"


def test_boilerplate_patterns_match_what_the_single_pattern_matched() -> None:
    # fast_clean splits its boilerplate pattern in three for speed (anchored branches, digit-led
    # branches, the rest); the test they make together is the one pattern they came from, on
    # fragments of every branch mixed with case variants (ſ, K, İ, ı), digits and punctuation.
    import re

    from nearduppipe.fingerprint import fast_clean

    original = re.compile(
        r"©|\(c\)\s*\d{4}|copyright|all rights reserved|版权所有|版權所有|icp备|icp證|"
        r"cookies? (?:policy|settings|consent)|(?:we|site) uses? cookies|使用\s*cookie|"
        r"privacy policy|terms of (?:use|service)|隐私政策|用户协议|"
        r"^\W*(?:advertisement|sponsored|ads?\b|广告)|"
        r"share (?:this|on|to)\b|share:|分享到|sign (?:in|up)\b|log ?in\b|^\W*(?:登录|注册)|"
        r"\d[\d,.]*\s*(?:views|reads)\b|阅读\s*\d|\d+\s*次浏览|评论\s*\(?\d|comments?\s*\(\d",
        re.I,
    )
    pieces = [
        *"©()cCoOsSkKiIlLnN 0123456789:,.-*ſKİı版权所有使用隐私政策用户协议分享到阅读评论备證次浏览广告登录注册",
        "copyright", "COPYRIGHT", "all rights reserved", "cookie", "cookies ", "policy", "settings",
        "consent", "we use cookies", "site uses cookies", "privacy policy", "terms of use",
        "terms of service", "(c) 2026", "(C)2026", "icp备", "icp證", "使用 cookie", "share ",
        "this", "on", "to", "share:", "sign ", "in", "up", "log", "login", "log in", "comments (",
        "comment(", "advertisement", "Sponsored", "ads", "ad", " views", " reads", "次浏览",
    ]  # fmt: skip
    rng = random.Random(3)
    texts = ["".join(rng.choice(pieces) for _ in range(rng.randint(1, 8))) for _ in range(60000)]
    matched = 0
    for text in texts:
        expected = original.search(text) is not None
        has_digit = fast_clean._DIGIT_RE.search(text) is not None
        assert fast_clean._boilerplate(text, has_digit) == expected, text
        matched += expected
    assert 0.1 * len(texts) < matched < 0.9 * len(texts)  # both outcomes well represented


@needs_resiliparse
def test_nested_paragraphs_are_read_within_a_budget_and_get_version_1_text() -> None:
    """Version 2 reads each paragraph element's whole text; n nested ones cost n² (a 520 KB
    page of nested blockquotes took 77 s, version 1 0.03 s). Past the budget the region search
    gives up and the page gets version 1's text."""
    from nearduppipe.fingerprint.fast_text import (
        REGION_TEXT_BUDGET,
        main_text,
        region_html,
        require,
    )

    lexbor = require()[4]
    nested = (
        "<html><body>" + "<blockquote>Some words of a paragraph, with commas, long enough. " * 400
    )
    assert region_html(lexbor(nested), REGION_TEXT_BUDGET * len(nested)) is None
    flat = "<html><body>" + "<p>Some words of a paragraph, with commas, long enough.</p>" * 400
    assert region_html(lexbor(flat), REGION_TEXT_BUDGET * len(flat)) is not None
    assert main_text(nested, 10_000, version=2) == main_text(nested, 10_000, version=1)
    assert main_text(nested, 10_000, version=3) == main_text(nested, 10_000, version=1)


@needs_resiliparse
def test_a_page_nested_past_max_depth_skips_the_quadratic_passes(monkeypatch: Any) -> None:
    """Version 3: a page nesting elements more than MAX_DEPTH deep gets all its text without the
    region search (selectolax's parse) and resiliparse's main-content pass, both quadratic in
    depth: 12,000 nested divs took ~37 s, and the size limits let a page nest 200,000 deep
    (benchmarks/deep_pages.py). A page at MAX_DEPTH is read as before; older versions are
    unchanged (their stores' fingerprints)."""
    from nearduppipe.fingerprint import fast_text
    from nearduppipe.fingerprint.fast_text import MAX_DEPTH, main_text, require, too_deep

    article = "<p>A paragraph of the article, with commas, long enough to be one.</p>"

    def nested(depth: int) -> str:  # its p at that depth (html 1, body 2, the divs, section)
        inner = "<div>" * (depth - 4) + f"<section>{article}</section>" + "</div>" * (depth - 4)
        return f"<html><body>{inner}</body></html>"

    parse = require()[3].parse
    assert not too_deep(parse(nested(MAX_DEPTH)))
    assert too_deep(parse(nested(MAX_DEPTH + 1)))
    read = main_text(nested(MAX_DEPTH), 10_000, version=3)
    calls: list[bool] = []
    original = fast_text._cleaned

    def spy(tree: Any, extract: Any, title: Any, main_content: bool) -> list[str]:
        calls.append(main_content)
        return original(tree, extract, title, main_content)

    def no_region(*args: Any) -> None:
        raise AssertionError("the region search ran on a page too deep for it")

    monkeypatch.setattr(fast_text, "_cleaned", spy)
    monkeypatch.setattr(fast_text, "region_html", no_region)
    hostile = "<html><body>" + "<div>" * 20_000 + article * 5 + "</body></html>"
    assert main_text(hostile, 10_000, version=3) == read  # (the article's text, once)
    assert calls == [False]  # one plain pass, no main-content pass
    calls.clear()
    monkeypatch.undo()
    monkeypatch.setattr(fast_text, "_cleaned", spy)
    # version 2, as before: the region's text (too short here), then the main-content pass
    assert main_text(nested(MAX_DEPTH + 1), 10_000, version=2) == read
    assert calls == [False, True]
