"""The error contract: every documented bad call of ringkv.h is refused with its status and changes
nothing on the real ring; broken copies that move state, accept a wrong position or answer with the
wrong status are mismatches of their bad op, which shrink and save like any finding; a Python class
that declares validates_positions is held to it; bad ops are ops of the op language."""

from __future__ import annotations

import json
import shutil

import pytest
from hypothesis import given, settings

from fuzz.campaign import fuzz_target
from fuzz.config import CampaignConfig
from fuzz.ops import BAD_KINDS, Bad, Case, OpError, Push
from fuzz.strategies import boundary_tours, cases, error_tour
from fuzz.targets import registry
from fuzz.targets.base import Mismatch
from fuzz.targets.cache import CacheTarget
from fuzz.targets.pyring import PyRing
from fuzz.targets.ring import CRingTarget
from fuzz.targets.ring_errors import C_KINDS, PY_KINDS, PyContract, py_contract_for
from impl.ring import load_library

needs_cc = pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None,
                              reason="no C compiler: cannot build broken copies of the ring")


def test_bad_ops_have_one_text_and_one_json_form():
    case = Case.parse(3, "push bad:gap chunk:2 bad:null-data")
    assert case.ops[1] == Bad("gap") and case.text == "push bad:gap chunk:2 bad:null-data"
    assert case.to_json()["ops"][3] == ["bad", "null-data"]
    assert Case.from_json(json.loads(json.dumps(case.to_json()))) == case
    assert case.tokens == 3 and case.bad_kinds() == {"gap", "null-data"}
    with pytest.raises(OpError, match="op #1: unknown bad call .*kinds: gap, dup"):
        Case.parse(3, "push bad:nope")
    with pytest.raises(OpError, match="op #0"):
        Case.from_json({"window": 2, "ops": [["bad"]]})
    assert set(C_KINDS) | set(PY_KINDS) == set(BAD_KINDS)


@given(cases(window_max=8, bad=C_KINDS))
@settings(max_examples=40)
def test_generated_bad_ops_round_trip_and_run_clean_on_the_real_ring(case):
    assert Case.parse(case.window, case.text) == case
    registry.resolve("ring-c").run(case)


def test_the_real_ring_passes_every_kind_in_every_state():
    target = registry.resolve("ring-c")
    assert set(target.bad_kinds) == set(C_KINDS)
    target.run(error_tour(target.bad_kinds, 16))
    for w in (1, 2, 5):  # every kind after every prefix of a wrapping stream
        for n in range(0, 2 * w + 2):
            target.run(Case(w, (Push(),) * n + tuple(Bad(k) for k in C_KINDS) + (Push(),)))


def test_accepts_names_the_kinds_a_target_cannot_take():
    ring_c, pyring = registry.resolve("ring-c"), registry.resolve("pyring")
    assert ring_c.accepts(Case.parse(3, "push bad:chunk-skip")) == (
        "bad:chunk-skip is not a call ring-c can take; it takes " + ", ".join("bad:" + k for k in C_KINDS))
    assert "bad:null-data is not a call pyring can take" in pyring.accepts(Case.parse(3, "bad:null-data"))
    assert pyring.accepts(Case.parse(3, "push bad:chunk-skip bad:gap")) is None
    plain = CacheTarget("plain", PyRing)  # no validates_positions promise taken up: no contract
    assert "has no error contract" in plain.accepts(Case.parse(3, "bad:gap"))
    assert plain.accepts(Case.parse(3, "push")) is None


def test_only_targets_with_a_contract_get_bad_ops_and_error_tours():
    assert not any(Case.bad_kinds(c) for c in boundary_tours(16))
    assert any(c.bad_kinds() == set(C_KINDS) for c in boundary_tours(16, None, C_KINDS))
    res = fuzz_target(CacheTarget("plain", PyRing), CampaignConfig(seconds=30, max_examples=60, campaign_seed=0,
                                                                  save_seeds=False))
    assert not res.failures and res.examples == 60


# ---------------------------------------------------------------------------
# Broken copies of the ring: each is caught at its bad op, with the header's words

