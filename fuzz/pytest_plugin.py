"""The pytest plugin (entry point ``pytest11``): a user's own test suite replays their kvwindow seeds.

A campaign run in the user's project saves its findings there (``./kvwindow-seeds/``
by default, :func:`fuzz.seeds.default_seeds_dir`); this plugin makes every seed a
test of that project, against the user's own cache::

    pytest --kvwindow-target py:mypkg.cache:MyCache --kvwindow-seeds kvwindow-seeds/

or, once, in the project's pytest configuration (``[tool.pytest.ini_options]``)::

    kvwindow_target = ["py:mypkg.cache:MyCache"]
    kvwindow_seeds = "kvwindow-seeds"

Each (seed, target) pair is its own test item, ``kvwindow-seeds/<id>.json::<id>[<target>]``,
so a failure names the seed and ``-k <id>`` selects it. Targets resolve as ``kvwindow fuzz``
resolves them: a native one runs in a supervised child (:mod:`fuzz.targets.isolated`), so a seed
that crashes it fails its own item, naming the signal and the op. A seed the target cannot
take is skipped with the reason; a malformed seed file fails, naming the file.
``--kvwindow-width`` / ``--kvwindow-dtype`` (ini ``kvwindow_width`` / ``kvwindow_dtype``)
replay with the payloads of a ``kvwindow fuzz --width N --dtype D`` campaign.

A hand-written case is pinned with the ``kvwindow_example`` marker (``kvwindow.example``)
on a test that takes the ``kvwindow_replay`` fixture; the test is parametrized by
its cases (the case id in the test id)::

    import kvwindow

    @kvwindow.example(window=3, ops="push push chunk:5")
    @kvwindow.example(window=2, ops="chunk:7 reset:4 push")
    def test_my_cache_edges(kvwindow_replay):
        kvwindow_replay()

``kvwindow_replay(case=None, *, window=None, target=None)`` replays the pinned case,
or the one given (a :class:`~fuzz.ops.Case`, a seed file, or an op text with
``window``), against ``target`` or every configured target, and fails with the
spec's difference. Nothing here runs unless a target, a seed or a marker asks for it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from fuzz.config import DTYPES

MARKER = "kvwindow_example"
_SETTINGS = pytest.StashKey["_Settings"]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("kvwindow", "kvwindow: replay sliding-window cache seeds against your cache")
    group.addoption("--kvwindow-target", action="append", default=None, metavar="TARGET",
                    help="a kvwindow target (py:module:Class, c:PATH.so, a built-in name) to replay seeds "
                         "against (repeatable)")
    group.addoption("--kvwindow-seeds", default=None, metavar="DIR",
                    help="the seeds directory (default: kvwindow's, from $KVWINDOW_SEEDS, [tool.kvwindow] "
                         "seeds-dir or ./kvwindow-seeds)")
    group.addoption("--kvwindow-width", type=int, default=None, metavar="N", help="payload width of seeds that name none (default 4; a seed's own width wins)")
    group.addoption("--kvwindow-dtype", default=None, choices=DTYPES,
                    help="payload dtype of seeds that name none (default float32)")
    parser.addini("kvwindow_target", "kvwindow targets to replay seeds against", type="linelist", default=[])
    parser.addini("kvwindow_seeds", "the kvwindow seeds directory (relative to the rootdir)", default="")
    parser.addini("kvwindow_width", "payload width of the replays", default="")
    parser.addini("kvwindow_dtype", "payload dtype of the replays", default="")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{MARKER}(window, ops, note=None): a hand-written kvwindow case, "
                                       "replayed by the kvwindow_replay fixture (kvwindow.example)")
    config.stash[_SETTINGS] = _Settings(config)


class _Settings:
    """What the options and ini values ask for; targets are resolved on first use."""

    def __init__(self, config: pytest.Config):
        self.specs: list[str] = list(config.getoption("kvwindow_target") or config.getini("kvwindow_target"))
        opt_seeds, ini_seeds = config.getoption("kvwindow_seeds"), config.getini("kvwindow_seeds")
        if opt_seeds:
            self.seeds: Path | None = Path(config.invocation_params.dir) / opt_seeds
        elif ini_seeds:
            self.seeds = config.rootpath / ini_seeds
        else:
            self.seeds = None
        if self.seeds is not None and not self.seeds.is_dir():
            raise pytest.UsageError(f"kvwindow: seeds directory {self.seeds} does not exist")
        self.rootpath = config.rootpath
        width = config.getoption("kvwindow_width") or config.getini("kvwindow_width") or None
        dtype = config.getoption("kvwindow_dtype") or config.getini("kvwindow_dtype") or None
        try:
            self.width = None if width is None else int(width)
        except ValueError:
            raise pytest.UsageError(f"kvwindow_width must be an int, got {width!r}") from None
        if self.width is not None and self.width < 1:
            raise pytest.UsageError(f"kvwindow_width must be >= 1, got {self.width}")
        self.dtype = dtype
        self._targets: list[Any] | None = None

    def payload_flags(self) -> str:
        """The ``--width``/``--dtype`` flags ``kvwindow replay`` needs to replay as these settings do."""
        from fuzz.config import CampaignConfig

        return CampaignConfig(width=self.width, dtype=self.dtype).payload_flags()

    def seeds_dir(self) -> Path | None:
        """The directory whose seeds become test items: the one named, else (with a target) the default."""
        if self.seeds is not None:
            return self.seeds
        if not self.specs:
            return None
        from fuzz.seeds import default_seeds_dir

        return default_seeds_dir(self.rootpath)

    def targets(self) -> list[Any]:
        if self._targets is None:
            built: list[Any] = []
            try:
                for spec in self.specs:
                    built.append(resolve_target(spec, self.width, self.dtype))
            except BaseException:
                close_targets(built)
                raise
            self._targets = built
        return self._targets


def resolve_target(spec: Any, width: int | None = None, dtype: str | None = None) -> Any:
    """A ``--target`` value as a target configured with the payloads; a bad one is a usage error.

    Resolved as ``kvwindow fuzz`` and ``kvwindow replay`` resolve it (:func:`fuzz.targets.isolated.resolve`):
    a native target (``c:``, ``ring-c``, the C mutants, CUDA) runs in a supervised child, so a seed that
    crashes it fails its own test item instead of killing pytest; :func:`close_targets` stops the child."""
    from fuzz.config import CampaignConfig
    from fuzz.targets import isolated
    from fuzz.targets.base import Target, TargetError

    config = CampaignConfig(width=width, dtype=dtype)
    if isinstance(spec, Target):
        return spec.configured(config)
    try:
        target = isolated.resolve(spec, config)
    except (TargetError, ValueError) as e:
        raise pytest.UsageError(f"kvwindow: {e}") from e
    try:
        return target.configured(config)
    except (TargetError, ValueError) as e:
        isolated.close(target)
        raise pytest.UsageError(f"kvwindow: {e}") from e


def close_targets(targets: list[Any]) -> None:
    """Stop the child processes of the targets :func:`resolve_target` built."""
    from fuzz.targets import isolated

    for t in targets:
        isolated.close(t)


def pytest_unconfigure(config: pytest.Config) -> None:
    settings = config.stash.get(_SETTINGS, None)
    if settings is not None and settings._targets:
        close_targets(settings._targets)
        settings._targets = None


# ---------------------------------------------------------------------------
# Seeds as test items


@pytest.hookimpl(tryfirst=True)  # before -k / -m deselect, so they select seed items too
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list) -> None:
    settings = config.stash[_SETTINGS]
    settings.targets()  # a target that does not resolve is a usage error, seeds or not
    directory = settings.seeds_dir()
    if directory is None or not directory.is_dir():
        return
    if not settings.specs:
        raise pytest.UsageError(f"kvwindow: seeds in {directory} but no target to replay them against "
                                "(--kvwindow-target or the kvwindow_target ini option)")
    from fuzz.seeds import seed_paths

    for path in seed_paths(directory):  # collected like any file: counted, reported, -k/--collect-only see them
        items.extend(session.genitems(SeedFile.from_parent(session, path=path)))


class SeedFile(pytest.File):
    """One seed file: an item per configured target (or one failing item if the file is malformed)."""

    def collect(self):
        from fuzz.seeds import SeedError, load_seed

        settings = self.config.stash[_SETTINGS]
        try:
            seed = load_seed(self.path)
        except SeedError as e:
            yield SeedItem.from_parent(self, name=f"{self.path.stem}[malformed]", seed=None, spec=None,
                                       problem=str(e))
            return
        for spec in settings.specs:
            yield SeedItem.from_parent(self, name=f"{seed.id}[{spec}]", seed=seed, spec=spec, problem=None)


class SeedFailure(AssertionError):
    """A seed that fails on a target: the message is the spec's difference and how to replay it."""


