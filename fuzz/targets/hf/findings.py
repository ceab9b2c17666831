"""Known disagreements between transformers and the spec, each written up in ``docs/findings/``: the one
machine-readable table of which targets and releases they apply to, and which cases exercise them.

Harness logic (it classifies op lists), so it lives in ``fuzz/``; the HF adapters themselves are in
:mod:`impl.hf`.

Each :class:`Finding` row names the targets it applies to (:attr:`Finding.kinds`: ``dynamic``,
``static``, ``mistral``, ``gemma2`` for the built-in targets, ``hf:<model_type>`` for the family
targets), the minor series it applies to (:attr:`Finding.releases`), the releases the matrix
(``scripts/hf_matrix.sh``) reproduced it on (:attr:`Finding.seen`, the release tables of the
``docs/findings`` notes; ``tests/test_hf_findings.py`` checks that both agree), and a case predicate
(:attr:`Finding.hits`) that looks only at the case, never at results. A finding with several parts
(or several predicates) has one row per part under the same id.

What a target does with a case that hits a finding (:class:`fuzz.targets.hf.base.HFTarget`): by
default it runs it and records whether the finding reproduced (a failure the finding explains, see
:meth:`Finding.explains`) — a failure it does not explain is an ordinary finding; ``skip_known``
leaves the case out (exploration); ``strict`` drives it like any other case (how the findings are
reproduced in ``tests/test_hf_findings.py``).
"""

from __future__ import annotations

import dataclasses
from typing import Iterable

from fuzz.ops import Case, Chunk, Reset
from fuzz.targets.known import Finding, in_span, minor, span_text  # noqa: F401 - the table's row type, re-exported

#: Where the notes live; a finding's note is ``docs/findings/<id>.md``.
DOCS = "docs/findings"


def ops_with_windows(case: Case):
    """Yield ``(window, tokens before, op)`` for every op of ``case`` that is not a reset."""
    w, n = case.window, 0
    for op in case.ops:
        if isinstance(op, Reset):
            w, n = op.window, 0
            continue
        yield w, n, op
        n += op.tokens


def _fed(stream) -> list:
    """The ops of a stream that feed tokens."""
    return [op for _, op in stream if op.tokens > 0]


# -- predicates ---------------------------------------------------------------------------------


def _window_one(case: Case) -> bool:
    """A token fed at W = 1 (a cache layer holds it)."""
    return any(w == 1 and op.tokens > 0 for w, _, op in ops_with_windows(case))


def _window_one_cached(case: Case) -> bool:
    """A W = 1 stream with a call after the first one (a model reads the cache back)."""
    return any(w == 1 and len(_fed(s)) >= 2 for w, s in case.streams())


def _empty_update_when_full(case: Case) -> bool:
    return any(isinstance(op, Chunk) and op.n == 0 and n >= w for w, n, op in ops_with_windows(case))


def _empty_update(case: Case) -> bool:
    return any(isinstance(op, Chunk) and op.n == 0 for op in case.ops)


def _decode_through_w_minus_1(case: Case) -> bool:
    """hf-445-sliding-cache part 1: a single token at position ``W - 1`` after cached tokens (a stream
    that reaches ``W`` without a prefill of ``>= W``)."""
    return any(op.tokens == 1 and n == w - 1 and n >= 1 for w, n, op in ops_with_windows(case))


def _chunk_after_cached(case: Case) -> bool:
    """hf-445-sliding-cache parts 2/3: a chunk of ``>= 2`` tokens after cached tokens."""
    return any(op.tokens >= 2 and n >= 1 for _, n, op in ops_with_windows(case))


def _model_chunk_after_cached(case: Case) -> bool:
    """The model-level form of parts 2/3: a stream that reaches ``W`` tokens and feeds a chunk after its
    first call (in generate mode a chunk after generated tokens is fed together with the last of them,
    a multi-token update, so a chunk of one counts too)."""
    for w, stream in case.streams():
        fed = _fed(stream)
        if sum(op.tokens for op in fed) >= w and any(isinstance(op, Chunk) for op in fed[1:]):
            return True
    return False


