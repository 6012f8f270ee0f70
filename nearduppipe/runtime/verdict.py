"""The verdict a page or item carries: ``response.meta["neardup"]`` and ``NEARDUP_VERDICT_FIELD``.

A plain dict (JSON-ready, so it can be exported with an item) that says what the store decided
and what nearduppipe drops because of it; a spider reads it to decide for itself (``mark``), or
to stop paginating a listing whose pages it has seen.
"""

from __future__ import annotations

from typing import Any

from ..fingerprint.rule import WIDE_BITS, implied_similarity
from ..settings import Action
from ..stores.base import Match
from ..stores.decide import Outcome

__all__ = ["skipped_verdict", "verdict"]


def verdict(
    outcome: Outcome, key: str, action: Action | None, match: Match | None = None
) -> dict[str, Any]:
    """``status`` (new / duplicate / unchanged / changed / again / skipped), the page's
    ``key``, the ``matched`` key, the 64-bit ``distance``, the cosine ``similarity`` the wide
    fingerprints imply, the ``fingerprint`` (16 hex digits) and ``dropped``: ``"page"``,
    ``"items"`` or ``None`` (kept; ``mark``, or nothing to drop)."""
    match = outcome.match if match is None else match  # (``match``: the face's own verdict)
    wide = None if match is None else match.wide_distance
    return {
        "status": outcome.status,
        "key": key,
        "matched": None if match is None else match.key,
        "distance": None if match is None else match.distance,
        "similarity": None if wide is None else round(implied_similarity(wide, WIDE_BITS), 4),
        "fingerprint": None if outcome.fingerprint is None else f"{outcome.fingerprint:016x}",
        "dropped": None if action == "mark" else action,
        "skipped": outcome.skipped,
    }


def skipped_verdict(key: str, reason: str) -> dict[str, Any]:
    """The verdict of a page or item that was not checked (``reason``: why)."""
    return verdict(Outcome(skipped=reason), key, None)
