"""Triton kernel targets (``triton:vllm-unified``, ``triton:sglang-decode``, ``triton:sglang-extend``): each
engine's window convention is its glue's, boundary cases pass (or reproduce a written-up finding) under Triton's
interpreter, and a convention off by one fails — the check can fail. Each skips with the reason (the install
line) where its engine's kernel files are not installed (scripts/ci_triton.sh installs them)."""

from __future__ import annotations

import pytest

from fuzz.ops import Case
from fuzz.targets import registry
from fuzz.targets.base import Mismatch

from impl.engines import triton_env  # noqa: E402
from impl.errors import Unavailable  # noqa: E402

try:  # the interpreter must be switched on before anything imports triton
    triton_env.prepare()
except Unavailable:
    pass
pytest.importorskip("triton", reason="triton is not installed (pip install 'kvwindow[triton-vllm]')")

#: Few calls cover the edge classes: W = 1, chunks > W, decode after eviction, several streams (ragged), fp16.
CASES = [(3, "chunk:5 push push chunk:4 push chunk:2", None), (1, "push push chunk:3 push", "float16"),
         (5, "chunk:12 push chunk:9 push reset:6 chunk:7 push", None)]


def _target(name):
    target, why = registry.probe(name)
    if target is None:
        pytest.skip(f"{name} unavailable: {why}")
    return target


@pytest.mark.parametrize("name", ["triton:vllm-unified", "triton:vllm-prefix", "triton:vllm-mla",
                                  "triton:sglang-extend", "triton:sglang-decode"])
def test_boundary_cases_pass_or_reproduce_a_written_up_finding(name):
    target = _target(name)
    for w, text, dtype in CASES:
        case = Case.parse(w, text, dtype=dtype)
        stats = target.run(case)
        assert stats.tokens == case.tokens
        assert all(v is True for v in stats.known.values()), stats.known  # a finding that applies reproduces
        assert stats.calls >= 1 and stats.call_seconds > 0  # what the report's calls/s is made of


def test_vllm_window_is_the_backends_glue():
    _target("triton:vllm-unified")
    from impl.engines import triton_vllm as V

    # TritonAttentionImpl(sliding_window=W).sliding_window, or the restated (W - 1, 0) where it does not import
    assert [V.window_size(w) for w in (1, 4, 4096)] == [(0, 0), (3, 0), (4095, 0)]


def test_sglang_window_is_the_backends_glue():
    _target("triton:sglang-decode")
    from impl.engines import triton_sglang as G

    assert G.sliding_window_size(4) == 3  # gemma2.py: config.sliding_window - 1
    assert [G.window_kv(n, 4) for n in (0, 2, 3, 9)] == [(0, 0), (0, 2), (0, 3), (6, 3)]


def test_vllm_off_by_one_window_is_caught(monkeypatch):
    target = _target("triton:vllm-unified")
    from impl.engines import triton_vllm as V

    monkeypatch.setattr(V, "window_size", lambda w, *a: (w, 0))
    with pytest.raises(Mismatch, match="attention output"):
        target.run(Case.parse(3, "chunk:6 push"))


def test_vllm_nan_in_an_evicted_position_reaches_a_kernel_that_reads_it(monkeypatch):
    """The NaN poison is live: a window one wider than the glue's reads an evicted position, which is NaN."""
    target = _target("triton:vllm-unified")
    from impl.engines import triton_vllm as V

    monkeypatch.setattr(V, "window_size", lambda w, *a: (w + 1, 0))
    with pytest.raises(Mismatch, match="got nan"):
        target.run(Case.parse(2, "chunk:2 push push"))  # op #0 is right whatever the window


def test_sglang_decode_divergence_reproduces_strictly():
    """sglang-triton-decode-window-minus-one: a decode step with >= W tokens attends W - 1 keys."""
    target = _target("triton:sglang-decode")
    target.strict = True
    case = Case.parse(3, "chunk:3 push")
    with pytest.raises(Mismatch, match="attention output"):
        target.run(case)
    assert target.__class__(target.name.split(":")[1]).known_hits(case) == {"sglang-triton-decode-window-minus-one"}


def test_sglang_extend_off_by_one_window_is_caught(monkeypatch):
    target = _target("triton:sglang-extend")
    from impl.engines import triton_sglang as G

    monkeypatch.setattr(G, "sliding_window_size", lambda w: int(w))
    with pytest.raises(Mismatch, match="attention output"):
        target.run(Case.parse(3, "chunk:6 push"))


def test_unknown_member_is_a_usage_error():
    from fuzz.targets.base import TargetError

    with pytest.raises(TargetError, match="triton:vllm-unified"):
        registry.resolve("triton:nope")


def test_listed():
    names = [n for n, _ in registry.listed_names()]
    assert {"triton:vllm-unified", "triton:vllm-prefix", "triton:vllm-mla", "triton:sglang-decode",
            "triton:sglang-extend"} <= set(names)


def test_vllm_prefix_reads_evicted_storage_and_only_that():
    """vllm-prefix-prefill-reads-evicted-blocks: NaN in evicted storage reaches the output; the same case with
    finite evicted storage passes (the window arithmetic is right)."""
    target = _target("triton:vllm-prefix")
    target.strict = True
    case = Case.parse(3, "chunk:5 push push chunk:4")
    with pytest.raises(Mismatch, match="got nan"):
        target.run(case)
    from fuzz.targets.engines import triton_paged as P

    real = P.layout
    try:
        P.layout = lambda seqs, block, seed, poison_evicted=True: real(seqs, block, seed, False)
        assert target.run(case).tokens == case.tokens
    finally:
        P.layout = real


def test_vllm_mla_window_is_the_backends_glue():
    """TritonMLAImpl(sliding_window=W).decode_sliding_window (triton_mla.py:208) is W: decode_attention_fwd keeps
    each row's last W keys. Driven where the backend module imports; the glue line says which."""
    target = _target("triton:vllm-mla")
    from impl.engines import triton_vllm_mla as M

    assert [M.decode_window(w) for w in (1, 4, 4096)] == [1, 4, 4096]
    assert target.versions()["window glue"].startswith(("driven", "restated"))


@pytest.mark.parametrize("shift, match", [(-1, "attention output"), (1, "got nan")])
def test_vllm_mla_off_by_one_window_is_caught(monkeypatch, shift, match):
    """A window one narrower than the glue's drops a key the spec keeps; one wider reads an evicted position,
    which is NaN — in the glue-driven view (forward_mqa) and in the split view alike."""
    target = _target("triton:vllm-mla")
    from impl.engines import triton_vllm_mla as M

    real_impl, real_window = M.impl, M.decode_window
    monkeypatch.setattr(M, "impl", lambda w, *a: real_impl(w + shift, *a))
    monkeypatch.setattr(M, "decode_window", lambda w, *a: real_window(w, *a) + shift)
    case = Case.parse(2, "chunk:2 push push")  # op #0 is right with a window one wider
    with pytest.raises(Mismatch, match=match):
        target.run(case)
    monkeypatch.setattr(M, "impl", real_impl)  # the split view alone
    with pytest.raises(Mismatch, match=match) as e:
        target.run(case)
    assert "split" in str(e.value)
