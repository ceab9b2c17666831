"""Running the gate in the test suite: whole runs through ``fuzz.gate.run.main`` and single steps on a
prepared :class:`fuzz.gate.context.Context`, both at the ``smoke`` budget unless asked otherwise."""

from __future__ import annotations

import json
from pathlib import Path

from fuzz.gate import config as cfgmod
from fuzz.gate.run import main, prepare

D = "py-decoder:tests.support.gate_decoders:"


def run_gate(tmp_path: Path, baseline: str, candidate: str, kind: str = "layout", claim: str = "exact",
             *extra: str, budget: str = "--smoke") -> tuple[int, dict | None]:
    """``(exit code, report.json or None)`` of one whole gate run writing into ``tmp_path / "report"``."""
    out = tmp_path / "report"
    argv = ["--baseline", baseline, "--candidate", candidate, "--intervention", kind, "--claim", claim,
            "--report", str(out), "--quiet", "--pyproject", str(tmp_path / "no-pyproject.toml"), *extra]
    if budget:
        argv.append(budget)
    rc = main(argv)
    doc = json.loads((out / "report.json").read_text()) if (out / "report.json").exists() else None
    return rc, doc


def steps(doc: dict) -> dict[int, dict]:
    return {s["number"]: s for s in doc["steps"]}


def context(baseline: str, candidate: str, kind: str = "layout", claim: str = "exact", smoke: bool = True):
    """A prepared context, as ``kvwindow gate`` builds it (no report folder is touched), its subjects in this
    process (``--no-isolate``: single steps are tested here; whole runs, isolated, by :func:`run_gate`)."""
    args = cfgmod.build_parser().parse_args(["--baseline", baseline, "--candidate", candidate, "--intervention",
                                             kind, "--claim", claim, "--pyproject", "/nonexistent/pyproject.toml",
                                             "--no-isolate"] + (["--smoke"] if smoke else []))
    return prepare(cfgmod.load(args), lambda s: None)


def failing(step) -> list:
    return [c for c in step.checks if c.verdict == "fail"]


import pytest  # noqa: E402


@pytest.fixture(scope="session")
def wrong_position_report(tmp_path_factory):
    """The README's second worked example, run once per session: ``(exit code, report.json, report folder)``."""
    tmp = tmp_path_factory.mktemp("gate-wrong-position")
    rc, doc = run_gate(tmp, "decoder", "mutant:decoder-cache-length-position", "layout", "exact")
    return rc, doc, tmp / "report"
