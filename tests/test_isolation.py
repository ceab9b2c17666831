"""Crash isolation: a native death, an abort, a hang, a memory breach or a sanitizer report in the target is a
finding naming the op (``SIGSEGV at op #k``), shrunk and saved like a mismatch; the campaign goes on."""

from __future__ import annotations

import json

import pytest

from fuzz.cli import main
from fuzz.campaign import fuzz_target
from fuzz.ops import Bad, Case, Chunk, Push, Reset
from fuzz.targets import registry
from fuzz.targets.base import Crash, TargetError
from fuzz.targets.cache import CacheTarget
from fuzz.targets.isolated import IsolatedTarget, is_native, resolve
from fuzz.targets.isolated_child import FORWARDED
from fuzz.config import CampaignConfig
from tests.support.crashers import c_crasher

#: A case that writes position 5 into a ring of window 3 (the crashers' trigger) at op #5.
TRIGGER = Case(3, (Push(),) * 7)


@pytest.fixture(scope="module")
def segv_lib(tmp_path_factory):
    return c_crasher("segv", tmp_path_factory.mktemp("segv") / "libsegv.so")


def run(capsys, *argv):
    rc = main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_segfaulting_library_is_a_finding_and_the_other_target_still_runs(tmp_path, capsys, segv_lib, workers):
    rep, sd = tmp_path / "r.json", tmp_path / "s"
    rc, out, err = run(capsys, "fuzz", "--target", f"c:{segv_lib}", "--target", "pyring", "--time", "6",
                       "--workers", workers, "--seed", "1", "--plain", "--report", str(rep), "--seeds-dir", str(sd),
                       "--db", str(tmp_path / "db"))
    assert rc == 1, out + err
    assert "SIGSEGV at op #" in out and f"FAILED c:{segv_lib} (crash)" in out
    doc = json.loads(rep.read_text())
    by_name = {t["name"]: t for t in doc["targets"]}
    assert by_name["pyring"]["examples"] > 0 and by_name["pyring"]["done"] and not by_name["pyring"]["failures"]
    (f,) = doc["failures"]
    assert f["kind"] == "crash" and "SIGSEGV" in f["error"] and by_name[f"c:{segv_lib}"]["done"]
    assert doc["exit_code"] == 1 and not doc["harness_faults"] and not doc["worker_errors"]
    # The seed replays the crash, in an isolated child again; the real ring passes it.
    (seed,) = sd.glob("*.json")
    rc, out, _ = run(capsys, "replay", str(seed), "--target", f"c:{segv_lib}")
    assert rc == 1 and "FAILED (crash)" in out and "SIGSEGV at op #" in out
    rc, out, _ = run(capsys, "replay", str(seed), "--target", "ring-c")
    assert rc == 0 and "ring-c: ok" in out


def test_the_crash_names_the_op_and_a_fresh_child_takes_the_next_case(segv_lib):
    t = IsolatedTarget(f"c:{segv_lib}")
    try:
        with pytest.raises(Crash) as e:
            t.run(TRIGGER)
        assert e.value.signal == "SIGSEGV" and e.value.index == 5 and e.value.op == Push()
        assert "SIGSEGV at op #5 (push)" in str(e.value)
        with pytest.raises(Crash, match=r"SIGSEGV at op #0 \(chunk:6\)"):
            t.run(Case(3, (Chunk(6),)))
        assert t.run(Case(4, (Push(),) * 9)).tokens == 9  # another window: no crash, a fresh child ran it
    finally:
        t.close()


@pytest.mark.parametrize("kind,needle", [("abort", "SIGABRT at op #5 (push)"),
                                         ("hang", "at op #5 (push): timed out")])
def test_an_abort_and_an_op_timeout_are_crashes_at_the_op(tmp_path, kind, needle):
    lib = c_crasher(kind, tmp_path / f"lib{kind}.so")
    t = IsolatedTarget(f"c:{lib}", op_timeout=0.5)
    try:
        with pytest.raises(Crash) as e:
            t.run(TRIGGER)
        assert needle in str(e.value)
        assert t.run(Case(2, (Push(),) * 7)).tokens == 7
    finally:
        t.close()


