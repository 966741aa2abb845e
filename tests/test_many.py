"""Many models at once (`models_at_once`): every mode that takes K trains each of K copies as that
copy trained alone would be, proven against float64 references of each copy on the seed's
network, the family's awkward shapes and a user's module; a mode that does not take K is left out."""

import pandas as pd
import pytest
import torch
from conftest import REPO, snakemake, tiny_config
from mnistbench.config import catalog, networks
from mnistbench.report import words
from mnistbench.train import nets, runner, trainer
from mnistbench.train.needs import exists
from test_analysis import analyse, synthetic_runs
from test_modes import SEED, TOL, batch, module_reference, reference_training

KS = [1, 3, 16]
# A user's module without kinks (tests/smooth_cnn.py says why: over 16 copies of config/cnn.py
# some ReLU or max-pool choice always lies within float32 rounding of its kink).
SMOOTH = f"{REPO}/tests/smooth_cnn.py:Net"
NETWORKS = [SEED, "mlp-1", "mlp-17-33-5-64", SMOOTH]
LR = {SMOOTH: 0.1}
MANY = [m for m, info in catalog.MODES.items() if not info.one_at_a_time]
CASES = [
    pytest.param(
        net, m, k, marks=[pytest.mark.slow] if m == "compiled" else [], id=f"{net.replace(str(REPO), '')}-{m}-k{k}"
    )
    for net in NETWORKS
    for m in MANY
    if exists(m, "cpu", networks.build(trainer.DEFAULTS, net), 3)
    for k in KS
]


@pytest.mark.parametrize("loss", ["mse_softmax", "cross_entropy"])
@pytest.mark.parametrize("network,name,k", CASES)
def test_each_copy_trains_as_it_would_alone(network, name, k, loss):
    """K copies from seeds seed, seed + 1, ... trained together for a few steps (chaos grows from
    rounding over thousands): copy i ends where float64 SGD of copy i alone ends."""
    lr = LR.get(network, 0.5)
    cfg = dict(trainer.DEFAULTS, training=dict(trainer.DEFAULTS["training"], loss=loss, lr=lr))
    s = networks.build(cfg, network)
    mode = runner.build(cfg, s, name, "cpu", 8, repeat=0, models_at_once=k)
    x, y, t = batch(n=48, seed=1)
    perm = torch.randperm(48, generator=torch.Generator().manual_seed(2))
    items = list(mode.epoch({"x": x, "y": y, "t": t}, perm))
    mode.setup(items[0])  # must not train
    for item in items:
        mode.step(item)
    got = {n: torch.as_tensor(v).double() for n, v in mode.params().items()}
    ref_batches = [(x[perm[i : i + 8]], y[perm[i : i + 8]], t[perm[i : i + 8]]) for i in range(0, 48, 8)]
    seed = runner.seed_of(cfg, 0)
    starts = [nets.initial_state(s, seed + i) for i in range(k)]
    assert len({float(st[next(iter(st))].sum()) for st in starts}) == k  # each copy its own weights
    for i, start in enumerate(starts):
        if s.network.family:
            ref = reference_training(start, ref_batches, loss, lr)
        else:
            ref = module_reference(s, start, ref_batches, lr)
        assert set(ref) >= set(got)
        for n in got:
            copy = got[n][i] if k > 1 else got[n]
            assert copy.shape == start[n].shape
            torch.testing.assert_close(copy, ref[n].double(), **TOL, msg=f"{name} copy {i} of {k}: {n}")
        assert any(not torch.equal(got[n][i] if k > 1 else got[n], start[n].double()) for n in got)


def test_a_mode_that_takes_no_k_says_why():
    s = networks.build(trainer.DEFAULTS, SEED)
    one = [m for m, info in catalog.MODES.items() if info.one_at_a_time]
    assert "kernel" in one and "seed" in one
    for m in one:
        why = catalog.why_not_many(m, 16)
        assert why and m in why and "models_at_once" in why
        assert catalog.why_not_many(m, 1) is None
    with pytest.raises(runner.Unsupported, match="models_at_once"):
        runner.build(trainer.DEFAULTS, s, "seed", "cpu", 8, models_at_once=3)


# --- the answer: where K copies on an accelerator beat K on the cpu --------------------------------
KS_GRID = (1, 4, 16, 64, 256)


def many_runs(devices=("cpu", "cuda")) -> pd.DataFrame:
    """Synthetic runs of K copies (step = a + b·batch·K): the cpu's fixed cost is small and each
    copy costs it 2 µs a sample; cuda's fixed cost is 60 µs and a copy costs it nearly nothing. At
    batch 1 the cpu's best trains K / (5 + 2K) copies per µs, cuda's K / (60 + 0.01K): cuda loses
    at K = 16 (0.27 against 0.43) and wins from K = 64 (1.06 against 0.48)."""
    truth = {("cpu", "manual"): (5.0, 2.0), ("cpu", "module"): (20.0, 2.0), ("cuda", "module"): (60.0, 0.01)}
    return synthetic_runs({k: v for k, v in truth.items() if k[0] in devices}, sizes=(1, 64), models_at_once=KS_GRID)


