"""Display helpers shared by the notebooks: numbers as text and DataFrames as Markdown tables.

Pure formatting (no IPython): notebooks wrap the returned text in ``IPython.display.Markdown``.

    pm(0.1234, 0.0456)        # '+0.123 ± 0.046'
    markdown_table(df)        # numbers to 3 decimals, no negative zero, "–" where undefined
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Mapping
from typing import Any

MISSING = "–"


def r3(x: float) -> float:
    """``x`` rounded to 3 decimals for display, without a negative zero."""
    return round(float(x), 3) + 0.0


def pm(mean: float, se: float | None, signed: bool = True) -> str:
    """``mean ± s.e.`` as text (3 decimals; a sign on the mean when ``signed``); ``–`` for an undefined
    standard error."""
    se_text = MISSING if se is None or (isinstance(se, float) and math.isnan(se)) else f"{r3(se):.3f}"
    return f"{r3(mean):+.3f} ± {se_text}" if signed else f"{r3(mean):.3f} ± {se_text}"


def number(x: float | None, digits: int = 3, signed: bool = False) -> str:
    """``x`` at ``digits`` decimals (a sign when ``signed``), never a negative zero: a value that rounds to
    zero prints as ``0.000`` / ``+0.000`` whatever its sign (``-1e-17`` from a Wilson bound of 0/60
    included); ``–`` for an undefined value."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return MISSING
    return f"{round(float(x), digits) + 0.0:{'+' if signed else ''}.{digits}f}"


def one_row(rows: Any, **match: Any) -> Any:
    """The one row (a mapping) of ``rows`` whose columns equal ``match``; ``ValueError`` saying how many
    matched when that is not exactly one."""
    found = [r for r in rows if all(r[k] == v for k, v in match.items())]
    if len(found) != 1:
        raise ValueError(f"{len(found)} rows match {match}, expected exactly one")
    return found[0]


def interval(low: float, high: float, signed: bool = False, digits: int = 3) -> str:
    """``[low, high]`` as text, each end formatted by ``number`` (no negative zero)."""
    return f"[{number(low, digits, signed)}, {number(high, digits, signed)}]"


def _escape_pipes(df: Any) -> Any:
    """``df`` with ``|`` in text cells escaped (``\\|``): a bare one would end the Markdown cell."""
    return df.map(lambda x: x.replace("|", "\\|") if isinstance(x, str) else x)


def markdown_table(df: Any, floatfmt: str = ".3f", round3: bool = True) -> str:
    """A DataFrame as a Markdown table: with ``round3`` numbers are rounded to 3 decimals (no negative
    zero); undefined cells (NaN/None) print as ``–``; ``|`` in text is escaped."""
    df = _escape_pipes(df.copy())
    if round3:
        numeric = df.select_dtypes("number").columns
        df[numeric] = df[numeric].round(3) + 0.0
    df = df.astype(object).where(df.notna(), None)  # tabulate prints None as missingval
    return df.to_markdown(index=False, floatfmt=floatfmt, missingval=MISSING)


_P_VALUE = re.compile(r"(^|[\s(])p([\s_-]?value)?($|[\s)])", re.IGNORECASE)


def is_p_value_column(name: Any) -> bool:
    """Whether a column holds p-values by its name (``p``, ``sign test p``, ``p-value``, ``p_value``)."""
    return isinstance(name, str) and bool(_P_VALUE.search(name))


def fixed_digits_table(df: Any, digits: int = 3, signed: Collection[str] = ()) -> str:
    """A DataFrame as a Markdown table with every float at ``digits`` decimals (no negative zero), with a
    sign in the ``signed`` columns (differences) and never in a p-value column (``is_p_value_column``:
    naming one in ``signed`` is refused), integers and booleans as they are, ``–`` where undefined;
    strings are never re-parsed as numbers and their ``|`` is escaped. Use it instead of
    ``to_markdown(floatfmt="+.3f")``, which signs every number, p-values and numeric strings included."""
    wrong = [c for c in signed if is_p_value_column(c)]
    if wrong:
        raise ValueError(f"p-value column(s) {wrong} cannot be signed: a p-value has no direction")

    def cell(x: Any, sign: str) -> str:
        if x is None or (isinstance(x, float) and math.isnan(x)):
            return MISSING
        if isinstance(x, bool) or type(x).__name__ == "bool_":
            return str(bool(x))
        if isinstance(x, int) or (hasattr(x, "is_integer") is False and type(x).__name__.startswith("int")):
            return str(int(x))
        if isinstance(x, float) or type(x).__name__.startswith("float"):
            x = float(x)
            if math.isnan(x):
                return MISSING
            return f"{round(x, digits) + 0.0:{sign}.{digits}f}"
        return str(x)

    shown = df.astype(object).copy()
    for i, column in enumerate(shown.columns):  # by position: column names may repeat
        sign = "+" if column in signed else ""
        shown.iloc[:, i] = shown.iloc[:, i].map(lambda x, sign=sign: cell(x, sign))
    return _escape_pipes(shown).to_markdown(index=False, disable_numparse=True)


def rate_with_error(rate: float, se: float | None, exact: bool) -> str:
    """A rate with its Monte Carlo standard error (``0.8012 ± 0.0050``), or marked ``(exact)``."""
    return f"{rate:.4f} (exact)" if exact else f"{rate:.4f} ± {se:.4f}"


def relation(a: float, b: float) -> str:
    """``"below"``, ``"above"`` or ``"equal to"``: how ``a`` compares with ``b``, for findings prose."""
    return "below" if a < b else "above" if a > b else "equal to"


def fixed_digits_markdown(df: Any, digits: int = 3, signed: Collection[str] = ()) -> Any:
    """``fixed_digits_table`` wrapped for notebook display (``IPython.display.Markdown``)."""
    from IPython.display import Markdown

    return Markdown(fixed_digits_table(df, digits, signed))


def format_rate(cell: Mapping[str, Any]) -> str:
    """A design cell's P(noninferior): exact to 4 decimals (or 1 significant digit below 1e-4), a Monte
    Carlo rate with its standard error (``0.812 ± 0.005``)."""
    p = cell["p_noninferior"]
    if not cell["reps"]:
        return f"{p:.4f}" if p >= 1e-4 or p == 0 else f"{p:.1e}"
    return f"{p:.3f} ± {cell['mc_se']:.3f}"
