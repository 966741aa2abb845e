"""The numbers of analysis.py in plain words: one sentence per fact, said once, used by both
results/summary.md and the report (its workflow page and the text beside each figure)."""

import numpy as np
import pandas as pd

from mnistbench.devices import HOST, host_first

# --- numbers as words ---------------------------------------------------------------------------


def us(x) -> str:
    """A duration given in µs, readable: '0.42 µs', '35 µs', '1.2 ms'."""
    if not np.isfinite(x):
        return "n/a"
    if x >= 1000:
        return f"{x / 1000:.3g} ms"
    return f"{x:.2g} µs" if x < 10 else f"{x:.0f} µs"


def pct(x, digits=0) -> str:
    return "n/a" if not np.isfinite(x) else f"{100 * x:.{digits}f} %"


def bs(x) -> str:
    return "n/a" if not np.isfinite(x) else f"{x:,.0f}"


def rate(x) -> str:
    """Samples per second, short: '850', '12.3 k', '3.57 M'."""
    if not np.isfinite(x):
        return "n/a"
    for scale, unit in ((1e9, " G"), (1e6, " M"), (1e3, " k")):
        if x >= scale:
            return f"{x / scale:.3g}{unit}"
    return f"{x:.3g}"


def times(x) -> str:
    """A factor: '18×', '2.8×', '0.31×'."""
    return "n/a" if not np.isfinite(x) else f"{x:.2g}×" if x < 10 else f"{x:.0f}×"


def share(r) -> str:
    """The DataLoader's extra share of a step, in words; a negative difference is noise."""
    if not np.isfinite(r["extra_us"]):
        return "n/a"
    if r["extra_us"] < 0:
        return "nothing measurable (it timed faster than module)"
    return f"{pct(r['extra_share'])} ({us(r['extra_us'])})"


# --- the headline -------------------------------------------------------------------------------


def best(ladder: pd.DataFrame, host, device, point) -> pd.Series | None:
    g = ladder[(ladder["host"] == host) & (ladder["device"] == device) & (ladder["point"] == point)]
    return None if g.empty else g.loc[g["samples_per_s"].idxmax()]


def headline(tables: dict) -> list[str]:
    """Per host and device: the beginner's code at the smallest batch, the best rung there and at
    the largest batch, with the factors; where an accelerator ran, where it overtakes the cpu."""
    lad, cross = tables["ladder"], tables["crossover"]
    out = []
    for host in sorted(set(lad["host"])):
        for device in host_first(lad[lad["host"] == host]["device"]):
            small, large = best(lad, host, device, "smallest"), best(lad, host, device, "largest")
            g = lad[(lad["host"] == host) & (lad["device"] == device) & (lad["point"] == "smallest")]
            seed = g[g["mode"] == "seed"]
            words = [f"On {host}, {device}:"]
            if len(seed):
                words.append(
                    f"the beginner's code trains {rate(seed['samples_per_s'].iloc[0])} samples/s at batch "
                    f"{small['batch_size']}; the best rung there, {small['mode']}, {rate(small['samples_per_s'])} "
                    f"({times(small['over_seed'])})."
                )
            else:
                words.append(
                    f"the best rung at batch {small['batch_size']} is {small['mode']}, "
                    f"{rate(small['samples_per_s'])} samples/s (the beginner's code did not run)."
                )
            if large is not None:
                factor = f" ({times(large['over_seed'])} the beginner's code at that batch)" if len(seed) else ""
                words.append(
                    f"At batch {large['batch_size']} the best is {large['mode']}, "
                    f"{rate(large['samples_per_s'])} samples/s{factor}."
                )
            out.append(" ".join(words))
            if device == HOST and len(seed):
                out += limit(tables, host, seed.iloc[0], small)
        for device in [d for d in host_first(lad[lad["host"] == host]["device"]) if d != HOST]:
            out += accelerator_vs_host(lad, cross, host, device)
    return out


