"""``scrapy neardup``: show the near-duplicate stores of the current project's spiders.

Each spider's store is found the way its crawl finds it: the project's settings with the
spider's ``custom_settings`` applied (``NEARDUP_STORE``, ``{spider}``, the default sqlite file,
the Redis prefix ``neardup:<spider>``, ``NEARDUP_TTL``), and read with the layout the store
records, read only.

Only the standard library and Scrapy are imported at module level: Scrapy loads every
registered command for every ``scrapy`` invocation, so a broken optional dependency of
nearduppipe must not break ``scrapy crawl``.
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
from pathlib import Path
from typing import Any, ClassVar

from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError
from scrapy.spiderloader import get_spider_loader

from nearduppipe.report.render import tally_text


def _given_store(uri: str) -> str:
    """``--store`` as typed: a relative sqlite path that exists from here is that file; else it
    is found where a crawl with the same ``NEARDUP_STORE`` keeps it (the project's data dir)."""
    from nearduppipe.runtime.lifecycle import resolve_store_uri

    if "{spider}" in uri:
        raise UsageError("--store names one store: {spider} needs a spider (use -s NEARDUP_STORE)")
    path = _store_file(uri)
    if path is None or path.exists():
        return uri
    return resolve_store_uri(uri, "")


def _store_file(uri: str) -> Path | None:
    """The local file a store URI names (a sqlite store), or None."""
    from nearduppipe.stores import find_backend

    backend = find_backend(uri)
    return None if backend is None else backend.file(uri)


class NearDupCommand(ScrapyCommand):
    requires_project = True
    requires_crawler_process = False
    default_settings: ClassVar[dict[str, Any]] = {"LOG_ENABLED": False}

    def syntax(self) -> str:
        return "[options] [SPIDER ...]"

    def short_desc(self) -> str:
        return "Show the near-duplicate fingerprint stores of this project's spiders"

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument(
            "--store",
            help="a store URI to show instead of the spiders' stores (a relative sqlite path: "
            "from here if it exists, else in the project's data dir, as NEARDUP_STORE)",
        )
        parser.add_argument(
            "--format",
            choices=["text", "json", "csv", "html"],
            help="print one store's full report (as nearduppipe report does) instead of "
            "the summary; only the report goes to standard output",
        )
        parser.add_argument("-o", "--output", help="with --format: write the report to this file")

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        from nearduppipe.cli._io import CliError, redact
        from nearduppipe.settings import NearDupConfigError
        from nearduppipe.stores import StoreError

        try:
            self._run(args, opts)
            sys.stdout.flush()
        except BrokenPipeError:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            self.exitcode = 141
        except (CliError, StoreError, NearDupConfigError) as e:
            print(f"scrapy neardup: {redact(str(e))}", file=sys.stderr)
            self.exitcode = 2

    def _targets(self, args: list[str], opts: argparse.Namespace) -> list[tuple[str, str, Any]]:
        """``(spider, store URI, its NearDupConfig)`` per spider asked for."""
        from nearduppipe.runtime.lifecycle import resolve_store_uri
        from nearduppipe.settings import NearDupConfig, NearDupConfigError

        assert self.settings is not None
        if opts.store:
            return [
                ("(--store)", _given_store(opts.store), NearDupConfig.from_settings(self.settings))
            ]
        loader = get_spider_loader(self.settings)
        names = args or sorted(loader.list())
        unknown = [n for n in names if n not in loader.list()]
        if unknown:
            raise UsageError(f"unknown spider(s): {', '.join(unknown)}")
        targets: list[tuple[str, str, Any]] = []
        for name in names:
            settings = self.settings.copy()
            loader.load(name).update_settings(settings)  # custom_settings, as a crawl does
            try:
                config = NearDupConfig.from_settings(settings)
            except NearDupConfigError as e:  # said with the spider's name; the others go on
                targets.append((name, "", e))
                continue
            configured = config.redis_url if config.store == "redis" else config.store
            # the same file or server the crawl opens (relative paths in the data directory)
            targets.append((name, resolve_store_uri(configured, name), config))
        return targets

    def _run(self, args: list[str], opts: argparse.Namespace) -> None:
        from nearduppipe.cli._io import CliError, redact, refuse_directory, say
        from nearduppipe.stores import StoreError

        targets = self._targets(args, opts)
        if opts.output and not opts.format:
            raise UsageError("-o needs --format")
        refuse_directory(opts.output, "-o")
        if opts.format and len(targets) != 1:
            raise UsageError(
                f"--format reports one store; name one spider of {', '.join(t[0] for t in targets)}"
            )
        failed: list[tuple[str, Exception]] = []
        for name, uri, config in targets:
            if isinstance(config, Exception):
                failed.append((name, config))
                continue
            try:
                self._one(name, uri, config, opts)
            except (StoreError, CliError) as e:
                if len(targets) == 1:
                    raise
                failed.append((name, e))
        for name, error in failed:  # after the others' summaries, one line each, with why
            say(f"scrapy neardup: spider {name}: cannot read its store: {redact(str(error))}")
        if failed:
            if len(targets) == 1:
                raise failed[0][1]
            self.exitcode = 1

    def _one(self, name: str, uri: str, config: Any, opts: argparse.Namespace) -> None:
        """Summarise (or, with ``--format``, report) one spider's store."""
        from nearduppipe.cli._io import emit, redact, say, write_output
        from nearduppipe.cli._stores import is_redis, open_cli_store, uri_prefix

        header = f"spider {name}: {redact(uri)}"
        path = _store_file(uri)
        if path is not None and not path.exists():
            if opts.format:
                say(f"{header}: no store yet (nothing crawled with nearduppipe)")
                self.exitcode = 1
            else:
                emit(f"{header}\n  no store yet (nothing crawled with nearduppipe)\n")
            return
        options: dict[str, Any] = {}
        if is_redis(uri):
            if not opts.store:  # a spider's crawl uses neardup:<spider> unless told
                options["prefix"] = uri_prefix(uri) or f"neardup:{name}"
            if config.ttl is not None:
                options["ttl"] = config.ttl
        with open_cli_store(uri, read_only=True, **options) as store:
            if opts.format:
                from nearduppipe.report import render, report_from_store

                say(header)
                write_output(render(report_from_store(store), opts.format), opts.output)
                if opts.output:
                    say(f"  report written to {opts.output}")
                return
            info = store.info()
            last = max((d.decided_at for d in store.decisions()), default=None)
        # counts summed over every crawl of the store, as the crawls' neardup/ stats are
        dropped, total = info.dropped, info.pages_seen
        judged = info.unique + dropped  # (the one base of duplicate rates: stores/report.py)
        rate = f"{dropped / judged:.1%} of {judged} pages judged" if judged else "n/a"
        trimmed = f", {info.decisions_trimmed} oldest trimmed" if info.decisions_trimmed else ""
        lines = [
            header,
            f"  pages seen by every crawl:          {total}",
            f"  pages stored (one per key):         {info.entries}",
            f"  near-duplicates dropped:            {dropped} ({rate}{trimmed})",
            f"  revisits of stored pages:           {info.revisits_unchanged} unchanged, "
            f"{info.revisits_changed} changed",
            f"  by the middleware (pages):          {tally_text(info.pages)}",
            f"  by the pipeline (items):            {tally_text(info.items)}",
            f"  rule:                               {info.rule.describe()}",
            f"  text extracted by:                  {info.rule.extractor}, extraction version "
            f"{info.rule.extraction}",
        ]
        if last is not None:
            when = datetime.datetime.fromtimestamp(last).isoformat(timespec="seconds")
            lines.append(f"  last near-duplicate at:             {when}")
        if path is not None:
            size = os.path.getsize(path)
            lines.append(f"  file size:                          {size / 1e6:.1f} MB")
        emit("\n".join(lines) + "\n")
