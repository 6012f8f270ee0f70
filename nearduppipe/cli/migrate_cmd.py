"""``migrate``: convert a Redis store of an earlier format to the current one, in place."""

from __future__ import annotations

import argparse
from typing import Any

from ..stores import Migration, find_backend
from ._io import CliError, emit, redact, say


def cmd_migrate(args: argparse.Namespace) -> int:
    head, sep, _ = args.store.partition("://")
    backend = find_backend(args.store) if sep and ":" not in head else None
    if backend is None or not backend.offers("migrate"):
        raise CliError(
            f"{redact(args.store)}: only Redis stores (redis://, rediss://, unix://, "
            "redis+cluster://) have a format to migrate"
        )
    if args.batch < 1:
        raise CliError("--batch must be at least 1")
    how = Migration(args.batch, args.pause, say if args.verbose else None, args.wait, say)
    moved = backend.migrate(args.store, args.prefix, how)
    emit(f"{redact(args.store)}: format 3 or later ({moved} entries moved by this run)\n")
    return 0


def add_parsers(sub: Any) -> None:
    p = sub.add_parser(
        "migrate",
        help="convert a format-2 Redis store to format 3, in place",
        description="Convert a format-2 Redis store (written by an earlier nearduppipe) to "
        "format 3 in place, in batches: the server never needs more memory than the "
        "format-2 store holds. Stop every crawl using the store first. Interrupted, it "
        "resumes where it stopped when run again; a store already in format 3 is left as it is. "
        "One migration of a store runs at a time: it holds a lock in the store, renewed every "
        "5 s; another migration is refused, naming it (or waits, with --wait). A killed "
        "migration's lock lapses within 30 s; then run migrate again to finish its work.",
    )
    p.add_argument("store", help="store URI (redis://, rediss://, unix://, redis+cluster://)")
    p.add_argument("--prefix", help="key prefix of the store (as ?prefix= in the URI)")
    p.add_argument("--batch", type=int, default=1000, help="entries per step (default 1000)")
    p.add_argument(
        "--pause", type=float, default=0.0, help="seconds between steps, to spare a busy server"
    )
    p.add_argument(
        "--wait",
        action="store_true",
        help="while another migration of the store runs, wait for it (or, if it was killed, "
        "for its lock to lapse, within 30 s) instead of refusing",
    )
    p.add_argument("-v", "--verbose", action="store_true", help="print progress")
    p.set_defaults(func=cmd_migrate)
