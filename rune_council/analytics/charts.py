"""The statistics as PNG pictures, drawn with matplotlib's Agg canvas (no display needed).

matplotlib comes with the ``rune-council[analytics]`` extra; without it ``available()`` is
False and ``render`` raises ``PicturesUnavailable`` naming the extra. Figures are built on
their own ``Figure`` objects (never pyplot's global state), so rendering in a server thread
is safe. Names in the pictures come from run files: control characters are removed, long
names cut and ``$`` escaped, so nothing is read as mathtext.
"""

from __future__ import annotations

import functools
import importlib.util
import io
import math
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..core.errors import CouncilError
from ..core.safetext import plain
from .aggregate import Stats

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

EXTRA = "rune-council[analytics]"
INSTALL_HINT = f"pictures need matplotlib: pip install '{EXTRA}'"
DPI = 100
MAX_LABEL = 32

STAMP_COLOURS = {"MULTI_FAMILY": "#2e7d32", "NO_DECORRELATION": "#ef6c00", "none": "#9e9e9e"}


# matplotlib is not thread-safe (its first import least of all: a second thread sees a
# half-initialised module), and the web view draws from a thread pool: one picture at a time.
_DRAWING = threading.RLock()


def _one_at_a_time(draw: Callable[[Stats], bytes]) -> Callable[[Stats], bytes]:
    @functools.wraps(draw)
    def locked(stats: Stats) -> bytes:
        with _DRAWING:
            return draw(stats)

    return locked


class PicturesUnavailable(CouncilError):
    """matplotlib is not installed, so no picture can be drawn."""


def available() -> bool:
    try:
        return importlib.util.find_spec("matplotlib") is not None
    except (ImportError, ValueError):
        return False


def label(text: str) -> str:
    """A name from a run file, safe to hand to matplotlib as text."""
    shown = plain(text).replace("\n", " ")
    if len(shown) > MAX_LABEL:
        shown = shown[: MAX_LABEL - 1] + "…"
    return shown.replace("\\", "\\\\").replace("$", r"\$")


def _figure(width: float, height: float) -> Figure:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=DPI, layout="constrained")


def _png(fig: Figure) -> bytes:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    out = io.BytesIO()
    fig.savefig(out, format="png", dpi=DPI)
    return out.getvalue()


def _empty(ax: Axes, what: str) -> None:
    ax.text(0.5, 0.5, what, ha="center", va="center", transform=ax.transAxes, color="#616161")
    ax.set_xticks([])
    ax.set_yticks([])


@_one_at_a_time
def weekly(stats: Stats) -> bytes:
    """Stamp mix per week as stacked bars; consensus and needs-decision rates as lines."""
    fig = _figure(9, 4.5)
    ax = fig.add_subplot()
    ax.set_title("Runs per week by decorrelation stamp, with consensus and needs-decision rates")
    from matplotlib.ticker import MaxNLocator

    weeks = stats.weeks
    if not weeks:
        _empty(ax, "no runs in the history")
        return _png(fig)
    x = list(range(len(weeks)))
    bottom = [0] * len(weeks)
    for stamp, colour in STAMP_COLOURS.items():
        counts = [w.stamps.get(stamp, 0) for w in weeks]
        if any(counts):
            ax.bar(x, counts, bottom=bottom, color=colour, label=stamp)
            bottom = [b + c for b, c in zip(bottom, counts, strict=True)]
    ax.set_ylabel("complete runs")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xticks(x, [w.week for w in weeks], rotation=45, ha="right")
    rates = ax.twinx()
    rates.set_ylim(0, 1.05)
    rates.set_ylabel("rate")
    consensus = [math.nan if w.consensus_rate is None else w.consensus_rate for w in weeks]
    needs = [math.nan if w.needs_decision_rate is None else w.needs_decision_rate for w in weeks]
    rates.plot(x, consensus, "o-", color="#1565c0", label="consensus rate")
    rates.plot(x, needs, "s--", color="#c62828", label="needs-decision rate")
    handles, names = ax.get_legend_handles_labels()
    more, more_names = rates.get_legend_handles_labels()
    ax.legend(handles + more, names + more_names, loc="upper left", fontsize="small")
    return _png(fig)


def _matrix(ax: Axes, stats: Stats, which: str) -> None:
    families = stats.families
    pairs = stats.agreement if which == "agreement" else stats.dissent
    ax.set_title(
        "Agreed on a verified claim" if which == "agreement" else "Took opposite sides",
        fontsize="medium",
    )
    if len(families) < 2:
        _empty(ax, "fewer than two families answered")
        return
    n = len(families)
    grid = [[math.nan] * n for _ in range(n)]
    where = {f: i for i, f in enumerate(families)}
    for p in pairs:
        i, j = where[p.a], where[p.b]
        value = math.nan if p.rate is None else p.rate
        grid[i][j] = grid[j][i] = value
        ink = "white" if value > 0.6 else "black"
        for a, b in ((i, j), (j, i)):
            ax.text(b, a, f"{p.runs}/{p.runs_both}", ha="center", va="center", color=ink)
    cmap = "Greens" if which == "agreement" else "Reds"
    image = ax.imshow(grid, cmap=cmap, vmin=0, vmax=1)
    names = [label(f) for f in families]
    ax.set_xticks(range(n), names, rotation=45, ha="right")
    ax.set_yticks(range(n), names)
    ax.figure.colorbar(image, ax=ax, shrink=0.8, label="share of runs both answered")


