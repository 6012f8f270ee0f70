"""``dedup``: near-duplicates in an exported feed, with the kept records written out."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import sys
from pathlib import Path
from typing import Any

from ..batch.feeds import FEED_FORMATS, FeedError, feed_format
from ..fingerprint.rule import Rule
from ._io import (
    CliError,
    atomic_output,
    bounded_int,
    refuse_directory,
    refuse_overwriting_inputs,
    say,
    write_output,
)
from ._stores import add_rule_args, rule_from_args

REPORT_FORMATS = ["text", "json", "csv", "html"]


def _progress_bars(enabled: bool) -> Any:
    if not enabled:
        return None
    from tqdm import tqdm

    def bar(**options: Any) -> Any:
        return tqdm(file=sys.stderr, dynamic_ncols=True, **options)

    return bar


def cmd_dedup(args: argparse.Namespace) -> int:
    from ..batch.records import MissingFieldError, dedup_records
    from ..report import render

    refuse_directory(args.output, "-o")
    refuse_directory(args.report, "--report")
    source = Path(args.input)
    if not source.is_file():
        raise CliError(
            f"INPUT {args.input}: {'is not a file' if source.exists() else 'no such file'}"
        )
    try:
        in_fmt = feed_format(source, args.input_format)
        out_fmt = feed_format(args.output, args.output_format) if args.output else None
    except FeedError as e:
        raise CliError(str(e)) from None
    refuse_overwriting_inputs(args.output, [args.input], what="-o")
    refuse_overwriting_inputs(args.report, [args.input], what="--report")
    if args.output and args.report and Path(args.output).resolve() == Path(args.report).resolve():
        raise CliError(f"--report {args.report}: is also the -o output")
    try:
        with contextlib.ExitStack() as stack:
            out = None
            if args.output:
                out = stack.enter_context(atomic_output(args.output, newline=""))
            result = dedup_records(
                source,
                args.text_field,
                args.html_field,
                args.key_field,
                dataclasses.replace(rule_from_args(args) or Rule(), scope=args.scope),
                output=out,
                workers=args.workers,
                progress=_progress_bars(not args.quiet),
                input_format=in_fmt,
                output_format=out_fmt,
                keep_texts=args.format == "html",
            )
    except MissingFieldError as e:
        raise CliError(str(e)) from None
    except FeedError as e:
        raise CliError(f"INPUT {e}") from None
    except OSError as e:
        raise CliError(f"INPUT {args.input}: cannot read: {e.strerror or e}") from None
    r = result.report
    skipped = ", ".join(f"{k}: {v}" for k, v in sorted(result.skipped.items())) or "none"
    say(
        f"{result.total} records: {result.kept} kept, {r.dropped} near-duplicates in "
        f"{len(r.clusters)} clusters; not fingerprinted (kept): {skipped}"
    )
    if args.output:
        say(f"kept records written to {args.output} ({out_fmt})")
    write_output(render(r, args.format), args.report)
    if args.report:
        say(f"report written to {args.report}")
    return 0


def add_parsers(sub: Any) -> None:
    p = sub.add_parser(
        "dedup",
        help="near-duplicates in an exported feed (JSON lines, JSON, CSV, XML)",
        description="Find every near-duplicate pair in a Scrapy feed at once and write the "
        "kept records (each cluster's first) with -o. Reads JSON lines (.jsonl/.jl), JSON "
        "arrays (.json, as scrapy crawl -O items.json writes), CSV and XML, streaming. The "
        "report goes to standard output, or to --report FILE; messages and progress go to "
        "standard error.",
    )
    p.add_argument("input", help="the feed file (format from its extension or --input-format)")
    p.add_argument(
        "-o",
        "--output",
        help="write the kept records here (format from its extension or --output-format)",
    )
    p.add_argument("--report", help="write the report to this file instead of standard output")
    p.add_argument(
        "--scope",
        choices=("global", "domain", "host"),
        default="global",
        help="compare a record with every record (global, the default), or only with records "
        "of the same registrable domain or host name of its key (the URL)",
    )
    p.add_argument(
        "--format", choices=REPORT_FORMATS, default="text", help="report format (default text)"
    )
    p.add_argument(
        "--input-format",
        choices=FEED_FORMATS,
        help="format of INPUT, if its extension does not say",
    )
    p.add_argument(
        "--output-format", choices=FEED_FORMATS, help="format of -o, if its extension does not say"
    )
    p.add_argument("--text-field", default="text", help="field holding the text (default text)")
    p.add_argument(
        "--html-field",
        default="html",
        help="field holding HTML, used when the text field is absent (default html)",
    )
    p.add_argument(
        "--key-field", default="url", help="field naming a record in the report (default url)"
    )
    add_rule_args(p, "(default: what crawls use, cosine 0.93)")
    p.add_argument(
        "--workers",
        type=bounded_int(1, 256),
        default=None,
        help="fingerprinting processes (default: one per CPU)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=cmd_dedup)
