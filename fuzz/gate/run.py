"""``kvwindow gate`` — seed 000's release gate for a cache or decoding change, as one CI step with a report.

``kvwindow gate --baseline SUBJECT --candidate SUBJECT --intervention KIND --claim LEVEL [--quick]
[--report DIR]`` (or the same keys in ``[tool.kvwindow.gate]`` of ``./pyproject.toml``) runs the eight
steps on two decoders driven through the decoder protocol (:mod:`fuzz.gate.protocol`; subjects:
:mod:`fuzz.gate.subjects`):

1. the intervention as declared (:mod:`fuzz.gate.declare`); 2. the claim at its level (same);
3. cache identity (:mod:`fuzz.gate.identity`); 4. positive parity (:mod:`fuzz.gate.parity`);
5. negative controls (:mod:`fuzz.gate.controls`); 6. phase-specific performance (:mod:`fuzz.gate.perf`);
7. quality slices (:mod:`fuzz.gate.quality`); 8. invalidation and recovery (:mod:`fuzz.gate.recovery`).

It writes ``report.md``, a self-contained ``report.html`` and ``report.json`` (plus the PNG plots) into
DIR, atomically, and exits 0 when no step fails, 1 when one does, 2 on a usage error (checked before
anything runs: options, subjects, the report folder), 3 on a harness fault (the gate itself, or an
adapter that cannot drive its third-party release; the report is still written) when no step failed:
a failure outranks a fault, as a finding does in a campaign. Ctrl-C or SIGTERM stops it at once and writes the
report of every finished step (the rest "not reached: interrupted"); it exits 130 (Ctrl-C) or 143 (SIGTERM)
unless a finished step failed (1).

Subjects run in a child process each by default (:mod:`fuzz.gate.isolate`; ``--no-isolate``), resolved there (the
gate never imports code under test itself), every call within a limit that follows the measured cost
(``--op-timeout`` fixes it): a subject that dies, hangs or ends its process fails the step that called it; one
that does so before the first step (while its module is imported, an instance built, or the probe answered)
fails the gate (exit 1) with a report whose steps say they were not reached.
"""

from __future__ import annotations

import json
import signal
import sys
import time
import traceback
from typing import Callable

from fuzz.gate import config as cfgmod
from fuzz.gate.context import DEFAULT_WINDOW, Context, stream_window
from fuzz.gate.controls import step5
from fuzz.gate.declare import step1, step2
from fuzz.gate.files import atomic_write, check_writable
from fuzz.gate.html import render_html
from fuzz.gate.identity import step3
from fuzz.gate.parity import step4
from fuzz.gate.perf import step6
from fuzz.gate.plots import plot_latency, plot_ratios
from fuzz.gate.protocol import GateFault, Subject, SubjectError
from fuzz.gate.quality import step7
from fuzz.gate.recovery import step8
from fuzz.gate.report import EXIT, document, render_markdown
from fuzz.gate.subjects import SubjectUsageError, resolve
from fuzz.gate.isolate import SubjectDied, spawn
from fuzz.gate.verdict import FAIL, FAULT, LABEL, NA, Step, mark_shared, overall
from fuzz.machine import machine_info
from fuzz.targets.base import HarnessInterrupt, interrupt_handlers
from impl.errors import Unavailable

EXIT_USAGE = 2
STEPS: tuple[tuple[int, Callable[[Context], Step]], ...] = (
    (1, step1), (2, step2), (3, step3), (4, step4), (5, step5), (6, step6), (7, step7), (8, step8))


def check_identity_bounds(identity: dict, who: str) -> None:
    """The windows an identity reports within the bound campaigns obey (:data:`fuzz.config.WINDOW_BOUND`): the gate
    sizes its streams by them, so a window of 10**9 would allocate gigabytes before the first step."""
    from fuzz.config import WINDOW_BOUND

    w = identity.get("window")
    for x in (w if isinstance(w, (list, tuple)) else [w]):
        if isinstance(x, int) and not isinstance(x, bool) and x > WINDOW_BOUND:
            raise cfgmod.UsageError(f"{who}: its identity reports window {x}, beyond the bound {WINDOW_BOUND} the "
                                    "gate sizes streams within")


