"""What each candidate step of issue 43 would buy, measured from the package's current
extraction and features, in crawl order (benchmarks only: nothing here changes the package).

    python benchmarks/verdict_study.py extract --set real-pages --seed 7   # cache the texts
    python benchmarks/verdict_study.py study [--seeds 7,11,23] [--orders 20]
    python benchmarks/verdict_study.py index [--n 1000000]

``extract`` runs trafilatura once per page of a draw (the package's ``extract_text``) and keeps
the texts in ``--cache`` (default /tmp/nearduppipe-study), so every other step reads them.

``study`` scores, on both sets (the synthetic one of quality_set.py and the real pages of
real_set.py), for each draw and over ``--orders`` crawl orders (fully random: originals not
necessarily first), the same metrics as ``quality.py`` (precision, recall overall, zh and per
kind, hard negatives dropped, groups kept exactly once) for:

1. today's rule (64-bit candidates within 8, the 512-bit estimate of cosine >= 0.93);
2. the verdict on the *exact* cosine of the stored weighted feature vectors (0.90..0.94),
   candidates unchanged;
3. the exact verdict with a 64-bit candidate radius of 9..12;
4. the exact verdict where a dropped page's 64-bit fingerprint stays in the index as an alias
   of the kept page it was dropped for; a candidate found through an alias is judged against the
   kept page's features ("alias->kept") or the dropped page's own ("alias->own"); and the same
   with today's 512-bit estimate as the verdict (no stored features), "alias->own" also with a
   bound on the kept page ("kept >= c": the query's estimate to the kept page itself must reach
   c too, so that a chain of aliases cannot drift away from the page kept), and with "either"
   (the words' estimate at 0.93 or a second 512-bit SimHash, of word pairs, at 0.86);
5. word-shingled features (``FeatureConfig(shingle=2|3)``) judged by their 512-bit estimate over
   the same candidate step, and the share of duplicate pairs within 64-bit distance r;
6. the exact verdict on the top-K features by weight (K = 64, 128, 256), and the bytes an entry
   needs to store them (4-byte feature hash + 2-byte weight per feature).

``index`` measures candidates per query of the package's block index at radius 8..12 on a
random set of 1 M fingerprints.
"""

from __future__ import annotations

import argparse
import math
import pickle
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

CACHE = Path("/tmp/nearduppipe-study")


# one extracted page: (url, lang, group, kind, text)
Row = tuple[str, str, str, str, "str | None"]


def load_pages(which: str, seed: int):  # type: ignore[no-untyped-def]
    if which == "real-pages":
        import real_set

        return real_set.build(seed)
    from quality_set import build

    return build(100, 60, seed=seed)


def extracted(which: str, seed: int, cache: Path = CACHE) -> list[Row]:
    """The draw's pages with trafilatura's text (the package's ``extract_text``), extracted
    once into the cache that quality.py --cache shares."""
    from quality_set import extract_cached

    path = cache / f"rows-{which}-{seed}.pkl"  # (building the real set takes minutes too)
    if path.exists():
        rows: list[Row] = pickle.loads(path.read_bytes())
        return rows
    pages = load_pages(which, seed)
    texts, _ = extract_cached(pages, "trafilatura", cache)
    rows = [(p.url, p.lang, p.group, p.kind, t) for p, t in zip(pages, texts, strict=True)]
    path.write_bytes(pickle.dumps(rows))
    return rows


# -- per-page data -------------------------------------------------------------------------------


