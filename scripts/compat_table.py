#!/usr/bin/env python3
"""The transformers compatibility table: ``docs/compat.md`` from ``scripts/hf_matrix.sh --fuzz`` reports,
the README's supported-range claim from ``docs/compat.md``, and each finding note's release table from
``fuzz/targets/hf/findings.py``. The rows of releases a run did not run are kept from ``docs/compat.md``.

    scripts/compat_table.py --reports DIR            # DIR/compat.md from DIR/report-<release>.json
    scripts/compat_table.py --reports DIR --write    # ... and docs/compat.md, README.md, docs/findings/*.md
    scripts/compat_table.py --write                  # README.md and the notes from docs/compat.md as it is
    scripts/compat_table.py --check                  # exit 1 where README.md or a note disagrees

Each cell is one outcome of ``kvwindow fuzz --target T --seed 0`` on that release (hf_matrix.sh runs
every HF target of the release in one campaign, ``--fuzz SECONDS`` each):

* ``clean`` — nothing failed (cases that hit a written-up finding which did not reproduce are noted);
* ``known: ID, ...`` — written-up findings (``docs/findings/ID.md``) reproduced, nothing else failed;
* ``finding: ...`` — a new disagreement (a seed in the matrix's seeds directory): write it up;
* ``harness fault: ...`` — the adapter cannot drive the release (its probe, or a fault during the run);
* ``n/a`` — the release has no such model family;
* ``no result: ...`` — the campaign did not report on the target (it died; see the log).

The README claim (between ``<!-- compat:begin -->`` and ``<!-- compat:end -->``) names the oldest and
newest release of the table and every release with a harness fault or no result;
``tests/test_compat_table.py`` checks that README.md, docs/compat.md and pyproject's pin agree.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fuzz.targets.hf import findings  # noqa: E402

COMPAT = ROOT / "docs" / "compat.md"
README = ROOT / "README.md"
BEGIN, END = "<!-- compat:begin -->", "<!-- compat:end -->"
#: The HF targets in column order: the built-ins, then every family.
BUILTIN_HF = ("hf-dynamic", "hf-static", "hf-mistral", "hf-gemma2")
#: What an unavailable family's reason says when the release simply lacks it (``impl.hf.families.available``).
LACKS = re.compile(r"has no \w+ causal LM")
#: What an HFIncompatible says (``impl.hf.compat.HFIncompatible``): the adapter cannot drive the release.
INCOMPATIBLE = "needs to learn this release's API"


def version_key(release: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", release)[:3])


def columns() -> list[str]:
    return list(BUILTIN_HF) + sorted(findings.FAMILY_KINDS, key=lambda k: _family_order().index(k[3:]))


def _family_order() -> list[str]:
    from impl.hf.families import FAMILIES

    return list(FAMILIES)


# -- reading the matrix's output ------------------------------------------------------------------


def read_targets(path: Path) -> dict[str, str]:
    """``kvwindow fuzz --list-targets`` output -> name -> ``"available"`` or the reason it is not."""
    out = {}
    for line in path.read_text().splitlines():
        parts = line.split(None, 2)
        if len(parts) == 3 and parts[1] in ("cpu", "gpu"):
            status = parts[2]
            out[parts[0]] = "available" if status == "available" else status.removeprefix("unavailable: ")
    return out


def cell(result: dict | None, listed: str | None, log_hint: str) -> str:
    """One target's outcome on one release, as the table writes it."""
    if listed is not None and listed != "available":
        if LACKS.search(listed):
            return "n/a"
        if INCOMPATIBLE in listed:
            return f"harness fault: {_short(listed)}"
        return f"unavailable: {_short(listed)}"
    if result is None:
        return f"no result: {log_hint}"
    failures = result.get("failures", [])
    harness = [f for f in failures if f.get("kind") == "harness" or f["error"].startswith("HarnessFault")]
    faults = list(result.get("harness_faults", [])) + [f["error"] for f in harness]
    if faults:
        return f"harness fault: {_short(faults[0])}"
    new = [f for f in failures if f not in harness]
    if new:
        f = new[0]
        case = f"W={f['case']['window']} `{' '.join(_op_text(o) for o in f['case']['ops'])}`"
        return f"finding: {case}: {_short(f['error'])}"
    known = result.get("known_findings", {})
    repro = [fid for fid, c in known.items() if c.get("reproduced")]
    if repro:
        return "known: " + ", ".join(f"[{fid}](findings/{fid}.md)" for fid in repro)
    return "clean"


def _op_text(op: list) -> str:
    return op[0] if len(op) == 1 else f"{op[0]}:{op[1]}"


