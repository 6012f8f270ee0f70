"""Realistic portal pages for benchmarks: ~50 KB of HTML around a few thousand characters of
article text, the way news sites look (navigation menus, inline CSS and scripts, sidebars,
related-link lists, comments, a footer link farm, article markup with spans, links and figures).

Article texts are drawn, seeded, from the demo site's articles and the test corpus of Chinese
sentences, so every page is distinct unless made a variant of another on purpose.
"""

from __future__ import annotations

import html
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from sample_spider import articles  # noqa: E402

_ZH_POOL = [
    *articles.ZH_METRO,
    *articles.ZH_RAIN,
    *articles.ZH_AI,
    *(ROOT / "tests" / "data" / "zh_sentences.txt").read_text("utf-8").split(),
]
_EN_POOL = [*articles.EN_LIBRARY, *articles.EN_MARATHON]

_CSS = "\n".join(
    f".c{i}{{margin:{i % 7}px {i % 5}px;padding:{i % 3}px;color:#{i * 2654435761 % 0xFFFFFF:06x};"
    f"font-size:{12 + i % 6}px;line-height:1.{i % 9}}}"
    for i in range(120)
)
_JS = "\n".join(
    f"window.__track{i}=function(e){{var d={{id:{i},t:Date.now(),u:location.href}};"
    f"navigator.sendBeacon&&navigator.sendBeacon('/log?e='+e+'&i={i}',JSON.stringify(d));}};"
    for i in range(80)
)


def article_paragraphs(rng: random.Random, chars: int, lang: str = "zh") -> list[str]:
    pool = _ZH_POOL if lang == "zh" else _EN_POOL
    paras: list[str] = []
    total = 0
    while total < chars:
        para = "".join(rng.choice(pool) for _ in range(rng.randint(2, 4)))
        paras.append(para)
        total += len(para)
    return paras


_WORDS = {
    "zh": [
        "新闻",
        "财经",
        "体育",
        "娱乐",
        "科技",
        "汽车",
        "房产",
        "旅游",
        "教育",
        "健康",
        "Video",
        "App",
    ],
    "en": [
        "News",
        "Business",
        "Sport",
        "Culture",
        "Tech",
        "Cars",
        "Homes",
        "Travel",
        "Science",
        "Health",
        "Video",
        "App",
    ],
}
_LABELS = {  # the page's fixed chrome: (site, ad, info, figure, comment, hot, recommended, footer)
    "zh": (
        "城市门户网",
        "广告:家电大促,全场五折起 · 限时抢购 · 立即下单",
        "来源:城市门户网 编辑:张三",
        "图{i} 资料图片",
        "网友{n}:说得好!{i}",
        "热门排行",
        "推荐阅读",
        "版权所有 © 2026 城市门户网 · 京ICP备00000000号",
    ),
    "en": (
        "City Portal",
        "Advertisement: Black Friday deals, up to 50% off · Shop now",
        "By Jane Smith, City Portal staff",
        "Figure {i}: file photo",
        "reader{n}: well said! {i}",
        "Most read",
        "Recommended for you",
        "Copyright © 2026 City Portal Media Ltd. All rights reserved.",
    ),
}


def _links(rng: random.Random, n: int, prefix: str, lang: str = "zh") -> str:
    words = _WORDS[lang]
    channel = "频道" if lang == "zh" else "channel"
    return "".join(
        f'<li class="c{i % 120}"><a href="/{prefix}/{rng.randrange(10**6)}.html?from=nav&amp;pos={i}">'
        f"{rng.choice(words)}{rng.choice(words)}{channel} {i}</a></li>"
        for i in range(n)
    )


def portal_page(
    title: str,
    paragraphs: list[str],
    rng: random.Random,
    links: str = "",
    lang: str = "zh",
    site_seed: int | None = None,
) -> str:
    """One article on a portal page. ``lang`` is the language of the chrome; with ``site_seed``
    the top navigation and the footer are the same on every page (a site's fixed chrome), the
    ranking and recommendation lists and the comments still change from page to page."""
    site, ad, info, figure, comment, hot, rec, footer = _LABELS[lang]
    site_rng = rng if site_seed is None else random.Random(site_seed)
    body = []
    for i, p in enumerate(paragraphs):
        cut = len(p) // 3
        body.append(
            f'<p class="c{i % 120}"><span>{html.escape(p[:cut])}</span>'
            f"<strong>{html.escape(p[cut : cut + 6])}</strong>{html.escape(p[cut + 6 :])}</p>"
        )
        if i % 4 == 1:
            body.append(
                f'<figure><img src="/img/{rng.randrange(10**6)}.jpg" alt="">'
                f"<figcaption>{figure.format(i=i)}</figcaption></figure>"
            )
    topbar = _links(site_rng, 60, "nav", lang)
    comments = "".join(
        f'<div class="cm">{comment.format(n=rng.randrange(10**4), i=i)}</div>' for i in range(15)
    )
    hot_links = _links(rng, 40, "hot", lang)
    rec_links = _links(rng, 40, "rec", lang)
    footer_links = _links(site_rng, 100, "site", lang)
    return f"""<!DOCTYPE html><html lang="{"zh-CN" if lang == "zh" else "en"}"><head><meta charset="utf-8">
<title>{html.escape(title)} - {site}</title><style>{_CSS}</style>
<script>{_JS}</script></head><body>
<div id="topbar"><ul>{topbar}</ul></div>
<div class="ad">{ad}</div>
<div class="main"><div class="left"><article>
<h1>{html.escape(title)}</h1><div class="info">2026-11-22 08:00 {info}</div>
{"".join(body)}
{links}
</article>
<div class="comments">{comments}</div>
</div><div class="right"><h3>{hot}</h3><ol>{hot_links}</ol>
<h3>{rec}</h3><ul>{rec_links}</ul></div></div>
<div id="footer"><ul>{footer_links}</ul><p>{footer}</p></div>
</body></html>
"""


def make_site(
    root: Path, n_pages: int, dup_rate: float = 0.2, chars: int = 3000, seed: int = 1
) -> int:
    """Write ``n_pages`` portal pages linked from an index; ``dup_rate`` of them are copies of
    an earlier page under other chrome. Returns the number of distinct articles."""
    rng = random.Random(seed)
    originals: list[tuple[str, list[str]]] = []
    names = []
    for i in range(n_pages):
        if originals and rng.random() < dup_rate:
            title, paras = rng.choice(originals)
        else:
            title = f"第{i}号新闻 {rng.randrange(10**6)}"
            paras = article_paragraphs(rng, chars)
            originals.append((title, paras))
        name = f"p/{i}.html"
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(portal_page(title, paras, rng), encoding="utf-8")
        names.append(name)
    (root / "index.html").write_text(
        "<html><body>" + "".join(f'<a href="{n}">{n}</a>\n' for n in names) + "</body></html>",
        encoding="utf-8",
    )
    return len(originals)
