"""SimHash arithmetic: the seeds' worked examples, stability, and near-duplicate behaviour."""

from __future__ import annotations

import math
import os
import subprocess
import sys

import pytest

from nearduppipe import EmptyFeaturesError, FeatureConfig, features, fingerprint, hamming, simhash
from nearduppipe.fingerprint.simhash import fingerprints, xxh3_64


def test_seed_001_five_keywords_six_bits() -> None:
    # seed 001 §1.1: sums [15, -7, -1, 3, 5, 15] (most significant bit first) → 100111
    hashes = {
        "美国": 0b100101,
        "51区": 0b101011,
        "飞碟": 0b100111,
        "灰色": 0b101111,
        "外星人": 0b111011,
    }
    weights = {"美国": 5, "51区": 2, "飞碟": 3, "灰色": 1, "外星人": 4}
    assert simhash(weights, bits=6, hashfunc=hashes.__getitem__) == 0b100111
    # the same as (feature, weight) pairs
    assert simhash(list(weights.items()), bits=6, hashfunc=hashes.__getitem__) == 0b100111


def test_seed_000_three_features() -> None:
    # seed 000: [-5,5,-5,5,5,5] + [-3,-3,-3,3,-3,3] + [1,-1,-1,1,1,1] = [-7,1,-9,9,3,9] → 010111
    pairs = [(0b010111, 5), (0b000101, 3), (0b100111, 1)]
    assert simhash(pairs, bits=6, hashfunc=lambda h: h) == 0b010111


def test_seed_004_random_hyperplanes() -> None:
    # seed 004: h(w1..w5) = (1,-1,1) (-1,1,1) (1,-1,-1) (-1,-1,1) (1,1,-1); d = (1,2,0,3,0)
    # m = (-4, -2, 6) → 001
    h = {"w1": 0b101, "w2": 0b011, "w3": 0b100, "w4": 0b001, "w5": 0b110}
    d = {"w1": 1, "w2": 2, "w3": 0, "w4": 3, "w5": 0}
    assert simhash(d, bits=3, hashfunc=h.__getitem__) == 0b001


def test_tie_gives_zero_bit_and_hash_is_masked() -> None:
    # equal and opposite contributions: every sum is 0 → every bit 0
    assert simhash([(0b1010, 1.0), (0b0101, 1.0)], bits=4, hashfunc=lambda h: h) == 0
    # bits above `bits` are ignored
    assert simhash([(0b1_0000_0001, 2.0)], bits=8, hashfunc=lambda h: h) == 0b0000_0001


def test_single_feature_fingerprint_is_its_hash() -> None:
    assert simhash({"hello": 3.5}) == xxh3_64("hello")


def test_bad_input() -> None:
    with pytest.raises(EmptyFeaturesError):
        simhash({})
    with pytest.raises(ValueError):
        simhash({"a": 1.0}, bits=65)
    with pytest.raises(ValueError):
        simhash({"a": float("nan")})
    with pytest.raises(EmptyFeaturesError):
        fingerprint("  ,。!  ")
    with pytest.raises(ValueError):
        hamming(-1, 3)


def test_weights_are_exact_and_order_independent() -> None:
    feats = {f"f{i}": 1.0 / (i + 1) for i in range(500)}
    a = simhash(feats)
    b = simhash(dict(reversed(list(feats.items()))))
    assert a == b
    # huge weights do not overflow
    assert simhash({"a": 1e12, "b": 3e11, "c": -5e11}) == simhash({"a": 1.0, "b": 0.3, "c": -0.5})


def test_hamming() -> None:
    assert hamming(0, 0) == 0
    assert hamming(0b1011, 0b1001) == 1
    assert hamming(0, (1 << 64) - 1) == 64


ZH = (
    "国家统计局今天发布数据显示,今年上半年国内生产总值同比增长百分之五点三,经济运行总体平稳。"
    "其中,第一产业增加值增长百分之三点七,第二产业增加值增长百分之五点八,第三产业增加值增长百分之五点"
    "零。专家表示,消费对经济增长的贡献率继续提高,新能源汽车、集成电路等高技术产品产量保持较快增长,"
    "但外部环境复杂多变,国内需求仍显不足,下半年需要进一步扩大内需、稳定就业、防范化解重点领域风险。"
)


