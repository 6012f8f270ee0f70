"""What ``fingerprints(text)`` costs per page, stage by stage, before and after issue 33 (item 2).

Texts: the main text of realistic portal pages (benchmarks/pages.py, extracted by trafilatura
and white-space normalised as ``fingerprint_text`` does), Chinese and English, and texts mixing
scripts (Japanese, Korean, Arabic, Thai, Russian, German with Chinese and English). "before" is
a faithful copy of the pipeline as it was (``legacy_*`` below: a Python loop per token, a
hash call per feature, float64 products over the unpacked bits); "after" is the package. Both
are checked to give the same fingerprints on every text before anything is timed.

Stages, each timed on its own input: normalise (NFKC + case-fold), tokens (normalise, regex or
split, segmenter, counting and stop words; rjieba included), weights ("before": ``1 + log tf``
per feature; "after": the fixed-point weights looked up by term frequency), hashing (the
feature rows: xxh3_64 and the wide words; "before" hashes only, its wide words are in its sums),
sums (both sign reductions; "after": numba's compiled loop, fingerprint/compiled.py), and the
whole call. The feature-row cache is warm after one pass over the texts; "total, cold rows"
empties it before every page (every feature hashed again: the cost for a page of only unseen
words).

The machine is shared: each number is the median over pages of one round, then the median of
``--rounds`` rounds, as wall time and as the thread's CPU time. ``floor`` is rjieba cutting the
page's Han runs alone (what any exact jieba tokenisation costs), measured in the same rounds;
the ratios to it are what to compare between runs.

With ``--texts real``: the main texts of the crawl benchmark's real-world-shaped pages
(benchmarks/real_pages.py: Chinese, English, German, French), as each extractor gives them, per
language and all languages together ("all": the per-page median the issue's 1 ms is about).
"before: normalise" is ``unicodedata.normalize`` itself, "after" the full-width fast path.

With ``--first-call``: what a fresh process (a crawl's worker) pays at its start, with numba's
disk cache and without one (an empty ``NUMBA_CACHE_DIR``: the first run after an install): the
first fingerprints (dictionaries), the first page while numba loads on a thread (numpy reduces
it), and when the compiled reduction is ready; against ``NEARDUP_PAGE_TIMEOUT``'s default.

    python benchmarks/fingerprint_cost.py [--pages 40] [--rounds 7] [--texts portal|real]
    python benchmarks/fingerprint_cost.py --first-call [--rounds 3]
"""

from __future__ import annotations

import argparse
import gc
import math
import random
import re
import statistics
import sys
import time
import unicodedata
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import rjieba
import xxhash
from pages import article_paragraphs, portal_page
from real_pages import real_pages

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from nearduppipe.fingerprint import features as F
from nearduppipe.fingerprint import simhash as S
from nearduppipe.fingerprint import tokenize as T
from nearduppipe.fingerprint.stopwords import STOP_WORDS
from nearduppipe.fingerprint.text import extract, extract_text, normalise_whitespace

# ---- before: the pipeline as it was (kept here to measure against and to check identity) ----

_LEGACY_TOKEN_RE = re.compile(
    rf"(?P<han>[{T._HAN}]+)|(?P<nospace>[{T._NOSPACE}]+)"
    rf"|(?P<word>[^\W_{T._HAN}{T._NOSPACE}]+(?:['’][^\W_{T._HAN}{T._NOSPACE}]+)*)"
)
_HAN_RUN = re.compile(f"[{T._HAN}]+")


def legacy_tokens(text: str) -> list[str]:
    pieces: list[str | None] = []
    han_runs: list[str] = []
    for m in _LEGACY_TOKEN_RE.finditer(text):
        kind = m.lastgroup
        if kind == "word":
            pieces.append(m.group())
        elif kind == "han":
            han_runs.append(m.group())
            pieces.append(None)
        else:
            pieces.extend(T._bigrams(m.group()))
    if not han_runs:
        return pieces  # type: ignore[return-value]
    run_tokens = iter(rjieba.cut("\n".join(han_runs)))
    tokens: list[str] = []
    for piece in pieces:
        if piece is not None:
            tokens.append(piece)
            continue
        for token in run_tokens:
            if token == "\n":
                break
            tokens.append(token)
    return tokens


