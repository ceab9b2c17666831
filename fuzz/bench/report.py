"""``report.md``: the bench report as Markdown, section by section, every ratio with its spread."""

from __future__ import annotations

from typing import Any


def fmt(x: Any, unit: str = "") -> str:
    if x is None:
        return "—"
    if isinstance(x, float):
        a = abs(x)
        s = f"{x:.3g}" if a < 1000 else f"{x:,.0f}"
    else:
        s = f"{x:,}" if isinstance(x, int) else str(x)
    return f"{s}{unit}"


def fmt_ratio(r: dict | None) -> str:
    if not r or r.get("median") is None:
        return "—"
    lb = "≥ " if r.get("lower_bound") else ""
    return f"{lb}{r['median']:.3g}× ({r['min']:.3g}–{r['max']:.3g}, n={r['n']})"


def _na(sec: dict) -> str | None:
    return None if sec.get("status") == "ok" else sec.get("status", "not available")


def render_markdown(rep: dict) -> str:
    m = rep["machine"]
    v = m["versions"]
    L = [f"# kvwindow bench — {rep['budget']['name']} run", "",
         f"Command: `{rep['command']}` — wall time {rep['wall_s']:.1f} s, {m['date_utc']}, commit {m['git_commit']}.",
         "",
         f"Machine: {m['cpu']}, {m['usable_cores']} usable cores ({m['logical_cores']} logical), "
         f"load average at start {', '.join(f'{x:.1f}' for x in (m['load_average_at_start'] or []))}; "
         f"{m['platform']}; GPU: {m['gpu'] or 'none'}.",
         "", "Versions: " + ", ".join(f"{k} {val}" for k, val in v.items() if val) + ".", "",
         "Every ratio is computed per repeat from two measurements taken side by side, then summarised "
         "as median (min–max, n = repeats).", ""]

    s = rep["sections"]["throughput"]
    L += ["## 1. Throughput: spec-checked tokens/s and examples/s", ""]
    if _na(s):
        L += [f"{_na(s)}", ""]
    else:
        L += [f"Stateful: the ordinary campaign (`{s['stateful']['function']}`: boundary tours, then cases "
              "starting at window W, resets at or below it), contents checked against pyspec after every op. "
              "Bulk: one C trace call per stream, checked against "
              "`pyspec.bulk`. " + (f"Bulk: {s['bulk']['status']}." if s['bulk']['status'] != 'ok' else ""), "",
              "| target | mode | W | tokens/s (median) | min–max | examples/s (median) | tokens measured |",
              "|---|---|---:|---:|---:|---:|---:|"]
        for r in s["rows"]:
            st_ = r["tokens_per_s"]
            L.append(f"| {r['target']} | {r['mode']} | {r['window']} | {fmt(st_['median'])} | "
                     f"{fmt(st_['min'])}–{fmt(st_['max'])} | {fmt(r['examples_per_s']['median'])} | "
                     f"{fmt(r['tokens'])} |")
        L += ["", "| comparison | ratio |", "|---|---:|"]
        L += [f"| {r['label']} | {fmt_ratio(r)} |" for r in s["ratios"]]
        if s.get("skipped"):
            L += ["", "Not measured: " + "; ".join(f"{k} ({v})" for k, v in s["skipped"].items()) + "."]
        L += ["", "![throughput](throughput.png)", ""]

    s = rep["sections"]["peer"]
    L += ["## 2. Peer: the ring-c campaign beside a hand-written state machine", ""]
    if _na(s):
        L += [f"{_na(s)}", ""]
    else:
        L += [f"Campaign: `{s['campaign']}` (the ordinary campaign loop: boundary tours, then boundary-biased "
              "cases starting at W, contents checked against pyspec after every op). Peer: `" + s["peer"]
              + "`, a plain Hypothesis `RuleBasedStateMachine` over the same C ring written as a user would "
              "(rules push / chunk / reset, an invariant comparing `contents()` with the last W entries after "
              f"every rule). Both count tokens pushed (a chunk of k is k); {s['seconds_per_cell']:g} s per side, "
              "window and repeat, interleaved. Goal: ratio >= 1 at every W.", "",
              "| W | campaign tokens/s (median) | min–max | peer tokens/s (median) | min–max | campaign / peer | "
              "phases reached |", "|---:|---:|---:|---:|---:|---:|---|"]
        by_w = {r["window"]: r for r in s["ratios"]}
        for r in s["rows"]:
            c, p = r["campaign_tokens_per_s"], r["peer_tokens_per_s"]
            reached = sum(1 for v in r["campaign_phases"].values() if v)
            L.append(f"| {r['window']} | {fmt(c['median'])} | {fmt(c['min'])}–{fmt(c['max'])} | "
                     f"{fmt(p['median'])} | {fmt(p['min'])}–{fmt(p['max'])} | {fmt_ratio(by_w.get(r['window']))} | "
                     f"{reached}/{len(r['campaign_phases'])} |")
        L.append("")

    s = rep["sections"].get("isolation", {"status": "not measured (a report of an older version)"})
    L += ["## 2b. Isolation: ring-c in process vs in an isolated child", ""]
    if _na(s):
        L += [f"{_na(s)}", ""]
    else:
        L += [f"The same campaign (`{s['campaign']}`) on `ring-c` in this process and through `{s['isolated']}` "
              "(the default for native targets: every case runs in a forked child that a segfault cannot take the "
              f"campaign down with; one round trip per case), {s['seconds_per_cell']:g} s per side, window and "
              "repeat, interleaved. Goal: in-process / child <= 1.5.", "",
              "| W | in-process tokens/s (median) | min–max | child tokens/s (median) | min–max | in-process / child |",
              "|---:|---:|---:|---:|---:|---:|"]
        by_w = {r["window"]: r for r in s["ratios"]}
        for r in s["rows"]:
            a, c = r["in_process_tokens_per_s"], r["child_tokens_per_s"]
            L.append(f"| {r['window']} | {fmt(a['median'])} | {fmt(a['min'])}–{fmt(a['max'])} | "
                     f"{fmt(c['median'])} | {fmt(c['min'])}–{fmt(c['max'])} | {fmt_ratio(by_w.get(r['window']))} |")
        L.append("")

    s = rep["sections"]["mutants"]
    L += ["## 3. Mutants: cost to kill, boundary-biased vs uniform baseline", ""]
    if _na(s):
        L += [f"{_na(s)}", ""]
    else:
        ov = s.get("overall", {})
        L += [f"`{s['function']}(baseline=True)`: per mutant, a boundary-biased campaign and then the "
              f"uniform-random baseline, each with {s['budget_per_mutant_s']:g} s (at most {s['max_examples']} "
              f"examples), no example database; repeated with a new campaign seed. Killed by the biased "
              f"strategies in every repeat: {s['killed_by_biased']}/{s['mutants']}; by the baseline: "
              f"{s['killed_by_uniform']}/{s['mutants']}.", "",
              "Cost = examples (test cases), tokens pushed, and seconds until the first failing example "
              "(before shrinking). Ratio = uniform / biased: above 1 the boundary bias kills with less, "
              "below 1 the baseline does; '≥' marks a lower bound where the baseline survived and is "
              "counted at what it spent.", ""]
        if ov:
            L += ["Geometric mean over mutants of the median ratio: " + "; ".join(
                f"{m} {v['geometric_mean_of_medians']:.3g}× ({v['mutants']} mutants)" for m, v in ov.items()) + ".", ""]
        L += ["| mutant | class | killed b / u | examples b / u | tokens b / u | seconds b / u | "
              "examples ratio | tokens ratio | seconds ratio |",
              "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
        for r in s["rows"]:
            bi, un = r["biased"], r["uniform"]
            pair = lambda m: f"{fmt(bi[m]['median'])} / {fmt(un[m]['median'])}"  # noqa: E731
            L.append(f"| {r['mutant']} | {r['bug_class'] or ''} | {bi['killed']} / {un['killed']} | "
                     f"{pair('examples')} | {pair('tokens')} | {pair('seconds')} | "
                     f"{fmt_ratio(r.get('ratio_examples'))} | {fmt_ratio(r.get('ratio_tokens'))} | "
                     f"{fmt_ratio(r.get('ratio_seconds'))} |")
        if s.get("unavailable"):
            L += ["", "Not built here: " + "; ".join(f"{k} ({v})" for k, v in s["unavailable"].items()) + "."]
        L += ["", "![mutants](mutants.png)", ""]

    s = rep["sections"]["decode"]
    L += ["## 4. Decode: per-token time vs t, KV bytes vs formula", ""]
    if _na(s):
        L += [f"{_na(s)}", ""]
    else:
        c = s.get("config") or {}
        L += [f"Window W = {s['window']}; t = W/2, W, 4W, 16W; `{s['function']}` with {s['tokens']} timed "
              f"single-token decodes per t and repeat (ring), one full forward over t + 1 tokens (full "
              f"recompute). Model: {c.get('layers')} layers, d_model {c.get('d_model')}, "
              f"{c.get('n_heads')} query / {c.get('n_kv_heads')} KV heads, head_dim {c.get('head_dim')}, "
              f"{c.get('dtype')}, CPU. Formula: 2·layers·kv_heads·head_dim·min(t, W)·bytes."
              + ("" if s.get("c_backend", "ok") == "ok" else f" C-ring storage: {s['c_backend']}."), "",
              "| t | ring ms/token (torch) | ring ms/token (C ring) | full recompute ms/token | KV bytes held | formula bytes |",
              "|---:|---:|---:|---:|---:|---:|"]
        for r in s["rows"]:
            ms = lambda x: None if x is None else x * 1e3  # noqa: E731
            L.append(f"| {r['t']} | {fmt(ms(r['ring_s']['median']))} | {fmt(ms(r['ring_c_s']['median']))} | "
                     f"{fmt(ms(r['full_s']['median']))} | "
                     f"{fmt(r['kv_bytes']['median'])} | {fmt(r['formula_bytes']['median'])} |")
        L += ["", "| comparison | ratio |", "|---|---:|"]
        L += [f"| {r['label']} | {fmt_ratio(r)} |" for r in s["ratios"]]
        L += ["", "![decode](decode.png)", ""]

    s = rep["sections"]["gpu"]
    L += ["## 5. GPU", ""]
    if _na(s):
        L += [f"{_na(s)}", ""]
    else:
        L += [f"Device: {s['device']}; helper `{s['function']}`.", "", "| metric | median | min–max |",
              "|---|---:|---:|"]
        for k, st_ in s["summary"].items():
            L.append(f"| {k} | {fmt(st_['median'])} | {fmt(st_['min'])}–{fmt(st_['max'])} |")
        L.append("")
    s = rep["sections"].get("long", {"status": "not run"})
    L += ["## 6. Long streams: the bulk phase's share of a default campaign, the long tour's cost", ""]
    if _na(s):
        L += [f"{_na(s)}", ""]
    else:
        L += [f"`{s['function']}`: a default campaign ({s['seconds_per_campaign']:g} s, window_max 65 537, boundary "
              "tours, error tour, long tour, bulk phase, scale tours, leak probe) per target and repeat. Bulk phase: every C target "
              "pushes at least 100 k tokens through `ringkv_trace`, every step checked (one stream past "
              "2^16); its time share is bulk seconds over campaign seconds, its token share bulk tokens over "
              "all spec-checked tokens; `ring-c (isolated)` is the campaign as `kvwindow fuzz` runs it, its "
              "bulk phase a request to the child. Long tour: one stream past 2^15, 2^16 and 70 000 (every "
              "campaign runs it once, unless the target is too slow to end it within the budget), timed alone.", "",
              "| target | bulk share of time | bulk share of tokens | bulk tokens | bulk seconds | "
              "bulk tokens/s | long tour tokens | long tour seconds |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
        for r in s["rows"]:
            pct = lambda x: None if x is None else 100 * x  # noqa: E731
            L.append(f"| {r['target']} | {fmt(pct(r['bulk_time_share']['median']), ' %')} | "
                     f"{fmt(pct(r['bulk_token_share']['median']), ' %')} | {fmt(r['bulk_tokens']['median'])} | "
                     f"{fmt(r['bulk_seconds']['median'])} | {fmt(r['bulk_tokens_per_s']['median'])} | "
                     f"{fmt(r['long_tour_tokens'])} | {fmt(r['long_tour_s']['median'])} |")
        L += ["", "The sizes of issue 28 in the same campaigns: the share of its time the scale tours (windows "
              "33 ... 65 537 while they fit 15 % of the budget), the leak probe (a child process) and the threads "
              "phase took, and the largest window a scale tour reached (medians).", "",
              "| target | scale tours | leak probe | threads | largest scale-tour window |", "|---|---:|---:|---:|---:|"]
        for r in s["rows"]:
            share = lambda k: fmt(None if not r.get(k) or r[k]["median"] is None else 100 * r[k]["median"], " %")  # noqa: E731
            win = r.get("scale_window") or {}
            L.append(f"| {r['target']} | {share('scale_time_share')} | {share('leaks_time_share')} | "
                     f"{share('threads_time_share')} | {fmt(win.get('median'))} |")
        L.append("")
    s = rep["sections"].get("engines", {"status": "not run"})
    L += ["## 7. Engines: examples/s of every installed engine target", ""]
    if _na(s):
        L += [f"{_na(s)}", ""]
    else:
        from fuzz.bench.engines import render_markdown as engines_markdown

        L += engines_markdown(s)
    s = rep["sections"].get("bugs")
    if s is not None and s.get("status") != "skipped: not selected (--only)":
        from fuzz.bench.bugs import render

        L += ["## 8. Time to bug: kvwindow, the uniform tester and a plain state machine", ""]
        if _na(s):
            L += [f"{_na(s)}", ""]
        else:
            L += ["Seconds and examples from an empty example database to the first reproduction of each bug: every "
                  "mutant of the catalogue, and each written-up transformers finding on a release it applies to. "
                  f"Median (min–max) over {s['repeats']} campaign seeds; a run that did not reproduce its bug is "
                  "counted at the budget. `machine` is a plain `RuleBasedStateMachine` (rules push / chunk / reset, "
                  "the case run through the same target at teardown).", ""]
            L += render(s) + ["", "![bugs](bugs.png)", ""]
    s = rep["sections"].get("paged")
    if s is not None and s.get("status") != "skipped: not selected (--only)":
        from fuzz.bench.paged import render as render_paged

        L += ["## 8. Paged: spec-checked ops/s of paged-c", ""]
        if _na(s):
            L += [f"{_na(s)}", ""]
        else:
            L += [f"A paged-c campaign of {s['seconds_per_campaign']} s per repeat in this process, every op audited "
                  "(reads of every live sequence, tables, sharing, counts); ops are the op language's "
                  "(`s0 chunk:5` is one).", ""] + render_paged(s)
    if rep.get("errors"):
        L += ["## Errors", ""] + [f"- {e}" for e in rep["errors"]] + [""]
    return "\n".join(L)
