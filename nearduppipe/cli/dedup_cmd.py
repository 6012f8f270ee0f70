"""``dedup``: near-duplicates in exported feeds and WARC files, with the kept records written
out, and every near-duplicate pair with ``--pairs``."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import sys
from pathlib import Path
from typing import Any

from ..batch.compression import MissingExtraError, OutputError
from ..batch.feeds import FeedError, feed_format
from ..batch.fs import full_name
from ..batch.inputs import Input, InputError, check_extras, expand_inputs
from ..batch.pairs_out import check_pyarrow, pairs_format
from ..fingerprint.rule import Rule
from ..fingerprint.versions import settled_extraction
from ..stores import Store
from ..stores.report import KeepChoice
from ._io import (
    CliError,
    atomic_output,
    redact,
    refuse_directory,
    refuse_overwriting_inputs,
    refuse_unreachable_url,
    say,
    write_output,
)
from ._stores import open_cli_store, rule_from_args

REPORT_FORMATS = ["text", "json", "csv", "html"]


class _Bars:
    """tqdm bars on stderr, each closed by :meth:`close` too: a run that fails mid-pass ends
    its bar's line before the error's line is printed."""

    def __init__(self) -> None:
        self.opened: list[Any] = []

    def __call__(self, **options: Any) -> Any:
        from tqdm import tqdm

        bar = tqdm(file=sys.stderr, dynamic_ncols=True, **options)
        self.opened.append(bar)
        return bar

    def close(self) -> None:
        for bar in self.opened:
            bar.close()


def _progress_bars(enabled: bool) -> _Bars | None:
    return _Bars() if enabled else None


def _inputs(args: argparse.Namespace) -> list[Input]:
    from ..batch.inputs import read_listing

    try:
        names = list(args.input)
        for listing in args.inputs_from or ():
            names += read_listing(listing)
        if not names:
            raise CliError("no input: name files, globs or URLs, or --inputs-from FILE")
        inputs, repeats = expand_inputs(names, args.input_format)
        check_extras(inputs)
    except InputError as e:
        raise CliError(f"INPUT {e}") from None
    except FeedError as e:
        raise CliError(str(e)) from None
    for name in repeats:
        say(f"INPUT {name}: named more than once; read once, at its first place")
    return inputs


def _check_outputs(args: argparse.Namespace, inputs: list[Input]) -> str | None:
    """The -o format; every output refused before any work when it is a directory, an input or
    another output."""
    names = [full_name(i.path) for i in inputs]
    outputs = [("-o", args.output), ("--report", args.report), ("--pairs", args.pairs)]
    for what, path in outputs:
        refuse_directory(path, what)
        refuse_overwriting_inputs(path, names, what=what)
        refuse_unreachable_url(path, what)
    for n, (what, path) in enumerate(outputs):
        for other, path2 in outputs[n + 1 :]:
            if path and path2 and path != "-" and Path(path).resolve() == Path(path2).resolve():
                raise CliError(f"{other} {path2}: is also the {what} output")
    out_fmt = None
    try:
        out_fmt = feed_format(args.output, args.output_format) if args.output else None
    except FeedError as e:
        raise CliError(str(e)) from None
    if args.output and out_fmt != "jsonl" and any(i.is_warc for i in inputs):
        raise CliError(
            f"-o {args.output}: with a WARC input the kept records are written as JSON lines "
            f"(a WARC record is named by URL, file and offset); name a .jsonl file"
        )
    if args.pairs and pairs_format(args.pairs) == "parquet":
        try:
            check_pyarrow()
        except MissingExtraError as e:
            raise CliError(str(e)) from None
    return out_fmt


def _engine(args: argparse.Namespace) -> Any:
    """The engine --engine names (None: the local one, made by dedup_records)."""
    if args.engine == "local":
        if args.master or args.scheduler:
            raise CliError("--master is for --engine spark, --scheduler for --engine dask")
        return None
    try:
        if args.engine == "spark":
            if args.scheduler:
                raise CliError("--scheduler is for --engine dask (Spark takes --master)")
            from ..batch.engine_spark import SparkEngine

            return SparkEngine(args.master)
        if args.master:
            raise CliError("--master is for --engine spark (Dask takes --scheduler)")
        from ..batch.engine_dask import DaskEngine

        return DaskEngine(args.scheduler, args.workers)
    except MissingExtraError as e:
        raise CliError(str(e)) from None


def _open_against(args: argparse.Namespace) -> Store | None:
    """The ``--against`` store (read-only unless ``--add``); with ``--add``, a store that does
    not exist yet is made with this run's rule, scope and extractor."""
    if args.add and not args.against:
        raise CliError("--add needs --against STORE")
    if not args.against:
        return None
    try:
        return open_cli_store(args.against, read_only=not args.add, must_exist=True)
    except CliError:
        if not args.add:
            raise
    return open_cli_store(args.against, read_only=False, rule=_run_rule(args))


