"""Short items (issue 43, item 2): 100-150-word texts with 3 words changed, and copies of
copies, judged as items are (the text given, no extraction), with the defaults and the MinHash
peer in the same run.

The texts are real: windows of 100-150 words cut from the extracted text of the real set's
originals (benchmarks/real_set.py; trafilatura, kept in ``--cache``). Words are runs of letters
or digits, or single Han characters' jieba words for Chinese (the units the features count).
Each window is an item's original; its variants:

* ``edit3``: a copy, 3 words of the original replaced by words of the same language (drawn
  from the set), each at a random place;
* ``copy_of_copy``: a copy of that copy, 3 more words replaced (6 from the original), and so on
  for ``--chain`` copies in all (2: one copy of a copy);

and the hard negatives, to be kept: ``next_window`` the words that follow the window in the same
article (same topic, same vocabulary, no shared text). An item dropped for a page of another
group is a false drop. Orders are random (``--order random``: originals not necessarily
first, a group's first item is the one to keep; ``quality.score``'s rule) or each original
first (``--order first``).

    python benchmarks/short_items.py --seed 7 --orders 20 --cache /tmp/nearduppipe-study
    python benchmarks/short_items.py --order first --chain 1
    python benchmarks/short_items.py --brute   # + every order replayed by brute force

The defaults keep aliases (``NEARDUP_ALIASES``, on for new stores since 0.2): a dropped
item's fingerprints stay as a candidate for the item it was dropped for (judged against the
dropped item's own fingerprints, with the kept item's 512-bit estimate within cosine 0.88 as
well); the rows without them are the defaults up to 0.2 and up to 0.1. With ``--brute``
(formerly ``--aliases``) each order is also replayed by brute force, with and without aliases,
and must give the package's decisions.
"""

from __future__ import annotations

import argparse
import random
import re
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import quality
import real_set
from quality_set import Page

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from nearduppipe.fingerprint.page import FingerprintParams, fingerprint_text
from nearduppipe.fingerprint.rule import Rule, distances, wide_threshold
from nearduppipe.fingerprint.tokenize import get_segmenter
from nearduppipe.settings import NearDupConfig

POSITIVE = ["edit3", "copy_of_copy"]
NEGATIVE = ["next_window"]
UNSPACED = {"ja", "th", "km", "lo", "my"}  # no spaces and no segmenter here: left out
_WORD = re.compile(r"\w+")
_HAN = re.compile(r"[\u3400-\u9fff]")


def words(text: str, lang: str) -> list[str]:
    """The text's words in order, with what separates them kept in front of each word: the
    text is the concatenation, so a window or an edit keeps the original's spacing."""
    if lang == "zh":
        tokens = get_segmenter()(text)
        out, sep = [], ""
        for t in tokens:
            if _WORD.fullmatch(t) or _HAN.search(t):
                out.append(sep + t)
                sep = ""
            else:
                sep += t
        return out
    parts = re.split(r"(\w+)", text)
    out, sep = [], ""
    for p in parts:
        if _WORD.fullmatch(p):
            out.append(sep + p)
            sep = ""
        else:
            sep += p
    return out


def _bare(w: str) -> str:
    m = _WORD.search(w) or _HAN.search(w)
    return w[m.start() :] if m else w


def edit(ws: list[str], vocab: list[str], rng: random.Random, n: int = 3) -> list[str]:
    """``n`` words replaced, each by a word of the same language at a random place (what
    separated it from the word before is kept)."""
    out = list(ws)
    for i in rng.sample(range(len(out)), n):
        w = out[i]
        sep = w[: len(w) - len(_bare(w))]
        new = rng.choice(vocab)
        while new == _bare(w):
            new = rng.choice(vocab)
        out[i] = sep + new
    return out


def build(
    extracted: list[tuple[Page, str | None]], seed: int, chain: int
) -> tuple[list[tuple[Page, str]], dict[str, int]]:
    """Items with their group and kind (``Page`` with the text in place of HTML)."""
    rng = random.Random(seed)
    by_lang: dict[str, list[list[str]]] = {}
    for page, text in extracted:
        if page.kind == "base" and text and page.lang not in UNSPACED:
            by_lang.setdefault(page.lang, []).append(words(text, page.lang))
    items: list[tuple[Page, str]] = []
    skipped: Counter[str] = Counter()
    for lang, articles in sorted(by_lang.items()):
        vocab = sorted({_bare(w) for ws in articles for w in ws})
        for a, ws in enumerate(articles):
            n = rng.randint(100, 150)
            if len(ws) < 2 * n:
                skipped[lang] += 1
                continue
            start = rng.randint(0, len(ws) - 2 * n)
            window = ws[start : start + n]
            group = f"{lang}{a}"

            def item(
                kind: str, ws: list[str], g: str = group, i: int = 0, lang: str = lang
            ) -> None:
                url = f"https://items.example/{g}/{kind}/{i}"
                items.append((Page(url, lang, g, kind, ""), "".join(ws).strip()))

            item("base", window)
            copy = window
            for i in range(chain):
                copy = edit(copy, vocab, rng)
                item("copy_of_copy" if i else "edit3", copy, i=i)
            item("next_window", ws[start + n : start + 2 * n], g=f"{group}-next")
    return items, dict(skipped)


