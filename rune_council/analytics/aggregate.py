"""The numbers: run digests in, one ``Stats`` document out (what ``--json`` prints).

Definitions, so every figure can be worked out by hand from the run files:

- A run counts for the rates once it is ``complete``. Consensus rate: complete runs with
  at least one consensus claim. Needs-decision rate: complete runs flagged
  ``needs_decision``. A council no voice answered (``no_verdict``, however old its file)
  decided nothing: it is counted apart and left out of every rate and family figure.
  Weeks are ISO weeks of the run's start, in UTC.
- Agreement of two families: of the complete runs where both answered (both in the run's
  ``distinct_families``), the share where they share at least one consensus claim.
  Dissent of two families: of the same runs, the share where they took opposite sides (one
  YES and one NO, or claims matched on one place saying opposite things).
- Per runtime, every call is answered, dropped (by reason: the call's failure, or the
  GATE's reason for throwing out its answer) or timed out; ``fell_back`` counts failed
  calls after which the slot was seated on another runtime. Latency p50 and p95 are over
  answered calls, linearly interpolated between the closest ranks.
- Deliberation, over runs with recorded rounds: the first round whose score reached the
  run's convergence threshold with nothing left open; rounds completed; Kendall's W of the
  final rankings; and, for runs with two or more rounds whose first and last rounds both
  name a rank winner, whether the last round's winner differs from the first round's.
"""

from __future__ import annotations

import datetime as dt
import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from pydantic import BaseModel, Field

from .digest import RunDigest
from .evals import EvalsFound

# The dissent heatmap shows at most this many of the latest runs.
HEATMAP_RUNS = 60
# W histogram bins: ten equal bins over [0, 1].
W_BINS = 10


class Week(BaseModel):
    week: str = Field(description="ISO week of the runs' start, e.g. 2026-W48")
    runs: int
    complete: int
    no_verdict: int = Field(
        default=0, description="Runs no voice answered: no verdict, in no rate."
    )
    consensus: int = Field(description="Complete runs with at least one consensus claim.")
    consensus_rate: float | None
    needs_decision: int
    needs_decision_rate: float | None
    stamps: dict[str, int] = Field(description="MULTI_FAMILY / NO_DECORRELATION / none.")


class Pair(BaseModel):
    a: str
    b: str
    runs_both: int = Field(description="Complete runs where both families answered.")
    runs: int = Field(description="Of those, runs where they agreed (or dissented).")
    rate: float | None
    claims: int | None = Field(default=None, description="Consensus claims they shared.")


class FamilyDissent(BaseModel):
    family: str
    runs_answered: int
    dissent_entries: int
    alone: int = Field(description="Dissent entries that were this family's claim alone.")


class Heatmap(BaseModel):
    families: list[str]
    runs: list[str]
    values: list[list[int | None]] = Field(
        description="Dissent entries naming the family in the run; null: it did not take part."
    )


class RuntimeRow(BaseModel):
    runtime: str
    calls: int
    answered: int
    dropped: dict[str, int]
    timed_out: int
    fell_back: int
    p50_ms: float | None
    p95_ms: float | None


class Deliberation(BaseModel):
    runs: int = Field(description="Runs with recorded rounds.")
    rounds_to_converge: dict[str, int] = Field(description="Round number -> runs converged there.")
    not_converged: int
    revision_counts: dict[str, int] = Field(description="Rounds completed -> runs.")
    w_values: int
    w_median: float | None
    w_histogram: list[int] = Field(description="Counts over ten bins of width 0.1 on [0, 1].")
    w_labels: dict[str, int] = Field(description="high (>= 0.8), medium (>= 0.5), low.")
    winner_compared: int
    winner_changed: int
    winner_changed_rate: float | None


class Totals(BaseModel):
    runs: int
    by_status: dict[str, int]
    complete: int
    no_verdict: int = Field(
        default=0, description="Runs no voice answered: no verdict, in no rate."
    )
    consensus: int
    consensus_rate: float | None
    needs_decision: int
    needs_decision_rate: float | None
    stamps: dict[str, int]


class SkippedFile(BaseModel):
    file: str
    reason: str


class Files(BaseModel):
    """What was read to get here (filled in by ``history.stats``)."""

    rune_dirs: list[str] = Field(default_factory=list)
    runs: int = 0
    skipped: int = Field(default=0, description="JSON files that are not readable runs.")
    skipped_files: list[SkippedFile] = Field(
        default_factory=list, description="The first few skipped files and why."
    )
    read: int = Field(default=0, description="Files parsed in this pass.")
    reused: int = Field(default=0, description="Files whose digest came from the index.")
    forgotten: int = Field(default=0, description="Index entries whose file is gone.")
    notes: list[str] = Field(default_factory=list)


