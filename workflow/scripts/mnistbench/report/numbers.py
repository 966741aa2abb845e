"""Numbers as the report writes them, each kind in one function: the templates' filters and the
figures' labels. A number with an interval is a dict {"v": value, "lo": low, "hi": high} (num()); a
plain float has none and is written alone.
"""

import math
import re

from matplotlib.ticker import EngFormatter

ENG = EngFormatter(sep=" ")  # 12.3 k, 3.57 M: SI prefixes, matplotlib's rule for choosing them
TICK = EngFormatter(sep="")  # 1k, 20k, 1M: the same prefixes, tight for an axis
PREFIXES = set(ENG.ENG_PREFIXES.values()) - {""}  # k, M, G ... (not the empty one of plain numbers)
NONE = " (no interval: one usable run)"


def num(v, lo=math.nan, hi=math.nan) -> dict:
    """A number and its 95 % interval, as the facts hand them to the words."""
    return {"v": _float(v), "lo": _float(lo), "hi": _float(hi)}


def at(r, key: str) -> dict:
    """A table's number and its interval (the `_lo`/`_hi` columns beside it)."""
    return num(r.get(key), r.get(f"{key}_lo"), r.get(f"{key}_hi"))


def ratio(r, column: str = "speedup") -> dict:
    """A factor of a table with its interval, and whether that interval holds 1 (the same within
    noise), as facts.j2's `ratio` macro says it."""
    lo, hi = _float(r.get(f"{column}_lo")), _float(r.get(f"{column}_hi"))
    return dict(speedup=at(r, column), same=bool(lo <= 1 <= hi))


def _float(x) -> float:
    try:
        return float(x)
    except (TypeError, ValueError):
        return math.nan


def _finite(x) -> bool:
    return math.isfinite(_float(x))


def us(x) -> str:
    """A duration given in µs: '0.42 µs', '35 µs', '1.2 ms'."""
    if not _finite(x):
        return "n/a"
    if x >= 1000:
        return f"{x / 1000:.3g} ms"
    return f"{x:.2g} µs" if x < 10 else f"{x:.0f} µs"


def pct(x, digits=0) -> str:
    return f"{100 * x:.{digits}f} %" if _finite(x) else "n/a"


def bs(x) -> str:
    """A batch size: '4,096'."""
    return f"{x:,.0f}" if _finite(x) else "n/a"


def grid(x) -> str:
    """A batch size of the grid from which something holds: '4,096', or 'never' (at none)."""
    return "never" if _float(x) == math.inf else bs(x)


def rate(x) -> str:
    """Samples per second to 3 significant digits, SI prefix: '850', '12.3 k', '3.57 M'."""
    if not _finite(x):
        return "n/a"
    x = float(f"{x:.3g}")  # rounded first, so that 999.6 reads '1 k', not '1e+03'
    return ENG(x) if x >= 1 else f"{x:g}"  # below 1: '0.5', not '500 m'


def times(x) -> str:
    """A factor: '18×', '2.8×', '0.31×'."""
    return "n/a" if not _finite(x) else f"{x:.2g}×" if x < 10 else f"{x:.0f}×"


def tick(v, _=None) -> str:
    """An axis label: 1k, 20k, 1M, 0.5, 3 (plain numbers below 1)."""
    return TICK(v) if v >= 1 else f"{v:g}"


def flop(x) -> str:
    """FLOP: '52.7 kFLOP', '900 FLOP'."""
    if not _finite(x):
        return "n/a FLOP"
    text = rate(x)
    return f"{text}FLOP" if text[-1].isalpha() else f"{text} FLOP"


def gbps(x) -> str:
    return f"{x:.3g} GB/s" if _finite(x) else "n/a"


def mb(x) -> str:
    return f"{x / 1e6:.3g} MB" if _finite(x) else "n/a"


def count(x) -> str:
    return f"{x:.0f}" if _finite(x) else "n/a"


def _unit(text: str) -> str:
    """What follows the number: '218×' -> '×', '1.2 M' -> ' M', '35 µs' -> ' µs', '926' -> ''."""
    return re.sub(r"^[-0-9.,e+]+", "", text)


def with_interval(n, fmt) -> str:
    """'231× (218–245×)': a number and its interval, the unit written once where both ends share
    it; where a number has none (one usable run), it says so; a plain float is written alone."""
    if not isinstance(n, dict):
        return fmt(n)
    text = fmt(n["v"])
    lo, hi = _float(n.get("lo")), _float(n.get("hi"))
    if math.isnan(lo) or math.isnan(hi):
        return text + NONE
    low, high = fmt(lo), fmt(hi) if _finite(hi) or fmt is grid else "∞"
    if _unit(low) == "" and _unit(high).strip() in PREFIXES and _finite(lo) and _finite(hi):
        low = f"{lo / 10 ** (3 * math.floor(math.log10(abs(hi)) / 3)):.3g}"  # '0.0543–577 k', never '54.3–577 k'
    elif _unit(low) == _unit(high) and fmt is not grid:  # '218–245×', '4.58–4.94 k': the unit once
        low = low.removesuffix(_unit(low))
    return f"{text} ({low}–{high})"


def interval(n, fmt) -> str:
    """Only the interval of a number, as with_interval writes it after the number: ' (218–245×)'."""
    return with_interval(n, fmt).removeprefix(fmt(n["v"]))


FORMATS = {f.__name__: f for f in (us, pct, bs, grid, rate, times, flop, gbps, mb, count)}
