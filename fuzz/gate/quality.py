"""Step 7, quality slices where approximation enters (eviction, quantisation): probes whose outcome depends
on exactly what such a cache gives up, each held to what the claim predicts.

* **retrieval before the window** — a distinctive span at the start, ``2W`` filler tokens, then the span's
  first token again: whatever the model does with the span must now come through state an eviction
  policy may have dropped;
* **exact copy** — a span of ``W`` tokens, ``W`` filler tokens, then the span's first half: continuing it
  is a copy from outside the window;
* **long number** — ``3W`` tokens from a ten-token "digit" alphabet: long runs of near-identical keys,
  where low-precision K/V blur which position a query matches.

The models are tiny with seeded weights, so these are probes of where the approximation's effect
concentrates, not a measure of task quality. Each probe continues greedily for ``W`` tokens on the
baseline; the candidate is fed the same tokens (``logits:TOL``: logits within TOL) or decodes freely
(``greedy``: the same tokens), and its divergence from its own ``full()`` is reported beside. A ``task``
claim is not applicable (the user's own evaluation). Exact kinds are not applicable: no approximation
enters, and steps 2 and 4 hold them to the claim everywhere.
"""

from __future__ import annotations

import numpy as np

from fuzz.gate.compare import agrees, maxdiff
from fuzz.gate.context import Context
from fuzz.gate.declare import greedy_run
from fuzz.gate.protocol import SubjectError
from fuzz.gate.verdict import FAIL, NA, PASS, Step


def probes(ctx: Context) -> list[tuple[str, list[int]]]:
    W, lo = ctx.window, (3 if ctx.vocab > 8 else 0)
    span = ctx.tokens("quality/span", 4)
    filler = ctx.tokens("quality/filler", 2 * W)
    copy = ctx.tokens("quality/copy", W)
    digits = list(range(lo, min(ctx.vocab, lo + 10)))
    number = [digits[int(x) % len(digits)] for x in ctx.tokens("quality/number", 3 * W)]
    return [("retrieval before the window", span + filler + span[:1]),
            ("exact copy", copy + filler[:W] + copy[:W // 2]),
            ("long number", number)]


def step7(ctx: Context) -> Step:
    step = Step(7)
    kind, claim = ctx.config.intervention, ctx.claim
    if not ctx.config.approximate:
        step.add("quality slices", "candidate", NA, f"an exact kind ({kind}): no approximation enters; steps 2 and 4 "
                 f"hold the candidate to {claim.text} everywhere")
        return step.settle("", f"not applicable: {kind} is an exact kind")
    W = ctx.window
    who = f"candidate {ctx.candidate.spec}"
    for name, prompt in probes(ctx):
        try:
            b_toks, b_rows = greedy_run(ctx.baseline.new(), prompt, W)
            c = ctx.candidate.new()
            c_toks, c_rows = greedy_run(c, prompt, W, None if claim.level in ("greedy", "task") else b_toks)
            own = maxdiff(c_rows, c.full(prompt + c_toks)[len(prompt) - 1:])
        except SubjectError as e:
            step.add(name, who, FAIL, f"{e.method} raised {e.what}")
            continue
        same = sum(a == b for a, b in zip(c_toks, b_toks)) if claim.level in ("greedy", "task") else \
            sum(int(np.argmax(c_rows[i])) == t for i, t in enumerate(b_toks))
        measured = (f"largest logit difference from the baseline {maxdiff(c_rows, b_rows):.3g}, from its own full() "
                    f"{own:.3g}; {same}/{W} greedy tokens as the baseline's")
        if not claim.checked:
            step.add(name, who, NA, f"{measured} (a task claim needs the user's own evaluation)")
            continue
        if claim.level == "greedy":
            d = None if c_toks == b_toks else f"greedy continuation differs: candidate {c_toks}, baseline {b_toks}"
        else:
            d = agrees(c_rows, b_rows, claim, ctx.baseline.tolerance, list(range(len(prompt) - 1, len(prompt) + W)))
        step.add(name, who, FAIL if d else PASS, f"{d}; {measured}" if d else f"holds at {claim.text}: {measured}")
    return step.settle(f"every probe holds at {claim.text}", "a task claim: the probes are reported, not judged")
