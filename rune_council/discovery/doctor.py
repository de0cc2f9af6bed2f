"""``rune council doctor``: can a council be held here, and if not, the one thing to do next.

Puts together what detection, the config loader, the consent rules and the endpoint survey
already know, without asking any model anything: every known CLI (found or not, version,
auth state, family), every configured endpoint, whether the project's council.toml is
trusted, and whether external dispatch has consent. Each problem comes with the single
command or setting that fixes it. A council is possible when at least two confirmed model
families are ready.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from ..config import CouncilConfig, load_config
from ..consent import ENV_ALLOW, decide
from ..core.contract import DetectedRuntime
from ..core.paths import RuneDir
from .assembly import detect_configured

MIN_FAMILIES = 2
Kind = Literal["cli", "endpoint"]


@dataclass(frozen=True)
class Row:
    kind: Kind
    name: str
    found: bool
    where: str | None  # the resolved binary, or the endpoint's base URL
    version: str | None
    auth: str | None  # ready, logged-out, unknown; None when nothing was checked
    evidence: str
    family: str
    family_confidence: str
    problem: str | None = None
    fix: str | None = None


@dataclass(frozen=True)
class ConfigFile:
    path: str
    scope: str
    trust: str  # own, trusted, changed, unknown
    problem: str | None = None
    fix: str | None = None


@dataclass
class Diagnosis:
    rows: list[Row]
    config_files: list[ConfigFile]
    consent: str
    consent_fix: str | None
    ready_families: list[str]
    detected_at: str | None
    from_cache: bool
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return len(self.ready_families) >= MIN_FAMILIES

    @property
    def fixes(self) -> list[str]:
        """Every next step, each once, in the order the screen shows the problems."""
        steps = [r.fix for r in self.rows if r.fix]
        steps += [c.fix for c in self.config_files if c.fix]
        if self.consent_fix:
            steps.append(self.consent_fix)
        return list(dict.fromkeys(steps))

    def as_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "ready_families": self.ready_families,
            "needed_families": MIN_FAMILIES,
            "runtimes": [asdict(r) for r in self.rows],
            "config_files": [asdict(c) for c in self.config_files],
            "consent": self.consent,
            "consent_fix": self.consent_fix,
            "detected_at": self.detected_at,
            "from_cache": self.from_cache,
            "fixes": self.fixes,
            "notes": self.notes,
        }


def cli_row(entry: DetectedRuntime) -> Row:
    found = entry.status != "unavailable" or entry.path is not None
    problem: str | None = None
    fix: str | None = None
    if entry.status == "ineligible":
        problem = entry.detail
    elif entry.status == "unavailable" and entry.path is not None:
        problem, fix = entry.detail, "rune council detect --refresh"
    elif entry.auth == "logged-out":
        # Not "cannot answer": a wrapper may still reach a free tier nobody chose for it.
        problem, fix = "logged out: a council does not seat it", entry.auth_fix
    elif entry.status == "available" and entry.family_confidence != "confirmed":
        problem = "its model family is unknown, so its agreement counts for no family"
    return Row(
        kind="cli",
        name=entry.runtime,
        found=found,
        where=entry.path,
        version=entry.version,
        auth=entry.auth,
        evidence=entry.auth_detail or ("" if found else entry.detail),
        family=entry.model_family,
        family_confidence=entry.family_confidence,
        problem=problem,
        fix=fix,
    )


def _config_files(config: CouncilConfig) -> list[ConfigFile]:
    files = []
    for source in config.sources:
        problem = fix = None
        if not source.trusted:
            why = " (changed since it was trusted)" if source.trust_state == "changed" else ""
            left = ", ".join(source.skipped) or "nothing"
            problem = f"not trusted{why}: left out {left}"
            fix = f"rune council trust {source.path}"
        files.append(ConfigFile(source.path, source.scope, source.trust_state, problem, fix))
    return files


async def _endpoint_rows(
    rune_dir: RuneDir, env: Mapping[str, str], config: CouncilConfig
) -> list[Row]:
    from ..endpoints import setup_from_options, survey

    setup = setup_from_options(rune_dir, with_subagent=False, env=env, config=config)
    rows = []
    for s in await survey(setup, rune_dir, env):
        families = sorted({c.family for c in s.ranked if c.confidence == "confirmed"})
        spec = next((e for e in setup.endpoints if e.name == s.name), None)
        problem = fix = None
        if s.key == "missing":
            auth = "logged-out"
            problem = "; ".join(s.notes) or "no API key"
            if spec is not None and spec.key_env:
                fix = f"export {spec.key_env}=<your key>"
        elif not s.ranked:
            auth = "unknown"
            problem = "; ".join(s.notes) or "no model to seat"
        else:
            auth = "ready"
        rows.append(
            Row(
                kind="endpoint",
                name=s.name,
                found=bool(s.ranked),
                where=s.base_url,
                version=None,
                auth=auth,
                evidence=f"key: {s.key}; {len(s.ranked)} model(s) from {s.source}",
                family=", ".join(families) or "unknown",
                family_confidence="confirmed" if families else "unknown",
                problem=problem,
                fix=fix,
            )
        )
    return rows


async def diagnose(
    rune_dir: RuneDir, env: Mapping[str, str], *, refresh: bool = False
) -> Diagnosis:
    config = load_config(rune_dir, env)
    report, from_cache = await detect_configured(rune_dir, env=env, refresh=refresh, config=config)
    rows = [cli_row(d) for d in report.detected]
    rows += await _endpoint_rows(rune_dir, env, config)
    ready: set[str] = set()
    for row in rows:
        if row.auth == "ready" and row.family_confidence == "confirmed":
            ready.update(f.strip() for f in row.family.split(","))
    consent = decide(None, env, config, rune_dir)
    if consent is None:
        # Not a problem: a council at a terminal asks, and --yes answers for a script.
        consent_words, consent_fix = "not given yet: a council asks for it, or pass --yes", None
    else:
        consent_words = consent.describe()
        consent_fix = None if consent.allowed else f"export {ENV_ALLOW}=1"
    return Diagnosis(
        rows=rows,
        config_files=_config_files(config),
        consent=consent_words,
        consent_fix=consent_fix,
        ready_families=sorted(ready),
        detected_at=report.checked_at,
        from_cache=from_cache,
        notes=list(config.notes),
    )