class SeedItem(pytest.Item):
    def __init__(self, *, seed: Any, spec: str | None, problem: str | None, **kw: Any):
        super().__init__(**kw)
        self.seed, self.spec, self.problem = seed, spec, problem

    def runtest(self) -> None:
        if self.problem is not None:
            raise SeedFailure(f"malformed seed file: {self.problem}")
        settings = self.config.stash[_SETTINGS]
        target = settings.targets()[settings.specs.index(self.spec)]
        _replay(self.seed.run_case, target, f"seed {self.seed.id} ({self.path})",
                f"kvwindow replay {self.path} --target {self.spec}{settings.payload_flags()}")

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, SeedFailure):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style)

    def reportinfo(self):
        return self.path, None, f"kvwindow seed {self.name}"


def _replay(case: Any, target: Any, what: str, hint: str | None = None) -> None:
    """Run ``case`` on ``target``: skip with the reason if it cannot take it, fail with the difference (a
    mismatch), the death or the exception (a crash: the signal is named), or the harness fault that kept
    it from running."""
    from fuzz.targets.base import HARNESS, failure_kind

    why = target.accepts(case)
    if why is not None:
        pytest.skip(f"{what} cannot run on {target.name}: {why}")
    try:
        target.run(case)
    except Exception as e:  # noqa: BLE001 - any failure of the target is the finding
        verb = "could not be replayed (a harness fault, not a finding) on" if failure_kind(e) == HARNESS \
            else "fails on"
        raise SeedFailure(f"{what} {verb} {target.name}: {type(e).__name__}: {e}\n  case: {case}"
                          + (f"\n  replay: {hint}" if hint else "")) from None


