"""FlexAttention targets (``flex:eager``, ``flex:compiled``, ``flex:dynamic``): the sliding-window mask users
write passes the boundary cases against the float64 reference (eager: every run; compiled: one short case, a
compile costs 30-120 s on a CPU), and a mask off by one fails — the check can fail."""

from __future__ import annotations

import pytest

from fuzz.ops import Case
from fuzz.targets import registry
from fuzz.targets.base import Mismatch

pytest.importorskip("torch.nn.attention.flex_attention", reason="torch has no FlexAttention")


def _target(name):
    target, why = registry.probe(name)
    if target is None:
        pytest.skip(f"{name} unavailable: {why}")
    target.strict = True
    return target


def test_eager_boundary_cases_pass():
    target = _target("flex:eager")
    for w, text in [(3, "chunk:5 push push chunk:4 push chunk:2"), (1, "push push chunk:3 push"),
                    (5, "chunk:12 push chunk:9 push reset:6 chunk:7 push")]:
        case = Case.parse(w, text)
        assert target.run(case).tokens == case.tokens


def test_a_mask_off_by_one_is_caught(monkeypatch):
    target = _target("flex:eager")
    from impl.engines import flex

    real = flex.mask_mod
    monkeypatch.setattr(flex, "mask_mod", lambda w, off, valid: real(w + 1, off, valid))
    with pytest.raises(Mismatch, match="attention output"):
        target.run(Case.parse(2, "chunk:5 push"))


def test_compiled_static_shapes_pass_a_short_case():
    target = _target("flex:compiled")
    case = Case.parse(2, "chunk:3 push")
    assert target.run(case).tokens == 4


def test_unknown_mode_is_a_usage_error():
    from fuzz.targets.base import TargetError

    with pytest.raises(TargetError, match="flex:eager"):
        registry.resolve("flex:nope")


def test_the_recompile_limit_is_told_apart_from_a_compile_failure():
    """Past dynamo's recompile limit flex_attention would run eagerly: the compiled targets stop there (a harness
    fault) rather than report eager results as compiled — and a compile failure is not mistaken for it."""
    pytest.importorskip("torch._dynamo")
    from impl.engines import flex

    try:
        try:
            raise RuntimeError("torch._dynamo hit config.recompile_limit (64)")
        except RuntimeError as inner:
            raise ValueError("wrapped") from inner
    except ValueError as e:
        assert flex.recompile_limit_hit(e)
    assert not flex.recompile_limit_hit(RuntimeError("LoweringException: RuntimeError: unbacked_bindings"))


class _FailingCompile:
    """impl.engines.flex as the target calls it, with a compile that fails on the sliding-window mask (and, with
    ``plain_fails``, on the causal one too) — torch 2.13's CPU code generation failing as it does for transformers'
    mask (docs/findings/hf-flex-attention-sliding-compile.md), without paying for a real compile."""

    def __init__(self, plain_fails: bool):
        from impl.engines import flex

        self.real, self.plain_fails, self.calls = flex, plain_fails, []

    def __getattr__(self, name):
        return getattr(self.real, name)

    def mask_mod(self, w, off, valid):
        return ("window", w)

    def causal_mod(self, off, valid):
        return ("causal",)

    def attend(self, mode, q, k, v, mod, block, score_mod=None):
        self.calls.append(mod[0])
        if mod[0] == "window" or self.plain_fails:
            raise RuntimeError("torch._inductor.exc.InductorError: CppCompileError: C++ compile error")
        return q


@pytest.mark.parametrize("mode", ["compiled", "dynamic"])
@pytest.mark.parametrize("plain_fails", [False, True])
def test_a_compile_failure_on_the_window_is_a_crash_finding_never_unavailable(mode, plain_fails):
    """Issue 29 point 3 / DESIGN §4: a compile failure on the sliding-window mask is retried without the window; it
    is a crash finding naming both outcomes — and one that fails without the window too is a crash as well: the
    compiled path has no availability probe that could turn either into "unavailable"."""
    from fuzz.targets.base import Crash, failure_kind

    target, why = registry.probe(f"flex:{mode}")
    assert target is not None, why  # building it compiles nothing: nothing to call unavailable
    target.strict = True
    target.F = fake = _FailingCompile(plain_fails)
    with pytest.raises(Crash) as e:
        target.run(Case.parse(3, "chunk:4 push"))
    assert failure_kind(e.value) == "crash" and e.value.index == 0 and "CppCompileError" in str(e.value)
    assert fake.calls == ["window", "causal"]
    assert ("without the window it fails too" if plain_fails else
            "the same call without the window compiles and runs") in str(e.value)
