"""The op loop's outcome boundary (DESIGN §4) with every kind of op the C targets take: a bad call's
documented refusal is the expected outcome; a wrong status or a changed state is a mismatch of that op; a
death, or an exception the implementation raises on a spec-valid op, is a crash naming the exact op — a
push inside a traced run of pushes included; an exception of the harness's own code is a harness fault."""

from __future__ import annotations

import pytest

from fuzz.ops import Bad, Case, Chunk, Push
from fuzz.targets import registry
from fuzz.targets.base import Crash, HarnessFault, Mismatch
from fuzz.targets.isolated import IsolatedTarget
from fuzz.targets.ring_errors import C_KINDS, CContract
from tests.support.crashers import c_crasher

#: A death inside ringkv_trace at the push of position 5 (window 3), 20 pushes in one run: op #5.
RUN_OF_20 = Case(3, (Push(),) * 20)
#: The same death with the run starting later: chunk (op 0), push (op 1), then the traced run of ops 2..7.
LATE_RUN = Case(3, (Chunk(2), Push(), Push(), Push(), Push(), Push(), Push(), Push()))


@pytest.fixture(scope="module")
def libs(tmp_path_factory):
    d = tmp_path_factory.mktemp("outcomes")
    return {kind: c_crasher(kind, d / f"lib{kind}.so") for kind in ("segv", "hang")}


def test_a_death_inside_a_traced_run_names_the_push_that_was_running(libs):
    with IsolatedTarget(f"c:{libs['segv']}") as t:
        for case, index in ((RUN_OF_20, 5), (LATE_RUN, 4)):
            with pytest.raises(Crash) as e:
                t.run(case)
            assert (e.value.index, e.value.op, e.value.signal) == (index, Push(), "SIGSEGV")
            assert f"SIGSEGV at op #{index} (push)" in str(e.value)


def test_a_hang_inside_a_traced_run_names_the_push_that_was_running(libs):
    with IsolatedTarget(f"c:{libs['hang']}", op_timeout=0.5) as t, \
            pytest.raises(Crash, match=r"at op #5 \(push\): timed out"):
        t.run(RUN_OF_20)


def test_a_trace_status_on_valid_pushes_is_a_crash_at_the_push_that_failed(tmp_path):
    """In process too: the trace's checksum buffer says how far it got before it returned an error."""
    from impl._ring_build import NoCompiler, compile_ring_library

    try:
        lib = compile_ring_library(tmp_path / "libtracefails.so", replace=(
            "    write_slot(r, p, keys + (size_t)t * wd, values + (size_t)t * wd);\n",
            "    if (p == 5) return RINGKV_E_RANGE;\n"
            "    write_slot(r, p, keys + (size_t)t * wd, values + (size_t)t * wd);\n"))
    except NoCompiler as e:
        pytest.skip(str(e))
    t = registry.resolve(f"c:{lib}")
    with pytest.raises(Crash) as e:
        t.run(RUN_OF_20)
    assert (e.value.index, e.value.op, e.value.signal) == (5, Push(), None)
    assert "at op #5 (push): raised CountError: ringkv_trace" in str(e.value) and "status 7" in str(e.value)


def test_a_bad_calls_documented_status_is_the_expected_outcome_in_the_child():
    with IsolatedTarget("ring-c") as t:
        assert t.run(Case(3, (Push(),) * 4 + tuple(Bad(k) for k in C_KINDS) + (Push(),) * 3)).tokens == 7


def test_a_state_change_on_a_bad_call_is_a_mismatch_of_that_op_not_a_crash():
    case = Case(3, (Push(), Push(), Bad("reset-0"), Push()))
    with IsolatedTarget("mutant:c-error-path-moves-state") as isolated:
        for t in (registry.resolve("mutant:c-error-path-moves-state"), isolated):
            with pytest.raises(Mismatch) as e:
                t.run(case)
            assert (e.value.index, e.value.op) == (2, Bad("reset-0"))
            assert "changed the ring" in e.value.detail


def test_a_death_in_a_bad_call_is_a_crash_naming_the_bad_op(tmp_path):
    """A library that dereferences a NULL key instead of returning RINGKV_E_NULL dies in bad:null-data."""
    from impl._ring_build import NoCompiler, compile_ring_library

    try:
        lib = compile_ring_library(tmp_path / "libnullkey.so", replace=(
            "  if (!r || !key || !value) return RINGKV_E_NULL;\n", "  if (!r) return RINGKV_E_NULL;\n"))
    except NoCompiler as e:
        pytest.skip(str(e))
    with IsolatedTarget(f"c:{lib}") as t, pytest.raises(Crash) as e:
        t.run(Case(3, (Push(), Push(), Bad("null-data"), Push())))
    assert (e.value.index, e.value.op, e.value.signal) == (2, Bad("null-data"), "SIGSEGV")
    assert "SIGSEGV at op #2 (bad:null-data)" in str(e.value)


def test_the_contracts_own_failure_is_a_harness_fault_naming_the_op(monkeypatch):
    def broken(self, raw, cache, spec, kind):
        raise OSError(24, "Too many open files")

    monkeypatch.setattr(CContract, "check", broken)
    with pytest.raises(HarnessFault) as e:
        registry.resolve("ring-c").run(Case(3, (Push(), Bad("gap"))))
    assert "op #1 (bad:gap)" in e.value.reason and "OSError" in e.value.reason


def test_a_python_cache_that_refuses_a_bad_push_by_raising_passes():
    """validates_positions: the exception is the refusal the contract asks for, not a crash."""
    t = registry.resolve("pyring")
    assert "gap" in t.bad_kinds
    assert t.run(Case(3, (Push(), Bad("gap"), Bad("chunk-skip"), Push()))).tokens == 2