class ProbeDied(Exception):
    """A subject's process died or hung before the first step (while its module was imported and the subject
    resolved, an instance built, or the probe answered): the subject's failure, reported as the gate's
    (exit 1), never a usage error. ``subjects`` holds both roles' subjects as far as they were started."""

    def __init__(self, role: str, spec: str, why: str, subjects: dict[str, Subject]):
        self.role, self.spec, self.why, self.subjects = role, spec, why, subjects
        super().__init__(f"{role} {spec!r} {why}")


def _subject(conf: cfgmod.GateConfig, role: str, spec: str, opened: list | None, started: dict) -> Subject:
    if not conf.isolate:
        return resolve(spec, role)
    try:  # resolved in its child: the gate's process never imports code under test
        s = spawn(spec, role, conf.op_timeout)
    except SubjectDied as e:
        raise ProbeDied(role, spec, f"died while its module was imported and the subject resolved: {e}",
                        started) from e
    if opened is not None:
        opened.append(s)
    return s


def prepare(conf: cfgmod.GateConfig, log: Callable[[str], None], opened: list | None = None) -> Context:
    """Resolve and probe both subjects (usage errors before any work): identities, window, vocabulary. Isolated
    subjects (``conf.isolate``) are appended to ``opened``: the caller stops their processes. A subject whose
    process dies or hangs here raises :class:`ProbeDied`."""
    started: dict[str, Subject] = {}
    base = started["baseline"] = _subject(conf, "baseline", conf.baseline, opened, started)
    cand = started["candidate"] = _subject(conf, "candidate", conf.candidate, opened, started)
    identities, vocab = {}, {}
    for role, s in (("baseline", base), ("candidate", cand)):
        try:
            h = s.new()
            identities[s.spec] = h.identity()
            vocab[role] = h.full([1]).shape[-1]
        except SubjectError as e:
            if isinstance(e.cause, SubjectDied):  # a death or a hang, not an answer: the subject's failure
                raise ProbeDied(role, s.spec, f"died while the gate probed it: {e.method}: {e.what}", started) from e
            raise cfgmod.UsageError(f"{role} {s.spec!r} does not answer the decoder protocol: {e.method} raised "
                                    f"{e.what}") from e
    base.vocab, cand.vocab = vocab["baseline"], vocab["candidate"]  # every later answer is checked against it
    for role, s in (("baseline", base), ("candidate", cand)):
        check_identity_bounds(identities[s.spec], f"{role} {s.spec!r}")
    if vocab["baseline"] != vocab["candidate"]:
        raise cfgmod.UsageError(f"baseline and candidate have different vocabularies ({vocab['baseline']} and "
                                f"{vocab['candidate']} logits per token): they are not two versions of one model")
    w, windows = stream_window(identities[base.spec])
    ctx = Context(conf, base, cand, w or DEFAULT_WINDOW, windows, vocab["baseline"], identities, log)
    if w is None:
        ctx.notes.append(f"the baseline reports no sliding window; streams are sized by W = {DEFAULT_WINDOW}")
    return ctx


def not_reached(steps: list[Step], why: str) -> list[Step]:
    """``steps`` and, for every step after them, a step that says it was not reached and why."""
    done = {s.number for s in steps}
    return steps + [Step(n, verdict=NA, summary=f"not reached: {why}") for n, _ in STEPS if n not in done]


