"""What verdict version 2 (the wide SimHash of word pairs, fingerprint/rule.py) costs per page
against version 1 (of the words themselves), on the real set's extracted texts.

Both versions run in the same process over the same pages, alternating round by round (1, 2,
1, 2, ...), so a busy machine slows both alike. Each round is the CPU time of
``fingerprint_text`` over every page (the package's call in a crawl's worker, after
extraction); the figures are medians over ``--rounds`` rounds per version, per page, and the
ratio of the medians. Version 1 is the floor: the ratio is what to compare between runs.

    python benchmarks/verdict_cost.py [--seed 7] [--pages 2000] [--rounds 5] [--cache DIR]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=7, help="the real set's draw")
    ap.add_argument("--pages", type=int, default=2000, help="pages of the draw (the first n)")
    ap.add_argument("--rounds", type=int, default=5, help="rounds per version")
    ap.add_argument("--cache", type=Path, default=None, help="extracted texts kept here")
    args = ap.parse_args()

    import quality
    import real_set

    from nearduppipe.fingerprint.page import FingerprintParams, fingerprint_text
    from nearduppipe.fingerprint.text import normalise_whitespace

    pages = real_set.build(args.seed)
    extracted, _ = quality.extract_all(pages, "trafilatura", args.cache)
    texts = [normalise_whitespace(t) for _, t in extracted if t][: args.pages]
    params = {v: replace(FingerprintParams(), verdict=v) for v in (1, 2)}
    for p in params.values():  # warm: dictionaries, compiled sums, the feature-row cache
        for text in texts[:200]:
            fingerprint_text(text, p)
    cpu: dict[int, list[float]] = {1: [], 2: []}
    for _ in range(args.rounds):
        for v, p in params.items():
            t0 = time.process_time()
            for text in texts:
                fingerprint_text(text, p)
            cpu[v].append((time.process_time() - t0) / len(texts) * 1e3)
    one, two = statistics.median(cpu[1]), statistics.median(cpu[2])
    print(
        f"real set draw {args.seed}: {len(texts)} texts, {args.rounds} alternating rounds; "
        f"CPU ms per page, median (min-max)"
    )
    for v in (1, 2):
        print(
            f"  verdict {v}: {statistics.median(cpu[v]):.3f} ({min(cpu[v]):.3f}-{max(cpu[v]):.3f})"
        )
    print(f"  version 2 / version 1: {two / one:.2f}x (+{two - one:.3f} ms per page)")


if __name__ == "__main__":
    main()