def limit(tables: dict, host, seed, top) -> list[str]:
    """How far the beginner's code is from this cpu's arithmetic limit for one sample on one
    core (measured by each train job's host), and where its time goes instead."""
    env = tables["environment"]
    if "arithmetic_limit_us" not in env.columns:
        return []
    e = pd.to_numeric(env[(env["host"] == host) & (env["device"] == HOST)]["arithmetic_limit_us"], errors="coerce")
    if e.dropna().empty:
        return []
    lim, b = float(e.dropna().iloc[0]), seed["batch_size"]
    t_seed, t_top = 1e6 / seed["samples_per_s"], 1e6 / top["samples_per_s"]
    prof = tables["profile"]
    ops = ""
    if len(prof) and "ops_step" in prof.columns:
        p = prof[(prof["host"] == host) & (prof["device"] == HOST) & (prof["mode"] == "seed")]
        p = p[(p["status"] == "ok") & (p["batch_size"] == b)]
        if len(p):
            ops = f", {p['ops_step'].iloc[0] + p['ops_batch'].iloc[0]:.0f} torch ops per step"
    return [
        f"At batch {b} the beginner's code takes {us(t_seed)} per sample on {host}'s cpu, {times(t_seed / lim)} "
        f"the arithmetic limit of one of its cores ({us(lim)} per sample, measured): {pct(1 - lim / t_seed, 1)} of "
        f"its time is the fixed cost of a step (Python, dispatch, allocation{ops}), not arithmetic; "
        f"{top['mode']} takes {us(t_top)}, {times(t_top / lim)} the limit."
    ]


def accelerator_vs_host(lad, cross, host, device) -> list[str]:
    words = []
    for point in ("smallest", "largest"):
        a, c = best(lad, host, device, point), best(lad, host, HOST, point)
        if a is not None and c is not None and a["batch_size"] == c["batch_size"]:
            words.append(
                f"At batch {a['batch_size']}, {device}'s best rung ({a['mode']}) is "
                f"{times(a['samples_per_s'] / c['samples_per_s'])} the cpu's best ({c['mode']})."
            )
    hc = cross[(cross["host"] == host) & (cross["device"] == device)]
    flips = hc[hc["verdict"] == "slower below, faster above"]
    if len(flips):
        c = flips.sort_values("crossover_batch_size").iloc[0]
        words.append(
            f"{device} overtakes the cpu from batch size {bs(c['crossover_batch_size'])} in mode {c['mode']} "
            f"(the earliest of {len(flips)} mode(s)): its fixed cost per step is {us(c['a_us'])} against "
            f"{us(c['cpu_a_us'])} on the cpu."
        )
    return [f"On {host}: " + " ".join(words)] if words else []


# --- the facts ----------------------------------------------------------------------------------


def findings(tables: dict, cfg: dict | None = None) -> dict:
    """Plain-words findings from the numbers: {host: [sentence, ...]} plus, under the key None,
    notes on what could not be said (degenerate inputs, fits to read with care, merged code)."""
    fit, cross, spd, dl, bw, prof, runs = (
        tables[k] for k in ("fits", "crossover", "speedup", "dataloader", "bandwidth", "profile", "runs")
    )
    out = {None: list(tables.get("code_notes", []))}
    usable_runs = runs[runs["status"] == "ok"] if len(runs) else runs
    if runs.empty or usable_runs.empty:
        statuses = ", ".join(sorted(set(runs["status"]))) if len(runs) else "none"
        out[None].append(f"No run succeeded (statuses: {statuses}): there is nothing to fit or compare.")
        return out
    for host in sorted(set(runs["host"])):
        lines = out.setdefault(host, [])
        hf = fit[(fit["host"] == host) & fit["trusted"]]
        for device in host_first(runs[runs["host"] == host]["device"]):
            lines += fixed_cost(hf[hf["device"] == device], host, device)
        hc = cross[cross["host"] == host]
        for _, c in hc.iterrows():
            lines += crossover(c, host)
        if hc.empty and set(runs[runs["host"] == host]["device"]) == {HOST}:
            lines.append(f"Only the cpu ran on {host}, so there is no GPU crossover to report.")
        lines += speedups(spd[spd["host"] == host])
        lines += [dataloader(r) for _, r in dl[dl["host"] == host].iterrows()]
        lines += copies(bw[bw["host"] == host], host)
        lines += ops(prof[(prof["host"] == host) & (prof["status"] == "ok")] if not prof.empty else prof)
    for _, f in fit[fit["note"].astype(str).str.len() > 0].iterrows():
        out[None].append(f"{f['host']}, {f['device']}, {f['mode']}: {f['note']}.")
    return out


