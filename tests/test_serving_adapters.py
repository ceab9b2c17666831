"""The serving adapters' table (impl.serving.ADAPTERS) as the harness will use it, in any venv.

Every entry resolves to a no-argument class of the paged protocol that declares its ops, documents its
window convention, and refuses what its engine lacks with a typed error; where the engine is not
installed (the default venv), ``configure`` raises ``EngineUnavailable`` naming how to get it — a
harness fault, never a finding.
"""

from __future__ import annotations

import importlib
import importlib.util

import pytest

from impl.engines import EngineUnavailable
from impl.serving import ADAPTERS
from impl.serving._base import Unsupported

PROTOCOL = ("configure", "add", "append", "append_chunk", "fork", "free", "read", "table", "free_blocks")


def _cls(spec):
    mod, name = spec.split(":")
    return getattr(importlib.import_module(mod), name)


def test_the_table_names_the_three_targets():
    assert sorted(ADAPTERS) == ["sglang:swa", "vllm:hybrid", "vllm:swa"]


@pytest.mark.parametrize("target", sorted(ADAPTERS))
def test_each_adapter_is_a_paged_protocol_class(target):
    cls = _cls(ADAPTERS[target])
    obj = cls()  # no arguments (DESIGN §4)
    for op in PROTOCOL:
        assert callable(getattr(obj, op)), f"{target} lacks {op}"
    assert set(cls.ops) <= set(PROTOCOL) | {"admit", "read_full"} and "fork" not in cls.ops
    doc = importlib.import_module(cls.__module__).__doc__
    assert ("sliding_window = W" in doc) if target.startswith("vllm") else ("sliding_window_size = W - 1" in doc)
    assert cls.engine_window(7) == (7 if target.startswith("vllm") else 6)
    with pytest.raises(Unsupported, match="fork"):
        obj.fork(0, 1)


@pytest.mark.parametrize("target", sorted(ADAPTERS))
def test_without_the_engine_configure_says_how_to_get_it(target):
    engine = target.split(":")[0]
    if importlib.util.find_spec(engine) is not None:
        pytest.skip(f"{engine} is installed here (.venv-serving): tests/test_serving_{engine}.py runs it")
    with pytest.raises(EngineUnavailable, match="install_serving_cores"):
        _cls(ADAPTERS[target])().configure(4, 2, 8, 1)
