"""Named council setups: a template turns into the request a council runs.

A template (shipped under ``rune_council/templates/`` or written as ``[templates.NAME]`` in
``council.toml``) presets what a kind of review needs: mode, number of voices, each slot's
persona and framing, a preamble before the question, the artifact it expects, deliberation,
rounds and council type. It resolves here, in the library, so every door that builds a
``CouncilOptions(template=...)`` gets the same council. The caller's own settings win over
the template's: ``--template security-review --n 5`` is that review with five voices.
"""

from __future__ import annotations

import difflib
import hashlib
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

from ..core.contract import PerspectiveRequest, TemplateUse
from ..core.errors import RequestError
from ..core.paths import RuneDir
from ..core.records import record
from .request import parse_request

if TYPE_CHECKING:
    from ..config import ChainSpec, CouncilConfig, TemplateSpec
    from .options import CouncilOptions

Source = Literal["builtin", "user", "project"]


@record(frozen=True)
class Template:
    name: str
    spec: TemplateSpec
    source: Source
    path: str | None = None

    @property
    def use(self) -> TemplateUse:
        settings = self.spec.model_dump_json(exclude_none=True).encode("utf-8")
        return TemplateUse(
            name=self.name,
            version=self.spec.version,
            source=self.source,
            digest="sha256:" + hashlib.sha256(settings).hexdigest(),
        )

    def settings(self) -> dict[str, Any]:
        """The request keys this template sets, nested as a PerspectiveRequest nests them."""
        spec = self.spec
        out: dict[str, Any] = {}
        for key in ("mode", "n", "preamble", "artifact_kind"):
            value = getattr(spec, key)
            if value is not None:
                out[key] = value
        if spec.slots:
            out["slots"] = [s.model_dump(exclude_none=True) for s in spec.slots]
        if spec.require_anchor is not None:
            out["evidence"] = {"require_anchor": spec.require_anchor}
        deliberation: dict[str, Any] = {}
        for key in ("method", "council_type", "vote_threshold"):
            value = getattr(spec, key)
            if value is not None:
                deliberation[key] = value
        rounds = {
            name: value
            for name, value in (
                ("max_rounds", spec.rounds),
                ("on_divergence", spec.on_divergence),
                ("convergence_threshold", spec.convergence_threshold),
            )
            if value is not None
        }
        if rounds:
            deliberation["rounds"] = rounds
        if spec.summon:
            deliberation["summon"] = [s.model_dump(exclude_none=True) for s in spec.summon]
        if deliberation:
            out["deliberation"] = deliberation
        return out


@record(frozen=True)
class Chain:
    name: str
    spec: ChainSpec
    source: Source
    path: str | None = None

    @property
    def description(self) -> str:
        return self.spec.description or "runs " + " -> ".join(self.spec.steps)


def _source(config: CouncilConfig, part: str) -> tuple[Source, str | None]:
    found = config.source_of(part)
    if found is None:
        return "builtin", None
    return ("user" if found.scope == "user" else "project"), found.path


def templates(config: CouncilConfig) -> dict[str, Template]:
    """Every template by name: shipped ones, then council.toml's (which may replace them)."""
    from ..config import builtin_templates

    found = {name: Template(name, spec, "builtin") for name, spec in builtin_templates().items()}
    for name, spec in config.templates.items():
        source, path = _source(config, f"templates.{name}")
        found[name] = Template(name, spec, source, path)
    return dict(sorted(found.items()))


def chains(config: CouncilConfig) -> dict[str, Chain]:
    from ..config import builtin_chains

    found = {name: Chain(name, spec, "builtin") for name, spec in builtin_chains().items()}
    for name, spec in config.chains.items():
        source, path = _source(config, f"chains.{name}")
        found[name] = Chain(name, spec, source, path)
    return dict(sorted(found.items()))


def _unknown(kind: str, name: str, known: list[str]) -> RequestError:
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.5)
    hint = f" (closest: {close[0]})" if close else ""
    return RequestError(
        f"no {kind} named {name!r}{hint}; `rune council templates` lists them: {', '.join(known)}"
    )


def find_template(name: str, config: CouncilConfig) -> Template:
    known = templates(config)
    if name not in known:
        raise _unknown("template", name, list(known))
    return known[name]


def find_chain(name: str, config: CouncilConfig) -> Chain:
    known = chains(config)
    if name not in known:
        raise _unknown("chain", name, list(known))
    chain = known[name]
    steps = templates(config)
    for step in chain.spec.steps:
        if step not in steps:
            raise _unknown(f"template (step of chain {name!r})", step, list(steps))
    return chain


def _merge(under: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(under)
    for key, value in over.items():
        below = out.get(key)
        if isinstance(value, Mapping) and isinstance(below, Mapping):
            out[key] = _merge(below, value)
        else:
            out[key] = value
    return out


def caller_settings(request: PerspectiveRequest | Mapping[str, Any]) -> dict[str, Any]:
    """What the caller set itself: a model's explicitly set fields, or the mapping as given."""
    if isinstance(request, PerspectiveRequest):
        return request.model_dump(mode="json", exclude_unset=True)
    return dict(request)


def apply_template(
    request: PerspectiveRequest | Mapping[str, Any],
    template: Template,
    *,
    template_wins: bool = False,
) -> PerspectiveRequest:
    """The request with the template's settings where the caller left them open (or, for a
    chain's steps, ``template_wins``: the template's settings over the caller's)."""
    given = caller_settings(request)
    preset = template.settings()
    merged = _merge(given, preset) if template_wins else _merge(preset, given)
    merged["template"] = template.use.model_dump(mode="json")
    req = parse_request(merged)
    if template.spec.artifact_required and req.artifact is None:
        kind = template.spec.artifact_kind or "an artifact"
        raise RequestError(
            f"template {template.name!r} reviews {kind}: give one (--artifact FILE, or "
            "artifact in the request)"
        )
    return req


def config_for(options: CouncilOptions) -> CouncilConfig:
    """The settings templates and chains are looked up in: the caller's, else council.toml.

    Unlike seating, this reads council.toml even when the caller brings its own voices:
    templates are not voices, and a user's template should mean the same everywhere.
    """
    if options.config is not None:
        return options.config
    from ..config import load_config

    env = os.environ if options.env is None else options.env
    return load_config(RuneDir.resolve(options.rune_dir), env)


def resolve(
    request: PerspectiveRequest | Mapping[str, Any], options: CouncilOptions
) -> PerspectiveRequest | Mapping[str, Any]:
    """The request with ``options.template`` applied; as given when there is none."""
    if options.template is None:
        return request
    return apply_template(request, find_template(options.template, config_for(options)))
