"""``kvwindow gate`` usage errors (exit 2, the message names the bad key, nothing runs and no report is
written), ``[tool.kvwindow.gate]`` of ``pyproject.toml``, and harness faults (exit 3, report still written)."""

from __future__ import annotations

import json

import pytest

from fuzz.cli import main as cli_main
from fuzz.gate import config as cfgmod
from fuzz.gate.run import main
from tests.support.gate import D, run_gate, steps


def _usage(tmp_path, capsys, *argv, pyproject=None):
    pp = tmp_path / "pyproject.toml"
    if pyproject is not None:
        pp.write_text(pyproject)
    rc = main(["--report", str(tmp_path / "out"), "--pyproject", str(pp), "--quiet", *argv])
    err = capsys.readouterr().err
    return rc, err


BASE = ["--baseline", "decoder", "--candidate", "decoder@c"]


@pytest.mark.parametrize("argv, names", [
    ([*BASE, "--intervention", "relayout", "--claim", "exact"], ["--intervention", "relayout", "layout"]),
    ([*BASE, "--intervention", "layout", "--claim", "bitwise"], ["--claim", "bitwise", "logits:TOL"]),
    ([*BASE, "--intervention", "layout", "--claim", "logits:abc"], ["--claim", "'abc' is not a number"]),
    ([*BASE, "--intervention", "layout", "--claim", "logits:-1"], ["--claim", "> 0"]),
    ([*BASE, "--intervention", "eviction", "--claim", "exact"], ["--claim", "eviction", "cannot claim exact"]),
    ([*BASE, "--intervention", "quantisation", "--claim", "exact"], ["quantisation", "cannot claim exact"]),
    (["--baseline", "decoder", "--intervention", "layout", "--claim", "exact"], ["candidate is required"]),
    (["--baseline", "decodr", "--candidate", "decoder", "--intervention", "layout", "--claim", "exact"],
     ["baseline 'decodr' names no subject", "py-decoder:module.path:ClassName"]),
    (["--baseline", "decoder@gpu", "--candidate", "decoder", "--intervention", "layout", "--claim", "exact"],
     ["baseline 'decoder@gpu'", "unknown decoder backend 'gpu'"]),
    (["--baseline", "decoder", "--candidate", "mutant:c-len-W+1", "--intervention", "layout", "--claim", "exact"],
     ["candidate 'mutant:c-len-W+1'", "mutant:decoder-cache-length-position"]),
    (["--baseline", "decoder", "--candidate", D + "NeedsArgs", "--intervention", "layout", "--claim", "exact"],
     ["candidate", "NeedsArgs() failed", "built with no arguments"]),
    (["--baseline", "decoder", "--candidate", D + "NoFull", "--intervention", "layout", "--claim", "exact"],
     ["candidate", "missing full"]),
    (["--baseline", "decoder", "--candidate", D + "IdentityRaises", "--intervention", "layout", "--claim", "exact"],
     ["candidate", "does not answer the decoder protocol", "identity raised RuntimeError"]),
    (["--baseline", "decoder", "--candidate", "py-decoder:no_such_module:X", "--intervention", "layout",
      "--claim", "exact"], ["candidate", "cannot import 'no_such_module'"]),
])
def test_usage_errors_exit_2_naming_the_key(tmp_path, capsys, argv, names):
    rc, err = _usage(tmp_path, capsys, *argv)
    assert rc == 2
    for n in names:
        assert n in err, (n, err)
    assert not (tmp_path / "out" / "report.json").exists()


def test_a_report_folder_that_is_a_file_is_a_usage_error(tmp_path, capsys):
    (tmp_path / "out").write_text("in the way")
    rc, err = _usage(tmp_path, capsys, *BASE, "--intervention", "layout", "--claim", "exact")
    assert rc == 2 and "--report" in err and "report folder" in err


