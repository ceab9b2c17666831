"""What a campaign reports per target: counts, rates, phase coverage and the failures it found.

A :class:`TargetResult` travels as JSON from worker processes to the parent
(:meth:`TargetResult.to_json` / :meth:`TargetResult.from_json`) and into the
report; :func:`merge` sums one target's results from several workers.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any

from fuzz.oracle import PHASES
from fuzz.paged.ops import case_from_json
from fuzz.targets.base import CRASH, MISMATCH, failure_kind

#: How a case that hit a known finding ended (:attr:`fuzz.targets.base.RunStats.known`) -> its counter.
KNOWN_OUTCOMES = {True: "reproduced", False: "not_reproduced", None: "skipped"}


# ---------------------------------------------------------------------------
# Distinct findings (DESIGN §4): what makes two failures one bug


#: Numbers (ints, floats, hex, signed, with exponents) in a message: values that change from case to case.
_NUMBER = re.compile(r"[-+]?(?:0x[0-9a-fA-F]+|\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|nan|inf)")
#: Quoted strings in a message (values, paths).
_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")


def message_shape(text: str) -> str:
    """The shape of a failure message: its words with every value abstracted, so two cases of one bug
    (other positions, windows, payloads, lengths) give one shape and two bugs whose messages say different
    things give two. Bracketed lists become ``[…]``, numbers ``#``, quoted values ``'…'``; only the first
    line counts, and runs of the same token collapse (``#, #, #`` is ``#``)."""
    line = (text.splitlines() or [""])[0]
    line = re.sub(r"^instance @\d+: ", "", line)  # which live instance showed it is no part of the bug
    out, depth = [], 0
    for ch in line:  # nested lists and tuples, of any length, become one token
        if ch in "[(":
            if depth == 0:
                out.append("[…]" if ch == "[" else "(…)")
            depth += 1
        elif ch in "])" and depth:
            depth -= 1
        elif depth == 0:
            out.append(ch)
    shape = _QUOTED.sub("'…'", "".join(out))
    shape = _NUMBER.sub("#", shape)
    shape = re.sub(r"#(?:\s*[,x/:.]\s*#)+", "#", shape)
    return re.sub(r"\s+", " ", shape).strip()


def boundary_class(case: Any, index: int | None) -> str:
    """Where op ``index`` of ``case`` left its stream against the window: ``filling`` (still below W) or
    ``window`` (at W or past it: the window is full and, past it, evicting), ``empty`` (nothing pushed);
    a reset is ``reset``, a bad call ``refused``; ``start`` before the first op, ``case`` when the target
    does not say which op failed. The classes are coarse on purpose — measured on the single-bug mutants,
    telling "reaches W" from "first eviction" from "steady state" split one bug into up to four findings
    (a push path wrong when full fails at the first eviction after pushes and in the steady state after a
    chunk); two bugs the classes cannot tell apart still differ in the op that failed or what the message says."""
    if index is None:
        return "case"
    if index < 0:
        return "start"
    if getattr(case, "paged", False) or index >= len(getattr(case, "ops", ())):
        return "case"
    from fuzz.ops import Bad, Reset, target_of

    n = [0] * max(1, case.instance_count)
    windows = [case.instance_window(k) for k in range(case.instance_count)] or [case.window]
    for op in case.ops[:index]:
        k, bare = target_of(op)
        if isinstance(bare, Reset):
            n[k], windows[k] = 0, bare.window
        elif not isinstance(bare, Bad):
            n[k] += bare.tokens
    k, bare = target_of(case.ops[index])
    if isinstance(bare, Reset):
        return "reset"
    if isinstance(bare, Bad):
        return "refused"
    after = n[k] + bare.tokens
    return "empty" if after == 0 else "filling" if after < windows[k] else "window"


def op_kind(op: Any, index: int | None) -> str:
    """The kind of the first failing op: ``write`` (a push or a chunk: a chunk is pushes), ``reset``,
    ``bad`` (a call the error contract refuses), or a paged op's name; ``reset`` for the case's opening reset,
    ``case`` when unknown. Which bad call it was is left to the message, which names the API call and the status
    it broke: one check written after the write it guards is hit by ``bad:gap``, ``bad:dup`` and ``bad:past``
    alike (measured: three findings for one bug when the kind was part of it)."""
    if op is None:
        return "reset" if index is not None and index < 0 else "case"
    bare = getattr(op, "op", op)  # an instance-addressed op: the op itself
    text = getattr(bare, "text", type(bare).__name__)
    if text.startswith("bad:"):
        return "bad"
    name = text.split(":")[0].split()[0] if text else type(bare).__name__.lower()
    return "write" if name in ("push", "chunk") else name


def signature(target: str, error: BaseException, case: Any) -> str:
    """A finding's signature (DESIGN §4, distinct findings): the target, the outcome kind, the first failing
    op's kind and boundary class, and the shape of the message (:func:`message_shape`) — one string, equal for
    two cases of one bug and different for two bugs. A campaign reports one finding per signature, leaves out
    later cases predicted to repeat one it found (:class:`fuzz.phases.known.KnownBudget`), and a shrink that
    changes it is rejected. A known finding's signature is ``known:<id>`` (:func:`known_signature`)."""
    index, op = getattr(error, "index", None), getattr(error, "op", None)
    detail = getattr(error, "detail", None)
    text = detail if isinstance(detail, str) else f"{type(error).__name__}: {error}"
    kind, shape = failure_kind(error), message_shape(text)
    # Where the stream stood against W tells bugs in *which entries* a cache holds apart (one that keeps too many
    # once full, one that returns garbage while filling). A crash names its bug itself (the exception and its
    # message), and a payload that comes back changed is wrong wherever the stream stands: for them the class
    # is "any" — a cache that raises at position 5, or drops a key's fifth float, does so filling or evicting.
    where = "any" if kind == CRASH or _PAYLOAD.match(shape) else boundary_class(case, index)
    return " | ".join((target, kind, op_kind(op, index), where, shape))


#: A message about a key's or value's contents (not about which positions are held).
_PAYLOAD = re.compile(r"^(?:\[…\] )?(?:keys?|values?) (?:of|or|have)\b")


def known_signature(finding_id: str) -> str:
    """The signature of a known finding (``docs/findings/<id>.md``): its id names the bug already."""
    return f"known:{finding_id}"


@dataclass
class Failure:
    """One bug a campaign found: the error, the shrunk case and where its seed lives.

    ``kind`` is one of :data:`fuzz.targets.base.FINDINGS` (``mismatch`` or ``crash``).
    ``seed_error`` says why the seed could not be written (the CLI then prints it in full);
    ``note`` how the case was settled when the campaign could not finish shrinking it
    (interrupted, out of time, a worker that died)."""

    target: str
    error: str
    case: Any  #: a ring :class:`fuzz.ops.Case` or a :class:`fuzz.paged.ops.PagedCase`
    seed_id: str | None = None
    seed_path: str | None = None
    replay: str | None = None
    created: bool = True
    kind: str = MISMATCH
    seed_error: str | None = None
    note: str | None = None
    #: A corrupt file that held this seed's id, moved aside to make room (``<id>.json.corrupt``).
    moved_aside: str | None = None
    #: What makes it one bug (:func:`signature`): the campaign reports one finding per signature.
    signature: str | None = None
    #: Later cases that failed with this signature again (run, not re-reported) and cases left out before
    #: they ran because they were predicted to (:class:`fuzz.phases.known.KnownBudget`).
    repeats: int = 0
    left_out: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"target": self.target, "kind": self.kind, "error": self.error, "case": self.case.to_json(),
                "seed_id": self.seed_id, "seed_path": self.seed_path, "replay": self.replay,
                "created": self.created, "seed_error": self.seed_error, "note": self.note,
                "moved_aside": self.moved_aside, "signature": self.signature, "repeats": self.repeats,
                "left_out": self.left_out}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Failure":
        return cls(d["target"], d["error"], case_from_json(d["case"]), d.get("seed_id"), d.get("seed_path"),
                   d.get("replay"), d.get("created", True), d.get("kind", MISMATCH), d.get("seed_error"),
                   d.get("note"), d.get("moved_aside"), d.get("signature"), d.get("repeats", 0),
                   d.get("left_out", 0))

    @property
    def key(self) -> str:
        """What two reports of one bug share: the signature (a failure from an older report: its case)."""
        return self.signature or f"case:{self.case.id}"


