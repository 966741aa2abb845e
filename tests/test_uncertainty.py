"""How sure a number is: the bootstrap's intervals on synthetic data of a known distribution, every
derived number with its interval, the words and figures that show them, and runs long enough to
be judged."""

import copy
import math
import sys

import numpy as np
import pandas as pd
import pytest
from conftest import REPO, make_tensors
from mnistbench.collect import uncertainty
from mnistbench.measure import slowed
from mnistbench.report import facts, figures, numbers, words
from mnistbench.report import tables as tbl
from mnistbench.train import records, trainer

GRID = [1, 16, 256, 4096]


def process_runs(n, rng, sigma=0.1, centre=1.0, steps=400, within=0.05):
    """n runs of one combination: each process has its own speed (lognormal, sigma), its steps
    scatter around it (within). Returns (run medians, block cells) as runs.csv holds them."""
    medians, cells = [], []
    for _ in range(n):
        speed = centre * math.exp(rng.normal(0, sigma))
        steps_s = speed * np.exp(rng.normal(0, within, steps))
        medians.append(float(np.median(steps_s)))
        cells.append(slowed.blocks_cell(slowed.split(steps_s)))
    return medians, cells


@pytest.mark.parametrize("n", [3, 5])
def test_interval_of_the_median_covers_the_true_median_at_its_level(n):
    """400 data sets of n processes whose median step time is 1 by construction: the 95 % interval
    contains 1 in about 95 % of them (the median of 3 scatters more than the mean the t interval
    is built for, so 3 runs reach about 90 %; a bootstrap drawing 3 of 3 runs reached only 79 %),
    and it is not so wide that it always does."""
    rng = np.random.default_rng(0)
    hits = 0
    for t in range(400):
        meds, cells = process_runs(n, rng)
        lo, hi = uncertainty.interval(uncertainty.median_replicates(meds, cells, ("cover", t)))
        hits += lo <= 1.0 <= hi
    assert 0.87 <= hits / 400 <= 0.99


def test_two_runs_give_finite_replicates_and_the_t_interval():
    """Two usable runs (a third was noisy): the shift between processes is drawn from t with one
    degree of freedom, whose tails reach thousands; no replicate may underflow to 0 or overflow to
    inf (a ratio of two such is NaN, and a NaN takes away the interval of every number derived from
    it), while the interval stays the t interval: median * exp(+-12.71 * s / sqrt(2))."""
    rng = np.random.default_rng(2)
    for t in range(50):
        meds, cells = process_runs(2, rng, sigma=0.3)
        reps = uncertainty.median_replicates(meds, cells, ("two", t))
        assert np.isfinite(reps).all() and (reps > 0).all(), (meds, reps.min(), reps.max())
    meds, cells = [68e-6, 116e-6], ["", ""]  # two processes of one combination, 1.7x apart
    lo, hi = uncertainty.interval(uncertainty.median_replicates(meds, cells, ("spread",), n_boot=20000))
    half = 12.706 * np.std(np.log(meds), ddof=1) / math.sqrt(2)  # t(1) at 97.5 %
    centre = np.median(meds)
    # Within the sampling error of t's 2.5 % and 97.5 % quantiles (about 0.15 on this log scale);
    # a normal interval would end 1.9 below and above these, on the log scale.
    assert abs(math.log(lo / centre) + half) < 0.4 and abs(math.log(hi / centre) - half) < 0.4, (lo, hi, half)


def test_two_runs_of_one_distribution_agree_at_the_calibration_target():
    """What bench/calibration.py checks on the real machine, here on a known distribution: the
    ratio of two independent grids' medians (3 processes each, 10 % apart from process to
    process) has an interval containing 1 in at least 90 % of cases; two grids 1.8x apart are
    told apart in most of them."""
    rng = np.random.default_rng(1)
    same, apart = 0, 0
    for t in range(300):
        r1 = uncertainty.median_replicates(*process_runs(3, rng), ("one", t))
        r2 = uncertainty.median_replicates(*process_runs(3, rng), ("two", t))
        r3 = uncertainty.median_replicates(*process_runs(3, rng, centre=1.8), ("three", t))
        same += uncertainty.same_within_noise(r2 / r1) is True
        apart += uncertainty.same_within_noise(r3 / r1) is False
    assert same / 300 >= 0.9
    assert apart / 300 >= 0.8