class Prepared:
    """A draw's pages with the package's features under one FeatureConfig: the 64-bit and
    512-bit fingerprints, the L2-normalised feature vector (full and top-K), the neighbours of
    each page within 64-bit distance ``MAX_R`` and, lazily, exact cosines of pairs."""

    def __init__(self, rows: list[Row], config: object, top: tuple[int, ...] = ()) -> None:
        import numpy as np

        from nearduppipe.fingerprint.features import features
        from nearduppipe.fingerprint.page import FingerprintParams, fingerprint_text
        from nearduppipe.fingerprint.text import DEFAULT_LIMITS, normalise_whitespace
        from nearduppipe.index.words import wide_words

        params = FingerprintParams(features=config)  # type: ignore[arg-type]
        self.rows = rows
        n = len(rows)
        self.has = np.zeros(n, dtype=bool)
        fp = np.zeros(n, dtype=np.uint64)
        wide = np.zeros((n, 8), dtype=np.uint64)
        self.vec: list[dict[str, float]] = []
        self.fingerprints: list[Any] = []
        self.n_features = np.zeros(n, dtype=np.int64)
        self.top = {k: [] for k in top}  # type: dict[int, list[dict[str, float]]]
        for i, (*_, text) in enumerate(rows):
            result = fingerprint_text(text, params) if text else None
            self.fingerprints.append(result.fingerprints if result else None)
            if result is None or result.fingerprints is None:
                self.vec.append({})
                for k in top:
                    self.top[k].append({})
                continue
            self.has[i] = True
            fp[i] = result.fingerprints.fp
            wide[i] = wide_words(result.fingerprints.wide)
            cut = text[: DEFAULT_LIMITS.max_text_chars]  # type: ignore[index]
            f = features(normalise_whitespace(cut), config)  # type: ignore[arg-type]
            self.n_features[i] = len(f)
            self.vec.append(_unit(f))
            for k in top:
                kept = sorted(f.items(), key=lambda kv: (-kv[1], kv[0]))[:k]
                self.top[k].append(_unit(dict(kept)))
        self.fp, self.wide = fp, wide
        # neighbours within MAX_R on 64 bits: (index, distance), nearest first
        self.near: list[list[tuple[int, int]]] = [[] for _ in range(n)]
        self.wdist: dict[tuple[int, int], int] = {}
        idx = np.flatnonzero(self.has)
        f_has = fp[idx]
        for i in idx.tolist():
            d = np.bitwise_count(f_has ^ fp[i])
            hit = np.flatnonzero(d <= MAX_R)
            for b in hit.tolist():
                j = int(idx[b])
                if j != i:
                    self.near[i].append((j, int(d[b])))
                    if i < j:
                        self.wdist[(i, j)] = int(np.bitwise_count(wide[i] ^ wide[j]).sum())
            self.near[i].sort(key=lambda h: h[1])
        self._cos: dict[tuple[int, int, int], float] = {}

    def wide_distance(self, i: int, j: int) -> int:
        key = (i, j) if i < j else (j, i)
        d = self.wdist.get(key)
        if d is None:
            import numpy as np

            d = self.wdist[key] = int(np.bitwise_count(self.wide[i] ^ self.wide[j]).sum())
        return d

    def cosine(self, i: int, j: int, k: int = 0) -> float:
        """Exact cosine of the two pages' weighted feature vectors (top-k of each when k)."""
        key = (i, j, k) if i < j else (j, i, k)
        c = self._cos.get(key)
        if c is None:
            a, b = (self.top[k][i], self.top[k][j]) if k else (self.vec[i], self.vec[j])
            if len(a) > len(b):
                a, b = b, a
            c = self._cos[key] = sum(w * b.get(f, 0.0) for f, w in a.items())
        return c


def _unit(f: dict[str, float]) -> dict[str, float]:
    norm = math.sqrt(sum(w * w for w in f.values())) or 1.0
    return {k: w / norm for k, w in f.items()}


MAX_R = 16

# -- the crawl, simulated ------------------------------------------------------------------------


class Variant:
    """A candidate step and a verdict. ``verdict``: ``("wide", similarity)`` (the 512-bit
    estimate, as the package judges), ``("exact", similarity)`` or ``("top", k, similarity)``;
    ``("either", words, pairs)`` (the 512-bit estimate of words at ``words`` or that of word
    pairs at ``pairs``: two wide SimHashes per entry);
    ``alias``: None (only kept pages are candidates), ``"kept"`` or ``"own"`` (a dropped
    page's 64-bit fingerprint stays as a candidate for its kept page; the verdict compares the
    query with the kept page's features, or with the dropped page's own). ``bound``: with
    ``"own"`` and the 512-bit verdict, the similarity the query's estimate to the kept page
    must reach as well."""

    def __init__(
        self,
        name: str,
        radius: int,
        verdict: tuple,
        alias: str | None = None,
        feats: str = "1",
        bound: float | None = None,
    ) -> None:
        self.name, self.radius, self.verdict, self.alias, self.feats = (
            name,
            radius,
            verdict,
            alias,
            feats,
        )
        self.bound = bound


