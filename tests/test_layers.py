"""DESIGN §2: data flows one way — spec → oracle → harness ← implementations.

Every ``.py`` under ``pyspec/``, ``impl/`` and ``fuzz/`` is parsed with
:mod:`ast` and each import it makes — at module level or lazily inside a
function, ``import x``, ``from x import y``, relative imports, and
``importlib.import_module("x")`` / ``__import__("x")`` with a constant name —
is held to its layer's rule:

* ``pyspec/`` (the oracle): the standard library, numpy and itself only;
* ``impl/`` (implementations under test): nothing from ``fuzz`` or ``pyspec``;
* ``fuzz/`` (the harness): anything but the test suite.

No layer imports ``tests``. And no module reaches itself through its imports:
the import graph of all three layers — lazy imports, relative imports,
``importlib`` names and ``"module:attr"`` strings (the registry's and the
bench's tables) included — has no cycle. The checkers are tested on synthetic
sources too, so that they are known to fail on a violation.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("pyspec", "impl", "fuzz")
STDLIB = frozenset(sys.stdlib_module_names)


def _allowed(layer: str, module: str) -> str | None:
    """``None`` if ``layer`` may import ``module`` (a dotted absolute name), else why not."""
    top = module.split(".")[0]
    if top == "tests":
        return "no layer imports the test suite"
    if layer == "pyspec":
        if top == "pyspec" or top in STDLIB or top == "numpy":
            return None
        return "pyspec/ (the oracle) imports only the standard library, numpy and itself"
    if layer == "impl":
        if top in ("fuzz", "pyspec"):
            return "impl/ (implementations under test) imports nothing from fuzz/ or pyspec/"
        return None
    return None


def _dynamic_name(node: ast.Call) -> str | None:
    """The constant module name of ``importlib.import_module("x")`` / ``import_module("x")`` /
    ``__import__("x")``, else ``None``."""
    f = node.func
    name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
    if name not in ("import_module", "__import__") or not node.args:
        return None
    arg = node.args[0]
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and not arg.value.startswith("."):
        return arg.value
    return None


def imports(source: str, module: str) -> list[tuple[int, str]]:
    """``(line, absolute module name)`` of every import in ``source``, the module named ``module``
    (dotted, e.g. ``impl.hf.models``; a package's ``__init__`` is named by the package)."""
    tree = ast.parse(source)
    parts = module.split(".")
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend((node.lineno, a.name) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                names = [node.module or ""]
            else:
                # the package of ``module`` is parts[:-1] for a plain module; callers name a package's
                # __init__ by its package plus "__init__" so that this stays uniform
                keep = len(parts) - node.level
                base = parts[:keep] if keep > 0 else []
                if not base:
                    names = ["<relative import above the top-level package>"]
                elif node.module:
                    names = [".".join(base + [node.module])]
                else:  # from . import a, b: each may be a submodule
                    names = [".".join(base + [a.name]) for a in node.names]
            out.extend((node.lineno, n) for n in names)
        elif isinstance(node, ast.Call):
            name = _dynamic_name(node)
            if name is not None:
                out.append((node.lineno, name))
    return out


def violations(layer: str, source: str, module: str) -> list[str]:
    """Every import in ``source`` (module ``module`` of ``layer``) that breaks the layer rule."""
    found = []
    for line, name in imports(source, module):
        if name.startswith("<"):
            found.append(f"{module}:{line}: {name}")
            continue
        why = _allowed(layer, name)
        if why is not None:
            found.append(f"{module}:{line}: imports {name} — {why}")
    return found


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    return ".".join(rel.parts)  # a package's __init__ keeps its "__init__" part (see imports())


def _sources(layer: str) -> list[Path]:
    return sorted(p for p in (ROOT / layer).rglob("*.py") if "__pycache__" not in p.parts)


@pytest.mark.parametrize("layer", LAYERS)
def test_layer_imports_follow_design(layer):
    files = _sources(layer)
    assert files, f"no sources under {layer}/"
    bad = [v for p in files for v in violations(layer, p.read_text(), _module_name(p))]
    assert not bad, "import rule of DESIGN §2 broken:\n" + "\n".join(bad)


# ---------------------------------------------------------------------------
# the checker itself fails on violations


@pytest.mark.parametrize("layer, module, source", [
    ("impl", "impl.hf.models", "from fuzz.targets import Target\n"),
    ("impl", "impl.hf.models", "import pyspec\n"),
    ("impl", "impl.hf.models", "import pyspec.spec as s\n"),
    ("impl", "impl.mutants.catalogue", "def f():\n    if True:\n        from fuzz.targets.ring import make_c_library\n"),
    ("impl", "impl.mutants.catalogue", "class C:\n    def m(self):\n        import fuzz.ops\n"),
    ("impl", "impl.mutants.catalogue", "import importlib\nm = importlib.import_module('fuzz.targets.decoder')\n"),
    ("impl", "impl.mutants.catalogue", "m = __import__('pyspec')\n"),
    ("impl", "impl.ring", "from ... import fuzz\n"),
    ("pyspec", "pyspec.ring", "import torch\n"),
    ("pyspec", "pyspec.ring", "from impl.ring import CRing\n"),
    ("pyspec", "pyspec.golden", "def f():\n    from fuzz.ops import Push\n"),
    ("pyspec", "pyspec.bulk", "import hypothesis.strategies as st\n"),
    ("fuzz", "fuzz.cli", "from tests.conftest import settings\n"),
])
def test_checker_reports_violation(layer, module, source):
    assert violations(layer, source, module)


@pytest.mark.parametrize("layer, module, source", [
    ("pyspec", "pyspec.ring", "from __future__ import annotations\nimport dataclasses\nimport numpy as np\n"
                              "from pyspec.spec import last_window\nfrom . import spec\nfrom .spec import step\n"),
    ("impl", "impl.hf.models", "import torch\nfrom impl.hf import compat\nfrom . import reference\n"
                               "def f():\n    from transformers import MistralConfig\n"),
    ("impl", "impl.mutants.catalogue", "import importlib\nimportlib.import_module('impl.mutants.decoder_mutants')\n"),
    ("fuzz", "fuzz.targets.hf.conventions", "import pyspec\nfrom impl.hf import conventions\nfrom fuzz.ops import Push\n"),
])
def test_checker_accepts_allowed_imports(layer, module, source):
    assert violations(layer, source, module) == []


def test_relative_imports_resolve_against_the_package():
    assert imports("from . import spec\n", "pyspec.ring") == [(1, "pyspec.spec")]
    assert imports("from .. import conventions\n", "impl.hf.models") == [(1, "impl.conventions")]
    assert imports("from .ops import Push\n", "fuzz.__init__") == [(1, "fuzz.ops")]


# ---------------------------------------------------------------------------
# no import circles, lazy and string-named imports included

#: ``"module:attr"`` strings (the registry's BUILTIN and FAMILIES tables, the bench's helper tables):
#: an import made at run time by name, so an edge of the import graph like any other.
MODULE_STRING = re.compile(r"^((?:pyspec|impl|fuzz)(?:\.\w+)*):\w+$")


def _package(module: str, is_package: bool) -> list[str]:
    parts = module.split(".")
    return parts if is_package else parts[:-1]


def dependencies(source: str, module: str, known: set[str], is_package: bool = False) -> set[str]:
    """The project modules ``module`` imports: at module level, inside functions, relatively, through
    ``importlib.import_module`` / ``__import__`` with a constant name, and by ``"module:attr"`` strings."""
    out: set[str] = set()

    def add(name: str) -> None:
        while name and name not in known:  # ``from pkg import func`` depends on pkg
            name = name.rpartition(".")[0]
        if name and name != module:
            out.add(name)

    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for a in node.names:
                add(a.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                pkg = _package(module, is_package)
                base = ".".join(pkg[:len(pkg) - node.level + 1] + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            for a in node.names:
                add(f"{base}.{a.name}" if f"{base}.{a.name}" in known else base)
        elif isinstance(node, ast.Call):
            name = _dynamic_name(node)
            if name is not None:
                add(name)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            m = MODULE_STRING.match(node.value)
            if m:
                add(m.group(1))
    return out


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected component of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _project_modules() -> dict[str, tuple[Path, bool]]:
    mods = {}
    for layer in LAYERS:
        for p in _sources(layer):
            rel = p.relative_to(ROOT).with_suffix("")
            is_pkg = rel.name == "__init__"
            mods[".".join(rel.parts[:-1] if is_pkg else rel.parts)] = (p, is_pkg)
    return mods


def import_graph() -> dict[str, set[str]]:
    mods = _project_modules()
    known = set(mods)
    return {m: dependencies(p.read_text(), m, known, is_pkg) for m, (p, is_pkg) in mods.items()}


def test_no_import_cycles():
    graph = import_graph()
    assert len(graph) > 50 and "fuzz.targets.pyring" in graph["fuzz.targets.registry"]  # the strings count
    found = cycles(graph)
    assert not found, "import circles (each must become a one-way dependency):\n" + "\n".join(
        " <-> ".join(c) for c in found)


def test_cycle_checker_sees_lazy_and_string_named_imports():
    known = {"fuzz.a", "fuzz.b", "fuzz.c", "fuzz.pkg", "fuzz.pkg.d"}
    lazy = {"fuzz.a": dependencies("def f():\n    from fuzz.b import g\n", "fuzz.a", known),
            "fuzz.b": dependencies("from fuzz.a import h\n", "fuzz.b", known)}
    assert cycles(lazy) == [["fuzz.a", "fuzz.b"]]
    by_name = {"fuzz.a": dependencies('TABLE = {"x": ("fuzz.c:make", True)}\n', "fuzz.a", known),
               "fuzz.c": dependencies("import importlib\nimportlib.import_module('fuzz.a')\n", "fuzz.c", known)}
    assert cycles(by_name) == [["fuzz.a", "fuzz.c"]]
    relative = {"fuzz.pkg": dependencies("from . import d\n", "fuzz.pkg", known, is_package=True),
                "fuzz.pkg.d": dependencies("from .. import pkg\n", "fuzz.pkg.d", known)}
    assert cycles(relative) == [["fuzz.pkg", "fuzz.pkg.d"]]
    assert cycles({"fuzz.a": {"fuzz.b"}, "fuzz.b": {"fuzz.c"}, "fuzz.c": set()}) == []
