"""The network as an axis: the family's names and bounds, a user's own module through the
pipeline (and five that cannot be trained, each one line), the modes each network can take, and
a setting added to the schema alone (rerun, merge refused, a mode that does not implement it left
out with the reason)."""

import shutil

import pandas as pd
import pytest
import yaml
from conftest import REPO, copy_repo, job_stats, jobs, snakemake, tiny_config, with_data
from mnistbench.config import catalog, networks
from mnistbench.train import needs, nets, trainer

SEED = "mlp-16-16"


def spec_of(network, **settings) -> networks.Spec:
    return networks.build(dict(trainer.DEFAULTS, training=dict(trainer.DEFAULTS["training"], **settings)), network)


# --- names and bounds -------------------------------------------------------------------------------


def test_the_family_is_named_by_its_widths_and_bounded():
    n = networks.network("mlp-17-33-5-64")
    assert n.family and n.sizes == (784, 17, 33, 5, 64, 10) and n.layers == 5 and n.slug == "mlp-17-33-5-64"
    assert n.parameters() == sum(a * b + b for a, b in zip(n.sizes, n.sizes[1:]))
    assert networks.network(SEED).flop_per_sample() == 52_672 and networks.network(SEED).parameters() == 13_002
    for bad, why in [
        ("mlp-0", "1 to 4096 units"),
        ("mlp-4097", "1 to 4096 units"),
        ("mlp-" + "-".join(["8"] * 9), "1 to 8 hidden layers"),
        ("mlp16", "not mlp-<width>"),
        ("net.py", "not mlp-<width>"),
    ]:
        with pytest.raises(networks.BadNetwork, match=why):
            networks.network(bad)


def test_a_users_module_is_found_hashed_and_named_for_its_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "nets").mkdir()
    (tmp_path / "nets/wide.py").write_text("import torch.nn as nn\nNet = nn.Linear\n")
    n = networks.network("nets/wide.py:Net")
    assert not n.family and n.path == str(tmp_path / "nets/wide.py") and n.cls == "Net" and len(n.digest) == 64
    assert n.slug == "wide-Net"
    (tmp_path / "nets/wide.py").write_text("import torch.nn as nn\nNet = nn.Linear  # edited\n")
    assert networks.network("nets/wide.py:Net").digest != n.digest  # its content is what a run depends on
    assert networks.network("gone.py:Net").digest == "missing"
    # The example under config/ is found from any working directory (the workflow's folder).
    assert networks.network("config/cnn.py:Net").path == str(REPO / "config/cnn.py")


# --- what each mode takes ----------------------------------------------------------------------------


def test_each_mode_says_which_networks_it_trains_and_why_not():
    user = spec_of("config/cnn.py:Net")
    for mode, info in catalog.MODES.items():
        why = catalog.why_not_network(mode, user.network)
        assert (why is None) == (info.networks == "any"), (mode, why)
    assert "kernel trains the mlp-... family only, not config/cnn.py:Net" in catalog.why_not_network(
        "kernel", user.network
    )
    wide = networks.network("mlp-32")
    why = catalog.why_not_network("persistent", wide)
    assert why.startswith("persistent trains mlp-16-16 only, not mlp-32") and "registers" in why
    assert catalog.why_not_network("persistent", networks.network(SEED)) is None
    assert catalog.why_not_network("numpy", wide) is None


def test_a_mode_is_left_out_where_a_setting_is_away_from_a_default_it_does_not_implement(monkeypatch):
    """A setting concerns every mode unless the schema says otherwise (x-modes): amp_dtype is
    amp's alone, so bfloat16 leaves every other mode as it is; a setting no mode implements
    leaves every mode out once it is not at its default, naming the setting and the value."""
    assert needs.why_not("module", "cpu", spec_of(SEED, amp_dtype="bfloat16")) is None
    assert needs.why_not("amp", "cpu", spec_of(SEED, amp_dtype="bfloat16")) is None
    settings = dict(catalog.schema.training_options(), momentum=(0.0, None))
    monkeypatch.setattr(catalog.schema, "training_options", lambda: settings)
    s = networks.Spec(networks.network(SEED), dict(spec_of(SEED).training, momentum=0.9))
    assert (
        needs.why_not("module", "cpu", s) == "module does not implement training.momentum = 0.9 (it trains as with 0.0)"
    )
    assert needs.why_not("module", "cpu", networks.Spec(s.network, dict(s.training, momentum=0.0))) is None


# --- a user's module, trained and refused -------------------------------------------------------------