def test_fingerprint_is_stable_across_processes() -> None:
    here = fingerprint(ZH)
    code = "import sys; from nearduppipe import fingerprint;print(fingerprint(sys.stdin.read()))"
    env = dict(os.environ, PYTHONHASHSEED="12345")
    out = subprocess.run(
        [sys.executable, "-c", code], input=ZH, capture_output=True, text=True, env=env, check=True
    )
    assert int(out.stdout) == here
    # pinned value: a change here changes every stored fingerprint, so it must be deliberate
    assert here == fingerprint(ZH, FeatureConfig())
    assert here == 0x6B1D4F4F4420C83E


def test_near_duplicates_are_close_and_different_texts_are_far() -> None:
    edited = ZH.replace("专家表示", "有专家表示").replace("较快增长", "快速增长")
    other = (
        "气象台发布暴雨蓝色预警,预计未来二十四小时内我市大部分地区将有大到暴雨,局部地区有大暴雨,"
        "并伴有短时强降水、雷电和七级以上雷暴大风等强对流天气。请有关单位和人员做好防范工作,注意"
        "防范城市内涝、山洪和地质灾害,尽量减少外出,驾车出行注意交通安全。"
    )
    assert hamming(fingerprint(ZH), fingerprint(edited)) <= 3
    assert hamming(fingerprint(ZH), fingerprint(other)) > 10


def test_features_weighting_options() -> None:
    raw = FeatureConfig(weighting="tf", sublinear_tf=False)
    tf = features("apple banana apple cherry", raw)
    assert tf == {"apple": 2.0, "banana": 1.0, "cherry": 1.0}
    default = features("apple banana apple cherry")  # sublinear tf: 1 + log(tf)
    assert default == pytest.approx({"apple": 1 + math.log(2), "banana": 1.0, "cherry": 1.0})
    tfidf = features("apple banana apple", FeatureConfig(weighting="tfidf", sublinear_tf=False))
    assert tfidf["apple"] == pytest.approx(2 * tfidf["banana"])
    top = features(
        "apple banana apple cherry", FeatureConfig(weighting="tf", sublinear_tf=False, top_k=1)
    )
    assert top == {"apple": 2.0}
    sh = features(
        "a quick brown fox", FeatureConfig(weighting="tf", shingle=2, drop_stop_words=False)
    )
    assert set(sh) == {"a quick", "quick brown", "brown fox"}
    sub = features("go go go go", FeatureConfig(weighting="tf", sublinear_tf=True))
    assert sub["go"] == pytest.approx(1 + math.log(4))
    assert "the" not in features("the cat and the hat")
    with pytest.raises(ValueError):
        FeatureConfig(weighting="bm25")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        FeatureConfig(top_k=0)


def test_row_cache_generations_give_the_rows_hashing_gives(monkeypatch: pytest.MonkeyPatch) -> None:
    # A small cache, filled many times over by pages that share a common vocabulary and each
    # add words of their own: every page's fingerprints, computed through whatever mix of
    # current-generation, old-generation and fresh rows the cache holds by then, equal those
    # computed from scratch (the general path: one xxh3_64 call per feature, no cache).
    from nearduppipe.fingerprint import simhash as S

    monkeypatch.setattr(S, "_ROW_CACHE_SIZE", 64)
    monkeypatch.setattr(S, "_row_cache", {})
    monkeypatch.setattr(S, "_row_cache_old", {})
    common = [f"common{i}" for i in range(40)]
    swaps = 0
    for page in range(60):
        feats = {w: 1.0 + (i % 3) for i, w in enumerate(common[page % 7 :])}
        feats |= {f"page{page}word{j}": 1.0 + j % 2 for j in range(page % 30)}
        before = S._row_cache
        cached = S.simhash_pair(feats)
        swaps += S._row_cache is not before
        pairs = list(feats.items())  # not a Mapping: the uncached path
        assert cached == S.simhash_pair(pairs), page
        assert all(len(row) == 72 for row in S._row_cache.values())
        assert len(S._row_cache) <= 64
    assert swaps >= 5  # the generations did turn over


