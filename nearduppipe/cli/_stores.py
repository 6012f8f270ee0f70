"""Opening stores from the command line: the store's own rule and layout, never a guessed one.

A store records the rule it was built with (similarity, 64-bit radius, wide bits). The CLI
passes a rule only when the user gave one (``--similarity``, ``--paper``, ``--distance``), to
create a store or to override on purpose. Read-only commands open ``read_only=True``: they never
write, not even metadata on an empty Redis prefix.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Hashable
from typing import Any, TypeVar
from urllib.parse import parse_qsl

from ..fingerprint.rule import Rule
from ..stores import Store, StoreError, StoreListing, find_backend, open_store
from ._io import CliError, bounded_int, redact

__all__ = [
    "add_rule_args",
    "backend_call",
    "is_redis",
    "list_redis_prefixes",
    "open_cli_store",
    "redis_store_identity",
    "rule_from_args",
    "sqlite_file",
    "uri_param",
    "uri_prefix",
]

_T = TypeVar("_T")


def is_redis(uri: str) -> bool:
    """Whether ``uri`` names a server that holds several stores, each named by its key prefix
    (Redis, one server or a Cluster)."""
    backend = find_backend(uri)
    return backend is not None and backend.prefixed


def backend_call(fn: Callable[[], _T]) -> _T:
    """A backend's answer; its error (a Redis server unreachable, …) is the command's one line."""
    try:
        return fn()
    except StoreError as e:
        raise CliError(str(e)) from None


def uri_param(uri: str, name: str) -> str | None:
    """A query parameter of a Redis URI (``?prefix=``, ``?ttl=``), if any."""
    return dict(parse_qsl(uri.partition("?")[2])).get(name) or None


def uri_prefix(uri: str) -> str | None:
    """The ``?prefix=`` of a Redis URI, if any."""
    return uri_param(uri, "prefix")


def add_rule_args(p: argparse.ArgumentParser, purpose: str) -> None:
    """Flags that state a rule; all default to None (the store's, or the crawl default's)."""
    g = p.add_argument_group("decision rule " + purpose)
    g.add_argument(
        "--similarity",
        type=float,
        default=None,
        metavar="COS",
        help="cosine above which pages are near-duplicates (0.5 to 1)",
    )
    g.add_argument(
        "--paper",
        action="store_true",
        help="the paper's rule: 64-bit SimHash within --distance (default 3), no wide verification",
    )
    g.add_argument(
        "--distance",
        type=bounded_int(0, 12),
        default=None,
        metavar="K",
        help="64-bit radius: candidates (or, with --paper, the decision)",
    )


def rule_from_args(args: argparse.Namespace) -> Rule | None:
    """The rule the flags state, or None when none was given."""
    similarity = getattr(args, "similarity", None)
    paper = getattr(args, "paper", False)
    distance = getattr(args, "distance", None)
    if similarity is None and not paper and distance is None:
        return None
    if paper and similarity is not None:
        raise CliError("--paper and --similarity contradict each other")
    try:
        if paper:
            return Rule.paper(3 if distance is None else distance)
        if similarity is not None and not 0.5 <= similarity <= 1:
            raise ValueError(f"--similarity must be between 0.5 and 1, not {similarity}")
        return Rule(
            similarity=0.93 if similarity is None else similarity,
            radius=Rule().radius if distance is None else distance,
            radius_given=distance is not None,
        )
    except ValueError as e:
        raise CliError(str(e)) from None


def list_redis_prefixes(uri: str) -> list[StoreListing]:
    """Every store on the server (by name: its prefix), read only."""
    backend = find_backend(uri)
    assert backend is not None
    return backend_call(lambda: backend.list_stores(uri))


def _redis_meta(uri: str, prefix: str) -> dict[str, str] | None:
    backend = find_backend(uri)
    assert backend is not None
    return backend_call(lambda: backend.meta(uri, prefix))


def _recorded_ttl(uri: str, prefix: str | None) -> float | None:
    """The TTL an existing store records, which a command that writes keeps (a writer with
    another TTL is refused: stores/ttl_rule.py); None: none recorded, or no store yet."""
    from ..stores.ttl_rule import decode_ttl

    backend = find_backend(uri)
    if backend is None or not backend.offers("meta"):
        return None
    meta: dict[str, str] | None = None
    if backend.prefixed:
        meta = _redis_meta(uri, prefix) if prefix else None
    elif (path := sqlite_file(uri)) and os.path.isfile(path):
        meta = backend.meta(uri)
    text = None if meta is None else meta.get("ttl")
    return None if text is None else decode_ttl(text, redact(uri))


def sqlite_file(uri: str) -> str | None:
    """The local file a store URI or path names (a sqlite store; ``None`` for other backends)."""
    backend = find_backend(uri)
    if backend is None:
        return None
    try:
        path = backend.file(uri)
    except Exception as e:  # a malformed sqlite URI
        raise CliError(f"{uri}: {e}") from None
    return None if path is None else str(path)


def redis_store_identity(uri: str, prefix: str) -> Hashable:
    """What names one Redis store whatever the URI's spelling (``localhost`` or ``127.0.0.1``,
    a prefix in the URI or given apart): the server's run id and database, or the ids of a
    cluster's nodes, with the prefix."""
    backend = find_backend(uri)
    assert backend is not None
    return backend_call(lambda: backend.identity(uri, prefix))


