"""Bad input stops the run with one clear line naming the cause and the fix, and leaves no output."""

import pytest
import torch
from conftest import closed_port, snakemake, tiny_config
from mnistbench import BenchError
from mnistbench.data import download, preload, synthetic

DOWNLOADED = "results/data/MNIST/raw"


def no_output(wd):
    raw = wd / DOWNLOADED
    return not raw.exists() or not any(p for p in raw.iterdir())


def error_lines(proc):
    """The distinct 'error: ...' lines the job wrote (Snakemake may echo its log once more)."""
    return sorted({line for line in proc.stderr.splitlines() if line.startswith("error:")})


def test_wrong_checksum_names_file_mirror_and_key(mirror, tmp_path):
    url, md5 = mirror
    bad = dict(md5, **{"t10k-labels-idx1-ubyte.gz": "0" * 32})
    proc = snakemake(tmp_path, tiny_config(url, bad), "download_mnist", check=False)
    assert proc.returncode != 0
    (line,) = error_lines(proc)
    assert "t10k-labels-idx1-ubyte.gz" in line and url in line and "md5" in line and "mnist.md5" in line
    assert no_output(tmp_path)


def test_unreachable_mirror_lists_every_mirror_tried(mirror, tmp_path):
    url, md5 = mirror
    dead = [f"http://127.0.0.1:{closed_port()}/mnist/", f"file://{tmp_path}/nothing-here/"]
    proc = snakemake(tmp_path, tiny_config(url, md5, mnist=dict(mirrors=dead, md5=md5)), "download_mnist", check=False)
    assert proc.returncode != 0
    (line,) = error_lines(proc)
    assert all(m in line for m in dead) and "mnist.mirrors" in line and "train-images-idx3-ubyte.gz" in line
    assert no_output(tmp_path)


def test_file_mirror_and_second_mirror_fallback(mirror, tmp_path):
    """A dead first mirror falls through to a working file:// one, and the files verify."""
    _, md5 = mirror
    folder = tmp_path / "m"
    md5 = synthetic.write(folder, n_train=50, n_test=20)
    download.download(
        tmp_path / "d", [f"http://127.0.0.1:{closed_port()}/", f"file://{folder}/"], md5, log=lambda m: None
    )
    t = preload.load_raw(tmp_path / "d")
    assert t["train_x"].shape == (50, 784) and t["test_y"].shape == (20,)
    assert t["train_x"].dtype == torch.float32 and 0.0 <= t["train_x"].min() and t["train_x"].max() <= 1.0


def test_corrupt_raw_file_is_a_clear_error(mirror, tmp_path):
    _, md5 = mirror
    folder = tmp_path / "m"
    md5 = synthetic.write(folder, n_train=50, n_test=20)
    download.download(tmp_path / "d", [f"file://{folder}/"], md5, log=lambda m: None)
    raw = tmp_path / "d/MNIST/raw/train-images-idx3-ubyte"
    raw.write_bytes(raw.read_bytes()[:1000])
    with pytest.raises(BenchError, match="missing or corrupt.*download_mnist"):
        preload.load_raw(tmp_path / "d")


@pytest.mark.parametrize(
    "override, key",
    [
        (dict(modes=["manual", "warp_drive"]), "warp_drive"),
        (dict(batch_sizes=[0, 8]), "batch_sizes"),
        (dict(devices=["cpu", "tpu"]), "devices"),
        (dict(repeats=0), "repeats"),
        (dict(training=dict(loss="hinge")), "hinge"),
    ],
)
def test_schema_rejects_bad_values(mirror, tmp_path, override, key):
    url, md5 = mirror
    proc = snakemake(tmp_path, tiny_config(url, md5, **override), "-n", check=False)
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    (line,) = [ln for ln in out.splitlines() if ln.startswith("config key `")]
    assert key in line and "fix it in your config file" in line
    assert not (tmp_path / "results").exists()