def fixed_cost(f: pd.DataFrame, host, device) -> list[str]:
    if f.empty:
        return [f"On {host}, {device}: no fit is trustworthy (too few batch sizes or noisy timings); see fits.csv."]
    lo, hi = f.loc[f["a_us"].idxmin()], f.loc[f["a_us"].idxmax()]
    if len(f) == 1:
        lines = [
            f"On {host}, {device}: a step of {lo['mode']} (the one mode with a trustworthy fit) costs a fixed "
            f"{us(lo['a_us'])} whatever the batch, plus {us(lo['b_us'])} per sample."
        ]
    else:
        lines = [
            f"On {host}, {device}: a step costs a fixed {us(lo['a_us'])} ({lo['mode']}) to {us(hi['a_us'])} "
            f"({hi['mode']}) whatever the batch, plus {us(f['b_us'].min())} to {us(f['b_us'].max())} per sample, "
            "so at small batches a step is paid in overhead, not arithmetic."
        ]
    ref = f[f["mode"] == "module"]
    if len(ref):
        r = ref.iloc[0]
        lines.append(
            f"For module on {device}, the fixed cost ({us(r['a_us'])}) outweighs the per-sample "
            f"cost ({us(r['b_us'])}) below batch size {bs(r['overhead_bound_below'])}: "
            "there the step waits on overhead, not arithmetic."
        )
    return lines


def crossover(c, host) -> list[str]:
    lines = []
    if c["verdict"] == "slower below, faster above":
        lines.append(
            f"On {host}, {c['device']} is slower than cpu below batch size {bs(c['crossover_batch_size'])} "
            f"for mode {c['mode']} (measured: last slower at {bs(c['measured_last_slower'])}, first faster "
            f"at {bs(c['measured_first_faster'])}); per-step overhead {us(c['a_us'])} vs {us(c['cpu_a_us'])} "
            f"on cpu, per sample {us(c['b_us'])} vs {us(c['cpu_b_us'])}."
        )
    elif isinstance(c["verdict"], str):
        lines.append(
            f"On {host}, {c['device']} is {c['verdict']} than cpu for mode {c['mode']} "
            f"(per-step overhead {us(c['a_us'])} vs {us(c['cpu_a_us'])} on cpu)."
        )
    if isinstance(c["note"], str) and c["note"]:
        lines.append(f"Note ({c['device']}, {c['mode']}): {c['note']}.")
    return lines


def speedups(spd: pd.DataFrame) -> list[str]:
    lines = []
    hs = spd[spd["kind"] == "device"]
    if len(hs):
        hi, lo = hs.loc[hs["speedup"].idxmax()], hs.loc[hs["speedup"].idxmin()]
        lines.append(
            f"Best accelerator speedup over cpu: {times(hi['speedup'])} ({hi['device']}, {hi['mode']}, "
            f"batch {hi['batch_size']}); worst: {times(lo['speedup'])} ({lo['device']}, {lo['mode']}, "
            f"batch {lo['batch_size']})."
        )
    hm = spd[(spd["kind"] == "mode") & (spd["mode"] != spd["baseline_mode"])]
    if len(hm):
        hi = hm.loc[hm["speedup"].idxmax()]
        lines.append(
            f"Best mode over {hi['baseline_mode']}: {hi['mode']} on {hi['device']} at batch "
            f"{hi['batch_size']}, {times(hi['speedup'])} faster per step."
        )
    return lines


def dataloader(r) -> str:
    copy = (
        "a host memcpy of the batch (what collation copies)" if r["device"] == HOST else "the host→device copy itself"
    )
    return (
        f"DataLoader on {r['device']} at batch {r['batch_size']}: {us(r['dataloader_step_us'])} per step vs "
        f"{us(r['module_step_us'])} for module, so feeding from host memory takes {share(r)} "
        f"of the step; {copy} takes {us(r['copy_us'])} ({pct(r['copy_share'])}) at the measured bandwidth."
    )


