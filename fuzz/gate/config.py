"""What a gate run is asked: the subjects, the intervention, the claim, the budget and where the report
goes — from the command line and ``[tool.kvwindow.gate]`` of ``./pyproject.toml`` (the command line wins).

Every bad value is a :class:`UsageError` naming the key and where it came from (exit 2), checked
before anything runs. Seed 000's kinds of intervention carry different claims: ``layout``, ``sharing``,
``scheduling`` and ``proposal`` (proposal-and-verify) intend to leave the model's conditional
distribution unchanged; ``eviction`` and ``quantisation`` approximate it, so an ``exact`` claim for
them is a contradiction (a usage error, not a failed gate).
"""

from __future__ import annotations

import argparse
import math
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: kind -> (exact or approximate, what it changes)
KINDS: dict[str, tuple[str, str]] = {
    "layout": ("exact", "stores the same K/V in another layout (a ring, a C buffer, blocks, another kernel)"),
    "sharing": ("exact", "shares identical prefix state across requests"),
    "scheduling": ("exact", "changes when and in which chunks tokens are processed"),
    "proposal": ("exact", "proposes tokens with a cheap model and verifies them with the target"),
    "eviction": ("approximate", "drops cached entries the model would attend to"),
    "quantisation": ("approximate", "stores K/V at reduced precision"),
}
LEVELS = ("exact", "logits:TOL", "greedy", "task")
KEYS = ("baseline", "candidate", "intervention", "claim", "quick", "report", "seed")
DEFAULT_REPORT = "gate-report"


class UsageError(ValueError):
    """A bad gate option; the message names the key and where it came from."""


@dataclass(frozen=True)
class Claim:
    """The declared equivalence: ``exact`` (bit-identical logits), ``logits`` with ``tol`` (max absolute
    logit difference), ``greedy`` (identical greedy tokens), ``task`` (bounded task-level degradation,
    which only the user's own evaluation can check)."""

    level: str
    tol: float | None = None

    @property
    def text(self) -> str:
        return f"logits:{self.tol:g}" if self.level == "logits" else self.level

    @property
    def checked(self) -> bool:
        return self.level != "task"


def parse_claim(value: Any, where: str) -> Claim:
    if not isinstance(value, str):
        raise UsageError(f"{where}: claim must be a string ({', '.join(LEVELS)}), got {value!r}")
    if value in ("exact", "greedy", "task"):
        return Claim(value)
    if value.startswith("logits:"):
        raw = value[len("logits:"):]
        try:
            tol = float(raw)
        except ValueError:
            raise UsageError(f"{where}: claim {value!r}: the tolerance {raw!r} is not a number "
                             "(e.g. logits:1e-4)") from None
        if not math.isfinite(tol) or tol <= 0:
            raise UsageError(f"{where}: claim {value!r}: the tolerance must be a finite number > 0")
        return Claim("logits", tol)
    raise UsageError(f"{where}: unknown claim {value!r}; levels: {', '.join(LEVELS)}")


@dataclass(frozen=True)
class Budget:
    """How much each step runs: ``quick`` (under a minute on 2 cores for the decoder) or ``full``."""

    name: str
    #: more prompt lengths and chunk schedules in step 4 (2, 2W, 3W+2), more prompts in step 2
    extra_lengths: bool
    #: decode steps after each prompt, beyond W + 2 (step 4) and 2W + 2 (step 2)
    extra_decode: int
    #: stream seeds of step 4 (each a different token stream)
    seeds: int
    #: step 6: repeats per side (interleaved), decode steps timed, prompt length in W
    perf_repeats: int
    perf_decode: int
    perf_prompt_w: int


BUDGETS = {
    # the test suite's: every cell and control of quick, performance barely sampled (seconds, not a measurement)
    "smoke": Budget("smoke", extra_lengths=False, extra_decode=0, seeds=1, perf_repeats=1, perf_decode=4,
                    perf_prompt_w=1),
    "quick": Budget("quick", extra_lengths=False, extra_decode=0, seeds=1, perf_repeats=3, perf_decode=16,
                    perf_prompt_w=2),
    "full": Budget("full", extra_lengths=True, extra_decode=8, seeds=2, perf_repeats=7, perf_decode=48,
                   perf_prompt_w=4),
}