def crawl(
    prep: Prepared, order: list[int], v: Variant, pairs: Prepared | None = None
) -> tuple[list[int], int, int]:
    """Decisions in crawl order: for each page the index of the page it was dropped for (-1:
    kept or not fingerprinted); the verdicts taken (candidates judged) and the queries.
    ``pairs``: the draw under word 2-shingles, for the ``either`` verdict."""
    from nearduppipe.fingerprint.rule import wide_threshold

    n = len(prep.rows)
    target = [-1] * n  # entry of page i (its 64-bit fp) -> the kept page it stands for
    decision = [-1] * n
    kind, sim = v.verdict[0], v.verdict[-1]
    threshold = wide_threshold(v.verdict[1]) if kind in ("wide", "either") else None
    second = wide_threshold(sim) if kind == "either" else None
    bound = wide_threshold(v.bound) if v.bound is not None else None
    k = v.verdict[1] if kind == "top" else 0
    judged = queries = 0
    r = v.radius
    for q in order:
        if not prep.has[q]:
            continue
        queries += 1
        best, best_score = -1, -math.inf
        for j, d in prep.near[q]:
            if d > r:
                break
            t = target[j]
            if t < 0:
                continue
            judged += 1
            ref = t if v.alias != "own" else j
            if kind in ("wide", "either"):
                w = prep.wide_distance(q, ref)
                ok, s = w <= threshold, -w  # type: ignore[operator]
                if not ok and second is not None:
                    assert pairs is not None
                    ok = pairs.wide_distance(q, ref) <= second
                if ok and bound is not None and ref != t:
                    ok = prep.wide_distance(q, t) <= bound
            else:
                c = prep.cosine(q, ref, k)
                ok, s = c >= sim, c
            if ok and s > best_score:
                best, best_score = t, s
        if best >= 0:
            decision[q] = best
            if v.alias:
                target[q] = best
        else:
            target[q] = q
    return decision, judged, queries


def orders(n: int, count: int, seed: int) -> list[list[int]]:
    """``count`` fully random crawl orders (originals not necessarily first)."""
    import random

    out = []
    for o in range(count):
        order = list(range(n))
        random.Random(seed * 1000 + o).shuffle(order)
        out.append(order)
    return out


def score(
    rows: list[Row],
    order: list[int],
    decision: list[int],
    positive: list[str],
    negative: list[str],
    has: object,
) -> dict[str, float]:
    """quality.py's metrics for an order where originals need not come first: of each group
    (original and near-duplicates) the first page with a fingerprint should be kept and every
    other one dropped for a page of its group; pages of the hard-negative kinds, and
    originals dropped for another group, are hard negatives dropped."""
    group = [r[2] for r in rows]
    first: dict[str, int] = {}
    members = [*positive, "base"]
    for q in order:
        if rows[q][3] in members and has[q] and group[q] not in first:  # type: ignore[index]
            first[group[q]] = q
    tp = fp = hard = 0
    should: Counter[str] = Counter()
    caught: Counter[str] = Counter()
    for q, (_, lang, g, kind, _) in enumerate(rows):
        m = decision[q]
        right = m >= 0 and group[m] == g
        if m >= 0:
            tp += right
            fp += not right
            if kind in negative or (kind == "base" and not right):
                hard += 1
        if kind in members and first.get(g) != q:
            cls = lang if lang in ("zh", "en") else "other"
            for key in (kind, f"lang {cls}", "all"):
                should[key] += 1
                caught[key] += right
    kept = Counter(group[q] for q, r in enumerate(rows) if r[3] in members and decision[q] < 0)
    bases = [r[2] for r in rows if r[3] == "base"]
    out = {
        "precision": tp / (tp + fp) if tp + fp else 1.0,
        "false drops": fp,
        "hard negatives dropped": hard,
        "groups kept once": sum(kept[g] == 1 for g in bases) / len(bases),
    }
    for key in should:
        out["recall" if key == "all" else key] = caught[key] / should[key]
    return out


# -- the study -----------------------------------------------------------------------------------

SIMS = (0.90, 0.91, 0.92, 0.93, 0.94)
TOP = (64, 128, 256)
ENTRY_BYTES = 8 + 64  # today's entry: the 64-bit and the 512-bit fingerprint
FEATURE_BYTES = 6  # a stored feature: 4-byte hash + 2-byte weight