def grid_runs(rng, combos=60, n=3):
    """One grid's usable runs as runs.csv holds them: `combos` combinations of one machine, n
    processes each (process_runs), every combination at its own speed."""
    rows = []
    for c in range(combos):
        meds, cells = process_runs(n, rng, centre=1e-4 * (1 + c))
        for r, (m, cell) in enumerate(zip(meds, cells)):
            row = dict(
                host="vm",
                device="cpu",
                model="mlp-16-16",
                mode=f"m{c}",
                batch_size=16,
                repeat=r,
                status="ok",
                quality="ok",
            )
            rows.append(dict(row, step_time_median_s=m, step_time_blocks_s=cell))
    return pd.DataFrame(rows)


def test_calibration_draws_its_two_runs_independently():
    """bench/calibration.py's own comparison, on two grids of one distribution that share every
    key (as two runs of one config do): at least 90 % of the run2/run1 intervals contain 1. With
    both runs drawn from one seed per key, each pair drew the same shift between processes, which
    then cancelled in the ratio, and only about two thirds did."""
    sys.path.insert(0, str(REPO / "bench"))
    import calibration

    rng = np.random.default_rng(3)
    shares = []
    for _ in range(3):
        first, second = grid_runs(rng), grid_runs(rng)
        m1 = calibration.medians(calibration.replicates(first, "run1"))
        m2 = calibration.medians(calibration.replicates(second, "run2"))
        shares.append(calibration.agreement(m1, m2)["agree"].mean())
    assert np.mean(shares) >= 0.9, shares


def test_one_process_has_no_interval_and_the_words_say_so():
    reps = uncertainty.median_replicates([1e-3], ["0.001 0.0011 0.0009"], ("one",))
    assert np.isnan(reps).all()
    assert uncertainty.interval(reps) == (pytest.approx(math.nan, nan_ok=True),) * 2
    assert math.isnan(uncertainty.same_within_noise(reps / reps))
    assert (
        numbers.with_interval(numbers.num(231.0, math.nan, math.nan), numbers.times)
        == "231× (no interval: one usable run)"
    )
    assert numbers.with_interval(numbers.num(231.0, 218.0, 245.0), numbers.times) == "231× (218–245×)"
    assert numbers.with_interval(numbers.num(4.58e3, 4.5e3, 4.94e3), numbers.rate) == "4.58 k (4.5–4.94 k)"


def test_steps_within_one_process_give_a_narrow_interval_around_the_estimate():
    """Processes that do not differ: the interval is the steps' own scatter, a few per cent."""
    rng = np.random.default_rng(2)
    meds, cells = process_runs(3, rng, sigma=0.0, within=0.05)
    reps = uncertainty.median_replicates(meds, cells, ("steady",))
    lo, hi = uncertainty.interval(reps)
    assert lo <= np.median(meds) <= hi
    assert (hi - lo) / np.median(meds) < 0.05


def slowed_run(rng, slowed_blocks, level=1e-3, factor=1.6, steps=1600):
    """One process's timed steps at `level` (3 % scatter), with the blocks `slowed_blocks` (of
    slowed.BLOCKS) slowed `factor` times, as a busy neighbour of a VM does for seconds."""
    x = level * np.exp(rng.normal(0, 0.03, steps))
    per = steps // slowed.BLOCKS
    for b in slowed_blocks:
        x[b * per : (b + 1) * per] *= factor
    return x


