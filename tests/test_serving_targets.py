"""The serving adapters as harness targets (``kvwindow fuzz --target vllm:swa`` ...), in .venv-serving.

The adapters' own tests (tests/test_serving_vllm.py, tests/test_serving_sglang.py) drive them against
PagedC directly; these run them the way a user does, through the paged campaign: a campaign must draw
only the ops an adapter declares (``paged_ops``: a drawn ``fork`` would be a false crash), end clean,
and report the engines' efficiency divergences as efficiency, not as failures. In any other venv the
targets are unavailable with the reason, which the last test checks.
"""

from __future__ import annotations

import importlib.util
import json

import pytest

from fuzz.cli import main
from fuzz.targets import registry
from fuzz.targets.base import TargetError


def _needs(engine: str) -> None:
    if importlib.util.find_spec(engine) is None:
        pytest.skip(f"{engine} is not installed here: scripts/install_serving_cores.sh builds .venv-serving")


@pytest.mark.parametrize("name,ops", [("vllm:swa", ("admit",)), ("vllm:hybrid", ("admit",)), ("sglang:swa", ())])
def test_a_target_draws_only_the_ops_its_adapter_declares(name, ops):
    _needs(name.split(":")[0])
    assert registry.resolve(name).paged_ops == ops


@pytest.mark.parametrize("name", ["vllm:swa", "vllm:hybrid", "sglang:swa"])
def test_a_short_campaign_is_clean_and_reports_efficiency_as_such(name, tmp_path, capsys):
    _needs(name.split(":")[0])
    rep = tmp_path / "r.json"
    rc = main(["fuzz", "--target", name, "--time", "6", "--workers", "1", "--seed", "0", "--report", str(rep),
               "--seeds-dir", str(tmp_path / "s"), "--db", str(tmp_path / "db")])
    out = capsys.readouterr()
    assert rc == 0, out.out + out.err
    (t,) = json.loads(rep.read_text())["targets"]
    assert t["examples"] > 0 and not t["failures"]
    assert not list((tmp_path / "s").glob("*.json")), "a clean campaign saved a seed"


@pytest.mark.parametrize("name", ["vllm:swa", "sglang:swa"])
def test_without_the_engine_the_target_is_unavailable_with_the_reason(name):
    engine = name.split(":")[0]
    if importlib.util.find_spec(engine) is not None:
        pytest.skip(f"{engine} is installed here: the tests above run it")
    with pytest.raises(TargetError, match="not available here: .*install_serving_cores"):
        registry.resolve(name)


@pytest.mark.parametrize("name", ["vllm:swa", "vllm:hybrid", "sglang:swa"])
def test_the_engines_hold_every_production_scale_tour(name):
    """Issue 28 at the serving adapters: pages of 257, windows over 4-16 pages, windows of 4096 (256 pages of 16) and
    4097, 64 live sequences in one pressed pool — each scale tour against the paged oracle, no mismatch or crash (an
    early exhaustion or a short hit is efficiency, recorded in the stats); a few seconds each on vLLM."""
    from fuzz.paged.strategies import MANY_LIVE, scale_tours

    _needs(name.split(":")[0])
    t = registry.resolve(name)
    tours = scale_tours()
    assert max(c.window for c in tours) > 4096 and max(c.block_size for c in tours) == 257
    assert any(len({o.seq for o in c.ops if hasattr(o, "seq")}) == MANY_LIVE for c in tours)
    ran = []
    for c in tours:
        why = t.accepts(c)
        if why is not None:  # sglang:swa: its ReqToTokenPool rows hold 16,384 positions (max_seq_tokens)
            assert name == "sglang:swa" and "max_seq_tokens" in why and c.tokens > t.max_seq_tokens, why
            continue
        t.run(c)
        ran.append(c)
    assert any(c.window > 4096 for c in ran) and any(c.block_size == 257 for c in ran)
    assert len(ran) == len(tours) or name == "sglang:swa"


def test_a_case_past_the_adapters_row_is_left_out_with_the_reason():
    """SGLang's adapter holds 16,384 positions per sequence (a ReqToTokenPool row): a longer case is refused by
    accepts() (never run into the adapter's RangeError, a false crash) and the drawn cases leave it out."""
    from fuzz.paged.ops import Add, Chunk, PagedCase

    _needs("sglang")
    t = registry.resolve("sglang:swa")
    assert t.max_seq_tokens == 16_384
    fits = PagedCase(64, 16, 32, 2, (Add(0), Chunk(0, 16_000), Chunk(0, 384)))
    past = PagedCase(64, 16, 32, 2, (Add(0), Chunk(0, 16_000), Chunk(0, 385)))
    assert t.accepts(fits) is None
    assert "op #2 (s0 chunk:385) takes a sequence to 16,385 tokens" in t.accepts(past)
    t.run(fits)
