"""``info``, ``report`` and ``copy``: commands over a whole store."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from ..fingerprint.rule import Rule
from ..report.render import tally_text
from ..stores import Alias, Decision, Entry, Store, StoreError
from ..stores.scope import settle_rule
from ._io import (
    CliError,
    emit,
    redact,
    refuse_directory,
    refuse_overwriting_inputs,
    say,
    write_output,
)
from ._records import copy_warnings, named_damage
from ._stores import (
    add_rule_args,
    is_redis,
    list_redis_prefixes,
    open_cli_store,
    redis_store_identity,
    resolve_redis_prefix,
    rule_from_args,
    sqlite_file,
    uri_prefix,
)

FORMATS = ["text", "json", "csv", "html"]


def add_layout_args(p: argparse.ArgumentParser, creates: bool = False) -> None:
    """Rule flags default to None: the store's own rule is used."""
    add_rule_args(
        p,
        "of a new destination store (default: the source's)"
        if creates
        else "(override the store's on purpose; an error if its layout contradicts the store)",
    )


def _summary(store: Store) -> dict[str, Any]:
    """Counts summed over every crawl that wrote the store (docs/reports.md): they equal the
    sums of the crawls' ``neardup/`` stats, pages and items together."""
    info = store.info()
    dropped, total = info.dropped, info.pages_seen
    judged = info.unique + dropped  # (the one base of duplicate rates: stores/report.py)
    summary: dict[str, Any] = {
        "store": redact(info.uri),
        "format": info.format,
        "pages_seen": total,
        "entries": info.entries,
        "aliases": info.aliases,
        "decisions": info.decisions,
        "decisions_total": dropped,
        "decisions_trimmed": info.decisions_trimmed,
        "revisits_unchanged": info.revisits_unchanged,
        "revisits_changed": info.revisits_changed,
        "again": info.again,
        "claimed": info.claimed,
        "pages": info.pages.as_dict(),
        "items": info.items.as_dict(),
        "judged": judged,
        "duplicate_rate": round(dropped / judged, 6) if judged else None,
        "extractor": info.rule.extractor,  # (fingerprints of two extractors do not compare)
        "extraction": info.rule.extraction,  # (nor of two extraction versions)
        "rule": info.rule.as_dict(),
        "rule_text": info.rule.describe(),
        "ttl": info.ttl,
        "max_decisions": info.max_decisions,
    }
    path = sqlite_file(info.uri)
    if path and os.path.isfile(path):
        summary["file_bytes"] = os.path.getsize(path)
    return summary


def _summary_lines(s: dict[str, Any]) -> list[str]:
    rate = s["duplicate_rate"]
    trimmed = s["decisions_trimmed"]
    lines = [
        f"store:      {s['store']} (format {s['format']})",
        f"pages seen: {s['pages_seen']} checks by every crawl (stored, dropped, revisits, again)",
        f"entries:    {s['entries']} (unique pages, one per key)",
        *(
            [f"aliases:    {s['aliases']} (dropped pages kept as candidates for their kept page)"]
            if s["rule"].get("aliases")
            else []
        ),
        f"decisions:  {s['decisions_total']} near-duplicates dropped"
        + (f" ({trimmed} oldest trimmed, {s['decisions']} kept)" if trimmed else ""),
        f"revisits:   {s['revisits_unchanged']} unchanged, {s['revisits_changed']} changed",
        f"pages:      {tally_text(s['pages'])} (the middleware's)",
        f"items:      {tally_text(s['items'])} (the pipeline's)",
        f"dup rate:   {rate:.1%} of {s['judged']} pages judged (stored as new, or dropped)"
        if rate is not None
        else "dup rate:   n/a",
        f"rule:       {s['rule_text']}",
        f"extractor:  {s['extractor']} (the text its fingerprints were made from)",
    ]
    if "file_bytes" in s:
        lines.append(f"file size:  {s['file_bytes'] / 1e6:.1f} MB")
    return lines


def cmd_info(args: argparse.Namespace) -> int:
    if is_redis(args.store) and not (args.prefix or uri_prefix(args.store)):
        found = list_redis_prefixes(args.store)
        stores = []
        for p in found:
            with open_cli_store(args.store, read_only=True, prefix=p.name) as store:
                stores.append({"prefix": p.name, **_summary(store)})
        if args.format == "json":
            emit(json.dumps({"server": redact(args.store), "stores": stores}, indent=1) + "\n")
            return 0
        lines = [f"server: {redact(args.store)}: {len(stores)} store(s)"]
        for s in stores:
            lines.append(f"prefix {s['prefix']}:")
            lines += ["  " + line for line in _summary_lines(s)[1:]]
        if not stores:
            lines.append("  (no nearduppipe store on this server)")
        emit("\n".join(lines) + "\n")
        return 0
    with _open_read_only(args, args.store) as store:
        summary = _summary(store)
    if args.format == "json":
        emit(json.dumps(summary, indent=1) + "\n")
    else:
        emit("\n".join(_summary_lines(summary)) + "\n")
    return 0