class Stats(BaseModel):
    since: str | None = None
    files: Files = Field(default_factory=Files)
    evals: EvalsFound = Field(
        default_factory=EvalsFound,
        description="Each eval's pairwise error agreement and effective independent votes.",
    )
    totals: Totals
    weeks: list[Week]
    families: list[str]
    agreement: list[Pair]
    dissent: list[Pair]
    family_dissent: list[FamilyDissent]
    heatmap: Heatmap
    runtimes: list[RuntimeRow]
    deliberation: Deliberation


def rate(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q`` quantile (0..1), linear between the closest ranks (numpy's default)."""
    if not values:
        return None
    ordered = sorted(values)
    h = (len(ordered) - 1) * q
    low = math.floor(h)
    high = min(low + 1, len(ordered) - 1)
    return round(ordered[low] + (h - low) * (ordered[high] - ordered[low]), 3)


def iso_week(started: float | None) -> str:
    if started is None:
        return "unknown"
    year, week, _ = dt.datetime.fromtimestamp(started, dt.UTC).isocalendar()
    return f"{year}-W{week:02d}"


def _stamp(run: RunDigest) -> str:
    return run.stamp or "none"


def _totals(runs: list[RunDigest]) -> Totals:
    done = [r for r in runs if r.status == "complete"]
    consensus = sum(1 for r in done if r.consensus_claims)
    needs = sum(1 for r in done if r.needs_decision)
    return Totals(
        runs=len(runs),
        by_status=dict(sorted(Counter(r.status for r in runs).items())),
        complete=len(done),
        no_verdict=sum(1 for r in runs if r.status == "no_verdict"),
        consensus=consensus,
        consensus_rate=rate(consensus, len(done)),
        needs_decision=needs,
        needs_decision_rate=rate(needs, len(done)),
        stamps=dict(sorted(Counter(_stamp(r) for r in done).items())),
    )


def _weeks(runs: list[RunDigest]) -> list[Week]:
    by_week: dict[str, list[RunDigest]] = {}
    for run in runs:
        by_week.setdefault(iso_week(run.started), []).append(run)
    weeks = []
    for label in sorted(by_week):
        t = _totals(by_week[label])
        weeks.append(
            Week(
                week=label,
                runs=t.runs,
                complete=t.complete,
                no_verdict=t.no_verdict,
                consensus=t.consensus,
                consensus_rate=t.consensus_rate,
                needs_decision=t.needs_decision,
                needs_decision_rate=t.needs_decision_rate,
                stamps=t.stamps,
            )
        )
    return weeks


def _pairs(done: list[RunDigest], families: list[str]) -> tuple[list[Pair], list[Pair]]:
    both: Counter[tuple[str, str]] = Counter()
    agreed_runs: Counter[tuple[str, str]] = Counter()
    agreed_claims: Counter[tuple[str, str]] = Counter()
    dissented: Counter[tuple[str, str]] = Counter()
    for run in done:
        present = sorted(set(run.families))
        for i, a in enumerate(present):
            for b in present[i + 1 :]:
                both[(a, b)] += 1
        for a, b, n in run.agreed:
            agreed_runs[(a, b)] += 1
            agreed_claims[(a, b)] += n
        for a, b in run.dissented:
            dissented[(a, b)] += 1
    agreement, dissent = [], []
    for i, a in enumerate(families):
        for b in families[i + 1 :]:
            n = both[(a, b)]
            if not n:
                continue
            agreement.append(
                Pair(
                    a=a,
                    b=b,
                    runs_both=n,
                    runs=agreed_runs[(a, b)],
                    rate=rate(agreed_runs[(a, b)], n),
                    claims=agreed_claims[(a, b)],
                )
            )
            dissent.append(
                Pair(a=a, b=b, runs_both=n, runs=dissented[(a, b)], rate=rate(dissented[(a, b)], n))
            )
    return agreement, dissent


def _family_dissent(done: list[RunDigest], families: list[str]) -> list[FamilyDissent]:
    answered: Counter[str] = Counter(f for r in done for f in set(r.families))
    entries: Counter[str] = Counter()
    alone: Counter[str] = Counter()
    for run in done:
        entries.update(run.dissent)
        alone.update(run.alone)
    return [
        FamilyDissent(
            family=f, runs_answered=answered[f], dissent_entries=entries[f], alone=alone[f]
        )
        for f in families
    ]


def _heatmap(done: list[RunDigest]) -> Heatmap:
    latest = sorted(done, key=lambda r: (r.started or 0.0, r.name))[-HEATMAP_RUNS:]
    families = sorted({f for r in latest for f in (*r.families, *r.dissent)})
    values: list[list[int | None]] = []
    for family in families:
        row: list[int | None] = []
        for run in latest:
            took_part = family in run.families or family in run.dissent
            row.append(run.dissent.get(family, 0) if took_part else None)
        values.append(row)
    return Heatmap(families=families, runs=[r.name for r in latest], values=values)


@dataclass
class _Tally:
    calls: int = 0
    answered: int = 0
    dropped: Counter[str] = field(default_factory=Counter)
    timed_out: int = 0
    fell_back: int = 0
    latencies: list[float] = field(default_factory=list)


def _runtimes(runs: list[RunDigest]) -> list[RuntimeRow]:
    tallies: dict[str, _Tally] = {}
    for run in runs:
        for call in run.calls:
            t = tallies.setdefault(call.runtime, _Tally())
            t.calls += 1
            if call.result == "answered":
                t.answered += 1
                if call.latency_ms is not None:
                    t.latencies.append(float(call.latency_ms))
            elif call.result == "timed_out":
                t.timed_out += 1
            else:
                t.dropped[call.reason or "dropped"] += 1
            t.fell_back += call.fell_back
    return [
        RuntimeRow(
            runtime=name,
            calls=t.calls,
            answered=t.answered,
            dropped=dict(sorted(t.dropped.items())),
            timed_out=t.timed_out,
            fell_back=t.fell_back,
            p50_ms=percentile(t.latencies, 0.5),
            p95_ms=percentile(t.latencies, 0.95),
        )
        for name, t in sorted(tallies.items())
    ]


def _w_label(w: float) -> str:
    return "high" if w >= 0.8 else "medium" if w >= 0.5 else "low"


def _deliberation(runs: list[RunDigest]) -> Deliberation:
    deliberated = [r for r in runs if r.deliberation is not None and r.deliberation.rounds]
    converged: Counter[str] = Counter()
    not_converged = 0
    revisions: Counter[str] = Counter()
    compared = changed = 0
    for run in deliberated:
        d = run.deliberation
        assert d is not None
        first = next(
            (
                r.number
                for r in d.rounds
                if r.score is not None and r.score >= d.threshold and r.closed
            ),
            None,
        )
        if first is None:
            not_converged += 1
        else:
            converged[str(first)] += 1
        revisions[str(d.revision_count)] += 1
        if len(d.rounds) >= 2 and d.rounds[0].winner and d.rounds[-1].winner:
            compared += 1
            changed += d.rounds[0].winner != d.rounds[-1].winner
    ws = [r.w for r in runs if r.w is not None and 0.0 <= r.w <= 1.0]
    histogram = [0] * W_BINS
    for w in ws:
        histogram[min(int(w * W_BINS), W_BINS - 1)] += 1
    labels = Counter(_w_label(w) for w in ws)
    return Deliberation(
        runs=len(deliberated),
        rounds_to_converge=dict(sorted(converged.items(), key=lambda kv: int(kv[0]))),
        not_converged=not_converged,
        revision_counts=dict(sorted(revisions.items(), key=lambda kv: int(kv[0]))),
        w_values=len(ws),
        w_median=percentile(ws, 0.5),
        w_histogram=histogram,
        w_labels={k: labels[k] for k in ("high", "medium", "low")},
        winner_compared=compared,
        winner_changed=changed,
        winner_changed_rate=rate(changed, compared),
    )


def aggregate(runs: Iterable[RunDigest], *, since: dt.datetime | None = None) -> Stats:
    """The statistics of the runs that started at or after ``since`` (all when None)."""
    cutoff = since.timestamp() if since is not None else None
    chosen = [r for r in runs if cutoff is None or (r.started is not None and r.started >= cutoff)]
    done = [r for r in chosen if r.status == "complete"]
    families = sorted({f for r in done for f in r.families})
    agreement, dissent = _pairs(done, families)
    return Stats(
        since=since.isoformat() if since else None,
        totals=_totals(chosen),
        weeks=_weeks(chosen),
        families=families,
        agreement=agreement,
        dissent=dissent,
        family_dissent=_family_dissent(done, families),
        heatmap=_heatmap(done),
        runtimes=_runtimes(chosen),
        deliberation=_deliberation(done),
    )
