"""Scratch study of the resiliparse extraction versions on the real set (issue 43, item 4),
scored as ``quality.py --set real-pages --order random`` scores (the same crawl orders, the
defaults' rule), but a few orders and one version at a time, to try variants of the region
choice quickly; each version's texts are kept in the cache directory for ``--diff``.

    python benchmarks/fast_region_study.py --version 3 --trafilatura --orders 3 \\
        --cache /tmp/np-fast-cache
"""

from __future__ import annotations

import argparse
import pickle
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import real_set  # noqa: E402
from quality import crawl_order, score  # noqa: E402
from quality_set import extract_cached  # noqa: E402

from nearduppipe import open_store  # noqa: E402
from nearduppipe.fingerprint.page import FingerprintParams, fingerprint_text  # noqa: E402
from nearduppipe.fingerprint.text import extract_text  # noqa: E402
from nearduppipe.settings import NearDupConfig  # noqa: E402


def pages_of(seed: int, cache: Path) -> list:
    path = cache / f"pages-{seed}.pkl"
    if path.exists():
        return pickle.loads(path.read_bytes())
    pages = real_set.build(seed)
    path.write_bytes(pickle.dumps(pages))
    return pages


def run(extracted, seed: int, orders: int, langs, params, config) -> list[dict[str, float]]:
    fps = {
        p.url: (r.fingerprints if (r := fingerprint_text(t, params) if t else None) else None)
        for p, t in extracted
    }
    runs = []
    for o in range(orders):
        order = crawl_order(extracted, seed * 1000 + o, True)
        decisions = {}
        with open_store("memory:", rule=config.rule) as store:
            for page, _ in order:
                fp = fps[page.url]
                m = store.check_and_add(fp, page.url) if fp is not None else None
                decisions[page.url] = m.key if m else None
        runs.append(score(order, decisions, real_set.POSITIVE, real_set.NEGATIVE, langs, True))
        if o == 0:
            group = {p.url: p.group for p, _ in order}
            wrong = sorted(
                f"{p.kind}:{p.group}->{group[m]}"
                for p, _ in order
                if (m := decisions[p.url]) is not None and group[m] != p.group
            )
    return runs, wrong


def line(name: str, runs, cpu=None, empty=None) -> str:
    def mean(k: str) -> float:
        return statistics.fmean(r[k] for r in runs)

    s = (
        f"{name:28s} P={mean('precision'):.4f} R={mean('recall'):.4f} "
        f"zhR={mean('recall zh'):.3f} enR={mean('recall en'):.3f} "
        f"swap={mean('chrome_swap'):.3f} heavy={mean('heavy_edit dropped'):.2f} "
        f"fd={mean('false_drops'):.2f}"
    )
    if empty is not None:
        s += f" empty={empty}"
    if cpu:
        s += f" cpu={statistics.median(cpu):.2f}/{statistics.fmean(cpu):.2f}"
    return s


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--orders", type=int, default=3)
    ap.add_argument("--cache", type=Path, default=Path("/tmp/np-fast-cache"))
    ap.add_argument("--version", type=int, default=3)
    ap.add_argument("--name", default="")
    ap.add_argument("--trafilatura", action="store_true")
    ap.add_argument("--diff", default="", help="another variant's texts pickle to compare")
    args = ap.parse_args()
    pages = pages_of(args.seed, args.cache)
    langs = tuple(
        lang for lang, _ in Counter(p.lang for p in pages if p.kind == "base").most_common()
    )
    config = NearDupConfig.from_settings({})
    params = FingerprintParams(config.features, config.limits, config.min_text_length)
    if args.trafilatura:
        texts, _ = extract_cached(pages, "trafilatura", args.cache)
        runs, wrong = run(
            list(zip(pages, texts, strict=True)), args.seed, args.orders, langs, params, config
        )
        print(line("trafilatura", runs, empty=sum(not t for t in texts)))
        print("  wrong:", " ".join(wrong))
    texts, cpu = [], []
    for p in pages:
        t0 = time.process_time()
        texts.append(extract_text(p.html, p.url, extractor="resiliparse", version=args.version))
        cpu.append((time.process_time() - t0) * 1000)
    name = args.name or f"v{args.version}"
    (args.cache / f"study-{name}-{args.seed}.pkl").write_bytes(
        pickle.dumps({p.url: t for p, t in zip(pages, texts, strict=True)})
    )
    runs, wrong = run(
        list(zip(pages, texts, strict=True)), args.seed, args.orders, langs, params, config
    )
    print(line(name, runs, cpu, sum(not t for t in texts)))
    print("  wrong:", " ".join(wrong))
    if args.diff:
        other = pickle.loads((args.cache / args.diff).read_bytes())
        changed = [p for p, t in zip(pages, texts, strict=True) if other.get(p.url) != t]
        print(f"  changed vs {args.diff}: {len(changed)} pages, {Counter(p.kind for p in changed)}")


if __name__ == "__main__":
    main()