BAD = {
    "imports.py": ("import no_such_module_anywhere\n", "importing it raised ModuleNotFoundError", "python"),
    "noclass.py": ("import torch.nn as nn\nclass Other(nn.Linear):\n    pass\n", "defines no class Net", "Other"),
    "shape.py": (
        "import torch.nn as nn\nclass Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.fc = nn.Linear(784, 5)\n    def forward(self, x):\n        return self.fc(x)\n",
        "returns (2, 5) for a batch of shape (2, 784)",
        "(B, 10) float logits",
    ),
    "noparams.py": (
        "import torch.nn as nn\nclass Net(nn.Module):\n    def forward(self, x):\n        return x[:, :10]\n",
        "has no parameters to train",
        "nn.Linear(784, 10)",
    ),
    "nan.py": (
        "import torch.nn as nn\nclass Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.fc = nn.Linear(784, 10)\n    def forward(self, x):\n        return self.fc(x) * float('nan')\n",
        "its loss is nan before any training",
        "check its forward",
    ),
}


def write_bad(folder):
    folder.mkdir(parents=True, exist_ok=True)
    for name, (code, _, _) in BAD.items():
        (folder / name).write_text(code)


def test_a_module_that_cannot_be_trained_is_one_line_naming_the_file_and_the_fix(tmp_path):
    write_bad(tmp_path)
    for name, (_, cause, fix) in BAD.items():
        s = spec_of(f"{tmp_path / name}:Net")
        with pytest.raises(nets.BadModel) as e:
            nets.initial_state(s, 0)
        line = str(e.value)
        assert "\n" not in line and str(tmp_path / name) in line and cause in line and fix in line, line
    with pytest.raises(nets.BadModel, match="no such file; write it, or correct the path"):
        nets.initial_state(spec_of(f"{tmp_path}/gone.py:Net"), 0)


@pytest.fixture(scope="module")
def user_run(mirror, mnist_data, tmp_path_factory):
    """A pipeline over a network of the family, the example CNN and the five bad files."""
    url, md5 = mirror
    wd = with_data(mnist_data, tmp_path_factory.mktemp("models"))
    write_bad(wd / "bad")
    (wd / "cnn.py").write_text((REPO / "config/cnn.py").read_text())
    names = ["mlp-7-30", "cnn.py:Net", *(f"bad/{n}:Net" for n in BAD)]
    cfg = tiny_config(url, md5, devices=["cpu"], models=names, modes=["manual", "module", "dataloader"])
    cfg["training"] = dict(lr=0.1)  # the CNN's (config/cnn.py)
    proc = snakemake(wd, cfg)
    return wd, cfg, proc


def test_a_users_module_trains_through_the_generic_modes_and_the_rest_goes_on(user_run):
    wd, cfg, _ = user_run
    runs = pd.read_csv(wd / "results/summary/runs.csv")
    cnn = runs[runs.model == "cnn.py:Net"]
    assert set(cnn["mode"]) == {"module", "dataloader"} and (cnn.status == "ok").all(), cnn[["mode", "message"]]
    assert (cnn.test_accuracy > 0.3).all() and cnn.model_digest.str.len().eq(64).all()
    assert (cnn.flop_per_sample > 10 * networks.network("mlp-7-30").flop_per_sample()).all()
    mlp = runs[runs.model == "mlp-7-30"]
    assert set(mlp["mode"]) == set(cfg["modes"]) and (mlp.status == "ok").all()
    left = pd.read_csv(wd / "results/summary/left_out.csv")
    manual = left[left["mode"] == "manual"].set_index("model")
    assert set(manual.index) == {n for n in cfg["models"] if n.endswith(":Net")}
    assert manual.loc["cnn.py:Net", "reason"].startswith("manual trains the mlp-... family only, not cnn.py:Net")


def test_each_bad_module_file_is_one_line_in_its_rows_and_the_summary(user_run):
    wd, _, proc = user_run
    runs = pd.read_csv(wd / "results/summary/runs.csv")
    md = (wd / "results/summary.md").read_text()
    for name, (_, cause, fix) in BAD.items():
        rows = runs[runs.model == f"bad/{name}:Net"]
        assert len(rows) == 4 and (rows.status == "bad_model").all(), rows[["status", "message"]]
        (message,) = set(rows.message)
        assert str(wd / "bad" / name) in message and cause in message and fix in message, message
        assert message in md  # listed where the summary says what was left out
    per_network = md.split("## Per network", 1)[1].split("\n## ", 1)[0]
    assert [ln.split(" (")[0] for ln in per_network.splitlines() if ln.startswith("- ")] == [
        "- mlp-7-30",
        "- cnn.py:Net",
    ]
    assert "no accelerator ran" in per_network