@dataclass
class GateConfig:
    baseline: str
    candidate: str
    intervention: str
    claim: Claim
    quick: bool = False
    report: Path = Path(DEFAULT_REPORT)
    seed: int = 0
    smoke: bool = False
    #: key -> where its value came from ("--flag", "pyproject.toml", "default")
    sources: dict[str, str] = field(default_factory=dict)
    #: Subjects run in a child process each (:mod:`fuzz.gate.isolate`); ``False``: in the gate's own process.
    isolate: bool = True
    #: Seconds one call of a subject may run before it counts as hung (``--op-timeout``); ``None``: the limit
    #: follows the measured cost of the calls (:meth:`fuzz.gate.isolate.SubjectProcess.limit`).
    op_timeout: float | None = None

    @property
    def approximate(self) -> bool:
        return KINDS[self.intervention][0] == "approximate"

    @property
    def budget(self) -> Budget:
        return BUDGETS["smoke" if self.smoke else "quick" if self.quick else "full"]

    def command(self) -> str:
        return (f"kvwindow gate --baseline {self.baseline} --candidate {self.candidate} --intervention "
                f"{self.intervention} --claim {self.claim.text}" + (" --smoke" if self.smoke else " --quick" if self.quick else "")
                + f" --report {self.report}" + (f" --seed {self.seed}" if self.seed else "")
                + ("" if self.isolate else " --no-isolate")
                + (f" --op-timeout {self.op_timeout:g}" if self.isolate and self.op_timeout is not None else ""))


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kvwindow gate", description="The release gate for a cache or decoding "
                                "change (seed 000's eight steps): exit 0 pass, 1 fail, 2 usage error, 3 harness fault, 130/143 "
                                "interrupted (Ctrl-C/SIGTERM; the finished steps are still reported).")
    p.add_argument("--baseline", help="the subject shipped today (decoder, decoder@c, hf:mistral+static, "
                   "py-decoder:module:Class, ...)")
    p.add_argument("--candidate", help="the subject with the change")
    p.add_argument("--intervention", metavar="KIND", help=f"what the change is: {', '.join(KINDS)}")
    p.add_argument("--claim", metavar="LEVEL", help=f"the equivalence claimed: {', '.join(LEVELS)}")
    p.add_argument("--quick", action="store_true", default=None, help="a short gate (under a minute for the decoder)")
    p.add_argument("--report", metavar="DIR", help=f"where report.md/.html/.json go (default {DEFAULT_REPORT}/)")
    p.add_argument("--seed", type=int, help="seed of the gate's token streams (default 0)")
    p.add_argument("--pyproject", default="pyproject.toml", help="where [tool.kvwindow.gate] is read (default "
                   "./pyproject.toml)")
    p.add_argument("--op-timeout", type=float, default=None, metavar="S",
                   help="a call of a subject running longer, and still running after 4 times as long, fails its "
                        "step; its process is killed (default: 10 x the slowest call measured so far, at least "
                        f"{GATE_OP_FLOOR:g} s for a model's full forward; building an instance is setup, allowed "
                        "300 s)")
    p.add_argument("--isolate", action=argparse.BooleanOptionalAction, default=True,
                   help="run each subject in a child process, so a native crash or a hang is the subject's failed "
                        "step, not the gate's end (default; --no-isolate: in the gate's own process, no op limit)")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.add_argument("--smoke", action="store_true", help=argparse.SUPPRESS)  # the test suite's budget: seconds
    return p


#: The least per-call limit of a gate subject: one call may be a model's full forward over 4 W tokens.
GATE_OP_FLOOR = 60.0


def read_pyproject(path: Path) -> dict[str, Any]:
    """``[tool.kvwindow.gate]`` of ``path`` ({} when the file or the table is absent); an unknown key is
    an error naming it (a typo must not silently fall back to a default)."""
    if not path.is_file():
        return {}
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise UsageError(f"{path}: cannot read [tool.kvwindow.gate]: {e}") from e
    table = doc.get("tool", {}).get("kvwindow", {}).get("gate", {})
    if not isinstance(table, dict):
        raise UsageError(f"{path}: [tool.kvwindow.gate] must be a table")
    unknown = sorted(set(table) - set(KEYS))
    if unknown:
        raise UsageError(f"{path}: [tool.kvwindow.gate] has unknown key(s) {', '.join(unknown)}; keys: {', '.join(KEYS)}")
    return table


def load(args: argparse.Namespace) -> GateConfig:
    """The gate's configuration from parsed arguments and the pyproject table; :class:`UsageError` on anything bad."""
    pyproject = Path(args.pyproject)
    table = read_pyproject(pyproject)
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for key in KEYS:
        cli = getattr(args, key)
        if cli is not None:
            values[key], sources[key] = cli, f"--{key}"
        elif key in table:
            values[key], sources[key] = table[key], f"{pyproject} [tool.kvwindow.gate] {key}"
    for key in ("baseline", "candidate", "intervention", "claim"):
        if key not in values:
            raise UsageError(f"{key} is required: pass --{key} or set it in [tool.kvwindow.gate] of {pyproject}")
        if not isinstance(values[key], str) or not values[key]:
            raise UsageError(f"{sources[key]}: {key} must be a non-empty string, got {values[key]!r}")
    kind = values["intervention"]
    if kind not in KINDS:
        raise UsageError(f"{sources['intervention']}: unknown intervention {kind!r}; kinds: {', '.join(KINDS)}")
    claim = parse_claim(values["claim"], sources["claim"])
    if KINDS[kind][0] == "approximate" and claim.level == "exact":
        raise UsageError(f"{sources['claim']}: an {kind} intervention approximates the model, so it cannot claim "
                         "exact equality; declare logits:TOL, greedy or task")
    quick = values.get("quick", False)
    if not isinstance(quick, bool):
        raise UsageError(f"{sources['quick']}: quick must be true or false, got {quick!r}")
    report = values.get("report", DEFAULT_REPORT)
    if not isinstance(report, str) or not report:
        raise UsageError(f"{sources.get('report', 'report')}: report must be a directory path, got {report!r}")
    rpath = Path(report)
    if sources.get("report", "").startswith(str(pyproject)) and not rpath.is_absolute():
        rpath = pyproject.parent / rpath
    seed = values.get("seed", 0)
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise UsageError(f"{sources.get('seed', 'seed')}: seed must be an int >= 0, got {seed!r}")
    for key in KEYS:
        sources.setdefault(key, "default")
    op_timeout = getattr(args, "op_timeout", None)
    if op_timeout is not None and (not math.isfinite(op_timeout) or op_timeout <= 0):
        raise UsageError(f"--op-timeout must be a finite number of seconds > 0, got {op_timeout}")
    return GateConfig(values["baseline"], values["candidate"], kind, claim, quick, rpath, seed,
                      bool(getattr(args, "smoke", False)), sources, isolate=bool(getattr(args, "isolate", True)),
                      op_timeout=None if op_timeout is None else float(op_timeout))