def run_steps(ctx: Context, steps: list[Step] | None = None,
              faults: list[str] | None = None) -> tuple[list[Step], list[str]]:
    """Run the eight steps in order, appending each finished one to ``steps`` and its faults to ``faults`` (so an
    interrupt keeps them)."""
    steps, faults = ([] if steps is None else steps), ([] if faults is None else faults)
    t0 = time.monotonic()
    for number, fn in STEPS:
        ctx.log(f"[{time.monotonic() - t0:6.1f}s] step {number} ...")
        t1 = time.monotonic()
        try:
            step = fn(ctx)
        except SubjectError as e:  # the subject raised outside a judged check: still its outcome
            step = Step(number)
            step.add("step", e.spec, FAIL, f"{e.method} raised {e.what} on a valid call")
            step.settle("", "")
        except (GateFault, Unavailable) as e:
            step = Step(number, verdict=FAULT, summary=f"harness fault: {e}")
            faults.append(f"step {number}: {e}")
        except Exception as e:  # noqa: BLE001 - the gate's own error: a fault, never a verdict on the subjects
            step = Step(number, verdict=FAULT, summary=f"harness fault: {type(e).__name__}: {e}")
            faults.append(f"step {number}: {type(e).__name__}: {e}")
            ctx.log(traceback.format_exc())
        step.seconds = time.monotonic() - t1
        mark_shared(step)
        ctx.log(f"           step {number} {step.title}: {LABEL[step.verdict]} — {step.summary[:160]}")
        steps.append(step)
    return steps, faults


def write_reports(ctx: Context, steps: list[Step], faults: list[str], runtime: float,
                  interrupted: HarnessInterrupt | None = None) -> dict:
    out = ctx.config.report
    for _, subject in ctx.roles():  # calls past their limit that answered within the confirmation: slow, not hung
        ctx.notes.extend(line for line in getattr(getattr(subject, "process", None), "slow", ()) if line not in ctx.notes)
    pngs: dict[str, bytes] = {}
    s6 = next((s for s in steps if s.number == 6), None)
    if s6 is not None and s6.data.get("ratios"):
        try:
            pngs["perf_ratios.png"] = plot_ratios(s6.data, ctx.baseline.spec, ctx.candidate.spec)
            pngs["decode_latency.png"] = plot_latency(s6.data, ctx.baseline.spec, ctx.candidate.spec)
        except Exception as e:  # noqa: BLE001 - a plot that fails is a fault, the numbers stay in the report
            faults.append(f"plots: {type(e).__name__}: {e}")
    verdict = overall(steps, bool(faults))
    doc = document(ctx, steps, verdict, runtime, machine_info(), {n: n for n in pngs}, faults)
    if interrupted is not None:  # a failed step outranks the interruption, as a finding does in a campaign
        doc["interrupted"] = signal_name(interrupted.signum)
        if verdict != FAIL:
            doc["exit"] = 128 + interrupted.signum
    for name, png in pngs.items():
        atomic_write(out / name, png)
    atomic_write(out / "report.json", json.dumps(doc, indent=1) + "\n")
    atomic_write(out / "report.md", render_markdown(doc))
    atomic_write(out / "report.html", render_html(doc, pngs))
    return doc


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = cfgmod.build_parser().parse_args(argv)
    except SystemExit as e:  # argparse printed the bad option
        return int(e.code or 0)
    log = (lambda s: None) if args.quiet else (lambda s: print(s, file=sys.stderr, flush=True))
    t0 = time.monotonic()
    opened: list = []  # the isolated subjects' processes, stopped whatever happens
    with interrupt_handlers():  # a real Ctrl-C / SIGTERM raises HarnessInterrupt; a subject's own fails it
        return _main(args, log, t0, opened)


