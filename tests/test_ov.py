"""OpenVINO targets (``ov:paged``, ``ov:<model_type>``): the PagedAttention op's window convention (its spec:
``sliding_window = W``), every case passes on the installed release, a window off by one (or none) fails — the
check can fail — and what the CPU plugin forces (blocks of 32) is read, not assumed. Skips with the install line
where openvino is not installed (scripts/ci_ov.sh installs it in a venv of its own)."""

from __future__ import annotations

import numpy as np
import pytest

from fuzz.ops import Case
from fuzz.targets import registry
from fuzz.targets.base import Mismatch

pytest.importorskip("openvino", reason="openvino is not installed (pip install 'kvwindow[ov]')")

from impl.engines import ov as O  # noqa: E402

CASES = [(3, "chunk:5 push push chunk:4 push chunk:2"), (1, "push push push chunk:3 push"),
         (33, "chunk:70 push chunk:9 push push"), (40, "chunk:45 push reset:5 chunk:3 push chunk:90 push"),
         (70, "chunk:100 chunk:40 push"), (32, "chunk:64 push chunk:33 push")]


def _paged():
    target, why = registry.probe("ov:paged")
    if target is None:
        pytest.skip(f"ov:paged unavailable: {why}")
    return target


def test_convention_is_the_op_spec():
    assert [O.sliding_window(w) for w in (1, 5, 33, 4096)] == [1, 5, 33, 4096]


def test_the_plugin_forces_blocks_of_32_and_the_target_reads_it():
    m = O.paged_model(2, 1, 16, "float32")
    assert m.block == 32  # declared [?, Hkv, 32, D]; the compiled model says what the plugin chose
    assert m.cache_type == "<Type: 'float32'>"  # KV_CACHE_PRECISION: not the plugin's u8 default


@pytest.mark.parametrize("dtype", O.DTYPES)
def test_cases_pass(dtype):
    target = _paged()
    for w, text in CASES:
        case = Case.parse(w, text, dtype=dtype)
        assert target.run(case).tokens == case.tokens


@pytest.mark.parametrize("wrong", [lambda w: w + 1, lambda w: max(1, w - 1), lambda w: 0])
def test_a_wrong_window_is_caught(monkeypatch, wrong):
    target = _paged()
    target.strict = True
    monkeypatch.setattr(O, "sliding_window", wrong)
    with pytest.raises(Mismatch, match="attention output"):
        target.run(Case.parse(3, "chunk:6 push push chunk:4"))


def test_every_call_is_one_sequence_of_one_op_call(monkeypatch):
    """A case's calls go to the op as sequences of one call: decode (one query onto ``past_lens``) and chunked
    prefill (several) at once, with blocks from a shuffled pool."""
    target = _paged()
    seen = []
    real = O.PagedModel.run

    def spy(self, q, k, v, kc, vc, past, begins, indices, block_begins, window, max_context):
        seen.append((list(past), list(np.diff(begins)), list(indices)))
        return real(self, q, k, v, kc, vc, past, begins, indices, block_begins, window, max_context)

    monkeypatch.setattr(O.PagedModel, "run", spy)
    target.run(Case.parse(5, "chunk:40 push chunk:30 push"))
    (past, new, indices), = seen
    assert past == [0, 40, 41, 71] and new == [40, 1, 30, 1]
    assert sorted(indices) != indices  # shuffled physical blocks


def test_listed_and_unknown_member():
    from fuzz.targets.base import TargetError

    names = [n for n, _ in registry.listed_names()]
    assert "ov:paged" in names and "ov:mistral" in names
    with pytest.raises(TargetError, match="ov:paged"):
        registry.resolve("ov:nope")


@pytest.mark.parametrize("arch", ["mistral"])
def test_converted_model_cases_pass_and_a_wrong_window_is_caught(tmp_path, monkeypatch, arch):
    """``ov:<model_type>``: a tiny model converted by openvino.convert_model agrees with the spec reference; the
    same model converted with the window one larger disagrees (the check can fail)."""
    monkeypatch.setenv("KVWINDOW_CACHE_DIR", str(tmp_path))
    target, why = registry.probe(f"ov:{arch}")
    if target is None:
        pytest.skip(why)
    case = Case.parse(3, "chunk:4 push push chunk:5 push")
    assert target.run(case).tokens == case.tokens
    from impl.engines import tiny

    wrong = type(target.model(3))(tiny.build(arch, 4))  # the same exporter, W = 4 where the reference says 3
    target._models[3] = wrong
    target.strict = True
    with pytest.raises(Mismatch, match="logits"):
        target.run(case)


def _optimum(arch="mistral"):
    from impl.engines import ov_models

    kind, why = ov_models.exporter(arch)
    if kind != "optimum-intel":
        pytest.skip(f"{why} (scripts/ci_ov.sh --optimum installs optimum-intel 2.2.0 with transformers 4.57)")


@pytest.mark.parametrize("arch,window,want", [("mistral", 4, [4, 4]), ("mistral", 37, [37, 37]),
                                              ("gemma3_text", 3, None)])
def test_genai_paged_pass_writes_the_window(tmp_path, monkeypatch, arch, window, want):
    """openvino.genai's SDPA->PagedAttention pass over optimum-intel's stateful export writes ``sliding_window = W``
    into the PagedAttention op of each sliding layer (the op spec's reading, :func:`impl.engines.ov.sliding_window`)
    and ``0`` into a full-attention layer."""
    _optimum(arch)
    monkeypatch.setenv("KVWINDOW_CACHE_DIR", str(tmp_path))
    from impl.engines import ov_models, tiny

    t = tiny.build(arch, window)
    got = ov_models.paged_window(ov_models.exported(t))
    if want is None:
        want = [O.sliding_window(window) if lt == "sliding_attention" else 0 for lt in t.layer_types()]
    assert got == want


def test_stateful_steps_pass_and_a_wrong_window_is_caught(tmp_path, monkeypatch):
    """``ov:mistral`` on optimum-intel's stateful model: prefill, decode steps and a chunk onto the state agree with
    the spec reference; the model exported with the window one larger does not."""
    _optimum()
    monkeypatch.setenv("KVWINDOW_CACHE_DIR", str(tmp_path))
    target, why = registry.probe("ov:mistral")
    assert target is not None, why
    assert target.paths == ("forward", "batch", "steps")
    case = Case.parse(3, "chunk:4 push push chunk:5 push")
    assert target.run(case).tokens == case.tokens
    from impl.engines import ov_models, tiny

    target._models[3] = ov_models.OptimumModel(tiny.build("mistral", 4))
    target.strict = True
    with pytest.raises(Mismatch, match="logits"):
        target.run(case)
