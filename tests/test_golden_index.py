"""The golden index rows (the ``rkv_*`` cases of ``tests/golden/spec_cases.json``) on every layer.

Lean checks them with ``#guard`` (``lean/KVWindow/Goldens.lean``), pyspec with
``tests/test_pyspec.py``; here they are evaluated through the CUDA kernels' index math
compiled for the CPU (``impl._cudaindex``, built from ``csrc/ringkv_index.h``) and
through the C test driver (``csrc/test_ringkv.c``, which holds the same rows), and
each check is shown to fail on a wrong row.
"""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pyspec.golden import INDEX_OPS, OPS, PAIR_OPS, Case, index_cases, load_cases

ROOT = Path(__file__).resolve().parent.parent
CSRC = ROOT / "csrc"
GOLDEN = ROOT / "tests" / "golden" / "spec_cases.json"


def rows() -> list[Case]:
    return index_cases(load_cases(GOLDEN))


def header_functions() -> set[str]:
    text = (CSRC / "ringkv_index.h").read_text(encoding="utf-8")
    return set(re.findall(r"^RKV_HD\s+[\w\s\*]*?\b(rkv_\w+)\s*\(", text, re.M))


def test_every_header_function_has_golden_rows():
    funcs = header_functions()
    assert len(funcs) >= 13, funcs
    assert funcs == set(INDEX_OPS), f"header vs golden ops: {funcs ^ set(INDEX_OPS)}"
    covered = {c.op for c in rows()}
    assert funcs <= covered, f"no golden row for {sorted(funcs - covered)}"


# --------------------------------------------------------------------------- impl._cudaindex


def cuda_index_value(lib, ffi, case: Case):
    """What the header, compiled for the CPU, returns for a row (pairs as ``[lo, hi]``, predicates as bool)."""
    args = [case.args[a] for a in OPS[case.op][1]]
    if case.op in PAIR_OPS:
        lo, hi = ffi.new("int64_t *"), ffi.new("int64_t *")
        getattr(lib, case.op)(*args, lo, hi)
        return [lo[0], hi[0]]
    got = getattr(lib, case.op)(*args)
    return bool(got) if isinstance(case.expect, bool) else got


def mismatches(lib, ffi, cases: list[Case]) -> list[str]:
    return [f"#{c.index} {c.name}: {c.op}{tuple(c.args.values())} = {cuda_index_value(lib, ffi, c)!r}, "
            f"want {c.expect!r}" for c in cases if cuda_index_value(lib, ffi, c) != c.expect]


@pytest.fixture(scope="module")
def cuda_index():
    mod = pytest.importorskip("impl._cudaindex", reason="impl._cudaindex not built (pip install -e .)")
    return mod.lib, mod.ffi


def test_cuda_index_math_matches_every_golden_row(cuda_index):
    lib, ffi = cuda_index
    assert len(rows()) >= 13
    assert mismatches(lib, ffi, rows()) == []


def test_cuda_index_check_catches_a_wrong_row(cuda_index):
    lib, ffi = cuda_index
    wrong = []
    for c in rows():
        if c.op in PAIR_OPS:
            expect = [c.expect[0], c.expect[1] + 1]
        elif isinstance(c.expect, bool):
            expect = not c.expect
        else:
            expect = c.expect + 1
        wrong.append(dataclasses.replace(c, expect=expect))
    assert len(mismatches(lib, ffi, wrong)) == len(wrong)


# --------------------------------------------------------------------------- csrc/test_ringkv.c


def test_c_driver_holds_the_current_rows():
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_goldens.py"), "--check"],
                       cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def _driver(built: Path, source: Path, exe: Path) -> subprocess.CompletedProcess:
    subprocess.run(["cc", "-O1", "-std=c11", f"-I{CSRC}", str(source), f"-L{built}", "-lringkv",
                    f"-Wl,-rpath,{built}", "-o", str(exe)], check=True)
    return subprocess.run([str(exe), "1", "1"], capture_output=True, text=True)


def test_c_driver_checks_the_golden_rows(built, tmp_path):
    """The driver passes on the table, and fails naming the case when one row is wrong."""
    ok = _driver(built, CSRC / "test_ringkv.c", tmp_path / "ok")
    assert ok.returncode == 0, ok.stdout + ok.stderr

    case = next(c for c in rows() if c.op == "rkv_slot_pos")
    src = (CSRC / "test_ringkv.c").read_text(encoding="utf-8")
    line = next(ln for ln in src.splitlines() if ln.strip().startswith(f'{{{case.index}, "rkv_slot_pos"'))
    bad = line.replace(f"{{{case.expect}, 0}}", f"{{{case.expect + 1}, 0}}")
    assert bad != line
    wrong = tmp_path / "test_ringkv.c"
    wrong.write_text(src.replace(line, bad), encoding="utf-8")
    proc = _driver(built, wrong, tmp_path / "wrong")
    assert proc.returncode == 1
    assert f"golden case #{case.index} rkv_slot_pos" in proc.stderr, proc.stderr
