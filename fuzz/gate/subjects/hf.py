"""``hf:<model_type>[+dynamic|+static][@ATTN]``: a transformers sliding-window family (:mod:`impl.hf.families`)
on one cache implementation, as a gate subject (the adapter: :class:`impl.subjects.hf.HFSubject`).

``+dynamic`` (the default) is the ``DynamicCache`` the model's config builds; ``+static`` the static
cache with sliding buffers. ``@ATTN`` picks the attention implementation (default ``sdpa`` where it
runs for the family, else ``eager``). Every sliding layer has window :data:`WINDOW`. Tolerance of cached against ``full()``:
:data:`impl.hf.families.ATOL` + :data:`impl.hf.families.RTOL` ``* |ref|`` (transformers computes norms,
RoPE and softmax in float32 inside a float64 model).
"""

from __future__ import annotations

import re
from functools import lru_cache

from fuzz.gate.protocol import Subject
from impl.hf import compat, families

PREFIXES = ("hf:",)
SYNTAX = ("hf:MODEL_TYPE[+dynamic|+static][@eager|@sdpa] (a transformers sliding-window family: "
          + ", ".join(families.FAMILIES) + ")",)
#: The sliding window of the gate's HF models (every sliding layer): small, so a gate's streams stay short
#: (transformers costs milliseconds a call even on tiny models).
WINDOW = 4
SPEC = re.compile(r"hf:(?P<mt>[A-Za-z0-9_]+)(\+(?P<cache>[a-z]+))?(@(?P<attn>[a-z_]+))?$")


@lru_cache(maxsize=None)
def offered(model_type: str) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...], str, tuple[str, ...]]:
    """``(attention implementations that run here, why the others do not, class name, layer types)``,
    tried once per family and process (a baseline and a candidate of one family ask the same)."""
    fam = families.Family(model_type)
    return (tuple(fam.attn_impls(flex=False)), tuple(fam.attn_unavailable.items()), fam.cls.__name__,
            tuple(fam.layer_types()))


def build(spec: str) -> Subject:
    m = SPEC.match(spec)
    if m is None:
        raise ValueError("expected hf:MODEL_TYPE[+dynamic|+static][@ATTN], e.g. hf:mistral+static")
    mt, cache, attn = m["mt"], m["cache"] or "dynamic", m["attn"]
    from impl.subjects.hf import CACHES, HFSubject

    if cache not in CACHES:
        raise ValueError(f"unknown cache implementation +{cache}; known: {', '.join('+' + c for c in CACHES)}")
    if mt not in families.FAMILIES:
        raise ValueError(f"unknown family {mt!r}; known: {', '.join(families.FAMILIES)}")
    info = compat.info()  # HFUnavailable (an Unavailable) without transformers
    why = families.available()[mt]
    if why is not None:
        raise compat.HFUnavailable(why)
    runs, why_not, cls_name, types = offered(mt)
    if attn is None:
        attn = "sdpa" if "sdpa" in runs else "eager"
    elif attn not in runs:
        raise ValueError(f"attention {attn!r} does not run here for {mt} (offered: {', '.join(runs)}; "
                         + "; ".join(f"{a}: {w}" for a, w in why_not) + ")")
    factory = lambda: HFSubject(mt, cache, attn, window=WINDOW)  # noqa: E731
    factory()
    return Subject(spec, factory, (families.ATOL, families.RTOL),
                   f"transformers {info.transformers} {cls_name} (tiny, seeded), {cache} cache, {attn} attention, "
                   f"sliding window {WINDOW}, layers {list(types)}", info.versions())
