"""Fingerprints as one short string an item can carry (``NEARDUP_FINGERPRINT_FIELD``), so that a
batch job (``nearduppipe dedup``) uses what the crawl computed instead of extracting every page a
second time (extraction is almost all of the cost).

Format 1, ``nd1:<source>:<settings>:<fp>:<wide>``, five fields separated by ``:``::

    nd1:trafilatura:3f1c09a2:8d0b5e6c1f2a3b4c:<128 hex digits>

* ``nd1``: the format and the fingerprint algorithm (SimHash over xxh3 features, the wide words
  by splitmix64: ``fingerprint/simhash.py``). A change to either is a new version, which this
  module refuses by name rather than misreads.
* ``source``: where the text came from: the extractor's name (``trafilatura``,
  ``trafilatura-fast``, ``resiliparse``) for a page's HTML, or ``text`` for a text field (no
  extractor ran, so the value compares with any run's fingerprints of the same text).
* ``settings``: 8 hex digits, xxh3 of every setting a fingerprint's value depends on besides
  the extractor: the extraction version for a page's HTML (from version 2 on), the feature
  settings (all of :class:`~.features.FeatureConfig`: weighting,
  sublinear tf, shingle, top k, stop words and their list, minimum token length, segmenter) and
  ``max_text_chars`` (the text is cut there). Settings that only decide *whether* a page is
  fingerprinted (minimum text length, HTML size and tree limits) or what is done with the
  value (similarity, radius, scope: the value is the page's own, never scope-masked) are left
  out, so changing them does not make earlier values unusable.
* ``fp``: the 64-bit SimHash as 16 hex digits, exactly the value logs, reports and the store
  show, and the whole of the earlier form.
* ``wide``: the 512-bit SimHash as 128 hex digits, most significant first.

Why hexadecimal rather than base64url (96 characters instead of 150): the 64-bit part reads and
greps as the same 16 digits everywhere else, any tool can parse it, and in the gzip or zstd
feeds a batch job reads the difference is a few bytes per record. The earlier form, 16 hex
digits of the 64-bit value alone, is still read: a 64-bit fingerprint without a wide one and
without settings (:data:`LEGACY`).
"""

from __future__ import annotations

import dataclasses
import functools
import re
from typing import NamedTuple

import xxhash

from ..errors import NearDupError
from .features import FeatureConfig
from .page import FingerprintParams
from .rule import Fingerprints
from .versions import extraction_versions

__all__ = [
    "FORMAT",
    "LEGACY",
    "Compact",
    "CompactFormError",
    "IncomparableFingerprint",
    "check_comparable",
    "decode",
    "encode",
    "encode_for",
    "is_compact",
    "settings_digest",
]

FORMAT = "nd1"
LEGACY = 0  # Compact.version of a 16-hex value of an earlier release
TEXT_SOURCE = "text"  # the source of fingerprints made from a text field, not from HTML
_SOURCES = frozenset({"trafilatura", "trafilatura-fast", "resiliparse", TEXT_SOURCE})
_VERSIONED = re.compile(r"nd(\d+):")
_ND1 = re.compile(
    r"nd1:([a-z][a-z0-9-]{0,31}):([0-9a-f]{8}):([0-9a-f]{16}):([0-9a-f]{128})", re.IGNORECASE
)
_HEX16 = re.compile(r"[0-9a-f]{16}", re.IGNORECASE)
_SHOWN = 60  # characters of a bad value quoted in an error


class CompactFormError(NearDupError, ValueError):
    """A value that is not a fingerprint this release can read: malformed, or of another
    format version (the message says which)."""


class IncomparableFingerprint(CompactFormError):
    """A well-formed value made with another extractor or other feature settings than the
    run that reads it: comparing the two would be meaningless, so it is refused.
    ``extraction``: the other extraction version it was made with, when that is the one
    difference."""

    extraction: int | None = None


class Compact(NamedTuple):
    """A decoded value: the fingerprints, where their text came from and the settings digest
    (both ``None`` for the earlier 16-hex form, ``version`` :data:`LEGACY`)."""

    fingerprints: Fingerprints
    source: str | None
    settings: str | None
    version: int = 1


@functools.lru_cache(maxsize=64)
def _digest(features: FeatureConfig, max_text_chars: int, extraction: int = 1) -> str:
    words = xxhash.xxh3_64_hexdigest("\n".join(sorted(features.stop_words)).encode("utf-8"))
    described = ";".join(
        (
            f"weighting={features.weighting}",
            f"sublinear_tf={int(features.sublinear_tf)}",
            f"shingle={features.shingle}",
            f"top_k={features.top_k or 0}",
            f"drop_stop_words={int(features.drop_stop_words)}",
            f"stop_words={words}",
            f"min_token_chars={features.min_token_chars}",
            f"segmenter={features.segmenter}",
            f"max_text_chars={max_text_chars}",
        )
    )
    if extraction != 1:  # (version 1's digests are those of releases before versions)
        described += f";extraction={extraction}"
    return xxhash.xxh3_64_hexdigest(described.encode("utf-8"))[:8]


def _what_digests(source: str | None) -> str:
    return "feature settings" if source == TEXT_SOURCE else "feature settings or extraction version"