def _reset_same_window_after_tokens(case: Case) -> bool:
    """``reset:W`` to the stream's own window after the layer held tokens, then any update: the adapter
    resets the same layer object through transformers' ``reset()`` (a reset to another window builds
    a new one)."""
    w, held, after_reset = case.window, False, False
    for op in case.ops:
        if isinstance(op, Reset):
            if op.window == w:
                after_reset = after_reset or held
            else:
                w, held, after_reset = op.window, False, False
            continue
        if after_reset:
            return True
        held = held or op.tokens > 0
    return False


def _beyond_window(case: Case) -> bool:
    """A stream longer than its window (a query with a key outside it)."""
    return any(sum(op.tokens for op in _fed(s)) > w for w, s in case.streams())


def _decode_after_prefill(case: Case) -> bool:
    """A stream with a call after its first (the prefill)."""
    return any(len(_fed(s)) >= 2 for _, s in case.streams())


def _cb_window_one_prompt(case: Case) -> bool:
    """hf-cb-window-1-prefill: a W = 1 stream with a prompt of 2 or more tokens (``Chunk(n >= 2)``: a request
    whose prefill may be scheduled as one chunk of 2 or more tokens; whether it is depends on ``max_batch_tokens``
    and the requests ahead of it, so a hit may pass)."""
    return any(w == 1 and isinstance(op, Chunk) and op.n >= 2 for w, _, op in ops_with_windows(case))


def _cb_request_past_window(case: Case) -> bool:
    """hf-cb-sliding-ring-start: a request (as :func:`fuzz.targets.hf.cb.requests_of` groups a stream: a chunk and
    the pushes after it) with a query at position W or later (prompt + pushes > W), which reads the ring buffer
    after it has wrapped or been partly filled."""
    for w, stream in case.streams():
        length = 0
        for _, op in stream:
            if isinstance(op, Chunk):
                length = op.n if op.n > 0 else length
            else:
                length += op.tokens
            if length > w:
                return True
    return False


def _in_padded_row(error: BaseException) -> bool:
    return bool(getattr(error, "padded", False))


def _decode_past_window_after_prefill(case: Case) -> bool:
    """A stream whose first call feeds two or more tokens and whose later call of one token is past W (the
    availability probe's stream, W = 3: a prefill of 4, then decode steps)."""
    for w, stream in case.streams():
        fed = _fed(stream)
        if len(fed) >= 2 and fed[0].tokens >= 2:
            n = fed[0].tokens
            for op in fed[1:]:
                n += op.tokens
                if op.tokens == 1 and n > w:
                    return True
    return False


def _flex_compile_error(error: BaseException) -> bool:
    """Inductor failed to compile flex attention's CPU kernel (the message names flex attention and the compile
    error, whether a case's run or the availability probe raised it)."""
    text = str(error)
    return "flex_attention" in text and ("CppCompileError" in text or "InductorError" in text)



# -- the table ------------------------------------------------------------------------------------

#: Every family target (``hf:<model_type>``) of :data:`impl.hf.families.FAMILIES`, by name.
FAMILY_KINDS = frozenset(f"hf:{mt}" for mt in ("mistral", "mixtral", "qwen2", "qwen3", "gemma2", "gemma3_text",
                                                "cohere2", "phi3", "starcoder2", "gpt_oss"))
#: Every continuous-batching target (``hf-cb:<model_type>``, :mod:`fuzz.targets.hf.cb`).
CB_KINDS = frozenset(f"hf-cb:{k[3:]}" for k in FAMILY_KINDS)
#: Family targets whose default cache on the legacy API is the whole-model static sliding cache.
HYBRID_KINDS = frozenset({"hf:gemma2", "hf:gemma3_text", "hf:cohere2", "hf:gpt_oss"})
_LAYERS_API = ("4.57+",)
_LEGACY_API = ("4.45-4.56",)

#: hf-cb-window-1-prefill: continuous batching has sliding-window support from 4.57 (PR #40688); the note says
#: which releases were run.
CB_W1_RELEASES = ("4.57+",)
CB_W1_SEEN = ("5.10.4", "5.20.2", "5.25.0")
#: hf-cb-sliding-ring-start: the ring buffer's read start before PR #47708, fixed in 5.16 (the note says which
#: releases were run, and with what).
CB_RING_RELEASES = ("5.0-5.15",)
CB_RING_SEEN = ("5.10.4", "5.12.1", "5.15.1")