def _open_read_only(args: argparse.Namespace, uri: str) -> Store:
    options: dict[str, Any] = {}
    if getattr(args, "prefix", None):
        options["prefix"] = args.prefix
    return open_cli_store(uri, read_only=True, rule=rule_from_args(args), **options)


def cmd_report(args: argparse.Namespace) -> int:
    from ..report import render, report_from_store

    refuse_directory(args.output, "-o")
    refuse_overwriting_inputs(args.output, [p for p in [sqlite_file(args.store)] if p])
    with named_damage(args.store, args.prefix), _open_read_only(args, args.store) as store:
        report = report_from_store(store)
    report = dataclasses.replace(report, source=redact(report.source))
    write_output(render(report, args.format), args.output)
    if args.output:
        say(f"report written to {args.output}")
    return 0


class _Tally:
    """Counts decisions and text samples as they stream from one store to another."""

    def __init__(self) -> None:
        self.n_decisions = 0
        self.texts = 0

    def entries(self, entries: Iterable[Entry]) -> Iterator[Entry]:
        for entry in entries:
            self.texts += entry.text is not None
            yield entry

    def decisions(self, decisions: Iterable[Decision]) -> Iterator[Decision]:
        for decision in decisions:
            self.n_decisions += 1
            self.texts += decision.text is not None
            yield decision


def cmd_copy(args: argparse.Namespace) -> int:
    src_file, dst_file = sqlite_file(args.src), sqlite_file(args.dst)
    if src_file and dst_file:
        refuse_overwriting_inputs(dst_file, [src_file], what="DST")
    if is_redis(args.dst) and not (args.prefix or uri_prefix(args.dst)):
        # Without one the copy would land in neardup:default, a prefix no crawl reads.
        guess = f"neardup:{Path(src_file).stem}" if src_file else "neardup:<spider>"
        raise CliError(
            f"DST {redact(args.dst)}: name the prefix the crawl will use, with ?prefix= or "
            f"--prefix (a crawl of spider S uses neardup:S; for this source maybe {guess})"
        )
    if is_redis(args.src) and is_redis(args.dst):
        # the same store spelled two ways (localhost / 127.0.0.1, the prefix in the URI or
        # in --prefix): --reset would empty the source before reading it
        dst_prefix = args.prefix or uri_prefix(args.dst) or ""
        src_id = redis_store_identity(args.src, resolve_redis_prefix(args.src, None))
        if src_id == redis_store_identity(args.dst, dst_prefix):
            raise CliError(
                f"DST {redact(args.dst)} prefix {dst_prefix!r} is the source store; choose "
                "another prefix or server"
            )
    if dst_file and args.prefix:
        raise CliError(f"--prefix {args.prefix}: only Redis stores have a key prefix")
    tally = _Tally()
    with (
        named_damage(args.src),
        open_cli_store(args.src, read_only=True) as src,  # streamed, never held whole
    ):
        given = rule_from_args(args)  # (a new threshold; the texts stay the source's)
        # settled as a store settles an opener's rule: its extraction version, and its radius
        # unless --distance asks for another
        rule = (
            settle_rule(
                args.src,
                src.rule,
                None
                if given is None
                else dataclasses.replace(given, scope=src.rule.scope, extractor=src.rule.extractor),
            )
            or src.rule
        )
        if rule.aliases:  # (the setting is the destination's default, so a new store keeps
            # aliases from now on, a Redis Cluster one none, an existing one its own)
            rule = dataclasses.replace(rule, aliases_given=False)
        src_aliases = src.info().aliases
        entries, decisions = tally.entries(src.entries()), tally.decisions(src.decisions())
        carried: int | None = None  # (None: the destination keeps no aliases)
        if dst_file:
            n, carried = _copy_to_sqlite_file(
                args, dst_file, rule, entries, decisions, src.aliases if src_aliases else None
            )
            where = args.dst
        else:
            dst_options: dict[str, Any] = {"reset": args.reset}
            if args.prefix:
                dst_options["prefix"] = args.prefix
            with open_cli_store(args.dst, read_only=False, rule=rule, **dst_options) as dst:
                if len(dst) and not args.reset:
                    raise CliError(
                        f"DST {redact(dst.uri)} already holds {len(dst)} fingerprints; "
                        "pass --reset to replace them"
                    )
                if dst.rule.extraction != rule.extraction:  # (an empty store keeps its own)
                    raise CliError(
                        f"DST {redact(dst.uri)} was made for extraction version "
                        f"{dst.rule.extraction} and the source's fingerprints are of version "
                        f"{rule.extraction}: pass --reset to make it anew"
                    )
                try:
                    n = dst.import_records(entries, decisions)
                    if dst.rule.aliases and src_aliases:  # (after the pages they stand for)
                        carried = dst.import_aliases(src.aliases())
                except StoreError as e:  # (a damaged source record, met half-way)
                    partial = (
                        f"DST {redact(dst.uri)} may hold part of the copy: copy again with --reset"
                    )
                    e.args = (f"{e}; {partial}",)
                    e.partial_copy = partial  # type: ignore[attr-defined]  # (named_damage)
                    raise
                where = dst.uri
        left = copy_warnings(args.src, None, src, n)
    if src_aliases and carried is None:
        left.append(
            f"its {src_aliases} aliases (dropped pages kept as candidates) are not copied "
            "(the destination keeps none): later copies of those pages may be kept once"
        )
    elif carried is not None and carried < src_aliases:
        left.append(
            f"{src_aliases - carried} of its {src_aliases} aliases stand for no page of the "
            "copy (their kept page removed or expired) and are not copied"
        )
    for line in left:
        say(f"nearduppipe copy: warning: SRC {redact(args.src)}: {line}")
    texts = tally.texts
    also = f", {carried} aliases (dropped pages kept as candidates)" if carried else ""
    emit(
        f"copied {n} fingerprints{also} and {tally.n_decisions} decisions ({texts} text "
        f"samples) to {redact(where)}\n"
    )
    return 0