def legacy_counts(norm: str) -> Counter[str]:
    stop = STOP_WORDS
    return Counter([t for t in legacy_tokens(norm) if t not in stop])


def legacy_weigh(counts: Counter[str]) -> dict[str, float]:
    return {f: 1.0 + math.log(c) for f, c in counts.items()}


def legacy_hashes(feats: dict[str, float]) -> list[int]:
    digest = xxhash.xxh3_64_intdigest
    return [digest(f.encode("utf-8")) for f in feats]


def legacy_sign_bits(words: np.ndarray, w: np.ndarray, bits: int) -> int:
    n = words.shape[0]
    hbits = np.unpackbits(words.view(np.uint8).reshape(n, -1), axis=1, bitorder="little")
    sums = 2.0 * (w @ hbits[:, :bits].astype(np.float64)) - float(w.sum())
    return int.from_bytes(np.packbits(sums > 0, bitorder="little").tobytes(), "little")


def legacy_sums(hashes: list[int], weights: list[float]) -> tuple[int, int]:
    hv = np.array(hashes, dtype="<u8")
    w = S._fixed_point(weights)
    fp = legacy_sign_bits(hv.reshape(-1, 1), w, 64)
    wide = legacy_sign_bits(np.ascontiguousarray(S._wide_words(hv, 8)), w, 512)
    return fp, wide