def test_a_memory_limit_breach_is_a_crash_at_the_op():
    t = IsolatedTarget("py:tests.support.crashers:Hog", op_memory=1024)
    try:
        with pytest.raises(Crash, match=r"op #5 \(push\): broke the memory limit of the child \(1024 MiB"):
            t.run(TRIGGER)
    finally:
        t.close()


def test_the_sanitizer_reports_an_overflow_that_passes_unsanitized(tmp_path):
    from impl._ring_build import asan_runtime

    if asan_runtime() is None:
        pytest.skip("the C compiler has no AddressSanitizer runtime")
    plain = c_crasher("overflow", tmp_path / "plain.so")
    t = IsolatedTarget(f"c:{plain}")
    try:
        assert t.run(TRIGGER).tokens == 7  # one int past the end of a heap array: nothing visible
    finally:
        t.close()
    lib = c_crasher("overflow", tmp_path / "asan.so", sanitize=True)
    t = IsolatedTarget(f"c:{lib}", sanitize=True)
    try:
        with pytest.raises(Crash) as e:
            t.run(TRIGGER)
        assert "AddressSanitizer: heap-buffer-overflow" in str(e.value) and "op #5 (push)" in str(e.value)
    finally:
        t.close()


def test_sanitized_ring_c_campaign_is_clean(tmp_path, capsys):
    from impl._ring_build import asan_runtime

    if asan_runtime() is None:
        pytest.skip("the C compiler has no AddressSanitizer runtime")
    rc, out, err = run(capsys, "fuzz", "--target", "ring-c", "--sanitize", "--time", "3", "--seed", "2", "--plain",
                       "--seeds-dir", str(tmp_path / "s"), "--db", str(tmp_path / "db"))
    assert rc == 0, out + err


def test_a_fork_server_that_dies_is_restarted_and_the_case_is_not_blamed():
    t = IsolatedTarget("ring-c")
    try:
        assert t.run(Case(3, (Push(),) * 4)).tokens == 4
        t._child._proc.kill()  # the fork server (its runner dies with it)
        t._child._proc.wait()
        assert t.run(Case(3, (Push(),) * 5)).tokens == 5
    finally:
        t.close()


def test_which_targets_are_isolated():
    assert is_native("ring-c") and is_native("c:x.so") and is_native("cuda-ring") and is_native("mutant:c-len-W+1")
    assert not is_native("pyring") and not is_native("py:a:B") and not is_native("mutant:ring-keeps-W+1")
    assert type(resolve("ring-c")).__name__ == "IsolatedTarget"
    assert type(resolve("pyring")).__name__ == "CacheTarget"
    assert type(resolve("pyring", CampaignConfig(isolate=True))).__name__ == "IsolatedTarget"
    assert isinstance(resolve("ring-c", CampaignConfig(isolate=False)), CacheTarget)


def test_the_isolated_target_stands_in_for_the_real_one():
    t = IsolatedTarget("decoder")
    try:
        assert (t.name, t.kind, t.window_max, t.max_tokens) == ("decoder", "model", 16, 64)
        assert "torch" in t.versions()
        assert "exceeds decoder's maximum 16" in t.accepts(Case(40, ()))
        assert t.run(Case(3, (Push(), Chunk(4)))).tokens == 5
    finally:
        t.close()


@pytest.mark.parametrize("spec", ["ring-c", "segv", "mutant:c-error-path-moves-state", "decoder"])
def test_the_isolated_target_answers_as_the_target_itself_does(spec, segv_lib):
    """Every attribute and method the campaign, the strategies, replay, the kill table and the bench read
    from a target, unconfigured and configured with a width and a dtype."""
    spec = f"c:{segv_lib}" if spec == "segv" else spec
    cfg = CampaignConfig(width=8, dtype="float16")
    real = registry.resolve(spec)
    cases = [Case(40, ()), Case(3, (Push(), Bad("gap"), Bad("null-handle"))), Case(3, (Bad("chunk-skip"),)),
             Case(2, (Chunk(100), Reset(5)))]
    with IsolatedTarget(spec) as iso:
        for a, b in ((real, iso), (real.configured(cfg), iso.configured(cfg))):
            for attr in ("name", *FORWARDED):
                assert getattr(b, attr, "absent") == getattr(a, attr, "absent"), attr
            assert (b.versions(), b.tolerances()) == (a.versions(), a.tolerances())
            assert [b.accepts(c) for c in cases] == [a.accepts(c) for c in cases]
        wide = iso.configured(cfg)
        assert wide.configured(cfg) is wide and iso.configured(None) is iso