BROKEN = [
    # The position check moved after the write: a refused push still overwrites the slot.
    (("  if (pos != r->n) return RINGKV_E_POSITION;\n  if (r->n == INT64_MAX) return RINGKV_E_RANGE;\n"
      "  write_slot(r, pos, key, value);\n",
      "  if (r->n == INT64_MAX) return RINGKV_E_RANGE;\n  if (pos != r->n) { if (pos >= 0) write_slot(r, pos, key, "
      "value); return RINGKV_E_POSITION; }\n  write_slot(r, pos, key, value);\n"),
     "bad:(gap|dup|past)", "changed the ring"),
    # A negative count is taken for zero.
    (("  if (n < 0) return RINGKV_E_RANGE;\n  if (n == 0) return RINGKV_OK;\n  if (!keys || !values)",
      "  if (n <= 0) return RINGKV_OK;\n  if (!keys || !values)"),
     "bad:count", "ringkv_push_chunk\\(r, \\d+, -1, keys, values\\) returned RINGKV_OK, ringkv.h says RINGKV_E_RANGE"),
    # A short read fills the buffer before it reports the capacity error.
    (("  if (capacity < len) {\n    *out_len = len;\n",
      "  if (capacity < len) {\n    if (positions) read_positions(r, positions, capacity);\n    *out_len = len;\n"),
     "bad:read-short", "wrote into the caller's buffers"),
    # A NULL key is not checked: the push is refused only for its position, so NULL data is E_POSITION... or a crash.
    (("  if (!r || !key || !value) return RINGKV_E_NULL;\n  if (pos != r->n) return RINGKV_E_POSITION;\n",
      "  if (!r) return RINGKV_E_NULL;\n  if (!key || !value) return RINGKV_E_WIDTH;\n"
      "  if (pos != r->n) return RINGKV_E_POSITION;\n"),
     "bad:null-data", "returned RINGKV_E_WIDTH, ringkv.h says RINGKV_E_NULL"),
]


@needs_cc
@pytest.mark.parametrize("edit,op,message", BROKEN, ids=["write-before-check", "negative-count", "short-read",
                                                         "null-status"])
def test_a_broken_error_path_is_a_mismatch_of_its_bad_op(tmp_path, edit, op, message):
    from impl._ring_build import compile_ring_library

    target = CRingTarget("c:broken", load_library(compile_ring_library(tmp_path / "lib.so", replace=edit)))
    target.run(Case.parse(3, "push push push push chunk:5 reset:2 push"))  # the happy path is fine
    with pytest.raises(Mismatch, match=f"after op #\\d+ \\({op}\\): .*{message}"):
        target.run(error_tour(target.bad_kinds, 16))
    res = fuzz_target(target, CampaignConfig(seconds=30, max_examples=200, campaign_seed=0,
                                             seeds_dir=str(tmp_path / "seeds")))
    (fail,) = res.failures
    assert fail.case.bad_kinds() and len(fail.case.ops) <= 4, fail.case  # shrunk to a few ops around the bad call
    with pytest.raises(Mismatch):
        target.run(fail.case)  # the saved seed replays
    assert json.loads(open(fail.seed_path).read())["ops"][-1][0] == "bad"


# ---------------------------------------------------------------------------
# Python classes: validates_positions = True is a promise the campaign checks


class AcceptsGaps(PyRing):
    """Declares that it validates, then takes a gap as the next entry."""

    def push(self, pos, key, value):
        self._next = pos
        super().push(pos, key, value)


class HalfAppliesChunks(PyRing):
    """Raises on a bad chunk entry, but only after applying the entries before it."""

    def push_chunk(self, entries):
        for e in entries:
            self.push(*e)


def test_a_validating_class_is_held_to_its_promise():
    assert py_contract_for(PyRing).__class__ is PyContract and py_contract_for(object) is None
    CacheTarget("pyring", PyRing, errors=PyContract()).run(error_tour(PY_KINDS, 16))
    with pytest.raises(Mismatch, match=r"bad:gap\): push\(1, \.\.\.\) with next position 0 was accepted; "
                                       "validates_positions = True promises it raises"):
        CacheTarget("gaps", AcceptsGaps, errors=py_contract_for(AcceptsGaps)).run(Case.parse(2, "bad:gap"))
    with pytest.raises(Mismatch, match=r"after op #1 \(bad:chunk-skip\): positions differ from spec lastWindow at index 0: 1 differ, "
                                       r"length got 1, spec 0; got \[<0>\], spec \[<end>\]"):
        CacheTarget("half", HalfAppliesChunks, errors=py_contract_for(HalfAppliesChunks)).run(
            Case.parse(2, "bad:gap bad:chunk-skip"))


def test_a_py_target_takes_the_contract_its_class_declares(tmp_path, monkeypatch):
    (tmp_path / "validating.py").write_text(
        "from fuzz.targets.pyring import PyRing\n\n"
        "class Checked(PyRing):\n    pass\n\n"
        "class Unchecked(PyRing):\n    validates_positions = False\n")
    monkeypatch.chdir(tmp_path)
    assert set(registry.resolve("py:validating:Checked").bad_kinds) == set(PY_KINDS)
    assert registry.resolve("py:validating:Unchecked").bad_kinds == ()


def test_the_cuda_host_api_refuses_its_bad_calls():
    """The CUDA ring's host API (csrc/ringkv_cuda.h) through its own bad calls: runs only with a GPU."""
    from fuzz.targets.cuda import CudaRingCache

    assert set(CudaRingCache.BAD_KINDS) <= set(C_KINDS)
    target, why = registry.probe("cuda-ring")
    if target is None:
        pytest.skip(f"cuda-ring not available here: {why}")
    assert set(target.bad_kinds) == set(CudaRingCache.BAD_KINDS)
    for _ in range(3):  # the target rotates fp32, fp16 and bf16 between cases
        target.run(error_tour(target.bad_kinds, 16))