def copies(bw: pd.DataFrame, host) -> list[str]:
    lines = []
    for _, r in bw[bw["memory"] == "pinned"].iterrows():
        pg = bw[(bw["device"] == r["device"]) & (bw["memory"] == "pageable")]
        if len(pg):
            lines.append(
                f"Copies to {r['device']}: {r['largest_gb_per_s']:.3g} GB/s from pinned memory vs "
                f"{pg['largest_gb_per_s'].iloc[0]:.3g} GB/s pageable ({times(r['pinned_over_pageable'])}) for "
                f"{r['largest_bytes'] / 1e6:.3g} MB; a copy's fixed latency is {us(r['latency_us'])}."
            )
    for _, r in bw[bw["device"] == HOST].iterrows():
        lines.append(
            f"Host memcpy baseline on {host}: {r['largest_gb_per_s']:.3g} GB/s for {r['largest_bytes'] / 1e6:.3g} MB."
        )
    return lines


def ops(prof: pd.DataFrame) -> list[str]:
    lines = []
    for device in host_first(prof["device"]) if len(prof) else []:
        d = prof[prof["device"] == device]
        small = d["batch_size"].min()
        s = d[d["batch_size"] == small]
        counts = ", ".join(f"{m} {o + ob:.0f}" for m, o, ob in zip(s["mode"], s["ops_step"], s["ops_batch"]))
        lines.append(f"Torch ops dispatched per training step on {device} at batch {small}: {counts}.")
    return lines


def left_out(tables: dict) -> list[str]:
    """The runs the analysis did not use, and the combinations whose repeats disagree."""
    lines = [
        f"{r['host']} {r['device']} {r['mode']} batch {r['batch_size']} repeat {r['repeat']}: {r['reason']}"
        for _, r in tables["excluded"].iterrows()
    ]
    return lines


def disagreements(tables: dict) -> list[str]:
    return [
        f"{r['host']} {r['device']} {r['mode']} batch {r['batch_size']}: the {r['n_ok']} repeats' median step "
        f"times differ by {times(r['repeat_spread'])} (more than quality.repeat_spread); read its median with care"
        for _, r in tables["disagreeing"].iterrows()
    ]


# --- results/summary.md -------------------------------------------------------------------------


def summary_md(found: dict, cfg: dict, env: pd.DataFrame, tables: dict | None = None) -> str:
    lines = ["# mnist-device-bench: what this run found", ""]
    if tables is not None and len(tables["ladder"]):
        lines += ["## The headline", ""] + [f"- {s}" for s in headline(tables)] + [""]
    lines += [
        f"Config: devices {cfg.get('devices')}, modes {cfg.get('modes')}, batch sizes {cfg.get('batch_sizes')}, "
        f"{cfg.get('repeats')} repeats, {cfg.get('train_samples')} training samples x {cfg.get('epochs')} epochs. "
        "Step time is fitted as a + b x batch size: a is the fixed cost of every step, b the cost of each sample.",
        "",
    ]
    for host, sentences in found.items():
        if host is None:
            continue
        lines += [f"## {host}", ""]
        e = env[env["host"] == host] if "host" in env.columns else env.iloc[0:0]
        for _, r in e.iterrows():
            lines.append(
                f"- Environment ({r['device']}): {r['device_name']}; {r['cores']} cores, {r['threads']} threads; "
                f"torch {r['torch']}, python {r['python']}, cuda {r['cuda']}; {r['platform']}"
            )
        lines += [f"- {s}" for s in sentences] + [""]
    if tables is not None:
        if len(tables["disagreeing"]):
            lines += ["## Repeats that disagree", ""] + [f"- {s}" for s in disagreements(tables)] + [""]
        if len(tables["excluded"]):
            lines += ["## Left out of the analysis", ""] + [f"- {s}" for s in left_out(tables)] + [""]
    if found[None]:
        lines += ["## Notes", ""] + [f"- {s}" for s in found[None]] + [""]
    return "\n".join(lines)


# --- reStructuredText for the report ------------------------------------------------------------


def rst_table(df: pd.DataFrame, header: list[str]) -> str:
    if df.empty:
        return ""
    lines = [".. list-table::", "   :header-rows: 1", ""]
    for row in [header] + df.astype(str).replace({"": "–", "nan": "–", "<NA>": "–"}).values.tolist():
        lines.append(f"   * - {row[0]}")
        lines += [f"     - {c}" for c in row[1:]]
    return "\n".join(lines) + "\n"


