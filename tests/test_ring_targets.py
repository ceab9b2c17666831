"""ring-c and c:PATH.so as fuzz targets: the state machine, the campaign, and bring-your-own libraries.

A second copy of the library under another name must pass; a copy with one
edited line must be caught by the campaign — through ``fuzz_target`` and
through ``kvwindow fuzz --target c:...`` exiting 1.
"""

from __future__ import annotations

import shutil

import pytest
from hypothesis import Phase, settings

from fuzz.targets import registry
from fuzz.campaign import fuzz_target
from fuzz.config import CampaignConfig
from fuzz.targets.ring_machine import ring_c_machine, ring_machine
from impl._ring_build import CSRC, compile_ring_library

needs_cc = pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None,
                              reason="no C compiler: cannot build library copies")

# One line of ringkv.c, edited: a chunk of >= W entries skips its oldest survivor (stale slot).
BROKEN_CHUNK = ("rkv_chunk_first_kept(n, r->w)", "rkv_chunk_first_kept(n, r->w - 1)")

TestRingCMachine = ring_c_machine().TestCase
TestRingCMachine.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)


def test_ring_c_is_registered_and_available():
    assert registry.BUILTIN["ring-c"] == ("fuzz.targets.ring:make_ring_c", True)
    target = registry.resolve("ring-c")
    assert target.name == "ring-c" and target.width == 4


def test_ring_c_campaign_passes(tmp_path):
    res = fuzz_target(registry.resolve("ring-c"), CampaignConfig(seconds=30, max_examples=150, campaign_seed=4,
                                                                 seeds_dir=str(tmp_path)))
    assert not res.failures, res.failures
    assert res.examples == 150 and res.tokens > 1000
    assert all(res.phases[p] > 0 for p in ("first-eviction", "chunk>W", "after-reset")), res.phases


@needs_cc
def test_copy_under_another_name_passes(tmp_path):
    lib = compile_ring_library(tmp_path / "libmycache.so")
    target = registry.resolve(f"c:{lib}")
    assert target.name == f"c:{lib}"
    res = fuzz_target(target, CampaignConfig(seconds=30, max_examples=150, campaign_seed=5, seeds_dir=str(tmp_path)))
    assert not res.failures, res.failures


@needs_cc
def test_state_machine_catches_broken_copy(tmp_path):
    from impl.ring import CRing, load_library

    backend = load_library(compile_ring_library(tmp_path / "libbroken.so", replace=BROKEN_CHUNK))
    machine = ring_machine(lambda: CRing(4, backend=backend))
    machine.TestCase.settings = settings(max_examples=200, stateful_step_count=30, deadline=None, database=None,
                                      phases=[Phase.generate])  # finding it is the point; skip shrinking
    with pytest.raises(AssertionError, match="positions|key|value"):
        machine.TestCase("runTest").runTest()


@needs_cc
def test_campaign_catches_broken_copy(tmp_path):
    lib = compile_ring_library(tmp_path / "libbroken.so", replace=BROKEN_CHUNK)
    res = fuzz_target(registry.resolve(f"c:{lib}"), CampaignConfig(seconds=20, campaign_seed=6,
                                                                   seeds_dir=str(tmp_path / "seeds")))
    assert res.failures and "Mismatch" in res.failures[0].error, res.failures
    assert "chunk" in res.failures[0].case.text  # the shrunk case needs a chunk of >= W entries


@needs_cc
def test_cli_exits_1_on_broken_copy(tmp_path, capsys):
    from fuzz.cli import main

    lib = compile_ring_library(tmp_path / "libbroken.so", replace=BROKEN_CHUNK)
    rc = main(["fuzz", "--target", f"c:{lib}", "--time", "20", "--seed", "3", "--plain",
               "--seeds-dir", str(tmp_path / "seeds"), "--db", str(tmp_path / "db")])
    out = capsys.readouterr().out
    assert rc == 1, out
    assert list((tmp_path / "seeds").glob("*.json")), "the failure was not saved as a seed"


def test_c_target_missing_file():
    with pytest.raises(registry.TargetError, match="no such file"):
        registry.resolve("c:/nonexistent/libnothing.so")


def test_c_target_not_a_library(tmp_path):
    f = tmp_path / "notalib.so"
    f.write_text("hello")
    with pytest.raises(registry.TargetError, match="not a loadable shared library"):
        registry.resolve(f"c:{f}")


@needs_cc
def test_c_target_missing_symbol_is_named(tmp_path):
    # Drop ringkv_checksum from a copy: the error must name exactly that symbol.
    text = (CSRC / "ringkv.c").read_text()
    start = text.index("int ringkv_checksum(")
    end = text.index("}\n", start) + 2
    lib = compile_ring_library(tmp_path / "libpartial.so", replace=(text[start:end], ""))
    with pytest.raises(registry.TargetError, match="does not export ringkv_checksum"):
        registry.resolve(f"c:{lib}")


def test_compile_helper_rejects_a_stale_edit(tmp_path):
    with pytest.raises(ValueError, match="found 0"):
        compile_ring_library(tmp_path / "x.so", replace=("no such line", "x"))


@needs_cc
def test_compile_helper_leaves_only_the_library(tmp_path):
    lib = compile_ring_library(tmp_path / "out" / "libcopy.so", replace=BROKEN_CHUNK)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["libcopy.so"]
    assert lib == tmp_path / "out" / "libcopy.so"
