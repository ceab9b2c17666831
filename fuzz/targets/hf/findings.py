"""Known disagreements between transformers and the spec, each written up in ``docs/findings/``.

Harness logic (it classifies op lists), so it lives in ``fuzz/``; the HF
adapters themselves are in :mod:`impl.hf`.

A target built with ``strict=False`` (the default for campaigns) leaves out
the cases that hit a finding listed here for the installed cache API, so a
campaign keeps exploring everything else instead of re-finding the same bug
every run; ``strict=True`` drives them too (that is how the findings are
reproduced in ``tests/test_hf_findings.py``). Each predicate looks only at
the case (window + ops), never at results, so leaving a case out cannot hide
a new bug in a case that does not match it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from fuzz.ops import Case, Chunk, Push, Reset


@dataclass(frozen=True)
class Finding:
    id: str
    doc: str
    #: (target kind, cache API) pairs it applies to; kind is "dynamic", "static", "mistral", "gemma2".
    applies: frozenset[tuple[str, str]]
    #: Does the case exercise it?
    hits: Callable[[Case], bool]


def ops_with_windows(case: Case):
    """Yield ``(window, tokens before, op)`` for every op of ``case`` that is not a reset."""
    w, n = case.window, 0
    for op in case.ops:
        if isinstance(op, Reset):
            w, n = op.window, 0
            continue
        yield w, n, op
        n += op.tokens


def _window_one(case: Case) -> bool:
    return any(w == 1 and op.tokens > 0 for w, _, op in ops_with_windows(case))


def _empty_update_when_full(case: Case) -> bool:
    return any(isinstance(op, Chunk) and op.n == 0 and n >= w for w, n, op in ops_with_windows(case))


def _empty_update(case: Case) -> bool:
    return any(isinstance(op, Chunk) and op.n == 0 for op in case.ops)


def _legacy_not_prefill_then_decode(case: Case) -> bool:
    """4.45 sliding buffers are right only for: one prefill of >= W tokens at the start of a stream
    (or none, staying below W - 1 tokens), then single-token decoding."""
    for w, n, op in ops_with_windows(case):
        k = op.tokens
        if k == 0:
            continue
        first = n == 0
        if first and k >= w:
            continue  # the supported prefill
        if n >= w and k == 1:
            continue  # decoding on a full buffer
        if n + k <= w - 1 and (first or k == 1):
            continue  # filling, never touching the last slot
        return True
    return False


def _legacy_model_unsupported(case: Case) -> bool:
    """The model-level form: a stream that reaches ``W`` tokens must start with one prefill of
    ``>= W`` tokens and continue with single decoded tokens only (in generate mode a chunk after
    generated tokens is fed together with the last of them, a multi-token update)."""
    for w, stream in case.streams():
        seg = [op for _, op in stream if op.tokens > 0]
        total = sum(op.tokens for op in seg)
        if total <= w - 1:
            continue
        if not (isinstance(seg[0], Chunk) and seg[0].n >= w):
            return True
        if any(not isinstance(op, Push) for op in seg[1:]):
            return True
    return False


FINDINGS = (
    Finding("hf-sliding-window-1", "docs/findings/hf-sliding-window-1.md",
            frozenset({("dynamic", "layers"), ("mistral", "layers"), ("gemma2", "layers")}), _window_one),
    Finding("hf-static-sliding-empty-update", "docs/findings/hf-static-sliding-empty-update.md",
            frozenset({("static", "layers")}), _empty_update_when_full),
    Finding("hf-static-sliding-empty-update", "docs/findings/hf-static-sliding-empty-update.md",
            frozenset({("static", "legacy")}), _empty_update),
    Finding("hf-445-sliding-cache", "docs/findings/hf-445-sliding-cache.md",
            frozenset({("static", "legacy")}), _legacy_not_prefill_then_decode),
    Finding("hf-445-sliding-cache", "docs/findings/hf-445-sliding-cache.md",
            frozenset({("gemma2", "legacy")}), _legacy_model_unsupported),
)


def known_hit(kind: str, api: str, case: Case) -> Finding | None:
    """The first finding that applies to this target and API and that the case exercises."""
    for f in FINDINGS:
        if (kind, api) in f.applies and f.hits(case):
            return f
    return None
