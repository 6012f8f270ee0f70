"""Extraction version 2 (fingerprint/blocks.py): blocks that are mostly link text go before the
extractor, so one article keeps one text whether its template wraps it in related-article lists,
share bars and link footers or not; prose with a few links stays."""

from __future__ import annotations

import lxml.html

from nearduppipe.fingerprint.blocks import drop_link_blocks
from nearduppipe.fingerprint.text import extract_text

EN = [
    "The harbour council approved the new ferry timetable on Tuesday after a long debate about "
    "the cost of night crossings and the needs of the island's schools.",
    "Residents had asked for a later last crossing since the spring, when the old schedule left "
    "commuters from the mainland hospital stranded after their evening shifts.",
    "The operator said the added crossings would be paid for by a small rise in car fares, while "
    "foot passengers and cyclists keep the fares they pay today.",
    "The first boats on the new timetable sail in March, and the council will review the numbers "
    "of passengers after six months before it decides on the winter service.",
]
ZH = [
    "市政府周二宣布，新的轮渡时刻表将于明年三月开始实施，夜间航班由每天两班增加到五班。",
    "岛上居民从春天起就要求延长末班船的时间，因为许多在大陆医院上夜班的人下班后无法回家。",
    "运营公司表示，新增航班的费用将通过小幅提高汽车票价来承担，步行乘客和骑车人的票价保持不变。",
    "市议会将在新时刻表实施六个月后评估客流数据，再决定冬季的航班安排，并向社会公开征求意见。",
]
ZH_MORE = [  # two more articles (other topics), for crawls of several pages
    [
        "市图书馆周一宣布，将从下个月起延长周末的开放时间，晚上十点才闭馆，方便上班族借书和自习。",
        "馆长说，过去一年里到馆读者增加了三成，尤其是考试季的时候，阅览室常常一座难求。",
        "新的开放时间需要增加二十名工作人员，费用由市财政和社会捐款共同承担，不会收取额外费用。",
        "图书馆还计划开设儿童绘本角和老年人电脑课程，具体安排将在官方网站上另行公布。",
    ],
    [
        "气象台昨天发布暴雨黄色预警，预计今晚到明天白天全市将有大到暴雨，局部地区伴有雷电和短时大风。",
        "交通部门提醒市民尽量减少外出，驾车时注意低洼路段积水，地铁和公交将根据雨情调整运营时间。",
        "教育局通知，全市中小学明天停课一天，学校要做好校舍安全检查，并通过短信告知家长。",
        "防汛指挥部表示，各区已经准备好抽水设备和救援队伍，发现险情可以拨打热线电话求助。",
    ],
]
RELATED_EN = [
    "Bridge repairs close the east road for a week",
    "Island school wins the regional science prize",
    "Storm warning for the weekend crossings",
    "New museum opens in the old railway station",
    "Market hall to reopen after two years",
]
RELATED_ZH = [
    "东桥维修封路一周",
    "岛上学校获得科学奖",
    "周末航班发布风暴预警",
    "老火车站改建博物馆开放",
    "菜市场两年后重新开业",
]


def article(paragraphs: list[str], related: list[str], footer: str) -> str:
    """An article whose container holds, after the prose, a related-links list and a link
    footer (share bar, comment links): what trafilatura keeps on many real templates."""
    body = "".join(f"<p>{p}</p>" for p in paragraphs)
    links = "".join(f"<li><a href='/n/{i}.html'>{t}</a></li>" for i, t in enumerate(related))
    return (
        "<html><head><title>t</title></head><body><article><h1>Ferry</h1>"
        f"{body}<h3>{footer}</h3><ul class='list'>{links}</ul>"
        f"<div class='bar'><a href='/s/1'>Weibo</a> <a href='/s/2'>WeChat</a> "
        f"<a href='/s/3'>QQ</a> | <a href='/c'>{footer} (23)</a></div>"
        "</article></body></html>"
    )


def plain(paragraphs: list[str]) -> str:
    body = "".join(f"<p>{p}</p>" for p in paragraphs)
    return f"<html><head><title>t</title></head><body><article><h1>Ferry</h1>{body}</article></body></html>"


def test_related_link_lists_and_link_footers_go_in_english_and_chinese() -> None:
    cases = [(EN, RELATED_EN, "Comments"), *((zh, RELATED_ZH, "评论") for zh in [ZH, *ZH_MORE])]
    for paragraphs, related, footer in cases:
        old = extract_text(article(paragraphs, related, footer), version=1)
        new = extract_text(article(paragraphs, related, footer), version=2)
        assert old is not None and new is not None
        if paragraphs is not EN:  # version 1 kept the Chinese list (trafilatura counts words by
            # white space: a line of Han characters is one word) and dropped the English one
            assert all(t in old for t in related)
        assert not any(t in new for t in related)
        assert "WeChat" not in new
        assert all(p in new for p in paragraphs)
        # the same article without the chrome: one text under version 2
        assert new == extract_text(plain(paragraphs), version=2)


def test_prose_with_links_stays() -> None:
    linked = [
        f"{p[:40]}<a href='/a'>{p[40:60]}</a>{p[60:90]}<a href='/b'>{p[90:100]}</a>"
        f"<a href='/c'>{p[100:110]}</a>{p[110:]}"
        for p in EN
    ]
    html = plain(linked)
    assert extract_text(html, version=2) == extract_text(html, version=1)
    assert extract_text(html, version=2) == " ".join(["Ferry", *EN])


def test_a_dropped_block_keeps_the_text_after_it() -> None:
    root = lxml.html.fromstring(
        "<html><body><div><p>the words before the list</p><ul><li><a>one</a></li><li><a>two</a></li>"
        "<li><a>three</a></li></ul>and the words after it</div></body></html>"
    )
    assert drop_link_blocks(root) == 1
    assert lxml.html.tostring(root) == (
        b"<html><body><div><p>the words before the list</p>and the words after it</div></body></html>"
    )


def test_two_links_or_a_minority_of_link_text_are_not_navigation() -> None:
    two = "<html><body><ul><li><a>one</a></li><li><a>two</a></li></ul></body></html>"
    root = lxml.html.fromstring(two)
    assert drop_link_blocks(root) == 0
    mostly_words = (
        "<html><body><div>a long sentence of words that are no links at all "
        "<a>x</a> <a>y</a> <a>z</a></div></body></html>"
    )
    root = lxml.html.fromstring(mostly_words)
    assert drop_link_blocks(root) == 0


def test_scripts_and_comments_count_no_text() -> None:
    # a script's text would hide a link list's density; a comment node has no tag name
    html = (
        "<html><body><div><script>var a = 'a very long script text' + 'that is no text';</script>"
        "<!-- a comment --><a>one</a><a>two</a><a>three</a></div></body></html>"
    )
    root = lxml.html.fromstring(html)
    assert drop_link_blocks(root) == 1
