"""Extraction: boilerplate goes, limits hold, and every page without text has a reason."""

from __future__ import annotations

from nearduppipe import TextLimits, extract, extract_text

ARTICLE = " ".join(
    f"Sentence number {i} of the article explains how crawlers meet copies of one page."
    for i in range(40)
)


def page(body: str, nav: str = "Home | News | Sports | Contact") -> str:
    return (
        f"<html><head><title>t</title></head><body><nav>{nav}</nav>"
        f"<article><h1>Title</h1><p>{body}</p></article>"
        "<footer>Copyright 2026 Example Corp. All rights reserved.</footer></body></html>"
    )


def test_main_text_without_boilerplate() -> None:
    text = extract_text(page(ARTICLE))
    assert text is not None and "Sentence number 39" in text
    assert "Copyright" not in text and "Sports" not in text
    assert "\n" not in text  # white space is normalised


def test_repeated_pages_are_not_hidden_by_trafilatura_cache() -> None:
    html = page(ARTICLE)
    assert all(extract_text(html) for _ in range(6))


def test_limits_and_reasons() -> None:
    assert extract(page(ARTICLE), limits=TextLimits(max_html_bytes=100)) == (
        None,
        "html_too_large",
        False,
    )
    assert extract("   ").reason == "empty_body"
    assert extract("<html><body><div></div></body></html>").reason == "no_text"
    assert extract(123).reason == "not_text"  # type: ignore[arg-type]
    cut = extract(page(ARTICLE), limits=TextLimits(max_text_chars=50))
    assert cut.text is not None and len(cut.text) == 50 and cut.truncated
    assert extract(page(ARTICLE).encode("utf-8")).text == extract_text(page(ARTICLE))