def _checked_extraction(args: argparse.Namespace, extractor: str) -> None:
    """One line for an ``--extraction`` version ``extractor`` does not have (0 included: it is
    no version, though a rule reads it as the newest)."""
    if args.extraction is None:
        return
    try:
        if args.extraction < 1:
            raise ValueError("a version is 1 or more")
        settled_extraction(extractor, args.extraction)
    except ValueError as e:
        raise CliError(f"--extraction {args.extraction}: {e}") from None


def _run_rule(args: argparse.Namespace) -> Rule:
    """The rule of a run without a store (or making one with ``--add``): the flags', on the
    extractor's newest extraction version unless ``--extraction`` names another."""
    extractor = args.extractor or "trafilatura"
    _checked_extraction(args, extractor)
    return dataclasses.replace(
        rule_from_args(args) or Rule(),
        scope=args.scope or "global",
        extractor=extractor,
        extraction=args.extraction or 0,  # (0: the newest, as a crawl's new store)
    )


def cmd_dedup(args: argparse.Namespace) -> int:
    from ..batch.against import Against, against_rule
    from ..batch.precomputed import MixedFingerprintsError
    from ..batch.records import MissingFieldError, dedup_records
    from ..fingerprint.page import FingerprintParams
    from ..fingerprint.text import ExtractorUnavailable, require_extractor
    from ..report import render
    from ..stores import StoreError

    inputs = _inputs(args)
    out_fmt = _check_outputs(args, inputs)
    try:
        with contextlib.ExitStack() as stack:
            store = _open_against(args)
            against = None
            if store is not None:
                stack.enter_context(store)
                # the store's own scope and extractor unless given; a contradiction refused
                args.scope = args.scope or store.rule.scope
                args.extractor = args.extractor or store.rule.extractor
                _checked_extraction(args, args.extractor)
                try:
                    rule = against_rule(
                        store,
                        scope=args.scope,
                        extractor=args.extractor,
                        rule=rule_from_args(args),
                        where=f"--against {redact(args.against)}",
                        extraction=args.extraction,
                    )
                except StoreError as e:
                    raise CliError(str(e)) from None
                against = Against(store, add=args.add)
            else:
                rule = _run_rule(args)
            try:  # (the extra missing: one line naming it, before any input is read)
                params = FingerprintParams(
                    extractor=require_extractor(rule.extractor), extraction=rule.extraction
                )
            except ExtractorUnavailable as e:
                raise CliError(str(e)) from None
            engine = _engine(args)
            if engine is not None:
                stack.callback(engine.close)
            out = None
            if args.output:
                out = stack.enter_context(atomic_output(args.output, newline=""))
            pairs_out = None
            if args.pairs:
                pairs_out = stack.enter_context(atomic_output(args.pairs, newline=""))
            bars = _progress_bars(not args.quiet)
            if bars is not None:
                stack.callback(bars.close)
            result = dedup_records(
                inputs,
                args.text_field,
                args.html_field,
                args.key_field,
                rule,
                params=params,
                output=out,
                workers=args.workers,
                progress=bars,
                output_format=out_fmt,
                keep_texts=args.format == "html",
                keep=args.keep,
                engine=engine,
                fingerprint_field=args.fingerprint_field or None,
                against=against,
                max_record_bytes=args.max_record_bytes,
                # (written by dedup_records before --add's adds: a failure adds nothing)
                pairs=pairs_out.buffer if pairs_out is not None else None,
                pairs_format=pairs_format(args.pairs) if args.pairs else "jsonl",
            )
            rows = result.pairs_written
    except (MissingFieldError, MixedFingerprintsError) as e:
        raise CliError(str(e)) from None
    except MissingExtraError as e:
        raise CliError(f"INPUT {e}") from None
    except OutputError as e:  # (not an input's fault: no INPUT before it)
        raise CliError(str(e)) from None
    except FeedError as e:
        raise CliError(f"INPUT {e}") from None
    except OSError as e:
        if e.filename:
            raise CliError(f"INPUT {e.filename}: cannot read: {e.strerror or e}") from None
        # (no file named: not an input's fault, e.g. the engine's processes failed to start)
        raise CliError(f"{e.strerror or e} (while reading {', '.join(args.input)})") from None
    by = result.chosen_by
    chose = by.get(args.keep, 0) if args.keep != "first" else 0
    r = dataclasses.replace(result.report, keep=KeepChoice(args.keep, sum(by.values()), chose))
    skipped = ", ".join(f"{k}: {v}" for k, v in sorted(result.skipped.items())) or "none"
    across = f" in {len(inputs)} inputs" if len(inputs) > 1 else ""
    say(
        f"{result.total} records{across}: {result.kept} kept, {r.dropped} near-duplicates in "
        f"{len(r.clusters)} clusters; not fingerprinted (kept): {skipped}"
    )
    if args.fingerprint_field:
        say(
            f"{result.carried} records carried fingerprints (--fingerprint-field "
            f"{args.fingerprint_field}), {result.extracted} extracted"
        )
    if result.against is not None:
        a, looked = result.against, result.against.looked_up
        later = sum(m.status == "superseded" for m in a.matches)
        say(
            f"against {redact(args.against)}: {len(a.matches) - later} records near a stored "
            f"page ({looked['unchanged']} already stored under their key, "
            f"{looked['duplicate']} near another key); "
            + (f"{a.added} added" if args.add else "nothing added (read-only; --add adds)")
            + (f"; {later} superseded by a later record of their key" if later else "")
        )
        if a.refused_written:
            say(
                f"{a.refused_written} records written to {args.output} were then refused by the "
                f"store (another writer stored a near page meanwhile): {args.output} is not a "
                f"regular file, so it could not be written again without them"
            )
        if a.unstorable:
            more = a.unstorable - len(a.unstorable_named)
            say(
                f"{a.unstorable} kept records not added: the store cannot hold their key (not "
                f"valid Unicode text, or over 65,536 characters): "
                + ", ".join(a.unstorable_named + ([f"{more} more"] if more else []))
            )
    say(
        f"kept by --keep {args.keep} ({args.engine} engine): {chose} of {sum(by.values())} "
        f"groups kept a record other than their first; every dropped record is near its kept one"
    )
    if result.oversized:  # (the first few named)
        more = result.oversized - len(result.oversized_named)
        say(
            f"{result.oversized} records over --max-record-bytes {args.max_record_bytes} not "
            f"read (kept, not fingerprinted: record_too_large): "
            + ", ".join(result.oversized_named + ([f"{more} more"] if more else []))
        )
    if result.ignored:
        ignored = ", ".join(f"{k}: {v}" for k, v in sorted(result.ignored.items()))
        say(f"WARC records skipped (not an HTML response): {ignored}")
    if args.output:
        say(f"kept records written to {args.output} ({out_fmt})")
    if args.pairs:
        say(f"{rows} near-duplicate pairs written to {args.pairs} ({pairs_format(args.pairs)})")
    write_output(render(r, args.format), args.report)
    if args.report:
        say(f"report written to {args.report}")
    return 0
