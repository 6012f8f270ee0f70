"""Post-crawl reports: a report model built from a store (or a batch dedup), and renderers."""

from __future__ import annotations

from ..stores.report import Cluster, Duplicate, Report, report_from_store
from .render import FORMATS, render

__all__ = ["FORMATS", "Cluster", "Duplicate", "Report", "render", "report_from_store"]
