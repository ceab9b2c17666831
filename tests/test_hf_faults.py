"""A transformers release the adapters cannot drive is never a finding: the probe at resolve time makes
the target unavailable, naming the release and the API (--target: a usage error; --list-targets: the
reason); an exception the adapter raises during a run is a HarnessFault (never a seed); an exception
transformers raises on a spec-valid op stays a finding."""

import pytest

pytest.importorskip("transformers")

from fuzz.cli import main  # noqa: E402
from fuzz.ops import Case, Chunk, Push  # noqa: E402
from fuzz.results import TargetResult  # noqa: E402
from fuzz.targets import registry  # noqa: E402
from fuzz.targets.base import HARNESS, HarnessFault, Mismatch, TargetFault, failure_kind  # noqa: E402
from fuzz.targets.hf import base as hf_base  # noqa: E402
from fuzz.targets.hf.caches import HFCacheTarget  # noqa: E402
from impl.hf import caches, compat, families, models  # noqa: E402

RELEASE = compat.info().transformers


def _incompatible(api):
    def probe(*args):
        raise compat.incompatible(api, "got an unexpected keyword argument 'batch_size'")
    return probe


@pytest.mark.parametrize("name, module, attr", [("hf-static", caches, "probe"), ("hf-dynamic", caches, "probe"),
                                                ("hf-gemma2", models, "probe"), ("hf:mistral", families, "probe")])
def test_an_incompatible_release_is_a_harness_fault_naming_release_and_api(monkeypatch, capsys, tmp_path, name, module,
                                                                            attr):
    """A release whose API the adapter cannot drive: a listed target is left out of a default campaign (the
    reason names release and API); named with --target it is a harness fault (exit 3, one line, DESIGN §4),
    never a usage error and never a finding."""
    monkeypatch.setattr(module, attr, _incompatible("HybridCache.__init__"))
    target, why = registry.probe(name)
    assert target is None and f"transformers {RELEASE}: HybridCache.__init__" in why
    with pytest.raises(TargetFault, match=f"harness fault: transformers {RELEASE}: HybridCache.__init__"):
        registry.resolve(name)
    rc = main(["fuzz", "--target", name, "--time", "1", "--seeds-dir", str(tmp_path / "s")])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 3 and len(err) == 1 and "HybridCache.__init__" in err[0] and RELEASE in err[0]
    assert not (tmp_path / "s").exists()
    assert main(["fuzz", "--list-targets"]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.split()[0] == name)
    assert f"unavailable: transformers {RELEASE}: HybridCache.__init__" in line


def test_an_adapter_exception_during_a_run_is_a_harness_fault(monkeypatch):
    """The adapter reading a tensor that is not there (4.54's ``key_cache[0]`` after reset was ``None``)."""
    def broken_rows(t):
        return None.detach()  # noqa - the adapter bug itself

    monkeypatch.setattr(caches, "_rows", broken_rows)
    for strict in (False, True):
        with pytest.raises(HarnessFault) as e:
            HFCacheTarget("dynamic", strict=strict).run(Case(3, [Chunk(4), Push()]))
        assert failure_kind(e.value) == HARNESS
        assert f"adapter error on transformers {RELEASE}" in e.value.reason and "AttributeError" in e.value.reason
        assert "impl/hf/caches.py" in e.value.reason or "test_hf_faults.py" in e.value.reason


def test_an_incompatibility_found_mid_run_is_a_harness_fault(monkeypatch):
    def gone(cache, index):
        raise compat.incompatible("DynamicCache.key_cache / .layers", "the cache has neither")

    monkeypatch.setattr(compat, "layer_kv", gone)
    with pytest.raises(HarnessFault, match="key_cache / .layers"):
        HFCacheTarget("dynamic").run(Case(3, [Chunk(4)]))


def _raised_inside_transformers() -> Exception:
    """An exception raised by transformers' own code. Which call raises differs between releases
    (4.54 and 4.55 accept ``DynamicCache().update(None, None, 0)``), so try several."""
    import transformers
    from transformers import cache_utils

    for call in (lambda: cache_utils.DynamicCache().update(None, None, 0),
                 lambda: transformers.AutoConfig.for_model("no-such-model-type")):
        try:
            call()
        except Exception as e:  # noqa: BLE001
            return e
    pytest.fail(f"no probe call raised inside transformers {transformers.__version__}")


def test_an_exception_raised_inside_transformers_is_the_implementations():
    assert hf_base.from_transformers(_raised_inside_transformers())
    try:
        None.detach()  # noqa
    except AttributeError as e:
        assert not hf_base.from_transformers(e)
    assert not hf_base.from_transformers(compat.incompatible("x", "y"))


@pytest.mark.skipif(compat.info().api != "layers", reason="the 5.x static layer raises once full (W > 2)")
def test_transformers_raising_on_a_valid_op_stays_a_finding():
    """docs/findings/hf-static-sliding-empty-update.md: W = 3, an empty update once full raises in transformers."""
    with pytest.raises(Mismatch, match="raised RuntimeError") as e:
        HFCacheTarget("static", strict=True).run(Case(3, [Chunk(3), Chunk(0)]))
    assert failure_kind(e.value) != HARNESS


@pytest.mark.skipif(not hasattr(TargetResult("x"), "faults"),
                    reason="the campaign's harness-fault handling (TargetResult.faults) is issue 13's, branch crash")
def test_a_campaign_never_saves_a_harness_fault_as_a_seed(monkeypatch, tmp_path):
    from fuzz.campaign import fuzz_target
    from fuzz.config import CampaignConfig

    monkeypatch.setattr(caches, "_rows", lambda t: None.detach())
    res = fuzz_target(HFCacheTarget("dynamic"), CampaignConfig(seconds=10, campaign_seed=0, seeds_dir=str(tmp_path)))
    assert not res.failures and res.faults and "adapter error" in res.faults[0]
    assert not list(tmp_path.iterdir())


def test_a_library_frame_inside_an_in_repo_venv_is_not_the_repositorys(tmp_path):
    """fuzz.targets.known.raised_inside: ``make`` puts ``.venv/`` inside the repository, so torch's frames live under
    the repository root; they are an installed library's, passed over like any other. Before, inductor's
    CppCompileError raised in torch under transformers' flex call counted as the adapter's (a harness fault, not
    the crash finding hf-flex-attention-sliding-compile) whenever the venv was in the checkout, as in CI."""
    from fuzz.targets.known import raised_inside

    repo = str(tmp_path / "repo")
    pkg = f"{repo}/.venv/lib/python3.11/site-packages/transformers"
    torch_file = f"{repo}/.venv/lib/python3.11/site-packages/torch/_inductor/x.py"

    def frame(path, body):
        ns = {}
        exec(compile(f"def f(g):\n    {body}\n", path, "exec"), ns)
        return ns["f"]

    inner = frame(torch_file, "raise RuntimeError('CppCompileError')")
    middle = frame(f"{pkg}/integrations/flex_attention.py", "return g(None)")
    adapter = frame(f"{repo}/impl/hf/families.py", "return g(lambda _: inner(None))")
    with pytest.raises(RuntimeError) as e:
        adapter(lambda h: middle(lambda _: inner(None)))
    assert raised_inside(e.value, pkg, repo)  # torch's frame passed over: transformers raised it
    with pytest.raises(RuntimeError) as e:
        adapter(lambda h: inner(None))  # the adapter called torch directly: its own fault
    assert not raised_inside(e.value, pkg, repo)
