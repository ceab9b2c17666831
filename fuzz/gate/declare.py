"""Steps 1 and 2: the intervention as declared, and the equivalence claim checked at its level.

Step 1 records what the change is said to be and holds the declaration to the subjects' identities: an
exact kind (layout, sharing, scheduling, proposal) must leave every identity attribute the subjects
report as it was — a "layout" change that also moves the window is a different change — while an
approximate kind (eviction, quantisation) may change them, and the report lists what changed.

Step 2 checks the claim end to end, on greedy continuations of prompts around the window (what a user
sees): for ``exact`` and ``logits:TOL`` the candidate is fed the baseline's greedy tokens and its logits
are held to the baseline's at the claim's level; for ``greedy`` both decode freely and the tokens must
match (a genuine tie in the baseline ends the comparison of that prompt); a ``task`` claim is reported as
needing the user's own evaluation. Step 4 then localises any difference to a cell.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fuzz.gate.compare import agrees, greedy_gap, maxdiff
from fuzz.gate.config import KINDS
from fuzz.gate.context import Context
from fuzz.gate.protocol import SubjectError
from fuzz.gate.verdict import FAIL, NA, PASS, Step


def _same(a: Any, b: Any) -> bool:
    norm = (lambda x: list(x) if isinstance(x, tuple) else x)  # noqa: E731
    return norm(a) == norm(b)


def identity_diff(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """Attributes both identities report, with different values (one that only one reports is a gap in
    what that subject says about itself, not a change: :func:`step1` lists those apart)."""
    return [f"{k}: {a[k]!r} -> {b[k]!r}" for k in sorted(set(a) & set(b)) if not _same(a[k], b[k])]


def step1(ctx: Context) -> Step:
    step = Step(1)
    kind = ctx.config.intervention
    cls, what = KINDS[kind]
    step.data = {"kind": kind, "class": cls, "changes": what}
    base, cand = ctx.identities[ctx.baseline.spec], ctx.identities[ctx.candidate.spec]
    diff = identity_diff(base, cand)
    step.data["subjects"] = {role: {"spec": s.spec, "description": s.description} for role, s in ctx.roles()}
    if diff and cls == "exact":
        step.add("identity kept", f"candidate {ctx.candidate.spec}", FAIL,
                 f"a {kind} change keeps the model's identity, but the candidate's differs: {'; '.join(diff)} "
                 "(declare the kind that changes it)")
    else:
        step.add("identity kept" if cls == "exact" else "identity changes", f"candidate {ctx.candidate.spec}", PASS,
                 "same identity as the baseline" if not diff else "changed (allowed for an approximate kind): "
                 + "; ".join(diff))
    only = {role: sorted(set(mine) - set(other)) for role, mine, other in
            (("baseline", base, cand), ("candidate", cand, base))}
    if any(only.values()):
        step.checks[-1].detail += " (compared on the attributes both report; " + "; ".join(
            f"only the {role} reports {', '.join(keys)}" for role, keys in only.items() if keys) + ")"
    return step.settle(f"{kind}: {cls} — {what}", "")


def greedy_run(h, prompt: list[int], steps: int, forced: list[int] | None = None) -> tuple[list[int], np.ndarray]:
    """Greedy continuation (or the ``forced`` tokens): ``(tokens, logits rows [steps + 1, V])`` where row 0
    is the prompt's last row and row ``i`` the logits after ``i`` generated tokens."""
    rows = [h.prefill(prompt)[-1]]
    toks: list[int] = []
    for i in range(steps):
        t = forced[i] if forced is not None else int(np.argmax(rows[-1]))
        toks.append(t)
        rows.append(h.decode(t))
    return toks, np.stack(rows)


def step2(ctx: Context) -> Step:
    step = Step(2)
    claim, W = ctx.claim, ctx.window
    step.data = {"claim": claim.text}
    if not claim.checked:
        step.add("claim", "candidate", NA, "a task claim (bounded task-level degradation) needs the user's own "
                 "evaluation: the gate cannot check it; steps 4 and 7 report the measured divergence")
        return step.settle("", "task claim: needs the user's own evaluation")
    steps = 2 * W + 2 + ctx.budget.extra_decode
    lens = [max(1, W - 1), W + 1, 2 * W + 1] + ([1, 3 * W] if ctx.budget.extra_lengths else [])
    for L in lens:
        prompt = ctx.tokens(f"claim/{L}", L)
        name = f"greedy continuation · prompt {L}"
        try:
            b_toks, b_rows = greedy_run(ctx.baseline.new(), prompt, steps)
        except SubjectError as e:
            step.add(name, f"baseline {ctx.baseline.spec}", FAIL, f"{e.method} raised {e.what}")
            continue
        who = f"candidate {ctx.candidate.spec}"
        try:
            if claim.level == "greedy":
                c_toks, c_rows = greedy_run(ctx.candidate.new(), prompt, steps)
            else:
                c_toks, c_rows = greedy_run(ctx.candidate.new(), prompt, steps, forced=b_toks)
        except SubjectError as e:
            step.add(name, who, FAIL, f"{e.method} raised {e.what}")
            continue
        positions = list(range(L - 1, L + steps))
        if claim.level == "greedy":
            d = None
            for i, (a, b) in enumerate(zip(c_toks, b_toks)):
                if a != b:
                    tie = greedy_gap(b_rows[i]) <= 2 * (ctx.baseline.tolerance[0] + ctx.baseline.tolerance[1])
                    d = None if tie else (f"generated token {i + 1} (position {L + i}): candidate {a}, baseline {b} "
                                          f"(baseline's top-2 gap {greedy_gap(b_rows[i]):.3g})")
                    break
        else:
            d = agrees(c_rows, b_rows, claim, ctx.baseline.tolerance, positions)
        same = sum(1 for a, b in zip(c_toks, b_toks) if a == b) if claim.level == "greedy" else \
            sum(1 for i, b in enumerate(b_toks) if int(np.argmax(c_rows[i])) == b)
        detail = d or (f"{steps} generated tokens agree at {claim.text} (largest logit difference "
                       f"{maxdiff(c_rows, b_rows):.3g}; {same}/{steps} greedy tokens identical)")
        step.add(name, who, FAIL if d else PASS, detail, max_diff=maxdiff(c_rows, b_rows), same_tokens=same)
    return step.settle(f"claim {claim.text} holds on greedy continuations of prompts {lens} "
                       f"({steps} tokens each)", "")
