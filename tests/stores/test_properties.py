"""Property-based tests: arbitrary text and bytes never crash the pipeline, and random store
operations (reopens included) always agree with a brute-force model of the store."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from nearduppipe import Match, Store, extract, open_store
from nearduppipe.fingerprint.page import FingerprintParams, fingerprint_html, fingerprint_text
from nearduppipe.fingerprint.tokenize import tokenize

SKIPS = {
    "no_text",
    "too_short",
    "no_features",
    "empty_body",
    "html_too_large",
    "extract_error",
    "too_many_elements",
    "not_text",
}
PARAMS = FingerprintParams(min_text_length=1)
# Text weighted towards what pages contain: CJK, kana, Latin, digits, punctuation, markup.
page_text = st.text(
    alphabet=st.one_of(
        st.characters(min_codepoint=0x4E00, max_codepoint=0x4E80),
        st.characters(min_codepoint=0x3040, max_codepoint=0x30FF),
        st.sampled_from(list("abcXYZ019 ,.!?<>/&;\n\t\u00a0\u200b'\"-")),
        st.characters(),
    ),
    max_size=400,
)


@settings(max_examples=300, deadline=None)
@given(page_text)
def test_tokenize_never_fails(text: str) -> None:
    tokens = tokenize(text)
    assert all(t and not t.isspace() for t in tokens)


@settings(max_examples=300, deadline=None)
@given(page_text)
def test_fingerprint_is_64_bits_or_a_clear_skip(text: str) -> None:
    result = fingerprint_text(text, PARAMS)
    if result.fingerprint is None:
        assert result.skipped in SKIPS
    else:
        assert 0 <= result.fingerprint < 1 << 64 and result.skipped is None


@settings(max_examples=150, deadline=None)
@given(
    st.one_of(
        page_text.map(lambda t: f"<html><body><article><p>{t}</p></article></body></html>"),
        page_text,
        st.binary(max_size=600),
    )
)
def test_extraction_never_fails(html: str | bytes) -> None:
    extraction = extract(html)
    assert (extraction.text is None) == (extraction.reason is not None)
    result = fingerprint_html(html, None, PARAMS)
    assert result.fingerprint is not None or result.skipped in SKIPS


fingerprints = st.integers(min_value=0, max_value=(1 << 64) - 1)
flips = st.lists(st.integers(min_value=0, max_value=63), max_size=5)


class StoreModel(RuleBasedStateMachine):
    """The store against a list of (key, fingerprint): check_and_add keeps a fingerprint only
    when nothing within distance 3 is held, and returns the nearest (oldest among equals)."""

    @initialize(backend=st.sampled_from(["memory", "sqlite"]))
    def open(self, backend: str) -> None:
        self.dir = Path(tempfile.mkdtemp())
        self.uri = "memory:" if backend == "memory" else str(self.dir / "s.sqlite")
        self.store: Store = open_store(self.uri)
        self.model: list[tuple[str, int]] = []
        self.decisions = 0
        self.n = 0

    def expected(self, fp: int) -> list[Match]:
        near = [Match(k, f, d) for k, f in self.model if (d := (f ^ fp).bit_count()) <= 3]
        return sorted(near, key=lambda m: m.distance)

    def new_key(self) -> str:
        self.n += 1
        return f"k{self.n}"

    @rule(fp=fingerprints)
    def check_new(self, fp: int) -> None:
        self._check(fp)

    @rule(i=st.integers(min_value=0), bits=flips)
    def check_near_existing(self, i: int, bits: list[int]) -> None:
        if not self.model:
            return
        fp = self.model[i % len(self.model)][1]
        for b in bits:
            fp ^= 1 << b
        self._check(fp)

    def _check(self, fp: int) -> None:
        want = self.expected(fp)
        key = self.new_key()
        got = self.store.check_and_add(fp, key)
        if want:
            assert got == want[0]
            self.decisions += 1
        else:
            assert got is None
            self.model.append((key, fp))

    @rule(fp=fingerprints)
    def add(self, fp: int) -> None:
        key = self.new_key()
        self.store.add(fp, key)
        self.model.append((key, fp))

    @rule(fp=fingerprints)
    def near(self, fp: int) -> None:
        assert self.store.near(fp) == self.expected(fp)

    @rule()
    def reopen(self) -> None:
        if self.uri != "memory:":
            self.store.close()
            self.store = open_store(self.uri)

    @invariant()
    def sizes(self) -> None:
        if hasattr(self, "store"):
            assert len(self.store) == len(self.model)
            assert self.store.decision_count() == self.decisions

    def teardown(self) -> None:
        if hasattr(self, "store"):
            self.store.close()
            shutil.rmtree(self.dir, ignore_errors=True)


StoreModel.TestCase.settings = settings(
    max_examples=60,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_store_against_model = StoreModel.TestCase