def replay_aliases(
    order: list[tuple[Page, str]], fps: dict[str, Any], rule: Rule, aliases: bool, bound: float
) -> dict[str, str | None]:
    """``quality.replay`` by brute force, with aliases when asked: each item is compared with
    every kept item and every alias (a dropped item's fingerprints, standing for the item it
    was dropped for) under ``rule``; through an alias, the kept item's 512-bit estimate must
    reach ``bound`` too. The nearest on 512 bits (then 64) wins."""
    limit = wide_threshold(bound)
    entries: list[tuple[Any, str]] = []  # (fingerprints, the kept item's key)
    kept: dict[str, Any] = {}
    out: dict[str, str | None] = {}
    for page, _ in order:
        f = fps[page.url]
        best: tuple[tuple[int, int], str] | None = None
        for g, root in entries if f is not None else ():
            d, dw = distances(g, f)
            if not rule.is_near(d, dw) or (best is not None and (dw, d) >= best[0]):
                continue
            if g is not kept[root] and distances(kept[root], f)[1] > limit:  # type: ignore[operator]
                continue
            best = ((dw, d), root)  # type: ignore[assignment]
        out[page.url] = best[1] if best else None
        if f is not None and best is None:
            kept[page.url] = f
            entries.append((f, page.url))
        elif best is not None and aliases:
            entries.append((f, best[1]))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--orders", type=int, default=20)
    ap.add_argument("--chain", type=int, default=2, help="copies of copies per item")
    ap.add_argument(
        "--order",
        choices=["random", "first"],
        default="random",
        help="random: any page may come first; first: each item's original first",
    )
    ap.add_argument("--cache", type=Path, default=None, help="keep extracted texts here")
    ap.add_argument("--no-peer", action="store_true", help="without the MinHash peer")
    ap.add_argument(
        "--brute",
        "--aliases",
        action="store_true",
        help="also replay each order by brute force (it must give the store's decisions)",
    )
    args = ap.parse_args()

    pages = [p for p in real_set.build(args.seed) if p.kind == "base"]
    extracted, _ = quality.extract_all(pages, "trafilatura", args.cache)
    items, skipped = build(extracted, args.seed, args.chain)
    langs = tuple(lang for lang, _ in Counter(p.lang for p, _ in items).most_common())
    lengths = Counter(
        p.lang for p, t in items if p.kind == "base" and len(t) < 200
    )  # under NEARDUP_MIN_TEXT_LENGTH's default: not compared
    print(
        f"== short items from the real set's originals (draw {args.seed}): {len(items)} items, "
        f"{dict(Counter(p.kind for p, _ in items))}; originals shorter than 2 windows, "
        f"left out: {skipped}; originals under 200 characters (never compared): "
        f"{dict(lengths)}; {args.orders} random orders"
    )
    config = NearDupConfig.from_settings({})
    params = FingerprintParams(config.features, config.limits, config.min_text_length)
    fps = {}
    for p, t in items:
        r = fingerprint_text(t, params)
        fps[p.url] = r.fingerprints if r is not None else None
    plain = replace(config.rule, aliases=False)  # (the defaults up to 0.2)
    rules = [config.rule, plain, replace(plain, radius=8)]  # (8: the default up to 0.1)
    runs: list[list[dict[str, float]]] = [[] for _ in rules]
    peer_runs = []
    anywhere = args.order == "random"
    peer = None if args.no_peer else quality.MinHashPeer(items, config.min_text_length)
    for o in range(args.orders):
        order = quality.crawl_order(items, args.seed * 1000 + o, any_order=anywhere)
        for rule, rule_runs in zip(rules, runs, strict=True):
            decisions = quality.replay(order, fps, rule)
            rule_runs.append(quality.score(order, decisions, POSITIVE, NEGATIVE, langs, anywhere))
        if args.brute:
            for on, rule in ((False, plain), (True, replace(plain, aliases=True))):
                brute = replay_aliases(order, fps, plain, on, rule.alias_similarity)
                if brute != quality.replay(order, fps, rule):
                    raise SystemExit("the brute-force replay differs from the package's store")
        if peer is not None:
            peer_runs.append(
                quality.score(order, peer.decide(order), POSITIVE, NEGATIVE, langs, anywhere)
            )
    kinds = (POSITIVE, NEGATIVE)
    quality.report_real(f"nearduppipe defaults ({config.rule.describe()})", runs[0], langs, *kinds)
    quality.report_real(quality.NO_ALIASES, runs[1], langs, *kinds)
    quality.report_real(quality.RADIUS_8, runs[2], langs, *kinds)
    if peer is not None:
        quality.report_real("MinHash peer (datasketch, 5-shingles)", peer_runs, langs, *kinds)


if __name__ == "__main__":
    main()