def variants() -> list[Variant]:
    out = [Variant("1 today: 512-bit estimate >= 0.93", 8, ("wide", 0.93))]
    out += [
        Variant(f"1' 512-bit estimate >= 0.93, radius {r}", r, ("wide", 0.93)) for r in (10, 12)
    ]
    for r in range(8, 13):
        step = "2 exact" if r == 8 else "3 exact"
        out += [Variant(f"{step} >= {t:.2f}", r, ("exact", t)) for t in SIMS]
    for alias in ("kept", "own"):
        for r in range(8, 13):
            out += [
                Variant(f"4 exact >= {t:.2f}, alias->{alias}", r, ("exact", t), alias) for t in SIMS
            ]
    for alias in ("kept", "own"):
        out += [
            Variant(f"4' 512-bit estimate >= 0.93, alias->{alias}", r, ("wide", 0.93), alias)
            for r in (8, 10, 12)
        ]
    out += [
        Variant("4' either: words >= 0.93 or word pairs >= 0.86", 10, ("either", 0.93, 0.86)),
        Variant(
            "4' either: words >= 0.93 or word pairs >= 0.86, alias->own, kept >= 0.88",
            10,
            ("either", 0.93, 0.86),
            "own",
            bound=0.88,
        ),
    ]
    out += [
        Variant(
            f"4' 512-bit estimate >= 0.93, alias->own, kept >= {c:.2f}",
            r,
            ("wide", 0.93),
            "own",
            bound=c,
        )
        for r in (10, 12)
        for c in (0.85, 0.88, 0.90, 0.91, 0.92)
    ]
    for n in (2, 3):
        for r in (8, 10, 12, 14, 16):
            out += [
                Variant(
                    f"5 {n}-shingles, 512-bit estimate >= {t:.2f}", r, ("wide", t), None, str(n)
                )
                for t in (0.70, 0.75, 0.80, 0.85, 0.90)
            ]
            out += [
                Variant(f"5 {n}-shingles, exact >= {t:.2f}", r, ("exact", t), None, str(n))
                for t in (0.70, 0.75, 0.80, 0.85)
            ]
    for k in TOP:
        for r in (8, 10, 12):
            out += [Variant(f"6 top-{k} exact >= {t:.2f}", r, ("top", k, t)) for t in SIMS]
            out += [
                Variant(f"6 top-{k} exact >= {t:.2f}, alias->kept", r, ("top", k, t), "kept")
                for t in SIMS
            ]
    return out


def entry_bytes(prep: Prepared, v: Variant) -> float:
    """Stored bytes per entry the variant needs: the fingerprints, plus the features its
    verdict reads (4-byte hash + 2-byte weight each), mean over the pages."""
    import numpy as np

    n = prep.n_features[prep.has]
    kind = v.verdict[0]
    if kind == "wide":
        return ENTRY_BYTES
    if kind == "either":
        return ENTRY_BYTES + 64
    if kind == "top":
        return 8 + FEATURE_BYTES * float(np.minimum(n, v.verdict[1]).mean())
    return 8 + FEATURE_BYTES * float(n.mean())


def check_against_store(prep: Prepared, order: list[int]) -> None:
    """Row 1 simulated here against the package's own store in one order: the decisions must
    be the same (the simulation is what the other rows change)."""
    from nearduppipe import open_store
    from nearduppipe.fingerprint.rule import Rule

    urls = [r[0] for r in prep.rows]
    at = {u: i for i, u in enumerate(urls)}
    for name, rule, variant in (
        ("today's rule", Rule(), Variant("today", 10, ("wide", 0.93))),  # (radius 10 since 0.2)
        (
            "aliases (NEARDUP_ALIASES)",
            Rule(aliases=True),
            Variant("aliases", 10, ("wide", 0.93), "own", bound=0.88),
        ),
    ):
        decision, _, _ = crawl(prep, order, variant)
        differ = 0
        with open_store("memory:", rule=rule) as store:
            for q in order:
                if not prep.has[q]:
                    continue
                match = store.check_and_add(prep.fingerprints[q], urls[q])
                got = at[match.key] if match else -1
                differ += got != decision[q]
        print(f"   {name} simulated vs the package's store, one order: {differ} decisions differ")


def duplicate_distances(prep: Prepared) -> list[int]:
    """64-bit distance of every near-duplicate from its group's original."""
    base = {r[2]: i for i, r in enumerate(prep.rows) if r[3] == "base"}
    out = []
    for i, (_, _, g, kind, _) in enumerate(prep.rows):
        j = base.get(g)
        if kind != "base" and j is not None and prep.has[i] and prep.has[j]:
            out.append(int((prep.fp[i] ^ prep.fp[j]).bit_count()))
    return out


