"""HTML → main text, with hard bounds on what one page may cost.

Boilerplate (navigation, ads, related links, cookie banners) is what makes two copies of one
article look different to an exact hash, so it must be gone before fingerprinting. An extractor
does that: trafilatura (the default), trafilatura without its fallback extractors
(``"trafilatura-fast"``, its ``fast=True``), or resiliparse with nearduppipe's cleaning
(``"resiliparse"``, the ``nearduppipe[resiliparse]`` extra: :mod:`.fast_text`). This module adds
what every extractor shares: the limits a crawler of untrusted pages needs, a reason for every
page that yields no text (so callers can count skips instead of guessing), and the white space
normalisation. Fingerprints of texts from two extractors are not comparable: one store, one
extractor.
"""

from __future__ import annotations

import functools
from configparser import ConfigParser
from dataclasses import dataclass
from typing import Literal, NamedTuple, get_args

import trafilatura
from trafilatura.settings import use_config

from . import fast_text
from .fast_text import ExtractorUnavailable
from .overlays import without_overlays
from .versions import latest_extraction

__all__ = [
    "EXTRACTORS",
    "Extraction",
    "Extractor",
    "ExtractorUnavailable",
    "TextLimits",
    "extract",
    "extract_text",
    "normalise_whitespace",
    "require_extractor",
]

Extractor = Literal["trafilatura", "trafilatura-fast", "resiliparse"]
EXTRACTORS: tuple[Extractor, ...] = get_args(Extractor)
DEFAULT_EXTRACTOR: Extractor = "trafilatura"


@dataclass(frozen=True)
class TextLimits:
    """Bounds on the work spent on one page.

    ``max_html_bytes``: larger documents are refused (not parsed), so a 50 MB page costs nothing.
    ``max_text_chars``: extracted text is cut to this many characters before tokenising.
    ``max_tree_size``: trafilatura gives up on documents with more elements than this, and pages
    with more than four times as many tags are refused unparsed.
    """

    max_html_bytes: int = 5_000_000
    max_text_chars: int = 200_000
    max_tree_size: int = 50_000

    def __post_init__(self) -> None:
        for name in ("max_html_bytes", "max_text_chars", "max_tree_size"):
            if getattr(self, name) <= 0:
                raise ValueError(f"TextLimits.{name} must be a positive integer")


DEFAULT_LIMITS = TextLimits()


class Extraction(NamedTuple):
    """The text of a page, or ``None`` with the reason (``html_too_large``, ``no_text``...)."""

    text: str | None
    reason: str | None = None
    truncated: bool = False


def normalise_whitespace(text: str) -> str:
    """Collapse runs of white space so that re-wrapped copies of a text compare equal.

    ``str.split()`` splits at exactly the characters ``\\s`` matches (``str.isspace``), so
    this is ``re.sub(r"\\s+", " ", text).strip()``, at a third of its cost."""
    return " ".join(text.split())


@functools.cache
def _trafilatura_config(limits: TextLimits) -> ConfigParser:
    config: ConfigParser = use_config()  # a fresh copy of trafilatura's defaults
    config["DEFAULT"]["MAX_TREE_SIZE"] = str(limits.max_tree_size)
    config["DEFAULT"]["MAX_FILE_SIZE"] = str(limits.max_html_bytes)
    config["DEFAULT"]["EXTRACTION_TIMEOUT"] = "0"  # signal-based timeouts break in threads
    return config


def require_extractor(name: str) -> Extractor:
    """``name`` as an :data:`Extractor`, checked at start-up: :class:`ValueError` for an unknown
    name, :class:`ExtractorUnavailable` (an ``ImportError`` naming the extra to install) when
    its package is missing."""
    if name not in EXTRACTORS:
        raise ValueError(
            f"unknown extractor {name!r}: use one of " + ", ".join(repr(e) for e in EXTRACTORS)
        )
    if name == "resiliparse":
        fast_text.require()
    return name


def extract(
    html: str | bytes,
    url: str | None = None,
    limits: TextLimits = DEFAULT_LIMITS,
    extractor: Extractor = DEFAULT_EXTRACTOR,
    version: int | None = None,
) -> Extraction:
    """Extract the main text of ``html``; never raises for bad input, returns a reason instead.

    ``version``: the extraction version (:mod:`.versions`; a store's own, to compare like with
    like; ``None``: the extractor's newest). Raises only for a bad ``extractor`` (see
    :func:`require_extractor`): that is configuration.
    """
    require_extractor(extractor)
    if version is None:
        version = latest_extraction(extractor)
    if not isinstance(html, (str, bytes)):
        return Extraction(None, "not_text")
    if len(html) > limits.max_html_bytes:  # bytes, or characters for an already decoded page
        return Extraction(None, "html_too_large")
    if not html.strip():
        return Extraction(None, "empty_body")
    # Every element costs at least one '<': a cheap bound on the tree before parsing it (a page
    # of 200,000 tiny paragraphs costs trafilatura seconds even though it ends up refused).
    tags = html.count("<") if isinstance(html, str) else html.count(b"<")
    if tags > 4 * limits.max_tree_size:
        return Extraction(None, "too_many_elements")
    try:
        if extractor == "resiliparse":
            text = fast_text.main_text(html, limits.max_tree_size, version)
        else:
            text = trafilatura.extract(
                without_overlays(html, limits.max_html_bytes) if version >= 2 else html,
                url=url,
                fast=extractor == "trafilatura-fast",  # no fallback extractors
                include_comments=False,
                include_tables=True,
                deduplicate=False,  # trafilatura's own process-global LRU would hide re-seen pages
                output_format="txt",
                config=_trafilatura_config(limits),
            )
    except ExtractorUnavailable:
        raise
    except Exception:  # lxml, trafilatura and resiliparse raise many types on hostile input
        return Extraction(None, "extract_error")
    if not text:
        return Extraction(None, "no_text")
    text = normalise_whitespace(text)
    if not text:
        return Extraction(None, "no_text")
    if len(text) > limits.max_text_chars:
        return Extraction(text[: limits.max_text_chars], None, truncated=True)
    return Extraction(text)


def extract_text(
    html: str | bytes,
    url: str | None = None,
    limits: TextLimits = DEFAULT_LIMITS,
    extractor: Extractor = DEFAULT_EXTRACTOR,
    version: int | None = None,
) -> str | None:
    """Main text of a page with boilerplate removed, or ``None`` when there is none to use."""
    return extract(html, url, limits, extractor, version).text
