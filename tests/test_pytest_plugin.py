"""The pytest plugin in a user's own suite (pytester): every seed of the project's seeds directory is its own
test item with the seed id in its id, against the configured target (options or ini); pinned cases with
kvwindow.example and the kvwindow_replay fixture; bad configuration is a usage error. And the whole user story
in a temp project: kvwindow fuzz saves into ./kvwindow-seeds/, the project's pytest replays it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fuzz import seeds
from fuzz.ops import Case

# pytester's in-process runs restore sys.modules after each run; what the plugin imports lazily (numpy's
# C extension among it) is imported here once, so no run has to import it a second time.
import fuzz.targets.pyring  # noqa: E402,F401
import fuzz.targets.registry  # noqa: E402,F401

pytest_plugins = ["pytester"]

GOOD = '''
class Ring:
    def reset(self, window):
        self.w, self.items = window, []
    def push(self, pos, key, value):
        self.items = (self.items + [(pos, key, value)])[-self.w:]
    def push_chunk(self, entries):
        for e in entries:
            self.push(*e)
    def contents(self):
        return list(self.items)
'''
#: The same ring, keeping one entry too many.
BUGGY = GOOD.replace("[-self.w:]", "[-(self.w + 1):]")


def _project(pytester, module: str, source: str, cases: list[Case]) -> list[str]:
    pytester.makepyfile(**{module: source})
    ids = []
    for case in cases:
        seeds.save_seed(seeds.Seed(case, {"note": "test"}), pytester.path / "kvwindow-seeds")
        ids.append(case.id)
    return ids


CASES = [Case.parse(2, "push push push"), Case.parse(3, "chunk:7 reset:2 push")]


def test_the_plugin_is_registered(pytester):
    result = pytester.runpytest("--help")
    result.stdout.fnmatch_lines(["*--kvwindow-target=TARGET*", "*--kvwindow-seeds=DIR*"])


def test_every_seed_is_an_item_named_by_its_id(pytester):
    ids = _project(pytester, "goodring1", GOOD, CASES)
    result = pytester.runpytest("--kvwindow-target", "py:goodring1:Ring", "--kvwindow-seeds", "kvwindow-seeds", "-v")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines([f"kvwindow-seeds/{i}.json::{i}[[]py:goodring1:Ring[]] PASSED*" for i in sorted(ids)],
                                consecutive=False)
    one = pytester.runpytest("--kvwindow-target", "py:goodring1:Ring", "--kvwindow-seeds", "kvwindow-seeds",
                             "-k", ids[0])
    one.assert_outcomes(passed=1)


def test_a_failing_seed_says_which_and_how_to_replay_it(pytester):
    ids = _project(pytester, "badring1", BUGGY, CASES)
    result = pytester.runpytest("--kvwindow-target", "py:badring1:Ring", "--kvwindow-seeds", "kvwindow-seeds")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines([f"*seed {ids[0]} (*{ids[0]}.json) fails on py:badring1:Ring: Mismatch: *",
                                 f"*replay: kvwindow replay *{ids[0]}.json --target py:badring1:Ring"],
                                consecutive=False)
    assert result.ret == 1
    wide = pytester.runpytest("--kvwindow-target", "py:badring1:Ring", "--kvwindow-seeds", "kvwindow-seeds",
                              "--kvwindow-width", "2", "--kvwindow-dtype", "bfloat16")
    wide.assert_outcomes(failed=2)
    wide.stdout.fnmatch_lines([f"*replay: kvwindow replay *{ids[0]}.json --target py:badring1:Ring --width 2 "
                               "--dtype bfloat16"], consecutive=False)


def test_ini_options_and_the_default_directory(pytester):
    _project(pytester, "goodring2", GOOD, CASES)
    pytester.makeini("[pytest]\nkvwindow_target = py:goodring2:Ring\n")
    pytester.runpytest().assert_outcomes(passed=2)  # ./kvwindow-seeds: the default seeds directory
    pytester.makeini("[pytest]\nkvwindow_target =\n    py:goodring2:Ring\n    pyring\nkvwindow_seeds = kvwindow-seeds\n")
    pytester.runpytest().assert_outcomes(passed=4)


def test_seeds_a_target_cannot_take_skip_and_malformed_ones_fail(pytester):
    _project(pytester, "goodring3", GOOD, [Case.parse(2, "push bad:null-data")])
    (pytester.path / "kvwindow-seeds" / "0123456789ab.json").write_text('{"format": 1, "window": 2, "ops": [["pu')
    result = pytester.runpytest("--kvwindow-target", "py:goodring3:Ring", "-rs")
    result.assert_outcomes(skipped=1, failed=1)
    result.stdout.fnmatch_lines(["*malformed seed file: *0123456789ab.json: not valid JSON*",
                                 "*bad:null-data is not a call py:goodring3:Ring can take*"], consecutive=False)


def test_pinned_examples_and_the_replay_fixture(pytester):
    pytester.makepyfile(goodring4=GOOD, badring4=BUGGY)
    pytester.makepyfile(test_pinned='''
import kvwindow

@kvwindow.example(window=3, ops="push push chunk:5")
@kvwindow.example(window=1, ops="chunk:0 push")
def test_edges(kvwindow_replay):
    kvwindow_replay()

def test_explicit(kvwindow_replay):
    kvwindow_replay("chunk:4 reset:2 push", window=3)
    kvwindow_replay("chunk:4", window=3, target="pyring")
''')
    a, b = Case.parse(3, "push push chunk:5"), Case.parse(1, "chunk:0 push")
    good = pytester.runpytest("--kvwindow-target", "py:goodring4:Ring", "-v")
    good.assert_outcomes(passed=3)
    good.stdout.fnmatch_lines([f"*test_edges[[]{a.id}[]] PASSED*", f"*test_edges[[]{b.id}[]] PASSED*"],
                              consecutive=False)
    bad = pytester.runpytest("--kvwindow-target", "py:badring4:Ring")
    bad.assert_outcomes(passed=1, failed=2)  # chunk:0 push at W=1 holds one entry either way
    bad.stdout.fnmatch_lines([f"*case {a.id} (window=3 ops: push push chunk:5) fails on py:badring4:Ring*"],
                             consecutive=False)


@pytest.fixture(scope="module")
def segv_lib(tmp_path_factory):
    from tests.support.crashers import c_crasher

    return c_crasher("segv", tmp_path_factory.mktemp("plugin") / "libsegv.so")


def test_a_seed_that_crashes_a_native_target_fails_its_own_item_naming_the_signal(pytester, segv_lib):
    """The plugin resolves targets as the CLI does: a c: library runs in a supervised child, so its death is
    one failing item (pytest itself runs on: the other seed passes, the report is complete)."""
    crash, fine = Case.parse(3, "push push push push push push push"), Case.parse(2, "push push push push push")
    ids = _project(pytester, "unused_module", "", [crash, fine])
    result = pytester.runpytest_subprocess("--kvwindow-target", f"c:{segv_lib}", "--kvwindow-seeds",
                                           "kvwindow-seeds", "-v")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([f"*{ids[1]}[[]c:{segv_lib}[]] PASSED*",
                                 f"*seed {ids[0]} (*{ids[0]}.json) fails on c:{segv_lib}: Crash: *"
                                 f"SIGSEGV at op #5 (push)*",
                                 f"*replay: kvwindow replay *{ids[0]}.json --target c:{segv_lib}"], consecutive=False)
    pytester.makepyfile(test_pinned=f'''
import kvwindow

@kvwindow.example(window=3, ops="chunk:5 push")
def test_pinned(kvwindow_replay):
    kvwindow_replay(target="c:{segv_lib}")
''')
    pinned = pytester.runpytest_subprocess("test_pinned.py")
    pinned.assert_outcomes(failed=1)
    pinned.stdout.fnmatch_lines(["*fails on c:*: Crash: *SIGSEGV at op #1 (push)*"])


def test_bad_configuration_is_a_usage_error(pytester):
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    result = pytester.runpytest("--kvwindow-target", "py:nowhere_module:Ring", "--kvwindow-seeds", ".")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*kvwindow: *cannot import 'nowhere_module'*"])
    result = pytester.runpytest("--kvwindow-target", "pyring", "--kvwindow-seeds", "missing-dir")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*seeds directory *missing-dir does not exist*"])
    with pytest.raises(Exception, match="op #0"):
        import kvwindow

        kvwindow.example(window=2, ops="jump")


def test_without_a_target_nothing_changes(pytester):
    _project(pytester, "goodring5", GOOD, CASES)
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    pytester.runpytest().assert_outcomes(passed=1)  # seeds are not collected until a target is configured


# ---------------------------------------------------------------------------
# The whole user story, as a user runs it: two commands in their own project


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in (seeds.SEEDS_ENV, "PYTEST_ADDOPTS")}
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def test_fuzz_in_a_project_then_its_own_pytest_replays_the_seed(tmp_path):
    kvwindow = Path(sys.executable).parent / "kvwindow"
    if not kvwindow.exists():
        pytest.skip(f"the kvwindow console script is not installed beside {sys.executable}")
    (tmp_path / "usercache.py").write_text(BUGGY)
    before = sorted(p.name for p in seeds.seed_paths())
    fuzz = _run([str(kvwindow), "fuzz", "--target", "py:usercache:Ring", "--time", "20", "--seed", "0", "--plain"],
                tmp_path)
    assert fuzz.returncode == 1, fuzz.stdout + fuzz.stderr
    saved = sorted((tmp_path / "kvwindow-seeds").glob("*.json"))
    assert saved and sorted(p.name for p in seeds.seed_paths()) == before
    assert f"seed saved: {saved[0]}" in fuzz.stdout

    pytest_cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--kvwindow-target", "py:usercache:Ring",
                  "--kvwindow-seeds", "kvwindow-seeds/", "-v"]
    red = _run(pytest_cmd, tmp_path)
    assert red.returncode == 1, red.stdout + red.stderr
    sid = saved[0].stem
    assert f"kvwindow-seeds/{sid}.json::{sid}[py:usercache:Ring] FAILED" in red.stdout

    (tmp_path / "usercache.py").write_text(GOOD)  # the user fixes the bug: the seed now guards it
    green = _run(pytest_cmd, tmp_path)
    assert green.returncode == 0, green.stdout + green.stderr
    assert f"kvwindow-seeds/{sid}.json::{sid}[py:usercache:Ring] PASSED" in green.stdout
