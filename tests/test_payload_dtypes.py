"""--width and --dtype: payloads exact in the dtype and distinct per (epoch, position) across a window, so
a float16 or bfloat16 cache is compared exactly; any width; logits targets report their tolerances."""

from __future__ import annotations

import json

import numpy as np
import pytest

from fuzz.campaign import fuzz_target
from fuzz.cli import main
from fuzz.config import CampaignConfig
from fuzz.oracle import DTYPES, SpecStream, payloads
from fuzz.targets import registry
from fuzz.targets.base import Mismatch
from fuzz.targets.cache import CacheTarget
from fuzz.ops import Case

#: Payload codes per dtype (fuzz.oracle's rule): any two positions closer than this differ.
CODES = {"float32": 1 << 22, "float16": 30 * 1024, "bfloat16": 254 * 128}


@pytest.mark.parametrize("dtype", DTYPES)
def test_payloads_are_exact_in_their_dtype_and_distinct(dtype):
    pos = np.arange(0, 40_000, dtype=np.int64)
    keys, values = payloads(2, pos, 3, dtype)
    assert keys.dtype == values.dtype == np.float32 and np.isfinite(keys).all() and (keys != 0).all()
    if dtype == "float16":
        assert np.array_equal(keys.astype(np.float16).astype(np.float32), keys)
    if dtype == "bfloat16":
        assert not (keys.view(np.uint32) & 0xFFFF).any() and not (values.view(np.uint32) & 0xFFFF).any()
    if dtype == "float32":
        assert np.array_equal(keys, np.round(keys)) and keys.max() < 2**24
    window = min(CODES[dtype], 40_000)
    for j in range(3):  # every position of a window gets its own key, in every column
        assert len(set(keys[:window, j].tolist())) == window
    other, _ = payloads(3, pos[:window], 3, dtype)  # the same positions in the next epoch: all stale-visible
    assert not (other == keys[:window]).all(axis=1).any()
    assert not np.isin(values, keys).any()


class Fp16Cache:
    """A list cache that stores keys and values as numpy float16, as an fp16 engine would."""

    def reset(self, window):
        self.w, self.items = window, []

    def push(self, pos, key, value):
        self.items = (self.items + [(pos, np.asarray(key, np.float16), np.asarray(value, np.float16))])[-self.w:]

    def push_chunk(self, entries):
        for e in entries:
            self.push(*e)

    def contents(self):
        return list(self.items)


class Bf16Cache(Fp16Cache):
    """Stores torch bfloat16 tensors and returns them (the tuple adapter reads any torch dtype)."""

    def push(self, pos, key, value):
        import torch

        row = (pos, torch.tensor(np.asarray(key, np.float32)).to(torch.bfloat16),
               torch.tensor(np.asarray(value, np.float32)).to(torch.bfloat16))
        self.items = (self.items + [row])[-self.w:]


@pytest.mark.parametrize("cls,dtype", [(Fp16Cache, "float16"), (Bf16Cache, "bfloat16")])
def test_a_half_precision_cache_passes_in_its_dtype_and_fails_in_float32(cls, dtype):
    if cls is Bf16Cache:
        pytest.importorskip("torch")
    target = CacheTarget("half", cls)
    config = CampaignConfig(seconds=30, max_examples=80, campaign_seed=0, save_seeds=False, dtype=dtype)
    res = fuzz_target(target, config)
    assert not res.failures and res.examples == 80
    with pytest.raises(Mismatch, match="key of position 97 \\(index \\d+\\): got"):
        target.run(Case.parse(3, "chunk:100"))  # float32 payloads (integers to 2**22): a half-precision store rounds


