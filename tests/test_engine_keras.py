"""keras:gemma2 / keras:gemma3: keras-hub (tensorflow backend) on tiny seeded HF checkpoints converted by
keras-hub's own converter. Skips with the reason when keras-hub is not installed
(scripts/ci_engines_heavy.sh installs it into .venv-keras)."""

from __future__ import annotations

import os
import warnings

os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

pytest.importorskip("keras_hub", reason="keras-hub is not installed (scripts/ci_engines_heavy.sh installs it)")

from impl.engines import EngineUnavailable  # noqa: E402
from impl.engines import keras as adapter  # noqa: E402

try:
    adapter.check("gemma2")
except EngineUnavailable as e:  # e.g. keras imported on another backend
    pytest.skip(str(e), allow_module_level=True)

from fuzz.ops import Case  # noqa: E402
from fuzz.targets.base import Mismatch  # noqa: E402
from fuzz.targets.engines.keras import KerasTarget  # noqa: E402
from impl.hf import reference  # noqa: E402

warnings.filterwarnings("ignore")

CASES = ((3, "chunk:2 chunk:4 push chunk:3 push push"), (1, "chunk:3 push push chunk:2"),
         (3, "chunk:9 push chunk:5 push reset:1 push push chunk:4"), (3, "push push push push push push chunk:7 push"))


@pytest.fixture(scope="module")
def targets():
    return {n: KerasTarget(n, strict=True) for n in ("gemma2", "gemma3")}


def ref(t, ids, w):
    return reference.forward(reference.ref_spec(t.arch, t.config, w), t.state, ids)[0].numpy()


@pytest.mark.parametrize("name,pattern", [("gemma2", [True, False]), ("gemma3", [True] * 5 + [False])])
def test_converter_maps_sliding_window_to_sliding_window_size(targets, name, pattern):
    assert targets[name].model(3).windows() == [3 if s else None for s in pattern]


@pytest.mark.parametrize("name", ["gemma2", "gemma3"])
def test_window_is_exact_not_off_by_one(targets, name):
    """call_with_cache one token at a time through and past W: the reference at W, far from W +- 1."""
    t = targets[name]
    m, tiny = t.model(3), t.tiny_for(3)
    ids = list(range(3, 15))
    cache = m.empty_cache(1, 16)
    rows = []
    for p, tok in enumerate(ids):
        got, cache = m.step([tok], cache, p)
        rows.append(got)
    got = np.concatenate(rows)
    for w, close in ((3, True), (2, False), (4, False)):
        assert np.allclose(got, ref(tiny, ids, w), atol=2e-4, rtol=2e-4) is close, w


@pytest.mark.parametrize("name", ["gemma2", "gemma3"])
@pytest.mark.parametrize("path", ["forward", "batch", "cached", "generate"])
def test_paths_agree_with_the_reference(targets, name, path):
    t = KerasTarget(name, strict=True, paths=(path,))
    t._models, t._tiny = targets[name]._models, targets[name]._tiny  # the built models of the fixture
    for w, text in CASES:
        t.run(Case.parse(w, text))


def test_generate_loop_is_what_generate_computes(targets):
    """The target's generation (generate_step, eager, compiled call_with_cache) produces the tokens keras-hub's
    own compiled generate() produces for the same ragged batch (greedy, no stop token)."""
    import keras_hub

    m = targets["gemma2"].model(3)
    prompts = [list(range(3, 12)), [20, 21, 22, 23, 24, 25]]
    ids, logits, first = m.generate(prompts, 14)
    assert first == 6 and logits.shape == (8, 2, 64)
    fresh = keras_hub.models.GemmaCausalLM(backbone=m.backbone, preprocessor=None)
    fresh.compile(sampler="greedy")
    tok = np.zeros((2, 14), np.int32)
    mask = np.zeros((2, 14), bool)
    for b, p in enumerate(prompts):
        tok[b, :len(p)], mask[b, :len(p)] = p, True
    out = fresh.generate({"token_ids": tok, "padding_mask": mask}, stop_token_ids=None)
    assert np.array_equal(np.asarray(out["token_ids"]), ids)


def test_gemma3_generate_text_only_raises_on_images_none(targets):
    """docs/findings/keras-gemma3-generate-text-only.md: Gemma3CausalLM.generate() without a preprocessor on a
    text-only backbone raises in its output normalisation (generate_step returns "images": None). When a
    release fixes it, generate() must give the target's tokens (and the note gets that release)."""
    import keras_hub

    m = targets["gemma3"].model(3)
    prompts = [list(range(3, 10)), list(range(30, 35))]
    ids, _, _ = m.generate(prompts, 10)
    fresh = keras_hub.models.Gemma3CausalLM(backbone=m.backbone, preprocessor=None)
    fresh.compile(sampler="greedy")
    tok = np.zeros((2, 10), np.int32)
    mask = np.zeros((2, 10), bool)
    for b, p in enumerate(prompts):
        tok[b, :len(p)], mask[b, :len(p)] = p, True
    try:
        out = fresh.generate({"token_ids": tok, "padding_mask": mask}, stop_token_ids=None)
    except ValueError as e:
        assert "None" in str(e)
        return
    assert np.array_equal(np.asarray(out["token_ids"]), ids)


def test_a_wrong_window_is_caught(targets, monkeypatch):
    """Negative control: a model converted from sliding_window = W + 1 against the reference at W mismatches
    on every path."""
    for path in ("forward", "batch", "cached", "generate"):
        t = KerasTarget("gemma2", strict=True, paths=(path,))
        monkeypatch.setattr(t, "model", lambda w: targets["gemma2"].model(w + 1))
        with pytest.raises(Mismatch):
            t.run(Case.parse(3, "chunk:6 push push push"))


def test_registry_lists_keras_targets():
    from fuzz.targets import registry

    names = [n for n, _ in registry.listed_names()]
    assert "keras:gemma2" in names and "keras:gemma3" in names
