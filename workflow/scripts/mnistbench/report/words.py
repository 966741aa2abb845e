"""The words of the report: every fact (facts.py) phrased by the one template macro its `kind` names
(templates/facts.j2), and the documents laid out from them: results/summary.md (summary.md.j2) and the
report's pages, the workflow page and the text beside each figure (pages.rst.j2)."""

import functools
import re
from pathlib import Path

import jinja2
import pandas as pd

from mnistbench.config import catalog
from mnistbench.report import numbers

TEMPLATES = Path(__file__).with_name("templates")


@functools.cache
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        undefined=jinja2.StrictUndefined,  # a fact without a field it needs is an error, not a blank
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    for name, fmt in numbers.FORMATS.items():
        # `x|rate`: a number, with its interval where it has one (numbers.num); `x|ci_rate`: the interval
        env.filters[name] = lambda n, *args, fmt=fmt: numbers.with_interval(n, lambda v: fmt(v, *args))
        env.filters[f"ci_{name}"] = lambda n, fmt=fmt: numbers.interval(n, fmt)
    env.filters["say"] = say
    env.filters["say_as"] = lambda row, kind: say(dict(row, kind=kind))
    env.filters["sentences"] = sentences
    env.globals["bullets"] = bullets
    env.filters["table"] = table
    env.globals["isnan"] = lambda x: x is None or x != x
    return env


def say(fact: dict) -> str:
    """One fact in words: its kind's macro, its whitespace as in a sentence."""
    macro = getattr(environment().get_template("facts.j2").module, fact["kind"])
    return " ".join(macro(fact).split())


def sentences(facts) -> list[str]:
    """Facts, or bullets of facts (a list of them said together), as sentences."""
    return [" ".join(say(f) for f in item) if isinstance(item, list) else say(item) for item in facts]


def bullets(facts, label: str = "", kind: str = "") -> str:
    """Facts as a list, a sentence a line, after `label`; `kind` phrases rows of a table, which carry none."""
    facts = [dict(f, kind=kind) for f in facts] if kind else facts
    return "".join(f"- {label + ': ' if label else ''}{s}\n" for s in sentences(facts))


def table(df: pd.DataFrame, columns, fmt: str = "rst") -> str:
    """A table, by pandas (its tabulate output; reStructuredText for the report): `columns` lists
    the keys, or maps each to [header, how a cell is written]: a number format of numbers.py (with
    the interval of the `_lo`/`_hi` columns beside it where the table has them), or "say:<kind>"
    for a fact's macro. "" where the table is empty."""
    if df is None or df.empty:
        return ""
    spec = columns if isinstance(columns, dict) else {c: [c, ""] for c in columns}
    rows = []
    for r in df.to_dict("records"):
        cells = {}
        for key, (header, how) in spec.items():
            v = r.get(key)
            if how.startswith("say:"):
                cells[header] = say(dict(r, kind=how[4:]))
            elif how:
                n = numbers.num(v, r.get(f"{key}_lo"), r.get(f"{key}_hi")) if f"{key}_lo" in r else v
                cells[header] = numbers.with_interval(n, numbers.FORMATS[how])
            else:
                cells[header] = "–" if v is None or v != v or v == "" else str(v)
        rows.append(cells)
    return pd.DataFrame(rows).to_markdown(index=False, tablefmt=fmt) + "\n"


def tidy(text: str) -> str:
    """One blank line between blocks (the templates' conditional blocks leave more), one newline at the end."""
    return re.sub(r"\n{3,}", "\n\n", text).strip("\n") + "\n"


def summary_md(facts: dict) -> str:
    return tidy(environment().get_template("summary.md.j2").render(f=facts))


def pages(facts: dict, tables: dict) -> dict:
    """{name: rst}: `answer` for the workflow page, and the words beside each figure (catalog.FIGURES)."""
    module = environment().get_template("pages.rst.j2").module
    out = {}
    for name in ["answer", *catalog.FIGURES]:
        macro = getattr(module, name, None)
        if macro is None:
            raise KeyError(f"templates/pages.rst.j2 writes no page for the figure {name}: add one")
        out[name] = tidy(str(macro(facts, tables)))
    return out


def title(facts: dict, figure: str) -> str:
    """A figure's title: the first fact beside it (its page's), else what the figure shows."""
    first = facts.get("pages", {}).get(figure, [])
    return say(first[0]) if first else catalog.FIGURES[figure].content.capitalize()
