"""Scope: which pages a page is compared with (``NEARDUP_SCOPE``, ``dedup --scope``).

``global`` (the default) compares every page with every other. ``domain`` compares a page only
with pages of the same registrable domain (``news.example.co.uk`` and ``www.example.co.uk`` are
``example.co.uk``), by the Public Suffix List bundled with the ``publicsuffixlist`` package
(never downloaded at crawl time); ``host`` only with pages of the same host name (the port is
not part of it). A key that is not a URL with a host (a text digest) has the empty scope.

How: before the store sees a page's fingerprints, they are XORed with a mask drawn from its
scope (64 bits and 512 bits, from xxh3 of the scope's name). XOR with one mask keeps every
distance between two pages of one scope exactly, so the store's index and rule are untouched
and its answers within a scope are exactly those of an unscoped store holding only that
scope's pages. Two pages of different scopes differ by the XOR of two independent random masks:
to be taken for near-duplicates both their 64-bit fingerprints must fall within the candidate
radius (10 bits: probability 1e-8 per pair) and their 512-bit ones within the rule's
threshold (at cosine 0.93, 61 of 512 bits: 8e-75), so a page of another scope is never
matched in practice. The stored fingerprints are the masked ones; :func:`unmask` gives the
page's own back, given its key. The store records the scope (in its rule) and refuses a crawl
that asks for another.
"""

from __future__ import annotations

import contextlib
import functools
import ipaddress
import json
import re
from dataclasses import replace
from typing import Literal
from urllib.parse import urlsplit

import xxhash

from ..fingerprint.rule import Fingerprints, Rule
from .base import StoreError

__all__ = [
    "SCOPES",
    "Scope",
    "format1_rule",
    "mask_of",
    "recorded_rule",
    "scope_of",
    "scoped",
    "settle_rule",
    "unasked_aliases_off",
    "unmask",
]

Scope = Literal["global", "domain", "host"]
SCOPES: tuple[Scope, ...] = ("global", "domain", "host")
_SALT = b"nearduppipe scope\x00"


@functools.lru_cache(maxsize=1)
def _psl() -> object:
    from publicsuffixlist import PublicSuffixList  # the list ships inside the wheel

    return PublicSuffixList()


@functools.lru_cache(maxsize=65536)
def _host_scope(host: str, scope: str) -> str:
    with contextlib.suppress(UnicodeError):  # (a label IDNA refuses: the host as written)
        host = host.encode("idna").decode("ascii")
    if scope == "host" or _is_ip(host):
        return host
    registrable = _psl().privatesuffix(host)  # type: ignore[attr-defined]
    return registrable if isinstance(registrable, str) else host  # (IPs, localhost, a suffix)


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def scope_of(key: str, scope: str) -> str:
    """The scope ``key`` (a URL) belongs to: ``""`` for ``global`` or a key without a host."""
    if scope == "global":
        return ""
    host = _host(key)
    return _host_scope(host, scope) if host else ""


_END = re.compile(r"[/?#\\]")


def _host(key: str) -> str | None:
    """``urlsplit(key).hostname``, without its cost (8 us a key) for the usual ``scheme://host``
    form; anything unusual goes to urlsplit."""
    start = key.find("://")
    if start <= 0 or not key[:start].isalnum():
        return _split_host(key)
    end = _END.search(key, start + 3)
    netloc = key[start + 3 : end.start() if end else len(key)]
    if "@" in netloc or "[" in netloc or "%" in netloc:
        return _split_host(key)
    host = netloc.rpartition(":")[0] if ":" in netloc else netloc
    return host.lower() or None


def _split_host(key: str) -> str | None:
    try:
        return urlsplit(key).hostname
    except ValueError:
        return None


@functools.lru_cache(maxsize=65536)
def mask_of(name: str) -> Fingerprints:
    """The 64- and 512-bit masks of scope ``name`` (zero for the empty scope)."""
    if not name:
        return Fingerprints(0, 0)
    data = _SALT + name.encode("utf-8", "surrogatepass")
    wide = 0
    for seed in range(8):
        wide = (wide << 64) | xxhash.xxh3_64_intdigest(data, seed=seed + 1)
    return Fingerprints(xxhash.xxh3_64_intdigest(data), wide)


def scoped(fps: Fingerprints, key: str, scope: str) -> Fingerprints:
    """``fps`` as the store keeps them for a page of ``key`` under ``scope``."""
    if scope == "global":
        return fps
    m = mask_of(scope_of(key, scope))
    wide = None if fps.wide is None else fps.wide ^ (m.wide or 0)
    return Fingerprints(fps.fp ^ m.fp, wide)


unmask = scoped  # (XOR is its own inverse)


def recorded_rule(where: str, raw: str | bytes) -> Rule:
    """The rule a store recorded as JSON (:meth:`Rule.as_dict`); one line when it is damaged."""
    try:
        return Rule.from_dict(json.loads(raw))
    except ValueError as e:  # (json's errors are ValueErrors)
        raise StoreError(f"{where}: its recorded rule is damaged ({e})") from None


def unasked_aliases_off(rule: Rule) -> Rule:
    """``rule`` for a store that exists, or cannot keep aliases: aliases that are only the
    default for new stores (:attr:`Rule.aliases_given` false) are off."""
    return replace(rule, aliases=False) if rule.aliases and not rule.aliases_given else rule


def format1_rule(rule: Rule | None) -> Rule:
    """The rule of a format-1 store (it records none), opened with ``rule``: an existing
    store's (aliases only if asked), on extraction version 1, which every store made before
    versions holds (a new release's newest would extract its recrawls differently)."""
    return replace(unasked_aliases_off(rule or Rule()), extraction=1)


def settle_rule(where: str, stored: Rule | None, asked: Rule | None) -> Rule | None:
    """The rule a store opens with: the asked one, on the stored one's extraction version.

    Refuses another scope or extractor than the store was built with: its fingerprints are
    masked by their scope and made from one extractor's text, so they cannot answer another.
    The extraction version is the store's, whatever the release's newest (fingerprint.versions):
    a crawl on an old store extracts as the store's pages were extracted. A radius not asked
    for (:attr:`Rule.radius_given`) is the store's, when both rules have a verdict; so is
    whether it keeps aliases, unless asked (:attr:`Rule.aliases_given`)."""
    if stored is None or asked is None:
        return asked or stored
    for what, setting, a, b in (
        ("scope", "NEARDUP_SCOPE", stored.scope, asked.scope),
        ("extractor", "NEARDUP_EXTRACTOR", stored.extractor, asked.extractor),
    ):
        if a != b:
            raise StoreError(
                f"{where}: the store was built with {what} {a!r} and this crawl asks for {b!r} "
                f"({setting}): its fingerprints cannot answer another {what}. Set {setting} to "
                f"{a!r}, use another store, or start it again with --reset (NEARDUP_RESET)"
            )
    if not asked.radius_given and asked.verifies and stored.verifies:
        asked = replace(asked, radius=stored.radius, radius_given=True)
    if stored.aliases:  # (a store keeps its aliases: its dropped pages are in its index)
        if asked.similarity is None:
            raise StoreError(
                f"{where}: the store keeps aliases (NEARDUP_ALIASES), which need a verdict: "
                "set NEARDUP_SIMILARITY, or use another store"
            )
        asked = replace(asked, aliases=True, alias_similarity=stored.alias_similarity)
    else:  # (the default is for new stores only)
        asked = unasked_aliases_off(asked)
    return replace(asked, extraction=stored.extraction)
