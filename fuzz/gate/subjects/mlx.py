"""``mlx:<model_type>[+model|+rotating]``: an mlx-lm tiny model on its own prompt cache (``+model``, the default)
or on a ``RotatingKVCache(max_size=W)`` per layer (``+rotating``), as a gate subject (the adapter:
:class:`impl.subjects.mlx.MlxSubject`). Where mlx-lm is not installed (``pip install 'kvwindow[mlx]'``) the
subject is a usage error naming it. Tolerance of cached against ``full()``: :data:`impl.subjects.mlx.TOLERANCE`
(float32 on both paths).
"""

from __future__ import annotations

import re

from fuzz.gate.protocol import Subject

PREFIXES = ("mlx:",)
SYNTAX = ("mlx:MODEL_TYPE[+model|+rotating] (an mlx-lm tiny model: llama, mistral, gemma2)",)
#: The sliding window of the gate's mlx models (as hf:'s: short streams).
WINDOW = 4
SPEC = re.compile(r"mlx:(?P<mt>[A-Za-z0-9_]+)(\+(?P<cache>[a-z]+))?$")


def build(spec: str) -> Subject:
    m = SPEC.match(spec)
    if m is None:
        raise ValueError("expected mlx:MODEL_TYPE[+model|+rotating], e.g. mlx:llama+rotating")
    from impl.engines import installed
    from impl.engines import mlx as engine

    installed(engine.DIST, engine.EXTRA)  # EngineUnavailable naming the extra where mlx-lm is missing
    from impl.subjects.mlx import TOLERANCE, MlxSubject

    mt, cache = m["mt"], m["cache"] or "model"
    factory = lambda: MlxSubject(mt, cache, window=WINDOW)  # noqa: E731
    probe = factory()
    return Subject(spec, factory, TOLERANCE,
                   f"mlx-lm {engine.release()} {mt} (tiny, seeded, loaded by mlx_lm.utils.load_model), "
                   f"{'its own prompt cache' if cache == 'model' else 'RotatingKVCache(max_size=W) per layer'}, "
                   f"sliding window {WINDOW}, windows {probe.identity()['window']}", {"mlx-lm": engine.release()})
