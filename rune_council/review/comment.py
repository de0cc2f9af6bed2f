"""The findings as a pull-request comment (``--format markdown``).

It leads with the stamp and the bottom line (the gate's verdict, in words), then the
consensus, the dissent and what needs a decision, each finding linked to its line. Every
piece of text from outside (claims, file names, model ids, the range) is escaped before it
is markdown: HTML is shown as text, markdown's punctuation is backslash-escaped, line
breaks become spaces, and ``@name``, ``#123`` and bare URLs are broken so a voice cannot
mention a person, cross-reference an issue or plant a link.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from urllib.parse import quote

from .artifact import visible
from .findings import Finding, Location, decides
from .run import Reviewed

MARKER = "<!-- rune-council-review -->"
COMMENT_CAP = 60_000  # GitHub refuses a comment over 65,536 characters
TEXT_CAP = 600
_PUNCTUATION = set("\\`*_{}[]()#+-.!|~=$")
_ZWSP = "\u200b"
_LINKISH = re.compile(r"(?i)(?:https?|ftp|mailto|www|xmpp)")

Link = Callable[[Location], str | None]


def md(text: str, cap: int = TEXT_CAP) -> str:
    """Untrusted text as inert markdown on one line."""
    flat = visible(" ".join(str(text).split()))
    if len(flat) > cap:
        flat = flat[: cap - 3] + "..."
    out = []
    for ch in flat:
        if ch == "&":
            out.append("&amp;")
        elif ch == "<":
            out.append("&lt;")
        elif ch == ">":
            out.append("&gt;")
        elif ch in "@#":
            out.append(ch + _ZWSP)  # no mention, no issue reference
        elif ch in _PUNCTUATION:
            out.append("\\" + ch)
        else:
            out.append(ch)
    # GitHub links a bare URL or www. name by itself: a zero-width space in it stops that.
    return _LINKISH.sub(lambda m: m.group(0)[0] + _ZWSP + m.group(0)[1:], "".join(out))


def blob_link(server: str, repository: str, commit: str) -> Link:
    """Links into ``repository`` at ``commit`` (all three checked by the caller)."""

    def link(loc: Location) -> str:
        anchor = f"#L{loc.line}" if loc.line is not None else ""
        path = quote(loc.path.lstrip("/"), safe="/")
        return f"{server.rstrip('/')}/{repository}/blob/{commit}/{path}{anchor}"

    return link


def _where(loc: Location | None, link: Link | None) -> str:
    if loc is None:
        return "(no place in the change)"
    text = md(loc.shown, 300)
    url = link(loc) if link is not None else None
    return f"[{text}]({url})" if url else text


def _voices(f: Finding) -> str:
    said = ", ".join(f"{m.voice_id} {m.runtime} ({m.family})" for m in f.members)
    return md(said or ", ".join(f.voice_ids), 300)


def _line(f: Finding, link: Link | None) -> str:
    severity = f"**{f.severity}** · " if f.severity else ""
    labels = " · ".join(md(label, 40) for label in f.labels if label != "consensus")
    extra = f" · {labels}" if labels else ""
    families = md(", ".join(f.families) or "no confirmed family", 200)
    return (
        f"- {severity}{_where(f.location, link)} · {md(f.text)}{extra} "
        f"— *{families}* ({_voices(f)})"
    )


def comment_body(reviewed: Reviewed, link: Link | None = None) -> str:
    """The whole comment, the hidden marker first so the comment can be found and updated."""
    res = reviewed.result
    gate = reviewed.gate
    found = reviewed.findings
    diff = reviewed.diff
    verdict = {"pass": "PASS", "fail": "FAIL", "no-verdict": "NO VERDICT"}[gate.verdict]
    stamp = md(res.stamp_label() or "no stamp", 200) if res is not None else "no council"
    added, removed = diff.counts()
    files = len(diff.files) + len(diff.unread)
    out = [MARKER, f"### rune council review: {verdict} · {stamp}", ""]
    if res is None:
        out.append(f"**Bottom line:** nothing to review: {md(diff.source)} changes no file.")
        return "\n".join(out) + "\n"
    agreed, dissent = found.consensus(), found.dissent()
    deciding = [f for f in found.findings if decides(f)]
    out.append(
        f"**Bottom line:** {verdict} under `--fail-on {gate.fail_on}`: {md(gate.reason)}. "
        f"{len(agreed)} finding(s) agreed across model families, {len(dissent)} kept as "
        f"dissent, {len(deciding)} needing a decision."
    )
    out.append("")
    families = md(", ".join(res.distinct_families) or "none confirmed", 200)
    out.append(
        f"Stamp **{stamp}** (families: {families}) · run `{res.id}` · "
        f"{res.voices_valid} of {res.voices_requested} voice(s) valid · change: "
        f"{md(diff.source, 300)}, {files} file(s), +{added} -{removed}"
    )
    if res.decorrelation == "NO_DECORRELATION":
        out.append("")
        out.append(
            "> NO_DECORRELATION: the voices may share one model family's bias; their "
            "agreement is not consensus."
        )
    sections: list[tuple[str, list[str]]] = [
        (
            "Consensus (agreed across model families, evidence verified)",
            [_line(f, link) for f in agreed],
        ),
        ("Dissent", [_line(f, link) for f in dissent]),
        ("Needs decision", [_line(f, link) for f in deciding]),
    ]
    # The council's own words about what needs deciding name the same claims as the
    # findings above; a remark about the whole council (a split on the question) has no
    # finding, so it is listed here.
    sections[2][1].extend(f"- {md(r.text)} · {md(r.label, 40)}" for r in found.remarks)
    for title, lines in sections:
        out += ["", f"#### {title}", ""]
        out += lines or ["- none"]
    if reviewed.artifact.left_out:
        out += ["", "<details><summary>Left out of the review</summary>", ""]
        out += [f"- {md(note, 400)}" for note in reviewed.artifact.left_out]
        out += ["", "</details>"]
    return _capped("\n".join(out) + "\n")


def _capped(body: str) -> str:
    if len(body) <= COMMENT_CAP:
        return body
    cut = body.rfind("\n", 0, COMMENT_CAP - 200)
    return body[:cut] + "\n\n*The comment is cut here; the SARIF and the run file hold it all.*\n"


__all__ = ["MARKER", "blob_link", "comment_body", "md"]
