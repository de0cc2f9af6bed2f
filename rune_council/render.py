"""The skill's Output Format, rendered from a CouncilResult (decorrelation first)."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator
from itertools import chain
from operator import add
from typing import TYPE_CHECKING

from pydantic_core import to_json

from .core.contract import CouncilResult, RankerDetail, Repair, TallyReport
from .core.safetext import one_line, plain

if TYPE_CHECKING:
    from .deliberation.tally import TallyParts


def render(result: CouncilResult, *, status: tuple[str, str] | None = None) -> str:
    """``status``: (status, why) to show instead of the file's own, e.g. abandoned."""
    from .runs import NO_VERDICT_WHY

    shown, why = status or (result.shown_status(), "")
    if shown == "no_verdict":
        why = why or NO_VERDICT_WHY
    dropped = len(result.voices_dropped)
    detected = sorted(
        {d.model_family for d in result.runtime_report.detected if d.status == "available"}
    )
    used = result.runtime_report.used
    degraded = len(result.runtime_report.degraded_to_subagent)
    stamp = result.stamp_label() or f"(none: run {shown})"
    if shown == "no_verdict":
        stamp += " (no verdict)"
    lines = [
        f"## Council Result: {result.id}",
        f"- **Decorrelation**: {stamp}"
        + (f" ({', '.join(result.distinct_families)})" if result.distinct_families else ""),
        f"- **Question**: {result.question}",
        f"- **Mode**: {result.mode}",
        f"- **Voices**: {result.voices_valid}/{result.voices_requested} valid ({dropped} dropped)",
        f"- **Runtime**: {', '.join(detected) or 'none detected'} → "
        f"{', '.join(used) or 'none'} (degraded: {degraded})",
    ]
    template = result.request.template
    if template is not None:
        lines.append(f"- **Template**: {template.name} v{template.version} ({template.source})")
    chain = result.request.chain
    if chain is not None:
        steps = " → ".join(
            f"{run.run_id} ({run.template}){' ← this run' if i == chain.step else ''}"
            for i, run in enumerate(chain.runs, start=1)
        )
        lines.append(f"- **Chain**: {chain.name}, step {chain.step} of {len(chain.runs)}: {steps}")
    if shown != "complete":
        lines.append(f"- **Status**: {shown}" + (f" ({why})" if why else ""))
    for voice in result.voices:
        tag = " fallback" if voice.is_fallback else ""
        role = "" if voice.slot_role == "standard" else f" [{voice.slot_role}]"
        if voice.joined_round is not None:
            role += f" [summoned in round {voice.joined_round}]"
        state: str = voice.status
        if voice.status == "dropped":
            state = f"dropped: {one_line(voice.drop_reason or '', 400)}"
        elif voice.stance:
            state = voice.stance
        lines.append(f"  - {voice.id} {voice.runtime} ({voice.model_family}{tag}){role}: {state}")
        if voice.repairs:
            lines.append(f"    - {repairs_line(voice.repairs)}")

    lines += ["", "### Consensus (verified, cross-family)"]
    if result.decorrelation != "MULTI_FAMILY":
        lines.append("- none: fewer than two distinct confirmed model families answered")
    elif not result.agreement.consensus_claims:
        lines.append("- none")
    for c in result.agreement.consensus_claims:
        lines.append(
            f"- {c.claim} — voices: {', '.join(c.voice_ids)}, families: {', '.join(c.families)}"
            f" (matched by {c.matched_by.method}: {c.matched_by.key})"
        )
        lines += [f"  - {m.voice_id}: {m.text}" for m in c.members]

    lines += ["", "### Dissent"]
    if not result.agreement.dissent:
        lines.append("- none")
    for d in result.agreement.dissent:
        sev = f"[{d.severity}] " if d.severity else ""
        lines.append(f"- {sev}{d.claim} — {', '.join(d.voice_ids) or 'council'} — {d.label}")
        if d.detail:
            lines.append(f"  - {d.detail}")
        if d.label != "disagreement":  # a disagreement's claim already quotes each member
            lines += [f"  - {m.voice_id}: {m.text}" for m in d.members]

    lines += ["", "### Needs Decision"]
    lines.append(result.decision if result.needs_decision and result.decision else "- no")

    checks = result.checks
    if checks.perturbation or checks.devils_advocate:
        lines += ["", "### Checks"]
        if checks.perturbation:
            lines.append(
                f"- perturbation: {checks.perturbation.outcome} — {checks.perturbation.detail}"
            )
        if checks.devils_advocate:
            da = checks.devils_advocate
            lines.append(f"- devil's advocate: {da.outcome} — {da.detail}")
    if result.notes:
        lines += ["", "### Notes"] + [f"- {n}" for n in result.notes]
    if result.run_file:
        lines += ["", f"Run file: {result.run_file}"]
    # Questions, stances, claims and reasons are what voices wrote: text, never escapes.
    return plain("\n".join(lines) + "\n")


