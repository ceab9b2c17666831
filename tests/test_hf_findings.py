"""The written-up disagreements (docs/findings/) still reproduce on the installed transformers.

If one of these starts passing, transformers changed: update the finding, its
predicate in fuzz/targets/hf/findings.py, and the supported-range note.
"""

import pytest

pytest.importorskip("transformers")

from fuzz.targets.hf.caches import HFCacheTarget, make_hf_dynamic, make_hf_static  # noqa: E402
from fuzz.ops import Case, Chunk, Push  # noqa: E402
from fuzz.targets.base import Mismatch  # noqa: E402
from impl.hf import compat  # noqa: E402
from packaging.version import Version  # noqa: E402
from fuzz.targets.hf.models import HFModelTarget  # noqa: E402

API = compat.info().api
layers = pytest.mark.skipif(API != "layers", reason="finding is on the 5.x per-layer cache API")
legacy = pytest.mark.skipif(API != "legacy", reason="finding is on the 4.45 cache API")
# docs/findings/hf-445-sliding-cache.md part 1: the early eviction at W-1 is in 4.45-4.51 (fixed in 4.52).
EARLY_EVICTION = API == "legacy" and Version(compat.info().transformers) < Version("4.52")
early_eviction = pytest.mark.skipif(not EARLY_EVICTION, reason="early eviction at W-1 is 4.45-4.51's")


@layers
def test_window_1_dynamic_layer_keeps_everything():
    with pytest.raises(Mismatch, match=r"stores positions \[0\]"):
        HFCacheTarget("dynamic", strict=True).run(Case(1, [Push()]))


@layers
def test_window_1_mistral_decode_logits_are_wrong():
    t = HFModelTarget("mistral", strict=True, modes=["manual"])
    t._convention = lambda n, w: None  # look at the logits only
    with pytest.raises(Mismatch, match="logits at position 3"):
        t.run(Case(1, [Chunk(3), Push()]))


@layers
def test_static_empty_update_when_full():
    with pytest.raises(Mismatch):
        HFCacheTarget("static", strict=True).run(Case(2, [Chunk(2), Chunk(0)]))


@legacy
def test_445_static_empty_update_crashes():
    # docs/findings/hf-static-sliding-empty-update.md: 4.45-4.55 raise on any empty update; 4.56's
    # SlidingWindowLayer only once the window is full.
    if Version(compat.info().transformers) < Version("4.56"):
        with pytest.raises(Mismatch, match="raised IndexError"):
            HFCacheTarget("static", strict=True).run(Case(3, [Chunk(0)]))
    else:
        HFCacheTarget("static", strict=True).run(Case(3, [Chunk(0)]))
        with pytest.raises(Mismatch, match="raised RuntimeError"):
            HFCacheTarget("static", strict=True).run(Case(2, [Chunk(2), Chunk(0)]))


@early_eviction
def test_445_hybrid_cache_decoding_through_position_w_minus_1():
    # The third token's update returns [1, <zero slot>, 2]: position 0 was evicted one step early.
    with pytest.raises(Mismatch, match=r"returned rows for positions \[1, None, 2\].*also needs \[0\]"):
        HFCacheTarget("static", strict=True).run(Case(3, [Push(), Push(), Push()]))
    t = HFModelTarget("gemma2", strict=True, modes=["manual"], attns=["eager"])
    t._convention = lambda n, w: None
    with pytest.raises(Mismatch, match="logits at position 2"):
        t.run(Case(3, [Push(), Push(), Push()]))


@pytest.mark.skipif(API != "legacy" or EARLY_EVICTION, reason="legacy API releases after the 4.52 fix")
def test_decoding_through_position_w_minus_1_is_right_from_4_52():
    """The converse: on 4.52-4.56 the same case holds the spec (the finding's release range ends at 4.51)."""
    HFCacheTarget("static", strict=True).run(Case(3, [Push(), Push(), Push()]))
    t = HFModelTarget("gemma2", strict=True, modes=["manual"], attns=["eager"])
    t._convention = lambda n, w: None
    t.run(Case(3, [Push(), Push(), Push()]))


@legacy
def test_445_chunk_after_cached_tokens():
    # A chunk longer than W after cached tokens: only the chunk is returned (context lost).
    with pytest.raises(Mismatch, match=r"also needs \[0\]"):
        HFCacheTarget("static", strict=True).run(Case(3, [Push(), Chunk(5)]))


