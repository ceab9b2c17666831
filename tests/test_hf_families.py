"""Every sliding-window model family of the installed transformers against the spec's mask.

The code under test (impl.hf.families: cached prefill + decode, generate(), left-padded batches) is
held to the window-disabled reference forward, whose masks are built from pyspec.in_window (Lean
``inWindow``) by the hf:<model_type> target's ``spec_masks``: so a window ignored on both paths, an off-by-one mask, or a cache eviction bug
all show. The negative controls at the end show that a mask off by one and a model whose window is
ignored are both caught at the stated tolerance.
"""

import pytest

pytest.importorskip("transformers")

import torch  # noqa: E402

from fuzz.targets.hf import family as family_target  # noqa: E402
from impl.decoder import torch_threads  # noqa: E402
from impl.hf import compat, families  # noqa: E402
from impl.hf.families import ATOL, RTOL, Family  # noqa: E402

AVAILABLE = [mt for mt, why in families.available().items() if why is None]
W = 3
# Ten tokens: not yet full, exactly full, first eviction, steady state; prefill longer than W, and a
# chunk after cached tokens.
CHUNKS = [4, 1, 1, 3, 1]
# Prefill longer than W, then one token at a time: what every release's caches handle.
DECODE = [4, 1, 1, 1, 1, 1, 1]
RELEASE = compat.info().transformers


def known_finding(fam: Family, chunks, padded: bool = False) -> str | None:
    """The written-up finding this family and call pattern reproduce on the installed release, if any:
    the rows of fuzz/targets/hf/findings.py (the one table of which releases each finding applies to)
    for hf:<model_type>, asked about the calls as a case (one chunk per call, W = 3)."""
    from fuzz.ops import Case, Chunk, Push
    from fuzz.targets.hf import findings

    case = Case(W, tuple(Push() if c == 1 else Chunk(c) for c in chunks))
    for f in findings.applicable(f"hf:{fam.model_type}", RELEASE):
        if f.failure is not None and not padded:
            continue  # a finding of left-padded rows only
        if f.hits(case):
            return f.id
    return None


def agree_or_known(fam: Family, attn: str, ids, am, chunks, what: str):
    """Assert agreement at the tolerance; where a written-up finding applies, assert that it still
    reproduces (a disagreement or an exception) and xfail naming it."""
    finding = known_finding(fam, chunks, padded=not bool(am.all()))
    try:
        err = check(fam, attn, W, ids, am, chunks)
    except Exception as e:  # noqa: BLE001
        if finding is None:
            raise
        pytest.xfail(f"known finding {finding} reproduced on {RELEASE} ({type(e).__name__}): "
                     f"docs/findings/{finding}.md")
    if finding is not None:
        assert err > ATOL, (f"finding {finding} no longer reproduces for {fam.model_type} on {RELEASE}: update "
                            f"docs/findings/{finding}.md and this test")
        pytest.xfail(f"known finding {finding} reproduced on {RELEASE} (max error {err:.3g}): "
                     f"docs/findings/{finding}.md")
    assert err <= ATOL, f"{what}: max error {err:.3g} over tolerance {ATOL}"


def spec_masks(fam: Family, window: int, attention_mask: torch.Tensor) -> dict[str, torch.Tensor]:
    """Boolean [B, 1, T, T] per layer type from the spec (the hf:<model_type> target's masks)."""
    return family_target.spec_masks(fam.layer_types(), window, attention_mask)


