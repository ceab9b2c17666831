"""Step 3, cache identity: every identity attribute a subject reports is perturbed in turn, and reusing a
cache built before the perturbation must be refused or diverge visibly, never be silently accepted.

For each attribute ``a`` (seed 000's list first, then any other the subject reports) and a perturbed
value ``v`` (:func:`perturbations`; the first that ``set_identity`` takes on a fresh instance):

1. a fresh instance under ``v`` must report ``v`` from ``identity()`` — else a cache keyed by the
   identity would be reused across the change (fail);
2. a live stream prefills ``W + 2`` tokens (the cache has evicted), then ``set_identity(a=v)``, then
   decodes one token. Compared with a fresh run under ``v`` (``ref_new``) and one under the old value
   (``ref_old``):

   * ``set_identity`` or ``decode`` raised — **refused** (pass);
   * ``ref_new`` equals ``ref_old`` — the change is **not observable** on this stream (n/a: e.g. a
     padding side on an unpadded stream);
   * the answer equals ``ref_new`` — **reuse equals a fresh run**: the cache does not depend on ``a``
     or was rebuilt (pass);
   * the answer equals ``ref_old`` — **silently accepted**: the live stream answers as if nothing had
     changed, though a fresh run shows the change (fail);
   * otherwise — **diverges visibly** from a fresh run: the stale cache is reused, and step 4's parity
     check sees it (pass, with the size).
"""

from __future__ import annotations

from typing import Any

from fuzz.gate.compare import maxdiff, within
from fuzz.gate.context import Context
from fuzz.gate.protocol import STANDARD_IDENTITY, Subject, SubjectError
from fuzz.gate.verdict import FAIL, NA, PASS, Step


def perturbations(key: str, value: Any) -> list[Any]:
    """Values to try for ``key`` (in order), each different from ``value``."""
    out: list[Any]
    if key == "padding_side":
        out = ["right" if value == "left" else "left"]
    elif key == "dtype":
        out = {"float64": ["float32"], "float32": ["float64"]}.get(value, ["float32"])
    elif key == "adapter" and value is None:
        out = ["gate-perturbed-adapter"]
    elif key == "rope_scaling":
        if isinstance(value, dict) and isinstance(value.get("factor"), (int, float)):
            out = [dict(value, factor=2.0 * value["factor"])]
        else:
            out = [{"rope_type": "linear", "factor": 2.0}]
    elif key == "head_dim" and isinstance(value, int) and not isinstance(value, bool):
        out = [2 * value, value + 2]  # RoPE rotates pairs: a head width stays even
    elif key == "kv_head_map" and isinstance(value, (list, tuple)) and value:
        m = [int(x) for x in value]
        kvh = max(m) + 1
        tiled = [h % kvh for h in range(len(m))]  # repeat() where repeat_interleave() was meant
        out = [tiled if tiled != m else sorted(m)] if kvh > 1 else []
        if kvh == len(m):
            out = [list(reversed(m))]
    elif isinstance(value, dict) and value and all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                                   for v in value.values()):
        out = [{k: 2 * v for k, v in value.items()}]  # e.g. a RoPE theta per layer type
    elif isinstance(value, (list, tuple)):
        ints = [x for x in value if isinstance(x, int) and not isinstance(x, bool)]
        if not ints:
            return []
        out = [[x + 1 if isinstance(x, int) and not isinstance(x, bool) else x for x in value]]
        if all(x >= 2 for x in ints):
            out.append([x - 1 if isinstance(x, int) and not isinstance(x, bool) else x for x in value])
    elif isinstance(value, bool):
        out = [not value]
    elif isinstance(value, int):
        out = [value + 1, 2 * value, value - 1]
    elif isinstance(value, float):
        out = [2 * value, value / 2, value + 1]
    elif isinstance(value, str):
        out = [value + "-perturbed"]
    else:
        return []
    norm = (lambda x: list(x) if isinstance(x, tuple) else x)  # noqa: E731
    return [v for i, v in enumerate(out) if norm(v) != norm(value) and v not in out[:i]]


def _same(a: Any, b: Any) -> bool:
    norm = (lambda x: list(x) if isinstance(x, tuple) else x)  # noqa: E731
    return norm(a) == norm(b)


def check_attribute(ctx: Context, subject: Subject, key: str, value: Any, prompt: list[int],
                    token: int, ref_old: Any) -> tuple[str, str]:
    """``(verdict, detail)`` of perturbing ``key`` on ``subject`` (see the module docstring)."""
    tried, fresh, chosen = [], None, None
    for v in perturbations(key, value):
        h = subject.new()
        try:
            h.set_identity(**{key: v})
        except SubjectError as e:
            tried.append(f"{v!r}: {e.what}")
            continue
        fresh, chosen = h, v
        break
    if fresh is None:
        why = "; ".join(tried) if tried else f"no perturbation is known for a value like {value!r}"
        return NA, f"the gate cannot perturb {key}={value!r}: {why}"
    reported = fresh.identity().get(key)
    if not _same(reported, chosen):
        return FAIL, (f"after set_identity({key}={chosen!r}) identity() still reports {reported!r}: a cache keyed by "
                      "the identity would be reused across the change")
    ref_new = fresh.full(prompt + [token])[-1]
    live = subject.new()
    live.prefill(prompt)
    change = f"{key}: {value!r} -> {chosen!r}"
    try:
        live.set_identity(**{key: chosen})
        got = live.decode(token)
    except SubjectError as e:
        return PASS, f"{change}: refused ({e.method} raised {e.what})"
    tol = subject.tolerance
    if within(ref_new[None], ref_old[None], tol) is None:
        return NA, (f"{change}: not observable on this stream (a fresh run's logits do not change"
                    + ("; the stream is unpadded" if key == "padding_side" else "") + ")")
    if within(got[None], ref_new[None], tol) is None:
        return PASS, f"{change}: reuse equals a fresh run under the new identity (the cache does not depend on it)"
    if within(got[None], ref_old[None], tol) is None:
        return FAIL, (f"{change}: silently accepted — the live stream answers as if {key} were still {value!r} "
                      f"(a fresh run moves by {maxdiff(ref_new, ref_old):.3g})")
    return PASS, (f"{change}: no refusal; reusing the cache built before diverges visibly from a fresh run "
                  f"(by {maxdiff(got, ref_new):.3g}), so step 4's parity check sees it")


def step3(ctx: Context) -> Step:
    step = Step(3)
    W = ctx.window
    prompt, token = ctx.tokens("identity/prompt", W + 2), ctx.tokens("identity/next", 1)[0]
    for role, subject in ctx.roles():
        who = f"{role} {subject.spec}"
        ident = ctx.identities[subject.spec]
        probe = subject.new()
        if not probe.has("set_identity"):
            step.add("set_identity", who, NA, "the subject has no set_identity(): the gate cannot perturb its "
                     f"identity (it reports {', '.join(sorted(ident)) or 'nothing'})")
            continue
        ref_old = probe.full(prompt + [token])[-1]
        keys = [k for k in STANDARD_IDENTITY] + sorted(k for k in ident if k not in STANDARD_IDENTITY)
        for key in keys:
            if key not in ident:
                step.add(key, who, NA, "not reported by the subject")
                continue
            try:
                verdict, detail = check_attribute(ctx, subject, key, ident[key], prompt, token, ref_old)
            except SubjectError as e:
                verdict, detail = FAIL, f"{e.method} raised {e.what} on a valid call"
            step.add(key, who, verdict, detail)
    return step.settle("every reported attribute that can be perturbed is refused, rebuilt or diverges visibly "
                       "on reuse", "no identity attribute could be perturbed")