def repairs_line(repairs: Iterable[Repair]) -> str:
    """What GATE repaired to read a voice's answer, on one bounded line."""
    parts = [f"{r.kind}{f' at {r.at}' if r.at else ''} ({r.detail})" for r in repairs]
    return one_line(f"answer read with {len(parts)} repair(s): " + "; ".join(parts), 600)


def render_tally(report: TallyReport, source: str) -> str:
    """A council-DSL tally as text: what ``rune council tally`` prints and MCP returns."""
    return "\n".join(tally_lines(report, source))


def tally_lines(
    report: TallyReport, source: str, rankers: Iterable[RankerDetail] | TallyParts | None = None
) -> Iterator[str]:
    """A council-DSL tally as text, line by line (a tally of 100,000 rankers is printed as it
    is rendered, never held whole). ``rankers``: the details to show instead of the report's
    own, made one at a time (``TallyParts.rankers``), or the tally's counted ballots
    themselves (``TallyParts``), read without making a detail for each."""
    state = "valid" if report.valid else f"INVALID ({len(report.errors)} error(s))"
    yield f"tally of {source}: {state}"
    pruned = {p.label: p for p in report.pruned}
    yield (
        "proposals: "
        + (" ".join(p + (" (pruned)" if p in pruned else "") for p in report.proposals) or "none")
    )
    for p in report.pruned:
        yield f"  pruned {p.label} (line {p.line}): {p.reason}"
    if rankers is not None and not isinstance(rankers, Iterable):
        yield "rankers:" if rankers.counted else "rankers: none"
        yield from counted_lines(rankers)
        yield from _tally_tail(report)
        return
    details = iter(report.rankers if rankers is None else rankers)
    first = next(details, None)
    yield "rankers: none" if first is None else "rankers:"
    shown: dict[float, str] = {}  # points repeat; each value is formatted once

    def number(v: float) -> str:
        text = shown.get(v) if v else None  # 0.0 and -0.0 are one key but print apart
        if text is None:
            text = shown[v] = f"{v:g}"
        return text

    for r in chain([] if first is None else [first], details):
        points = " ".join(f"{k}={number(v)}" for k, v in r.points.items()) or "-"
        rho = "-" if r.mean_spearman is None else f"{r.mean_spearman:.3f}"
        flag = "  DISSENTING" if r.dissenting else ""
        yield (
            f"  {r.ranker:<10} line {r.line:<4} {r.ballot or '(nothing left to rank)'}  "
            f"conf {r.conf:g}  points {points}  mean rho {rho}{flag}"
        )
    yield from _tally_tail(report)


