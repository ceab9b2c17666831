"""Step 5, negative controls: broken copies of each subject that the gate builds itself, each of which
step 4's checks must detect. A control that passes undetected fails the gate — the parity check cannot
see that class of bug on that subject — so a passing step 5 is evidence that step 4 has power.

Each control wraps a subject (a new protocol object around fresh instances of it) and breaks one thing
at the start of every stream, right after its first call (the prompt):

* **position off by one** — later tokens are placed one position ahead of the tokens seen (the
  subject's ``inject("position")``: a position lives inside the cache, out of a wrapper's reach);
* **stale adapter** — the prompt is cached under the current adapter (else weights revision), then the
  identity switches to a perturbed one with that cache kept; the prompt's logits come from a fresh
  instance under the new identity and ``full()`` answers under it, so only the stale cache shows;
* **truncated block** — the oldest entry the next query needs is dropped (``inject("drop-oldest")``);
* **window + 1**, **window - 1** — the cached path runs with every sliding window one larger / smaller
  (a second instance, ``set_identity(window=...)``); ``full()`` keeps the declared window;
* **cross-request handle** — decode steps are answered from another request's cache: a second instance
  that was prompted with a different sequence of the same length.

A control is detected when one of step 4's cells on the wrapped subject fails its own judge (cached
against ``full()``), raises (a refusal), or disagrees with the unwrapped subject's rows for the same
cell; only cells the unwrapped subject passes count (elsewhere the check fails anyway and proves
nothing), they run in step 4's order, and the first detection ends the search. A control that needs what
the subject does not offer (``inject``, ``set_identity``, an ``adapter``/``weights_revision`` or
``window`` attribute) is not applicable, with the reason.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from fuzz.gate.context import Context
from fuzz.gate.identity import perturbations
from fuzz.gate.parity import cells, run_cell, self_diff
from fuzz.gate.protocol import OPTIONAL, Subject
from fuzz.gate.verdict import FAIL, NA, PASS, Step


class _Control:
    """Delegates the required protocol to ``inner`` and calls :meth:`breaks` after each stream's first call."""

    def __init__(self, subject: Subject):
        self.subject = subject
        self.inner = subject.factory()
        self.first = True

    def breaks(self) -> None:  # pragma: no cover - every control overrides it
        raise NotImplementedError

    def _after(self) -> None:
        if self.first:
            self.first = False
            self.breaks()

    def reset(self) -> None:
        self.inner.reset()
        self.first = True

    def prefill(self, token_ids: Sequence[int]) -> Any:
        out = self.inner.prefill(token_ids)
        self._after()
        return out

    def decode(self, token_id: int) -> Any:
        out = self.inner.decode(token_id)
        self._after()
        return out

    def full(self, token_ids: Sequence[int]) -> Any:
        return self.inner.full(token_ids)

    def identity(self) -> dict[str, Any]:
        return self.inner.identity()


class PositionControl(_Control):
    def breaks(self) -> None:
        self.inner.inject("position")


class TruncateControl(_Control):
    def breaks(self) -> None:
        self.inner.inject("drop-oldest")


class StaleAdapterControl(_Control):
    """``change`` = ``(key, old, new)``: the prompt is cached under ``old`` and the identity then switches to
    ``new`` with that cache kept. The prompt's own logits are answered by a second instance under ``new``
    (as a prefix hit recomputes only what it returns), so only the stale cache can give the control away."""

    change: tuple[str, Any, Any] = ("", None, None)

    def __init__(self, subject: Subject):
        super().__init__(subject)
        key, _, new = self.change
        self.fresh = subject.factory()
        self.fresh.set_identity(**{key: new})
        self.fresh.reset()

    def breaks(self) -> None:
        key, _, new = self.change
        self.inner.set_identity(**{key: new})

    def prefill(self, token_ids: Sequence[int]) -> Any:
        if not self.first:
            return self.inner.prefill(token_ids)
        self.inner.prefill(token_ids)
        self._after()
        return self.fresh.prefill(token_ids)

    def reset(self) -> None:
        key, old, _ = self.change
        self.inner.set_identity(**{key: old})
        super().reset()
        self.fresh.reset()


class WindowControl(_Control):
    """The cached path on a second instance whose sliding windows are ``window``; ``full()`` on the declared one."""

    window: Any = None

    def __init__(self, subject: Subject):
        super().__init__(subject)
        self.cached = subject.factory()
        self.cached.set_identity(window=self.window)
        self.cached.reset()  # a valid stream under the other window, from its first token

    def breaks(self) -> None:
        pass

    def reset(self) -> None:
        self.cached.reset()

    def prefill(self, token_ids: Sequence[int]) -> Any:
        return self.cached.prefill(token_ids)

    def decode(self, token_id: int) -> Any:
        return self.cached.decode(token_id)


class CrossRequestControl(_Control):
    """Decodes answered by ``other``, an instance prompted with ``remap(prompt)`` (another request)."""

    remap: Callable[[list[int]], list[int]] = staticmethod(lambda t: t)

    def __init__(self, subject: Subject):
        super().__init__(subject)
        self.other = subject.factory()

    def breaks(self) -> None:
        pass

    def reset(self) -> None:
        super().reset()
        self.other.reset()

    def prefill(self, token_ids: Sequence[int]) -> Any:
        out = self.inner.prefill(token_ids)
        self.other.prefill(self.remap(list(token_ids)))
        return out

    def decode(self, token_id: int) -> Any:
        self.inner.decode(token_id)
        return self.other.decode(token_id)


def _subclass(base: type, name: str, **attrs: Any) -> type:
    return type(name, (base,), attrs)