def tokens(batch: int, length: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(3, families.VOCAB, (batch, length), generator=g)


def left_padded(ids: torch.Tensor, pads: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    am = torch.ones_like(ids)
    ids = ids.clone()
    for b, k in enumerate(pads):
        ids[b, :k] = 0
        am[b, :k] = 0
    return ids, am


def max_err(got: torch.Tensor, ref: torch.Tensor, rows: torch.Tensor) -> float:
    """Largest |got - ref| beyond the tolerance's relative part, over the real (unpadded) rows."""
    excess = (got - ref).abs() - RTOL * ref.abs()
    return float(excess[rows].max())


def check(fam: Family, attn: str, window: int, ids, am, chunks, *, ref_window=None):
    """Cached prefill + decode and generate() against the reference with the spec's masks; returns
    the worst error over both (the tests assert on it)."""
    ref_window = window if ref_window is None else ref_window
    rows = am.bool()
    got = fam.run_cached(window, attn, ids, chunks, am)
    ref = fam.reference_logits(attn, ids, spec_masks(fam, ref_window, am), am)
    err = max_err(got, ref, rows)
    g = 3
    prompt = ids.shape[1] - g
    seqs, logits = fam.generate(window, attn, ids[:, :prompt], g, am[:, :prompt])
    full_am = torch.ones_like(seqs)
    full_am[:, :prompt] = am[:, :prompt]
    ref2 = fam.reference_logits(attn, seqs, spec_masks(fam, ref_window, full_am), full_am)
    steps = ref2[:, prompt - 1:prompt - 1 + g]
    err2 = float(((logits - steps).abs() - RTOL * steps.abs()).max())
    return max(err, err2)


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    with torch_threads(1):
        yield


def test_every_family_of_the_newest_release_is_available():
    if compat.info().api != "layers":
        pytest.skip("older releases lack some families")
    assert AVAILABLE == list(families.FAMILIES)


@pytest.mark.parametrize("model_type", AVAILABLE)
def test_family_agrees_with_the_spec_mask(model_type):
    fam = Family(model_type)
    attns = fam.attn_impls(flex=False)
    assert "eager" in attns
    ids = tokens(1, sum(CHUNKS))
    am = torch.ones_like(ids)
    for attn in attns:
        assert check(fam, attn, W, ids, am, DECODE) <= ATOL or known_finding(fam, DECODE), (model_type, attn)
    for attn in attns:
        agree_or_known(fam, attn, ids, am, CHUNKS, f"{model_type}/{attn}")


@pytest.mark.parametrize("model_type", AVAILABLE)
def test_family_left_padded_batch(model_type):
    """Two rows, one left-padded by 2: sdpa in float64 where offered; eager in float32 (in float64
    its pad rows turn to NaN and reach real rows, see impl.hf.families.Family)."""
    fam = Family(model_type)
    attn, dtype = ("sdpa", torch.float64) if "sdpa" in fam.attn_impls(flex=False) else ("eager", torch.float32)
    fam = Family(model_type, dtype=dtype)
    ids, am = left_padded(tokens(2, 9, seed=1), [0, 2])
    agree_or_known(fam, attn, ids, am, [5, 1, 1, 1, 1], f"{model_type}/{attn}/{dtype} left-padded batch")


@pytest.mark.parametrize("model_type", ["mistral", "gemma2"])
def test_mask_off_by_one_is_caught(model_type):
    """The reference's mask with window W+1 instead of W (and W-1): the model at W disagrees."""
    if model_type not in AVAILABLE:
        pytest.skip(f"{model_type} not in this release")
    fam = Family(model_type)
    ids = tokens(1, sum(CHUNKS))
    am = torch.ones_like(ids)
    assert check(fam, "eager", W, ids, am, DECODE) <= ATOL
    for wrong in (W + 1, W - 1):
        err = check(fam, "eager", W, ids, am, DECODE, ref_window=wrong)
        assert err > 100 * ATOL, f"reference window {wrong} vs model {W}: only {err:.3g} apart"


@pytest.mark.parametrize("model_type", ["mistral", "gemma2", "gpt_oss"])
def test_window_ignored_on_both_paths_is_caught(model_type):
    """A model whose window is ignored (cache and mask alike) is self-consistent; only the spec's
    mask shows it."""
    if model_type not in AVAILABLE:
        pytest.skip(f"{model_type} not in this release")
    fam = Family(model_type, ignore_window=True)
    ids = tokens(1, sum(CHUNKS))
    am = torch.ones_like(ids)
    err = check(fam, "eager", W, ids, am, DECODE)
    assert err > 100 * ATOL, f"window ignored, yet only {err:.3g} from the spec's mask"
    assert check(fam, "eager", W, ids, am, DECODE, ref_window=families.MAX_POSITIONS) <= ATOL


def test_cache_keeping_one_more_is_caught():
    """The model at W+1 (its cache keeps one key too many) against the spec's W."""
    fam = Family("mistral", window_shift=1)
    ids = tokens(1, sum(CHUNKS))
    err = check(fam, "sdpa", W, ids, torch.ones_like(ids), DECODE)
    assert err > 100 * ATOL


def test_masks_are_validated():
    fam = Family("mistral")
    ids = tokens(1, 4)
    with pytest.raises(ValueError, match="boolean"):
        fam.reference_logits("eager", ids, torch.ones(1, 1, 4, 4))
    with pytest.raises(ValueError, match="no mask for layer types"):
        fam.reference_logits("eager", ids, {"full_attention": torch.ones(1, 1, 4, 4, dtype=torch.bool)})
    with pytest.raises(ValueError, match="add up"):
        fam.run_cached(W, "eager", ids, [2, 1])


def test_unknown_family_is_unavailable():
    with pytest.raises(compat.HFUnavailable, match="unknown family"):
        Family("llama")


@pytest.mark.parametrize("model_type", AVAILABLE)
def test_probe_passes(model_type):
    families.probe(model_type)


def test_flex_attention_is_offered_only_where_it_runs():
    """Flex attention is tried (float32: its CPU kernel takes nothing wider) and either offered — and
    then held to the spec like the others — or left out with the reason recorded. Offered after its probe died
    with the window only (torch 2.13 on CPU: the cached decode fails to compile,
    docs/findings/hf-flex-attention-sliding-compile.md), a cached run here dies the same way or, where this
    process compiled the decode kernel from another shape first, runs and matches."""
    fam = Family("mistral")
    attns = fam.attn_impls(flex=True)
    if "flex_attention" not in attns:
        assert fam.attn_unavailable.get("flex_attention"), "flex left out without a reason"
        return
    ids = tokens(1, sum(DECODE))
    crash = fam.probe_crashes.get("flex_attention")
    try:
        err = check(fam, "flex_attention", W, ids, torch.ones_like(ids), DECODE)
    except Exception as e:  # noqa: BLE001 - only the probe's own death may come out
        assert crash is not None and type(e).__name__ in crash, f"{type(e).__name__} unlike the probe's {crash!r}"
        return
    assert err <= ATOL


def test_flex_attention_reference_takes_its_mask_as_a_block_mask_that_says_the_same(monkeypatch):
    """The reference hands flex attention a BlockMask, never the dense additive mask (with torch 2.13 on CPU that
    corrupts the heap and kills the process on any window: docs/findings/hf-flex-attention-sliding-compile.md), and
    the BlockMask allows exactly the pairs the boolean mask allows (a sliding, left-padded batch of two)."""
    from torch.nn.attention.flex_attention import BlockMask

    T = 7
    q, k = torch.arange(T).view(T, 1), torch.arange(T).view(1, T)
    slide = (k <= q) & (q - k < W)
    mask = torch.stack([slide, slide & (k >= 2)]).view(2, 1, T, T)
    bm = families._block_mask(mask, torch.float32)
    assert isinstance(bm, BlockMask) and bm.shape[-2:] == (T, T)
    got = torch.tensor([[[bool(bm.mask_mod(torch.tensor(b), torch.tensor(0), torch.tensor(i), torch.tensor(j)))
                          for j in range(T)] for i in range(T)] for b in range(2)]).view(2, 1, T, T)
    assert torch.equal(got, mask)
    with pytest.raises(ValueError, match="boolean"):
        families._block_mask(mask.float(), torch.float32)

    fam = Family("mistral")
    if not getattr(fam.cls, "_supports_flex_attn", False):
        pytest.skip("this release's Mistral declares no flex attention support (4.45: added later): "
                    "the BlockMask above is checked, the routing needs a flex model")
    forms = []
    monkeypatch.setattr(families, "_block_mask", lambda m, dtype: forms.append("block") or m)
    monkeypatch.setattr(families, "_additive", lambda m, dtype: forms.append("additive") or m)
    monkeypatch.setattr(fam, "_forward", lambda *a, **kw: (_ for _ in ()).throw(RuntimeError("stop before running")))
    for attn in ("flex_attention", "eager"):
        with pytest.raises(RuntimeError, match="stop before running"):
            fam.reference_logits(attn, torch.arange(3, 3 + T).view(1, T), mask[:1])
    assert forms == ["block", "additive"]
