"""hf:<model_type>: every sliding-window family of the installed release, driven by the op language
(manual prefill + decode, a left-padded batch, generate()) and held to the spec-masked reference.

The negative controls use impl.hf.families.Family's knobs: ``window_shift`` (the model's window off by
one against the spec's) and ``ignore_window`` (a window ignored on the cached and the uncached path
alike, which only the spec's mask shows)."""

import pytest

pytest.importorskip("transformers")

import torch  # noqa: E402

import pyspec  # noqa: E402
from fuzz.campaign import fuzz_target  # noqa: E402
from fuzz.config import CampaignConfig  # noqa: E402
from fuzz.ops import Case, Chunk, Push, Reset  # noqa: E402
from fuzz.targets import registry  # noqa: E402
from fuzz.targets.base import Mismatch, TargetError  # noqa: E402
from fuzz.targets.hf import findings  # noqa: E402
from fuzz.targets.hf.family import MODES, FamilyMismatch, HFFamilyTarget, pad_of, spec_masks  # noqa: E402
from impl.decoder import torch_threads  # noqa: E402
from impl.hf import compat, families  # noqa: E402

AVAILABLE = [mt for mt, why in families.available().items() if why is None]
# Prefill longer than W, decode through the window, a chunk after cached tokens, a second stream.
CASE = Case(3, (Chunk(4), Push(), Push(), Chunk(3), Push(), Reset(2), Push(), Push(), Push()))
# What the legacy static cache of the hybrid families handles (docs/findings/hf-445-sliding-cache.md).
DECODE = Case(3, (Chunk(4), Push(), Push(), Push(), Push()))


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    with torch_threads(1):
        yield


def test_spec_masks_are_the_spec_window_over_positions():
    """Against the definition, cell by cell: a left-padded row's positions start at its first real token."""
    am = torch.tensor([[1, 1, 1, 1, 1, 1], [0, 0, 1, 1, 1, 1]])
    m = spec_masks(["sliding_attention", "full_attention"], 2, am)
    pos = families.positions(am)
    for b in range(2):
        for t in range(6):
            for p in range(6):
                real = bool(am[b, p]) and p <= t
                want_s = real and pyspec.in_window(2, int(pos[b, t]), int(pos[b, p]))
                assert bool(m["sliding_attention"][b, 0, t, p]) == want_s, (b, t, p)
                assert bool(m["full_attention"][b, 0, t, p]) == real, (b, t, p)


@pytest.mark.parametrize("model_type", AVAILABLE)
def test_every_family_runs_clean_for_a_short_campaign(model_type, tmp_path):
    """Every hf:<type> the installed release has: no failure in a short campaign (cases that hit a
    written-up finding are counted, not failures; the report says which)."""
    t = registry.resolve(f"hf:{model_type}")
    assert t.name == f"hf:{model_type}" and "eager" in t.attns
    res = fuzz_target(t, CampaignConfig(seconds=30, max_examples=12, campaign_seed=0, seeds_dir=str(tmp_path)))
    assert not res.failures, res.failures[0].error
    assert res.examples >= 12
    assert res.versions["attention"] == ",".join(t.attns) and "tolerance" in res.versions


@pytest.mark.parametrize("model_type", [mt for mt in ("mistral", "gemma2", "qwen2") if mt in AVAILABLE])
@pytest.mark.parametrize("shift", [1, -1])
def test_a_window_off_by_one_is_caught_in_every_mode(model_type, shift):
    """The model's window W+1 / W-1 against the spec's W: each mode on its own catches it."""
    ignored = [f for f in findings.applicable(f"hf:{model_type}", compat.info().transformers)
               if f.id == "hf-window-ignored"]
    if ignored:
        pytest.skip(f"{model_type} ignores its window on {compat.info().transformers} ({ignored[0].doc})")
    for mode in MODES:
        t = HFFamilyTarget(model_type, window_shift=shift, modes=[mode], strict=True, attns=["eager"])
        with pytest.raises(Mismatch, match=r"differ from the spec-masked reference"):
            t.run(DECODE if mode != "generate" else Case(3, (Chunk(2), Push(), Push(), Push(), Push())))