def test_the_words_name_the_k_from_which_the_accelerator_wins():
    tables, found = analyse(many_runs())
    m = tables["many"]
    assert set(m["models_at_once"]) == set(KS_GRID) and set(m["batch_size"]) == {1, 64}
    # The other tables compare one model at a time: K > 1 never reaches them.
    assert set(tables["rates"]["batch_size"]) == {1, 64} and len(tables["rates"]) == 3 * 2
    [fact] = found["many"]
    text = words.say(fact)
    assert text.startswith("256 copies of mlp-16-16 at batch 1 on h1: the cpu's best mode (manual) trains")
    assert "cuda's best mode beats the cpu's best from K = 64 (module: against the cpu's best there " in text, text
    r = m[
        (m["device"] == "cpu") & (m["mode"] == "manual") & (m["batch_size"] == 1) & (m["models_at_once"] == 256)
    ].iloc[0]
    # model-samples/s = K × each copy's rate; over one at a time = that over the same mode at K = 1
    assert r["model_samples_per_s"] == pytest.approx(256 * r["samples_per_s"])
    assert r["over_one"] == pytest.approx(256 / (5 + 2 * 256) / (1 / 7), rel=0.1)
    assert r["model_samples_per_s_lo"] < r["model_samples_per_s"] < r["model_samples_per_s_hi"]
    assert text in words.summary_md(found)
    assert words.title(found, "many") == text


def test_on_a_cpu_only_machine_the_words_say_no_accelerator_ran():
    tables, found = analyse(many_runs(devices=("cpu",)))
    [fact] = found["many"]
    assert words.say(fact).endswith("No accelerator ran: this is the cpu's side only.")


def test_without_k_the_report_has_no_many_section():
    tables, found = analyse(synthetic_runs({("cpu", "manual"): (5.0, 2.0)}))
    assert tables["many"].empty and found["many"] == []
    assert "Many models" not in words.summary_md(found)


# --- the pipeline -----------------------------------------------------------------------------------


@pytest.mark.slow
def test_the_pipeline_trains_k_copies_and_lists_the_modes_that_take_one(mirror, prepared):
    """K is an axis of the grid: in the run's file name, its row, the summary's keys, the many
    table, figure and sentence; a mode that takes one network per step is left out at K > 1 with
    its reason, and runs at K = 1 as always."""
    url, md5 = mirror
    cfg = tiny_config(
        url, md5, devices=["cpu"], modes=["manual", "dataloader"], batch_sizes=[8], models_at_once=[1, 3], repeats=2
    )
    snakemake(prepared, cfg)
    runs = pd.read_csv(prepared / "results/summary/runs.csv")
    assert sorted(zip(runs["mode"], runs["models_at_once"])) == sorted(
        [("manual", 1), ("manual", 3), ("dataloader", 1)] * 2
    )
    assert (runs["status"] == "ok").all(), runs[["mode", "status", "message"]]
    assert (prepared / "results/runs/cpu/mlp-16-16/manual/bs8/k3-r1.csv").is_file()
    assert (prepared / "results/runs/cpu/mlp-16-16/manual/bs8/r1.csv").is_file()
    left = pd.read_csv(prepared / "results/summary/left_out.csv")
    [row] = left[left["mode"] == "dataloader"].to_dict("records")
    assert row["models_at_once"] == 3 and row["reason"] == catalog.why_not_many("dataloader", 3)
    summary = pd.read_csv(prepared / "results/summary/summary.csv")
    assert sorted(summary["models_at_once"]) == [1, 1, 3]
    m = pd.read_csv(prepared / "results/summary/many.csv")
    [k3] = m[m["models_at_once"] == 3].to_dict("records")
    assert k3["mode"] == "manual" and k3["model_samples_per_s"] == pytest.approx(3 * k3["samples_per_s"])
    text = (prepared / "results/summary.md").read_text()
    assert "## Many models at once\n\n- 3 copies of mlp-16-16 at batch 8 on " in text
    assert "No accelerator ran: this is the cpu's side only." in text
    # The ladder compares one model at a time: its rows are the K = 1 runs'.
    ladder = pd.read_csv(prepared / "results/summary/ladder.csv")
    assert set(ladder["mode"]) == {"manual", "dataloader"}
    assert (prepared / "results/figures/many.png").stat().st_size > 0