def study(
    which: str, seeds: list[int], n_orders: int, cache: Path, out: Path, only: str | None = None
) -> None:
    import statistics

    import numpy as np

    from nearduppipe.fingerprint.features import DEFAULT_FEATURES, FeatureConfig

    if which == "real-pages":
        import real_set

        positive, negative = real_set.POSITIVE, real_set.NEGATIVE
    else:
        import quality_set

        positive, negative = quality_set.POSITIVE, quality_set.NEGATIVE
    vs = variants()
    if only:
        import re

        vs = [v for v in vs if re.search(only, v.name)]
    results: dict[str, list[dict[str, float]]] = {}
    for seed in seeds:
        rows = extracted(which, seed, cache)
        t0 = time.perf_counter()
        preps = {
            "1": Prepared(rows, DEFAULT_FEATURES, TOP),
            "2": Prepared(rows, FeatureConfig(shingle=2)),
            "3": Prepared(rows, FeatureConfig(shingle=3)),
        }
        print(
            f"{which} draw {seed}: {len(rows)} pages prepared in {time.perf_counter() - t0:.0f} s",
            flush=True,
        )
        for name, prep in preps.items():
            d = np.array(duplicate_distances(prep))
            within = " ".join(f"<={r}: {(d <= r).mean():.3f}" for r in (8, 9, 10, 11, 12, 14, 16))
            feats = prep.n_features[prep.has]
            print(
                f"   features {name}: duplicate pairs within 64-bit r {within}; features per "
                f"page mean {feats.mean():.0f} median {np.median(feats):.0f} p95 "
                f"{np.percentile(feats, 95):.0f}"
            )
        all_orders = orders(len(rows), n_orders, seed)
        check_against_store(preps["1"], all_orders[0])
        t0 = time.perf_counter()
        for v in vs:
            prep = preps[v.feats]
            key = f"{v.name} | radius {v.radius}"
            for order in all_orders:
                decision, judged, queries = crawl(prep, order, v, preps["2"])
                r = score(rows, order, decision, positive, negative, prep.has)
                r["judged per query"] = judged / queries
                r["bytes per entry"] = entry_bytes(prep, v)
                results.setdefault(key, []).append(r)
        print(f"   {len(vs)} variants x {n_orders} orders in {time.perf_counter() - t0:.0f} s")
    kinds = [*positive, "base"]
    head = [
        "variant",
        "radius",
        "P",
        "R",
        "R min",
        "R zh",
        "R en",
        "R other",
        "hard neg/order",
        "false drops/order",
        "kept once",
        "judged/query",
        "bytes/entry",
        *kinds,
    ]
    lines = ["\t".join(head)]
    for key, runs in results.items():
        name, radius = key.split(" | radius ")

        def mean(k: str, runs: list[dict[str, float]] = runs) -> float:
            return statistics.fmean(r.get(k, math.nan) for r in runs)

        cells = [
            name,
            radius,
            f"{mean('precision'):.4f}",
            f"{mean('recall'):.4f}",
            f"{min(r['recall'] for r in runs):.4f}",
            f"{mean('lang zh'):.4f}",
            f"{mean('lang en'):.4f}",
            f"{mean('lang other'):.4f}",
            f"{mean('hard negatives dropped'):.2f}",
            f"{mean('false drops'):.2f}",
            f"{mean('groups kept once'):.4f}",
            f"{mean('judged per query'):.3f}",
            f"{mean('bytes per entry'):.0f}",
            *(f"{mean(k):.3f}" for k in kinds),
        ]
        lines.append("\t".join(cells))
    out.write_text("\n".join(lines) + "\n")
    print(f"{len(results)} rows -> {out}")


