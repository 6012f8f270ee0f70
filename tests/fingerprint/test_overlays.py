"""Extraction version 2 of trafilatura (fingerprint/overlays.py): dialogs and consent managers
leave the page before trafilatura reads it, on pages shaped as the real ones that failed
(nbcnews.com's OneTrust notice, EFF's staff letters in modals, a Chinese portal's sign-up
dialog and cookie bar); the article stays; version 1 is unchanged for stores that hold it."""

from __future__ import annotations

import pytest

from nearduppipe import extract_text
from nearduppipe.fingerprint.overlays import without_overlays
from nearduppipe.fingerprint.page import FingerprintParams, fingerprint_html
from nearduppipe.fingerprint.rule import Rule
from nearduppipe.fingerprint.versions import latest_extraction

ARTICLE = [
    f"Paragraph {i} of the report says how the council will repair the river bridge in spring, "
    "and what the closure means for the buses that cross it every morning."
    for i in range(6)
]
ARTICLE_ZH = [
    f"第{i}段：市政府今天宣布，老城区的河道整治工程将在明年春天开工，"
    "工程期间沿河的公交线路会临时改道，居民出行需要提前规划路线。"
    for i in range(6)
]
NOTICE = " ".join(
    f"Section {i} of this Cookie Notice explains how we and our partners, including advertisers "
    "and vendors, use cookies and similar tracking technologies when you use our services."
    for i in range(40)
)  # (longer than the article, as nbcnews.com's 10,000 characters)


def onetrust_page(paragraphs: list[str], title: str = "Bridge repairs") -> str:
    body = "".join(f"<p>{p}</p>" for p in paragraphs)
    return (
        f"<html><head><title>{title}</title></head><body>"
        "<nav><a href='/'>Home</a> <a href='/news'>News</a></nav>"
        f"<div class='story'><h1>{title}</h1>{body}</div>"
        '<div id="onetrust-consent-sdk"><div class="onetrust-pc-dark-filter"></div>'
        '<div id="onetrust-pc-sdk" role="region"><div role="alertdialog" aria-modal="true">'
        f"<h2>Cookie Notice</h2><p>{NOTICE}</p></div></div></div>"
        "</body></html>"
    )


def test_a_consent_notice_longer_than_the_article_is_not_the_text() -> None:
    html = onetrust_page(ARTICLE)
    old = extract_text(html, version=1)
    new = extract_text(html, version=2)
    assert old is not None and "Cookie Notice" in old  # the fault: trafilatura took the notice
    assert new is not None and "Cookie Notice" not in new
    assert "Paragraph 5 of the report" in new
    # two articles in the site's chrome: one text under version 1, two under version 2
    other = onetrust_page([p.replace("bridge", "library") for p in ARTICLE], "Library hours")
    assert extract_text(other, version=1) == old
    assert extract_text(other, version=2) != new


def test_modal_dialogs_and_named_banners_go_the_article_and_text_after_them_stay() -> None:
    body = "".join(f"<p>{p}</p>" for p in ARTICLE_ZH)
    letters = "".join(
        f'<div id="Letter{i}" class="picture-modal modal fade" role="dialog">'
        f"<p>{'员工来信：这一年我们做了很多事情，感谢每一位支持者。' * 12}</p></div>"
        for i in range(4)
    )
    html = (
        "<html><head><title>河道整治</title></head><body>"
        f"<div class='main'><h1>河道整治</h1>{body}"
        '<div class="cookie-bar">本网站使用Cookie以改善您的浏览体验，继续浏览即表示同意。</div>'
        "<p>记者 王明 报道。这是文章的最后一段，说明工程的预算和工期安排都已经公布。</p></div>"
        f"{letters}"
        "<dialog open><p>订阅我们的新闻简报，每周一次，随时可以退订，请输入您的邮箱地址。</p></dialog>"
        "</body></html>"
    )
    new = extract_text(html, version=2)
    assert new is not None
    assert "员工来信" not in new and "新闻简报" not in new and "Cookie" not in new
    assert "第5段" in new and "预算和工期" in new  # the tail after the cookie bar stays


def test_what_is_not_an_overlay_stays() -> None:
    """A dialog that holds the headline (an article shown in a modal), a class that says
    "cookie" without a banner word (a recipe), and a page that names no overlay: the last is
    handed to trafilatura as it came."""
    recipe = "".join(f"<p>{p}</p>" for p in ARTICLE)
    html = (
        "<html><head><title>Bridge repairs</title></head><body>"
        f'<div role="dialog" aria-modal="true"><h1>Bridge repairs</h1>{recipe}</div>'
        '<div class="cookie-recipe"><p>Oatmeal cookie recipe: butter, sugar, oats, flour, '
        "and a pinch of salt, baked for twelve minutes until the edges turn golden.</p></div>"
        "</body></html>"
    )
    new = extract_text(html, version=2)
    assert new is not None and "Paragraph 5 of the report" in new
    assert new == extract_text(html, version=1)  # nothing was taken out
    plain = "<html><body><article>" + recipe + "</article></body></html>"
    assert without_overlays(plain) is plain
    assert extract_text(plain, version=2) == extract_text(plain, version=1)
    raw = plain.encode()
    assert without_overlays(raw) is raw


