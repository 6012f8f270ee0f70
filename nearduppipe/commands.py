"""``scrapy neardup``: show the near-duplicate stores of the current project's spiders.

Only the standard library and Scrapy are imported at module level: Scrapy loads every
registered command for every ``scrapy`` invocation, so a broken optional dependency of
nearduppipe must not break ``scrapy crawl``.
"""

from __future__ import annotations

import argparse
import datetime
import os
from typing import Any, ClassVar

from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError
from scrapy.spiderloader import get_spider_loader


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
        parser.add_argument("--store", help="a store URI to show instead of the spiders' stores")
        parser.add_argument(
            "--format",
            choices=["text", "json", "csv", "html"],
            help="print the full report (as nearduppipe report does) instead of the summary",
        )
        parser.add_argument("-o", "--output", help="with --format: write the report to this file")

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        assert self.settings is not None
        from nearduppipe._runtime import default_store_uri
        from nearduppipe.stores import StoreError, open_store
        from nearduppipe.stores.base import _scheme
        from nearduppipe.stores.sqlite import sqlite_path

        if opts.store:
            targets = [("default", opts.store)]
        else:
            loader = get_spider_loader(self.settings)
            names = args or sorted(loader.list())
            unknown = [n for n in names if n not in loader.list()]
            if unknown:
                raise UsageError(f"unknown spider(s): {', '.join(unknown)}")
            configured = self.settings.get("NEARDUP_STORE")
            targets = [
                (n, configured.replace("{spider}", n) if configured else default_store_uri(n))
                for n in names
            ]
        for name, uri in targets:
            print(f"spider {name}: {uri}")
            if _scheme(uri) == "sqlite" and not sqlite_path(uri).exists():
                print("  no store yet (nothing crawled with nearduppipe)")
                continue
            options = {"read_only": True} if _scheme(uri) == "sqlite" else {"name": name}
            try:
                with open_store(uri, **options) as store:
                    if opts.format:
                        from nearduppipe.report import render, report_from_store

                        text = render(report_from_store(store), opts.format)
                        if opts.output:
                            with open(opts.output, "w", encoding="utf-8") as f:
                                f.write(text)
                            print(f"  report written to {opts.output}")
                        else:
                            print(text)
                        continue
                    info = store.info()
                    last = max((d.decided_at for d in store.decisions()), default=None)
            except StoreError as e:
                print(f"  cannot read: {e}")
                self.exitcode = 1
                continue
            total = info.entries + info.decisions
            rate = f"{info.decisions / total:.1%}" if total else "n/a"
            print(f"  fingerprints stored (unique pages): {info.entries}")
            print(f"  near-duplicates dropped:            {info.decisions} ({rate} of pages seen)")
            if last is not None:
                when = datetime.datetime.fromtimestamp(last).isoformat(timespec="seconds")
                print(f"  last near-duplicate at:             {when}")
            if _scheme(uri) == "sqlite":
                size = os.path.getsize(sqlite_path(uri))
                print(f"  file size:                          {size / 1e6:.1f} MB")
