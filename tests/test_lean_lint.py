"""Static checks on the Lean project (no Lean toolchain needed).

* no ``sorry``/``admit``/``native_decide`` and no ``axiom`` declarations in ``lean/``;
* every DESIGN §3 name is declared (``theorem``/``def``/``structure``);
* ``lakefile.lean`` names no dependency (core Lean only) and the toolchain is pinned;
* ``lean/KVWindow/Goldens.lean`` is in sync with ``tests/golden/spec_cases.json``;
* every audited theorem has a Python twin and a row in ``lean/README.md``.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LEAN = ROOT / "lean"
LEAN_FILES = sorted(LEAN.rglob("*.lean"))

# DESIGN §3 (names are part of the contract); `Ring.*` are declared as `def Ring.x`.
DESIGN_NAMES = [
    "lastWindow", "step", "run", "Valid", "pushChunk",
    "lastWindow_length", "lastWindow_suffix", "step_lastWindow", "step_preserves_valid",
    "run_correct", "run_length_le", "pushChunk_correct", "run_length_lt_of_gt",
    "PositionInvariant", "positions_lastWindow",
    "Ring", "Ring.push", "Ring.toList", "Ring.WF",
    "push_simulates_step", "push_preserves_wf", "ring_run_correct", "slot_eq_pos_mod",
    "inWindow", "filter_inWindow_eq_lastWindow", "attention_eq",
    "sinkWindow", "sinkStep", "sinkStep_correct",
]


def strip_comments(src: str) -> str:
    """Drop ``--`` line comments and (nested) ``/- ... -/`` block comments, docstrings included."""
    out, i, depth = [], 0, 0
    while i < len(src):
        if src.startswith("/-", i):
            depth += 1
            i += 2
        elif depth and src.startswith("-/", i):
            depth -= 1
            i += 2
        elif depth:
            i += 1
        elif src.startswith("--", i):
            j = src.find("\n", i)
            i = len(src) if j < 0 else j
        else:
            out.append(src[i])
            i += 1
    return "".join(out)


def code() -> dict[Path, str]:
    return {p: strip_comments(p.read_text(encoding="utf-8")) for p in LEAN_FILES}


def test_lean_files_exist():
    names = {p.relative_to(LEAN).as_posix() for p in LEAN_FILES}
    for f in ["KVWindow.lean"] + [f"KVWindow/{m}.lean" for m in
                                  ("Spec", "Window", "Positions", "Ring", "Attention", "Sinks", "Goldens", "Audit")]:
        assert f in names, f"missing lean/{f}"


@pytest.mark.parametrize("pattern, what", [
    (r"\bsorry\b", "sorry"),
    (r"\badmit\b", "admit"),
    (r"\bnative_decide\b", "native_decide"),
    (r"^\s*(?:@\[[^\]]*\]\s*)?(?:private\s+|protected\s+|noncomputable\s+)*axiom\s", "an axiom declaration"),
    (r"\bimplemented_by\b|\bextern\b", "an implemented_by/extern escape"),
])
def test_no_forbidden_words(pattern, what):
    bad = [f"{p.relative_to(ROOT)}:{src[:m.start()].count(chr(10)) + 1}"
           for p, src in code().items() for m in re.finditer(pattern, src, re.M)]
    assert not bad, f"{what} in {bad}"


def test_strip_comments_keeps_code_and_drops_comments():
    src = "theorem a : True := trivial -- sorry\n/- sorry /- nested -/ admit -/ def b := 1\n"
    assert "sorry" not in strip_comments(src) and "admit" not in strip_comments(src)
    assert "theorem a" in strip_comments(src) and "def b" in strip_comments(src)


@pytest.mark.parametrize("name", DESIGN_NAMES)
def test_design_name_is_declared(name):
    decl = re.compile(r"^\s*(?:@\[[^\]]*\]\s*)?(?:theorem|def|structure|abbrev|instance)\s+"
                      + re.escape(name) + r"(?![\w.'])", re.M)
    hits = [p.name for p, src in code().items() if decl.search(src)]
    assert hits, f"{name} (DESIGN §3) is not declared in lean/"


def test_design_doc_names_are_all_listed():
    """Cross-check the list above against DESIGN §3 when the shared contract is beside the checkout."""
    design = ROOT.parent / "shared" / "DESIGN.md"
    if not design.exists():
        pytest.skip("shared/DESIGN.md not beside this checkout")
    section = design.read_text(encoding="utf-8").split("## 3.", 1)[1].split("## 4.", 1)[0]
    names = set(re.findall(r"`([A-Za-z][\w.]*)", section))
    theorem_like = {n for n in names if "_" in n or n[0].isupper()} - {"KVWindow", "native_decide"}
    assert theorem_like <= set(DESIGN_NAMES), theorem_like - set(DESIGN_NAMES)


def test_lakefile_has_no_dependencies_and_builds_lean_dir():
    lakefile = (ROOT / "lakefile.lean").read_text(encoding="utf-8")
    assert not re.search(r"^\s*require\b", strip_comments(lakefile), re.M), "lakefile must not `require` anything"
    assert re.search(r"^\s*package\s+«?kvwindow»?", lakefile, re.M)
    assert re.search(r"lean_lib\s+«?KVWindow»?", lakefile)
    assert re.search(r'srcDir\s*:=\s*"lean"', lakefile)
    assert not (ROOT / "lake-manifest.json").exists() or '"packages": []' in (
        ROOT / "lake-manifest.json").read_text(encoding="utf-8").replace("\n", "").replace(" ", "").replace(
        '"packages":[]', '"packages": []')


def test_toolchain_is_pinned():
    assert (ROOT / "lean-toolchain").read_text(encoding="utf-8").strip() == "leanprover/lean4:v4.35.0"


def test_goldens_in_sync_with_json():
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_goldens.py"), "--check"],
                       cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_goldens_check_detects_a_stale_file(tmp_path):
    stale = tmp_path / "Goldens.lean"
    stale.write_text((LEAN / "KVWindow" / "Goldens.lean").read_text(encoding="utf-8") + "\n-- edited\n")
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_goldens.py"), "--check", "--out", str(stale)],
                       cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 1


def _audited() -> list[str]:
    audit = (LEAN / "KVWindow" / "Audit.lean").read_text(encoding="utf-8")
    return [line.split("KVWindow.", 1)[1].strip() for line in audit.splitlines() if line.startswith("#print axioms")]


def test_every_audited_theorem_has_a_twin_and_a_readme_row():
    twins = (ROOT / "tests" / "test_theorem_twins.py").read_text(encoding="utf-8")
    readme = (LEAN / "README.md").read_text(encoding="utf-8")
    for name in _audited():
        assert f"def test_{name}(" in twins, f"no Python twin test_{name}"
        assert re.search(r"^\|\s*`" + re.escape(name) + r"`", readme, re.M), f"no lean/README.md row for {name}"


def test_every_design_theorem_is_audited():
    audited = set(_audited())
    theorems = [n for n in DESIGN_NAMES if "_" in n]
    assert set(theorems) <= audited, set(theorems) - audited


def test_root_module_imports_every_file():
    root = (LEAN / "KVWindow.lean").read_text(encoding="utf-8")
    for p in (LEAN / "KVWindow").glob("*.lean"):
        assert f"import KVWindow.{p.stem}" in root