def build_controls(ctx: Context, subject: Subject) -> list[tuple[str, Subject | None, str]]:
    """``(control name, wrapped subject or None, what it breaks or why it cannot be built)`` for ``subject``."""
    probe = subject.new()
    ident = ctx.identities[subject.spec]
    has = {m for m in OPTIONAL if probe.has(m)}
    out: list[tuple[str, Subject | None, str]] = []

    def wrap(name: str, cls: type, what: str) -> None:
        out.append((name, Subject(f"{subject.spec} [{name}]", lambda: cls(subject), subject.tolerance, what), what))

    if "inject" in has:
        wrap("position off by one", PositionControl, "later tokens one position ahead of the tokens seen")
    else:
        out.append(("position off by one", None, "the subject has no inject(): a position lives inside its cache"))
    stale = None
    if "set_identity" in has:
        for key in ("adapter", "weights_revision"):
            if key in ident:
                for v in perturbations(key, ident[key]):
                    h = subject.new()
                    try:
                        h.set_identity(**{key: v})
                    except Exception:  # noqa: BLE001 - try the next value or attribute
                        continue
                    stale = (key, ident[key], v)
                    break
            if stale:
                break
    if stale:
        wrap("stale adapter", _subclass(StaleAdapterControl, "Stale", change=stale),
             f"{stale[0]} switched {stale[1]!r} -> {stale[2]!r} after the prompt, its cache kept")
    else:
        out.append(("stale adapter", None, "the subject cannot switch an adapter or weights revision "
                                           "(set_identity with adapter / weights_revision)"))
    if "inject" in has:
        wrap("truncated block", TruncateControl, "the oldest entry the next query needs dropped after the prompt")
    else:
        out.append(("truncated block", None, "the subject has no inject(): its cache cannot be truncated from outside"))
    windows = ident.get("window")
    per_layer = isinstance(windows, (list, tuple))
    layers = list(windows) if per_layer else [windows]
    for delta in (1, -1):
        name = f"window {'+' if delta > 0 else '-'} 1"
        ok = "set_identity" in has and any(isinstance(w, int) and not isinstance(w, bool) for w in layers)
        new = [w + delta if isinstance(w, int) and not isinstance(w, bool) else w for w in layers] if ok else None
        if ok and not per_layer:
            new = new[0]
        if ok and all(w is None or w >= 1 for w in (new if per_layer else [new])):
            try:
                subject.new().set_identity(window=new)
            except Exception as e:  # noqa: BLE001
                out.append((name, None, f"set_identity(window={new}) raised {type(e).__name__}: {e}"))
                continue
            wrap(name, _subclass(WindowControl, "Window", window=new), f"cached path with windows {new}")
        else:
            out.append((name, None, "the subject reports no sliding window it can set (set_identity(window=...))"))
    lo = 3 if ctx.vocab > 8 else 0
    span = ctx.vocab - lo

    def remap(t: list[int]) -> list[int]:
        return [lo + (x - lo + 1 + i) % span for i, x in enumerate(t)]
    wrap("cross-request handle", _subclass(CrossRequestControl, "Cross", remap=staticmethod(remap)),
         "decodes answered from another request's cache (prompted with another sequence of the same length)")
    return out


def detect(ctx: Context, role: str, wrapped: Subject, subject: Subject) -> tuple[bool, str]:
    """Whether step 4's cells see the control, and how (the first cell that does)."""
    judge = ctx.judge(role, subject)
    probe = wrapped.new()
    has = {m for m in OPTIONAL if probe.has(m)}
    unwrapped = ctx.cells.get(subject.spec, {})
    for cell in cells(ctx):
        ref = unwrapped.get(cell.name)
        if any(m not in has for m in cell.needs) or ref is None or isinstance(ref, str) or self_diff(ref, judge):
            continue  # only a cell the subject itself passes can show that the check sees the control
        run = run_cell(cell, wrapped)
        if run.error:
            return True, f"rejected in {cell.name}: {run.error}"
        d = self_diff(run, judge)
        if d:
            return True, f"cached vs uncached, {cell.name}: {d}"
        for s, r in zip(run.streams, ref.streams):
            d = judge(s.rows, r.rows, list(range(len(s.history))))
            if d:
                return True, f"against the unwrapped subject, {cell.name}: {d}"
    return False, ""


def usable_cells(ctx: Context, role: str, subject: Subject) -> int:
    """How many of step 4's cells the subject passes itself (a control can only be seen in those)."""
    judge = ctx.judge(role, subject)
    runs = ctx.cells.get(subject.spec, {}).values()
    return sum(1 for r in runs if not isinstance(r, str) and not self_diff(r, judge))


def step5(ctx: Context) -> Step:
    step = Step(5)
    for role, subject in ctx.roles():
        who = f"{role} {subject.spec}"
        judge = ctx.judge(role, subject)
        for name, wrapped, what in build_controls(ctx, subject):
            if wrapped is None:
                step.add(name, who, NA, what)
            elif not judge.checked:
                step.add(name, who, NA, f"{judge.label}: no check on this subject can detect a control")
            elif not usable_cells(ctx, role, subject):
                step.add(name, who, NA, "the subject fails every cell of step 4 itself, so no cell can show "
                         "whether the check sees this control")
            else:
                found, how = detect(ctx, role, wrapped, subject)
                step.add(name, who, PASS if found else FAIL,
                         f"{what}; detected — {how}" if found else
                         f"{what}; undetected: the parity check cannot see this class on this subject")
    return step.settle("every control the gate could build was detected by step 4's checks",
                       "no control could be built or checked")
