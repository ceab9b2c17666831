"""The gate's report as data (``report.json``) and as Markdown (``report.md``).

The first screen of every form is the verdict table: one row per step — verdict and one line of
evidence — so a reviewer reads the outcome in a minute; the checks behind each step follow, failures
first. ``report.json`` holds everything the other two are rendered from (:func:`document`), so a CI job
can read any number the reports show.
"""

from __future__ import annotations

from typing import Any

from fuzz.bench.summary import plain
from fuzz.gate.verdict import FAIL, LABEL, NA, PASS, Step

REPORT_VERSION = 1
EXIT = {PASS: 0, FAIL: 1, "fault": 3}


def document(ctx: Any, steps: list[Step], verdict: str, runtime_s: float, machine: dict[str, Any],
             plots: dict[str, str], faults: list[str]) -> dict[str, Any]:
    cfg = ctx.config
    subjects = {}
    for role, s in ctx.roles():
        subjects[role] = {"spec": s.spec, "description": s.description, "tolerance": list(s.tolerance),
                          "identity": ctx.identities.get(s.spec, {}), "versions": s.versions}
    return plain({
        "version": REPORT_VERSION, "verdict": verdict, "exit": EXIT[verdict], "command": cfg.command(),
        "config": {"baseline": cfg.baseline, "candidate": cfg.candidate, "intervention": cfg.intervention,
                   "claim": cfg.claim.text, "quick": cfg.quick, "budget": cfg.budget.name, "seed": cfg.seed,
                   "sources": cfg.sources},
        "subjects": subjects, "window": ctx.window, "vocab": ctx.vocab, "notes": ctx.notes,
        "steps": [{"number": s.number, "title": s.title, "verdict": s.verdict, "summary": s.summary,
                   "seconds": round(s.seconds, 3),
                   "checks": [{"name": c.name, "subject": c.subject, "verdict": c.verdict, "detail": c.detail,
                               **({"data": c.data} if c.data else {})} for c in s.checks],
                   "data": s.data} for s in steps],
        "runtime_s": round(runtime_s, 2), "machine": machine, "plots": plots, "faults": faults,
    })


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def headline(doc: dict[str, Any]) -> str:
    text = _headline(doc)
    if doc.get("interrupted"):
        return f"{text} — INTERRUPTED ({doc['interrupted']}): the steps after the last finished one were not reached"
    return text


def _headline(doc: dict[str, Any]) -> str:
    v = doc["verdict"]
    failed = [s for s in doc["steps"] if s["verdict"] == FAIL]
    faulted = [s for s in doc["steps"] if s["verdict"] == "fault"]
    if not failed and not faulted:
        return f"{LABEL[v]}" + (f": {doc['faults'][0]}" if doc["faults"] else ": every step passed or is not applicable")
    out = ", ".join(f"step {s['number']} ({s['title'].lower()})" for s in failed)
    out = (f"{LABEL[v]} at {out}" if failed else LABEL[v])
    if faulted:
        out += ("; harness fault at " if failed else " at ") + ", ".join(f"step {s['number']}" for s in faulted)
    return out


def ordered(checks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rank = {FAIL: 0, "fault": 0, PASS: 1, NA: 2}
    return sorted(checks, key=lambda c: rank.get(c["verdict"], 3))


def render_markdown(doc: dict[str, Any]) -> str:
    c = doc["config"]
    out = [f"# kvwindow gate — {headline(doc)}", "",
           "| step | verdict | evidence |", "|---|---|---|"]
    for s in doc["steps"]:
        out.append(f"| {s['number']}. {s['title']} | **{LABEL[s['verdict']]}** | {_cell(s['summary'])} |")
    out += ["", f"`{doc['command']}` — exit {doc['exit']}, {doc['runtime_s']:.1f} s "
                f"({c['budget']} budget) on {doc['machine'].get('cpu', '?')}.", ""]
    out += ["| role | subject | what it is | tolerance of cached vs full() |", "|---|---|---|---|"]
    for role, s in doc["subjects"].items():
        tol = s["tolerance"]
        out.append(f"| {role} | `{s['spec']}` | {_cell(s['description'])} | {tol[0]:g}"
                   + (f" + {tol[1]:g}·\\|ref\\|" if tol[1] else "") + " |")
    out.append("")
    out.append(f"Intervention **{c['intervention']}**, claim **{c['claim']}**; streams sized by W = {doc['window']} "
               f"(vocabulary {doc['vocab']}).")
    for n in doc["notes"]:
        out.append(f"* {n}")
    for f in doc["faults"]:
        out.append(f"* harness fault: {f}")
    for s in doc["steps"]:
        out += ["", f"## {s['number']}. {s['title']} — {LABEL[s['verdict']]}", "", _cell(s["summary"]), ""]
        if s["number"] == 6 and s["data"].get("ratios"):
            out += ["| clock | baseline (median) | candidate (median) | candidate / baseline (min · median · max) |",
                    "|---|---|---|---|"]
            per = s["data"]["per_subject"]
            base, cand = doc["subjects"]["baseline"]["spec"], doc["subjects"]["candidate"]["spec"]
            for key, r in s["data"]["ratios"].items():
                b, k = per[base][key]["median"], per[cand][key]["median"]
                fmt = (lambda x: "—" if x is None else f"{x * 1e3:.3f} ms" if key.endswith("_s") else f"{x:.0f}")  # noqa: E731
                rr = "—" if r["median"] is None else f"{r['min']:.2f} · **{r['median']:.2f}** · {r['max']:.2f}"
                out.append(f"| {r['label']} | {fmt(b)} | {fmt(k)} | {rr} |")
            for spec in (base, cand):
                out.append(f"\nKV formula for `{spec}`: {per[spec]['kv_formula']} = {per[spec]['kv_formula_bytes']} B.")
            for name, fname in doc["plots"].items():
                out.append(f"\n![{name}]({fname})")
            out.append("")
        out += ["| check | subject | verdict | evidence |", "|---|---|---|---|"]
        for ch in ordered(s["checks"]):
            out.append(f"| {_cell(ch['name'])} | `{_cell(ch['subject'])}` | {LABEL.get(ch['verdict'], ch['verdict'])} "
                       f"| {_cell(ch['detail'])} |")
    return "\n".join(out) + "\n"
