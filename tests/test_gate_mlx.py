"""An engine as gate subjects: ``mlx:<model_type>`` (mlx-lm's tiny model on its own prompt cache) against
``mlx:<model_type>+rotating`` (a ``RotatingKVCache(max_size=W)`` on every layer, the global one included).

On llama (one sliding, one global layer) the baseline's cached stream equals mlx-lm's own no-cache forward in
every cell of step 4, and the four negative controls the subject allows (stale weights, window ± 1, a
cross-request handle) are detected; the candidate caps the global layer at W entries, so it fails step 4
(cached against uncached) and the logits claim of step 2. The two controls that need ``inject`` are not
applicable, naming why. Skips where mlx-lm is not installed (``make test`` installs it).
"""

from __future__ import annotations

import pytest

from tests.support.gate import run_gate, steps

pytest.importorskip("mlx_lm", reason="mlx-lm is not installed (pip install 'kvwindow[mlx]')")


def test_mlx_rotating_everywhere_against_its_own_cache(tmp_path):
    rc, doc = run_gate(tmp_path, "mlx:llama", "mlx:llama+rotating", "eviction", "logits:1e-3")
    s = steps(doc)
    assert rc == 1 and doc["verdict"] == "fail"
    base4 = [c for c in s[4]["checks"] if c["subject"] == "baseline mlx:llama"]
    assert base4 and all(c["verdict"] in ("pass", "n/a") for c in base4), base4
    assert any(c["verdict"] == "pass" for c in base4)
    cand4 = [c for c in s[4]["checks"] if c["subject"] == "candidate mlx:llama+rotating"
             and c["name"].startswith("cached vs uncached")]
    assert any(c["verdict"] == "fail" for c in cand4)
    assert s[2]["verdict"] == "fail"
    controls = {c["name"]: c for c in s[5]["checks"] if c["subject"] == "baseline mlx:llama"}
    for name in ("stale adapter", "window + 1", "window - 1", "cross-request handle"):
        assert controls[name]["verdict"] == "pass", controls[name]
    for name in ("position off by one", "truncated block"):
        assert controls[name]["verdict"] == "n/a" and "inject()" in controls[name]["detail"]


def test_an_unknown_mlx_subject_is_a_usage_error(tmp_path):
    rc, doc = run_gate(tmp_path, "mlx:llama", "mlx:llama+paged", "layout", "exact", budget="--quick")
    assert rc == 2
