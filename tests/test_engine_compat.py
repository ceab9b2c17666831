"""The engines' rows of docs/compat.md (scripts/engine_matrix.sh -> scripts/engine_compat.py): a release that lacks
the operator a target drives is n/a, not a fault; the README's supported ranges and each finding note's release
table are the ones the table and the findings tables give; pyproject bounds each engine below by the table's oldest release, never above.
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
from fuzz.targets import known  # noqa: E402


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


def _lower(extra: str, dist: str) -> str:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"][extra]
    spec = next(d for d in deps if re.match(rf"{re.escape(dist)}\s*[><=]", d))
    assert not re.search(r"<|==|~=", spec), f"pyproject pins {spec}: the libraries under test carry no upper pin"
    return re.search(r">=\s*([\d.]+)", spec).group(1)


ENGINES = [("ort", "ort", "onnxruntime"), ("mlx", "mlx", "mlx-lm"), ("ct2", "ct2", "ctranslate2"),
           ("llama", "llama", "llama-cpp-python")]


@pytest.mark.parametrize("engine,extra,dist", ENGINES)
def test_lower_bounds_are_the_matrix_oldest_and_the_newest_is_known(engine, extra, dist):
    """No upper pin (DESIGN §4): a newer release installs and gets one warning line; the lower bound is the
    series of the matrix's oldest row (llama: 0.3.30, the oldest the env file builds, which the table lacks:
    its build took 48 min on the loaded machine); ``MATRIX_NEWEST`` (fuzz/targets/known.py) is the newest row."""
    _, rows = ec.existing_rows(engine)
    if not rows:
        pytest.skip(f"docs/compat.md has no {engine} table yet")
    rels = sorted((r.split(" ")[0] for r in rows), key=ec.version_key)
    lo = _lower(extra, dist)
    assert known.MATRIX_NEWEST[dist] == rels[-1], (dist, known.MATRIX_NEWEST.get(dist), rels[-1])
    if engine != "llama":
        assert ec.version_key(lo)[:2] == ec.version_key(rels[0])[:2], (lo, rels[0])


def test_open_engine_findings_reproduce_on_the_newest_row_and_closed_ones_were_seen_fixed():
    """An open row (``0.26+``) names the table's newest release in ``seen``; a finding id whose rows are all
    closed was not seen on some later release of the table (its "fixed in" bound)."""
    for engine in ("ort", "mlx", "ct2"):
        _, rows = ec.existing_rows(engine)
        rels = sorted((r.split(" ")[0] for r in rows), key=ec.version_key)
        table = ec.findings_of(engine)
        for fid in dict.fromkeys(f.id for f in table):
            mine = [f for f in table if f.id == fid]
            if any(known.is_open(s) for f in mine for s in f.releases):
                assert any(rels[-1] in f.seen for f in mine), (fid, rels[-1])
            else:
                last = max((s.split("-")[-1] for f in mine for s in f.releases), key=ec.version_key)
                later = [r for r in rels if ec.version_key(r)[:2] > ec.version_key(last)[:2]]
                assert later and not any(later[0] in f.seen for f in mine), (fid, last, later[:1])


def test_a_release_newer_than_the_matrix_is_labelled_and_still_has_its_findings():
    from fuzz.targets.engines import ort

    newer = "1.99.0"
    assert known.release_label("onnxruntime", newer) == "onnxruntime 1.99.0 (newer than docs/compat.md)"
    assert known.release_label("onnxruntime", "1.32.0") == "onnxruntime 1.32.0"
    (w,) = known.release_warnings({"onnxruntime": newer, "numpy": "9.0"})
    assert w.startswith("onnxruntime 1.99.0 is newer than the newest release docs/compat.md ran (1.32.0)")
    ct2 = ec.findings_of("ct2")
    assert any(f.applies("ct2:mistral", "9.0.0") for f in ct2)  # open: not seen fixed
    assert not any(f.applies("ort:gqa", newer) for f in ort.FINDINGS)  # closed: seen fixed in 1.24