def counted_lines(parts: TallyParts) -> Iterator[str]:
    """Each counted ballot's line as ``tally_lines`` prints a ranker's detail, read from the
    ballot's places: a tally of 100,000 rankers formats each number of a conf's table once
    instead of each of its millions of points."""
    prefix = [f"{p}=" for p in parts.active]
    texts: dict[float, tuple[str, list[str]]] = {}
    once: set[float] = set()
    for c in parts.counted:
        conf = c.conf
        known = texts.get(conf)
        doubled = c.row.doubled
        numbers: Iterable[str]
        if known is not None:
            conf_text, cell = known
            numbers = map(cell.__getitem__, doubled)
        else:
            table = parts.tables[conf]
            conf_text = f"{conf:g}"
            if conf in once:  # a conf seen twice is likely seen again: format its table
                cell = [f"{v:g}" for v in table]
                texts[conf] = (conf_text, cell)
                numbers = map(cell.__getitem__, doubled)
            else:  # the first ballot of a conf formats its own points only
                once.add(conf)
                numbers = [f"{table[r]:g}" for r in doubled]
        if not conf:  # 0.0 and -0.0 are one key but print apart
            conf_text = f"{conf:g}"
        points = " ".join(map(add, map(prefix.__getitem__, c.row.items), numbers)) or "-"
        rho = "-" if c.mean is None else f"{c.mean:.3f}"
        flag = "  DISSENTING" if c.dissenting else ""
        yield (
            f"  {c.ranker:<10} line {c.line:<4} {c.ballot or '(nothing left to rank)'}  "
            f"conf {conf_text}  points {points}  mean rho {rho}{flag}"
        )


def _tally_tail(report: TallyReport) -> Iterator[str]:
    """The lines after the rankers'."""
    if report.scores:
        yield (
            "scores (Borda x conf): "
            + ", ".join(
                f"{s.label} {s.score:g}" + (" [blocked]" if s.blocked else "")
                for s in report.scores
            )
        )
        yield "final order: " + " > ".join("=".join(level) for level in report.final_order)
    yield f"winner: {report.winner or 'none (no ballot, a tie, or all blocked)'}"
    for b in report.blocked:
        yield f"blocked: {b.label} (lines {', '.join(map(str, b.lines))}): {b.reason}"
    c = report.consensus
    if c.w is None:
        yield f"consensus: undefined ({c.note})"
    else:
        yield (
            f"consensus: W = {c.w:.4f} ({c.label}), {c.rankers} ranking(s) over "
            f"{c.proposals} proposal(s); {c.method}"
        )
    yield "dissenting rankers: " + (", ".join(report.dissenters) or "none")
    for v in report.votes:
        yield (
            f"vote on {v.target}: yes {len(v.yes)} ({', '.join(v.yes) or '-'}), "
            f"no {len(v.no)} ({', '.join(v.no) or '-'}), abstain {len(v.abstain)}"
        )
    if report.synth is not None:
        s = report.synth
        closing = (
            "closes the council"
            if s.closes
            else f"does NOT close the council: open {'; '.join(s.open)}"
        )
        yield f"synth (line {s.line}): {s.text or '(no text)'} — {closing}"
    if report.dropped:
        yield f"dropped lines ({len(report.dropped)}):"
        yield from (f"  line {d.line}: {d.text}  — {d.reason}" for d in report.dropped)
    if report.errors:
        yield f"errors ({len(report.errors)}):"
        yield from (f"  line {e.line}: {e.text}  — {e.reason}" for e in report.errors)


_RANKERS_EMPTY = b'\n  "rankers": [],\n'


