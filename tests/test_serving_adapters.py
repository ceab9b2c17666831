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


# -- token ids (impl/serving/_base.py TokenIds): what vLLM's prefix cache keys blocks by -----------------------


def _payload(*xs):
    import numpy as np

    return np.array(xs, np.float32)


def test_token_ids_are_equal_exactly_when_the_payloads_are():
    from impl.serving._base import TokenIds

    tok = TokenIds("vllm", "test", "Request(prompt_token_ids)")
    a = tok(_payload(1.0, 2.0), _payload(3.0, 4.0))
    assert tok(_payload(1.0, 2.0), _payload(3.0, 4.0)) == a
    others = [tok(_payload(1.0, 2.0), _payload(3.0, 5.0)), tok(_payload(3.0, 4.0), _payload(1.0, 2.0)),
              tok(_payload(-0.0, 2.0), _payload(3.0, 4.0)), tok(_payload(0.0, 2.0), _payload(3.0, 4.0))]
    assert len({a, *others}) == 5  # a key/value swap and -0.0 vs 0.0 are other payloads
    assert len(tok) == 5


def test_token_ids_fit_31_bits_and_never_collide_where_a_digest_would():
    import numpy as np

    from impl.serving._base import TOKEN_ID_BITS, TokenIds

    tok = TokenIds("vllm", "test", "Request(prompt_token_ids)")
    rng = np.random.default_rng(0)
    keys = rng.standard_normal((200_000, 2)).astype(np.float32)  # a 31-bit digest collides after ~50,000
    ids = [tok(k, k) for k in keys]
    distinct = len({k.tobytes() for k in keys})
    assert len(set(ids)) == distinct and max(ids) < 2 ** TOKEN_ID_BITS == 2 ** 31
    assert [tok(k, k) for k in keys[:1000]] == ids[:1000]  # stable within the pool


def test_token_ids_replay_alike_and_follow_first_sight():
    from impl.serving._base import TokenIds

    stream = [(_payload(float(i % 7)), _payload(float(i % 3))) for i in range(50)]
    one, two = TokenIds("vllm", "t", "api"), TokenIds("vllm", "t", "api")
    got = [one(k, v) for k, v in stream]
    assert got == [two(k, v) for k, v in stream]  # a seed replay (a new pool) sees the same ids
    assert got[:3] == [0, 1, 2] and sorted(set(got)) == list(range(21))


def test_a_pool_past_its_ids_is_a_harness_fault_naming_the_api():
    from impl.engines import EngineIncompatible
    from impl.serving._base import TokenIds

    tok = TokenIds("vllm", "9.9.9", "Request(prompt_token_ids)", bits=2)
    for i in range(4):
        assert tok(_payload(float(i)), _payload(0.0)) == i
    assert tok(_payload(0.0), _payload(0.0)) == 0  # a payload seen before still has its id
    with pytest.raises(EngineIncompatible, match=r"vllm 9\.9\.9: Request\(prompt_token_ids\).*2\*\*2"):
        tok(_payload(4.0), _payload(0.0))


def test_an_adapter_fault_mid_case_is_a_harness_fault_not_a_crash():
    """A serving target's adapter that cannot go on (e.g. a pool past 2**31 distinct payloads) raises
    EngineIncompatible from an op: the campaign must call that a harness fault, never save it as a crash."""
    from fuzz.paged.ops import Add, Chunk, PagedCase
    from fuzz.targets.base import Crash, HarnessFault
    from fuzz.targets.paged import PagedTarget
    from impl.engines import EngineIncompatible, EngineUnavailable
    from impl.paged import PagedC
    from impl.serving._base import TokenIds

    class OutOfIds:
        """PagedC behind the adapters' entry points (append / append_chunk), with a 3-bit id table."""

        def __init__(self):
            self.pool = PagedC()
            self.tok = TokenIds("vllm", "9.9.9", "Request(prompt_token_ids)", bits=3)

        def __getattr__(self, name):  # configure, add, free, read, table, free_blocks
            if name in ("configure", "add", "free", "read", "table", "free_blocks", "close"):
                return getattr(self.pool, name)
            raise AttributeError(name)

        def append_chunk(self, seq, entries):
            entries = list(entries)
            for e in entries:
                self.tok(e[1], e[2])
            return self.pool.append_chunk(seq, entries)

        def append(self, seq, pos, key, value):
            self.tok(key, value)
            return self.pool.append(seq, pos, key, value)

    case = PagedCase(4, 2, 16, 2, (Add(0), Chunk(0, 4), Chunk(0, 5)))
    t = PagedTarget("vllm:test", OutOfIds)
    with pytest.raises(Crash, match=r"at op #2 .*EngineIncompatible"):  # a paged-py class's exception: its crash
        t.run(case)
    t.adapter_faults = (EngineUnavailable,)
    with pytest.raises(HarnessFault, match=r"at op #2: vllm 9\.9\.9: Request\(prompt_token_ids\)"):
        t.run(case)
    assert issubclass(EngineIncompatible, EngineUnavailable)
