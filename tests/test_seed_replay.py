"""Every regression seed in fuzz/seeds/ replays against every target that can take it.

Parametrized ``<seed id>-<target>`` over every target the registry lists (the built-ins and each
``hf:<model_type>``). A target that is not available here, or a seed it cannot take (a window above
its maximum), is reported as skipped with the reason; a seed that hits a known finding of the target on
the installed release (``docs/findings/``) must reproduce it or pass, and is reported as skipped with
which. A file that is not a usable seed — unreadable, binary, not UTF-8, nested too deep, the wrong
shape, out of bounds — is one failing test naming the file (``MALFORMED:<name>``) while every other
seed still runs: collecting this module never fails. Native targets replay in an isolated child
(:mod:`fuzz.targets.isolated`), so a seed that crashes one fails its test instead of killing the test run.
"""

from functools import lru_cache

import pytest

from fuzz import seeds
from fuzz.targets import registry
from fuzz.replay import KNOWN, replay_outcome


def _seed_params(directory=None):
    out = []
    for path in seeds.seed_paths(seeds.SEED_DIR if directory is None else directory):
        try:
            s = seeds.load_seed(path)
        except seeds.SeedError as e:  # any undecodable file: SeedError names it (never a collection error)
            out.append(pytest.param(path, e, None, id=f"MALFORMED:{path.name}"))
            continue
        for name, _ in registry.listed_names():
            out.append(pytest.param(path, s, name, id=f"{s.id}-{name}"))
    return out


@lru_cache(maxsize=None)
def _target(name):
    from fuzz.targets import isolated

    try:
        return isolated.resolve(name), None
    except registry.TargetError as e:
        return None, str(e)
    except Exception as e:  # noqa: BLE001 - a broken factory is not this test's subject
        return None, f"{type(e).__name__}: {e}"


PARAMS = _seed_params()


@pytest.mark.skipif(not PARAMS, reason="no seeds in fuzz/seeds/")
@pytest.mark.parametrize("path,seed,target_name", PARAMS)
def test_seed_replays(path, seed, target_name):
    if isinstance(seed, seeds.SeedError):
        pytest.fail(f"malformed seed file {path}: {seed}")
    target, why = _target(target_name)
    if target is None:
        pytest.skip(f"{target_name} not available here: {why}")
    reason = target.accepts(seed.case)
    if reason is not None:
        pytest.skip(f"seed {seed.id} cannot run on {target_name}: {reason}")
    known = ", ".join(sorted(target.known_hits(seed.case)))  # the Target API: isolated targets answer it too
    out = replay_outcome(seed, target)
    err = None if out is None else out.message
    if known:
        assert out is None or out.kind == KNOWN, \
            f"seed {seed.id} ({path}) fails on {target_name} beyond known finding {known}: {err}"
        pytest.skip(f"seed {seed.id} hits known finding {known} on {target_name}: {err or 'not reproduced'}")
    assert out is None, f"seed {seed.id} ({path}) fails on {target_name}: {err}"


def test_malformed_seed_is_named(tmp_path):
    bad = tmp_path / "deadbeef0000.json"
    bad.write_text('{"format": 1, "window": 3, "ops": [["push"], ["chu')
    with pytest.raises(seeds.SeedError, match="deadbeef0000.json"):
        seeds.load_seed(bad)


def _old_id(doc) -> str:
    """The seed id as every committed seed was named: 12 hex digits of the SHA-256 of the canonical
    ``{"window", "ops"}`` JSON (written out here, independently of fuzz.ops.Case.id)."""
    import hashlib
    import json

    if "paged" in doc:  # a paged seed: the hash of its {"paged": {...}} form (fuzz.paged.ops.PagedCase.id)
        canon = json.dumps({"paged": doc["paged"]}, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canon.encode()).hexdigest()[:12]
    canon = json.dumps({"window": doc["window"], "ops": doc["ops"]}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canon.encode()).hexdigest()[:12]


@pytest.mark.parametrize("path", seeds.seed_paths(seeds.SEED_DIR), ids=lambda p: p.stem)
def test_committed_seed_keeps_its_id_and_file_format(path):
    import json

    try:
        s = seeds.load_seed(path)
    except seeds.SeedError:
        pytest.skip("malformed: test_seed_replays[MALFORMED:...] names it")
    doc = json.loads(path.read_text())
    assert s.id == doc["id"] == path.stem == _old_id(doc)
    # Loading and writing it again gives the same bytes: the file format did not change.
    assert seeds.format_seed(s.to_json()) + "\n" == path.read_text()