def bullets(lines) -> str:
    return "".join(f"- {s}\n" for s in lines)


def fit_table(fit: pd.DataFrame) -> str:
    f = fit.copy()
    for c in ("a_us", "b_us"):
        f[c] = f[c].map(us)
    f["overhead_bound_below"] = f["overhead_bound_below"].map(bs)
    f["max_rel_err"] = f["max_rel_err"].map(pct)
    columns = {
        "host": "host",
        "device": "device",
        "mode": "mode",
        "a_us": "fixed cost a per step",
        "b_us": "cost b per sample",
        "overhead_bound_below": "overhead-bound below batch",
        "batch_sizes": "batch sizes",
        "max_rel_err": "worst fit error",
        "quality": "fit",
    }
    return rst_table(f[list(columns)], list(columns.values()))


def dataloader_table(dl: pd.DataFrame) -> str:
    d = dl.copy()
    for c in ("module_step_us", "dataloader_step_us", "extra_us", "copy_us"):
        d[c] = d[c].map(us)
    d["extra_share"] = [share(r) for _, r in dl.iterrows()]
    for c in ("copy_share", "profiled_dataloader_share", "profiled_module_share"):
        d[c] = d[c].map(pct)
    columns = {
        "host": "host",
        "device": "device",
        "batch_size": "batch",
        "module_step_us": "module step",
        "dataloader_step_us": "dataloader step",
        "extra_share": "DataLoader transfer share",
        "copy_us": "copy alone",
        "copy_share": "copy share",
        "profiled_dataloader_share": "profiled fetch share (dataloader)",
        "profiled_module_share": "profiled fetch share (module)",
    }
    return rst_table(d[list(columns)], list(columns.values()))


def environment_table(env: pd.DataFrame) -> str:
    cols = ["host", "device", "device_name", "cpu_model", "cores", "threads", "python", "torch", "cuda", "platform"]
    cols += ["git_commit", "config_hash"]
    return rst_table(env.reindex(columns=cols).astype(object).fillna(""), cols) if len(env) else ""


def answer(found: dict, tables: dict) -> str:
    """The workflow page: the headline first, then every finding, the fits, the DataLoader share,
    what was left out and why, and the environment."""
    head = headline(tables) if len(tables["ladder"]) else []
    facts = [s for host in sorted(h for h in found if h is not None) for s in found[host]]
    text = bullets(head) + ("\n**What else this run found**\n\n" + bullets(facts) if facts else "")
    if not head and not facts:
        text = " ".join(found[None]) + "\n" if found[None] else "No run succeeded.\n"
    fits_ = fit_table(tables["fits"])
    dl = dataloader_table(tables["dataloader"])
    text += (
        "\n**Fixed cost per step (a) and cost per sample (b)**, fitted as step time = a + b × batch size:\n\n"
        + (fits_ or "No fit: no successful run.\n")
        + "\n**DataLoader transfer share**: the share of a `dataloader` step spent beyond a `module` step "
        "(same model, data already on the device), i.e. batch collation and the host→device copy:\n\n"
        + (dl or "Not measured: the run needs both the `module` and the `dataloader` mode.\n")
    )
    if len(tables["disagreeing"]):
        text += "\n**Repeats that disagree**\n\n" + bullets(disagreements(tables))
    use = ", ".join(tables.get("use", ("ok",)))
    text += (
        f"\n**Left out of the analysis** (it uses runs with status ok and a timing verdict of {use}; "
        "figures draw the others hollow)\n\n" + (bullets(left_out(tables)) or "Nothing: every run was used.\n")
    )
    if found[None]:
        text += "\n**Notes**\n\n" + bullets(found[None])
    return (
        text + "\n**Environment of every host**\n\n" + (environment_table(tables["environment"]) or "None recorded.\n")
    )


