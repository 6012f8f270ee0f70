"""Versions of the extraction: what an extractor's text is made of before it is fingerprinted.

A store records the version its fingerprints were made with (in its rule), and a crawl on that
store extracts with that version, so a release that improves extraction never compares one
version's text with another's (a recrawled page would turn ``changed``, a copy would be missed).
New stores get their extractor's newest version; ``--reset`` (``NEARDUP_RESET``) starts a store
on it. A store that records no version was made before versions: version 1.

* ``trafilatura``, ``trafilatura-fast``:

  1. trafilatura's text as it is (every store made before version 2: they record none);
  2. dialogs and cookie-consent managers removed from the page first (:mod:`.overlays`): a
     page whose text was its cookie notice gives its article.
* ``resiliparse`` (:mod:`.fast_text`):

  1. resiliparse's reduced HTML cleaned block by block (releases up to 0.2, and every
     resiliparse store that records no version);
  2. the article's region found first (:func:`.fast_text.region_html`), then cleaned as
     version 1; version 1's text where no region keeps 200 characters;
  3. as 2, the region found also where the article is a ``div``'s own text or lines split by
     ``<br>``, cut into sections of one class, or under the page's headline;
  4. as 3, with an article's own footer holding its text kept, and the page's ``html`` and
     ``body`` never removed (WeChat's body has a class naming comments).
"""

from __future__ import annotations

__all__ = ["EXTRACTIONS", "extraction_versions", "latest_extraction", "settled_extraction"]

# every version any extractor has (what a recorded rule may name)
EXTRACTIONS = frozenset({1, 2, 3, 4})
_VERSIONS: dict[str, tuple[int, ...]] = {
    "trafilatura": (1, 2),
    "trafilatura-fast": (1, 2),
    "resiliparse": (1, 2, 3, 4),
}


def extraction_versions(extractor: str) -> tuple[int, ...]:
    """The extraction versions of ``extractor``, oldest first (``(1,)`` for an unknown name:
    the callers check names themselves)."""
    return _VERSIONS.get(extractor, (1,))


def latest_extraction(extractor: str) -> int:
    """The version new stores, batch runs without a store and ``fingerprint`` use."""
    return extraction_versions(extractor)[-1]


def settled_extraction(extractor: str, asked: int) -> int:
    """``asked`` (0: the extractor's newest) as a version ``extractor`` has; :class:`ValueError`
    for one it has not (a rule and a crawl's parameters settle it alike)."""
    if asked == 0:
        return latest_extraction(extractor)
    if asked not in extraction_versions(extractor):
        raise ValueError(
            f"extraction version of {extractor} must be one of "
            f"{list(extraction_versions(extractor))}, not {asked!r}"
        )
    return asked