@pytest.mark.parametrize("html", ["<dialog", "<div role=dialog>", b"\xff\xfe<dialog>", ""])
def test_broken_pages_give_a_text_or_a_reason(html: str | bytes) -> None:
    assert extract_text(html, version=2) in (None, extract_text(html, version=1))


def test_new_stores_take_version_2_and_its_fingerprints_differ_from_version_1() -> None:
    """A store records the version (versions.py): one made before version 2 records none and
    is crawled with version 1, so its pages keep their fingerprints."""
    assert latest_extraction("trafilatura") == latest_extraction("trafilatura-fast") == 2
    assert Rule().extraction == 2 and Rule().as_dict()["extraction"] == 2
    assert Rule.from_dict({"radius": 10, "similarity": 0.93}).extraction == 1
    html = onetrust_page(ARTICLE)
    v1 = fingerprint_html(html, None, FingerprintParams(extraction=1)).fingerprints
    v2 = fingerprint_html(html, None, FingerprintParams()).fingerprints
    assert v1 is not None and v2 is not None and v1 != v2


ARTICLE_PARAGRAPHS = "".join(f"<p>{p}</p>" for p in ARTICLE)


@pytest.mark.parametrize(
    "page",
    [
        # (the review's cases: class tokens and wrappers that are not overlays)
        f"<div class='site consent-given'><h2>Bridge</h2>{ARTICLE_PARAGRAPHS}</div>",
        f"<article class='post tag-gdpr'><h2>Bridge</h2>{ARTICLE_PARAGRAPHS}</article>",
        f"<main class='has-gdpr-banner'>{ARTICLE_PARAGRAPHS}</main>",
        f"<h1>Bridge</h1><article class='post tag-cookie-policy'>{ARTICLE_PARAGRAPHS}</article>",
        f"<div aria-modal='true' class='app'><h2>Bridge</h2>{ARTICLE_PARAGRAPHS}</div>",
        f"<div class='cookie-banner-visible'><h2>Bridge</h2>{ARTICLE_PARAGRAPHS}</div>"
        "<div class='cookie-banner'>We use cookies.</div>",
    ],
)
def test_an_article_named_or_wrapped_like_an_overlay_stays(page: str) -> None:
    """An ``<article>``/``<main>`` is never taken, and a dialog or generic consent name that holds
    half of the page's text is a wrapper, not an overlay."""
    html = f"<html><head><title>Bridge</title></head><body>{page}</body></html>"
    new = extract_text(html, version=2)
    assert new is not None and "Paragraph 5 of the report" in new
    old = extract_text(html, version=1)
    assert old is not None and "Paragraph 5 of the report" in old


def test_the_scan_of_a_hostile_page_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """4.9 MB of "cookie " without a quote: every occurrence looked back through the whole page
    (51 s of CPU, past the crawl's page time limit). Now at most _MAX_HITS occurrences per word,
    each within _LOOKBACK characters."""
    from nearduppipe.fingerprint import overlays

    calls = []
    real = overlays._in_id_or_class
    monkeypatch.setattr(
        overlays, "_in_id_or_class", lambda lower, i: calls.append(i) or real(lower, i)
    )
    page = "<html><body><p>" + "cookie " * 700_000 + "</p></body></html>"
    assert overlays._named_spellings(page) == set()
    assert 0 < len(calls) <= overlays._MAX_HITS * len(overlays._WORDS)
    assert overlays.without_overlays(page) is page


@pytest.mark.parametrize(
    "opening",
    [
        "<div class='modal fade' role='dialog'>",
        "<div role='dialog' aria-hidden='true'>",
        "<div role='dialog' style='display: none'>",
        "<dialog>",
    ],
)
def test_a_hidden_dialog_goes_even_when_it_holds_most_of_the_text(opening: str) -> None:
    """A letter behind a button (eff.org) is longer than the page: hidden until opened, it is
    not the page, whatever its share of the text."""
    closing = "</dialog>" if opening == "<dialog>" else "</div>"
    html = (
        "<html><head><title>Bridge</title></head><body>"
        f"<div class='story'><h2>Bridge</h2>{ARTICLE_PARAGRAPHS}</div>"
        f"{opening}<p>{NOTICE}</p>{closing}</body></html>"
    )
    new = extract_text(html, version=2)
    assert new is not None and "Paragraph 5 of the report" in new and "Cookie Notice" not in new


def test_a_shown_app_shell_stays_beside_a_large_inline_script() -> None:
    """The half-of-the-page rule counts text a reader sees: 200 KB of inline state in the head
    does not make the app shell's article small."""
    state = '{"items": [' + ",".join(f'"item {i} of the state"' for i in range(8000)) + "]}"
    html = (
        f"<html><head><title>Bridge</title><script>window.STATE = {state};</script></head><body>"
        f"<div aria-modal='true' class='app'><h2>Bridge</h2>{ARTICLE_PARAGRAPHS}</div>"
        "</body></html>"
    )
    new = extract_text(html, version=2)
    assert new is not None and "Paragraph 5 of the report" in new
