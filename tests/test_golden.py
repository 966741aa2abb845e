"""The report's words from a fixed results folder (tests/golden/summary: a tiny cpu run with a
made-up GPU beside it) stay what tests/golden/expected holds: summary.md, the workflow page and the
text beside every figure. A change of wording shows here as a diff to read; after a deliberate one,
`python tests/test_golden.py` writes the expected files again."""

import sys
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
if __name__ == "__main__":  # run as a script: rewrite the expected files
    sys.path.insert(0, str(HERE.parent / "workflow" / "scripts"))

from mnistbench.config import catalog, schema  # noqa: E402
from mnistbench.report import summary, words  # noqa: E402

SOURCE, EXPECTED = HERE / "golden" / "summary", HERE / "golden" / "expected"


def rendered() -> dict:
    """{file name: text} of the report's words from the fixed tables."""
    t = {name: pd.read_csv(SOURCE / f"{name}.csv") for name in ("runs", "transfer", "profile", "environment")}
    cfg = schema.defaults()
    cfg.update(devices=["cpu", "cuda"], modes=["seed", "manual", "module", "dataloader"], batch_sizes=[1, 16, 64])
    cfg.update(repeats=2, train_samples=256, epochs=2, quality=dict(cfg["quality"], use=["ok", "noisy", "few_steps"]))
    tables, found = summary.analyse(t["runs"], t["transfer"], t["profile"], t["environment"], cfg)
    out = {"summary.md": words.summary_md(found)}
    out.update({f"{name}.rst": text for name, text in words.pages(found, tables).items()})
    return out


def test_the_report_says_what_the_golden_files_say():
    got = rendered()
    assert sorted(got) == sorted(["summary.md", "answer.rst", *(f"{f}.rst" for f in catalog.FIGURES)])
    for name, text in got.items():
        assert text == (EXPECTED / name).read_text(), f"{name} differs from tests/golden/expected/{name}"


if __name__ == "__main__":
    EXPECTED.mkdir(exist_ok=True)
    for name, text in rendered().items():
        (EXPECTED / name).write_text(text)
    print(f"wrote {len(list(EXPECTED.iterdir()))} files under {EXPECTED}")
