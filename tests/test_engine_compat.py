"""The engines' rows of docs/compat.md (scripts/engine_matrix.sh -> scripts/engine_compat.py): a release that lacks
the operator a target drives is n/a, not a fault; the README's supported ranges and each finding note's release
table are the ones the table and the findings tables give; pyproject's engine pins span the table's releases.
No engine is needed (the findings tables import without one)."""

from __future__ import annotations

import importlib.util
import re
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _script():
    sys.path.insert(0, str(ROOT / "scripts"))
    spec = importlib.util.spec_from_file_location("engine_compat", ROOT / "scripts" / "engine_compat.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


ec = _script()


def test_a_release_without_the_operator_is_na_and_an_adapter_gap_a_fault():
    lacks = "onnxruntime 1.23.2: the release has no Attention-25 (its operator schemas have no ONNX Attention ...)"
    assert ec.engine_cell(None, lacks, "x.log") == "n/a (the release has no Attention-25)"
    gap = "mlx-lm 9.9: X(y=): gone (the adapter in impl/engines/ needs to learn this release's API; ...)"
    assert ec.engine_cell(None, gap, "x.log").startswith("harness fault: ")
    assert ec.engine_cell({"failures": [], "known_findings": {}}, "available", "x.log") == "clean"


def test_the_readme_ranges_name_na_spans_and_unsupported_releases(tmp_path, monkeypatch):
    compat = tmp_path / "compat.md"
    head = "| `onnxruntime` | tests | `ort:attention` | `ort:gqa` |\n|---|---|---|---|\n"
    rows = ["| 1.20.1 (onnxruntime 1.20.1) | 6 passed | n/a (the release has no Attention-25) | clean |",
            "| 1.21.1 (onnxruntime 1.21.1) | 6 passed | n/a (the release has no Attention-25) | harness fault: x |",
            "| 1.32.0 (onnxruntime 1.32.0) | 9 passed | clean | clean |"]
    compat.write_text("<!-- engine:ort -->\n### ONNX Runtime\n\n" + head + "\n".join(rows) + "\n<!-- /engine:ort -->\n")
    monkeypatch.setattr(ec, "COMPAT", compat)
    block = ec.readme_block()
    assert "1.20.1 – 1.32.0" in block and "not supported: 1.21.1" in block
    assert "`ort:attention` n/a on 1.20.1 – 1.21.1 (the release has no Attention-25)" in block


def test_readme_and_notes_agree_with_docs_compat_and_the_findings_tables():
    text = (ROOT / "README.md").read_text()
    a, b = text.index(ec.BEGIN), text.index(ec.END) + len(ec.END)
    assert text[a:b] == ec.readme_block(), "README.md is stale: run scripts/engine_compat.py --write"
    for engine in ec.engines_with_findings():
        assert ec.write_note_blocks(engine, check=True) == [], "a note is stale: run scripts/engine_compat.py --write"


def _pin(extra: str, dist: str) -> tuple[str, str]:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"][extra]
    spec = next(d for d in deps if re.match(rf"{re.escape(dist)}\s*[><=]", d))
    lo = re.search(r">=\s*([\d.]+)", spec).group(1)
    hi = re.search(r"<=\s*([\d.]+)", spec).group(1)
    return lo, hi


@pytest.mark.parametrize("engine,extra,dist", [("ort", "ort", "onnxruntime"), ("mlx", "mlx", "mlx-lm")])
def test_pins_span_the_matrix(engine, extra, dist):
    _, rows = ec.existing_rows(engine)
    if not rows:
        pytest.skip(f"docs/compat.md has no {engine} table yet")
    rels = sorted((r.split(" ")[0] for r in rows), key=ec.version_key)
    lo, hi = _pin(extra, dist)
    assert hi == rels[-1], f"pyproject's {dist} upper bound {hi} is not the newest release of the matrix {rels[-1]}"
    assert ec.version_key(lo)[:2] == ec.version_key(rels[0])[:2], (lo, rels[0])
