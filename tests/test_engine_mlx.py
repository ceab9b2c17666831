"""mlx-lm targets (``mlx:rotating``, ``mlx:batch-rotating``, ``mlx:<model_type>``): the window convention of mlx-lm's
model files, every view passes (or reproduces a written-up finding) on the installed release, a convention off by
one fails, and the written-up findings reproduce where they apply. Skips with the reason without mlx-lm."""

from __future__ import annotations

import pytest

from fuzz.ops import Case
from fuzz.targets import registry
from fuzz.targets.base import Crash, Mismatch

pytest.importorskip("mlx.core", reason="mlx is not installed (pip install 'kvwindow[mlx]')")
pytest.importorskip("mlx_lm", reason="mlx-lm is not installed (pip install 'kvwindow[mlx]')")

from fuzz.targets.engines import mlx as T  # noqa: E402
from impl.engines import mlx as M  # noqa: E402

CASES = [(3, "chunk:5 push push chunk:4 push chunk:2"), (1, "push push push chunk:3 push"),
         (4, "chunk:12 push chunk:9 push"), (5, "chunk:2 chunk:0 push reset:2 chunk:3 push push push"),
         (2, "chunk:2 push chunk:7 push push chunk:1 push")]


def test_conventions_are_the_model_files():
    assert [M.rotating_max_size(w) for w in (1, 512)] == [1, 512]  # RotatingKVCache(max_size=sliding_window)
    assert [M.mask_window_size(w) for w in (1, 512)] == [1, 512]  # create_attention_mask(window_size=sliding_window)


@pytest.mark.parametrize("kind", T.KINDS)
def test_cases_pass_or_reproduce_a_written_up_finding(kind):
    target, why = registry.probe(f"mlx:{kind}")
    if target is None:
        pytest.skip(f"mlx:{kind} unavailable on this release: {why}")
    for w, text in CASES:
        stats = target.run(Case.parse(w, text))
        assert stats.tokens == Case.parse(w, text).tokens


@pytest.mark.parametrize("name", ["rotating_max_size", "mask_window_size"])
def test_a_convention_off_by_one_is_caught(monkeypatch, name):
    target, why = registry.probe("mlx:rotating")
    if target is None:
        pytest.skip(why)
    if name == "mask_window_size" and not M.features().mask_window:
        pytest.skip(f"mlx-lm {target.release}: the mask's window is the cache's max_size (no window_size to get wrong)")
    target.strict = True
    monkeypatch.setattr(M, name, lambda window, _f=getattr(M, name): _f(window) + 1)
    with pytest.raises(Mismatch):
        target.run(Case.parse(3, "chunk:6 push push push"))


@pytest.mark.parametrize("fid", [f.id for f in T.FINDINGS])
def test_each_written_up_finding_reproduces_where_it_applies(fid):
    rows = [f for f in T.FINDINGS if f.id == fid]
    kind = next(iter(rows[0].kinds))
    target, why = registry.probe(kind)
    if target is None:
        pytest.skip(why)
    here = [f for f in target.findings_here() if f.id == fid]
    if not here:
        pytest.skip(f"{fid} does not apply to mlx-lm {target.release}")
    case = Case.parse(*T.REPRO[fid])
    assert fid in target.known_hits(case)
    known = target.run(case).known
    first = [k for k, v in known.items() if v and k != fid]
    if first:  # another finding of this release fails the repro case first (mlx-lm 0.30: the extract finding)
        assert set(first) <= {f.id for f in here + target.findings_here()}, known
        pytest.skip(f"{fid}'s repro case reproduces {first} first on mlx-lm {target.release}")
    assert known == {fid: True}
    target.strict = True
    with pytest.raises((Mismatch, Crash)):
        target.run(case)


def test_listed_and_in_the_default_campaign(monkeypatch):
    assert {"mlx:rotating", "mlx:batch-rotating"} <= {n for n, _ in registry.listed_names()}
    monkeypatch.setattr(registry, "BUILTIN", {})
    monkeypatch.setattr(registry, "LISTED", {"mlx:": registry.LISTED["mlx:"]})
    assert "mlx:rotating" in registry.default_targets()


@pytest.mark.parametrize("model_type", ["llama", "mistral"])
def test_model_targets_hold_logits_to_the_reference(model_type):
    target, why = registry.probe(f"mlx:{model_type}")
    if target is None:
        pytest.skip(why)
    target.strict = True
    target.run(Case.parse(3, "chunk:2 push"))  # within the window every model agrees with the reference
    case = Case.parse(3, "chunk:6 push chunk:2 push")
    if target.findings_here():  # mistral: mlx-lm ignores the config's sliding_window (docs/findings)
        with pytest.raises(Mismatch, match="logits"):
            target.run(case)
        target.strict = False
        assert target.run(case).known == {"mlx-window-ignored": True}
    else:
        target.run(case)


def test_wrapped_chunk_mask_names_row_1_and_its_own_positions():
    target, why = registry.probe("mlx:batch-rotating")
    if target is None:
        pytest.skip(why)
    here = {f.id for f in target.findings_here()}
    if "mlx-batch-rotating-wrapped-chunk-mask" not in here:
        pytest.skip(f"mlx-batch-rotating-wrapped-chunk-mask does not apply to mlx-lm {target.release}")
    if "mlx-batch-rotating-extract-negative-padding" in here:
        pytest.skip(f"mlx-lm {target.release}: extract(row) fails the case first (its own finding)")
    target.strict = True
    # Row 0 feeds positions 4..5 at op #2; row 1 (two tokens shorter) feeds 2..3 and is the row that fails.
    with pytest.raises(Mismatch, match=r"op #2 .*batch row 1\] attention output for positions 2\.\.3:"):
        target.run(Case.parse(*T.REPRO["mlx-batch-rotating-wrapped-chunk-mask"]))


def test_every_batch_mismatch_of_a_case_grid_is_a_written_up_finding_here():
    """Each mismatch of a small grid of cases is explained by a finding that applies to the installed release —
    its predicate names the case (so a campaign reports it as that finding) — and the grid has mismatches where
    a batch finding applies."""
    import itertools

    target, why = registry.probe("mlx:batch-rotating")
    if target is None:
        pytest.skip(why)
    here = target.findings_here()
    seen = 0
    for w, first in itertools.product((2, 3), ("chunk:3", "chunk:4")):
        for rest in itertools.product(("push", "chunk:2"), repeat=3):
            case = Case.parse(w, " ".join((first,) + rest))
            target.strict = True
            try:
                target.run(case)
            except Mismatch as e:
                assert any(f.explains(case, e) for f in here), (w, case.text, str(e))
                seen += 1
    if any(f.id in ("mlx-batch-rotating-wrapped-chunk-mask", "mlx-batch-rotating-extract-negative-padding")
           for f in here):
        assert seen > 0