def test_steps_the_machine_slowed_are_left_out_and_counted():
    """Four processes the host slowed for none, a quarter, half and three quarters of their steps:
    over all steps their medians differ by 1.6x; over the steps it left alone they agree, at the
    unslowed level, and each run counts what it left out."""
    rng = np.random.default_rng(5)
    runs = [slowed_run(rng, range(0, k)) for k in (0, 4, 8, 12)]
    runs[2] = slowed_run(rng, [1, 2, 5, 6, 9, 10, 13, 14])  # slowed stretches anywhere in the run
    assert max(np.median(r) for r in runs) / min(np.median(r) for r in runs) > 1.5
    kept = [slowed.kept_steps(r) for r in runs]
    assert [share for _, share in kept] == pytest.approx([0, 0.25, 0.5, 0.75])
    medians = [np.median(k) for k, _ in kept]
    assert max(medians) / min(medians) < 1.03
    assert medians == pytest.approx([1e-3] * 4, rel=0.03)
    # A steady run keeps every step; so does one too short to be cut into blocks, one whose blocks
    # are too short for their medians to tell a slowed stretch from the steps' scatter, and one
    # with a single block fast by chance.
    steady = slowed_run(rng, [])
    assert slowed.kept_steps(steady) == (pytest.approx(list(steady)), 0.0)
    assert slowed.kept_steps([1e-3]) == ([1e-3], 0.0)
    short = slowed_run(rng, range(8), steps=16 * (slowed.SLOWED_STEPS - 1))
    assert slowed.kept_steps(short)[1] == 0.0
    lucky = slowed_run(rng, [])
    lucky[:100] *= 0.85
    assert slowed.kept_steps(lucky)[1] == 0.0
    # The run's blocks cell holds the blocks the median was taken over, so the bootstrap never
    # reaches the slowed level.
    kept, _ = slowed.kept_blocks(runs[3])
    cell = slowed.parse_blocks(slowed.blocks_cell(kept))
    assert len(cell) == 4
    reps = uncertainty.run_replicates(medians[3], cell, np.random.default_rng(0))
    assert reps.max() < 1.1 * medians[3] and reps.min() > 0.9 * medians[3]


def test_the_fit_on_every_replicate_is_fit_line():
    """fit_many is fit_line vectorised: the same a and b on the same points, outliers included."""
    rng = np.random.default_rng(3)
    x = np.repeat([1.0, 16, 256, 4096], 3)
    for _ in range(20):
        a, b = rng.uniform(1e-6, 1e-3), rng.uniform(1e-8, 1e-5)
        y = (a + b * x) * np.exp(rng.normal(0, 0.05, len(x)))
        y[rng.integers(len(y))] *= 3  # one outlier
        one = uncertainty.fit_line(x, y)
        ra, rb = uncertainty.fit_many(x, y[None, :])
        assert ra[0] == pytest.approx(one["a"], rel=1e-3, abs=1e-12)
        assert rb[0] == pytest.approx(one["b"], rel=1e-3, abs=1e-14)


def runs_of(truth: dict, repeats=3, sigma=0.08, seed=0) -> pd.DataFrame:
    """A runs table with block cells: step time = (a + b·B) x process effect; truth =
    {(device, mode): (a_us, b_us)}."""
    rng = np.random.default_rng(seed)
    rows = []
    for (device, mode), (a, b) in truth.items():
        for bs in GRID:
            for r in range(repeats):
                meds, cells = process_runs(1, rng, sigma=sigma, centre=(a + b * bs) * 1e-6)
                rows.append(
                    dict(
                        host="h1",
                        device=device,
                        device_name=device,
                        model="mlp-16-16",
                        flop_per_sample=52_672,
                        mode=mode,
                        batch_size=bs,
                        repeat=r,
                        status="ok",
                        quality="ok",
                        step_time_median_s=meds[0],
                        step_time_blocks_s=cells[0],
                        samples_per_s=bs / meds[0],
                        test_accuracy=0.9,
                        final_loss=0.3,
                        time_to_target_s="",
                    )
                )
    return pd.DataFrame(rows)


def test_every_derived_number_has_an_interval_that_contains_it():
    truth = {("cpu", "seed"): (200, 5), ("cpu", "module"): (60, 1.5), ("cuda", "module"): (400, 0.05)}
    runs = runs_of(truth)
    reps = tbl.replicates(runs)
    fit_reps = tbl.fit_replicates(runs, reps=reps)
    fit = tbl.fits(runs, fit_reps=fit_reps)
    for c in ("a_us", "b_us"):
        assert (fit[f"{c}_lo"] <= fit[c] * 1.001).all() and (fit[c] <= fit[f"{c}_hi"] * 1.001).all()
    cross = tbl.crossover(fit, runs, fit_reps=fit_reps).iloc[0]
    assert cross["crossover_batch_size_lo"] <= cross["crossover_batch_size"] <= cross["crossover_batch_size_hi"]
    assert 340 / 1.45 > cross["crossover_batch_size_lo"] and cross["crossover_batch_size_hi"] > 340 / 1.45 * 0.7
    spd = tbl.speedup(runs, reps=reps)
    assert spd[["speedup_lo", "speedup_hi"]].notna().all().all()
    assert ((spd["speedup_lo"] <= spd["speedup"] * 1.001) & (spd["speedup"] <= spd["speedup_hi"] * 1.001)).all()
    lad = tbl.ladder(runs, reps=reps)
    assert ((lad["samples_per_s_lo"] <= lad["samples_per_s"]) & (lad["samples_per_s"] <= lad["samples_per_s_hi"])).all()
    best = lad[(lad["device"] == "cpu") & (lad["point"] == "smallest")].set_index("mode")
    assert best.loc["module", "same_as_best"] == True and best.loc["seed", "same_as_best"] == False  # noqa: E712