def test_a_users_module_file_is_what_its_runs_depend_on(user_run):
    """An edit of the file retimes its runs (and the profile), nothing else."""
    wd, cfg, _ = user_run
    assert jobs(snakemake(wd, cfg, "-n")) == []
    path = wd / "cnn.py"
    before = path.read_text()
    try:
        path.write_text(before + "\n# an edit\n")
        planned = job_stats(snakemake(wd, cfg, "-n"))
        assert planned["train"] == 2 * len(cfg["batch_sizes"]) and planned["profile"] == 1, planned
    finally:
        path.write_text(before)


def test_two_files_of_one_name_cannot_share_a_results_folder(mirror, tmp_path):
    url, md5 = mirror
    for d in ("a", "b"):
        (tmp_path / d).mkdir()
        shutil.copy(REPO / "config/cnn.py", tmp_path / d / "cnn.py")
    cfg = tiny_config(url, md5, devices=["cpu"], models=["a/cnn.py:Net", "b/cnn.py:Net"])
    proc = snakemake(tmp_path, cfg, "-n", check=False)
    assert proc.returncode != 0
    (line,) = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.startswith("config key `models`")]
    assert "a/cnn.py:Net and b/cnn.py:Net would share the results folder cnn-Net" in line


# --- a setting added to the schema alone ----------------------------------------------------------------


def add_setting(repo, key: str, schema: dict):
    path = repo / "workflow/schemas/config.schema.yaml"
    s = yaml.safe_load(path.read_text())
    s["properties"]["training"]["properties"][key] = schema
    path.write_text(yaml.safe_dump(s, sort_keys=False))


@pytest.mark.slow
def test_a_setting_added_to_the_schema_alone_retimes_refuses_merges_and_leaves_out(mirror, mnist_data, tmp_path):
    """A copy of the workflow whose schema gains training.amp_init_scale (amp's GradScaler's first
    scale: a setting of amp alone, which amp does not implement yet) and nothing else: runs record
    it, a change retimes them, runs made with two values are never summarised together, and amp is
    left out, with that reason, while the value is not its default."""
    url, md5 = mirror
    repo = copy_repo(tmp_path / "repo")
    add_setting(
        repo, "amp_init_scale", {"type": "number", "exclusiveMinimum": 0, "default": 65536.0, "x-modes": ["amp"]}
    )
    cfg = tiny_config(url, md5, devices=["cpu"], modes=["module", "amp"], batch_sizes=[8, 64])
    wd = with_data(mnist_data, tmp_path / "wd")
    snakemake(wd, cfg, repo=repo)
    runs = pd.read_csv(wd / "results/summary/runs.csv")
    assert (
        set(runs["mode"]) == {"module", "amp"}
        and runs.settings.str.contains('"training.amp_init_scale": 65536.0').all()
    )
    changed = ["training={amp_init_scale: 1024}"]
    # A change retimes the runs it concerns: module's; amp is left out of the grid.
    planned = job_stats(snakemake(wd, cfg, "-n", "--config", *changed, repo=repo))
    assert planned["train"] == len(cfg["batch_sizes"]) and planned["profile"] == 1, planned
    # Runs made with two values (a new batch size trained with 1024, the others kept by file times
    # alone) are never summarised together.
    grown = [*changed, "batch_sizes=[8,64,16]"]
    flags = ["--rerun-triggers", "mtime", "--forcerun", "aggregate"]
    proc = snakemake(wd, cfg, "--config", *grown, *flags, repo=repo, check=False)
    assert proc.returncode != 0 and "`training.amp_init_scale` differs" in proc.stderr, proc.stderr[-3000:]
    # amp, which does not implement it, is left out with that reason; module trains with it.
    fresh = with_data(mnist_data, tmp_path / "fresh")
    snakemake(fresh, cfg, "--config", *changed, repo=repo)
    left = pd.read_csv(fresh / "results/summary/left_out.csv")
    (reason,) = left[left["mode"] == "amp"].reason
    assert reason == "amp does not implement training.amp_init_scale = 1024.0 (it trains as with 65536.0)"
    runs = pd.read_csv(fresh / "results/summary/runs.csv")
    assert set(runs["mode"]) == {"module"} and runs.settings.str.contains('"training.amp_init_scale": 1024.0').all()


def test_a_setting_no_mode_implements_stops_a_grid_of_nothing_with_one_line(mirror, tmp_path):
    url, md5 = mirror
    repo = copy_repo(tmp_path / "repo")
    add_setting(repo, "momentum", {"type": "number", "minimum": 0, "default": 0.0})
    cfg = tiny_config(url, md5, devices=["cpu"], modes=["module"], training={"momentum": 0.9})
    proc = snakemake(tmp_path / "wd", cfg, "-n", repo=repo, check=False)
    assert proc.returncode != 0
    (line,) = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.startswith("config key `modes`")]
    assert "module does not implement training.momentum = 0.9 (it trains as with 0.0)" in line, line
