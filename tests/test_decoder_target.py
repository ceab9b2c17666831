"""The campaign target ``decoder``: every op kind, resolution from the registry, positions held to the spec."""

from __future__ import annotations

from fuzz.ops import Case, Chunk, Push, Reset
from fuzz.targets.decoder import TARGET_CONFIG, DecoderTarget, make_decoder, token_of
from fuzz.targets.decoder_props import check_cache, expected_positions
from tests.support.decoder import one_thread  # noqa: F401 - one_thread applies to every test here


def test_target_runs_every_op_kind():
    t = make_decoder()
    assert (t.name, t.kind, t.window_max, t.max_tokens) == ("decoder", "model", 16, 64)
    ops = [Push(), Chunk(0), Chunk(9), Push(), Reset(2), Chunk(7), Push(), Reset(5), Push(), Chunk(11)]
    stats = t.run(Case(3, ops))
    assert stats.tokens == 1 + 9 + 1 + 7 + 1 + 1 + 11
    assert {"not-yet-full", "first-eviction", "chunk>W", "after-reset", "steady-state"} <= stats.phases
    assert t.accepts(Case(17, [])) is not None and t.accepts(Case(16, [Reset(4)])) is None


def test_target_resolves_from_registry_and_tokens_are_deterministic():
    from fuzz.targets.registry import resolve

    assert resolve("decoder").name == "decoder"
    assert [token_of(0, p, 32) for p in range(5)] == [token_of(0, p, 32) for p in range(5)]
    assert [token_of(0, p, 32) for p in range(8)] != [token_of(1, p, 32) for p in range(8)]
    assert all(0 <= token_of(e, p, 7) < 7 for e in range(3) for p in range(50))


def test_target_checks_positions_against_spec():
    t = DecoderTarget()
    c = t.model.new_cache(3)
    t.model.prefill(c, [1, 2, 3, 4, 5])
    assert [s.positions for s in c.snapshot()] == [expected_positions(3, 5), expected_positions(None, 5)]
    assert TARGET_CONFIG.windows == (8, None)
    full = t.model.full_forward([1, 2, 3, 4, 5], c.windows)
    assert check_cache(c, full, 5) is None