def _short(text: str, n: int = 140) -> str:
    one = " ".join(str(text).split()).replace("|", "/")
    return one if len(one) <= n else one[: n - 1] + "…"


def collect(reports: Path) -> tuple[dict[str, dict[str, str]], dict[str, str], list[str]]:
    """``(release -> target -> cell, release -> torch version, notes)`` from an hf_matrix.sh ``--out``."""
    rows: dict[str, dict[str, str]] = {}
    torch: dict[str, str] = {}
    notes: list[str] = []
    releases = sorted({p.stem.split("-", 1)[1] for p in reports.glob("targets-*.txt")}, key=version_key)
    for rel in releases:
        listed = read_targets(reports / f"targets-{rel}.txt")
        rep_path = reports / f"report-{rel}.json"
        results: dict[str, dict] = {}
        if rep_path.exists():
            doc = json.loads(rep_path.read_text())
            results = {t["name"]: t for t in doc.get("targets", [])}
            for t in doc.get("targets", []):
                torch[rel] = t.get("versions", {}).get("torch", torch.get(rel, "?"))
                for fid, c in t.get("known_findings", {}).items():
                    if c.get("not_reproduced") and not c.get("reproduced"):
                        notes.append(f"{rel} {t['name']}: {fid} not reproduced ({c['not_reproduced']} cases hit it)")
        rows[rel] = {c: cell(results.get(c), listed.get(c), f"fuzz-{rel}.log") for c in columns()}
        _check_seen(rel, results, notes)
    return rows, torch, notes


def _check_seen(rel: str, results: dict[str, dict], notes: list[str]) -> None:
    """Say where the matrix disagrees with the table's ``seen`` releases (update findings.py, then --write)."""
    for name, r in results.items():
        kind = name[3:] if name.startswith("hf-") else name
        for fid, c in r.get("known_findings", {}).items():
            rows = [f for f in findings.FINDINGS if f.id == fid and kind in f.kinds]
            if c.get("reproduced") and rows and not any(rel in f.seen for f in rows):
                notes.append(f"{rel} {name}: {fid} reproduced, but fuzz/targets/hf/findings.py does not list "
                             f"{rel} as seen")


# -- writing ---------------------------------------------------------------------------------------


def render_compat(rows: dict[str, dict[str, str]], torch: dict[str, str], notes: list[str], seconds: str) -> str:
    cols = columns()
    torches = ", ".join(sorted(set(torch.values()))) or "?"
    out = [
        "# transformers compatibility",
        "",
        "Written by `scripts/compat_table.py` from `scripts/hf_matrix.sh --fuzz " + seconds + "`: every HF target "
        "on every release, one `kvwindow fuzz --seed 0 --report` campaign per release, "
        f"{seconds} s per target, torch {torches}. Do not edit by hand; rerun the matrix.",
        "",
        "`clean`: nothing failed. `known: …`: written-up findings (`docs/findings/`) reproduced, nothing else "
        "failed (a default campaign exits 1 naming them). `finding: …`: a new disagreement. `harness fault: …`: "
        "the adapter cannot drive the release. `n/a`: the release has no such model family.",
        "",
        "| transformers | " + " | ".join(f"`{c}`" for c in cols) + " |",
        "|---|" + "---|" * len(cols),
    ]
    for rel in sorted(rows, key=version_key):
        out.append(f"| {rel} | " + " | ".join(rows[rel].get(c, "") for c in cols) + " |")
    if notes:
        out += ["", "Notes:", ""] + [f"* {n}" for n in notes]
    return "\n".join(out) + "\n"


#: Where docs/compat.md's engine tables start (scripts/engine_compat.py writes that part; this script keeps it).
ENGINES = "\n## Engines"


def hf_part(text: str) -> str:
    """docs/compat.md up to its engine tables (the transformers table and its notes)."""
    return text.split(ENGINES, 1)[0]


def engines_part(text: str) -> str:
    """docs/compat.md's engine tables, from their heading on ("" when it has none)."""
    return ENGINES + text.split(ENGINES, 1)[1] if ENGINES in text else ""


def parse_compat(text: str) -> dict[str, dict[str, str]]:
    """docs/compat.md's transformers table -> release -> target -> cell (the engine tables are not read)."""
    lines = [ln for ln in hf_part(text).splitlines() if ln.startswith("| ")]
    head = [c.strip().strip("`") for c in lines[0].strip("|").split("|")]
    rows = {}
    for ln in lines[1:]:
        cells = [c.strip() for c in ln.strip("|").split("|")]
        rows[cells[0]] = dict(zip(head[1:], cells[1:]))
    return rows


