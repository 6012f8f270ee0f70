"""A self-contained HTML report: inline CSS, inline SVG charts, a small inline script for sorting
and filtering, and no reference to anything outside the file, so it opens on an offline machine.

For pairs whose texts are known (``Report.texts``: batch dedup always has them; a store only when
the crawl kept text samples), the two texts are shown side by side with the differences marked.
"""

from __future__ import annotations

import difflib
import json
import re
from html import escape

from ..stores.report import Report

__all__ = ["render_html"]

MAX_TABLE_ROWS = 2000
MAX_PAIRS = 100
_TOKEN = re.compile(r"[\u3400-\u9fff]|\w+|\s+|[^\w\s]")

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI","Noto Sans CJK SC",sans-serif;margin:24px;color:#1d2330}
h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:28px 0 8px}
.cards{display:flex;gap:12px;flex-wrap:wrap}.card{border:1px solid #d7dce5;border-radius:8px;padding:10px 16px;min-width:130px}
.card b{display:block;font-size:22px}.muted{color:#687082}
table{border-collapse:collapse;width:100%}th,td{border-bottom:1px solid #e3e6ec;padding:4px 8px;text-align:left;vertical-align:top}
th{cursor:pointer;background:#f4f6f9;user-select:none}th:after{content:" ⇅";color:#aab}
input{padding:5px 8px;width:320px;border:1px solid #c9ced8;border-radius:6px}
.pair{display:grid;grid-template-columns:1fr 1fr;gap:12px}.pair[hidden]{display:none}.pair pre{white-space:pre-wrap;border:1px solid #d7dce5;border-radius:6px;padding:8px;max-height:480px;overflow:auto;margin:0}
del{background:#ffd7d5;text-decoration:none}ins{background:#cdf3d2;text-decoration:none}
svg text{font-size:11px;fill:#394050}
"""

_SCRIPT = """
(function(){
  var table=document.getElementById('clusters'), filter=document.getElementById('filter');
  filter.addEventListener('input',function(){
    var q=filter.value.toLowerCase();
    Array.prototype.forEach.call(table.tBodies[0].rows,function(r){
      r.style.display=r.textContent.toLowerCase().indexOf(q)>=0?'':'none';});
  });
  Array.prototype.forEach.call(table.tHead.rows[0].cells,function(th,col){
    th.addEventListener('click',function(){
      var rows=Array.prototype.slice.call(table.tBodies[0].rows), asc=th.dataset.asc!=='1';
      th.dataset.asc=asc?'1':'0';
      rows.sort(function(a,b){
        var x=a.cells[col].dataset.v||a.cells[col].textContent, y=b.cells[col].dataset.v||b.cells[col].textContent;
        var nx=parseFloat(x), ny=parseFloat(y);
        var c=(!isNaN(nx)&&!isNaN(ny))?nx-ny:x.localeCompare(y);
        return asc?c:-c;});
      rows.forEach(function(r){table.tBodies[0].appendChild(r);});
    });
  });
  var pick=document.getElementById('pair-pick');
  if(pick){pick.addEventListener('change',function(){
    Array.prototype.forEach.call(document.querySelectorAll('.pair'),function(p){p.hidden=p.id!==pick.value;});
  });}
})();
"""


def _bar_chart(title: str, labels: list[str], values: list[float], fmt: str, ident: str) -> str:
    if not values:
        return f'<p class="muted" id="{ident}">{escape(title)}: no data</p>'
    width, bar, gap, left = 640, 18, 6, 170
    height = len(values) * (bar + gap) + 10
    peak = max(values) or 1.0
    rows = []
    for n, (label, v) in enumerate(zip(labels, values, strict=True)):
        y = 5 + n * (bar + gap)
        w = max(1.0, (width - left - 70) * v / peak)
        rows.append(
            f'<text x="{left - 6}" y="{y + 13}" text-anchor="end">{escape(label[:28])}</text>'
            f'<rect x="{left}" y="{y}" width="{w:.1f}" height="{bar}" fill="#4c78a8"><title>{escape(label)}: {fmt.format(v)}</title></rect>'
            f'<text x="{left + w + 4:.1f}" y="{y + 13}">{fmt.format(v)}</text>'
        )
    return (
        f'<svg id="{ident}" role="img" aria-label="{escape(title)}" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" xmlns="http://www.w3.org/2000/svg">{"".join(rows)}</svg>'
    )


def _marked(a: str, b: str) -> tuple[str, str]:
    ta, tb = _TOKEN.findall(a), _TOKEN.findall(b)
    out_a, out_b = [], []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, ta, tb, autojunk=False).get_opcodes():
        sa, sb = escape("".join(ta[i1:i2])), escape("".join(tb[j1:j2]))
        if op == "equal":
            out_a.append(sa)
            out_b.append(sb)
        else:
            if sa:
                out_a.append(f"<del>{sa}</del>")
            if sb:
                out_b.append(f"<ins>{sb}</ins>")
    return "".join(out_a), "".join(out_b)


def _pairs_section(report: Report) -> str:
    pairs = [
        (c.original, x.key, x.distance)
        for c in report.clusters
        for x in c.duplicates
        if c.original in report.texts and x.key in report.texts
    ][:MAX_PAIRS]
    if not pairs:
        return (
            '<p class="muted" id="no-texts">The texts of these pages were not kept, so no pair can be '
            "compared here: set <code>NEARDUP_KEEP_TEXT</code> (characters per page) for the crawl. "
            "A batch <code>nearduppipe dedup</code> report always has them.</p>"
        )
    options, panes = [], []
    for n, (a, b, d) in enumerate(pairs):
        ma, mb = _marked(report.texts[a], report.texts[b])
        options.append(
            f'<option value="pair{n}">d={d}: {escape(b[:80])} ≈ {escape(a[:80])}</option>'
        )
        panes.append(
            f'<div class="pair" id="pair{n}"{"" if n == 0 else " hidden"}>'
            f"<div><b>original</b> {escape(a)}<pre>{ma}</pre></div>"
            f"<div><b>near-duplicate</b> (distance {d}) {escape(b)}<pre>{mb}</pre></div></div>"
        )
    return f'<select id="pair-pick">{"".join(options)}</select>' + "".join(panes)


def _sources_table(report: Report) -> str:
    """A store's counts split by who checked: the middleware's pages, the pipeline's items."""
    if report.pages is None or report.items is None:
        return ""
    names = (
        "checked",
        "unique",
        "dropped",
        "revisits_unchanged",
        "revisits_changed",
        "again",
        "claimed",
    )
    head = "".join(f"<th>{n.replace('_', ' ')}</th>" for n in names)
    rows = "".join(
        f"<tr><td>{what}</td>" + "".join(f"<td>{t.as_dict()[n]}</td>" for n in names) + "</tr>"
        for what, t in (("pages", report.pages), ("items", report.items))
    )
    return (
        f'<table id="sources"><thead><tr><th></th>{head}</tr></thead><tbody>{rows}</tbody></table>'
    )


def _keep_card(report: Report) -> str:
    """A batch's keep rule: which copy of each group it kept."""
    if report.keep is None:
        return ""
    k = report.keep
    return (
        f'<div class="card" id="keep-rule">kept by --keep {escape(k.rule)} ({k.other_than_first}'
        f" of {k.groups} groups not their first)<b>{escape(k.rule)}</b></div>"
    )


def render_html(report: Report) -> str:
    dist = sorted(report.distances.items())
    domains = [d for d in report.domains if d.seen][:20]
    rows = []
    for n, c in enumerate(report.clusters[:MAX_TABLE_ROWS]):
        dups = "<br>".join(
            f"d={x.distance} {escape(x.key)}" + (f" ×{x.drops}" if x.drops > 1 else "")
            for x in c.duplicates[:20]
        )
        more = f"<br>… {len(c.duplicates) - 20} more" if len(c.duplicates) > 20 else ""
        mean = sum(x.distance for x in c.duplicates) / len(c.duplicates)
        rows.append(
            f"<tr><td data-v='{n}'>{n}</td><td>{escape(c.original)}</td><td data-v='{c.size}'>{c.size}</td>"
            f"<td data-v='{c.drops}'>{c.drops}</td>"
            f"<td data-v='{mean:.3f}'>{mean:.1f}</td><td>{dups}{more}</td></tr>"
        )
    data = json.dumps(report.to_dict(max_clusters=0)["summary"])
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>nearduppipe report</title>
<meta name="viewport" content="width=device-width, initial-scale=1"><style>{_CSS}</style></head>
<body>
<h1>nearduppipe report</h1><div class="muted">{escape(report.source)}</div>
<script type="application/json" id="summary-data">{data}</script>
<div class="cards" id="summary">
<div class="card">pages seen, all crawls<b>{report.seen}</b></div><div class="card">unique<b>{report.unique}</b></div>
<div class="card">dropped<b>{report.dropped}</b></div><div class="card">duplicate rate (of {report.judged} judged)<b>{report.rate:.1%}</b></div>
<div class="card">clusters<b>{len(report.clusters)}</b></div>
<div class="card">revisits unchanged<b>{report.revisits_unchanged}</b></div><div class="card">revisits changed<b>{report.revisits_changed}</b></div>{_keep_card(report)}</div>
{_sources_table(report)}
<h2>Distance of near-duplicates to their original</h2>
{_bar_chart("distance histogram", [f"distance {d}" for d, _ in dist], [float(n) for _, n in dist], "{:.0f}", "chart-distances")}
<h2>Duplicate rate per domain</h2>
{_bar_chart("duplicate rate per domain", [d.host for d in domains], [d.rate * 100 for d in domains], "{:.1f}%", "chart-domains")}
<h2>Clusters</h2>
<p><input id="filter" placeholder="filter by URL or key" aria-label="filter clusters"></p>
<table id="clusters"><thead><tr><th>#</th><th>original</th><th>pages</th><th>drops</th><th>mean distance</th><th>near-duplicates</th></tr></thead>
<tbody>{"".join(rows)}</tbody></table>
{"" if len(report.clusters) <= MAX_TABLE_ROWS else f'<p class="muted">first {MAX_TABLE_ROWS} of {len(report.clusters)} clusters; the JSON and CSV reports list all</p>'}
<h2>Compare a pair</h2>
{_pairs_section(report)}
<script>{_SCRIPT}</script>
</body></html>
"""
