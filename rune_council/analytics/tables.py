"""The statistics as titled tables of plain strings, shared by the terminal and HTML views.

Cells hold names taken from run files; each view escapes them for where they go
(``safetext.plain`` for a terminal, ``html.escape`` for the page).
"""

from __future__ import annotations

from dataclasses import dataclass

from .aggregate import Stats
from .evals import EvalAgreement


@dataclass(frozen=True)
class Table:
    title: str
    headers: list[str]
    rows: list[list[str]]
    note: str = ""
    # Said on one line in place of an empty table, where its absence is itself the news.
    empty: str | None = None


def pct(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.0f}%"


def ms(value: float | None) -> str:
    return "-" if value is None else f"{value / 1000:.2f} s"


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in counts.items()) or "-"


def summary_line(stats: Stats) -> str:
    f = stats.files
    window = f", {stats.totals.runs} started since {stats.since}" if stats.since else ""
    return (
        f"{f.runs} run file(s){window}; {f.skipped} file(s) skipped as not readable runs "
        f"({f.read} read, {f.reused} from the index)"
    )


def _f(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


NO_EVALS = "none found (rune council eval keeps each eval's scored items in <rune dir>/eval/)"


def _votes(e: EvalAgreement) -> str:
    if e.decorrelation is None:
        return "-"
    v = e.decorrelation.effective_votes
    if v.value is None:
        return f"- ({v.reason or 'undefined'})"
    shown = f"{v.value:.2f}"
    if v.interval is not None:
        shown += f" [{v.interval.low:.2f}, {v.interval.high:.2f}]"
    return f"{shown} of {len(v.voices)} counted"


def eval_tables(stats: Stats) -> list[Table]:
    """Each eval's decorrelation: how often two voices (two families) were wrong on the same
    item against what independence predicts, and the effective number of independent
    votes, as the eval's own report computes them."""
    found = stats.evals
    general = "; ".join(found.notes)
    if not found.evals:
        message = f"{NO_EVALS}; {general}" if general else NO_EVALS
        return [Table("Eval runs", ["eval"], [], note=message, empty=message)]
    out = [
        Table(
            "Eval runs",
            [
                "eval",
                "items",
                "voices",
                "effective independent votes",
                "mean error correlation",
                "lines skipped",
            ],
            [
                [
                    e.eval,
                    f"{e.items} ({e.flawed} flawed, {e.clean} clean)",
                    str(len(e.voices)),
                    _votes(e),
                    _f(
                        e.decorrelation.effective_votes.mean_correlation
                        if e.decorrelation
                        else None
                    ),
                    str(e.skipped_lines),
                ]
                for e in found.evals
            ],
            "Effective independent votes: Kish's effective sample size over the voices' error "
            "correlation (voices that always err together count as one; a voice whose errors "
            f"never vary within a label is left out), {round(found.evals[0].level * 100)}% "
            "bootstrap interval over items." + (f" {general}" if general else ""),
        )
    ]
    for e in found.evals:
        if e.decorrelation is None:
            continue
        notes = [*e.notes, *e.skipped_reasons]
        excluded = e.decorrelation.effective_votes.excluded
        notes += [f"left out of the votes: {v}: {why}" for v, why in excluded.items()]
        out.append(
            Table(
                f"Eval {e.eval}: voices wrong together",
                [
                    "voices",
                    "items both answered",
                    "wrong together",
                    "independence predicts",
                    "lift",
                    "error correlation",
                ],
                [
                    [
                        f"{p.a} & {p.b}",
                        str(p.items),
                        "-"
                        if p.joint_error_rate is None
                        else f"{p.both_wrong}/{p.items} ({p.joint_error_rate:.2f})",
                        _f(p.independent_rate),
                        _f(p.lift),
                        _f(p.correlation)
                        if p.correlation is not None
                        else f"- ({p.reason or 'undefined'})",
                    ]
                    for p in e.decorrelation.voice_agreement
                ],
                "Wrong: a miss on a flawed item or an alarm on a clean one. Independence "
                "predicts, per label, the product of the two voices' error rates. "
                + " ".join(f"{n}." for n in notes),
            )
        )
        out.append(
            Table(
                f"Eval {e.eval}: families wrong together",
                [
                    "families",
                    "voice pairs",
                    "wrong together",
                    "independence predicts",
                    "error correlation",
                ],
                [
                    [
                        f"{f.a} & {f.b}",
                        str(f.voice_pairs),
                        _f(f.joint_error_rate),
                        _f(f.independent_rate),
                        _f(f.correlation),
                    ]
                    for f in e.decorrelation.family_agreement
                ],
                "Each figure is the mean over the voice pairs between the two families.",
            )
        )
    return out


def tables(stats: Stats) -> list[Table]:
    t = stats.totals
    out = [
        Table(
            "Runs",
            [
                "runs",
                "complete",
                "no verdict",
                "consensus rate",
                "needs-decision rate",
                "stamps",
                "statuses",
            ],
            [
                [
                    str(t.runs),
                    str(t.complete),
                    str(t.no_verdict),
                    f"{pct(t.consensus_rate)} ({t.consensus}/{t.complete})",
                    f"{pct(t.needs_decision_rate)} ({t.needs_decision}/{t.complete})",
                    _counts(t.stamps),
                    _counts(t.by_status),
                ]
            ],
            "Rates are over complete runs; consensus: at least one verified cross-family claim. "
            "No verdict: no voice answered; in no rate.",
        ),
        Table(
            "Per week",
            ["week", "runs", "complete", "no verdict", "consensus", "needs decision", "stamps"],
            [
                [
                    w.week,
                    str(w.runs),
                    str(w.complete),
                    str(w.no_verdict),
                    f"{pct(w.consensus_rate)} ({w.consensus})",
                    f"{pct(w.needs_decision_rate)} ({w.needs_decision})",
                    _counts(w.stamps),
                ]
                for w in stats.weeks
            ],
        ),
        Table(
            "Family pairs",
            ["families", "both answered", "agreed", "claims shared", "took opposite sides"],
            [
                [
                    f"{a.a} + {a.b}",
                    str(a.runs_both),
                    f"{pct(a.rate)} ({a.runs})",
                    str(a.claims or 0),
                    f"{pct(d.rate)} ({d.runs})",
                ]
                for a, d in zip(stats.agreement, stats.dissent, strict=True)
            ],
            "Agreed: shared an anchored, mechanically verified consensus claim in the run.",
        ),
        Table(
            "Dissent by family",
            ["family", "runs answered", "dissent entries", "alone"],
            [
                [f.family, str(f.runs_answered), str(f.dissent_entries), str(f.alone)]
                for f in stats.family_dissent
            ],
            "Alone: a claim only this family's voice made.",
        ),
        Table(
            "Runtimes",
            ["runtime", "calls", "answered", "dropped", "timed out", "fell back", "p50", "p95"],
            [
                [
                    r.runtime,
                    str(r.calls),
                    str(r.answered),
                    _counts(r.dropped),
                    str(r.timed_out),
                    str(r.fell_back),
                    ms(r.p50_ms),
                    ms(r.p95_ms),
                ]
                for r in stats.runtimes
            ],
            "Latency over answered calls. Fell back: a failed call after which another "
            "runtime took the slot.",
        ),
    ]
    d = stats.deliberation
    out.append(
        Table(
            "Deliberation",
            ["measure", "value"],
            [
                ["runs with rounds", str(d.runs)],
                ["converged at round", _counts(d.rounds_to_converge)],
                ["never converged", str(d.not_converged)],
                ["rounds completed", _counts(d.revision_counts)],
                [
                    "Kendall's W (runs, median)",
                    f"{d.w_values}, {'-' if d.w_median is None else d.w_median}",
                ],
                ["W high / medium / low", " / ".join(str(v) for v in d.w_labels.values())],
                [
                    "later round changed the winner",
                    f"{pct(d.winner_changed_rate)} ({d.winner_changed}/{d.winner_compared})",
                ],
            ],
        )
    )
    out += eval_tables(stats)
    return out


def text(stats: Stats) -> str:
    """Fixed-width tables for a terminal (cells are not yet made terminal-safe)."""
    lines = [summary_line(stats)]
    lines += [f"  skipped {s.file}: {s.reason}" for s in stats.files.skipped_files]
    if stats.files.skipped > len(stats.files.skipped_files):
        lines.append(f"  (and {stats.files.skipped - len(stats.files.skipped_files)} more)")
    lines += [f"  note: {n}" for n in stats.files.notes]
    for table in tables(stats):
        lines.append("")
        if not table.rows and table.empty:
            lines.append(f"{table.title}: {table.empty}")
            continue
        lines.append(table.title)
        if not table.rows:
            lines.append("  (none)")
            continue
        widths = [
            max(len(h), *(len(r[i]) for r in table.rows)) for i, h in enumerate(table.headers)
        ]
        for row in [table.headers, *table.rows]:
            lines.append("  " + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))
        if table.note:
            lines.append(f"  {table.note}")
    return "\n".join(lines).rstrip() + "\n"