def test_an_unknown_option_is_argparse_s_usage_error(tmp_path, capsys):
    rc, err = _usage(tmp_path, capsys, *BASE, "--intervention", "layout", "--claim", "exact", "--window", "3")
    assert rc == 2 and "--window" in err


def test_pyproject_keys(tmp_path, capsys):
    pp = tmp_path / "pyproject.toml"
    pp.write_text('[tool.kvwindow.gate]\nbaseline = "decoder"\ncandidate = "decoder@c"\nintervention = "layout"\n'
                  'claim = "logits:1e-9"\nquick = true\nreport = "gate-out"\nseed = 7\n')
    args = cfgmod.build_parser().parse_args(["--pyproject", str(pp)])
    conf = cfgmod.load(args)
    assert (conf.baseline, conf.candidate, conf.intervention, conf.claim.text, conf.quick, conf.seed) == \
        ("decoder", "decoder@c", "layout", "logits:1e-09", True, 7)
    assert conf.report == tmp_path / "gate-out"  # relative to the pyproject.toml that names it
    assert conf.sources["claim"].endswith("[tool.kvwindow.gate] claim")
    # the command line wins, key by key
    conf = cfgmod.load(cfgmod.build_parser().parse_args(["--pyproject", str(pp), "--claim", "exact"]))
    assert conf.claim.text == "exact" and conf.sources["claim"] == "--claim" and conf.candidate == "decoder@c"


@pytest.mark.parametrize("table, names", [
    ('baseline = "decoder"\ncandidates = "decoder@c"\n', ["unknown key(s) candidates"]),
    ('baseline = "decoder"\ncandidate = "decoder@c"\nintervention = "layout"\nclaim = "exact"\nquick = "yes"\n',
     ["[tool.kvwindow.gate] quick", "true or false"]),
    ('baseline = "decoder"\ncandidate = "decoder@c"\nintervention = "eviction"\nclaim = "exact"\n',
     ["[tool.kvwindow.gate] claim", "cannot claim exact"]),
    ('baseline = 3\n', ["baseline must be a non-empty string"]),
])
def test_bad_pyproject_keys_are_usage_errors(tmp_path, capsys, table, names):
    rc, err = _usage(tmp_path, capsys, pyproject="[tool.kvwindow.gate]\n" + table)
    assert rc == 2
    for n in names:
        assert n in err, (n, err)


def test_the_cli_delegates_gate(tmp_path, capsys):
    rc = cli_main(["gate", "--baseline", "decoder", "--candidate", "decoder@c", "--intervention", "layout",
                   "--claim", "nope", "--pyproject", str(tmp_path / "x.toml")])
    assert rc == 2 and "unknown claim 'nope'" in capsys.readouterr().err


def test_a_subject_whose_backend_goes_away_is_a_harness_fault(tmp_path):
    rc, doc = run_gate(tmp_path, "decoder", D + "UnavailableMidRun")
    assert rc == 3 and doc["verdict"] == "fault" and doc["exit"] == 3
    faulted = [s for s in doc["steps"] if s["verdict"] == "fault"]
    assert faulted and "the accelerator backend of this decoder is gone" in faulted[0]["summary"]
    assert doc["faults"] and (tmp_path / "report" / "report.html").exists()


def test_the_gate_s_own_error_is_a_harness_fault(tmp_path, monkeypatch):
    import fuzz.gate.run as run

    def broken(ctx):
        raise ZeroDivisionError("a bug in the gate")
    monkeypatch.setattr(run, "STEPS", run.STEPS[:2] + ((3, broken),) + run.STEPS[3:4])
    rc, doc = run_gate(tmp_path, "decoder", "decoder@c")
    s = steps(doc)
    assert rc == 3 and s[3]["verdict"] == "fault" and "ZeroDivisionError: a bug in the gate" in s[3]["summary"]
    assert s[1]["verdict"] == s[2]["verdict"] == s[4]["verdict"] == "pass"  # the other steps still ran
    assert json.loads((tmp_path / "report" / "report.json").read_text())["exit"] == 3
