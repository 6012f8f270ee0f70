"""Extraction version 3 of the resiliparse path (fingerprint/fast_text.py): the article's region
is found where version 2 took another block (text held by a ``div`` itself, an article cut into
sections, the block under the page's headline), in English and Chinese; versions 1 and 2 give
the fingerprints they gave before version 3 existed (recorded below with that code)."""

from __future__ import annotations

import hashlib

import pytest

from nearduppipe.fingerprint.fast_text import main_text
from nearduppipe.fingerprint.page import FingerprintParams, fingerprint_html

pytest.importorskip("resiliparse")
pytest.importorskip("selectolax")

EN = [
    "The city council approved the new tram line on Tuesday, after a debate that lasted four hours.",
    "Construction will start in the spring, and the first trams should run within three years.",
    "Residents of the northern districts, who wait longest for buses today, will gain the most.",
    "The line will cost about 400 million euros, most of it paid by the regional government.",
    "Opponents argued that the money would be better spent on cycling lanes and wider pavements.",
    "The mayor said that the council would publish the full plans, with every stop, next month.",
]
EN_OTHER = [
    "A bakery in the old town has won the national prize for its rye bread, the jury announced.",
    "The owner, who took over from her father, bakes every night, starting at two in the morning.",
    "Queues form before the shop opens, and the bread is often sold out by ten o'clock.",
]
ZH = [
    "记者从市交通运输局获悉，地铁十二号线一期工程已于昨日完成全部车站主体结构施工。",
    "十二号线一期全长二十八点六公里，共设车站二十一座，其中换乘站七座，预计三年后通车。",
    "在施工过程中，建设单位采用了盾构掘进、装配式车站等新技术，减少了对周边居民的影响。",
    "市交通运输局有关负责人表示，十二号线建成后，通勤时间将由七十分钟缩短到四十分钟左右。",
    "沿线的公交线路也将同步优化调整，新增和调整接驳公交线路十五条，方便市民换乘出行。",
    "全线车站均设置无障碍电梯、母婴室和自助售票设备，乘客可以使用手机二维码直接进站。",
]
ZH_OTHER = [
    "气象台今天上午发布暴雨蓝色预警信号，预计夜间到明天白天我市大部分地区将出现大到暴雨。",
    "据气象专家分析，此次降雨过程是受副热带高压边缘暖湿气流和北方冷空气共同影响形成的。",
    "防汛指挥部要求各区加强值守，及时转移低洼地区和危旧房屋中的群众，确保人员安全。",
]


def shell(title: str, body: str) -> str:
    return (
        f"<html><head><title>{title} - Example News</title></head><body>"
        "<div class='top'><a href='/'>Home</a> <a href='/city'>City</a></div>"
        f"{body}<div class='foot'>Example News, 12 Main Street</div></body></html>"
    )


def div_text_page(title: str, article: list[str], other: list[str]) -> str:
    """The article as text of a ``div`` itself, lines split by ``<br>`` (no ``<p>``), beside a
    shorter block of ``<p>`` paragraphs: version 2 scores only paragraphs, so took the block."""
    text = "<br><br>".join(article * 2)
    box = "".join(f"<p>{s}</p>" for s in other)
    return shell(
        title,
        f"<div class='post'><h1>{title}</h1><div class='body'>{text}</div></div>"
        f"<div class='about'><div class='bio'>{box}</div></div>",
    )


def sections_page(title: str, article: list[str], other: list[str]) -> str:
    """The article cut into three sections of one class (its paragraphs grouped by section),
    and a second story of as many paragraphs as one section: version 2 took one section."""
    parts = [article[0:2] * 2, article[2:4] * 2, article[4:6] * 2]
    body = "".join(
        "<div class='section-wrap'><div class='story-part'>"
        + "".join(f"<p>{s}</p>" for s in part)
        + "</div></div>"
        for part in parts
    )
    extra = "".join(f"<p>{s}</p>" for s in other)
    return shell(
        title,
        f"<div class='story'><h1>{title}</h1>{body}</div><div class='other'>{extra}</div>",
    )


def headline_page(title: str, article: list[str], other: list[str]) -> str:
    """The article under the page's headline, and a second story with more paragraphs: version
    2 took the second story (the block with most prose), version 3 the headline's block."""
    body = "".join(f"<p>{s}</p>" for s in article)
    extra = "".join(f"<p>{s}</p>" for s in other * 3)
    return shell(
        title,
        f"<div class='main'><h1>{title}</h1><div class='text'>{body}</div></div>"
        f"<div class='second'><h2>More news</h2><div class='teaser'>{extra}</div></div>",
    )


PAGES = {
    "div-en": div_text_page("Tram line approved", EN, EN_OTHER),
    "div-zh": div_text_page("地铁十二号线主体结构完工", ZH, ZH_OTHER),
    "sections-en": sections_page("Tram line approved", EN, EN_OTHER),
    "sections-zh": sections_page("地铁十二号线主体结构完工", ZH, ZH_OTHER),
    "headline-en": headline_page("Tram line approved", EN, EN_OTHER),
    "headline-zh": headline_page("地铁十二号线主体结构完工", ZH, ZH_OTHER),
}


@pytest.mark.parametrize("name", sorted(PAGES))
def test_version_3_takes_the_article(name: str) -> None:
    lang = name.rsplit("-", 1)[1]
    article, other = (EN, EN_OTHER) if lang == "en" else (ZH, ZH_OTHER)
    v2, v3 = main_text(PAGES[name], 10_000, version=2), main_text(PAGES[name], 10_000, version=3)
    assert v2 is not None and v3 is not None
    assert all(s in v3 for s in article[:4]), v3  # the article
    assert not any(s in v3 for s in other), v3  # and not the other block
    assert not all(s in v2 for s in article[:4]) or any(s in v2 for s in other), v2


# sha1 of repr(fingerprint_html(page).fingerprints)[:16], made with the code before version 3
# (what stores recording version 1 or 2 hold for these pages)
BEFORE_VERSION_3 = {
    ("div-en", 1): "cfd91e825d3d0220",
    ("div-en", 2): "d53c81b32564ab22",
    ("div-zh", 1): "d2cec59ff3f94fb4",
    ("div-zh", 2): "d2cec59ff3f94fb4",
    ("headline-en", 1): "acb61fdfe88188f7",
    ("headline-en", 2): "d53c81b32564ab22",
    ("headline-zh", 1): "360362a121247cad",
    ("headline-zh", 2): "360362a121247cad",
    ("sections-en", 1): "356bedc7af5b8645",
    ("sections-en", 2): "356bedc7af5b8645",
    ("sections-zh", 1): "155012c165f6c8c5",
    ("sections-zh", 2): "155012c165f6c8c5",
}


def digest(html: str, name: str, version: int) -> str:
    """What the recorded digests are of: a page's resiliparse fingerprints at ``version``."""
    params = FingerprintParams(min_text_length=100, extractor="resiliparse", extraction=version)
    done = fingerprint_html(html, "https://example.com/" + name, params)
    return hashlib.sha1(repr(done.fingerprints).encode()).hexdigest()[:16]


@pytest.mark.parametrize(("name", "version"), sorted(BEFORE_VERSION_3))
def test_versions_1_and_2_are_unchanged(name: str, version: int) -> None:
    assert digest(PAGES[name], name, version) == BEFORE_VERSION_3[name, version]
