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