def test_sign_bits_equal_a_plain_loop() -> None:
    # The vectorised reduction against the definition, on random matrices with repeated,
    # negative and zero weights (ties give 0-bits), runs of one weight over 255 rows included.
    import numpy as np

    from nearduppipe.fingerprint import simhash as S

    rng = np.random.default_rng(11)
    for n, m in [(1, 1), (3, 9), (40, 9), (700, 9), (300, 1), (5, 2)]:
        words = rng.integers(0, 2**64, size=(n, m), dtype=np.uint64, endpoint=False)
        for w in (
            rng.integers(-5, 6, size=n).astype(np.float64) * 65536,
            np.full(n, 65536.0),
            rng.choice([65536.0, 110962.0, 137534.0], size=n),
        ):
            bits = 64 * m
            expected = 0
            for j in range(bits):
                col = (words[:, j // 64] >> np.uint64(j % 64)) & np.uint64(1)
                total = sum(int(wi) * (2 * int(b) - 1) for wi, b in zip(w, col, strict=True))
                expected |= (total > 0) << j
            assert S._sign_bits(words, w, bits) == expected, (n, m)
            assert S._sign_bits(words, w, bits - 7) == expected & ((1 << (bits - 7)) - 1)
            # both ways of the reduction: numpy (while numba loads) and compiled
            assert S._sign_bits_numpy(words, w, bits) == expected, (n, m)
            S.warm(wait=True)
            assert S._compiled is not None
            assert S._sign_bits(words, w, bits) == expected, (n, m)


def test_fingerprints_from_counts_equal_those_from_weights() -> None:
    # fingerprints() looks the fixed-point weights up by term frequency; the same features
    # weighed one by one (features() then simhash_pair()) give the same bits, including past
    # the end of the lookup table (tf >= 4096, where it falls back to weighing)
    import random

    import numpy as np

    from nearduppipe.fingerprint import simhash as S
    from nearduppipe.fingerprint.features import features, term_counts

    rng = random.Random(3)
    vocab = [f"w{i}" for i in range(300)] + ["东京", "新闻", "发布会", "don't", "Größe"]
    texts = [" ".join(rng.choices(vocab, k=rng.randint(1, 3000))) for _ in range(60)]
    texts += ["solo", "echo " * 4095 + "other", "echo " * 4096 + "other", "a b " * 5000]
    for text in texts:
        counts = term_counts(text)
        fixed = S._fixed_from_counts(counts)
        weights = list(features(text).values())
        if max(counts.values()) < 4096:
            assert fixed is not None
            assert np.array_equal(fixed, S._fixed_point(weights).astype(np.int64))
        else:
            assert fixed is None
        assert S.fingerprints(text) == S.simhash_pair(features(text)), text[:40]
        assert S.fingerprint(text) == S.simhash(features(text))
        for config in (FeatureConfig(top_k=5), FeatureConfig(weighting="tfidf", shingle=2)):
            assert S.fingerprint(text, config) == S.simhash(features(text, config))
            assert S.fingerprints(text, config) == S.simhash_pair(features(text, config))


def test_first_fingerprint_in_a_fresh_process_loads_the_compiled_reduction() -> None:
    # a new process (a crawl's worker): numba is not imported with the package; the first
    # fingerprints are reduced by numpy while a thread loads the compiled reduction, the later
    # ones by the compiled loop, and both give this process's fingerprints
    code = (
        "import sys\n"
        "from nearduppipe.fingerprint import fingerprints, simhash\n"
        "assert 'numba' not in sys.modules and simhash._compiled is None\n"
        "f = fingerprints('the first page of a worker 东京新闻')\n"
        "simhash.warm(wait=True)\n"
        "assert 'numba' in sys.modules and simhash._compiled is not None\n"
        "g = fingerprints('the first page of a worker 东京新闻')\n"
        "print(f.fp, f.wide, g.fp, g.wide)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    here = fingerprints("the first page of a worker 东京新闻")
    assert out.stdout.split() == [str(here.fp), str(here.wide)] * 2


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is POSIX only")
def test_a_fork_waits_for_the_compiled_reduction_to_load() -> None:
    # a fork while the loader thread imports numba would hand the child an import lock that no
    # thread of its own holds (its next import hangs): a fork first lets the loading finish, so
    # the child has the compiled reduction and imports freely
    code = (
        "import os, sys\n"
        "from nearduppipe.fingerprint import fingerprints, simhash\n"
        "fingerprints('a page fingerprinted just before the process forks')\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    import json\n"
        "    ok = simhash._compiled is not None and 'numba' in sys.modules\n"
        "    fingerprints('the child fingerprints too')\n"
        "    os._exit(0 if ok else 3)\n"
        "_, status = os.waitpid(pid, 0)\n"
        "print(os.waitstatus_to_exitcode(status))\n"
    )
    out = subprocess.run(
        [sys.executable, "-W", "ignore::DeprecationWarning", "-c", code],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    assert out.stdout.split() == ["0"], out.stderr
