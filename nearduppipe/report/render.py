"""Report renderers: text for people, JSON and CSV with stable documented schemas for tools, and
a self-contained HTML page (see html.py)."""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Callable, Mapping

from ..batch.feeds import neutralise_formula
from ..stores.base import Tally
from ..stores.report import Report

__all__ = ["FORMATS", "render", "safe_text", "tally_text"]

# C0/C1 controls but newline and tab: keys and texts come from crawled pages, and an escape
# sequence in a URL must not reach the terminal that shows the report.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def safe_text(text: str) -> str:
    """Text made safe for a terminal: control characters (escape sequences, carriage returns
    that overwrite a line, bells) become U+FFFD."""
    return _CONTROL.sub("\ufffd", text)


def render_text(report: Report, max_clusters: int = 20) -> str:
    return safe_text(_render_text(report, max_clusters))


def _render_text(report: Report, max_clusters: int) -> str:
    members = sum(len(c.duplicates) for c in report.clusters)
    lines = [
        f"nearduppipe report: {report.source}",
        f"pages seen {report.seen} (all crawls): unique {report.unique}, dropped "
        f"{report.dropped} (duplicate rate {report.rate:.1%} of {report.judged} judged)",
        f"revisits by later crawls: {report.revisits_unchanged} unchanged, "
        f"{report.revisits_changed} changed"
        + (
            f"; {report.decisions_trimmed} oldest decisions trimmed from the store"
            if report.decisions_trimmed
            else ""
        ),
    ]
    if report.keep is not None:
        k = report.keep
        lines.append(
            f"kept of each group by --keep {k.rule}: {k.other_than_first} of {k.groups} groups "
            "kept a record other than their first"
        )
    if report.pages is not None and report.items is not None:
        lines += [
            f"{what:6s} {tally_text(t)}"
            for what, t in (("pages:", report.pages), ("items:", report.items))
        ]
    lines += [
        "",
        "distance histogram (decisions held):",
    ]
    peak = max(report.distances.values(), default=0)
    for d, n in sorted(report.distances.items()):
        bar = "#" * max(1, round(40 * n / peak)) if peak else ""
        lines.append(f"  {d:2d} {n:8d} {bar}")
    lines += ["", "near-duplicates dropped per domain, of its pages judged (stored plus drops):"]
    for s in report.domains[:30]:
        lines.append(f"  {s.host:40s} {s.dropped:7d} of {s.seen:7d}  {s.rate:6.1%}")
    lines += [
        "",
        f"largest clusters (of {len(report.clusters)}; {members} near-duplicate keys, each "
        "once; ×n: dropped n times):",
    ]
    for c in report.clusters[:max_clusters]:
        lines.append(f"  {c.original}  ({c.size} pages)")
        for x in c.duplicates[:10]:
            lines.append(f"    d={x.distance}  {x.key}" + (f"  ×{x.drops}" if x.drops > 1 else ""))
        if len(c.duplicates) > 10:
            lines.append(f"    … {len(c.duplicates) - 10} more")
    return "\n".join(lines) + "\n"


def tally_text(t: Tally | Mapping[str, int]) -> str:
    """One source's counts on one line (reports, ``info``, ``scrapy neardup``); a mapping is
    a :meth:`Tally.as_dict`."""
    d = t.as_dict() if isinstance(t, Tally) else t
    return (
        f"{d['checked']} checked: {d['unique']} unique, {d['dropped']} dropped, "
        f"{d['revisits_unchanged']} unchanged, {d['revisits_changed']} changed, "
        f"{d['again']} again, {d.get('claimed', 0)} claimed"
    )


def render_json(report: Report) -> str:
    return json.dumps(report.to_dict(), ensure_ascii=False, indent=1) + "\n"


CSV_COLUMNS = ["cluster", "original", "key", "distance", "host"]


def render_csv(report: Report) -> str:
    """One row per page of every cluster: the original (distance 0, key = original) first.
    Keys that a spreadsheet would run as formulas are prefixed with ``'`` (OWASP)."""
    from ..stores.report import host_of

    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for n, c in enumerate(report.clusters):
        original = neutralise_formula(c.original)
        writer.writerow([n, original, original, 0, neutralise_formula(host_of(c.original))])
        for x in c.duplicates:
            key, host = neutralise_formula(x.key), neutralise_formula(host_of(x.key))
            writer.writerow([n, original, key, x.distance, host])
    return out.getvalue()


def _render_html(report: Report) -> str:
    from .html import render_html

    return render_html(report)


FORMATS: dict[str, Callable[[Report], str]] = {
    "text": render_text,
    "json": render_json,
    "csv": render_csv,
    "html": _render_html,
}


def render(report: Report, fmt: str) -> str:
    if fmt not in FORMATS:
        raise ValueError(f"unknown report format {fmt!r}: use {', '.join(FORMATS)}")
    return FORMATS[fmt](report)