# ---------------------------------------------------------------------------
# Pinned cases and the replay fixture


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    marks = list(metafunc.definition.iter_markers(MARKER))
    if not marks:
        return
    from fuzz.ops import Case, OpError

    name = metafunc.definition.name
    if "kvwindow_replay" not in metafunc.fixturenames:
        raise pytest.UsageError(f"{name}: @kvwindow.example needs the test to take the kvwindow_replay fixture")
    cases = []
    for m in reversed(marks):  # the order they are written in, top first
        try:
            cases.append(Case.parse(m.kwargs["window"], m.kwargs["ops"]))
        except (KeyError, OpError) as e:
            raise pytest.UsageError(f"{name}: @kvwindow.example(window=..., ops=...): {e}") from e
    metafunc.parametrize("kvwindow_replay", cases, indirect=True, ids=[c.id for c in cases])


@pytest.fixture
def kvwindow_replay(request: pytest.FixtureRequest):
    """``replay(case=None, *, window=None, target=None)``: run a case (the test's pinned one by default)
    on ``target`` (a ``--target`` value or a target) or on every configured target."""
    settings = request.config.stash[_SETTINGS]
    pinned = getattr(request, "param", None)

    def replay(case: Any = None, *, window: int | None = None, target: Any = None) -> None:
        from fuzz.ops import Case
        from fuzz.seeds import Seed, load_seed
        from fuzz.targets.base import Target

        if case is None:
            if pinned is None:
                raise pytest.UsageError("kvwindow_replay(): no case given and the test has no @kvwindow.example")
            case = pinned
        elif isinstance(case, Seed):
            case = case.run_case
        elif isinstance(case, (str, Path)) and window is None:
            case = load_seed(case).run_case
        elif isinstance(case, str):
            case = Case.parse(window, case)
        own = [resolve_target(target, settings.width, settings.dtype)] if target is not None else []
        targets = own or settings.targets()
        if not targets:
            raise pytest.UsageError("kvwindow_replay: no target (pass --kvwindow-target, set kvwindow_target, "
                                    "or call kvwindow_replay(target=...))")
        try:
            for t in targets:
                _replay(case, t, f"case {case.id} ({case})")
        finally:
            if not isinstance(target, Target):  # built here: its child stops here
                close_targets(own)

    return replay
