"""Build the bundled demo site: real-looking pages with known near-duplicate groups.

``python -m sample_spider.site_builder DIR`` writes it to DIR; the files under
``sample_spider/site/`` were written this way. Tests use :func:`build_site` to serve the same
pages over HTTP and :data:`GROUPS` to know which pages must collapse into one.
"""

from __future__ import annotations

import html
import sys
from pathlib import Path

from . import articles as a

__all__ = ["GROUPS", "build_site", "pages"]


def _paras(paragraphs: list[str]) -> str:
    return "\n".join(f"    <p>{html.escape(p)}</p>" for p in paragraphs)


def template_a(title: str, date: str, paragraphs: list[str], views: int = 1024) -> str:
    """A news portal: top navigation, ad slots, related links, footer."""
    return f"""<!DOCTYPE html>
<html lang="zh-CN"><head><meta charset="utf-8"><title>{html.escape(title)} - 城市日报 City Daily</title></head>
<body>
<header><nav><a href="../index.html">首页 Home</a> | <a href="#">新闻 News</a> |
<a href="#">财经 Business</a> | <a href="#">体育 Sports</a> | <a href="#">登录 Sign in</a></nav></header>
<div class="ad">广告 Advertisement: 夏季大促销,全场家电五折起!Summer sale, up to 50% off!</div>
<main><article>
  <h1>{html.escape(title)}</h1>
  <p class="meta">发布时间 Published: {date} · 阅读 {views} views</p>
{_paras(paragraphs)}
</article></main>
<aside><h3>相关阅读 Related</h3><ul>
  <li><a href="#">本周天气早知道 This week's weather</a></li>
  <li><a href="#">市民热线答复汇总 Hotline answers</a></li></ul></aside>
<footer>版权所有 © 2026 城市日报社 City Daily. All rights reserved. 京ICP备00000000号</footer>
</body></html>
"""


def template_b(title: str, date: str, paragraphs: list[str], views: int = 77) -> str:
    """An aggregator that republishes articles: other chrome, cookie banner, comments."""
    return f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>{html.escape(title)} | NewsHub 资讯汇</title></head>
<body>
<div id="cookie">We use cookies to improve your experience. 本站使用 Cookie。<button>OK</button></div>
<div class="top"><a href="../index.html">NewsHub</a> · <a href="#">热点 Trending</a> ·
<a href="#">视频 Video</a> · <a href="#">App 下载</a></div>
<div class="layout">
<div class="content">
  <h2 class="headline">{html.escape(title)}</h2>
  <div class="byline">来源:城市日报 Source: City Daily | {date} | {views} 次浏览</div>
  <div class="body">
{_paras(paragraphs)}
  </div>
  <div class="share">分享到 Share: 微信 WeChat · 微博 Weibo · Twitter</div>
</div>
<div class="sidebar"><h4>猜你喜欢 You may also like</h4>
  <a href="#?utm_source=sidebar&amp;id=981">明星同款好物推荐</a><br>
  <a href="#?utm_source=sidebar&amp;id=982">Top 10 travel destinations</a></div>
</div>
<div class="comments"><h4>评论 Comments (3)</h4>
  <div class="comment">网友A:支持!</div><div class="comment">Reader B: finally.</div></div>
<div class="footer">NewsHub © 2026 · 关于我们 About · 联系我们 Contact · 隐私政策 Privacy</div>
</body></html>
"""


def printable(title: str, paragraphs: list[str]) -> str:
    """A printer-friendly copy: no chrome at all."""
    return f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>{html.escape(title)} (print)</title></head>
<body><article><h1>{html.escape(title)}</h1>
{_paras(paragraphs)}
</article></body></html>
"""


def _edit(paragraphs: list[str], edits: list[tuple[str, str]]) -> list[str]:
    out = []
    for p in paragraphs:
        for old, new in edits:
            p = p.replace(old, new)
        out.append(p)
    return out


T_METRO = "地铁十二号线一期车站主体结构全部完工"
T_RAIN = "暴雨蓝色预警:今夜明天有大到暴雨"
T_AI = "本地企业发布制造业质检大模型"
T_LIB = "City library to stay open later"
T_RUN = "Record field for riverside marathon"


def pages() -> dict[str, str]:
    """Relative path → HTML of every page of the demo site."""
    metro_edit = [
        *_edit(a.ZH_METRO, a.EDITS_ZH_METRO),
    ]
    lib_edit = _edit(a.EN_LIBRARY, a.EDITS_EN_LIBRARY)
    site = {
        "news/zh-metro.html": template_a(T_METRO, "2026-11-20 08:30", a.ZH_METRO, 1024),
        "mirror/zh-metro.html": template_b(T_METRO, "2026-11-20 09:12", a.ZH_METRO, 356),
        "news/zh-metro-updated.html": template_a(T_METRO, "2026-11-21 10:05", metro_edit, 2231),
        "news/en-library.html": template_a(T_LIB, "2026-11-19 14:00", a.EN_LIBRARY, 640),
        "print/en-library.html": printable(T_LIB, a.EN_LIBRARY),
        "mirror/en-library.html": template_b(T_LIB, "2026-11-19 16:40", lib_edit, 98),
        "news/zh-ai.html": template_a(T_AI, "2026-11-18 11:20", a.ZH_AI, 512),
        "mirror/zh-ai.html": template_b(T_AI, "2026-11-18 13:02", a.ZH_AI, 41),
        "news/zh-rain.html": template_a(T_RAIN, "2026-11-21 06:00", a.ZH_RAIN, 4096),
        "news/en-marathon.html": template_a(T_RUN, "2026-11-17 18:45", a.EN_MARATHON, 777),
    }
    links = "\n".join(f'  <li><a href="{p}">{p}</a></li>' for p in site)
    site["index.html"] = (
        '<!DOCTYPE html><html><head><meta charset="utf-8"><title>Demo site</title></head>'
        f"<body><h1>nearduppipe demo site</h1><ul>\n{links}\n</ul></body></html>\n"
    )
    return site


# Pages that must collapse into one kept page each; every other article page is distinct.
# The light edit (two words of a 530-character text) is 5 bits from its original on 64 bits,
# beyond the paper's k, and 16 of 512 bits (cosine 0.995): the default rule catches it.
GROUPS: list[list[str]] = [
    ["news/zh-metro.html", "mirror/zh-metro.html", "news/zh-metro-updated.html"],
    ["news/en-library.html", "print/en-library.html", "mirror/en-library.html"],
    ["news/zh-ai.html", "mirror/zh-ai.html"],
]
DISTINCT: list[str] = ["news/zh-rain.html", "news/en-marathon.html"]


def build_site(root: Path) -> Path:
    for rel, body in pages().items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body, encoding="utf-8")
    return root


if __name__ == "__main__":  # pragma: no cover
    build_site(Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).parent / "site"))
