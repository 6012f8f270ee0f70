"""Fingerprints a record already carries: what a crawl wrote into ``NEARDUP_FINGERPRINT_FIELD``
(:mod:`nearduppipe.fingerprint.compact`), used by the batch job instead of extracting the record
again. Extraction is nearly all of a batch job's cost, and the crawl did it once already.

A record's value is used only when it was made under the settings of this run: the same
extractor (or from a text field, which no extractor touched) and the same feature settings.
A value made otherwise is refused, naming both sides, rather than silently extracted again: a
feed with values of other settings means the run's settings are not the crawl's, and the records
without a value would then be fingerprinted differently from those with one. Values that are
not this package's (another field of the same name) and the 16-hex form of earlier releases
(no wide fingerprint, no settings: it cannot be checked nor give the wide verdict) are passed
over, and the record is extracted as usual.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import NearDupError
from ..fingerprint.compact import (
    LEGACY,
    CompactFormError,
    IncomparableFingerprint,
    check_comparable,
    decode,
    is_compact,
)
from ..fingerprint.page import FingerprintParams
from ..fingerprint.rule import Fingerprints

__all__ = ["DEFAULT_FIELD", "MixedFingerprintsError", "precomputed"]

# The field name the README suggests for NEARDUP_FINGERPRINT_FIELD, and dedup's default.
DEFAULT_FIELD = "fingerprint"


class MixedFingerprintsError(NearDupError, ValueError):
    """A record carries fingerprints this run cannot use: malformed, of another format version,
    or made with another extractor or other feature settings (the message names both)."""


def precomputed(
    record: Mapping[str, Any],
    field: str | None,
    params: FingerprintParams,
    where: str = "a record",
) -> Fingerprints | None:
    """The fingerprints ``record[field]`` carries, when they were made under ``params``;
    ``None`` when the record carries none this run could use without checking (no field, a
    value that is not a fingerprint, the earlier 16-hex form): the caller extracts as usual.
    Raises :class:`MixedFingerprintsError` (``where`` names the record) for a value made under
    other settings, or one that claims to be a fingerprint and cannot be read."""
    if not field:
        return None
    value = record.get(field)
    if not is_compact(value):
        return None
    try:
        found = decode(value)
        if found.version == LEGACY:
            return None
        check_comparable(found, params)
    except IncomparableFingerprint as e:
        asked = (
            f"extraction version {e.extraction}"
            if e.extraction is not None
            else "extractor and feature settings"
        )
        raise MixedFingerprintsError(
            f"{where}: its {field!r} was {e}. Fingerprints of other settings are not "
            f"comparable: run with the crawl's {asked}, or without reading {field!r}, to "
            "extract every record again"
        ) from None
    except CompactFormError as e:
        raise MixedFingerprintsError(f"{where}: field {field!r}: {e}") from None
    return found.fingerprints
