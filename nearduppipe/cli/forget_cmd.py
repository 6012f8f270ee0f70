"""``forget``: remove pages from a store, so the next crawl keeps them again."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..stores.base import BadKey
from ._io import CliError, emit, redact, say
from ._stores import open_cli_store


def _keys(args: argparse.Namespace) -> Iterator[str]:
    yield from args.keys
    if args.file is None:
        return
    if args.file == "-":
        lines: Any = sys.stdin
    else:
        path = Path(args.file)
        if not path.is_file():
            raise CliError(f"--file {args.file}: no such file")
        lines = path.open(encoding="utf-8", errors="surrogateescape")
    try:
        for line in lines:
            key = line.rstrip("\r\n")
            if key:
                yield key
    finally:
        if lines is not sys.stdin:
            lines.close()


def cmd_forget(args: argparse.Namespace) -> int:
    if not args.keys and args.file is None:
        raise CliError("name the keys to forget, or --file FILE (- for standard input)")
    options: dict[str, Any] = {}
    if args.prefix:
        options["prefix"] = args.prefix
    removed = missing = bad = 0
    with open_cli_store(args.store, read_only=False, must_exist=True, **options) as store:
        for key in _keys(args):
            try:
                if store.remove(key):
                    removed += 1
                else:
                    missing += 1
                    if args.verbose:
                        say(f"not in the store: {key}")
            except BadKey:
                bad += 1
        uri = store.uri
    emit(
        f"forgot {removed} pages in {redact(uri)} ({missing} not stored"
        + (f", {bad} not valid keys" if bad else "")
        + ")\n"
    )
    return 0


def add_parsers(sub: Any) -> None:
    p = sub.add_parser(
        "forget",
        help="remove pages (keys) from a store",
        description="Remove pages from a store: their fingerprints leave the index, so the next "
        "crawl keeps them as new pages. Keys are given as arguments, or one per line in "
        "--file (- for standard input).",
    )
    p.add_argument("store", help="store URI or sqlite path (a crawl must not be using it)")
    p.add_argument("keys", nargs="*", help="keys (URLs) to forget")
    p.add_argument("--file", help="read keys from this file, one per line (- for stdin)")
    p.add_argument("--prefix", help="key prefix of a Redis store (as ?prefix= in the URI)")
    p.add_argument("-v", "--verbose", action="store_true", help="name keys that were not stored")
    p.set_defaults(func=cmd_forget)
