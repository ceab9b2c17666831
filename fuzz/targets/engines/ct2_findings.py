"""The written-up CTranslate2 findings (``docs/findings/ct2-*.md``). Each row's ``hits`` reads the case
only (through :func:`fuzz.targets.engines.lm.plan`, the same streams the target drives); ``failure``
says which failures it explains, so a different failure on the same case is still raised."""

from __future__ import annotations

from fuzz.ops import Case, Chunk, Push
from fuzz.targets.base import Crash, Mismatch
from fuzz.targets.engines import lm
from fuzz.targets.known import Finding
from impl.engines.tiny import VOCAB_SIZE

KINDS = frozenset({"ct2:mistral", "ct2:gemma2", "ct2:gemma3_text"})
#: The models with sliding layers after conversion (Gemma 2 has none: ct2-gemma2-window-dropped).
SLIDING = frozenset({"ct2:mistral", "ct2:gemma3_text"})
#: The kind of a target that also drives the ragged ``forward_batch`` (``paths`` with ``batch``; not a default
#: path: :mod:`fuzz.targets.engines.ct2`).
BATCH = "/batch"
#: scripts/engine_matrix.sh ct2 (every release paired with transformers 4.57.6): each finding reproduced on
#: every release that can drive its path (generate_batch's return_logits_vocab came with 4.4; the Gemma 2
#: loader with 4.4, the Gemma 3 loader with 4.7).
EVERY = ("4.0.0", "4.2.1", "4.4.0", "4.5.0", "4.6.0", "4.7.1", "4.8.5")
FROM_44 = ("4.4.0", "4.5.0", "4.6.0", "4.7.1", "4.8.5")


def generation_histories(s: lm.Stream) -> list[int]:
    """The history length before each run of pushes of the ``generate`` path (what is forwarded at once)."""
    return [h for h, _ in generation_runs(s)]


def generation_runs(s: lm.Stream) -> list[tuple[int, int]]:
    """``(history length, pushes generated)`` of each run of pushes of the ``generate`` path."""
    out, hist, k, calls = [], 0, 0, s.calls
    while k < len(calls):
        _, op, _, n = calls[k]
        if isinstance(op, Chunk) or hist == 0:
            hist += n
            k += 1
            if isinstance(op, Chunk):
                continue
        run = 0
        while k < len(calls) and isinstance(calls[k][1], Push):
            run += 1
            k += 1
        if run:
            out.append((hist, run))
            hist += run
    return out


def _forward_past_window(case: Case) -> bool:
    """A stream longer than W: ``forward_batch`` / ``score_batch`` of its whole row raise (the ``forward`` and
    ``score`` paths)."""
    return any(s.length > s.window for s in lm.plan(case, VOCAB_SIZE))


def _ragged_batch(case: Case) -> bool:
    """Any stream: the ``batch`` path's two rows always differ in length, and a ragged ``forward_batch`` raises
    on every pair of lengths for every window below 32 (measured W = 2 .. 30, rows 1 .. 12; it works from
    W = 32), so for the windows a campaign draws every case of a target driving that path hits it."""
    return bool(lm.plan(case, VOCAB_SIZE))


def _prefill_past(case: Case, min_window: int) -> bool:
    for s in lm.plan(case, VOCAB_SIZE):
        hs = generation_histories(s)
        if s.window >= min_window and hs and (max(hs) >= s.window + 2 or min(hs[0], len(s.other)) >= s.window + 2):
            return True
    return False


def _prefill_past_window(case: Case) -> bool:
    """Mistral (and the Gemma 2 conversion): a prompt of W + 2 or more at W >= 2 (W = 1 agrees, measured)."""
    return _prefill_past(case, 2)


def _prefill_past_window_any(case: Case) -> bool:
    """Gemma 3: a prompt of W + 2 or more at any W (at W = 1 prompts of 3 .. 8 tokens disagree by 0.02 .. 0.08)."""
    return _prefill_past(case, 1)


def _ragged_one_token(case: Case) -> bool:
    for s in lm.plan(case, VOCAB_SIZE):
        hs = generation_histories(s)
        if hs and min(hs[0], len(s.other)) == 1 and max(hs[0], len(s.other)) > 1:
            return True
    return False


def _longer_than_window(case: Case) -> bool:
    """A stream, or the second row of its first ragged generation (``s.other`` then the run's pushes; the last
    generated token is not fed, so its last query is at ``len(other) + steps - 2``), longer than W."""
    def other_row(s: lm.Stream) -> int:
        runs = generation_runs(s)
        return len(s.other) + (runs[0][1] - 1 if runs else 0)
    return any(s.length > s.window or other_row(s) > s.window for s in lm.plan(case, VOCAB_SIZE))


def _says(*words: str):
    return lambda e: isinstance(e, (Mismatch, Crash)) and any(w in str(e) for w in words)


FINDINGS: tuple[Finding, ...] = (
    Finding("ct2-forward-past-window", SLIDING, ("4.0+",), EVERY, _forward_past_window,
            "forward_batch / score_batch of a row longer than W",
            failure=lambda e: isinstance(e, Crash) and ("forward_batch" in str(e) or "score_batch" in str(e))
            and "ragged" not in str(e)),
    Finding("ct2-forward-past-window", frozenset(k + BATCH for k in SLIDING), ("4.0+",), EVERY, _ragged_batch,
            "forward_batch of two rows of different lengths, W < 32 (the opt-in batch path)",
            failure=lambda e: isinstance(e, Crash) and "2 ragged rows" in str(e)),
    Finding("ct2-chunked-prefill-window", frozenset({"ct2:mistral", "ct2:gemma2"}), ("4.4+",), FROM_44,
            _prefill_past_window, "generate with a prompt of W + 2 tokens or more forwarded at once (W >= 2)",
            failure=_says("[generate_batch", "[generate_tokens]")),
    Finding("ct2-chunked-prefill-window", frozenset({"ct2:gemma3_text"}), ("4.7+",), ("4.7.1", "4.8.5"),
            _prefill_past_window_any, "generate with a prompt of W + 2 tokens or more forwarded at once (any W)",
            failure=_says("[generate_batch", "[generate_tokens]")),
    Finding("ct2-ragged-one-token-prompt", KINDS, ("4.4+",), FROM_44, _ragged_one_token,
            "generate_batch of ragged prompts one of which is a single token",
            failure=_says("[generate_batch row")),
    Finding("ct2-gemma2-window-dropped", frozenset({"ct2:gemma2"}), ("4.4+",), FROM_44, _longer_than_window,
            "any Gemma 2 stream longer than W", failure=lambda e: isinstance(e, Mismatch)),
)
