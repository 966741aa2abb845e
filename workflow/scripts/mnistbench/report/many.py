"""Many models at once (`models_at_once`, K): the remedy when one small network leaves a device
idle. The table and the facts of the runs that trained K copies together, beside the same modes
training one (K = 1); every other table of the report compares runs of one model at a time.

The table `many`, per place x device x network x mode x batch size x K, with 95 % intervals from
the replicates of each combination's median step time (collect/uncertainty.py):
- samples_per_s: each copy's rate (batch size over the median step time), model_samples_per_s:
  all K copies' (K times it);
- over_one: model_samples_per_s over the same mode's samples/s at K = 1 (what training the K
  copies one after another with that mode would give);
- over_best_one: model_samples_per_s over the samples/s of its device's fastest mode at K = 1 (the
  best that training them one after another can do there, `best_one` that mode);
- over_cpu_best: model_samples_per_s over the cpu's best mode's at the same K; `best`: the fastest
  mode of its device there.
"""

import pandas as pd

from mnistbench.collect import uncertainty
from mnistbench.collect.aggregate import usable
from mnistbench.config.devices import CPU, cpu_first
from mnistbench.report.numbers import at, ratio
from mnistbench.report.tables import NAN, PLACE_KEYS, add_interval_columns, by_size, placed

KEYS = [*PLACE_KEYS, "models_at_once"]
COLUMNS = [*KEYS, "step_time_median_s", "samples_per_s", "model_samples_per_s", "over_one", "best_one", "over_best_one"]
COLUMNS += ["over_cpu_best", "best"]


def one_at_a_time(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs that trained one model (K = 1): what every other table of the report compares."""
    if "models_at_once" not in runs.columns:
        return runs
    return runs[pd.to_numeric(runs["models_at_once"], errors="coerce").fillna(1) == 1]


def table(runs: pd.DataFrame, use=("ok",)) -> pd.DataFrame:
    """The `many` table (the module's docstring); empty where no run trained several models at once."""
    ok = usable(placed(runs), use)
    if "models_at_once" not in ok.columns or not (pd.to_numeric(ok["models_at_once"]) > 1).any():
        return pd.DataFrame(columns=COLUMNS)
    ok = ok.assign(models_at_once=pd.to_numeric(ok["models_at_once"]).astype(int))
    drawn = uncertainty.replicates(ok, KEYS, stream="many")
    out = ok.groupby(KEYS, as_index=False)["step_time_median_s"].median()
    step, b, k = out["step_time_median_s"], out["batch_size"], out["models_at_once"]
    out["samples_per_s"], out["model_samples_per_s"] = b / step, b * k / step
    # Model-samples/s on every replicate (all NaN without): each ratio below takes its interval from them.
    keys = zip(*(out[c] for c in KEYS))
    out["reps"] = [n / uncertainty.medians(drawn[key]) if key in drawn else NAN for n, key in zip(b * k, keys)]
    add_interval_columns(out, "model_samples_per_s", out["reps"])
    out["samples_per_s_lo"] = out["model_samples_per_s_lo"] / out["models_at_once"]
    out["samples_per_s_hi"] = out["model_samples_per_s_hi"] / out["models_at_once"]
    where = [c for c in KEYS if c not in ("device", "mode")]
    fastest = out.loc[out.groupby(["device", *where])["model_samples_per_s"].idxmax()]
    ones, alone = fastest[fastest["models_at_once"] == 1], ["place", "device", "model", "batch_size"]
    out["best_one"] = out[alone].merge(ones.rename(columns={"mode": "best_one"}), how="left")["best_one"].fillna("")

    def over(name: str, other: pd.DataFrame, on: list) -> None:
        """Column `name`: a row's model-samples/s over that of `other`'s row with the same `on`."""
        match = out[on].merge(other[[*on, "model_samples_per_s", "reps"]], on=on, how="left")
        out[name] = out["model_samples_per_s"] / match["model_samples_per_s"]
        add_interval_columns(out, name, [mine / theirs for mine, theirs in zip(out["reps"], match["reps"])])

    over("over_one", out[out["models_at_once"] == 1], KEYS[:-1])
    over("over_best_one", ones, alone)
    over("over_cpu_best", fastest[fastest["device"] == CPU], where)
    out["best"] = out.index.isin(fastest.index)
    order = {m: i for i, m in enumerate(by_size(runs))}
    out = out.sort_values(["place", "model", "batch_size", "models_at_once", "device", "mode"], ignore_index=True)
    out = out.sort_values("model", key=lambda s: s.map(order), kind="stable", ignore_index=True)
    return out[[c for c in out.columns if c in COLUMNS or c.endswith(("_lo", "_hi"))]]


def facts(m: pd.DataFrame) -> list[dict]:
    """One fact per place and network at the smallest batch size and the largest K: the cpu's best
    mode, and for each accelerator the smallest K from which its best mode beats the cpu's best (the
    interval above 1) or that it never does."""
    out = []
    if m.empty:
        return out
    for (place, model), g in m.groupby(["place", "model"], sort=False):
        b = g["batch_size"].min()
        g = g[g["batch_size"] == b]
        k = g["models_at_once"].max()
        top = g[g["best"].astype(bool) & (g["models_at_once"] == k)]
        cpu = top[top["device"] == CPU]
        fact = dict(kind="many_network", place=place, network=model, batch=int(b), k=int(k), cpu=None, devices=[])
        if len(cpu):
            r = cpu.iloc[0]
            fact["cpu"] = dict(
                mode=r["mode"],
                rate=at(r, "model_samples_per_s"),
                over_one=ratio(r, "over_one"),
                best_one=r["best_one"] if isinstance(r["best_one"], str) else "",
                over_best_one=ratio(r, "over_best_one"),
            )
        for device in [d for d in cpu_first(g["device"]) if d != CPU]:
            best = g[(g["device"] == device) & g["best"].astype(bool)].sort_values("models_at_once")
            # Above 1 with its interval; with one run per combination (no interval), its point.
            lo = best["over_cpu_best_lo"].fillna(best["over_cpu_best"])
            wins = best[lo > 1]
            first = wins.iloc[0] if len(wins) else best.iloc[-1]
            fact["devices"].append(
                dict(
                    device=device,
                    wins=bool(len(wins)),
                    k=int(first["models_at_once"]),
                    mode=first["mode"],
                    over=ratio(first, "over_cpu_best"),
                    largest=int(best["models_at_once"].max()),
                )
            )
        out.append(fact)
    return out
