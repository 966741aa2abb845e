"""The network as an axis: the family's names and bounds, a user's own module through the
pipeline (and five that cannot be trained, each one line), the modes each network can take, and
a setting added to the schema alone (rerun, merge refused, a mode that does not implement it left
out with the reason)."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

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
        ("mlp16", "did you mean mlp-16"),
        ("net.py", "name the module's class after a colon, e.g. net.py:Net"),
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


HELPER_NET = (
    "import torch.nn as nn\nfrom helper import make\n\n\nclass Net(nn.Module):\n    def __init__(self):\n"
    "        super().__init__()\n        self.body = make()\n\n    def forward(self, x):\n        return self.body(x)\n"
)


def helper_code(width: int) -> str:
    return (
        "import torch.nn as nn\nfrom parts.layers import head\n\n\ndef make():\n"
        f"    return nn.Sequential(nn.Linear(784, {width}), nn.ReLU(), head({width}))\n"
    )


def write_helper_net(folder, width: int = 24):
    """A module that imports a helper beside it, which imports a package of the same folder."""
    (folder / "parts").mkdir(parents=True, exist_ok=True)
    (folder / "net2.py").write_text(HELPER_NET)
    (folder / "helper.py").write_text(helper_code(width))
    (folder / "parts/__init__.py").write_text("")
    (folder / "parts/layers.py").write_text("import torch.nn as nn\n\n\ndef head(w):\n    return nn.Linear(w, 10)\n")


def test_a_users_module_depends_on_the_files_of_its_folder_it_imports(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_helper_net(tmp_path / "sib")
    (tmp_path / "sib/unused.py").write_text("x = 1\n")
    n = networks.network("sib/net2.py:Net")
    names = sorted(str(Path(f).relative_to(tmp_path / "sib")) for f in n.files)
    assert names == ["helper.py", "net2.py", "parts/__init__.py", "parts/layers.py"]
    (tmp_path / "sib/unused.py").write_text("x = 2\n")  # not imported: not what a run depends on
    assert networks.network("sib/net2.py:Net").digest == n.digest
    (tmp_path / "sib/parts/layers.py").write_text("import torch.nn as nn\nhead = lambda w: nn.Linear(w, 10)\n")
    assert networks.network("sib/net2.py:Net").digest != n.digest  # two imports away, still its code


def test_a_users_module_imports_its_own_folders_helpers_from_anywhere(tmp_path, monkeypatch):
    """Two folders with a helper of one name: each network gets its own, in one process (as a warm
    worker serves them) and in a fresh one started elsewhere (as a job without the worker)."""
    write_helper_net(tmp_path / "a", width=24)
    write_helper_net(tmp_path / "b", width=48)
    monkeypatch.chdir(tmp_path / "b")
    widths = [nets.user_module(spec_of(f"{tmp_path / d}/net2.py:Net"), 0).body[0].out_features for d in "ab"]
    assert widths == [24, 48]
    code = (
        "from mnistbench.config import networks; from mnistbench.train import nets, trainer; "
        f"print(nets.user_module(networks.build(trainer.DEFAULTS, '{tmp_path}/a/net2.py:Net'), 0).body[0].out_features)"
    )
    env = dict(os.environ, PYTHONPATH=str(REPO / "workflow/scripts"))
    out = subprocess.run([sys.executable, "-c", code], cwd="/", env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split()[-1] == "24"
    # A third network importing `helper` with none beside it: no other folder's is lent to it,
    # nor a module of one that another network left behind.
    (tmp_path / "c").mkdir()
    (tmp_path / "c/net2.py").write_text(HELPER_NET)
    with pytest.raises(nets.BadModel, match="it imports helper, which is neither a file beside it"):
        nets.user_module(spec_of(f"{tmp_path}/c/net2.py:Net"), 0)
    assert nets.user_module(spec_of(f"{tmp_path}/b/net2.py:Net"), 0).body[0].out_features == 48  # built before
    assert str(tmp_path / "a") not in sys.path and str(tmp_path / "c") not in sys.path
    (tmp_path / "a/hidden.py").write_text(
        HELPER_NET.replace("from helper import make", "import importlib\nmake = importlib.import_module('helper').make")
    )
    with pytest.raises(nets.BadModel, match="in a way its import statements do not show"):
        nets.user_module(spec_of(f"{tmp_path}/a/hidden.py:Net"), 0)  # an edit of helper.py would rerun nothing
    (tmp_path / "a/helper.py").write_text("from nowhere_at_all import make\n")
    with pytest.raises(nets.BadModel) as e:
        nets.user_module(spec_of(f"{tmp_path}/a/net2.py:Net"), 0)
    line = str(e.value)
    assert "\n" not in line and "it imports nowhere_at_all, which is neither a file beside it" in line
    assert f"{tmp_path / 'a'}/nowhere_at_all.py" in line, line


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
    "imports.py": (
        "import no_such_module_anywhere\n",
        "it imports no_such_module_anywhere",
        "add the file, or install",
    ),
    # The helper another network's folder has (sib/ in the pipeline below), not this one's: a
    # warm worker that built that network first must not lend it its helper.
    "orphan.py": (HELPER_NET, "it imports helper, which is neither a file beside it", "add the file, or install"),
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
    write_helper_net(wd / "sib")  # in a subfolder, importing a helper beside it
    names = ["mlp-7-30", "cnn.py:Net", "sib/net2.py:Net", *(f"bad/{n}:Net" for n in BAD)]
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
    sib = runs[runs.model == "sib/net2.py:Net"]
    assert len(sib) == len(cnn) and (sib.status == "ok").all(), sib[["mode", "message"]]
    assert (sib.parameters == 784 * 24 + 24 + 24 * 10 + 10).all()  # the helper's width
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
        "- sib/net2.py:Net",
        "- cnn.py:Net",
    ]
    assert "no accelerator ran" in per_network


@pytest.mark.parametrize("edited", ["cnn.py", "sib/helper.py"])
def test_a_users_module_file_is_what_its_runs_depend_on(user_run, edited):
    """An edit of the file, or of a helper it imports, retimes its runs (and the profile), nothing else."""
    wd, cfg, _ = user_run
    assert jobs(snakemake(wd, cfg, "-n")) == []
    path = wd / edited
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
    # Up to the tables it reads (aggregate's): the analysis and figures after them add nothing here.
    summary = ["results/summary/runs.csv", "results/summary/left_out.csv"]
    snakemake(wd, cfg, *summary, repo=repo)
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
    snakemake(fresh, cfg, *summary, "--config", *changed, repo=repo)
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


BATCHNORM = (
    "import torch.nn as nn\n\n\nclass Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
    "        self.body = nn.Sequential(nn.Linear(784, 64), nn.BatchNorm1d(64), nn.ReLU(), nn.Linear(64, 10))\n\n"
    "    def forward(self, x):\n        return self.body(x)\n"
)


def test_a_network_that_cannot_train_at_a_batch_size_is_a_row_and_the_rest_goes_on(tmp_path):
    """BatchNorm at batch 1 (no batch statistics): the run and the profiled step are rows naming
    the file, the batch size, the cause and the fix; batch 8 of the same network trains."""
    from mnistbench.data import download, preload, synthetic
    from mnistbench.train import profiling

    md5 = synthetic.write(tmp_path / "m", n_train=64, n_test=16)
    download.download(tmp_path / "d", [f"file://{tmp_path}/m/"], md5, log=lambda m: None)
    preload.save_tensors(preload.load_raw(tmp_path / "d"), tmp_path / "t.pt")
    (tmp_path / "bn.py").write_text(BATCHNORM)
    net = f"{tmp_path}/bn.py:Net"
    cfg = dict(trainer.DEFAULTS, min_timed_s=0, train_samples=64, test_samples=16, warmup_steps=1, epochs=1, retime=0)
    quiet = dict(log=lambda m: None)
    rows = {b: trainer.train(cfg, tmp_path / "t.pt", "cpu", net, "module", b, 0, **quiet)[0] for b in (1, 8)}
    assert rows[8]["status"] == "ok", rows[8]["message"]
    line = rows[1]["message"]
    assert rows[1]["status"] == "bad_model" and "\n" not in line, line
    for part in (str(tmp_path / "bn.py"), "at batch size 1", "no batch statistics", "drop 1 from `batch_sizes`"):
        assert part in line, line
    prof = profiling.profile_device(
        cfg, tmp_path / "t.pt", "cpu", [net], ["module"], [1, 8], steps=2, warmup=1, **quiet
    )
    assert {r["batch_size"]: r["status"] for r in prof} == {1: "bad_model", 8: "ok"}
    assert "no batch statistics" in prof[0]["message"]


CONSTANT = (
    "import torch.nn as nn\n\n\nclass Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
    "        self.fc = nn.Linear(784, 10)\n\n    def forward(self, x):\n        return self.fc(x * 0)\n"
)


def test_a_run_that_learns_nothing_is_flagged_in_its_row_and_the_summary(tmp_path):
    """A network whose output ignores its input (one class for every image) is timed like any
    other, and its row and summary.md say that its accuracy is chance."""
    from mnistbench.data import download, preload, synthetic
    from mnistbench.report import pages, summary, words

    md5 = synthetic.write(tmp_path / "m", n_train=600, n_test=200)
    download.download(tmp_path / "d", [f"file://{tmp_path}/m/"], md5, log=lambda m: None)
    preload.save_tensors(preload.load_raw(tmp_path / "d"), tmp_path / "t.pt")
    (tmp_path / "const.py").write_text(CONSTANT)
    cfg = dict(trainer.DEFAULTS, min_timed_s=0, train_samples=600, test_samples=200, warmup_steps=1, epochs=2, retime=0)
    quiet = dict(log=lambda m: None)
    net = f"{tmp_path}/const.py:Net"
    rows = [trainer.train(cfg, tmp_path / "t.pt", "cpu", n, "module", 8, 0, **quiet)[0] for n in (net, "mlp-16-16")]
    const, mlp = rows
    assert const["status"] == "ok" and const["test_accuracy"] <= const["chance_accuracy"], const
    assert "is chance (at most" in const["message"] and "its timing stands" in const["message"]
    assert "chance" not in mlp["message"]
    runs = pd.DataFrame(rows).assign(quality="ok")
    assert [(f["network"], f["modes"]) for f in pages.at_chance(runs)] == [(net, ["module"])]
    empty = pd.DataFrame(columns=["host", "device", "memory", "bytes", "seconds"])
    _, found = summary.analyse(runs, empty, pd.DataFrame(columns=["host", "mode", "status"]), pd.DataFrame(), cfg)
    (line,) = [ln for ln in words.sentences(found["notes"]) if "chance" in ln]
    assert f"{net} at batch 8: 1 run (module) ended at chance test accuracy" in line
    assert "lower training.lr or raise the batch size" in line and "mlp-16-16" not in line


def test_the_accuracy_page_says_when_equal_modes_diverge_by_chaos():
    """Modes that train the same function, further apart in accuracy than the test set's noise
    (three standard errors of an accuracy on 2000 images: ~0.03 here), are said to diverge by
    chaos at that learning rate; closer ones are not."""
    from mnistbench.report import pages, words

    def runs(accs):
        return pd.DataFrame(
            [
                dict(
                    host="vm",
                    device="cpu",
                    model=SEED,
                    mode=m,
                    batch_size=1,
                    repeat=r,
                    status="ok",
                    quality="ok",
                    test_accuracy=a + 0.001 * r,
                    time_to_target_s=None,
                    chance_accuracy=0.13,
                )  # fmt: skip
                for m, a in accs.items()
                for r in range(3)
            ]
        )

    facts = pages.accuracy(runs({"module": 0.30, "kernel": 0.47, "manual": 0.41}), 0.9, 0.5, 2000)
    (chaos,) = [f for f in facts if f["kind"] == "chaos"]
    line = words.say(chaos)
    assert (
        "mlp-16-16 at batch 1 and lr 0.5: the modes end at test accuracies from 0.301 (module) to 0.471 (kernel)"
        in line
    )
    assert "chaos" in line and "not a mode's error" in line
    close = pages.accuracy(runs({"module": 0.900, "kernel": 0.905, "manual": 0.902}), 0.9, 0.5, 2000)
    assert [f["kind"] for f in close] == ["accuracy"]


def test_a_module_with_a_helper_trains_from_a_subfolder_without_the_worker(mirror, prepared):
    """warm_worker: false, each run in its own process started by its job: the helper beside the
    module is found there too (the worker's case is the shared pipeline above)."""
    url, md5 = mirror
    write_helper_net(prepared / "sib")
    cfg = tiny_config(url, md5, devices=["cpu"], models=["sib/net2.py:Net"], modes=["module"], batch_sizes=[64])
    snakemake(prepared, dict(cfg, warm_worker=False), "results/runs/cpu/net2-Net/module/bs64/r0.csv")
    row = pd.read_csv(prepared / "results/runs/cpu/net2-Net/module/bs64/r0.csv").iloc[0]
    assert row["status"] == "ok" and row["parameters"] == 784 * 24 + 24 + 24 * 10 + 10, row["message"]
