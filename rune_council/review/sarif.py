"""The findings as SARIF 2.1.0, the way GitHub code scanning reads an upload.

One result per finding, at its file and line (``artifactLocation.uri`` relative to the
repository root, percent-encoded), its level the council's own classification
(``findings.level_of``), a rule per kind of finding, and a fingerprint that holds still when
unrelated lines move. The run's properties carry the decorrelation stamp, the run id and
the gate's verdict; each result's carry its voices, families and labels. Text from voices is
data here: JSON escapes it, and it is bounded.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from .artifact import visible
from .findings import Finding
from .run import Reviewed

SARIF_SCHEMA = (
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
)
SARIF_VERSION = "2.1.0"
TOOL = "rune-council"
INFORMATION_URI = "https://pypi.org/project/rune-council/"
FINGERPRINT_KEY = "runeCouncilFinding/v1"
SRCROOT = "%SRCROOT%"
MESSAGE_CAP = 4000

# (rule id, level, what it means): every kind of finding, so an upload's rules never vary.
_AGREED = "Two or more model families agreed, with evidence the council verified, on"
RULES: tuple[tuple[str, str, str], ...] = (
    ("consensus-must", "error", f"{_AGREED} a MUST finding: wrong as written."),
    ("consensus-should", "warning", f"{_AGREED} a SHOULD finding."),
    ("consensus-may", "warning", f"{_AGREED} a MAY finding (hardening)."),
    ("consensus-unrated", "warning", f"{_AGREED} a finding none of them rated."),
    ("dissent-single-voice", "note", "One voice made this claim; no other family agreed."),
    (
        "dissent-unverified",
        "note",
        "Voices agreed, but not as consensus: not two confirmed "
        "families, or evidence the council could not verify.",
    ),
    ("dissent-disagreement", "note", "Voices cited the same place and said opposite things."),
    (
        "dissent-correlated-penalty",
        "note",
        "Near-verbatim wording from voices that may share a model family: treat them as one voice.",
    ),
    (
        "dissent-framing-sensitive",
        "note",
        "The finding did not hold with the question put the other way round.",
    ),
)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("rune-council")
    except PackageNotFoundError:
        return "0"


def _text(text: str, cap: int = MESSAGE_CAP) -> str:
    text = visible(" ".join(text.split()))
    return text if len(text) <= cap else text[: cap - 3] + "..."


def uri_of(path: str) -> str:
    """A repository path as a relative URI reference: every byte outside the unreserved set
    (and the separators) percent-encoded, so a name with a newline, ``#`` or ``%`` stays one
    path."""
    return quote(path.lstrip("/"), safe="/")


def _message(f: Finding) -> str:
    severity = f"[{f.severity}] " if f.severity else ""
    who = ", ".join(f.families) or "no confirmed family"
    return _text(f"{severity}{f.text} ({f.rule}; {len(f.voice_ids)} voice(s): {who})")


def _result(f: Finding, rule_index: dict[str, int]) -> dict[str, Any]:
    result: dict[str, Any] = {
        "ruleId": f.rule,
        "ruleIndex": rule_index[f.rule],
        "level": f.level,
        "kind": "fail",
        "message": {"text": _message(f)},
        "partialFingerprints": {FINGERPRINT_KEY: f.fingerprint},
        "properties": {
            "classification": f.kind,
            "labels": list(f.labels),
            "severity": f.severity,
            "voices": list(f.voice_ids),
            "families": list(f.families),
            "claimIds": list(f.claim_ids),
            "needsDecision": f.needs_decision,
            "detail": _text(f.detail, 1000),
            "members": [
                {
                    "voice": m.voice_id,
                    "runtime": m.runtime,
                    "family": m.family,
                    "text": _text(m.text, 1000),
                }
                for m in f.members
            ],
        },
    }
    loc = f.location
    if loc is not None:
        physical: dict[str, Any] = {
            "artifactLocation": {"uri": uri_of(loc.path), "uriBaseId": SRCROOT}
        }
        if loc.line is not None:
            physical["region"] = {"startLine": loc.line}
        result["locations"] = [{"physicalLocation": physical}]
        result["properties"]["fileStatus"] = loc.status
    return result


def sarif_log(reviewed: Reviewed) -> dict[str, Any]:
    """The SARIF log of one review: one run, one result per finding."""
    rule_index = {rule: k for k, (rule, _, _) in enumerate(RULES)}
    rules = [
        {
            "id": rule,
            "name": "".join(part.capitalize() for part in rule.split("-")),
            "shortDescription": {"text": what.split(":")[0].rstrip(".")},
            "fullDescription": {"text": what},
            "defaultConfiguration": {"level": level},
            "help": {"text": what},
        }
        for rule, level, what in RULES
    ]
    res = reviewed.result
    gate = reviewed.gate
    diff = reviewed.diff
    properties: dict[str, Any] = {
        "range": _text(diff.source, 500),
        "base": diff.base,
        "head": diff.head,
        "gate": {"failOn": gate.fail_on, "verdict": gate.verdict, "reason": gate.reason},
        "leftOut": [_text(n, 500) for n in reviewed.artifact.left_out],
        "remarks": [
            {"label": r.label, "text": _text(r.text, 1000), "voices": list(r.voice_ids)}
            for r in reviewed.findings.remarks
        ],
    }
    if res is not None:
        properties.update(
            {
                "decorrelation": res.decorrelation,
                "stamp": res.stamp_label(),
                "runId": res.id,
                "distinctFamilies": res.distinct_families,
                "voicesValid": res.voices_valid,
                "voicesRequested": res.voices_requested,
                "needsDecision": res.needs_decision,
                "decision": _text(res.decision, 2000) if res.decision else None,
            }
        )
    run: dict[str, Any] = {
        "tool": {
            "driver": {
                "name": TOOL,
                "version": _version(),
                "informationUri": INFORMATION_URI,
                "rules": rules,
            }
        },
        "invocations": [
            {
                "executionSuccessful": res is None or res.voices_valid > 0,
                "exitCode": int(gate.code),
                "exitCodeDescription": gate.reason,
            }
        ],
        "columnKind": "unicodeCodePoints",
        "results": [_result(f, rule_index) for f in reviewed.findings.findings],
        "properties": properties,
    }
    return {"$schema": SARIF_SCHEMA, "version": SARIF_VERSION, "runs": [run]}


__all__ = ["FINGERPRINT_KEY", "RULES", "SARIF_SCHEMA", "sarif_log", "uri_of"]