def settings_digest(params: FingerprintParams, *, from_text: bool = False) -> str:
    """The 8 hex digits naming the settings a fingerprint's value depends on (module doc); the
    extraction version counts for a page's HTML only (no extraction touched a text field)."""
    extraction = 1 if from_text else params.extraction
    return _digest(params.features, params.limits.max_text_chars, extraction)


def encode(fps: Fingerprints, source: str, settings: str) -> str:
    """The format-1 string of ``fps`` (both fingerprints required) made from ``source``'s text
    under the settings ``settings`` (:func:`settings_digest`)."""
    if source not in _SOURCES:
        raise ValueError(f"unknown fingerprint source {source!r}")
    if not re.fullmatch(r"[0-9a-f]{8}", settings):
        raise ValueError(f"a settings digest is 8 hex digits, not {settings!r}")
    fp, wide = fps
    if not isinstance(fp, int) or not 0 <= fp < 1 << 64:
        raise ValueError("fingerprint must be an integer in [0, 2**64)")
    if wide is None or not isinstance(wide, int) or not 0 <= wide < 1 << 512:
        raise ValueError("format 1 carries a wide fingerprint: an integer in [0, 2**512)")
    return f"{FORMAT}:{source}:{settings}:{fp:016x}:{wide:0128x}"


def encode_for(fps: Fingerprints, params: FingerprintParams, *, from_text: bool) -> str:
    """What an item carries for fingerprints computed with ``params``: from a text field
    (``from_text``) or from HTML by ``params.extractor``. Fingerprints without a wide one
    (none are made today) get the earlier 16-hex form, which claims nothing about settings."""
    if fps.wide is None:
        return f"{fps.fp:016x}"
    source = TEXT_SOURCE if from_text else params.extractor
    return encode(fps, source, settings_digest(params, from_text=from_text))


def _shown(value: str) -> str:
    return repr(value if len(value) <= _SHOWN else value[:_SHOWN] + "…")


def is_compact(value: object) -> bool:
    """Whether ``value`` claims to be a fingerprint of this package: ``nd<N>:…`` of any version,
    or the 16-hex form. Other values (a field of the same name holding something else) are
    not fingerprints, and callers may ignore them; :func:`decode` refuses them."""
    return isinstance(value, str) and (
        _VERSIONED.match(value) is not None or _HEX16.fullmatch(value) is not None
    )


def decode(value: object) -> Compact:
    """The fingerprints a value carries: format 1, or the earlier 16 hex digits (a 64-bit
    fingerprint alone). :class:`CompactFormError` names what is wrong with anything else,
    including a format of another version."""
    if not isinstance(value, str):
        raise CompactFormError(f"a compact fingerprint is text, not {type(value).__name__}")
    if _HEX16.fullmatch(value):
        return Compact(Fingerprints(int(value, 16), None), None, None, LEGACY)
    versioned = _VERSIONED.match(value)
    if versioned is not None and versioned.group(1) != "1":
        raise CompactFormError(
            f"{_shown(value)} is a fingerprint of format nd{versioned.group(1)}, which this "
            f"release cannot read (it reads {FORMAT} and the 16 hex digits of earlier releases)"
        )
    m = _ND1.fullmatch(value)
    if m is None:
        raise CompactFormError(
            f"{_shown(value)} is not a compact fingerprint: expected "
            f"{FORMAT}:<extractor>:<8 hex settings>:<16 hex>:<128 hex>, or 16 hex digits"
        )
    source, settings, fp, wide = m.groups()
    source, settings = source.lower(), settings.lower()
    if source not in _SOURCES:
        raise CompactFormError(
            f"{_shown(value)}: unknown source {source!r} (expected one of "
            f"{', '.join(sorted(_SOURCES))})"
        )
    return Compact(Fingerprints(int(fp, 16), int(wide, 16)), source, settings)


def check_comparable(found: Compact, params: FingerprintParams) -> None:
    """Refuse (:class:`IncomparableFingerprint`, naming both sides) a value made with another
    extractor or other settings than ``params``: its fingerprints would be compared with
    fingerprints of differently extracted or differently featured text. A value from a text
    field compares under any extractor. The earlier 16-hex form names no settings: it passes
    (callers decide whether a 64-bit fingerprint alone is of use)."""
    if found.version == LEGACY:
        return
    want = settings_digest(params, from_text=found.source == TEXT_SOURCE)
    source_ok = found.source in (TEXT_SOURCE, params.extractor)
    if source_ok and found.settings == want:
        return
    made = f"extractor {found.source!r}" if found.source != TEXT_SOURCE else "a text field"
    version = _made_with_version(found, params) if found.source == params.extractor else None
    error = IncomparableFingerprint(
        f"made from {made} with feature settings {found.settings}, but this run uses extractor "
        f"{params.extractor!r} with feature settings {want}"
        + ("" if source_ok else " (the extractor differs)")
        + (
            ""
            if found.settings == want
            else f" (the {_what_digests(found.source)} differ)"
            if version is None
            else f" (made with extraction version {version}, and this run's is {params.extraction})"
        )
    )
    error.extraction = version
    raise error


def _made_with_version(found: Compact, params: FingerprintParams) -> int | None:
    """The other extraction version of ``params.extractor`` whose settings ``found`` names, if
    one does (a crawl on a store made by an earlier release): the run can then be told which
    version to ask for."""
    for version in extraction_versions(params.extractor):
        other = dataclasses.replace(params, extraction=version)
        if version != params.extraction and settings_digest(other) == found.settings:
            return version
    return None