def test_default_targets_run_a_known_case_and_report_it():
    """A case that hits a written-up finding runs and the target records that the finding reproduced
    (a silent skip would hide any other bug of the case); --skip-known's mode leaves it out and says so. The empty update
    once full is a finding on every release (three ways: docs/findings/hf-static-sliding-empty-update.md)."""
    case = Case(2, [Chunk(2), Chunk(0)])
    assert make_hf_static().run(case).known == {"hf-static-sliding-empty-update": True}
    t = make_hf_static()
    t.skip_known = True
    assert t.run(case).known == {"hf-static-sliding-empty-update": None}
    assert make_hf_static().run(Case(3, [Chunk(7), Push()])).known == {}


@layers
def test_window_1_is_reported_as_known_by_the_default_target():
    assert make_hf_dynamic().run(Case(1, [Push()])).known == {"hf-sliding-window-1": True}


def _fuzz(tmp_path, capsys, target, *flags):
    from fuzz.cli import main

    rc = main(["fuzz", "--target", target, "--time", "5", "--seed", "0", "--plain", "--seeds-dir",
               str(tmp_path / "s"), "--db", str(tmp_path / "db"), *flags])
    return rc, capsys.readouterr().out


def test_default_campaign_exits_1_naming_the_known_finding(tmp_path, capsys):
    """On every release hf-static carries hf-static-sliding-empty-update (the boundary tours feed an empty
    chunk to a full window): the default campaign exits 1 and names it; --accept-known exits 0."""
    from fuzz.targets.known import release_label

    release = release_label("transformers", compat.info().transformers)  # "(newer than docs/compat.md)" past it
    rc, out = _fuzz(tmp_path, capsys, "hf-static")
    assert rc == 1, out
    assert f"known finding hf-static-sliding-empty-update reproduced on {release} by hf-static" in out
    assert not (tmp_path / "s").exists(), "a known finding is not a new seed"
    rc, out = _fuzz(tmp_path, capsys, "hf-static", "--accept-known")
    assert rc == 0, out


@layers
def test_default_campaign_names_window_1_on_the_layer_api(tmp_path, capsys):
    rc, out = _fuzz(tmp_path, capsys, "hf-dynamic")
    assert rc == 1, out
    assert f"known finding hf-sliding-window-1 reproduced on transformers {compat.info().transformers}" in out


def test_the_findings_table_agrees_with_the_notes():
    """Each note's release table is the one fuzz/targets/hf/findings.py holds (scripts/compat_table.py
    --write writes it), and every release a row was seen on lies in the series it applies to."""
    from pathlib import Path

    from fuzz.targets.hf import findings

    root = Path(__file__).resolve().parents[1]
    for fid in dict.fromkeys(f.id for f in findings.FINDINGS):
        note = root / findings.DOCS / f"{fid}.md"
        assert findings.note_block(note.read_text()) == findings.release_block(fid), \
            f"{note}: release table differs from fuzz/targets/hf/findings.py (scripts/compat_table.py --write)"
    for f in findings.FINDINGS:
        assert f.seen and all(any(findings.in_span(r, s) for s in f.releases) for r in f.seen), f


def test_flex_attention_sliding_compile_crash_replays_from_the_probe_case_in_a_fresh_process(tmp_path):
    """docs/findings/hf-flex-attention-sliding-compile.md, end to end on the installed releases: the probe's case
    (fuzz.targets.hf.family.probe_case), run on a strict hf:mistral@flex_attention in a fresh process (the probe
    itself stubbed out: only the case compiles), dies with inductor's CppCompileError at the first decode step —
    what the seed a probe crash saves replays. A child, because the compile may die natively; ~20-40 s."""
    import os
    import subprocess
    import sys

    from fuzz.targets.hf import findings
    from impl.hf import compat as hf_compat

    info = hf_compat.info()
    if not findings.applicable("hf:mistral@flex_attention", info.transformers, info.versions()):
        pytest.skip(f"hf-flex-attention-sliding-compile does not apply to {info.versions()}")
    code = (
        "import warnings; warnings.simplefilter('ignore')\n"
        "from impl.hf import families\n"
        "families.flex_runs = lambda *a, **k: None  # the probe: not what is tested here\n"
        "from fuzz.targets.hf.family import HFFamilyTarget, probe_case\n"
        "t = HFFamilyTarget('mistral', attns=['flex_attention'], strict=True, modes=['manual'])\n"
        "try:\n"
        "    t.run(probe_case())\n"
        "except Exception as e:\n"
        "    print('DIED', type(e).__name__, str(e).splitlines()[0][:400])\n"
        "else:\n"
        "    print('RAN')\n")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=root, TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor"))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600, cwd=root)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "DIED Mismatch" in r.stdout and "CppCompileError" in r.stdout, r.stdout + r.stderr[-2000:]
    assert "after op #1 (push)" in r.stdout and "forward of chunk 1" in r.stdout, r.stdout  # the first decode step