def resolve_redis_prefix(uri: str, prefix: str | None) -> str:
    """The prefix to read: the one given, else the server's only store; several or none is a
    one-line error listing what exists (a silent ``neardup:default`` would show 0 entries)."""
    prefix = prefix or uri_prefix(uri)
    if prefix:
        return prefix
    found = list_redis_prefixes(uri)
    if len(found) == 1:
        return found[0].name
    names = ", ".join(p.name for p in found) or "none"
    raise CliError(
        f"{redact(uri)}: name the store with ?prefix=… or --prefix (stores on this server: {names})"
    )


def open_cli_store(
    uri: str,
    *,
    read_only: bool,
    rule: Rule | None = None,
    must_exist: bool = False,
    **options: Any,
) -> Store:
    """Open ``uri`` with the rule the store records; ``rule`` only when the user gave one (a
    contradiction with the store's layout is the store's one-line error). Read-only opens,
    and writes with ``must_exist``, refuse a store that does not exist (a typo would make
    one)."""
    if not isinstance(uri, str) or not uri.strip():
        raise CliError("a store URI or sqlite path is required")
    if options.get("prefix") and not is_redis(uri):
        raise CliError(f"--prefix {options['prefix']}: only Redis stores have a key prefix")
    if is_redis(uri):
        prefix = options.pop("prefix", None) or uri_prefix(uri)
        if read_only or must_exist:
            prefix = resolve_redis_prefix(uri, prefix)
            if _redis_meta(uri, prefix) is None:
                # Reading a prefix that holds no store is a typo far more often than a wish to
                # see zeros; say which stores exist instead (and write nothing).
                names = ", ".join(p.name for p in list_redis_prefixes(uri)) or "none"
                raise CliError(
                    f"{redact(uri)}: no store with prefix {prefix!r} (stores on this server: "
                    f"{names})"
                )
        if prefix:
            options["prefix"] = prefix
    elif must_exist and (path := sqlite_file(uri)) and not os.path.lexists(path):
        raise CliError(f"{path}: no such store file")  # (a FIFO or a folder: the open names it)
    if read_only:
        options["read_only"] = True
    try:
        if not read_only and "ttl" not in options and not uri_param(uri, "ttl"):
            recorded = _recorded_ttl(uri, options.get("prefix"))
            if recorded is not None:
                options["ttl"] = recorded
        return open_store(uri, rule=rule, **options)
    except StoreError as e:
        raise CliError(redact(str(e))) from None
    except ValueError as e:  # an impossible rule or layout
        raise CliError(f"{redact(uri)}: {e}") from None