def test_ranks_only_what_the_intervals_separate():
    """Two modes of the same speed are 'the same within noise'; a 3x faster one is ranked."""
    truth = {("cpu", "seed"): (200, 5), ("cpu", "manual"): (200, 5), ("cpu", "module"): (60, 1.5)}
    spd = tbl.speedup(runs_of(truth, sigma=0.05))
    mode = spd[spd["kind"] == "mode"].set_index(["mode", "batch_size"])
    assert mode.loc[("manual", 1), "same_within_noise"] == True  # noqa: E712
    assert mode.loc[("module", 1), "same_within_noise"] == False  # noqa: E712
    line = words.sentences(facts.speedups(spd[spd["kind"] == "mode"]))[0]
    assert "module" in line and "(" in line and "–" in line


def test_headline_and_figures_show_the_intervals():
    truth = {("cpu", "seed"): (200, 5), ("cpu", "module"): (60, 1.5), ("cuda", "module"): (400, 0.05)}
    runs = runs_of(truth)
    lad = tbl.ladder(runs)
    spd = tbl.speedup(runs)
    fit = tbl.fits(runs)
    cross = tbl.crossover(fit, runs)
    env = pd.DataFrame(columns=["host", "device", "fma_gflops"])
    tables = dict(ladder=lad, crossover=cross, speedup=spd, fits=fit, environment=env, profile=pd.DataFrame())
    head = " ".join(words.sentences(facts.headline(tables)))
    module = lad[(lad["device"] == "cpu") & (lad["point"] == "smallest") & (lad["mode"] == "module")].iloc[0]
    assert (
        numbers.with_interval(
            numbers.num(module["over_seed"], module["over_seed_lo"], module["over_seed_hi"]), numbers.times
        )
        in head
    )
    assert "overtakes the cpu from batch size" in head and head.count("–") >= 6

    title = words.say(facts.headline(tables)[0][0])  # the ladder's title: the headline's first fact
    fig = figures.ladder(lad, title=title)
    whiskers = [c for ax in fig.axes for c in ax.collections if c.get_gid() == "interval"]
    segments = [s for c in whiskers for s in c.get_segments()]
    assert len(segments) == len(lad)  # one whisker per bar
    for s, (_, r) in zip(sorted(segments, key=lambda s: s[0][1]), lad.sort_values("samples_per_s_lo").iterrows()):
        assert s[0][1] == pytest.approx(r["samples_per_s_lo"]) and s[1][1] == pytest.approx(r["samples_per_s_hi"])
    assert "–" in fig._suptitle.get_text()

    fig = figures.throughput(runs, tbl.fits(runs))
    bands = [c for ax in fig.axes for c in ax.collections if c.get_gid() == "interval"]
    assert len(bands) == 3  # one band per device x mode line
    one = runs[runs["repeat"] == 0]
    fig = figures.throughput(one, tbl.fits(one))
    assert not [c for ax in fig.axes for c in ax.collections if c.get_gid() == "interval"]


@pytest.fixture(scope="module")
def tensors(tmp_path_factory):
    return make_tensors(tmp_path_factory.mktemp("tensors"), n_train=512, n_test=100)


