"""``nearduppipe.Addon``: the one-line way to enable nearduppipe in a Scrapy project::

    ADDONS = {"nearduppipe.Addon": 0}

It adds the crawl's state as an extension (``nearduppipe.runtime.NearDupRuntime``: the store,
the workers, the stats), the downloader middleware (543), the spider middleware (543: it drops
the items of pages whose verdict says so) and the pipeline (300) unless the project lists them
already (at whatever priority, even ``None`` to switch one off), and puts every ``NEARDUP_*``
default in the
settings at the ``addon`` priority, below the project's and the command line's, so that
``crawler.settings`` (and the ``settings`` object of ``scrapy shell``) shows them. (``scrapy
settings`` itself loads no add-on, in any Scrapy version: it starts no crawler process.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .settings import DEFAULTS

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

__all__ = ["Addon"]

MIDDLEWARE_PRIORITY = 543
PIPELINE_PRIORITY = 300
EXTENSION_PRIORITY = 100


class Addon:
    """Scrapy add-on (``ADDONS = {"nearduppipe.Addon": 0}``)."""

    @classmethod
    def update_pre_crawler_settings(cls, settings: BaseSettings) -> None:
        """The process-wide settings (``CrawlerProcess.settings``) get the defaults too."""
        _set_defaults(settings)

    def update_settings(self, settings: BaseSettings) -> None:
        from .middlewares import NearDupMiddleware, NearDupSpiderMiddleware
        from .pipelines import NearDupPipeline
        from .runtime import NearDupRuntime

        _set_defaults(settings)
        settings.setdefault_in_component_priority_dict(
            "EXTENSIONS", NearDupRuntime, EXTENSION_PRIORITY
        )
        settings.setdefault_in_component_priority_dict(
            "DOWNLOADER_MIDDLEWARES", NearDupMiddleware, MIDDLEWARE_PRIORITY
        )
        settings.setdefault_in_component_priority_dict(
            "SPIDER_MIDDLEWARES", NearDupSpiderMiddleware, MIDDLEWARE_PRIORITY
        )
        settings.setdefault_in_component_priority_dict(
            "ITEM_PIPELINES", NearDupPipeline, PIPELINE_PRIORITY
        )


def _set_defaults(settings: BaseSettings) -> None:
    # settings.set() with a lower priority than the current one is a no-op: a value from the
    # project or the command line stays.
    for name, value in DEFAULTS.items():
        settings.set(name, value, priority="addon")