def index_cost(n: int, radii: list[int]) -> None:
    """The block index at each candidate radius: the table set a run of ``n`` (and 10 M)
    fingerprints is filed in, the buckets a query probes and the fingerprints it compares
    (the index's own cost model, index/runs.py), then measured on ``n`` uniform random
    fingerprints: median query time and the hits within the radius."""
    import numpy as np

    from nearduppipe.index.layout import Layout
    from nearduppipe.index.runs import Geometry, _ball, run_shape
    from nearduppipe.index.search import BlockIndex

    rng = np.random.default_rng(2026)
    fps = rng.integers(0, 2**64, size=n, dtype=np.uint64)
    fresh = rng.integers(0, 2**64, size=2000, dtype=np.uint64).tolist()
    print(
        "radius | tables (key bits; probe radii) at n | buckets probed | fingerprints compared "
        "| same at 10 M | query median us | p99 us | hits/query (uniform)"
    )
    for r in radii:
        layout = Layout(distance=r)
        shapes = []
        for size in (n, 10_000_000):
            ts, d, _ = run_shape(Geometry(layout), size)
            probes = sum(_ball(d, int(p)) for p in ts.probes)
            shapes.append((ts, d, probes, probes * size / (1 << d)))
        idx = BlockIndex(layout)
        idx.add_many(fps)
        idx.query(fresh[0])
        times, hits = [], 0
        for q in fresh:
            t0 = time.perf_counter()
            hits += len(idx.query(q))
            times.append(time.perf_counter() - t0)
        (ts, d, probes, compared), (ts10, _d10, probes10, compared10) = shapes
        print(
            f"{r} | {len(ts.tables)} ({'/'.join(map(str, ts.key_bits))} bits, directory {d}; "
            f"{','.join(map(str, ts.probes.tolist()))}) | {probes} | {compared:.0f} | "
            f"{len(ts10.tables)} tables, {probes10} buckets, {compared10:.0f} compared | "
            f"{np.median(times) * 1e6:.1f} | {np.percentile(times, 99) * 1e6:.1f} | "
            f"{hits / len(fresh):.4f}",
            flush=True,
        )
        del idx


def combine(files: list[Path], out: Path) -> None:
    """Rows of several draws' TSVs (same variants) averaged, column by column; ``R min`` and
    ``hard neg/order`` keep the worst draw's."""
    tables = [[line.split("\t") for line in f.read_text().splitlines()] for f in files]
    head = tables[0][0]
    lines = ["\t".join(head)]
    for i, row in enumerate(tables[0][1:], start=1):
        cells = row[:2]
        for c, name in enumerate(head[2:], start=2):
            values = [float(t[i][c]) for t in tables]
            if name == "R min":
                cells.append(f"{min(values):.4f}")
            else:
                cells.append(f"{sum(values) / len(values):.4f}")
        lines.append("\t".join(cells))
    out.write_text("\n".join(lines) + "\n")
    print(f"{len(lines) - 1} rows, {len(files)} draws -> {out}")


def main() -> None:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("extract", help="extract a draw's texts into the cache")
    e.add_argument("--set", choices=["synthetic", "real-pages"], default="real-pages")
    e.add_argument("--seeds", default="7,11,23")
    e.add_argument("--cache", type=Path, default=CACHE)
    st = sub.add_parser("study", help="score every variant on one set")
    st.add_argument("--set", choices=["synthetic", "real-pages"], default="real-pages")
    st.add_argument("--seeds", default="7,11,23")
    st.add_argument("--orders", type=int, default=20)
    st.add_argument("--cache", type=Path, default=CACHE)
    st.add_argument("--out", type=Path, help="TSV of the rows (default: in the cache folder)")
    st.add_argument("--only", help="only the variants whose name this regular expression finds")
    ix = sub.add_parser("index", help="candidates per query of the block index at radius 8..12")
    ix.add_argument("--n", type=int, default=1_000_000)
    ix.add_argument("--radii", default="8,9,10,11,12")
    cb = sub.add_parser("combine", help="average the TSVs of several draws")
    cb.add_argument("files", type=Path, nargs="+")
    cb.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    if args.cmd == "combine":
        combine(args.files, args.out)
    if args.cmd == "index":
        index_cost(args.n, [int(x) for x in args.radii.split(",")])
    if args.cmd == "study":
        seeds = [int(x) for x in args.seeds.split(",")]
        out = args.out or args.cache / f"study-{args.set}.tsv"
        study(args.set, seeds, args.orders, args.cache, out, args.only)
    if args.cmd == "extract":
        for seed in map(int, args.seeds.split(",")):
            rows = extracted(args.set, seed, args.cache)
            print(f"{args.set} {seed}: {len(rows)} pages, {Counter(r[3] for r in rows)}")


if __name__ == "__main__":
    main()
