"""``kvwindow prove``: check the Lean proofs and print the theorem inventory.

Two checkers, one inventory:

* ``kvwindow prove --check`` needs only npm: ``scripts/lean_check.py`` elaborates every module of
  ``lean/`` with Lean v4.28 compiled to WebAssembly (installed on first use under /tmp). It checks
  every proof and every golden (as ``decide``); that build refuses ``#print axioms``, so the axiom
  column says where the audit is checked instead (``lake build``: the lean GitHub workflow).
* ``kvwindow prove`` (no flag) runs ``lake build`` at the repository root (core Lean only, so nothing but the
toolchain in ``lean-toolchain`` is fetched), then reads the ``#print axioms``
lines of ``lean/KVWindow/Audit.lean`` from the build log (or, when the build
was cached and printed nothing, from ``lake env lean lean/KVWindow/Audit.lean``).

Exit status: 0 every theorem built and uses only the standard axioms; 1 the
build failed, a theorem is missing from the audit, or a theorem uses another
axiom (``sorryAx`` included); 2 ``lake`` is not installed (the message names
``--check``, which needs no elan); 3 (``--check``) the checker could not run.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parent.parent
AUDIT = Path("lean") / "KVWindow" / "Audit.lean"
ALLOWED_AXIOMS = frozenset({"propext", "Quot.sound", "Classical.choice"})

# Lean name -> the statement in words (the full table is lean/README.md).
THEOREMS: dict[str, str] = {
    "lastWindow_length": "the window holds min w n entries",
    "lastWindow_suffix": "the window is a suffix of the history",
    "step_lastWindow": "step w (lastWindow w xs) x = lastWindow w (xs ++ [x])",
    "step_preserves_valid": "one step keeps Valid",
    "run_correct": "the streamed cache = lastWindow w history",
    "run_length_le": "the cache never holds more than w entries",
    "pushChunk_correct": "a chunk of any length (also > w) gives the window of history ++ chunk",
    "run_length_lt_of_gt": "once n > w the cache is shorter than the history",
    "hf_convention_eq": "lastWindow (w-1) past ++ [current] = lastWindow w history (HF)",
    "positions_lastWindow": "after positions 0..n-1 the cache holds n - min w n .. n-1",
    "step_preserves_positionInvariant": "step keeps consecutive positions",
    "push_simulates_step": "one ring push = one list step on the contents",
    "push_preserves_wf": "ring push keeps the ring well formed",
    "ring_run_correct": "a stream through the ring = the list model",
    "slot_eq_pos_mod": "position p (still in the window) sits in slot p mod w",
    "slot_eq_pos_mod_entry": "the entry of position p sits in slot p mod w (any payload)",
    "filter_inWindow_eq_lastWindow": "masking the full history keeps exactly the window",
    "attention_eq": "masked fold over the history = fold over the cache, any fold",
    "chunk_attention_eq": "every query of a chunk sees exactly its own window",
    "sinkStep_correct": "the sink step keeps the StreamingLLM window",
    "sinkRun_correct": "a stream with sinks = sinkWindow",
    "rkv_slot_lt": "rkv_slot is a slot",
    "rkv_len_eq_min": "rkv_len n w = min n w",
    "rkv_oldest_add_len": "rkv_oldest + rkv_len = n",
    "rkv_logical_slot_lt": "rkv_logical_slot is a slot",
    "rkv_slot_pos_logical_slot": "slot_pos (logical_slot i) = oldest + i",
    "rkv_slot_pos_inverse": "slot_pos s is in the window and maps back to s",
    "rkv_slot_pos_slot": "slot_pos (slot p) = p in the window",
    "rkv_slot_valid_iff": "a slot is valid iff its position has been seen",
    "rkv_chunk_kept_eq": "a chunk writes its last min k w entries",
    "rkv_chunk_src_range": "each chunk write copies one of the last w entries",
    "rkv_chunk_dst_inj": "chunk writes go to distinct slots (race-free)",
    "rkv_in_window_iff": "rkv_in_window = inWindow",
    "rkv_split_range_partition": "split-K ranges partition [0, len)",
    "rkv_cache_row_next": "cache rows are row-major without gaps",
    "index_read_lastWindow": "the shipped ring reads back lastWindow w history",
    "index_push_simulates_step": "one shipped-ring push = one list step",
    "index_pushChunk_simulates": "one shipped-ring chunk = one list pushChunk",
    "index_run_correct": "a stream through the shipped ring = lastWindow (garbage never read)",
    "index_slot_eq_pos_mod": "slot rkv_slot p w holds the entry of position p",
    "index_slot_pos_correct": "rkv_slot_pos names the position a valid slot holds",
    "paged_read_window": "a paged pool: every live sequence reads lastWindow (W-1) of its history, after any ops",
    "paged_free_safe": "the freeing rule never frees a block holding a position a future query needs",
    "paged_independent": "an op on one sequence never changes what another reads",
    "paged_refcount": "a block is on the free list iff no table references it; refcounts count references",
    "paged_hit_valid": "a prefix hit of length L is usable iff the blocks of max(0, L-W+1) .. L-1 hold the prompt",
}

INSTALL_HELP = """\
kvwindow prove needs `lake`, which comes with a Lean toolchain.
Install elan (the Lean toolchain manager), then run this again:

    curl https://elan.lean-lang.org/elan-init.sh -sSf | sh -s -- -y --default-toolchain none
    source ~/.elan/env