def _main(args, log: Callable[[str], None], t0: float, opened: list) -> int:
    try:
        try:
            conf = cfgmod.load(args)
            why = check_writable(conf.report)
            if why:
                raise cfgmod.UsageError(f"{conf.sources['report']}: report folder: {why}")
            ctx = prepare(conf, log, opened)
        except ProbeDied as e:  # the subject's failure before the first step: a failed gate, with its report
            return _probe_died(conf, e, log, t0)
        except (cfgmod.UsageError, SubjectUsageError) as e:
            print(f"kvwindow gate: error: {e}", file=sys.stderr)
            return EXIT_USAGE
        except (GateFault, Unavailable) as e:
            print(f"kvwindow gate: harness fault: {e}", file=sys.stderr)
            return EXIT["fault"]
        except Exception as e:  # noqa: BLE001 - the subject's process could not start: its failure, said in one line
            print(f"kvwindow gate: error: a subject could not be started: {type(e).__name__}: {e}", file=sys.stderr)
            return EXIT_USAGE
        except HarnessInterrupt as e:
            print(f"kvwindow gate: interrupted ({signal_name(e.signum)}) before the first step; no report written",
                  file=sys.stderr)
            return 128 + e.signum
        steps: list[Step] = []
        faults: list[str] = []
        interrupted: HarnessInterrupt | None = None
        try:
            run_steps(ctx, steps, faults)
        except HarnessInterrupt as e:  # every finished step is kept; the rest say they were not reached
            interrupted = e
            ctx.notes.append(f"interrupted ({signal_name(e.signum)}) after {len(steps)} step(s): the rest were not "
                             "reached")
            steps = not_reached(steps, f"interrupted ({signal_name(e.signum)})")
        for s in (signal.SIGINT, signal.SIGTERM):  # the report is written whole: a second signal waits for it
            signal.signal(s, signal.SIG_IGN)
        try:
            doc = write_reports(ctx, steps, faults, time.monotonic() - t0, interrupted)
        except OSError as e:
            print(f"kvwindow gate: harness fault: cannot write the report into {conf.report}: {e}", file=sys.stderr)
            return EXIT["fault"]
        label = doc["verdict"].upper() if interrupted is None or doc["verdict"] == FAIL else \
            f"INTERRUPTED ({signal_name(interrupted.signum)}; the finished steps are in the report)"
        print(f"kvwindow gate: {label} in {doc['runtime_s']:.1f} s -> {conf.report / 'report.html'}")
        for s in doc["steps"]:
            print(f"  {s['number']}. {s['title']:<28} {LABEL[s['verdict']]:<5} {s['summary'][:150]}")
        return int(doc["exit"])
    finally:
        for subject in opened:
            subject.process.close()


def _probe_died(conf: cfgmod.GateConfig, e: ProbeDied, log: Callable[[str], None], t0: float) -> int:
    """The report of a gate whose subject died or hung before the first step: step 1 fails naming the subject and
    what it was doing, the other steps were not reached."""
    def unstarted(role: str, spec: str) -> Subject:
        return Subject(spec, lambda: None, description=f"not started: the {e.role} died first")

    subjects = {role: e.subjects.get(role) or unstarted(role, spec)
                for role, spec in (("baseline", conf.baseline), ("candidate", conf.candidate))}
    ctx = Context(conf, subjects["baseline"], subjects["candidate"], DEFAULT_WINDOW, [], 0, {}, log)
    ctx.notes.append(f"the {e.role} {e.why}; no step could run")
    first = Step(1)
    first.add("probe", e.spec, FAIL, e.why)
    first.settle("", "")
    steps = not_reached([first], f"the {e.role} died before the first step")
    try:
        doc = write_reports(ctx, steps, [], time.monotonic() - t0)
    except OSError as err:
        print(f"kvwindow gate: harness fault: cannot write the report into {conf.report}: {err}", file=sys.stderr)
        return EXIT["fault"]
    print(f"kvwindow gate: FAIL in {doc['runtime_s']:.1f} s -> {conf.report / 'report.html'}")
    print(f"  the {e.role} {e.spec!r} {e.why[:300]}")
    return int(doc["exit"])


def signal_name(signum: int) -> str:
    return {signal.SIGINT: "Ctrl-C", signal.SIGTERM: "SIGTERM"}.get(signum, f"signal {signum}")


if __name__ == "__main__":
    sys.exit(main())
