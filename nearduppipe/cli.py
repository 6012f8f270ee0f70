"""``nearduppipe``: command-line tools over stores and texts.

nearduppipe info STORE               what a store holds
nearduppipe copy SRC DST             copy a store to another backend (sqlite ↔ redis)
nearduppipe fingerprint [FILE|-]     a text's (or with --html, a page's) fingerprint in hex
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .stores import Store, StoreError, open_store
from .stores.base import _scheme


def _open_for_reading(uri: str, **options: Any) -> Store:
    """Open without taking a sqlite store's writer lock, so a running crawl is not disturbed."""
    if _scheme(uri) == "sqlite":
        options.setdefault("read_only", True)
    return open_store(uri, **options)


def _store_options(args: argparse.Namespace) -> dict[str, Any]:
    options: dict[str, Any] = {}
    if getattr(args, "prefix", None):
        options["prefix"] = args.prefix
    return options


def cmd_info(args: argparse.Namespace) -> int:
    with _open_for_reading(args.store, distance=args.distance, **_store_options(args)) as store:
        info = store.info()
    total = info.entries + info.decisions
    print(f"store:      {info.uri}")
    print(f"entries:    {info.entries} (unique pages)")
    print(f"decisions:  {info.decisions} near-duplicates dropped")
    print(f"dup rate:   {info.decisions / total:.1%}" if total else "dup rate:   n/a")
    return 0


def cmd_copy(args: argparse.Namespace) -> int:
    with _open_for_reading(args.src, distance=args.distance) as src:
        entries = list(src.entries())
        decisions = list(src.decisions())
    dst_options: dict[str, Any] = {"reset": args.reset, **_store_options(args)}
    with open_store(args.dst, distance=args.distance, **dst_options) as dst:
        if len(dst) and not args.reset:
            print(
                f"nearduppipe copy: {dst.uri} already holds {len(dst)} fingerprints; "
                "pass --reset to replace them",
                file=sys.stderr,
            )
            return 2
        n = dst.import_records(entries, decisions)
        print(f"copied {n} fingerprints and {len(decisions)} decisions to {dst.uri}")
    return 0


def cmd_fingerprint(args: argparse.Namespace) -> int:
    from .dedup import FingerprintParams, fingerprint_html, fingerprint_text

    data = sys.stdin.buffer.read() if args.file == "-" else Path(args.file).read_bytes()
    params = FingerprintParams(min_text_length=args.min_length)
    if args.html:
        result = fingerprint_html(data, None, params)
    else:
        result = fingerprint_text(data.decode("utf-8", errors="replace"), params)
    if result.fingerprint is None:
        print(f"nearduppipe fingerprint: no fingerprint ({result.skipped})", file=sys.stderr)
        return 1
    print(f"{result.fingerprint:016x}")
    return 0


def _read_text(source: str, store: Store | None) -> str | int:
    """A file's text (HTML files are extracted first), a store key's fingerprint, or the
    argument itself as text."""
    from .text import extract_text

    path = Path(source)
    if path.is_file():
        data = path.read_text(encoding="utf-8", errors="replace")
        if data.lstrip()[:1] == "<":
            return extract_text(data) or ""
        return data
    if store is not None:
        for entry in store.entries():
            if entry.key == source:
                return entry.text if entry.text is not None else entry.fingerprint
        for decision in store.decisions():
            if decision.key == source and decision.text is not None:
                return decision.text
    return source


def cmd_explain(args: argparse.Namespace) -> int:
    from .explain import explain

    store = _open_for_reading(args.store, distance=args.distance) if args.store else None
    try:
        a, b = _read_text(args.a, store), _read_text(args.b, store)
    finally:
        if store is not None:
            store.close()
    if isinstance(a, int) or isinstance(b, int):
        fa = a if isinstance(a, int) else None
        fb = b if isinstance(b, int) else None
        print("the store keeps fingerprints, not texts: pass the pages' files for the features")
        for name, fp in (("A", fa), ("B", fb)):
            print(f"{name}: {fp:016x}" if fp is not None else f"{name}: (text given)")
        if fa is not None and fb is not None:
            print(f"distance: {(fa ^ fb).bit_count()}")
        return 0
    print(explain(a, b).render(args.distance))
    return 0