@pytest.mark.parametrize("model_type", [mt for mt in ("mistral", "gemma2", "gpt_oss") if mt in AVAILABLE])
def test_a_window_ignored_on_both_paths_is_caught(model_type):
    """Cached and uncached paths agree with each other; only the spec's mask shows the window is gone."""
    t = HFFamilyTarget(model_type, ignore_window=True, strict=True, attns=["eager"])
    with pytest.raises(FamilyMismatch, match="position 3 "):
        t.run(DECODE)


def test_a_campaign_catches_a_window_off_by_one(tmp_path):
    t = HFFamilyTarget("mistral", window_shift=1, name="shifted-mistral", attns=["sdpa"])
    res = fuzz_target(t, CampaignConfig(seconds=30, max_examples=40, campaign_seed=0, seeds_dir=str(tmp_path),
                                        window_max=6))
    assert res.failures and "differ from the spec-masked reference" in res.failures[0].error


def test_a_nan_logit_is_a_disagreement(monkeypatch):
    t = HFFamilyTarget("mistral", modes=["manual"], attns=["eager"], strict=True)
    real = t.family.run_cached

    def nan_at_the_end(*a, **kw):
        out = real(*a, **kw)
        out[:, -1] = float("nan")
        return out

    monkeypatch.setattr(t.family, "run_cached", nan_at_the_end)
    with pytest.raises(FamilyMismatch, match="by inf"):
        t.run(DECODE)


def test_a_left_padded_row_is_named_and_the_findings_see_its_column_stream(monkeypatch):
    """A disagreement only in the padded batch's padded row is flagged ``padded`` (what
    hf-gemma2-padded-decode-mask explains); the findings read the batch's columns as a view of the case."""
    t = HFFamilyTarget("mistral", modes=["padded"], attns=["sdpa"], strict=True)
    real = t.family.run_cached

    def wrong_padded_row(w, attn, ids, chunks, am=None):
        out = real(w, attn, ids, chunks, am)
        if am is not None:
            out[1, -1] += 1.0
        return out

    monkeypatch.setattr(t.family, "run_cached", wrong_padded_row)
    with pytest.raises(FamilyMismatch) as e:
        t.run(DECODE)
    assert e.value.padded and "(left-padded)" in str(e.value) and e.value.index == 4
    p = pad_of(DECODE)
    assert t.finding_views(DECODE)[1] == Case(3, (Chunk(4 + p),) + DECODE.ops[1:])


@pytest.mark.parametrize("model_type", AVAILABLE)
def test_each_family_holds_the_spec_on_a_long_case(model_type):
    """A case through every boundary, each mode and attention implementation, with the finding handling
    off: clean, or a written-up finding of this family on this release."""
    t = HFFamilyTarget(model_type, strict=True)
    hit = HFFamilyTarget(model_type).known_findings(CASE)
    try:
        t.run(CASE)
    except Mismatch as e:
        assert hit, f"hf:{model_type} on {compat.info().transformers}: {e}"


def test_spec_strings_resolve_and_name_their_attention(monkeypatch):
    t = registry.resolve("hf:mistral@eager")
    assert t.name == "hf:mistral@eager" and t.attns == ("eager",)
    assert registry.resolve(t.name).name == t.name
    for bad, needle in [("hf:llama", "unknown family hf:llama"), ("hf:mistral@bogus", "attention implementations"),
                        ("hf:", "needs a model type")]:
        with pytest.raises(TargetError, match=needle):
            registry.resolve(bad)


def test_list_targets_lists_every_family_with_a_reason():
    infos = {t.name: t for t in registry.list_targets()}
    for mt in families.FAMILIES:
        info = infos[f"hf:{mt}"]
        assert info.cpu and info.available == (mt in AVAILABLE), info
        assert info.available or info.reason
    assert set(f"hf:{mt}" for mt in AVAILABLE) <= set(registry.default_targets())