def supported(rows: dict[str, dict[str, str]]) -> tuple[str, str, list[str]]:
    """``(oldest, newest, releases with a harness fault or no result)`` of the table."""
    releases = sorted(rows, key=version_key)
    bad = [r for r in releases if any(c.startswith(("harness fault", "no result", "unavailable"))
                                      for c in rows[r].values())]
    return releases[0], releases[-1], bad


def readme_block(rows: dict[str, dict[str, str]]) -> str:
    oldest, newest, bad = supported(rows)
    known = sorted({fid for cells in rows.values() for c in cells.values()
                    for fid in re.findall(r"\[([\w-]+)\]\(findings/", c)})
    findings_ = [r for r in rows if any(c.startswith("finding:") for c in rows[r].values())]
    text = (f"**Supported: transformers {oldest} to {newest}** — every HF target (`hf-dynamic`, `hf-static`, "
            f"`hf-mistral`, `hf-gemma2` and each `hf:<model_type>` the release has) runs on each of the "
            f"{len(rows)} releases of [`docs/compat.md`](docs/compat.md)")
    text += (", with no harness fault." if not bad else
             f"; the adapters cannot drive {', '.join(bad)} (harness faults in the table).")
    with_known = [r for r in rows if any(c.startswith("known:") for c in rows[r].values())]
    if known:
        text += (f" Written-up findings reproduce on {len(with_known)} of them ("
                 + ", ".join(f"[{k}](docs/findings/{k}.md)" for k in known)
                 + "): a default campaign there exits 1 naming them (`--accept-known` accepts them).")
    if findings_:
        text += f" New findings, not yet written up: {', '.join(findings_)}."
    return f"{BEGIN}\n{text}\n{END}"


def replace_block(text: str, begin: str, end: str, block: str, where: str) -> str:
    a, b = text.find(begin), text.find(end)
    if a < 0 or b < a:
        raise SystemExit(f"compat_table: {where} has no {begin} ... {end} block")
    return text[:a] + block + text[b + len(end):]


def write_note_blocks(check: bool) -> list[str]:
    """Each note's release table from findings.py; returns the notes that differ (written unless ``check``)."""
    stale = []
    for fid in dict.fromkeys(f.id for f in findings.FINDINGS):
        path = ROOT / findings.DOCS / f"{fid}.md"
        text = path.read_text()
        block = findings.release_block(fid)
        have = findings.note_block(text)
        if have == block:
            continue
        stale.append(str(path.relative_to(ROOT)))
        if check:
            continue
        if have is not None:
            text = text.replace(have, block)
        else:  # after the paragraph that starts with "**Releases affected"
            i = text.find("**Releases affected")
            j = text.find("\n\n", i) if i >= 0 else text.find("\n\n")
            text = text[:j] + "\n\n" + block + text[j:]
        path.write_text(text)
    return stale


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reports", type=Path, help="an hf_matrix.sh --out directory")
    ap.add_argument("--seconds", default="20", help="the matrix's --fuzz SECONDS (named in the table)")
    ap.add_argument("--write", action="store_true", help="write docs/compat.md, README.md and the notes")
    ap.add_argument("--check", action="store_true", help="exit 1 where README.md or a note is stale")
    args = ap.parse_args(argv)
    if args.reports is not None:
        rows, torch, notes = collect(args.reports)
        if COMPAT.exists():  # the releases this run did not run keep their rows (a run of `--releases newest` adds one)
            kept = parse_compat(COMPAT.read_text())
            rows = {**{r: c for r, c in kept.items() if set(c) == set(columns())}, **rows}
        text = render_compat(rows, torch, notes, args.seconds)
        (args.reports / "compat.md").write_text(text)
        print(text)
        if args.write:  # the engine tables (scripts/engine_compat.py) stay as they are
            COMPAT.write_text(text.rstrip("\n") + "\n" + engines_part(COMPAT.read_text() if COMPAT.exists() else ""))
    rows = parse_compat(COMPAT.read_text())
    readme = README.read_text()
    new = replace_block(readme, BEGIN, END, readme_block(rows), "README.md")
    stale = write_note_blocks(check=not args.write)
    if new != readme:
        stale.append("README.md")
        if args.write:
            README.write_text(new)
    if args.check and stale:
        print("compat_table: stale: " + ", ".join(stale) + " (scripts/compat_table.py --write)", file=sys.stderr)
        return 1
    if args.write and stale:
        print("compat_table: wrote " + ", ".join(stale))
    return 0


if __name__ == "__main__":
    sys.exit(main())