def _copy_to_sqlite_file(
    args: argparse.Namespace,
    target_name: str,
    rule: Rule,
    entries: Iterable[Entry],
    decisions: Iterable[Decision],
    aliases: Callable[[], Iterable[Alias]] | None,
) -> tuple[int, int | None]:
    """Build the copy in a temporary store file beside the target and rename it over the
    target when complete: an interrupted copy leaves the old file (or none), never half a store.
    An existing target is opened first, which takes its lock (no crawl is writing it) and
    closes it cleanly (its write-ahead log checkpointed away). Returns the entries copied and
    the aliases (``None``: the copy keeps none)."""
    target = Path(target_name)
    if target.exists():
        with open_cli_store(args.dst, read_only=False) as existing:
            if len(existing) and not args.reset:
                raise CliError(
                    f"DST {args.dst} already holds {len(existing)} fingerprints; "
                    "pass --reset to replace them"
                )
    for suffix in ("-wal", "-journal"):
        stale = Path(f"{target}{suffix}")
        if stale.exists() and stale.stat().st_size:
            raise CliError(f"DST {args.dst}: in use ({stale.name} is not empty)")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as e:
        raise CliError(f"DST {args.dst}: cannot write there: {e.strerror or e}") from None
    os.close(fd)
    os.unlink(tmp)  # the store creates its own file
    try:
        carried = None
        with open_cli_store(tmp, read_only=False, rule=rule) as dst:
            n = dst.import_records(entries, decisions)
            if dst.rule.aliases and aliases is not None:
                carried = dst.import_aliases(aliases())
        for suffix in ("-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                Path(f"{target}{suffix}").unlink()
        os.replace(tmp, target)
    finally:
        for leftover in (tmp, f"{tmp}-wal", f"{tmp}-shm", f"{tmp}.lock"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(leftover)
    return n, carried


def add_parsers(sub: Any) -> None:
    p = sub.add_parser(
        "info",
        help="what a store holds",
        description="What a store holds: "
        "entries, decisions, duplicate rate and layout. Given a Redis server "
        "without a prefix, lists every nearduppipe store on it. Never writes.",
    )
    p.add_argument(
        "store", help="store URI or sqlite path (a Redis URI without ?prefix= lists the stores)"
    )
    p.add_argument("--prefix", help="key prefix of a Redis store (as ?prefix= in the URI)")
    p.add_argument(
        "--format", choices=["text", "json"], default="text", help="output format (default text)"
    )
    add_layout_args(p)
    p.set_defaults(func=cmd_info)

    p = sub.add_parser(
        "report",
        help="summary, domains and clusters of a store",
        description="Summary, per-domain rates, distance histogram and clusters "
        "of a store. Never writes to the store.",
    )
    p.add_argument("store", help="store URI or sqlite path")
    p.add_argument("--format", choices=FORMATS, default="text", help="report format (default text)")
    p.add_argument(
        "-o", "--output", help="write the report to this file (default: standard output)"
    )
    p.add_argument("--prefix", help="key prefix of a Redis store (as ?prefix= in the URI)")
    add_layout_args(p)
    p.set_defaults(func=cmd_report)

    p = sub.add_parser(
        "copy",
        help="copy a store to another backend (e.g. sqlite to redis)",
        description="Copy every entry (with its time and text sample), every alias "
        "(a dropped page kept as a candidate, where the destination keeps them) and every "
        "decision to another store, e.g. to seed a shared Redis store from a "
        "local crawl. The copy keeps the source's layout.",
    )
    p.add_argument("src", help="source store (a Redis source takes ?prefix= in its URI)")
    p.add_argument("dst", help="destination store")
    p.add_argument("--reset", action="store_true", help="empty the destination first")
    p.add_argument("--prefix", help="key prefix of a Redis destination (as ?prefix= in its URI)")
    add_layout_args(p, creates=True)
    p.set_defaults(func=cmd_copy)
