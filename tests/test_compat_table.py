"""docs/compat.md (release x HF target, written by scripts/compat_table.py from scripts/hf_matrix.sh
reports), the README's supported-range claim and pyproject's transformers lower bound agree; the default venv
runs a release of the table or a newer one (no upper pin: `make setup` installs the newest on the index, and a
campaign on a release newer than the table says so in one warning line); CI runs the oldest separately."""

from __future__ import annotations

import importlib.util
import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _script():
    spec = importlib.util.spec_from_file_location("compat_table", ROOT / "scripts" / "compat_table.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


ct = _script()
from fuzz.targets import known  # noqa: E402
from fuzz.targets.hf import findings  # noqa: E402
ROWS = ct.parse_compat((ROOT / "docs" / "compat.md").read_text())
OUTCOME = re.compile(r"^(clean|n/a|known: \[[\w-]+\]\(findings/[\w-]+\.md\)(, \[[\w-]+\]\(findings/[\w-]+\.md\))*"
                     r"|finding: .+|harness fault: .+|unavailable: .+|no result: .+)$")


def test_the_readme_claim_is_the_one_the_table_gives():
    readme = (ROOT / "README.md").read_text()
    a, b = readme.index(ct.BEGIN), readme.index(ct.END) + len(ct.END)
    assert readme[a:b] == ct.readme_block(ROWS), "README.md is stale: run scripts/compat_table.py --write"


def test_every_cell_is_an_outcome_and_every_target_a_column():
    assert ROWS and all(set(cells) == set(ct.columns()) for cells in ROWS.values())
    for rel, cells in ROWS.items():
        for target, c in cells.items():
            assert OUTCOME.match(c), (rel, target, c)


def test_no_harness_fault_in_the_claimed_range():
    oldest, newest, bad = ct.supported(ROWS)
    assert not bad, f"releases with a harness fault or no result: {bad}"


def test_the_pin_is_the_tables_oldest_and_the_venv_runs_a_release_of_the_table_or_newer():
    """pyproject's hf extra bounds transformers below by the table's oldest release and not above (DESIGN §4:
    the libraries under test carry no upper pin; `make setup` installs the newest on the index). The venv runs
    a release of the table or a newer one — which a campaign names in one warning line — never an older one."""
    oldest, newest, _ = ct.supported(ROWS)
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for extra, deps in extras.items():
        for pin in (r for r in deps if re.match(r"transformers\b", r)):
            assert pin == f"transformers>={oldest}", (extra, pin)
    assert known.MATRIX_NEWEST["transformers"] == newest, \
        "fuzz/targets/known.py's MATRIX_NEWEST is stale: the table's newest transformers is " + newest
    transformers = pytest.importorskip("transformers")
    v = transformers.__version__
    assert v in ROWS or ct.version_key(v) > ct.version_key(newest), (
        f"this venv runs transformers {v}: neither a release of docs/compat.md nor newer than its newest ({newest})")
    assert bool(known.release_warnings({"transformers": v})) == (v not in ROWS)


def test_no_library_under_test_has_an_upper_pin():
    """Every extra: the libraries under test (transformers and the engines) are bounded below only."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    under_test = ("transformers", "onnxruntime", "mlx-lm", "ctranslate2", "llama-cpp-python", "keras-hub")
    for extra, deps in extras.items():
        for dep in deps:
            name = re.match(r"[A-Za-z0-9_.-]+", dep).group(0)
            if name in under_test:
                assert ">=" in dep and not re.search(r"<|==|~=", dep.split(";")[0]), (extra, dep)


def test_open_findings_reproduce_on_the_tables_newest_and_closed_ones_were_seen_fixed():
    """A finding applies from its first release on until the matrix sees it fixed: a finding id with an open
    row (``4.57+``) reproduces on the table's newest release, and one whose rows are all closed has a later
    release in the table where no target it applies to reproduced it (the "fixed in" bound is seen)."""
    releases = sorted(ROWS, key=ct.version_key)
    for fid in dict.fromkeys(f.id for f in findings.FINDINGS):
        rows = [f for f in findings.FINDINGS if f.id == fid]
        cols = {findings.target_name(k) for f in rows for k in f.kinds} & set(ct.columns())
        if not cols:  # no column of the table runs it (hf:mistral@flex_attention, hf-cb:*): their notes say what ran
            continue
        cited = lambda rel: any(f"[{fid}]" in ROWS[rel].get(c, "") for c in cols)  # noqa: E731
        if any(known.is_open(s) for f in rows for s in f.releases):
            assert cited(releases[-1]), f"{fid} is open but the table's newest ({releases[-1]}) does not name it"
        else:
            last = max((s.split("-")[-1] for f in rows for s in f.releases), key=ct.version_key)
            later = [r for r in releases if ct.version_key(r)[:2] > ct.version_key(last)[:2]]
            assert later and not cited(later[0]), (fid, last, later[:1])




def test_the_notes_and_the_readme_are_current():
    assert ct.main(["--check"]) == 0


def _result(**kw):
    base = {"name": "hf-static", "failures": [], "known_findings": {}, "versions": {"torch": "2.13.0"}}
    return dict(base, **kw)


def test_cells_classify_each_outcome():
    fail = {"kind": "mismatch", "error": "Mismatch: hf-static: after op #1 (push): x | y",
            "case": {"window": 3, "ops": [["chunk", 2], ["push"]]}}
    fault = dict(fail, kind="harness", error="HarnessFault: hf-static: harness fault: adapter error")
    known = {"hf-x": {"reproduced": 2, "not_reproduced": 1, "skipped": 0},
             "hf-y": {"reproduced": 0, "not_reproduced": 3, "skipped": 0}}
    assert ct.cell(_result(), "available", "log") == "clean"
    assert ct.cell(_result(known_findings=known), "available", "log") == "known: [hf-x](findings/hf-x.md)"
    assert ct.cell(_result(failures=[fail]), "available", "log").startswith("finding: W=3 `chunk:2 push`: Mismatch")
    assert "/" in ct.cell(_result(failures=[fail]), "available", "log")  # a | would break the table
    assert ct.cell(_result(failures=[fault]), "available", "log").startswith("harness fault: HarnessFault")
    assert ct.cell(_result(harness_faults=["adapter error"]), "available", "log") == "harness fault: adapter error"
    assert ct.cell(None, "transformers 4.45.2 has no gpt_oss causal LM", "log") == "n/a"
    incompatible = ("transformers 4.51.3: HybridCache(config, batch_size): TypeError (the adapter in impl/hf/ needs "
                    "to learn this release's API; run scripts/hf_matrix.sh --releases 4.51.3)")
    assert ct.cell(None, incompatible, "log").startswith("harness fault: transformers 4.51.3: HybridCache")
    assert ct.cell(None, None, "fuzz-4.45.2.log") == "no result: fuzz-4.45.2.log"
    for c in ("clean", "n/a", "known: [hf-x](findings/hf-x.md)", "harness fault: x"):
        assert OUTCOME.match(c)


def test_the_claim_names_faulty_releases():
    rows = {"4.45.2": {"hf-static": "clean"}, "4.51.3": {"hf-static": "harness fault: x"},
            "5.24.0": {"hf-static": "known: [hf-z](findings/hf-z.md)"}}
    block = ct.readme_block(rows)
    assert "transformers 4.45.2 to 5.24.0" in block and "cannot drive 4.51.3" in block
    assert "[hf-z](docs/findings/hf-z.md)" in block


def test_ci_runs_the_oldest_release_of_the_table():
    """CI's older-release run (.ci/run -> scripts/ci_hf_older.sh) is the table's oldest release."""
    oldest, _, _ = ct.supported(ROWS)
    script = (ROOT / "scripts" / "ci_hf_older.sh").read_text()
    assert re.search(r"\$\{HF_RELEASE:-([\d.]+)\}", script).group(1) == oldest
    assert "scripts/ci_hf_older.sh" in (ROOT / ".ci" / "run").read_text()