The toolchain pinned in lean-toolchain (leanprover/lean4:v4.28.0) is fetched on the
first `lake build`; the proofs use core Lean only, so nothing else is downloaded.

Without elan: `kvwindow prove --check` checks every proof with Lean v4.28 compiled to
WebAssembly (needs npm; installs ~600 MB under /tmp on first use; a few minutes per check).
"""

_DEPENDS = re.compile(r"'(?:KVWindow\.)?([\w.']+)' depends on axioms: \[([^\]]*)\]")
_NONE = re.compile(r"'(?:KVWindow\.)?([\w.']+)' does not depend on any axioms")


def parse_axioms(log: str) -> dict[str, list[str]]:
    """``#print axioms`` output -> {theorem (without the KVWindow. prefix): [axiom, ...]}."""
    found: dict[str, list[str]] = {}
    for m in _DEPENDS.finditer(log):
        found[m.group(1)] = [a.strip() for a in m.group(2).replace("\n", " ").split(",") if a.strip()]
    for m in _NONE.finditer(log):
        found[m.group(1)] = []
    return found


def report(axioms: dict[str, list[str]], out=None) -> int:
    """Print the inventory; 0 when every theorem is present and uses only allowed axioms."""
    out = sys.stdout if out is None else out
    bad = 0
    width = max(len(n) for n in THEOREMS)
    print(f"{'theorem':<{width}}  axioms", file=out)
    for name, words in THEOREMS.items():
        if name not in axioms:
            print(f"{name:<{width}}  MISSING from the audit output   ({words})", file=out)
            bad += 1
            continue
        used = axioms[name]
        extra = [a for a in used if a not in ALLOWED_AXIOMS]
        shown = ", ".join(used) if used else "(none)"
        flag = f"   NOT ALLOWED: {', '.join(extra)}" if extra else ""
        print(f"{name:<{width}}  {shown}{flag}", file=out)
        bad += bool(extra)
    if bad:
        print(f"\n{bad} theorem(s) missing or using axioms beyond {sorted(ALLOWED_AXIOMS)}", file=out)
        return 1
    print(f"\n{len(THEOREMS)} theorems proved; axioms used only from {sorted(ALLOWED_AXIOMS)}", file=out)
    print(f"checked by lake build with the toolchain of lean-toolchain ({_toolchain()}): every proof, "
          "every golden #guard, the axiom audit", file=out)
    return 0


def _toolchain() -> str:
    try:
        return (ROOT / "lean-toolchain").read_text(encoding="utf-8").strip()
    except OSError:
        return "lean-toolchain not found"


def _run(cmd: list[str], root: Path, timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=root, capture_output=True, text=True, timeout=timeout)