def legacy_normalise(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold()


def legacy_fingerprints(text: str) -> tuple[int, int]:
    feats = legacy_weigh(legacy_counts(legacy_normalise(text)))
    return legacy_sums(legacy_hashes(feats), list(feats.values()))


# ---- texts ----

OTHER = [
    "東京都は今日、新しい交通計画を発表しました。ニュースによると、明日は雨が降るでしょう。",
    "서울시는 오늘 새로운 교통 계획을 발표했다. 시민들은 대체로 환영하는 분위기다.",
    "أعلنت الحكومة اليوم عن خطة جديدة للنقل العام في العاصمة.",
    "วันนี้รัฐบาลประกาศแผนใหม่สำหรับการขนส่งสาธารณะในเมืองหลวง",
    "Сегодня правительство объявило новый план общественного транспорта.",
    "Die Straße bleibt heute geschlossen, sagte der Bürgermeister am Dienstag.",
    "iPhone 15 发布会于 2026 年 9 月举行,Apple CEO Tim Cook 表示新品将在下月上市。",
]


def real_texts(n: int, extractor: str) -> dict[str, list[str]]:
    """Main texts of the first ``n`` pages of each language of benchmarks/real_pages.py (the
    crawl benchmark's pages), as ``fingerprint_html`` gets them from ``extractor``."""
    out: dict[str, list[str]] = {}
    for kind, page, _ in real_pages(8 * n):
        lang = "en" if kind == "blog" else kind
        texts = out.setdefault(f"{lang} ({extractor})", [])
        if len(texts) < n:
            text = extract(page, None, extractor=extractor).text  # type: ignore[arg-type]
            if text:
                texts.append(text)
    return out


def page_texts(n: int, seed: int = 7) -> dict[str, list[str]]:
    rng = random.Random(seed)
    out: dict[str, list[str]] = {"zh": [], "en": [], "mixed": []}
    for i in range(n):
        for lang in ("zh", "en"):
            paras = article_paragraphs(rng, rng.choice([2000, 2900, 3500, 4500]), lang)
            text = extract_text(portal_page(f"第{i}号新闻", paras, rng))
            assert text is not None
            out[lang].append(normalise_whitespace(text))
        zh = article_paragraphs(rng, 1500, "zh")
        mixed = [rng.choice(OTHER) for _ in range(rng.randint(20, 40))] + zh
        rng.shuffle(mixed)
        out["mixed"].append(" ".join(mixed))
    return out


# ---- timing ----


def rounds_of(
    stages: dict[str, Callable[[Any], Any]], inputs: dict[str, list[Any]], rounds: int
) -> dict[str, tuple[float, float, float]]:
    """Per stage, ms: (wall, cpu, best) = the median over pages of the page's median wall time
    over rounds, the same of its thread CPU time, and the median over pages of its fastest
    round (what the page costs when no other job gets in the way). The stages run one after the
    other on each page, so a burst of load hits them alike."""
    n = len(next(iter(inputs.values())))
    wall = {k: [[0] * rounds for _ in range(n)] for k in stages}
    cpu = {k: [[0] * rounds for _ in range(n)] for k in stages}
    clock, tclock = time.perf_counter_ns, time.thread_time_ns
    for r in range(rounds):
        for i in range(n):
            for name, fn in stages.items():
                arg = inputs[name][i]
                c0, w0 = tclock(), clock()
                fn(arg)
                w1, c1 = clock(), tclock()
                wall[name][i][r] = w1 - w0
                cpu[name][i][r] = c1 - c0

    def summary(per_page: list[list[int]], of: Callable[[list[int]], float]) -> float:
        return statistics.median(of(times) for times in per_page) / 1e6

    return {
        k: (summary(wall[k], statistics.median), summary(cpu[k], statistics.median),
            summary(wall[k], min))
        for k in stages
    }  # fmt: skip


def cold(text: str) -> Any:
    S._row_cache.clear()
    S._row_cache_old.clear()
    return S.fingerprints(text)


def measure(label: str, texts: list[str], rounds: int) -> None:
    norms = [legacy_normalise(t) for t in texts]
    legacy_c = [legacy_counts(n) for n in norms]
    new_c = [F.term_counts(t, F.DEFAULT_FEATURES) for t in texts]
    feats = [F.weigh(c, F.DEFAULT_FEATURES) for c in new_c]
    for t, f in zip(texts, feats, strict=True):  # identity first: the same features, same bits
        new = S.fingerprints(t)
        assert (new.fp, new.wide) == legacy_fingerprints(t), t[:80]
        assert list(f.items()) == list(legacy_weigh(legacy_counts(legacy_normalise(t))).items())
    legacy_hw = [(legacy_hashes(f), list(f.values())) for f in feats]
    rows = [(S._feature_rows(c), S._fixed_from_counts(c)) for c in new_c]
    stages: dict[str, Callable[[Any], Any]] = {
        "floor: rjieba.cut(Han runs)": lambda t: rjieba.cut("\n".join(_HAN_RUN.findall(t))),
        "floor: xxh3_64(text)": lambda t: xxhash.xxh3_64_intdigest(t.encode("utf-8")),
        "before: normalise": legacy_normalise,
        "after: normalise": T.normalise,
        "before: tokens": lambda t: legacy_counts(legacy_normalise(t)),
        "after: tokens": lambda t: F.term_counts(t, F.DEFAULT_FEATURES),
        "before: weights": legacy_weigh,
        "after: weights": S._fixed_from_counts,
        "before: hashing": legacy_hashes,
        "after: hashing": S._feature_rows,
        "before: sums": lambda hw: legacy_sums(*hw),
        "after: sums": lambda rw: S._sign_bits(rw[0], rw[1], 576),
        "before: total": legacy_fingerprints,
        "after: total": S.fingerprints,
    }
    by_input: dict[str, list[Any]] = {"before: weights": legacy_c, "after: weights": new_c}
    by_input |= {"before: hashing": feats, "after: hashing": new_c}
    by_input |= {"before: sums": legacy_hw, "after: sums": rows}
    inputs = {k: by_input.get(k, texts) for k in stages}
    for t in texts:  # warm: dictionaries loaded, feature hashes cached
        S.fingerprints(t)
    S.warm(wait=True)  # the compiled reduction loaded (a worker has it ~1 s after its start)
    # the benchmark's own data (every text, count and matrix above) is no business of the
    # collector: frozen, so a collection during a stage costs what it would in a lean process
    gc.collect()
    gc.freeze()
    result = rounds_of(stages, inputs, rounds)
    # apart, after the others: it empties the cache they rely on
    result |= rounds_of(
        {"after: total, cold rows": cold}, {"after: total, cold rows": texts}, rounds
    )
    chars = statistics.median(len(t) for t in texts)
    print(f"== {label}: {len(texts)} texts, median {chars:.0f} characters; ms per page")
    print(f"  {'stage':30s} {'wall':>7s} {'cpu':>7s} {'best':>7s}  best / floor's best")
    floor = result["floor: rjieba.cut(Han runs)"]
    for name, (w, c, b) in result.items():
        print(f"  {name:30s} {w:7.3f} {c:7.3f} {b:7.3f}  {b / floor[2]:6.2f}x")
    before, after = result["before: total"], result["after: total"]
    print(
        f"  speed-up of the total: {before[0] / after[0]:.2f}x wall, {before[1] / after[1]:.2f}x"
        f" cpu, {before[2] / after[2]:.2f}x best"
    )


_FIRST_CALL = """
import time
t0 = time.perf_counter()
from nearduppipe.fingerprint import FingerprintParams, fingerprint_text, fingerprints
from nearduppipe.fingerprint.simhash import warm
t1 = time.perf_counter()
warm()  # what a worker's initializer does: start loading numba on a thread
fingerprint_text("预热分词词典 warm up the dictionaries " * 20, FingerprintParams())
t2 = time.perf_counter()
fingerprints("the first page after start-up " * 30)  # numpy, or compiled if loaded by now
t3 = time.perf_counter()
warm(wait=True)
t4 = time.perf_counter()
print(t1 - t0, t2 - t1, t3 - t2, t4 - t1)
"""


def first_call(rounds: int) -> None:
    """Seconds a fresh process spends importing, on its first fingerprints (dictionaries) and
    first page while numba loads on a thread, and until the compiled reduction is loaded (from
    the start of warm()), with and without numba's disk cache."""
    import os
    import subprocess
    import tempfile

    from nearduppipe.settings import DEFAULTS

    limit = DEFAULTS["NEARDUP_PAGE_TIMEOUT"]
    root = str(Path(__file__).resolve().parents[1])
    print(f"== first call in a fresh process, seconds (NEARDUP_PAGE_TIMEOUT default: {limit})")
    print(f"  {'numba cache':12s} {'import':>7s} {'1st text':>8s} {'1st page':>8s} {'loaded':>7s}")
    for cache in ("on disk", "none") * rounds:
        with tempfile.TemporaryDirectory() as empty:
            env = dict(os.environ, PYTHONPATH=root)
            if cache == "none":
                env["NUMBA_CACHE_DIR"] = empty
            out = subprocess.run(
                [sys.executable, "-c", _FIRST_CALL], env=env, capture_output=True, text=True,
                check=True,
            )  # fmt: skip
        imp, text, page, loaded = map(float, out.stdout.split())
        print(f"  {cache:12s} {imp:7.3f} {text:8.3f} {page:8.4f} {loaded:7.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pages", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument(
        "--texts",
        choices=("portal", "real"),
        default="portal",
        help="portal: synthetic portal pages; real: benchmarks/real_pages.py by both extractors",
    )
    parser.add_argument("--first-call", action="store_true", help="fresh-process start-up cost")
    args = parser.parse_args()
    if args.first_call:
        first_call(args.rounds)
        return
    if args.texts == "real":
        texts = {}
        for extractor in ("resiliparse", "trafilatura"):
            by_lang = real_texts(args.pages, extractor)
            texts |= by_lang
            texts[f"all ({extractor})"] = [t for group in by_lang.values() for t in group]
    else:
        texts = page_texts(args.pages)
    for label, group in texts.items():
        measure(label, group, args.rounds)


if __name__ == "__main__":
    main()