@pytest.mark.parametrize("name", ["ring-c", "pyring"])
@pytest.mark.parametrize("width", [1, 9])
def test_any_width(name, width):
    target = registry.resolve(name)
    config = CampaignConfig(seconds=30, max_examples=60, campaign_seed=1, save_seeds=False, width=width)
    wide = target.configured(config)
    assert wide.width == width and target.width == 4  # a copy: the resolved target keeps its own
    res = fuzz_target(target, config)
    assert not res.failures and res.examples == 60
    spec = SpecStream(3, width)
    assert spec.next_entry()[1].shape == (width,)


def test_the_payload_flags_are_validated_recorded_and_replayed(tmp_path, capsys):
    assert main(["fuzz", "--target", "pyring", "--time", "1", "--width", "0"]) == 2
    assert "--width must be between 1 and 4096 (the bound seeds obey), got 0" in capsys.readouterr().err
    assert main(["fuzz", "--target", "pyring", "--time", "1", "--dtype", "float8"]) == 2
    with pytest.raises(ValueError, match="dtype must be one of float32, float16, bfloat16"):
        CampaignConfig(dtype="float64")
    rep = tmp_path / "r.json"
    rc = main(["fuzz", "--target", "py:tests.support.caches:ReadsFromSlotZero", "--time", "20", "--seed", "0",
               "--width", "2", "--dtype", "float16", "--seeds-dir", str(tmp_path / "s"), "--report", str(rep)])
    assert rc == 1
    doc = json.loads(rep.read_text())
    assert doc["config"]["width"] == 2 and doc["config"]["dtype"] == "float16"
    fail = doc["failures"][0]
    seed = json.loads(open(fail["seed_path"]).read())  # the case carries its payload: the hint needs no flags
    assert seed["width"] == 2 and seed["dtype"] == "float16" and "--width" not in fail["replay"]
    capsys.readouterr()
    argv = fail["replay"].split()[1:]
    assert main(argv) == 1 and "FAILED" in capsys.readouterr().out


def test_every_replay_hint_replays_the_payload(tmp_path, capsys, monkeypatch):
    """A seed saved before cases carried their payload (a --width/--dtype campaign's, in 'found') replays with it;
    a seed that could not be written is printed with the commands that store it as it is and replay it."""
    import re

    from fuzz import seeds

    seed = seeds.Seed(Case.parse(3, "push push"), {"width": 2, "dtype": "float16"})
    path, _ = seeds.save_seed(seed, tmp_path / "s")
    assert seeds.load_seed(path).run_case == Case.parse(3, "push push", width=2, dtype="float16")
    assert main(["seeds", "show", seed.id, "--seeds-dir", str(tmp_path / "s")]) == 0
    out = capsys.readouterr().out
    assert "replays as: window=3 width=2 dtype=float16 ops: push push" in out and f"replay: kvwindow replay {path}\n" in out

    def refuse(*a, **k):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(seeds, "store_seed", refuse)
    rc = main(["fuzz", "--target", "py:tests.support.caches:ReadsFromSlotZero", "--time", "20", "--seed", "0",
               "--width", "2", "--dtype", "float16", "--plain", "--seeds-dir", str(tmp_path / "t"),
               "--db", str(tmp_path / "db")])
    out = capsys.readouterr().out
    assert rc == 1 and "seed NOT saved" in out, out
    assert re.search(r"seeds add --window \d+ --ops '[^']*' --width 2 --dtype float16 --seeds-dir DIR && "
                     r"kvwindow replay DIR/\w+\.json --target py:tests\.support\.caches:ReadsFromSlotZero\n", out), out


def test_logits_targets_report_their_tolerances(tmp_path):
    target, why = registry.probe("decoder")
    if target is None:
        pytest.skip(why)
    assert target.tolerances() == {"logits": {"atol": 1e-10}, "kv": {"atol": 1e-10}}
    res = fuzz_target(target, CampaignConfig(seconds=30, max_examples=3, campaign_seed=0, save_seeds=False))
    assert res.to_json()["tolerances"] == target.tolerances()
    assert registry.resolve("ring-c").tolerances() == {}  # cache targets compare exactly