def test_width_and_dtype_reach_the_isolated_child(tmp_path, capsys):
    """configured() reaches the runners: a library that crashes on any push into a ring of width 8 passes at
    the default width and crashes once the campaign asks for --width 8, found, saved and replayed so; a
    campaign that draws its widths finds it too, and its seed carries the width."""
    lib = c_crasher("segv", tmp_path / "libwide.so", when="r->width == 8")
    with resolve(f"c:{lib}") as t:
        assert t.run(TRIGGER).tokens == 7
        wide = t.configured(CampaignConfig(width=8, dtype="bfloat16"))
        assert (wide.width, wide.dtype, t.width, t.dtype) == (8, "bfloat16", 4, "float32")
        with pytest.raises(Crash, match=r"SIGSEGV at op #0 \(push\)"):
            wide.run(Case(3, (Push(),)))
        assert t.run(TRIGGER).tokens == 7  # the unconfigured view still gets a width-4 runner
        # the first finding of each (a crash on every op kind is one finding per kind: tests/test_distinct_findings)
        res = fuzz_target(t, CampaignConfig(width=8, seconds=10, campaign_seed=1, seeds_dir=str(tmp_path / "c"),
                                            stop_on_first=True))
        drawn = fuzz_target(t, CampaignConfig(seconds=20, campaign_seed=1, seeds_dir=str(tmp_path / "d"),
                                              stop_on_first=True))
    (f,) = res.failures
    assert f.kind == "crash" and "SIGSEGV" in f.error and f.case.width == 8 and "--width" not in f.replay
    (g,) = drawn.failures
    assert g.kind == "crash" and g.case.width == 8, g
    sd = tmp_path / "s"
    rc, out, err = run(capsys, "fuzz", "--target", f"c:{lib}", "--width", "8", "--time", "10", "--seed", "1",
                       "--plain", "--stop-on-first", "--seeds-dir", str(sd), "--db", str(tmp_path / "db"))
    assert rc == 1 and "SIGSEGV at op #0 (push)" in out and "width=8" in out, out + err
    (seed,) = sd.glob("*.json")
    assert json.loads(seed.read_text())["width"] == 8
    for flags in ([], ["--width", "4"]):  # the seed's own width wins: it replays as it was found
        rc, out, _ = run(capsys, "replay", str(seed), "--target", f"c:{lib}", *flags)
        assert rc == 1 and "FAILED (crash)" in out and "SIGSEGV" in out, (flags, out)
    plain = json.loads(seed.read_text())
    del plain["width"], plain["id"]
    seed.write_text(json.dumps(plain))  # the same ops at the target's default width pass
    rc, out, _ = run(capsys, "replay", str(seed), "--target", f"c:{lib}")
    assert rc == 0, out


def test_a_target_that_cannot_be_built_in_the_child_is_a_usage_error(tmp_path):
    with pytest.raises(TargetError, match="no such file"):
        IsolatedTarget(f"c:{tmp_path}/missing.so")
    with pytest.raises(TargetError, match="cannot import"):
        IsolatedTarget("py:no_such_module_xyz:Cache")


