"""DESIGN §4's outcomes: which exceptions are findings (seeds, exit 1) and which are harness faults."""

from fuzz.ops import Case, Push
from fuzz.results import Failure
from fuzz.targets.base import (CRASH, EFFICIENCY, FINDINGS, HARNESS, LEAK, MISMATCH, Crash, HarnessFault, Mismatch,
                               failure_kind)


def test_each_exception_names_its_kind():
    assert failure_kind(Mismatch("t", 0, Push(), "positions differ")) == MISMATCH
    assert failure_kind(Crash("t", 2, Push(), "died", signal="SIGSEGV")) == CRASH
    assert failure_kind(HarnessFault("t", "redis went away")) == HARNESS
    # An exception the target did not classify was raised by the implementation: a crash.
    assert failure_kind(ValueError("boom")) == CRASH
    assert HARNESS not in FINDINGS and set(FINDINGS) == {MISMATCH, CRASH, EFFICIENCY, LEAK}
    # A paged sequence past the freeing rule's bound is the efficiency finding (fuzz.paged.checks.OverBound).
    from fuzz.paged.checks import OverBound

    assert failure_kind(OverBound("t", 0, Push(), "s0 holds 4 blocks")) == EFFICIENCY


def test_crash_message_names_signal_and_op():
    text = str(Crash("c:lib.so", 3, Push(), "child process died", signal="SIGSEGV"))
    assert "SIGSEGV" in text and "op #3 (push)" in text


def test_failure_kind_round_trips_and_defaults_to_mismatch():
    case = Case(3, (Push(),))
    f = Failure("pyring", "Crash: ...", case, kind=CRASH)
    assert Failure.from_json(f.to_json()).kind == CRASH
    legacy = {k: v for k, v in f.to_json().items() if k != "kind"}  # reports written before kinds existed
    assert Failure.from_json(legacy).kind == MISMATCH