def _write(text: str, path: str | None) -> None:
    if path:
        Path(path).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)


def cmd_report(args: argparse.Namespace) -> int:
    from .report import render, report_from_store

    with _open_for_reading(args.store, distance=args.distance, **_store_options(args)) as store:
        report = report_from_store(store)
    _write(render(report, args.format), args.output)
    return 0


def cmd_dedup(args: argparse.Namespace) -> int:
    from .records import dedup_records
    from .report import render

    try:
        with contextlib.ExitStack() as stack:
            out = None
            if args.output:
                out = stack.enter_context(Path(args.output).open("w", encoding="utf-8", newline=""))
            result = dedup_records(
                Path(args.input),
                args.text_field,
                args.html_field,
                args.key_field,
                args.distance,
                output=out,
                workers=args.workers,
                progress=not args.quiet,
            )
    except (OSError, ValueError) as e:
        print(f"nearduppipe dedup: {e}", file=sys.stderr)
        return 1
    r = result.report
    skipped = ", ".join(f"{k}: {v}" for k, v in sorted(result.skipped.items())) or "none"
    print(
        f"{result.total} records: {len(result.kept)} kept, {r.dropped} near-duplicates in "
        f"{len(r.clusters)} clusters; not fingerprinted (kept): {skipped}",
        file=sys.stderr,
    )
    if args.report or not args.output:
        _write(render(r, args.format), args.report)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="nearduppipe", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)

    def store_args(p: argparse.ArgumentParser) -> None:
        p.add_argument("--distance", type=int, default=3, help="Hamming distance k (default 3)")
        p.add_argument("--prefix", help="key prefix of a redis store (default neardup:default)")

    p = sub.add_parser("info", help="what a store holds")
    p.add_argument("store", help="store URI or sqlite path")
    store_args(p)
    p.set_defaults(func=cmd_info)

    p = sub.add_parser("copy", help="copy a store to another backend (e.g. sqlite to redis)")
    p.add_argument("src", help="source store (a redis source takes ?prefix=... in its URI)")
    p.add_argument("dst", help="destination store")
    p.add_argument("--reset", action="store_true", help="empty the destination first")
    store_args(p)  # --prefix: of a redis destination
    p.set_defaults(func=cmd_copy)

    p = sub.add_parser("fingerprint", help="print the fingerprint of a text or page in hex")
    p.add_argument("file", nargs="?", default="-", help="a file, or - for standard input")
    p.add_argument("--html", action="store_true", help="the input is HTML: extract its text")
    p.add_argument("--min-length", type=int, default=0, help="shortest text to fingerprint")
    p.set_defaults(func=cmd_fingerprint)

    p = sub.add_parser("explain", help="why two texts or pages are (not) near-duplicates")
    p.add_argument("a", help="a text file, an HTML file, a key in --store, or the text itself")
    p.add_argument("b")
    p.add_argument("--store", help="look A and B up as keys (URLs) in this store")
    p.add_argument("--distance", type=int, default=4, help="k for the verdict (default 4)")
    p.set_defaults(func=cmd_explain)

    formats = ["text", "json", "csv", "html"]
    p = sub.add_parser("report", help="summary, domains and clusters of a store")
    p.add_argument("store", help="store URI or sqlite path")
    p.add_argument("--format", choices=formats, default="text")
    p.add_argument("-o", "--output", help="write the report here instead of standard output")
    store_args(p)
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("dedup", help="near-duplicates in a JSON-lines or CSV export")
    p.add_argument("input", help="a .jsonl/.jl/.json-lines or .csv file (e.g. a Scrapy feed)")
    p.add_argument("-o", "--output", help="write the kept records here (same format as input)")
    p.add_argument("--report", help="write the cluster report here (default: standard output)")
    p.add_argument("--format", choices=formats, default="text", help="report format")
    p.add_argument("--text-field", default="text")
    p.add_argument("--html-field", default="html")
    p.add_argument("--key-field", default="url")
    p.add_argument("--distance", type=int, default=4, help="k (default 4)")
    p.add_argument("--workers", type=int, default=None, help="fingerprinting processes")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=cmd_dedup)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code: int = args.func(args)
    except StoreError as e:
        print(f"nearduppipe {args.command}: {e}", file=sys.stderr)
        return 1
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