def tally_json_chunks(
    report: TallyReport, rankers: Iterable[RankerDetail] | TallyParts, per_chunk: int = 1000
) -> Iterator[bytes]:
    """``report`` as the JSON document its serializer makes with ``indent=2``, the ``rankers``
    spliced in as they come: the bytes of a tally of 100,000 rankers (about 90 MB) are never
    held whole. ``report.rankers`` must be empty. ``rankers`` may be the tally's counted
    ballots themselves (``TallyParts``), written out without making a detail for each."""
    whole = TallyReport.__pydantic_serializer__.to_json(report, indent=2)
    # The first top-level key after "valid" and "proposals" (strings, whose newlines are
    # escaped), so the first match is the field itself.
    head, found, tail = whole.partition(_RANKERS_EMPTY)
    if not found or report.rankers:
        raise ValueError("the report to splice rankers into must have none of its own")
    items: Iterable[bytes] = (
        map(_detail_json, rankers) if isinstance(rankers, Iterable) else counted_json(rankers)
    )
    chunk = [head + b'\n  "rankers": [']
    separator = b""
    count = 0
    for item in items:
        chunk += (separator, item)
        separator = b","
        count += 1
        if count % per_chunk == 0:
            yield b"".join(chunk)
            chunk.clear()
    if not count:
        yield whole
        return
    chunk.append(b"\n  ],\n" + tail)
    yield b"".join(chunk)


def _detail_json(detail: RankerDetail) -> bytes:
    # Two levels deep: each detail, serialized alone, is indented by four more spaces.
    text = RankerDetail.__pydantic_serializer__.to_json(detail, indent=2)
    return b"\n    " + text.replace(b"\n", b"\n    ")


def _json_string(text: str) -> str:
    # Names and ballots are labels and speaker names (checked by the parser), which need no
    # escape; anything else is escaped as the serializer escapes it (it leaves non-ASCII and
    # DEL as they are, as json.dumps does with ensure_ascii off).
    if text.isascii() and text.isprintable() and '"' not in text and "\\" not in text:
        return f'"{text}"'
    return json.dumps(text, ensure_ascii=False)


def _plain_float(value: float) -> bool:
    """Whether ``repr`` writes ``value`` as the serializer does: it differs below 1e-4 (the
    serializer writes 0.00001 for Python's 1e-05) and for what is not finite."""
    return value == 0.0 or 1e-4 <= abs(value) < math.inf


def counted_json(parts: TallyParts) -> Iterator[bytes]:
    """Each counted ballot as ``_detail_json`` writes its detail, byte for byte, written
    straight from the ballot's places. A ballot with a number ``repr`` would write otherwise
    goes through the model's serializer."""
    keys = [f"\n        {_json_string(p)}: " for p in parts.active]
    cells: dict[float, tuple[str, list[str]] | None] = {}
    # Means below 1e-4 are common (a mean correlation near zero, rounded to six places),
    # and there are at most some 200 of them: each is written by the serializer once.
    small: dict[float, str] = {}
    for c in parts.counted:
        conf = c.conf
        if conf in cells:
            known = cells[conf]
        else:
            table = parts.tables[conf]
            plain_ = _plain_float(conf) and all(map(_plain_float, table))
            known = cells[conf] = (repr(conf), [repr(v) for v in table]) if plain_ else None
        if known is None:
            yield _detail_json(parts.detail(c))
            continue
        mean = c.mean
        if mean is None:
            rho = "null"
        elif _plain_float(mean):
            rho = repr(mean)
        elif (shown_mean := small.get(mean)) is not None:
            rho = shown_mean
        elif math.isfinite(mean):
            rho = small[mean] = to_json(mean).decode()
        else:
            yield _detail_json(parts.detail(c))
            continue
        conf_text, cell = known
        if not conf:  # 0.0 and -0.0 are one key but are written apart
            conf_text = repr(conf)
        points = ",".join(
            map(add, map(keys.__getitem__, c.row.items), map(cell.__getitem__, c.row.doubled))
        )
        shown = f"{{{points}\n      }}" if points else "{}"
        yield (
            f'\n    {{\n      "ranker": {_json_string(c.ranker)},\n      "line": {c.line},'
            f'\n      "ballot": {_json_string(c.ballot)},\n      "conf": {conf_text},'
            f'\n      "points": {shown},\n      "mean_spearman": {rho},'
            f'\n      "dissenting": {"true" if c.dissenting else "false"}\n    }}'
        ).encode()
