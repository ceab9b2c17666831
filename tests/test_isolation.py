"""Crash isolation: a native death, an abort, a hang, a memory breach or a sanitizer report in the target is a
finding naming the op (``SIGSEGV at op #k``), shrunk and saved like a mismatch; the campaign goes on."""

from __future__ import annotations

import json

import pytest

from fuzz.cli import main
from fuzz.ops import Case, Chunk, Push
from fuzz.targets.base import Crash, TargetError
from fuzz.targets.isolated import IsolatedTarget, is_native, resolve
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
        t._proc.kill()  # the fork server (its runner dies with it)
        t._proc.wait()
        assert t.run(Case(3, (Push(),) * 5)).tokens == 5
    finally:
        t.close()


def test_which_targets_are_isolated():
    assert is_native("ring-c") and is_native("c:x.so") and is_native("cuda-ring") and is_native("mutant:c-len-W+1")
    assert not is_native("pyring") and not is_native("py:a:B") and not is_native("mutant:ring-keeps-W+1")
    assert type(resolve("ring-c")).__name__ == "IsolatedTarget"
    assert type(resolve("pyring")).__name__ == "CacheTarget"
    assert type(resolve("pyring", CampaignConfig(isolate=True))).__name__ == "IsolatedTarget"
    assert type(resolve("ring-c", CampaignConfig(isolate=False))).__name__ == "CacheTarget"


def test_the_isolated_target_stands_in_for_the_real_one():
    t = IsolatedTarget("decoder")
    try:
        assert (t.name, t.kind, t.window_max, t.max_tokens) == ("decoder", "model", 16, 64)
        assert "torch" in t.versions()
        assert "exceeds decoder's maximum 16" in t.accepts(Case(40, ()))
        assert t.run(Case(3, (Push(), Chunk(4)))).tokens == 5
    finally:
        t.close()


def test_a_target_that_cannot_be_built_in_the_child_is_a_usage_error(tmp_path):
    with pytest.raises(TargetError, match="no such file"):
        IsolatedTarget(f"c:{tmp_path}/missing.so")
    with pytest.raises(TargetError, match="cannot import"):
        IsolatedTarget("py:no_such_module_xyz:Cache")
