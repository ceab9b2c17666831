"""``hf:<model_type>[+dynamic|+static][@ATTN]``: a transformers sliding-window family (:mod:`impl.hf.families`)
on one cache implementation, as a gate subject (the adapter: :class:`impl.subjects.hf.HFSubject`).

``+dynamic`` (the default) is the ``DynamicCache`` the model's config builds; ``+static`` the static
cache with sliding buffers. ``@ATTN`` picks the attention implementation (default ``sdpa`` where the
family's class declares it, else ``eager``). Tolerance of cached against ``full()``:
:data:`impl.hf.families.ATOL` + :data:`impl.hf.families.RTOL` ``* |ref|`` (transformers computes norms,
RoPE and softmax in float32 inside a float64 model).
"""

from __future__ import annotations

import re

from fuzz.gate.protocol import Subject
from impl.hf import compat, families

PREFIXES = ("hf:",)
SYNTAX = ("hf:MODEL_TYPE[+dynamic|+static][@eager|@sdpa] (a transformers sliding-window family: "
          + ", ".join(families.FAMILIES) + ")",)
SPEC = re.compile(r"hf:(?P<mt>[A-Za-z0-9_]+)(\+(?P<cache>[a-z]+))?(@(?P<attn>[a-z_]+))?$")


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
    fam = families.Family(mt)
    offered = fam.attn_impls(flex=False)
    if attn is None:
        attn = "sdpa" if "sdpa" in offered else "eager"
    elif attn not in offered:
        raise ValueError(f"attention {attn!r} does not run here for {mt} (offered: {', '.join(offered)}; "
                         + "; ".join(f"{a}: {w}" for a, w in fam.attn_unavailable.items()) + ")")
    factory = lambda: HFSubject(mt, cache, attn)  # noqa: E731
    factory()
    return Subject(spec, factory, (families.ATOL, families.RTOL),
                   f"transformers {info.transformers} {fam.cls.__name__} (tiny, seeded), {cache} cache, {attn} "
                   f"attention, layers {fam.layer_types()}", info.versions())