@dataclass
class TargetResult:
    name: str
    examples: int = 0
    #: Tokens pushed (a chunk of k is k).
    tokens: int = 0
    seconds: float = 0.0
    phases: dict[str, int] = field(default_factory=lambda: {p: 0 for p in PHASES})
    versions: dict[str, str] = field(default_factory=dict)
    #: Examples, seconds and tokens until the first failing example, before shrinking.
    examples_to_fail: int | None = None
    seconds_to_fail: float | None = None
    tokens_to_fail: int | None = None
    failures: list[Failure] = field(default_factory=list)
    interrupted: bool = False
    done: bool = False
    workers: int = 1
    campaign_seed: int | None = None
    #: Known findings (``docs/findings/<id>.md``) the cases hit: id -> cases per outcome
    #: (``reproduced``, ``not_reproduced``, ``skipped``; :data:`KNOWN_OUTCOMES`).
    known: dict[str, dict[str, int]] = field(default_factory=dict)

    def count_known(self, known: dict[str, bool | None]) -> None:
        """Add one case's :attr:`~fuzz.targets.base.RunStats.known` to the counts."""
        for fid, outcome in known.items():
            counts = self.known.setdefault(fid, {v: 0 for v in KNOWN_OUTCOMES.values()})
            counts[KNOWN_OUTCOMES[outcome]] += 1

    @property
    def known_reproduced(self) -> list[str]:
        """Ids of the known findings some case reproduced."""
        return [fid for fid, c in self.known.items() if c.get("reproduced")]
    #: Why the harness stopped this target (a harness fault, DESIGN §4: never a seed; exit 3), one line each.
    faults: list[str] = field(default_factory=list)
    #: What the campaign is doing: ``fuzzing``, ``shrinking`` or ``reducing`` a failure, ``done``.
    phase: str = "fuzzing"
    #: The smallest failing case so far while a failure is shrunk or reduced, not yet saved: what the
    #: parent saves when the worker running it dies.
    pending: Failure | None = None
    #: Things the user should know that are neither findings nor faults (e.g. a database that went away).
    warnings: list[str] = field(default_factory=list)
    #: Tokens and seconds of the bulk phase (C targets: every step checked through ``ringkv_trace``),
    #: counted apart from the case-by-case ``tokens``.
    bulk_tokens: int = 0
    bulk_seconds: float = 0.0
    #: The explicit tolerances a logits target compares with (``Target.tolerances``).
    tolerances: dict[str, Any] = field(default_factory=dict)
    #: The campaign phases (:data:`fuzz.phases.ORDER`): name -> ``{"status": "ran" | "n/a" | "skipped" |
    #: "not reached", "examples": n, "seconds": s, "why": reason}``.
    phases_run: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: When each known finding first reproduced: id -> ``{"examples", "seconds"}`` (time to bug).
    known_first: dict[str, dict[str, float]] = field(default_factory=dict)
    #: Where each known finding that applies to the target is written up (``Target.finding_links``).
    known_links: dict[str, dict[str, str]] = field(default_factory=dict)
    #: Why the default campaign's coverage goal was not met here (:mod:`fuzz.schedule`), one line; ``None``: met.
    short: str | None = None
    #: Paged targets' efficiency observations (reported, not failed; :data:`fuzz.paged.checks.EFFICIENCY`):
    #: kind -> how many times cases made it, and one sample case each (kind -> ``{"case", "op"}``).
    efficiency: dict[str, int] = field(default_factory=dict)
    efficiency_samples: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: Seeds this campaign's workers saved for a signature another worker had saved first (:func:`merge`): the
    #: parent removes them (:func:`fuzz.workers.run_workers`), so one bug leaves one seed.
    duplicate_seeds: list[str] = field(default_factory=list)
    #: Cases of an isolated target that ran past the op limit once and ended when run again alone with a
    #: longer one: slow, not a finding (never a seed, never exit 1; :mod:`fuzz.targets.supervisor`).
    slow: list[dict[str, Any]] = field(default_factory=list)
    #: Kernel targets: kernel launches made by the cases that ran to the end, and those cases' seconds
    #: (:attr:`~fuzz.targets.base.RunStats.calls`): the report's calls/s.
    kernel_calls: int = 0
    kernel_seconds: float = 0.0

    @property
    def kernel_calls_per_s(self) -> float:
        return self.kernel_calls / self.kernel_seconds if self.kernel_seconds else 0.0

    def count_efficiency(self, stats: Any, case: Any) -> None:
        """Add one case's efficiency observations (:attr:`~fuzz.targets.base.RunStats.efficiency`), keeping the
        first case that made each kind as its sample."""
        for kind, n in stats.efficiency.items():
            self.efficiency[kind] = self.efficiency.get(kind, 0) + n
            if kind not in self.efficiency_samples:
                self.efficiency_samples[kind] = {"case": case.to_json(), "text": str(case),
                                                 "op": stats.efficiency_first.get(kind)}

    @property
    def examples_per_s(self) -> float:
        return self.examples / self.seconds if self.seconds else 0.0

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.seconds if self.seconds else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "examples": self.examples,
            "tokens": self.tokens,
            "seconds": round(self.seconds, 3),
            "examples_per_s": round(self.examples_per_s, 1),
            "tokens_per_s": round(self.tokens_per_s, 1),
            "phases": dict(self.phases),
            "failures": [f.to_json() for f in self.failures],
            "examples_to_fail": self.examples_to_fail,
            "seconds_to_fail": self.seconds_to_fail,
            "tokens_to_fail": self.tokens_to_fail,
            "versions": dict(self.versions),
            "interrupted": self.interrupted,
            "done": self.done,
            "workers": self.workers,
            "campaign_seed": self.campaign_seed,
            "known_findings": {fid: dict(c) for fid, c in self.known.items()},
            "harness_faults": list(self.faults),
            "phase": self.phase,
            "pending": None if self.pending is None else self.pending.to_json(),
            "warnings": list(self.warnings),
            "bulk_tokens": self.bulk_tokens,
            "bulk_seconds": round(self.bulk_seconds, 4),
            "tolerances": dict(self.tolerances),
            "campaign_phases": {k: dict(v) for k, v in self.phases_run.items()},
            "short_of_goal": self.short,
            "known_links": {k: dict(v) for k, v in self.known_links.items()},
            "known_first": {k: dict(v) for k, v in self.known_first.items()},
            "efficiency": dict(self.efficiency),
            "efficiency_samples": {k: dict(v) for k, v in self.efficiency_samples.items()},
            "slow": [dict(x) for x in self.slow],
            "kernel_calls": self.kernel_calls,
            "kernel_seconds": round(self.kernel_seconds, 3),
            "kernel_calls_per_s": round(self.kernel_calls_per_s, 3),
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "TargetResult":
        return cls(d["name"], examples=d["examples"], tokens=d["tokens"], seconds=d["seconds"],
                   phases=dict(d["phases"]), versions=dict(d.get("versions", {})),
                   examples_to_fail=d.get("examples_to_fail"), seconds_to_fail=d.get("seconds_to_fail"),
                   tokens_to_fail=d.get("tokens_to_fail"), failures=[Failure.from_json(f) for f in d["failures"]],
                   interrupted=d.get("interrupted", False), done=d.get("done", False),
                   workers=d.get("workers", 1), campaign_seed=d.get("campaign_seed"),
                   known={fid: dict(c) for fid, c in d.get("known_findings", {}).items()},
                   faults=list(d.get("harness_faults", [])), phase=d.get("phase", "fuzzing"),
                   pending=None if d.get("pending") is None else Failure.from_json(d["pending"]),
                   warnings=list(d.get("warnings", [])),
                   bulk_tokens=d.get("bulk_tokens", 0), bulk_seconds=d.get("bulk_seconds", 0.0),
                   tolerances=dict(d.get("tolerances", {})),
                   phases_run={k: dict(v) for k, v in d.get("campaign_phases", {}).items()},
                   short=d.get("short_of_goal"),
                   known_links={k: dict(v) for k, v in d.get("known_links", {}).items()},
                   known_first={k: dict(v) for k, v in d.get("known_first", {}).items()},
                   efficiency=dict(d.get("efficiency", {})),
                   efficiency_samples={k: dict(v) for k, v in d.get("efficiency_samples", {}).items()},
                   slow=[dict(x) for x in d.get("slow", [])],
                   kernel_calls=d.get("kernel_calls", 0), kernel_seconds=d.get("kernel_seconds", 0.0))