def _fuzz_until_crash_and_replay(capsys, tmp_path, lib) -> tuple[str, dict, dict]:
    """``kvwindow fuzz`` of ``c:lib`` finds a crash (exit 1); its seed replays it (exit 1): the output, the
    report and the seed."""
    rep, sd = tmp_path / "r.json", tmp_path / "s"
    rc, out, err = run(capsys, "fuzz", "--target", f"c:{lib}", "--time", "20", "--seed", "1", "--plain",
                       "--report", str(rep), "--seeds-dir", str(sd), "--db", str(tmp_path / "db"))
    assert rc == 1 and f"FAILED c:{lib} (crash)" in out, out + err
    (seed,) = sd.glob("*.json")
    rc, replayed, _ = run(capsys, "replay", str(seed), "--target", f"c:{lib}")
    assert rc == 1 and "FAILED (crash)" in replayed and "SIGSEGV at op #" in replayed, replayed
    return out, json.loads(rep.read_text()), json.loads(seed.read_text())


def test_a_library_that_dies_in_a_bad_call_is_found_saved_and_replayed(tmp_path, capsys):
    """Found through a bad: op: RINGKV_E_NULL's check removed, the library writes through the NULL key."""
    from impl._ring_build import NoCompiler, compile_ring_library

    try:
        lib = compile_ring_library(tmp_path / "libnullkey.so", replace=(
            "  if (!r || !key || !value) return RINGKV_E_NULL;\n", "  if (!r) return RINGKV_E_NULL;\n"))
    except NoCompiler as e:
        pytest.skip(str(e))
    out, doc, seed = _fuzz_until_crash_and_replay(capsys, tmp_path, lib)
    assert "(bad:null-data)" in out and "SIGSEGV" in doc["failures"][0]["error"]
    assert Bad("null-data") in Case.from_json(seed).ops


#: A library whose trace dies at the push of position 40 000, in any window: only the bulk phase gets there
#: (the op loop's traced runs are short; the long tour pushes single entries around 2**15, 2**16 and 70 000).
TRACE_DEATH = 40_000


@pytest.fixture(scope="module")
def trace_segv_lib(tmp_path_factory):
    from tests.support.crashers import TRACE_STEP

    return c_crasher("segv", tmp_path_factory.mktemp("trace") / "libtracesegv.so", when=f"p == {TRACE_DEATH}",
                     line=TRACE_STEP)


def test_a_death_in_the_bulk_phase_is_a_crash_on_a_reduced_push_case(trace_segv_lib):
    from fuzz.targets.ring_bulk import BULK_TOKENS, bulk_phase

    with resolve(f"c:{trace_segv_lib}") as t:
        assert t.traced and type(t).__name__ == "IsolatedTarget"
        phase = bulk_phase(t, CampaignConfig(), 0)
        assert isinstance(phase.error, Crash) and phase.error.signal == "SIGSEGV", phase.error
        # reduced in fresh runners: the smallest window, the chunk form, the crash named by the op loop
        assert phase.case == Case(1, (Chunk(TRACE_DEATH - 1), Push(), Push())), phase.case
        assert "SIGSEGV at op #2 (push)" in str(phase.error)
        assert phase.tokens == TRACE_DEATH and phase.seconds > 0  # the first stream got that far
        with pytest.raises(Crash, match="SIGSEGV at op #2"):
            t.run(phase.case)
    with resolve("ring-c") as ring:  # the isolated bulk phase checks what the in-process one does
        mine = bulk_phase(ring, CampaignConfig(), 0)
    theirs = bulk_phase(registry.resolve("ring-c"), CampaignConfig(), 0)
    assert mine.error is None and (mine.tokens, mine.streams) == (theirs.tokens, theirs.streams)
    assert mine.tokens >= BULK_TOKENS


def test_a_library_that_dies_in_the_bulk_phase_is_found_saved_and_replayed(tmp_path, capsys, trace_segv_lib):
    out, doc, seed = _fuzz_until_crash_and_replay(capsys, tmp_path, trace_segv_lib)
    (target,) = doc["targets"]
    assert target["bulk_tokens"] == TRACE_DEATH and target["bulk_seconds"] > 0
    # the bulk phase ran at one drawn width, and the seed carries it
    assert Case.from_json(seed).replace(width=None) == Case(1, (Chunk(TRACE_DEATH - 1), Push(), Push())), seed
    assert seed["width"] == target["campaign_phases"]["bulk"]["width"]
    assert "SIGSEGV at op #2 (push)" in out and f"bulk phase: c:{trace_segv_lib}: 40,000 tokens" in out
