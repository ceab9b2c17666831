#!/usr/bin/env python3
"""The engines' rows of ``docs/compat.md`` from ``scripts/engine_matrix.sh ENGINE --fuzz`` output, and the README's
supported ranges for engines from ``docs/compat.md``.

    scripts/engine_compat.py ENGINE --reports DIR [--releases "A B"]   # DIR/compat-ENGINE.md
    scripts/engine_compat.py ENGINE --reports DIR --write              # ... and docs/compat.md, README.md
    scripts/engine_compat.py --write                                   # README.md from docs/compat.md as it is
    scripts/engine_compat.py --check                                   # exit 1 where README.md disagrees

One row per release: the engine's tests (``N passed``) and one cell per target of the engine, each the outcome of
``kvwindow fuzz --target T --seed 0`` on that release (cells as ``scripts/compat_table.py`` writes them:
``clean``, ``known: ID``, ``finding: ...``, ``harness fault: ...``, ``unavailable: ...``; and ``n/a (the release
has no X)`` where the target is unavailable because the release predates the operator or class it drives —
``impl/engines/*.LACKS`` is the phrase — which is not the adapter's fault). Rows of releases not run this time are
kept. The README block (between ``<!-- engines:begin -->`` and ``<!-- engines:end -->``) names per engine the
oldest and newest release of its table, every release whose tests failed or whose adapter faulted, and the
releases where a target is n/a.

Each finding note of the engine (the findings tables named by ``FINDINGS`` in ``scripts/engines/ENGINE.env``) gets
its release table from its rows (``Finding.releases`` and ``Finding.seen``), between ``<!-- releases: ... -->`` and
``<!-- /releases -->``; a run's reports are checked against ``seen`` (a reproduction on a release ``seen`` does not
name, or a release ``seen`` names that ran and did not reproduce, is printed as a note under the table).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from compat_table import _short, cell, read_targets, version_key  # noqa: E402
from fuzz.targets.known import span_text  # noqa: E402

COMPAT = ROOT / "docs" / "compat.md"
README = ROOT / "README.md"
BEGIN, END = "<!-- engines:begin -->", "<!-- engines:end -->"
#: What an unavailable engine target's reason says when the release lacks the operator/class (impl/engines/*.LACKS).
LACKS = "the release has no"
NOTE_BEGIN = "<!-- releases: written by scripts/engine_compat.py from the engine's findings table -->"
NOTE_END = "<!-- /releases -->"


def engine_cell(result: dict | None, listed: str | None, log_hint: str) -> str:
    """:func:`compat_table.cell`, except that a release lacking the target's operator is ``n/a (the release has
    no X)`` (X: the reason's words after the phrase, up to its parenthesis)."""
    if listed is not None and listed != "available" and LACKS in listed:
        what = listed[listed.index(LACKS):].split(" (")[0].rstrip(".;: ")
        return f"n/a ({what})"
    return cell(result, listed, log_hint)


def env(engine: str) -> dict[str, str]:
    """The variables of ``scripts/engines/ENGINE.env`` (simple ``NAME=value`` / ``NAME="value"`` lines)."""
    path = ROOT / "scripts" / "engines" / f"{engine}.env"
    if not path.exists():
        raise SystemExit(f"engine_compat: no {path.relative_to(ROOT)}")
    out = {}
    for line in path.read_text().splitlines():
        m = re.match(r'^([A-Z_]+)=(?:"(.*)"|(\S*))\s*$', line.strip())
        if m:
            out[m.group(1)] = m.group(2) if m.group(2) is not None else m.group(3)
    return out


def markers(engine: str) -> tuple[str, str]:
    return f"<!-- engine:{engine} -->", f"<!-- /engine:{engine} -->"


def engines_in_docs(text: str) -> list[str]:
    return re.findall(r"<!-- engine:([\w.-]+) -->", text)


def parse_rows(block: str) -> tuple[list[str], dict[str, list[str]]]:
    """A table block -> (header cells, release -> cells)."""
    lines = [ln for ln in block.splitlines() if ln.startswith("|")]
    if len(lines) < 2:
        return [], {}
    split = lambda ln: [c.strip() for c in ln.strip().strip("|").split("|")]  # noqa: E731
    head = split(lines[0])
    return head, {split(ln)[0]: split(ln)[1:] for ln in lines[2:]}


def collect(engine: str, reports: Path, releases: list[str]) -> tuple[list[str], dict[str, list[str]], dict[str, str]]:
    """``(targets, release -> cells, release -> versions line)`` from an engine_matrix.sh ``--out``."""
    e = env(engine)
    prefix = e["TARGET_PREFIX"]
    listed: dict[str, dict[str, str]] = {}
    for rel in releases:
        p = reports / f"targets-{rel}.txt"
        listed[rel] = read_targets(p) if p.exists() else {}
    targets = sorted({t for per in listed.values() for t in per if t.startswith(prefix) and not t.endswith("*")
                      and "|" not in t}, key=lambda t: (t.count("-") == 0 and ":" in t, t))
    rows, versions = {}, {}
    for rel in releases:
        tests = (reports / f"tests-{rel}.txt").read_text().strip() if (reports / f"tests-{rel}.txt").exists() else "not run"
        report = reports / f"report-{rel}.json"
        results, seen_versions = {}, {}
        if report.exists():
            doc = json.loads(report.read_text())
            for r in doc.get("targets", doc.get("results", [])):
                results[r.get("target") or r.get("name")] = r
                seen_versions.update(r.get("versions") or {})  # every target's (mlx's version is the op targets')
            if seen_versions:
                versions[rel] = ", ".join(f"{k} {v}" for k, v in sorted(seen_versions.items()) if k not in ("numpy", "window glue"))
        cells = [tests]
        for t in targets:
            cells.append(engine_cell(results.get(t), listed[rel].get(t, "not listed"), f"fuzz-{rel}.log")
                         if (report.exists() or listed[rel]) else "not run")
        rows[rel] = cells
    return targets, rows, versions


def findings_of(engine: str) -> list:
    """Every row of the engine's findings tables (the modules ``FINDINGS`` in its env file names)."""
    import importlib

    out = []
    for mod in env(engine).get("FINDINGS", "").split():
        out += list(importlib.import_module(mod).FINDINGS)
    return out


def seen_notes(engine: str, reports: Path, releases: list[str]) -> list[str]:
    """Where this run's reports disagree with the findings tables' ``seen`` releases (update ``seen``, rerun)."""
    rows = findings_of(engine)
    notes = []
    for rel in releases:
        report = reports / f"report-{rel}.json"
        if not report.exists():
            continue
        for r in json.loads(report.read_text()).get("targets", []):
            name = r.get("name", "?")
            for fid, c in r.get("known_findings", {}).items():
                mine = [f for f in rows if f.id == fid and name in f.kinds]
                if c.get("reproduced") and mine and not any(rel in f.seen for f in mine):
                    notes.append(f"{rel} `{name}`: {fid} reproduced ({c['reproduced']} cases); its row's `seen` "
                                 f"does not name {rel}")
                if not c.get("reproduced") and any(rel in f.seen for f in mine):
                    notes.append(f"{rel} `{name}`: {fid} not reproduced ({c.get('not_reproduced', 0)} cases hit "
                                 f"it); its row's `seen` names {rel}")
    return notes


def note_block(engine: str, finding_id: str) -> str:
    """A note's release table: per row, the cases, the targets, the minor series it applies to, where seen."""
    rows = [f for f in findings_of(engine) if f.id == finding_id]
    if not rows:
        raise SystemExit(f"engine_compat: no finding {finding_id!r} in the {engine} findings tables")
    lines = [NOTE_BEGIN, "", f"| cases | targets | applies to (minor series) | reproduced on "
                             f"(`scripts/engine_matrix.sh {engine}`) |", "|---|---|---|---|"]
    for f in rows:
        spans = ", ".join(span_text(x) for x in f.releases)
        lines.append(f"| {f.cases or 'every case'} | {', '.join(f'`{k}`' for k in sorted(f.kinds))} | {spans} "
                     f"| {', '.join(f.seen)} |")
    return "\n".join(lines + ["", NOTE_END])


def write_note_blocks(engine: str, check: bool) -> list[str]:
    """Each of the engine's notes gets its release table (under ``## Releases``); returns the notes that differed
    (rewritten unless ``check``)."""
    stale = []
    for fid in dict.fromkeys(f.id for f in findings_of(engine)):
        path = ROOT / "docs" / "findings" / f"{fid}.md"
        text = path.read_text()
        block = note_block(engine, fid)
        a, b = text.find(NOTE_BEGIN), text.find(NOTE_END)
        if a >= 0 and b > a:
            new = text[:a] + block + text[b + len(NOTE_END):]
        elif "## Releases\n" in text:
            i = text.index("## Releases\n") + len("## Releases\n")
            new = text[:i] + "\n" + block + "\n" + text[i:]
        else:
            raise SystemExit(f"engine_compat: {path.relative_to(ROOT)} has no '## Releases' section")
        if new != text:
            stale.append(str(path.relative_to(ROOT)))
            if not check:
                path.write_text(new)
    return stale


def render(engine: str, targets: list[str], rows: dict[str, list[str]], versions: dict[str, str], seconds: str,
           notes: list[str] = ()) -> str:
    e = env(engine)
    head = ["`" + e["DIST"] + "`", "tests"] + [f"`{t}`" for t in targets]
    out = [f"### {e.get('LABEL', engine)}", "",
           f"Written by `scripts/engine_compat.py` from `scripts/engine_matrix.sh {engine} --fuzz {seconds}` "
           f"(one `kvwindow fuzz --seed 0 --report` campaign per release, {seconds} s per target). Do not edit by hand.",
           "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for rel in sorted(rows, key=version_key):
        cells = rows[rel] + [""] * (len(head) - 1 - len(rows[rel]))
        label = rel + (f" ({versions[rel]})" if rel in versions and versions[rel] else "")
        out.append("| " + " | ".join([label] + cells[: len(head) - 1]) + " |")
    if notes:
        out += ["", "Notes (this run against the findings tables' `seen`):", ""] + [f"* {n}" for n in notes]
    return "\n".join(out)


def write_docs(engine: str, table: str) -> None:
    text = COMPAT.read_text() if COMPAT.exists() else "# Compatibility\n"
    b, e = markers(engine)
    block = f"{b}\n{table}\n{e}"
    if b in text:
        text = re.sub(re.escape(b) + r".*?" + re.escape(e), lambda _: block, text, flags=re.S)
    else:
        if "## Engines" not in text:
            text = text.rstrip() + "\n\n## Engines\n\nOne table per engine (DESIGN §6), written by `scripts/engine_matrix.sh ENGINE --fuzz SECONDS --write-docs`.\n"
        text = text.rstrip() + "\n\n" + block + "\n"
    COMPAT.write_text(text)


def existing_rows(engine: str) -> tuple[list[str], dict[str, list[str]]]:
    text = COMPAT.read_text() if COMPAT.exists() else ""
    b, e = markers(engine)
    m = re.search(re.escape(b) + r"(.*?)" + re.escape(e), text, flags=re.S)
    return parse_rows(m.group(1)) if m else ([], {})


def readme_block() -> str:
    """Per engine in docs/compat.md: its oldest and newest release and the releases it does not support."""
    text = COMPAT.read_text() if COMPAT.exists() else ""
    lines = []
    for engine in engines_in_docs(text):
        head, rows = existing_rows(engine)
        if not rows:
            continue
        rels = sorted((r.split(" ")[0] for r in rows), key=version_key)
        bad = [r.split(" ")[0] for r, cells in rows.items()
               if not re.search(r"\d+ passed", cells[0]) or re.search(r"failed|error|died", cells[0])
               or any(c.startswith(("harness fault", "no result")) for c in cells[1:])]
        e = env(engine)
        note = f"; not supported: {', '.join(sorted(bad, key=version_key))}" if bad else ""
        for i, t in enumerate(head[2:], 1):
            na = sorted((r.split(" ")[0] for r, cells in rows.items() if len(cells) > i and cells[i].startswith("n/a")),
                        key=version_key)
            if na:
                what = next(cells[i] for r, cells in rows.items() if r.split(" ")[0] == na[0])[len("n/a"):].strip()
                span = na[0] if len(na) == 1 else f"{na[0]} – {na[-1]}" if rels.index(na[-1]) - rels.index(na[0]) \
                    == len(na) - 1 else ", ".join(na)
                note += f"; {t} n/a on {span} {what}"
        lines.append(f"* {e.get('LABEL', engine)} (`{e['DIST']}`): {rels[0]} – {rels[-1]}{note} "
                     f"([docs/compat.md](docs/compat.md), `scripts/engine_matrix.sh {engine}`)")
    return "\n".join([BEGIN] + lines + [END])


def write_readme() -> None:
    text = README.read_text()
    block = readme_block()
    if BEGIN in text:
        text = re.sub(re.escape(BEGIN) + r".*?" + re.escape(END), lambda _: block, text, flags=re.S)
    else:
        raise SystemExit(f"engine_compat: README.md has no {BEGIN} block (the Engines section holds it)")
    README.write_text(text)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("engine", nargs="?")
    ap.add_argument("--reports", type=Path)
    ap.add_argument("--releases", default="")
    ap.add_argument("--seconds", default="?")
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args()
    if a.check:
        text = README.read_text()
        m = re.search(re.escape(BEGIN) + r".*?" + re.escape(END), text, flags=re.S)
        rc = 0
        if not m or m.group(0) != readme_block():
            print("engine_compat: README.md's engine ranges disagree with docs/compat.md; run scripts/engine_compat.py --write")
            rc = 1
        for engine in engines_with_findings():
            for path in write_note_blocks(engine, check=True):
                print(f"engine_compat: {path}'s release table disagrees with its findings table; run "
                      f"scripts/engine_compat.py --write")
                rc = 1
        return rc
    if a.engine and a.reports:
        releases = a.releases.split() or sorted({p.stem.split("-", 1)[1] for p in a.reports.glob("tests-*.txt")},
                                                key=version_key)
        targets, rows, versions = collect(a.engine, a.reports, releases)
        notes = seen_notes(a.engine, a.reports, releases)
        old_head, old = existing_rows(a.engine)
        old_targets = [h.strip("`") for h in old_head[2:]] if old_head else []
        if old and old_targets == targets:
            for rel, cells in old.items():
                if rel.split(" ")[0] not in rows:
                    rows[rel.split(" ")[0]] = cells
                    versions.setdefault(rel.split(" ")[0], rel.partition(" (")[2].rstrip(")"))
        (a.reports / f"compat-{a.engine}.md").write_text(render(a.engine, targets, rows, versions, a.seconds, notes)
                                                         + "\n")
        print(render(a.engine, targets, rows, versions, a.seconds, notes))
        if a.write:
            write_docs(a.engine, render(a.engine, targets, rows, versions, a.seconds))
    if a.write:
        write_readme()
        for engine in engines_with_findings():
            for path in write_note_blocks(engine, check=False):
                print(f"engine_compat: wrote the release table of {path}")
    return 0


def engines_with_findings() -> list[str]:
    """The engines whose env file names findings tables (``FINDINGS``)."""
    return [p.stem for p in sorted((ROOT / "scripts" / "engines").glob("*.env")) if env(p.stem).get("FINDINGS")]


if __name__ == "__main__":
    sys.exit(main())
