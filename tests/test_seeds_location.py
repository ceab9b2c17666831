"""Seeds belong to the user's project: --seeds-dir, then $KVWINDOW_SEEDS, then [tool.kvwindow] seeds-dir in
./pyproject.toml, then ./kvwindow-seeds — never the installed package; py: modules resolve from the current
directory first; a class that cannot be built with no arguments is a usage error before anything runs."""

from __future__ import annotations

import pytest

from fuzz import seeds
from fuzz.cli import main
from fuzz.targets import registry
from fuzz.targets.base import TargetError

ROOT = seeds.SEED_DIR.parent.parent


def test_precedence(tmp_path, monkeypatch):
    monkeypatch.delenv(seeds.SEEDS_ENV, raising=False)
    assert seeds.default_seeds_dir(tmp_path) == tmp_path / "kvwindow-seeds"
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n')
    assert seeds.default_seeds_dir(tmp_path) == tmp_path / "kvwindow-seeds"  # no [tool.kvwindow]: the default
    (tmp_path / "pyproject.toml").write_text('[tool.kvwindow]\nseeds-dir = "tests/seeds"\n')
    assert seeds.default_seeds_dir(tmp_path) == tmp_path / "tests" / "seeds"
    monkeypatch.setenv(seeds.SEEDS_ENV, "elsewhere")
    assert seeds.default_seeds_dir(tmp_path) == tmp_path / "elsewhere"
    monkeypatch.setenv(seeds.SEEDS_ENV, str(tmp_path / "abs"))
    assert seeds.default_seeds_dir(tmp_path) == tmp_path / "abs"
    monkeypatch.chdir(tmp_path)
    assert seeds.default_seeds_dir() == tmp_path / "abs"


@pytest.mark.parametrize("text,needle", [('[tool.kvwindow]\nseeds-dir = 3\n', "must be a path string, got 3"),
                                         ('[tool.kvwindow\n', "cannot read")])
def test_a_bad_setting_is_named(tmp_path, monkeypatch, text, needle):
    monkeypatch.delenv(seeds.SEEDS_ENV, raising=False)
    (tmp_path / "pyproject.toml").write_text(text)
    with pytest.raises(seeds.SeedError, match=needle):
        seeds.default_seeds_dir(tmp_path)


def test_this_repository_keeps_its_seeds_in_fuzz_seeds(monkeypatch):
    monkeypatch.delenv(seeds.SEEDS_ENV, raising=False)
    assert seeds.default_seeds_dir(ROOT).resolve() == seeds.SEED_DIR.resolve()


BUGGY_CACHE = '''
class Ring:
    """Keeps W + 1 entries."""
    def reset(self, window):
        self.w, self.items = window, []
    def push(self, pos, key, value):
        self.items = (self.items + [(pos, key, value)])[-(self.w + 1):]
    def push_chunk(self, entries):
        for e in entries:
            self.push(*e)
    def contents(self):
        return list(self.items)

class NeedsArgs(Ring):
    def __init__(self, size):
        self.size = size
'''


def test_a_py_campaign_in_a_project_saves_into_the_project(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv(seeds.SEEDS_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "userring.py").write_text(BUGGY_CACHE)
    before = sorted(p.name for p in seeds.seed_paths())
    assert main(["fuzz", "--target", "py:userring:Ring", "--time", "20", "--seed", "0"]) == 1
    saved = list((tmp_path / "kvwindow-seeds").glob("*.json"))
    assert saved and sorted(p.name for p in seeds.seed_paths()) == before  # nothing in the package
    out = capsys.readouterr().out
    assert f"seed saved: {saved[0]}" in out


def test_a_class_that_cannot_be_built_is_a_usage_error(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv(seeds.SEEDS_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "userring2.py").write_text(BUGGY_CACHE)
    with pytest.raises(TargetError, match=r"py:userring2:NeedsArgs: NeedsArgs\(\) failed: TypeError: .*size"):
        registry.resolve("py:userring2:NeedsArgs")
    assert main(["fuzz", "--target", "py:userring2:NeedsArgs", "--time", "5"]) == 2
    assert "NeedsArgs() failed" in capsys.readouterr().err
    assert not (tmp_path / "kvwindow-seeds").exists()


def test_py_modules_resolve_from_the_current_directory_first(tmp_path, monkeypatch):
    """A module of the user's project shadows an installed one of the same name, as with python -m."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "kvw_shadow_probe.py").write_text(BUGGY_CACHE)
    monkeypatch.setattr("sys.path", [p for p in __import__("sys").path if p not in ("", str(tmp_path))])
    assert registry.resolve("py:kvw_shadow_probe:Ring").name == "py:kvw_shadow_probe:Ring"
    with pytest.raises(TargetError, match="cannot import 'no_such_module_here' \\(from .*\\)"):
        registry.resolve("py:no_such_module_here:Ring")
