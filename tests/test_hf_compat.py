"""impl.hf.compat's feature detection, each branch on stand-in classes (the installed release shows one
branch; scripts/hf_matrix.sh runs the rest on real releases), and the probes' typed errors."""

import pytest

pytest.importorskip("transformers")

import torch  # noqa: E402

from impl.hf import caches, compat, models  # noqa: E402


class Cache45:  # 4.45: both named, max_batch_size deprecated
    def __init__(self, config, batch_size=None, max_cache_len=None, device="cpu", dtype=None, max_batch_size=None):
        pass


class Cache51:  # 4.51: max_batch_size only
    def __init__(self, config, max_batch_size, max_cache_len=None, device=None, dtype=None):
        pass


class Base54:  # 4.54: the subclass forwards **kwargs to a base that names max_batch_size
    def __init__(self, layer_classes=None, config=None, max_batch_size=None, max_cache_len=None, device=None,
                 dtype=None, **kwargs):
        pass


class Cache54(Base54):
    def __init__(self, config, *args, **kwargs):
        super().__init__(config=config, *args, **kwargs)


class Cache56:  # 4.56: no batch keyword at all
    def __init__(self, config, max_cache_len, offloading=False):
        pass


@pytest.mark.parametrize("cls,want", [(Cache45, "batch_size"), (Cache51, "max_batch_size"),
                                      (Cache54, "max_batch_size"), (Cache56, None)])
def test_batch_keyword_is_detected_from_the_signatures(cls, want):
    assert compat._batch_keyword(cls) == want


def test_mask_sizes_passes_an_int_or_a_tensor_as_the_parameter_names():
    seen = []

    class IntLayer:
        def get_mask_sizes(self, query_length):
            seen.append(query_length)
            return 5, 2

    class TensorLayer:
        def get_mask_sizes(self, cache_position):
            seen.append(cache_position)
            return torch.tensor(4), torch.tensor(1)

    class Odd:
        def get_mask_sizes(self, something):
            return 0, 0

    assert compat.mask_sizes(IntLayer(), 7, 3) == (5, 2) and seen[-1] == 3
    assert compat.mask_sizes(TensorLayer(), 7, 3) == (4, 1) and seen[-1].tolist() == [7, 8, 9]
    assert compat.mask_sizes(object(), 7, 3) is None
    with pytest.raises(compat.HFIncompatible, match=r"get_mask_sizes\(something\)"):
        compat.mask_sizes(Odd(), 0, 1)


def test_layer_kv_reads_layers_or_key_cache_and_none_means_empty():
    k = torch.ones(1, 1, 2, 4)

    class Layer:
        def __init__(self, keys, initialized=True):
            self.keys, self.values, self.is_initialized = keys, keys, initialized

    class Layered:
        def __init__(self, *layers):
            self.layers = list(layers)

    class Legacy:
        def __init__(self, kc):
            self.key_cache, self.value_cache = kc, kc

    assert compat.layer_kv(Layered(Layer(k)), 0)[0] is k
    assert compat.layer_kv(Layered(Layer(None)), 0) is None          # 5.18+ after reset, before update
    assert compat.layer_kv(Layered(Layer(k, initialized=False)), 0) is None
    assert compat.layer_kv(Layered(), 0) is None
    assert compat.layer_kv(Legacy([k]), 0)[0] is k
    assert compat.layer_kv(Legacy([None]), 0) is None                # 4.54-4.55 wrapper items
    assert compat.layer_kv(Legacy([]), 0) is None
    with pytest.raises(compat.HFIncompatible, match="neither per-layer objects nor key_cache"):
        compat.layer_kv(object(), 0)


@pytest.mark.parametrize("kind", ["dynamic", "static"])
def test_cache_probe_passes(kind):
    caches.probe(kind)


@pytest.mark.parametrize("arch", ["mistral", "gemma2"])
def test_model_probe_passes(arch):
    models.probe(arch)


def test_probe_names_release_and_api(monkeypatch):
    """An API the adapter cannot drive is a typed harness fault naming the release and the call."""
    def broken_update(self, *a, **kw):
        raise TypeError("update() got an unexpected keyword argument 'cache_kwargs'")

    monkeypatch.setattr(caches.LayerDriver, "update", broken_update)
    with pytest.raises(compat.HFIncompatible) as e:
        caches.probe("static")
    assert isinstance(e.value, compat.HFUnavailable)
    assert e.value.release == compat.info().transformers
    assert "update(4 rows after 0)" in str(e.value) and f"transformers {e.value.release}" in str(e.value)


def test_model_probe_names_the_failing_step(monkeypatch):
    def broken_generate(self, *a, **kw):
        raise AttributeError("'GenerateDecoderOnlyOutput' object has no attribute 'cache'")

    monkeypatch.setattr(models.TinyModels, "generate", broken_generate)
    with pytest.raises(compat.HFIncompatible, match=r"mistral model: generate\(\) \(eager\)"):
        models.probe("mistral")


