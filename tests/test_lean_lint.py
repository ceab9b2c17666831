"""Static checks on the Lean project (no Lean toolchain needed).

* no ``sorry``/``admit``/``native_decide`` and no ``axiom`` declarations in ``lean/``;
* every DESIGN §3 name is declared (``theorem``/``def``/``structure``);
* ``lakefile.lean`` names no dependency (core Lean only) and the toolchain is pinned;
* ``lean/KVWindow/Goldens.lean`` is in sync with ``tests/golden/spec_cases.json``;
* every audited theorem has a Python twin (``tests/test_theorem_twins.py`` or, for the paged pool,
  ``tests/test_paged_twins.py``) and a row in ``lean/README.md``;
* every function of ``csrc/ringkv_index.h`` has a Lean definition of the same name, a
  pyspec mirror citing it, and a comment in the header naming an audited theorem;
* generic list lemmas live in ``lean/KVWindow/Lemmas/`` (namespace ``KVList``), and
  core ``Nat`` lemma names appear nowhere else.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LEAN = ROOT / "lean"
LEAN_FILES = sorted(LEAN.rglob("*.lean"))
HEADER = ROOT / "csrc" / "ringkv_index.h"

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
    "paged_read_window", "paged_free_safe", "paged_independent", "paged_refcount", "paged_hit_valid",
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
                                  ("Spec", "Window", "Positions", "Ring", "Attention", "Sinks", "IndexRing",
                                   "PagedModel", "Paged", "Goldens", "Audit", "Lemmas/List", "Lemmas/Arith")]:
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
    names = {n for n in re.findall(r"`([A-Za-z][\w.]*)", section) if not n.endswith(".lean")}  # file names
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
    assert (ROOT / "lean-toolchain").read_text(encoding="utf-8").strip() == "leanprover/lean4:v4.28.0"  # the release scripts/lean_check.py checks with


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


# the twin files: the list theorems' and the paged pool's (tests/test_paged_twins.py)
TWIN_FILES = [ROOT / "tests" / "test_theorem_twins.py", ROOT / "tests" / "test_paged_twins.py"]


def test_every_audited_theorem_has_a_twin_and_a_readme_row():
    twins = "\n".join(p.read_text(encoding="utf-8") for p in TWIN_FILES)
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
    for p in (LEAN / "KVWindow").rglob("*.lean"):
        module = "KVWindow." + ".".join(p.relative_to(LEAN / "KVWindow").with_suffix("").parts)
        assert re.search(r"^import " + re.escape(module) + r"$", root, re.M), f"lean/KVWindow.lean lacks {module}"


def header_functions() -> list[tuple[str, str]]:
    """(name, the text between the previous function and it) for every function of ringkv_index.h."""
    text = HEADER.read_text(encoding="utf-8")
    out, prev = [], 0
    for m in re.finditer(r"^RKV_HD\s+[\w\s\*]*?\b(rkv_\w+)\s*\(", text, re.M):
        out.append((m.group(1), text[prev:m.start()]))
        prev = m.end()
    return out


def test_header_functions_are_found():
    names = [n for n, _ in header_functions()]
    assert len(names) == len(set(names)) >= 13, names


@pytest.mark.parametrize("name", [n for n, _ in header_functions()])
def test_header_function_has_a_lean_twin_and_a_pyspec_mirror(name):
    decl = re.compile(r"^\s*def\s+" + re.escape(name) + r"\s", re.M)
    assert decl.search(code()[LEAN / "KVWindow" / "IndexRing.lean"]), f"no `def {name}` in IndexRing.lean"
    from pyspec import index_ring

    fn = getattr(index_ring, name, None)
    assert fn is not None, f"pyspec/index_ring.py has no {name}"
    assert f"KVWindow.{name}" in (fn.__doc__ or ""), f"pyspec {name} does not cite Lean KVWindow.{name}"


@pytest.mark.parametrize("name, comment", header_functions())
def test_header_function_cites_an_audited_theorem(name, comment):
    cited = re.findall(r"KVWindow\.(\w+)", comment)
    assert cited, f"the comments above {name} in csrc/ringkv_index.h cite no Lean theorem (KVWindow.<name>)"
    audited = set(_audited())
    assert set(cited) <= audited, f"{name} cites {set(cited) - audited}, which Audit.lean does not print"


LEMMA_FILES = {LEAN / "KVWindow" / "Lemmas" / "List.lean", LEAN / "KVWindow" / "Lemmas" / "Arith.lean"}


def _declared(src: str) -> set[str]:
    return set(re.findall(r"^\s*(?:theorem|def)\s+([\w.']+)", src, re.M))


def test_generic_list_lemmas_live_outside_the_public_namespace():
    srcs = code()
    helpers = set().union(*(_declared(srcs[p]) for p in LEMMA_FILES))
    assert {"append_nil'", "drop_append_eq", "take_append_drop'", "nthOpt", "filter_append'"} <= helpers
    assert "namespace KVList" in srcs[LEAN / "KVWindow" / "Lemmas" / "List.lean"]
    assert "namespace KVArith" in srcs[LEAN / "KVWindow" / "Lemmas" / "Arith.lean"]
    for p, src in srcs.items():
        if p not in LEMMA_FILES:
            again = _declared(src) & helpers
            assert not again, f"{p.relative_to(ROOT)} redeclares helper lemmas {sorted(again)}"


def test_core_nat_lemma_names_only_in_the_lemma_files():
    """A renamed core `Nat` lemma can only break `Lemmas/`, where each has a fallback route."""
    for p, src in code().items():
        if p not in LEMMA_FILES:
            hits = re.findall(r"\bNat\.[a-z_']+", src)
            assert not hits, f"{p.relative_to(ROOT)} names core Nat lemmas {sorted(set(hits))}"


# --------------------------------------------------------------------------- where the proofs are checked

WORKFLOW = ROOT / ".github" / "workflows" / "lean.yml"


def _workflow_step_run(name_prefix: str) -> str:
    """The dedented `run: |` block of the workflow step whose name starts with `name_prefix`."""
    lines = WORKFLOW.read_text(encoding="utf-8").splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.strip().startswith(f"- name: {name_prefix}"))
    run = next(i for i in range(start, len(lines)) if lines[i].strip() == "run: |")
    indent = len(lines[run + 1]) - len(lines[run + 1].lstrip())
    body = []
    for ln in lines[run + 1:]:
        if ln.strip() and len(ln) - len(ln.lstrip()) < indent:
            break
        body.append(ln[indent:])
    return "\n".join(body) + "\n"


def test_workflow_builds_with_lean_action_on_every_push():
    text = WORKFLOW.read_text(encoding="utf-8")
    assert re.search(r"^on:\n  push:\n  pull_request:", text, re.M)
    assert "uses: leanprover/lean-action@v1" in text
    assert re.search(r"^\s+build: true$", text, re.M) and re.search(r"^\s+auto-config: false$", text, re.M)
    assert "lake env lean lean/KVWindow/Audit.lean" in text


def _bash(script: str, cwd: Path, env_extra: dict[str, str]) -> subprocess.CompletedProcess:
    env = {**os.environ, **env_extra}
    bash = shutil.which("bash") or "/bin/bash"
    return subprocess.run([bash, "--noprofile", "--norc", "-eo", "pipefail", "-c", script],
                          cwd=cwd, env=env, capture_output=True, text=True)


@pytest.mark.parametrize("plant, ok", [
    ("", True),
    ("theorem t : 1 = 1 := by sorry\n", False),
    ("axiom cheat : False\n", False),
    ("theorem t : 2 = 2 := by native_decide\n", False),
])
def test_workflow_forbidden_word_step(tmp_path, plant, ok):
    shutil.copytree(LEAN, tmp_path / "lean")
    if plant:
        (tmp_path / "lean" / "KVWindow" / "Planted.lean").write_text(plant, encoding="utf-8")
    proc = _bash(_workflow_step_run("no sorry"), tmp_path, {})
    assert (proc.returncode == 0) == ok, proc.stdout + proc.stderr


def _audit_log(axioms_of) -> str:
    lines = []
    for name in _audited():
        ax = axioms_of(name)
        if ax is None:
            continue
        if ax:
            lines.append(f"info: ././lean/KVWindow/Audit.lean:1:0: 'KVWindow.{name}' depends on axioms: "
                         f"[{', '.join(ax)}]")
        else:
            lines.append(f"info: ././lean/KVWindow/Audit.lean:1:0: 'KVWindow.{name}' does not depend on any axioms")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("axioms_of, ok", [
    (lambda n: ["propext", "Quot.sound"], True),
    (lambda n: [], True),
    (lambda n: ["propext", "Classical.choice"] if n != "run_correct" else ["propext", "sorryAx"], False),
    (lambda n: ["propext"] if n != "index_run_correct" else ["Lean.ofReduceBool"], False),
    (lambda n: None if n == "chunk_attention_eq" else ["propext"], False),
], ids=["standard", "none", "sorryAx", "native", "missing"])
def test_workflow_audit_step(tmp_path, axioms_of, ok):
    """The workflow's audit step, run against a fake `lake` printing a given audit log."""
    (tmp_path / "lean" / "KVWindow").mkdir(parents=True)
    shutil.copy(LEAN / "KVWindow" / "Audit.lean", tmp_path / "lean" / "KVWindow" / "Audit.lean")
    log = tmp_path / "fake.log"
    log.write_text(_audit_log(axioms_of), encoding="utf-8")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    lake = bindir / "lake"
    lake.write_text(f'#!/bin/sh\ncat "{log}"\n', encoding="utf-8")
    lake.chmod(0o755)
    proc = _bash(_workflow_step_run("axiom audit"), tmp_path,
                 {"PATH": str(bindir) + os.pathsep + os.environ.get("PATH", "")})
    assert (proc.returncode == 0) == ok, proc.stdout + proc.stderr


def test_ci_run_checks_the_proofs_before_the_tests_unconditionally():
    """CI gates on the wasm check (scripts/lean_check.sh), not only where lake happens to be installed."""
    lines = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    check = lines.index("bash scripts/lean_check.sh")
    assert check < lines.index("make test")
    assert not any(line.lstrip().startswith(("if", "||")) for line in lines[check - 1:check + 1])


def test_lean_check_sh_injects_where_it_says():
    """The self-test of scripts/lean_check.sh puts its false theorem inside Window.lean's namespace."""
    sh = (ROOT / "scripts" / "lean_check.sh").read_text(encoding="utf-8")
    assert 'target="$inject_dir/lean/KVWindow/Window.lean"' in sh and "grep -n '^end KVWindow'" in sh
    assert (LEAN / "KVWindow" / "Window.lean").read_text(encoding="utf-8").splitlines().count("end KVWindow") == 1