def rst_pages(tables: dict, found: dict, cfg: dict | None = None) -> dict:
    """The run-specific text of the report: {name: rst}: `answer` for the workflow page, and a
    page for each figure that needs words beyond its caption (the others get an empty page)."""
    pages = {"answer": answer(found, tables)}
    pages["ladder"] = bullets(headline(tables)) if len(tables["ladder"]) else "No rung ran successfully.\n"
    pages["throughput"] = "Fits on this run (a = fixed cost per step, b = cost per sample):\n\n" + (
        fit_table(tables["fits"]) or "none.\n"
    )
    pages["speedup"] = speedup_page(tables["speedup"])
    prof = tables["profile"]
    ok = prof[prof["status"] == "ok"] if len(prof) else prof
    pages["breakdown"] = breakdown_page(ok)
    pages["ops"] = ops_page(ok)
    bw = tables["bandwidth"]
    pages["bandwidth"] = (
        "".join(
            f"- {r['host']} {r['device']} {r['memory']}: {r['largest_gb_per_s']:.3g} GB/s for "
            f"{r['largest_bytes'] / 1e6:.3g} MB, fixed latency {us(r['latency_us'])}\n"
            for _, r in bw.iterrows()
        )
        or "No copy timings.\n"
    )
    pages["accuracy"] = accuracy_text(tables["runs"], (cfg or {}).get("target_accuracy"))
    return pages


def speedup_page(spd: pd.DataFrame) -> str:
    dev = spd[spd["kind"] == "device"]
    if len(dev):
        hi, lo = dev.loc[dev["speedup"].idxmax()], dev.loc[dev["speedup"].idxmin()]
        return (
            f"Accelerator over cpu on this run: from {times(lo['speedup'])} ({lo['device']}, {lo['mode']}, "
            f"batch {lo['batch_size']}) to {times(hi['speedup'])} ({hi['device']}, {hi['mode']}, "
            f"batch {hi['batch_size']}).\n"
        )
    lad = spd[(spd["kind"] == "mode") & (spd["mode"] != spd["baseline_mode"])]
    if len(lad):
        hi = lad.loc[lad["speedup"].idxmax()]
        return (
            f"No accelerator ran, so the heatmap shows each mode over {hi['baseline_mode']} on the cpu instead: "
            f"best {times(hi['speedup'])} ({hi['mode']}, batch {hi['batch_size']}).\n"
        )
    return "Not enough successful runs for a speedup.\n"


def breakdown_page(ok: pd.DataFrame) -> str:
    if ok.empty:
        return "No profile succeeded on this run.\n"
    lines = [
        f"- {r['host']} {r['device']} {r['mode']} batch {r['batch_size']}: transfer {us(r['transfer_us'])}, "
        f"forward {us(r['forward_us'])}, backward {us(r['backward_us'])}, optimizer {us(r['optimizer_us'])}"
        + ("" if r["device"] == HOST else f", device wait {us(r['wait_us'])}")
        + f"; profiled {us(r['step_us_profiled'])} per step vs {us(r['step_us_plain'])} without the profiler."
        for _, r in ok[ok["mode"].isin(["module", "dataloader"])].iterrows()
    ]
    return "On this run:\n\n" + ("\n".join(lines) + "\n" if lines else "(module and dataloader were not profiled)\n")


def ops_page(ok: pd.DataFrame) -> str:
    if ok.empty:
        return "No profile succeeded on this run.\n"
    o = ok.assign(total=ok["ops_step"] + ok["ops_batch"])
    top = o.loc[o["total"].idxmax()]
    return (
        f"Most ops per step on this run: {top['mode']} at batch {top['batch_size']} on {top['device']}, "
        f"{top['total']:.0f} ({top['ops_batch']:.0f} of them fetching the batch).\n"
    )


def accuracy_text(runs: pd.DataFrame, target) -> str:
    ok = runs[runs["status"] == "ok"]
    if ok.empty:
        return "No successful run.\n"
    reached = ok[pd.to_numeric(ok["time_to_target_s"], errors="coerce").notna()]
    text = f"{len(reached)} of {len(ok)} successful runs reached test accuracy {target}."
    if len(reached):
        r = reached.loc[pd.to_numeric(reached["time_to_target_s"]).idxmin()]
        text += (
            f" Fastest: {r['device']} · {r['mode']} at batch {r['batch_size']}, in "
            f"{float(r['time_to_target_s']):.3g} s of training ({r['host']})."
        )
    return text + "\n"