def test_flex_attention_that_dies_only_with_the_window_is_offered_and_its_death_kept(monkeypatch):
    """impl.hf.families.Family.attn_impls: a flex attention probe that dies with the window and runs without it
    offers flex attention (the campaign reproduces the death as a crash finding, DESIGN §4); one that dies both
    ways is unavailable, naming both (what torch 2.13's CPU flex attention does here:
    scripts/repro/hf_flex_attention_cpu.py)."""
    pytest.importorskip("transformers")
    from impl.hf import families

    if not getattr(families.Family("mistral").cls, "_supports_flex_attn", False):
        pytest.skip("this release's Mistral declares no flex attention support (4.45: added later)")
    calls = []

    def window_only(model_type, timeout=600.0, window=True):
        calls.append(window)
        return "a flex attention run died (exit status 1): InductorError: CppCompileError" if window else None
    monkeypatch.setattr(families, "flex_runs", window_only)
    fam = families.Family("mistral")
    assert "flex_attention" in fam.attn_impls(flex=True) and calls == [True, False]
    assert "CppCompileError" in fam.probe_crashes["flex_attention"] and "flex_attention" not in fam.attn_unavailable

    monkeypatch.setattr(families, "flex_runs", lambda mt, timeout=600.0, window=True: f"died {'with' if window else 'without'}")
    fam = families.Family("mistral")
    assert "flex_attention" not in fam.attn_impls(flex=True) and not fam.probe_crashes
    assert fam.attn_unavailable["flex_attention"] == "died with; without the sliding window too: died without"


def test_an_adapter_that_cannot_drive_the_release_is_a_harness_fault_naming_release_and_api(monkeypatch, capsys):
    """A release newer than the matrix may drop an API the adapter needs: `--target` then exits 3 (a harness fault)
    naming the release and the API — never 2 (usage), never a finding."""
    pytest.importorskip("transformers")
    from fuzz.cli import main
    from fuzz.targets.hf import caches as hf_caches

    def broken():
        raise compat.HFIncompatible("99.0.0", "cache_utils.DynamicSlidingWindowLayer", "is missing")
    monkeypatch.setattr(hf_caches, "make_hf_dynamic", broken)
    rc = main(["fuzz", "--target", "hf-dynamic", "--time", "1", "--plain"])
    err = capsys.readouterr().err
    assert rc == 3, err
    assert "harness fault: transformers 99.0.0: cache_utils.DynamicSlidingWindowLayer: is missing" in err


def test_a_flex_attention_probe_crash_is_a_finding_of_the_flex_target_and_of_no_other(monkeypatch, tmp_path):
    """fuzz.targets.hf.family.HFFamilyTarget.probe_crashes: the kept death is the target's crash at the probe's
    stream (W = 3, a prefill of 4, six decode steps: impl.hf.families.Family._try's calls), explained by
    hf-flex-attention-sliding-compile where it applies (torch 2.13+, transformers 5.24+) and a new crash finding
    with a seed on a strict target; a target that does not run flex attention has none. The campaign reports it
    before any case runs (--stop-on-first: and ends there)."""
    from fuzz.campaign import fuzz_target
    from fuzz.config import CampaignConfig
    from fuzz.targets.hf.family import HFFamilyTarget, probe_case
    from fuzz.targets.known import in_span
    from impl.hf import families

    if not getattr(families.Family("mistral").cls, "_supports_flex_attn", False):
        pytest.skip("this release's Mistral declares no flex attention support (4.45: added later)")
    death = ("a flex attention run died (exit status 1): torch._inductor.exc.InductorError: CppCompileError: C++ "
             "compile error")
    monkeypatch.setattr(families, "flex_runs", lambda mt, timeout=600.0, window=True: death if window else None)
    t = HFFamilyTarget("mistral", attns=["flex_attention"])
    (pc,) = t.probe_crashes()
    assert pc.case == probe_case() and [op.tokens for op in pc.case.ops] == list(families.PROBE_CALLS)
    assert pc.case.window == families.PROBE_WINDOW and "CppCompileError" in str(pc.error)
    v = t.versions()
    applies = in_span(v["transformers"], "5.24+") and in_span(v["torch"], "2.13+")
    assert pc.known == ("hf-flex-attention-sliding-compile" if applies else None)
    assert HFFamilyTarget("mistral", attns=["eager"]).probe_crashes() == []
    strict = HFFamilyTarget("mistral", attns=["flex_attention"], strict=True)
    res = fuzz_target(strict, CampaignConfig(seconds=30, max_examples=5, campaign_seed=0, stop_on_first=True,
                                             seeds_dir=str(tmp_path)))
    (f,) = res.failures
    assert f.kind == "crash" and f.case == probe_case() and res.examples == 0 and f.seed_path and f.replay
    assert "CppCompileError" in f.error and f.signature.startswith("hf:mistral@flex_attention | crash | ")