def test_a_short_run_times_more_epochs_until_min_timed_s_and_learns_the_same(tensors, monkeypatch):
    """A run shorter than min_timed_s is timed for more epochs of the same data, up to a cap that
    it names; its learning figures stay those of the configured epochs (the same as a run without
    the extra epochs)."""
    cfg = copy.deepcopy(trainer.DEFAULTS)
    cfg.update(train_samples=512, test_samples=100, epochs=2, warmup_steps=2, retime=0)
    cfg["quality"]["max_other_cpu"] = 1e9  # this test is about the epochs, not a busy machine
    plain, _ = trainer.train(dict(cfg, min_timed_s=0), tensors, "cpu", "mlp-16-16", "module", 64, 0, log=lambda m: None)
    assert plain["status"] == "ok" and plain["timed_epochs"] == 2 and plain["steps"] == 16

    monkeypatch.setattr(trainer, "MAX_EPOCHS", 5)  # a run that cannot reach min_timed_s stops at the cap
    logs = []
    capped, record = trainer.train(
        dict(cfg, min_timed_s=1e4), tensors, "cpu", "mlp-16-16", "module", 64, 0, log=logs.append
    )
    assert capped["status"] == "ok" and capped["timed_epochs"] == 5 and capped["steps"] == 40
    assert capped["timed_steps"] == 38 and "under min_timed_s (the cap)" in capped["quality_note"]
    assert capped["test_accuracy"] == plain["test_accuracy"]
    assert capped["final_loss"] == pytest.approx(plain["final_loss"])
    assert len(record["epochs"]) == 2  # the learning curve is the configured epochs'
    assert any("more epoch(s) of the same data to reach min_timed_s" in line for line in logs)
    assert len(capped["step_time_blocks_s"].split()) == slowed.BLOCKS
    # The row's step time is the median of the timed steps the machine left alone, from the record.
    kept, share = slowed.kept_steps(records.step_times(record)[cfg["warmup_steps"] :])
    assert capped["slowed_share"] == share and 0 <= share < 1
    assert capped["step_time_median_s"] == pytest.approx(np.median(kept))

    monkeypatch.setattr(trainer, "MAX_EPOCHS", 1000)
    reached, record = trainer.train(
        dict(cfg, min_timed_s=0.5), tensors, "cpu", "mlp-16-16", "module", 64, 0, log=lambda m: None
    )
    assert reached["total_train_s"] >= 0.5 and "min_timed_s" not in reached["quality_note"]
    if reached["timed_epochs"] > 2:  # the configured epochs alone were shorter (on a quiet machine, always)
        assert record["epochs"][-1]["cum_train_s"] < 0.5


def slowed_runs_table(shares, n_runs=3, seed=7):
    """runs.csv rows of one combination per entry of `shares`: n_runs processes whose host slowed
    that many of their 16 blocks 1.6x, with the kept and the all-steps columns train.py writes."""
    rng = np.random.default_rng(seed)
    rows = []
    for i, k in enumerate(shares):
        for r in range(n_runs):
            x = slowed_run(rng, range(k))
            kept, share = slowed.kept_blocks(x)
            rows.append(
                dict(
                    machine="vm", host="vm", device="cpu", model="mlp-16-16", mode="module", batch_size=2**i,
                    models_at_once=1,
                    repeat=r, status="ok", quality="ok", slowed_share=share,
                    step_time_median_s=float(np.median(slowed.steps_of(kept))),
                    step_time_all_steps_s=float(np.median(x)),
                    step_time_blocks_s=slowed.blocks_cell(kept),
                    step_time_all_blocks_s=slowed.blocks_cell(slowed.split(x)),
                )
            )  # fmt: skip
    return pd.DataFrame(rows)


def test_the_all_steps_median_stands_beside_the_kept_one_and_the_report_names_where_they_differ():
    from mnistbench.collect import aggregate

    runs = slowed_runs_table([0, 10])  # batch 1: never slowed; batch 2: 10 of 16 blocks slowed 1.6x
    effect = aggregate.kept_over_all(runs).set_index("batch_size")
    assert effect.loc[1, "kept_over_all"] == pytest.approx(1.0, abs=0.01)
    assert effect.loc[1, "all_steps_differ"] == False  # noqa: E712 (a bool, not "": it has an interval)
    assert effect.loc[2, "kept_over_all"] < 0.9 and effect.loc[2, "kept_over_all_hi"] < 1
    assert effect.loc[2, "all_steps_differ"] == True  # noqa: E712
    line = words.sentences(facts.slowed(runs, "vm"))[-1]
    assert "differ by more than their interval in 1 of 2 combinations: cpu mlp-16-16 module at batch 2" in line
    line = words.sentences(facts.slowed(runs[runs.batch_size == 1], "vm"))[-1]
    assert "agree within the interval of their ratio in all 1 combinations" in line
    # summary.csv pools the all-steps median with its interval, as it pools the kept one.
    s = aggregate.summarise(runs.assign(samples_per_s=runs.batch_size / runs.step_time_median_s, test_accuracy=0.9, final_loss=0.1, device_name="x"))  # fmt: skip
    s = s.set_index("batch_size")
    assert s.loc[2, "step_time_all_steps_s"] == pytest.approx(runs[runs.batch_size == 2].step_time_all_steps_s.median())
    assert (
        s.loc[2, "step_time_all_steps_s_lo"] < s.loc[2, "step_time_all_steps_s"] < s.loc[2, "step_time_all_steps_s_hi"]
    )
    assert s.loc[2, "step_time_median_s"] < s.loc[2, "step_time_all_steps_s"] and s.loc[2, "kept_over_all_hi"] < 1
    assert bool(s.loc[2, "all_steps_differ"]) and not bool(s.loc[1, "all_steps_differ"])