@_one_at_a_time
def matrices(stats: Stats) -> bytes:
    """Family x family: how often two families agreed, and how often they dissented."""
    size = 3.2 + 0.5 * len(stats.families)
    fig = _figure(2 * size + 1, size)
    _matrix(fig.add_subplot(1, 2, 1), stats, "agreement")
    _matrix(fig.add_subplot(1, 2, 2), stats, "dissent")
    return _png(fig)


@_one_at_a_time
def dissent_heatmap(stats: Stats) -> bytes:
    """Family x run: dissent entries naming the family; blank where it did not take part."""
    heat = stats.heatmap
    fig = _figure(max(6.0, 2.5 + 0.18 * len(heat.runs)), 2.2 + 0.4 * max(1, len(heat.families)))
    ax = fig.add_subplot()
    ax.set_title(f"Dissent per family in the latest {len(heat.runs)} complete run(s)")
    if not heat.runs or not heat.families:
        _empty(ax, "no complete runs")
        return _png(fig)
    from matplotlib import colormaps

    grid = [[math.nan if v is None else float(v) for v in row] for row in heat.values]
    cmap = colormaps["Reds"].with_extremes(bad="#eeeeee")
    top = max((v for row in heat.values for v in row if v is not None), default=0)
    image = ax.imshow(grid, cmap=cmap, vmin=0, vmax=max(1, top), aspect="auto")
    ax.set_yticks(range(len(heat.families)), [label(f) for f in heat.families])
    step = max(1, len(heat.runs) // 30)
    ticks = list(range(0, len(heat.runs), step))
    ax.set_xticks(ticks, [label(heat.runs[i]) for i in ticks], rotation=90, fontsize="x-small")
    ax.set_xlabel("run (oldest to newest; grey: the family did not take part)")
    fig.colorbar(image, ax=ax, label="dissent entries")
    return _png(fig)


@_one_at_a_time
def runtimes(stats: Stats) -> bytes:
    """Calls per runtime: answered, dropped, timed out; latency p50 / p95 beside each bar."""
    from matplotlib.ticker import MaxNLocator

    rows = stats.runtimes
    fig = _figure(9, 1.6 + 0.45 * max(1, len(rows)))
    ax = fig.add_subplot()
    ax.set_title("Calls per runtime, with answered-call latency p50 / p95")
    if not rows:
        _empty(ax, "no calls recorded")
        return _png(fig)
    y = list(range(len(rows)))
    answered = [r.answered for r in rows]
    dropped = [sum(r.dropped.values()) for r in rows]
    timed_out = [r.timed_out for r in rows]
    ax.barh(y, answered, color="#2e7d32", label="answered")
    ax.barh(y, dropped, left=answered, color="#ef6c00", label="dropped")
    left = [a + d for a, d in zip(answered, dropped, strict=True)]
    ax.barh(y, timed_out, left=left, color="#6a1b9a", label="timed out")
    for i, r in enumerate(rows):
        if r.p50_ms is not None and r.p95_ms is not None:
            text = f" p50 {r.p50_ms / 1000:.1f} s, p95 {r.p95_ms / 1000:.1f} s"
            ax.text(r.calls, i, text, va="center", fontsize="small")
    ax.set_yticks(y, [label(r.runtime) for r in rows])
    ax.invert_yaxis()
    ax.set_xlabel("calls")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlim(0, max(r.calls for r in rows) * 1.45)
    ax.legend(loc="lower right", fontsize="small")
    return _png(fig)


@_one_at_a_time
def deliberation(stats: Stats) -> bytes:
    """Kendall's W of the final rankings, and the round at which runs converged."""
    d = stats.deliberation
    fig = _figure(9, 3.8)
    left, right = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    left.set_title("Kendall's W of the final rankings", fontsize="medium")
    if d.w_values:
        edges = [i / len(d.w_histogram) for i in range(len(d.w_histogram))]
        left.bar(edges, d.w_histogram, width=1 / len(d.w_histogram), align="edge", color="#1565c0")
        left.set_xlim(0, 1)
        left.set_xlabel("W")
        left.set_ylabel("runs")
    else:
        _empty(left, "no ranked runs")
    right.set_title("Round at which the council converged", fontsize="medium")
    if d.runs:
        names = [*d.rounds_to_converge, "never"]
        counts = [*d.rounds_to_converge.values(), d.not_converged]
        right.bar(names, counts, color=["#2e7d32"] * (len(names) - 1) + ["#9e9e9e"])
        right.set_ylabel("runs")
        right.set_xlabel(
            f"round\n(a later round changed the winner in {d.winner_changed} of "
            f"{d.winner_compared} runs\nwith two or more ranked rounds)"
            if d.winner_compared
            else "round"
        )
    else:
        _empty(right, "no runs with rounds")
    return _png(fig)


PICTURES: dict[str, tuple[str, Callable[[Stats], bytes]]] = {
    "weekly.png": ("Consensus and stamps per week", weekly),
    "families.png": ("Family agreement and dissent", matrices),
    "dissent-heatmap.png": ("Dissent heatmap", dissent_heatmap),
    "runtimes.png": ("Runtime reliability", runtimes),
    "deliberation.png": ("Deliberation", deliberation),
}


def render(stats: Stats) -> dict[str, bytes]:
    """Every picture, by file name."""
    if not available():
        raise PicturesUnavailable(INSTALL_HINT)
    return {name: draw(stats) for name, (_, draw) in PICTURES.items()}
