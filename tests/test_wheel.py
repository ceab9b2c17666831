"""The installed package is the whole package: pyproject lists every package, and a wheel built from
this tree, installed into a fresh venv, imports every module of pyspec/, impl/ and fuzz/ and finds
what it needs at run time (the C sources for c: libraries and mutants, the regression seeds).

The fresh venv reaches the dev venv's dependencies (torch, transformers, ...) through a ``.pth``
path line, so nothing is downloaded or reinstalled; a path line does not run the dev venv's own
``.pth`` files, so the editable install of kvwindow there cannot shadow the wheel — and every
module's ``__file__`` is checked to come from the fresh venv.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("pyspec", "impl", "fuzz")


def _packages_on_disk() -> set[str]:
    return {".".join(p.parent.relative_to(ROOT).parts) for layer in LAYERS for p in (ROOT / layer).rglob("__init__.py")
            if "__pycache__" not in p.parts}


def test_pyproject_lists_every_package():
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(cfg["packages"])
    assert listed - set(cfg.get("package-dir", {})) == _packages_on_disk()
    assert cfg["package-dir"] == {"impl.csrc": "csrc"}  # the C sources, installed inside impl/


CHECK = r"""
import importlib, json, sys, tempfile
from pathlib import Path

site = Path(sys.argv[1]).resolve()
modules = json.loads(sys.argv[2])
failed, outside = {}, []
for name in modules:
    try:
        mod = importlib.import_module(name)
    except Exception as e:
        failed[name] = f"{type(e).__name__}: {e}"
        continue
    if not Path(mod.__file__).resolve().is_relative_to(site):
        outside.append(f"{name}: {mod.__file__}")

# What an installed kvwindow needs at run time, found inside the wheel.
from impl import _ring_build
from fuzz import seeds
from fuzz.ops import Case
from fuzz.targets import registry

assert _ring_build.CSRC.resolve().is_relative_to(site), _ring_build.CSRC
lib = _ring_build.compile_ring_library(Path(tempfile.mkdtemp()) / "libcopy.so")
registry.resolve(f"c:{lib}").run(Case.parse(3, "push chunk:5 reset:2 chunk:3"))  # ABI mode reads ringkv.h
registry.resolve("mutant:c-len-W+1")  # a C mutant compiles from the installed ringkv.c
from impl import _paged_build, paged
assert _paged_build.CSRC.resolve().is_relative_to(site), _paged_build.CSRC
pool = paged.PagedC(backend=paged.load_paged_library(_paged_build.compile_paged_library(Path(tempfile.mkdtemp()) / "libp.so")))
pool.configure(3, 2, 4, 1)  # ABI mode reads the installed pagedkv.h; the copy compiles from the installed pagedkv.c
pool.add(0)
pool.append(0, 0, [1.0], [2.0])
assert pool.table(0) == [0]
import impl._pagedkv, impl._pagedindex  # the API modules, built into the wheel
assert Path(impl._pagedkv.__file__).resolve().is_relative_to(site), impl._pagedkv.__file__
api = paged.PagedC()
api.configure(2, 1, 1, 1)
assert api.free_blocks() == 1 and impl._pagedindex.lib.pkv_max_blocks(5, 2) == 3
stored = seeds.load_all()
assert seeds.SEED_DIR.resolve().is_relative_to(site) and len(stored) >= 10, (seeds.SEED_DIR, len(stored))
print(json.dumps({"imported": len(modules) - len(failed), "failed": failed, "outside": outside}))
"""


def _dev_site_packages() -> str:
    return sysconfig.get_paths()["purelib"]


def test_wheel_installs_and_every_module_imports_from_it(tmp_path, monkeypatch):
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler: the wheel's C extensions cannot be built")
    if shutil.which("git") is None:
        pytest.skip("git is not installed: cannot tell the tree's files from build output")
    # Build from a copy of the tree's files: a build/ left in the checkout could put stale modules in the wheel.
    src = tmp_path / "src"
    files = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"], cwd=ROOT,
                           capture_output=True, text=True, check=True).stdout.split("\0")
    for rel in filter(None, files):
        if (ROOT / rel).is_file():
            (src / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, src / rel)
    dist = tmp_path / "dist"
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                            "-w", str(dist), str(src)], capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stdout + build.stderr[-4000:]
    (wheel,) = dist.glob("kvwindow-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    for needed in ("impl/csrc/ringkv.h", "impl/csrc/ringkv.c", "impl/csrc/ringkv_index.h",
                   "impl/csrc/ringkv_cuda.cu", "impl/csrc/pagedkv.h", "impl/csrc/pagedkv.c",
                   "impl/csrc/pagedkv_index.h", "impl/csrc/pagedkv_cuda.cu", "impl/csrc/pagedkv_cuda.h",
                   "fuzz/seeds/44f218d82e06.json"):
        assert needed in names, f"{needed} is not in the wheel"
    modules = sorted(n[:-3].replace("/", ".").removesuffix(".__init__") for n in names
                     if n.endswith(".py") and n.split("/")[0] in LAYERS)
    assert {m for m in modules if m.count(".") == 0} == set(LAYERS) and len(modules) > 50

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    py = venv / "bin" / "python"
    site = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    (site / "kvwindow-dev-deps.pth").write_text(_dev_site_packages() + "\n")
    install = subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "--no-deps", "-q",
                              str(wheel)], capture_output=True, text=True, timeout=300)
    assert install.returncode == 0, install.stdout + install.stderr[-4000:]

    monkeypatch.chdir(tmp_path)  # nothing of this tree on sys.path: the checkout must not shadow the wheel
    run = subprocess.run([str(py), "-c", CHECK, str(site), json.dumps(modules)], capture_output=True, text=True,
                         timeout=600, env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert run.returncode == 0, run.stdout + run.stderr[-4000:]
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert result["failed"] == {}, result["failed"]
    assert result["outside"] == [], f"modules imported from outside the wheel: {result['outside']}"
    assert result["imported"] == len(modules)
    console = venv / "bin" / "kvwindow"
    assert console.exists(), "the kvwindow console script was not installed"