def test_command_line_lists_keep_their_types(mirror, tmp_path):
    """`--config batch_sizes=[8,64]` reaches the workflow as numbers, not strings."""
    url, md5 = mirror
    args = ["-n", "--config", "batch_sizes=[8,64]", "training={lr: 0.25}", "modes=[manual]"]
    proc = snakemake(tmp_path, tiny_config(url, md5), *args)
    assert "results/runs/cpu/mlp-16-16/manual/bs64/r0.csv" in proc.stdout


@pytest.mark.skipif(torch.cuda.is_available(), reason="this host has CUDA")
def test_absent_device_is_an_error_before_any_job(mirror, tmp_path):
    url, md5 = mirror
    proc = snakemake(tmp_path, tiny_config(url, md5, devices=["cpu", "cuda"]), check=False)
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    assert "CUDA not available" in out and "devices" in out
    assert not (tmp_path / "results").exists()


def config_lines(proc):
    return [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.startswith(("config key `", "config file "))]


def test_an_unknown_key_gets_the_closest_known_one(mirror, tmp_path):
    url, md5 = mirror
    proc = snakemake(tmp_path, tiny_config(url, md5, batch_size=[8]), "-n", check=False)
    assert proc.returncode != 0
    (line,) = config_lines(proc)
    assert line.startswith("config key `batch_size` is unknown (did you mean `batch_sizes`?)")
    assert "fix it in your config file" in line
    cfg = tiny_config(url, md5, training=dict(lrr=0.1))  # a nested key names its object
    (line,) = config_lines(snakemake(tmp_path, cfg, "-n", check=False))
    assert "`training.lrr` is unknown (did you mean `training.lr`?)" in line
    assert not (tmp_path / "results").exists()


@pytest.mark.parametrize(
    "entry, hint",
    [
        ("MLP-16-16", "did you mean mlp-16-16?"),
        ("mlp_16_16", "did you mean mlp-16-16?"),
        ("mlp-abc", "a network of the family names its hidden layers' widths in whole units, e.g. mlp-16-16"),
        ("net.py", "name the module's class after a colon, e.g. net.py:Net"),
    ],
)
def test_a_malformed_network_gets_the_known_forms_and_what_it_meant(mirror, tmp_path, entry, hint):
    url, md5 = mirror
    proc = snakemake(tmp_path, tiny_config(url, md5, models=["mlp-8", entry]), "-n", check=False)
    assert proc.returncode != 0
    (line,) = config_lines(proc)
    assert line.startswith(f"config key `models`: {entry}: {hint}"), line
    assert "the known forms are mlp-<width>-<width>-... (e.g. mlp-16-16) and path/to/file.py:Class" in line
    assert not (tmp_path / "results").exists()


@pytest.mark.parametrize(
    "text, why",
    [("epochs: [1\n  foo: : :\n", "is not YAML (line 2)"), ("- 1\n- 2\n", "is not a mapping of config keys")],
)
def test_a_config_file_that_is_not_yaml_is_named(mirror, tmp_path, text, why):
    """The workflow's config file (config/config.yaml of the working directory), broken."""
    url, md5 = mirror
    (tmp_path / "config").mkdir()
    (tmp_path / "config/config.yaml").write_text(text)
    proc = snakemake(tmp_path, tiny_config(url, md5), "-n", check=False)
    assert proc.returncode != 0
    (line,) = config_lines(proc)
    assert line.startswith(f"config file config/config.yaml {why}")
    assert not (tmp_path / "results").exists()


def test_a_batch_larger_than_train_samples_is_refused_before_any_job(mirror, tmp_path):
    url, md5 = mirror
    proc = snakemake(tmp_path, tiny_config(url, md5, train_samples=100, batch_sizes=[8, 128, 512]), check=False)
    assert proc.returncode != 0
    (line,) = config_lines(proc)
    assert line == (
        "config key `batch_sizes`: batch size 128, 512 is larger than train_samples = 100, so a run would "
        "train no whole batch: lower the batch size to at most 100 or raise train_samples (at most 60000); "
        "fix it in your config file or --config"
    )
    assert not (tmp_path / "results").exists() and not (tmp_path / "logs").exists()
