"""The skill's Output Format, rendered from a CouncilResult (decorrelation first)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import chain

from .core.contract import CouncilResult, RankerDetail, Repair, TallyReport
from .core.safetext import one_line, plain


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
    report: TallyReport, source: str, rankers: Iterable[RankerDetail] | None = None
) -> Iterator[str]:
    """A council-DSL tally as text, line by line (a tally of 100,000 rankers is printed as it
    is rendered, never held whole). ``rankers``: the details to show instead of the report's
    own, made one at a time (``TallyParts.rankers``)."""
    state = "valid" if report.valid else f"INVALID ({len(report.errors)} error(s))"
    yield f"tally of {source}: {state}"
    pruned = {p.label: p for p in report.pruned}
    yield (
        "proposals: "
        + (" ".join(p + (" (pruned)" if p in pruned else "") for p in report.proposals) or "none")
    )
    for p in report.pruned:
        yield f"  pruned {p.label} (line {p.line}): {p.reason}"
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
    report: TallyReport, rankers: Iterable[RankerDetail], per_chunk: int = 1000
) -> Iterator[bytes]:
    """``report`` as the JSON document its serializer makes with ``indent=2``, the ``rankers``
    spliced in as they come: the bytes of a tally of 100,000 rankers (about 90 MB) are never
    held whole. ``report.rankers`` must be empty."""
    whole = TallyReport.__pydantic_serializer__.to_json(report, indent=2)
    # The first top-level key after "valid" and "proposals" (strings, whose newlines are
    # escaped), so the first match is the field itself.
    head, found, tail = whole.partition(_RANKERS_EMPTY)
    if not found or report.rankers:
        raise ValueError("the report to splice rankers into must have none of its own")
    serialize = RankerDetail.__pydantic_serializer__.to_json
    # Two levels deep: each detail, serialized alone, is indented by four more spaces.
    items = (b"\n    " + serialize(r, indent=2).replace(b"\n", b"\n    ") for r in rankers)
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
