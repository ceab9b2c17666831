"""kvwindow fuzz: target listing, JSON report, plain progress lines, bad input (exit 2), Ctrl-C, bench/prove wiring."""

import json
import shutil
import signal
import subprocess

import pytest

from fuzz.cli import main
from fuzz.oracle import PHASES
from tests.support.caches import BUGGY, NO_CONTENTS
from tests.support.fuzz_process import signal_when, start


def run(capsys, *argv):
    rc = main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_list_targets_says_why(capsys):
    rc, out, _ = run(capsys, "fuzz", "--list-targets")
    assert rc == 0
    lines = {ln.split()[0]: ln for ln in out.splitlines()}
    assert "available" in lines["pyring"]
    for name, line in lines.items():
        if "unavailable" in line:
            assert line.split("unavailable:", 1)[1].strip(), f"{name} gives no reason"


def test_report_and_plain_progress(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("KVWINDOW_PROGRESS_INTERVAL", "0.3")
    rep = tmp_path / "r.json"
    rc, out, _ = run(capsys, "fuzz", "--target", "pyring", "--target", "py:impl.mutants.slot_ring:SlotRing",
                     "--time", "3", "--seed", "1", "--report", str(rep), "--seeds-dir", str(tmp_path / "s"),
                     "--db", str(tmp_path / "db"))
    assert rc == 0
    progress = [ln for ln in out.splitlines() if "examples=" in ln]
    assert len(progress) >= 3  # periodic plain lines, no terminal control codes
    assert "\x1b[" not in out
    assert "summary" in out and "tokens/s" in out
    doc = json.loads(rep.read_text())
    assert doc["exit_code"] == 0 and doc["failures"] == []
    assert {t["name"] for t in doc["targets"]} == {"pyring", "py:impl.mutants.slot_ring:SlotRing"}
    for t in doc["targets"]:
        assert t["examples"] > 0 and t["tokens"] > 0 and t["examples_per_s"] > 0 and t["tokens_per_s"] > 0
        assert set(t["phases"]) == set(PHASES)
        assert "versions" in t
    assert doc["machine"]["usable_cores"] >= 1 and doc["machine"]["versions"]["python"]


def test_failure_prints_replay_command_and_saves_seed(tmp_path, capsys):
    sd = tmp_path / "seeds"
    rep = tmp_path / "r.json"
    rc, out, _ = run(capsys, "fuzz", "--target", BUGGY, "--time", "20",
                     "--seed", "0", "--seeds-dir", str(sd), "--report", str(rep), "--db", str(tmp_path / "db"))
    assert rc == 1
    files = list(sd.glob("*.json"))
    assert len(files) == 1
    assert f"kvwindow replay {files[0]} --target {BUGGY}" in out
    doc = json.loads(rep.read_text())
    assert doc["exit_code"] == 1 and doc["failures"][0]["seed_id"] == files[0].stem


def _compile(tmp_path, name, code):
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler")
    src = tmp_path / f"{name}.c"
    src.write_text(code)
    lib = tmp_path / f"{name}.so"
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    return lib


def test_bad_targets_exit_2_one_line(tmp_path, capsys):
    notlib = tmp_path / "notlib.so"
    notlib.write_text("this is not an ELF file\n")
    partial = _compile(tmp_path, "partial", "int ringkv_create(long w, long d, void **o) { return 0; }\n")
    cases = [
        ("no-such-target", "unknown target"),
        (f"c:{tmp_path}/missing.so", "no such file"),
        (f"c:{notlib}", "notlib.so"),
        (f"c:{partial}", "ringkv_"),
        ("py:no_such_module_xyz:Cache", "cannot import"),
        ("py:fuzz.targets:NoSuchClass", "no attribute"),
        (NO_CONTENTS, "contents"),
        ("py:missing-colon", "py:module.path:ClassName"),
    ]
    for spec, needle in cases:
        rc, out, err = run(capsys, "fuzz", "--target", spec, "--time", "1", "--seeds-dir", str(tmp_path / "s"))
        lines = err.strip().splitlines()
        assert rc == 2, (spec, err)
        assert len(lines) == 1 and needle in lines[0] and lines[0].startswith("kvwindow: error:"), (spec, err)
    assert not (tmp_path / "s").exists()


def test_bad_flags_exit_2(tmp_path, capsys):
    assert run(capsys, "fuzz", "--target", "pyring", "--workers", "0")[0] == 2
    assert run(capsys, "fuzz", "--target", "pyring", "--db", "http://example.invalid/x")[0] == 2
    assert run(capsys, "fuzz", "--bogus-flag")[0] == 2


def test_bench_and_prove_are_wired(monkeypatch, capsys):
    import fuzz.cli as cli

    calls = []

    class Mod:
        @staticmethod
        def main(argv):
            calls.append(argv)
            return 0

    real = cli.importlib.import_module

    def fake(name):
        if name == "fuzz.prove":
            return Mod
        if name == "fuzz.bench.run":
            raise ModuleNotFoundError("No module named 'fuzz.bench.run'", name="fuzz.bench.run")
        return real(name)

    monkeypatch.setattr(cli.importlib, "import_module", fake)
    assert main(["prove", "--", "--x", "1"]) == 0 and calls == [["--x", "1"]]
    assert main(["prove", "--quick", "--out", "d"]) == 0 and calls[-1] == ["--quick", "--out", "d"]
    rc = main(["bench"])
    assert rc == 2 and "kvwindow bench is not available" in capsys.readouterr().err


def test_ctrl_c_keeps_report_and_seeds(tmp_path):
    proc = start(tmp_path, "--target", "pyring", "--time", "120")
    # Interrupt only once the campaign is running (a progress line with examples), however slow the machine.
    out, err = signal_when(proc, lambda line: "examples=" in line and "examples=0 " not in line, signal.SIGINT)
    assert proc.returncode == 130, (out, err)
    assert "interrupted" in out
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["interrupted"] is True and doc["targets"][0]["examples"] > 0


def test_targets_resolve_once_and_the_report_carries_the_config(tmp_path, capsys, monkeypatch):
    from fuzz.config import CampaignConfig
    from fuzz.targets import isolated

    calls = []
    resolve = isolated.resolve  # the CLI's one resolver (ring-c is built in its isolated child)
    monkeypatch.setattr(isolated, "resolve", lambda spec, config=None: calls.append(spec) or resolve(spec, config))
    rep = tmp_path / "r.json"
    rc, _, _ = run(capsys, "fuzz", "--target", "pyring", "--target", "ring-c", "--time", "2", "--seed", "5",
                   "--report", str(rep), "--seeds-dir", str(tmp_path / "s"), "--db", str(tmp_path / "db"))
    assert rc == 0
    assert calls == ["pyring", "ring-c"]  # once each, by the CLI; the campaign runs the objects it built
    want = CampaignConfig(targets=("pyring", "ring-c"), seconds=2.0, campaign_seed=5, db=str(tmp_path / "db"),
                          seeds_dir=str(tmp_path / "s"))
    assert json.loads(rep.read_text())["config"] == want.to_json()


def _replay_hints(out):
    return [ln.split("replay: ", 1)[1] for ln in out.splitlines() if ln.strip().startswith("replay: ")]


@pytest.mark.parametrize("mutant", ["ring-keeps-W+1", "c-len-W+1", "decoder-rope-at-slot"])
def test_the_replay_hint_a_mutant_campaign_prints_resolves_and_replays(tmp_path, capsys, mutant):
    rc, out, err = run(capsys, "fuzz", "--target", f"mutant:{mutant}", "--time", "30", "--seed", "0",
                       "--seeds-dir", str(tmp_path / "s"), "--db", str(tmp_path / "db"))
    if rc == 2 and "not available here" in err:
        pytest.skip(err.strip())
    assert rc == 1, out + err
    hints = _replay_hints(out)
    assert hints and len(set(hints)) == len(hints)  # one per distinct finding, each its own seed
    for hint in hints:
        argv = hint.split()
        assert argv[:2] == ["kvwindow", "replay"] and argv[3] == "--target" and argv[4] == f"mutant:{mutant}"
        rc, out, err = run(capsys, *argv[1:])
        assert rc == 1 and "FAILED" in out, out + err  # resolves, and the mutant fails its seed again


def test_every_target_name_is_a_target_value_that_resolves(tmp_path):
    """A replay hint names its target by ``target.name``: for every built-in target that runs here and
    every mutant, that name resolves back to a target of the same name."""
    from fuzz.replay import replay_hint
    from fuzz.targets import registry
    from impl.mutants.catalogue import catalogue

    names = [t.name for t in registry.list_targets() if t.available]
    names += [f"mutant:{m.name}" for m in catalogue()]
    checked = 0
    for spec in names:
        target, why = registry.probe(spec)
        if target is None:
            continue
        hint = replay_hint(tmp_path / "seed.json", target.name)
        again = registry.resolve(hint.split(" --target ", 1)[1])
        assert again.name == target.name, hint
        checked += 1
    assert checked >= 20


def test_seeds_show_prints_a_replay_command_that_runs(tmp_path, capsys):
    rc, out, _ = run(capsys, "seeds", "--seeds-dir", str(tmp_path), "add", "--window", "2", "--ops", "push push push")
    assert rc == 0
    sid = out.split()[1].rstrip(":")
    rc, out, _ = run(capsys, "seeds", "--seeds-dir", str(tmp_path), "show", sid)
    (hint,) = _replay_hints(out)
    rc, out, err = run(capsys, *hint.split()[1:], "--target", "pyring")
    assert rc == 0 and f"{sid} pyring: ok" in out, out + err