FINDINGS: tuple[Finding, ...] = (
    # the cache targets and hf-mistral / hf-gemma2 read the stored keys back after every op
    Finding("hf-sliding-window-1", frozenset({"dynamic", "mistral", "gemma2"}), _LAYERS_API,
            ("4.57.6", "5.0.0", "5.10.4", "5.20.2", "5.24.0", "5.25.0"), _window_one, "a token fed at W = 1"),
    # the family targets see it in the logits of a call on the cache
    Finding("hf-sliding-window-1", FAMILY_KINDS, _LAYERS_API,
            ("4.57.6", "5.0.0", "5.10.4", "5.20.2", "5.24.0", "5.25.0"), _window_one_cached,
            "a W = 1 stream with a call after its first"),
    Finding("hf-static-sliding-empty-update", frozenset({"static"}), ("4.45-4.55",),
            ("4.45.2", "4.46.3", "4.47.1", "4.48.3", "4.49.0", "4.50.3", "4.51.3", "4.52.4", "4.53.3", "4.54.1",
             "4.55.4"), _empty_update, "an empty chunk"),
    Finding("hf-static-sliding-empty-update", frozenset({"static"}), ("4.56+",),
            ("4.56.2", "4.57.6", "5.0.0", "5.10.4", "5.20.2", "5.24.0", "5.25.0"), _empty_update_when_full,
            "an empty chunk once the window is full"),
    # part 1: early eviction at W - 1 (fixed in 4.52)
    Finding("hf-445-sliding-cache", frozenset({"static", "gemma2"}) | HYBRID_KINDS, ("4.45-4.51",),
            ("4.45.2", "4.46.3", "4.47.1", "4.48.3", "4.49.0", "4.50.3", "4.51.3"), _decode_through_w_minus_1,
            "part 1: one token at position W - 1 after cached tokens"),
    # parts 2/3: a chunk after cached tokens on the static sliding buffer (fixed in 4.57)
    Finding("hf-445-sliding-cache", frozenset({"static"}), _LEGACY_API,
            ("4.45.2", "4.46.3", "4.47.1", "4.48.3", "4.49.0", "4.50.3", "4.51.3", "4.52.4", "4.53.3", "4.54.1",
             "4.55.4", "4.56.2"), _chunk_after_cached,
            "parts 2/3: a chunk of 2 or more after cached tokens"),
    Finding("hf-445-sliding-cache", frozenset({"gemma2"}) | HYBRID_KINDS, _LEGACY_API,
            ("4.45.2", "4.46.3", "4.47.1", "4.48.3", "4.49.0", "4.50.3", "4.51.3", "4.52.4", "4.53.3", "4.54.1",
             "4.55.4", "4.56.2"), _model_chunk_after_cached,
            "parts 2/3: a stream reaching W with a chunk after its first call"),
    Finding("hf-dynamic-reset-stale", frozenset({"dynamic"}), ("4.57-5.17",),
            ("4.57.6", "5.0.0", "5.10.4", "5.12.1", "5.15.1", "5.17.0"), _reset_same_window_after_tokens,
            "an update after reset:W to the same window once the layer held tokens"),
    Finding("hf-window-ignored", frozenset({"hf:mixtral", "hf:qwen2", "hf:phi3", "hf:starcoder2"}), ("4.45",),
            ("4.45.2",), _beyond_window,
            "a stream longer than W"),
    Finding("hf-window-ignored", frozenset({"hf:qwen2"}), ("4.48",), ("4.48.3",), _beyond_window, "a stream longer than W"),
    Finding("hf-gemma2-padded-decode-mask", frozenset({"hf:gemma2"}), ("4.45-4.47",),
            ("4.45.2", "4.46.3", "4.47.1"), _decode_after_prefill,
            "a left-padded row with a call after the prefill", failure=_in_padded_row),
    # torch's CPU code generation (inductor) for transformers' flex attention: reproduced at the availability probe
    # in a fresh process (a campaign's own cases compile the kernel from other shapes first: the note)
    Finding("hf-flex-attention-sliding-compile", frozenset({"hf:mistral@flex_attention"}), ("5.24+",),
            ("5.24.0", "5.25.0"), _decode_past_window_after_prefill,
            "a decode step past W after a prefill, the process's first flex attention compile (torch 2.13+ CPU)",
            failure=_flex_compile_error, requires=(("torch", "2.13+"),)),
    Finding("hf-cb-window-1-prefill", CB_KINDS, CB_W1_RELEASES, CB_W1_SEEN, _cb_window_one_prompt,
            "a W = 1 request whose prompt is 2 or more tokens"),
    Finding("hf-cb-sliding-ring-start", CB_KINDS, CB_RING_RELEASES, CB_RING_SEEN, _cb_request_past_window,
            "a request with a query at position W or later"),
)