#: Which status of a phase wins when two runs of it are combined (a phase that ran in one worker ran).
_STATUS_RANK = {"ran": 3, "skipped": 2, "not reached": 1, "n/a": 0}


def merge_phases(into: dict[str, dict[str, Any]], other: dict[str, dict[str, Any]]) -> None:
    """Add ``other``'s phase records to ``into``: examples and seconds add up, the strongest status wins."""
    for name, rec in other.items():
        mine = into.get(name)
        if mine is None:
            into[name] = dict(rec)
            continue
        mine["examples"] = mine.get("examples", 0) + rec.get("examples", 0)
        mine["seconds"] = round(mine.get("seconds", 0.0) + rec.get("seconds", 0.0), 4)
        if _STATUS_RANK.get(rec.get("status"), 0) > _STATUS_RANK.get(mine.get("status"), 0):
            mine["status"] = rec["status"]
            if "why" in rec:
                mine["why"] = rec["why"]
            else:
                mine.pop("why", None)


def absorb(first: TargetResult, later: TargetResult) -> TargetResult:
    """One target's result after a later round of the same campaign in the same process (:mod:`fuzz.schedule`):
    counts add up, wall time too; the first failure found is the one kept."""
    m = merge(first.name, [first, later])
    m.workers = first.workers
    m.seconds = first.seconds + later.seconds
    m.campaign_seed = first.campaign_seed
    return m