def _lean_check_module(root: Path):
    """scripts/lean_check.py of the checkout (stdlib only, so CI runs it before any venv exists)."""
    import importlib.util

    path = root / "scripts" / "lean_check.py"
    if not path.exists():
        raise FileNotFoundError(f"{path} not found: --check needs a kvwindow checkout (--root)")
    spec = importlib.util.spec_from_file_location("lean_check", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["lean_check"] = mod
    spec.loader.exec_module(mod)
    return mod


_DECL = re.compile(r"^(?:@\[[^\]]*\]\s*)?(?:private |protected |noncomputable )*"
                   r"(theorem|lemma|def|abbrev|structure|inductive|instance|example|namespace|end|section)\b")


def theorem_sites(lean_dir: Path) -> dict[str, tuple[str, int, int]]:
    """Theorem name -> (file relative to the repo root, first line, last line of its declaration)."""
    sites: dict[str, tuple[str, int, int]] = {}
    for path in sorted(lean_dir.rglob("*.lean")):
        lines = path.read_text(encoding="utf-8").splitlines()
        starts = [i for i, line in enumerate(lines, start=1) if _DECL.match(line)]
        for k, i in enumerate(starts):
            m = re.match(r"^theorem\s+([\w.']+)", lines[i - 1])
            if m and m.group(1) in THEOREMS:
                end = starts[k + 1] - 1 if k + 1 < len(starts) else len(lines)
                sites[m.group(1)] = (str(path.relative_to(lean_dir.parent)), i, end)
    return sites


def check_inventory(result, lean_dir: Path, checker: str, out=None) -> int:
    """The inventory after a --check: where each theorem is, whether the checker accepted it.

    A theorem is accepted when it is declared and no error of the check lies in its declaration;
    the exit status is 1 on any error of the check, inside a theorem or not."""
    out = sys.stdout if out is None else out
    sites = theorem_sites(lean_dir)
    width = max(len(n) for n in THEOREMS)
    print(f"\n{'theorem':<{width}}  {'checked':<8}  where", file=out)
    bad = 0
    for name in THEOREMS:
        if name not in sites:
            print(f"{name:<{width}}  {'MISSING':<8}  not declared in {lean_dir.name}/", file=out)
            bad += 1
            continue
        path, first, last = sites[name]
        errs = [e for e in result.errors if e.path == path and first <= e.line <= last]
        print(f"{name:<{width}}  {'ERROR' if errs else 'ok':<8}  {path}:{first}", file=out)
        bad += bool(errs)
    print(f"\nchecked by {checker}: {len(THEOREMS) - bad} of {len(THEOREMS)} theorems elaborated without "
          f"error; {len(result.errors)} error(s) in lean/ in all.\n"
          "axioms: not checked by this build (it refuses #print axioms); `kvwindow prove` with lake, and "
          ".github/workflows/lean.yml on every push, audit them (only propext, Quot.sound, Classical.choice).",
          file=out)
    return 1 if (bad or result.errors) else 0


def _check(root: Path, timeout: float) -> int:
    try:
        lc = _lean_check_module(root)
    except FileNotFoundError as e:
        print(f"kvwindow prove --check: {e}", file=sys.stderr)
        return 2
    try:
        result = lc.check(root / "lean", timeout=timeout)
    except lc.UsageError as e:
        print(f"kvwindow prove --check: {e}", file=sys.stderr)
        return 2
    except lc.CheckError as e:
        print(f"kvwindow prove --check: {e}", file=sys.stderr)
        return 3
    return check_inventory(result, root / "lean", lc.CHECKER)


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="kvwindow prove", description="Check the Lean proofs and print the theorem inventory.")
    ap.add_argument("--root", type=Path, default=ROOT, help="repository root (holds lakefile.lean)")
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds allowed for each lake command (or the check)")
    ap.add_argument("--check", action="store_true",
                    help="check with Lean v4.28 compiled to WebAssembly (needs npm, not elan; scripts/lean_check.py)")
    ns = ap.parse_args(argv)
    if ns.check:
        return _check(ns.root.resolve(), ns.timeout)

    lake = shutil.which("lake")
    if lake is None:
        print(INSTALL_HELP, file=sys.stderr, end="")
        return 2
    root = ns.root.resolve()
    print(f"$ lake build   (in {root})", flush=True)
    try:
        build = _run([lake, "build"], root, ns.timeout)
    except subprocess.TimeoutExpired:
        print(f"lake build did not finish within {ns.timeout:.0f} s", file=sys.stderr)
        return 1
    log = build.stdout + build.stderr
    if build.returncode != 0:
        print(log[-8000:], file=sys.stderr)
        print(f"lake build failed (exit {build.returncode})", file=sys.stderr)
        return 1
    axioms = parse_axioms(log)
    if not set(THEOREMS) <= set(axioms):  # cached build: ask Lean for the audit directly
        try:
            audit = _run([lake, "env", "lean", str(AUDIT)], root, ns.timeout)
        except subprocess.TimeoutExpired:
            print(f"lake env lean {AUDIT} did not finish within {ns.timeout:.0f} s", file=sys.stderr)
            return 1
        axioms.update(parse_axioms(audit.stdout + audit.stderr))
        if audit.returncode != 0:
            print((audit.stdout + audit.stderr)[-4000:], file=sys.stderr)
    return report(axioms)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