#: The upstream thread of each finding (the note says more); a finding missing here has none: its note says
#: what was searched. Shown with every reproduction (``kvwindow fuzz`` prints one line per finding).
UPSTREAM = {
    "hf-445-sliding-cache": "https://github.com/huggingface/transformers/issues/37574",
    "hf-dynamic-reset-stale": "https://github.com/huggingface/transformers/pull/48809",
    "hf-gemma2-padded-decode-mask": "https://github.com/huggingface/transformers/pull/35681",
    "hf-window-ignored": "https://github.com/huggingface/transformers/issues/35924",
    "hf-cb-sliding-ring-start": "https://github.com/huggingface/transformers/pull/47708",
}
FINDINGS = tuple(dataclasses.replace(f, upstream=UPSTREAM.get(f.id, "")) for f in FINDINGS)


def applicable(kind: str, release: str, versions: dict[str, str] | None = None) -> list[Finding]:
    """The rows that apply to target ``kind`` on ``release`` (and, given the target's ``versions``, whose other
    libraries are at releases they apply to: :attr:`Finding.requires`)."""
    return [f for f in FINDINGS if f.applies(kind, release) and (versions is None or f.met(versions))]


def hits(kind: str, release: str, cases: Iterable[Case]) -> list[Finding]:
    """The rows that apply to ``kind`` on ``release`` and that one of ``cases`` (the views of one case a
    target runs) exercises, one per id, in table order."""
    cases = list(cases)
    out: dict[str, Finding] = {}
    for f in applicable(kind, release):
        if f.id not in out and any(f.hits(c) for c in cases):
            out[f.id] = f
    return list(out.values())


def known_hit(kind: str, release: str, case: Case) -> Finding | None:
    """The first finding that applies to this target and release and that the case exercises."""
    found = hits(kind, release, [case])
    return found[0] if found else None


# -- the notes' release tables ----------------------------------------------------------------------

#: The markers around the release table of each note (``docs/findings/<id>.md``), written from this
#: table by ``scripts/compat_table.py --write``; ``tests/test_hf_findings.py`` checks they agree.
BLOCK_BEGIN = "<!-- releases: written by scripts/compat_table.py from fuzz/targets/hf/findings.py -->"
BLOCK_END = "<!-- /releases -->"


def target_name(kind: str) -> str:
    """A finding kind as the ``--target`` it applies to (``static`` -> ``hf-static``)."""
    return kind if kind.startswith(("hf:", "hf-cb:")) else f"hf-{kind}"


def release_block(finding_id: str) -> str:
    """The note's table of the rows of ``finding_id``: targets, the minor series it applies to, the
    releases the matrix reproduced it on."""
    rows = [f for f in FINDINGS if f.id == finding_id]
    if not rows:
        raise KeyError(f"no finding {finding_id!r} in fuzz/targets/hf/findings.py")
    lines = [BLOCK_BEGIN, "", "| cases | targets | applies to (minor series) | reproduced on (`scripts/hf_matrix.sh`) |",
             "|---|---|---|---|"]
    for f in rows:
        cases = f.cases or "every case"
        targets = ", ".join(f"`{t}`" for t in sorted(target_name(k) for k in f.kinds))
        spans = ", ".join(span_text(s) for s in f.releases)
        if f.requires:  # the other libraries it needs
            spans += "; with " + ", ".join(f"{dist} {span_text(s)}" for dist, s in f.requires)
        lines.append(f"| {cases} | {targets} | {spans} | {', '.join(f.seen)} |")
    return "\n".join(lines + ["", BLOCK_END])


def note_block(text: str) -> str | None:
    """The release table block of a note's ``text``, or ``None`` where it has none."""
    a, b = text.find(BLOCK_BEGIN), text.find(BLOCK_END)
    return None if a < 0 or b < a else text[a:b + len(BLOCK_END)]