def merge(name: str, parts: list[TargetResult]) -> TargetResult:
    """Sum one target's results from several workers (rates over the longest worker's wall time)."""
    m = TargetResult(name, workers=len(parts))
    m.seconds = max((p.seconds for p in parts), default=0.0)
    seen: set[str] = set()
    by_key: dict[str, Failure] = {}
    for p in parts:
        m.examples += p.examples
        m.tokens += p.tokens
        m.bulk_tokens += p.bulk_tokens
        m.bulk_seconds += p.bulk_seconds
        m.kernel_calls += p.kernel_calls
        m.kernel_seconds += p.kernel_seconds
        m.tolerances.update(p.tolerances)
        for k, v in p.phases.items():
            m.phases[k] = m.phases.get(k, 0) + v
        m.versions.update(p.versions)
        m.interrupted |= p.interrupted
        for fid, c in p.known.items():
            mine = m.known.setdefault(fid, {k: 0 for k in c})
            for k, v in c.items():
                mine[k] = mine.get(k, 0) + v
        merge_phases(m.phases_run, p.phases_run)
        m.known_links.update(p.known_links)
        for fid, first in p.known_first.items():
            if fid not in m.known_first or first["seconds"] < m.known_first[fid]["seconds"]:
                m.known_first[fid] = dict(first)
        m.short = m.short or p.short
        for kind, n in p.efficiency.items():
            m.efficiency[kind] = m.efficiency.get(kind, 0) + n
        for kind, sample in p.efficiency_samples.items():
            m.efficiency_samples.setdefault(kind, dict(sample))
        m.faults += [f for f in p.faults if f not in m.faults]
        m.warnings += [w for w in p.warnings if w not in m.warnings]
        m.slow += p.slow
        for f in p.failures:  # two workers (or rounds) that found one signature found one bug
            have = by_key.get(f.key)
            if have is None:
                by_key[f.key] = have = dataclasses.replace(f)  # a copy: merge runs again at every update
                m.failures.append(have)
            else:
                have.repeats += f.repeats + 1
                have.left_out += f.left_out
                if f.seed_path and f.created and f.seed_path != have.seed_path:
                    m.duplicate_seeds.append(f.seed_path)
            seen.add(f.case.id)
    first = min((p for p in parts if p.seconds_to_fail is not None), key=lambda p: p.seconds_to_fail, default=None)
    if first is not None:  # the worker that failed first
        m.examples_to_fail, m.seconds_to_fail, m.tokens_to_fail = \
            first.examples_to_fail, first.seconds_to_fail, first.tokens_to_fail
    m.done = all(p.done for p in parts) and bool(parts)
    busy = [p.phase for p in parts if not p.done and p.phase != "fuzzing"]
    m.phase = "done" if m.done else (busy[0] if busy else "fuzzing")
    pending = [p.pending for p in parts if p.pending is not None and p.pending.case.id not in seen
               and p.pending.key not in by_key]
    m.pending = min(pending, key=lambda f: (len(f.case.ops), f.case.tokens), default=None)
    return m
