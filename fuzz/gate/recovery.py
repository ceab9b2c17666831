"""Step 8, invalidation and recovery: a model update, a reset or a restored snapshot must not revive
incompatible state (seed 000: "a model update, worker restart or cache-manager failover").

Per subject, each where the subject has what it needs:

* **weights update** — prompt, ``set_identity(weights_revision=...)``, decode: the cache built under the
  old weights must be refused or rebuilt (the answer equals a fresh run under the new weights). Unlike
  step 3, a visible divergence fails here: after an update, stale state must not be served at all;
* **reset after a weights update** — prompt, update, ``reset()``, a new stream: equals a fresh instance
  under the new weights;
* **replay after reset** — one stream, ``reset()``, another: equals the same stream on a fresh instance
  (at the subject's tolerance; the report says whether bit for bit);
* **snapshot after a weights update** — ``snapshot()`` under the old weights, update, ``reset()``,
  ``restore()``, decode: refused, or equal to a fresh run under the new weights;
* **snapshot round trip** — ``snapshot()``, decode, ``restore()``, the same decodes again: the same logits.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from fuzz.gate.compare import maxdiff, within
from fuzz.gate.context import Context
from fuzz.gate.identity import perturbations
from fuzz.gate.parity import feed
from fuzz.gate.protocol import Handle, Subject, SubjectError
from fuzz.gate.verdict import FAIL, NA, PASS, Step


def _new_weights(subject: Subject, ident: dict[str, Any]) -> Any:
    """A weights revision ``set_identity`` takes on a fresh instance, or ``None``."""
    if "weights_revision" not in ident:
        return None
    for v in perturbations("weights_revision", ident["weights_revision"]):
        try:
            subject.new().set_identity(weights_revision=v)
        except SubjectError:
            continue
        return v
    return None


def _served_after(live: Handle, act: Callable[[], None], token: int, ref_new: np.ndarray,
                  tol: tuple[float, float], what: str) -> tuple[str, str]:
    """Run ``act`` on a live stream, then decode ``token``: refused or equal to ``ref_new`` passes."""
    try:
        act()
        got = live.decode(token)
    except SubjectError as e:
        return PASS, f"refused ({e.method} raised {e.what})"
    if within(got[None], ref_new[None], tol) is None:
        return PASS, "the answer equals a fresh run under the new weights (rebuilt, nothing stale served)"
    return FAIL, f"{what}: the answer differs from a fresh run under the new weights by {maxdiff(got, ref_new):.3g}"


def _same_rows(a: np.ndarray, b: np.ndarray, tol: tuple[float, float], what: str) -> tuple[str, str]:
    d = within(a, b, tol)
    if d:
        return FAIL, f"{what}: {d}"
    return PASS, "bit for bit" if np.array_equal(a, b) else f"within the tolerance (largest difference {maxdiff(a, b):.3g})"


def checks(ctx: Context, subject: Subject) -> list[tuple[str, str, str]]:
    W, tol = ctx.window, subject.tolerance
    ident = ctx.identities[subject.spec]
    prompt, token = ctx.tokens("recovery/prompt", W + 2), ctx.tokens("recovery/next", 1)[0]
    other = [ctx.tokens("recovery/x", 2 * W)] + [[t] for t in ctx.tokens("recovery/xd", 2)]
    stream = [ctx.tokens("recovery/y", W + 2)] + [[t] for t in ctx.tokens("recovery/yd", 3)]
    probe = subject.new()
    out: list[tuple[str, str, str]] = []
    v = _new_weights(subject, ident) if probe.has("set_identity") else None
    why = ("the subject has no set_identity()" if not probe.has("set_identity") else
           "the subject reports no weights_revision it can change")
    fresh_new = None
    if v is not None:
        fresh_new = subject.new()
        fresh_new.set_identity(weights_revision=v)
        fresh_new.reset()  # a stream under the new weights
        ref_new = fresh_new.full(prompt + [token])[-1]
        live = subject.new()
        live.prefill(prompt)
        out.append(("weights update", *_served_after(live, lambda: live.set_identity(weights_revision=v), token,
                                                     ref_new, tol, "stale state served after a weights update")))
        live = subject.new()
        live.prefill(prompt)
        live.set_identity(weights_revision=v)
        live.reset()
        out.append(("reset after a weights update",
                    *_same_rows(feed(live, stream), feed(fresh_new, stream), tol, "a reset after the update serves "
                                "stale state")))
        fresh_new.reset()
    else:
        out += [("weights update", NA, why), ("reset after a weights update", NA, why)]
    h = subject.new()
    feed(h, other)
    h.reset()
    out.append(("replay after reset", *_same_rows(feed(h, stream), feed(subject.new(), stream), tol,
                                                  "reset revived state of the stream before it")))
    if not (probe.has("snapshot") and probe.has("restore")):
        out += [(n, NA, "the subject has no snapshot()/restore()") for n in
                ("snapshot after a weights update", "snapshot round trip")]
        return out
    if v is not None:
        live = subject.new()
        live.prefill(prompt)
        state = live.snapshot()

        def act() -> None:
            live.set_identity(weights_revision=v)
            live.reset()
            live.restore(state)
        out.append(("snapshot after a weights update",
                    *_served_after(live, act, token, ref_new, tol, "a restored snapshot revived state built under "
                                   "the old weights")))
    else:
        out.append(("snapshot after a weights update", NA, why))
    h = subject.new()
    h.prefill(prompt)
    state = h.snapshot()
    first = np.stack([h.decode(t) for t in stream[0][:4]])
    h.restore(state)
    again = np.stack([h.decode(t) for t in stream[0][:4]])
    out.append(("snapshot round trip", *_same_rows(again, first, tol, "restore() did not bring back the snapshot's "
                                                   "state")))
    return out


def step8(ctx: Context) -> Step:
    step = Step(8)
    for role, subject in ctx.roles():
        who = f"{role} {subject.spec}"
        try:
            for name, verdict, detail in checks(ctx, subject):
                step.add(name, who, verdict, detail)
        except SubjectError as e:
            step.add("recovery", who, FAIL, f"{e.method} raised {e.what} on a valid call")
    return step.settle("no update, reset or restore revived stale state", "nothing could be checked")