def test_slowed_rule_false_keeps_every_step(tensors, monkeypatch):
    """The rule's switch reaches the run: with `slowed_rule: false` its step time is the median
    of all its timed steps (as step_time_all_steps_s), nothing is counted slowed; with the rule,
    blocks it calls slowed (here: made so, every other block) are left out of the step time only.
    A run also counts the samples after its epoch's last whole batch."""
    cfg = copy.deepcopy(trainer.DEFAULTS)
    cfg.update(train_samples=500, test_samples=100, epochs=3, warmup_steps=2, retime=0, min_timed_s=0)
    cfg["quality"]["max_other_cpu"] = 1e9
    monkeypatch.setattr(slowed, "SLOWED_STEPS", 1)  # this run's blocks are short
    monkeypatch.setattr(slowed, "undisturbed", lambda b, n=0: np.arange(len(b)) % 2 == 0)
    ruled, record = trainer.train(cfg, tensors, "cpu", "mlp-16-16", "module", 8, 0, log=lambda m: None)
    timed = records.step_times(record)[2:]
    assert ruled["dropped_samples"] == 500 % 8 and ruled["steps"] == 3 * (500 // 8)
    assert ruled["step_time_all_steps_s"] == pytest.approx(np.median(timed))
    assert ruled["slowed_share"] == pytest.approx(0.5, abs=0.05)
    kept = slowed.steps_of(slowed.split(timed)[::2])
    assert ruled["step_time_median_s"] == pytest.approx(np.median(kept))
    off, record = trainer.train(dict(cfg, slowed_rule=False), tensors, "cpu", "mlp-16-16", "module", 8, 0, log=lambda m: None)  # fmt: skip
    timed = records.step_times(record)[2:]
    assert off["slowed_share"] == 0
    assert off["step_time_median_s"] == off["step_time_all_steps_s"] == pytest.approx(np.median(timed))
    assert off["step_time_blocks_s"] == off["step_time_all_blocks_s"]


def test_runs_drawn_together_are_the_runs_drawn_one_by_one():
    """drawn_runs draws consecutive runs with as many blocks in one call: the same replicates as
    run_replicates run by run (and the same between-process shift after them), whatever mix of
    block counts and runs without blocks a combination has."""
    rng = np.random.default_rng(3)
    cell = lambda k: " ".join(f"{v:.6g}" for v in rng.lognormal(0, 0.1, k) * 1e-4)  # noqa: E731
    cells = [cell(16), cell(16), cell(1), cell(12), cell(12), "", cell(16)]
    medians = [1e-4, 1.1e-4, 0.9e-4, 1.05e-4, 1e-4, 0.95e-4, 1.02e-4]
    got = uncertainty.drawn_runs(medians, cells, ("k", 1))
    r = uncertainty.rng_for(("k", 1))
    one_by_one = np.stack([uncertainty.run_replicates(m, slowed.parse_blocks(c), r) for m, c in zip(medians, cells)])
    n = len(medians)
    shift = np.std(np.log(medians), ddof=1) / math.sqrt(n) * r.standard_t(n - 1, size=uncertainty.N_BOOT)
    expected = one_by_one.T * np.exp(np.clip(shift, -uncertainty.MAX_LOG_SHIFT, uncertainty.MAX_LOG_SHIFT))[:, None]
    np.testing.assert_allclose(got, expected, rtol=1e-12)
