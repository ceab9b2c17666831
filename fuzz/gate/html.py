"""``report.html``: the gate's report as one self-contained page — inline CSS, plots inlined as ``data:``
PNGs, no script and no external URL — so it opens offline, as a CI artefact, in any browser.

The first screen is the verdict banner and the verdict table (one row per step); each step's checks
follow in a collapsible section, open where something failed, failures first.
"""

from __future__ import annotations

import base64
from html import escape
from typing import Any

from fuzz.gate.report import headline, ordered
from fuzz.gate.verdict import FAIL, LABEL, NA, PASS

CSS = """
body{font:14px/1.45 -apple-system,'Segoe UI',Helvetica,Arial,sans-serif;margin:18px 26px;color:#1b1f24;max-width:1200px}
h1{font-size:21px;margin:0 0 4px} h2{font-size:16px;margin:22px 0 6px}
.banner{padding:10px 14px;border-radius:6px;font-weight:600;font-size:17px;margin-bottom:10px}
.b-pass{background:#dcf5e3;border:1px solid #2e9e50} .b-fail{background:#fde2e1;border:1px solid #c62828}
.b-fault{background:#fff1d6;border:1px solid #c77700}
table{border-collapse:collapse;margin:6px 0 10px} td,th{border:1px solid #cfd6dd;padding:4px 8px;text-align:left;
vertical-align:top} th{background:#f1f4f7} td.v{font-weight:700;white-space:nowrap}
.pass{color:#1e7d3c} .fail{color:#c62828} .na{color:#6a737d} .fault{color:#c77700}
code{background:#f1f4f7;padding:1px 4px;border-radius:3px;font-size:12.5px}
details{margin:4px 0 12px} summary{cursor:pointer;color:#0b57d0} .meta{color:#57606a;font-size:12.5px}
img{max-width:100%;border:1px solid #e1e4e8;margin:6px 0}
"""

CLS = {PASS: "pass", FAIL: "fail", NA: "na", "fault": "fault"}


def _v(verdict: str) -> str:
    return f'<td class="v {CLS.get(verdict, "na")}">{escape(LABEL.get(verdict, verdict))}</td>'


def _img(png: bytes, alt: str) -> str:
    return f'<img alt="{escape(alt)}" src="data:image/png;base64,{base64.b64encode(png).decode("ascii")}">'


def render_html(doc: dict[str, Any], pngs: dict[str, bytes]) -> str:
    c = doc["config"]
    v = doc["verdict"]
    banner = {"pass": "b-pass", "fail": "b-fail"}.get(v, "b-fault")
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           f"<title>kvwindow gate: {escape(LABEL[v])}</title><style>{CSS}</style></head><body>",
           f'<div class="banner {banner}">kvwindow gate — {escape(headline(doc))}</div>',
           "<table><tr><th>step</th><th>verdict</th><th>evidence</th></tr>"]
    for s in doc["steps"]:
        out.append(f"<tr><td>{s['number']}. {escape(s['title'])}</td>{_v(s['verdict'])}"
                   f"<td>{escape(s['summary'])}</td></tr>")
    out.append("</table>")
    out.append(f'<p class="meta"><code>{escape(doc["command"])}</code> — exit {doc["exit"]}, '
               f'{doc["runtime_s"]:.1f} s ({escape(c["budget"])} budget) on {escape(str(doc["machine"].get("cpu", "?")))}</p>')
    out.append("<table><tr><th>role</th><th>subject</th><th>what it is</th><th>tolerance (cached vs full)</th></tr>")
    for role, s in doc["subjects"].items():
        tol = s["tolerance"]
        out.append(f"<tr><td>{role}</td><td><code>{escape(s['spec'])}</code></td><td>{escape(s['description'])}</td>"
                   f"<td>{tol[0]:g}{f' + {tol[1]:g}·|ref|' if tol[1] else ''}</td></tr>")
    out.append("</table>")
    out.append(f"<p>Intervention <b>{escape(c['intervention'])}</b>, claim <b>{escape(c['claim'])}</b>; streams sized "
               f"by W = {doc['window']} (vocabulary {doc['vocab']}).</p>")
    for n in doc["notes"] + [f"harness fault: {f}" for f in doc["faults"]]:
        out.append(f"<p class='meta'>{escape(n)}</p>")
    for s in doc["steps"]:
        out.append(f"<h2>{s['number']}. {escape(s['title'])} — <span class='{CLS.get(s['verdict'], 'na')}'>"
                   f"{escape(LABEL[s['verdict']])}</span></h2><p>{escape(s['summary'])}</p>")
        if s["number"] == 6 and s["data"].get("ratios"):
            per = s["data"]["per_subject"]
            base, cand = doc["subjects"]["baseline"]["spec"], doc["subjects"]["candidate"]["spec"]
            out.append("<table><tr><th>clock</th><th>baseline</th><th>candidate</th>"
                       "<th>candidate / baseline (min · median · max)</th></tr>")
            for key, r in s["data"]["ratios"].items():
                def fmt(x: Any) -> str:
                    return "—" if x is None else f"{x * 1e3:.3f} ms" if key.endswith("_s") else f"{x:.0f}"
                rr = "—" if r["median"] is None else f"{r['min']:.2f} · <b>{r['median']:.2f}</b> · {r['max']:.2f}"
                out.append(f"<tr><td>{escape(r['label'])}</td><td>{fmt(per[base][key]['median'])}</td>"
                           f"<td>{fmt(per[cand][key]['median'])}</td><td>{rr}</td></tr>")
            out.append("</table>")
            for spec in (base, cand):
                out.append(f"<p class='meta'>KV formula for <code>{escape(spec)}</code>: "
                           f"{escape(str(per[spec]['kv_formula']))} = {per[spec]['kv_formula_bytes']} B</p>")
            for name, png in pngs.items():
                out.append(_img(png, name))
        checks = ordered(s["checks"])
        nfail = sum(ch["verdict"] == FAIL for ch in checks)
        out.append(f"<details{' open' if nfail else ''}><summary>{len(checks)} checks"
                   f"{f', {nfail} failed' if nfail else ''}</summary>")
        out.append("<table><tr><th>check</th><th>subject</th><th>verdict</th><th>evidence</th></tr>")
        for ch in checks:
            out.append(f"<tr><td>{escape(ch['name'])}</td><td><code>{escape(ch['subject'])}</code></td>{_v(ch['verdict'])}"
                       f"<td>{escape(ch['detail'])}</td></tr>")
        out.append("</table></details>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"
