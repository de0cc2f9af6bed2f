"""AI CLIs the project has never heard of, added by the user in ``council.toml``.

A ``[runtimes.<name>]`` table in the user's ``~/.config/rune-council/council.toml`` or in
the project's ``.rune/council.toml`` (the project's wins for the same name, once the user
has trusted that file: see ``rune_council.config``)::

    [runtimes.mistral]
    command = "mistral-chat --headless --json"   # a string (split like a shell) or a list
    prompt = "stdin"           # or "file": the prompt goes to a private file that the
                               #   command names with {prompt_file}; never an argument
    output = "json"            # "text" (all of stdout), "json" (answer_path) or "regex"
    answer_path = "reply.text" # json: dotted path (list indexes allowed) to the answer
    answer_regex = "(?s)ANSWER:(.*)"   # regex: the first group is the answer
    error_regex = "^Error:"    # optional: output matching this is a failed voice, even on exit 0
    error_path = "error"       # json, optional: a truthy value here is a failed voice
    family = "mistral"         # the model family it speaks for (default unknown)
    confidence = "unknown"     # "confirmed" only if you know the backend
    version_args = ["--version"]  # the DETECT probe; [] skips it
    env = ["MISTRAL_API_KEY", "MISTRAL_*"]  # passed through besides the neutral base set

Every dispatch rule still applies: stdin or a private file, an empty temporary working
directory, the environment allowlist, the timeout and the tree kill.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..config import NO_ARGUMENT, CouncilConfig, RuntimeSpec
from ..core.errors import RuntimeConfigError
from .base import EnvPolicy
from .clis import BUILTIN

if TYPE_CHECKING:
    from .cli_adapter import CliAdapter
    from .parsers import Parsed

# With no ``[runtimes.*]`` table anywhere (the usual case) nothing here builds an adapter,
# so the adapter, parser and user-regex modules load in the functions that build one.

_NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,39}$")


def _lookup(doc: Any, path: str) -> Any:
    for part in path.split("."):
        if isinstance(doc, dict) and part in doc:
            doc = doc[part]
        elif (
            isinstance(doc, list)
            and part.lstrip("-").isdigit()
            and -len(doc) <= int(part) < len(doc)
        ):
            doc = doc[int(part)]
        else:
            return None
    return doc


def _parser(name: str, spec: RuntimeSpec) -> Callable[[str, str], Parsed]:
    from ..core.userregex import UserRegex, UserRegexTimeout
    from .parsers import Parsed, json_objects, parse_plain_text, tail

    # The user's patterns meet hostile output: every search is time-bounded (userregex).
    error_re = UserRegex(spec.error_regex, re.MULTILINE) if spec.error_regex else None
    answer_re = UserRegex(spec.answer_regex) if spec.answer_regex else None

    def parse(stdout: str, stderr: str) -> Parsed:
        try:
            return _parse(stdout, stderr)
        except UserRegexTimeout as exc:
            return Parsed(None, f"{name}: a configured regex gave up: {exc}")

    def _parse(stdout: str, stderr: str) -> Parsed:
        if error_re is not None and (error_re.search(stdout) or error_re.search(stderr)):
            return Parsed(None, f"{name} reported an error: {tail(stdout or stderr)}")
        if spec.output == "text":
            return parse_plain_text(stdout, stderr)
        if spec.output == "regex":
            assert answer_re is not None
            match = answer_re.search(stdout)
            text = match.group(1 if answer_re.groups else 0) if match else None
            if text and text.strip():
                return Parsed(text.strip())
            return Parsed(None, f"answer_regex found no answer in {name} output: {tail(stdout)}")
        assert spec.answer_path is not None
        for obj in reversed(json_objects(stdout)):
            if spec.error_path and _lookup(obj, spec.error_path):
                why = _lookup(obj, spec.error_path)
                return Parsed(None, f"{name} reported an error: {tail(json.dumps(why))}")
            value = _lookup(obj, spec.answer_path)
            if isinstance(value, str) and value.strip():
                return Parsed(value)
        return Parsed(None, f"nothing at {spec.answer_path!r} in {name} output: {tail(stdout)}")

    return parse


def _check(name: str, spec: RuntimeSpec) -> list[str]:
    """Problems pydantic cannot see: they involve several fields or the adapter registry."""
    from .cli_adapter import PROMPT_FILE

    problems: list[str] = []
    if not spec.defines_runtime:
        others = sorted(spec.model_fields_set - {"max_concurrent"})
        if others:
            problems.append(
                f"sets {', '.join(others)} without a command (a table without one may only "
                "set max_concurrent)"
            )
        return problems
    if not _NAME.match(name):
        problems.append("the name must be 1-40 of a-z 0-9 . _ - starting with a letter or digit")
    if name in BUILTIN:
        problems.append(f"'{name}' is a built-in adapter; pick another name")
    try:
        argv = spec.argv()
    except ValueError as exc:
        return [*problems, f"command cannot be parsed: {exc}"]
    if not argv or not argv[0].strip():
        problems.append("command is empty")
    if any("{prompt}" in a for a in argv):
        problems.append(NO_ARGUMENT)
    if spec.prompt == "file" and not any(PROMPT_FILE in a for a in argv):
        problems.append('prompt = "file" needs {prompt_file} in command')
    if spec.prompt == "stdin" and any(PROMPT_FILE in a for a in argv):
        problems.append('{prompt_file} in command needs prompt = "file"')
    if spec.output == "json" and not spec.answer_path:
        problems.append('output = "json" needs answer_path')
    if spec.output == "regex" and not spec.answer_regex:
        problems.append('output = "regex" needs answer_regex')
    return problems


def adapter_from_spec(name: str, spec: RuntimeSpec) -> CliAdapter:
    from .cli_adapter import CliAdapter

    argv = spec.argv()
    exact = tuple(e for e in spec.env if not e.endswith("*"))
    prefixes = tuple(e[:-1] for e in spec.env if e.endswith("*"))
    return CliAdapter(
        name=name,
        executable=argv[0],
        model_family=spec.family,
        family_confidence=spec.confidence if spec.family != "unknown" else "unknown",
        args=tuple(argv[1:]),
        env=EnvPolicy(names=exact, prefixes=prefixes),
        parse=_parser(name, spec),
        version_args=tuple(spec.version_args),
        prompt_via=spec.prompt,
        verified="docs only",
    )


def load_user_runtimes(config: CouncilConfig) -> list[CliAdapter]:
    """Adapters for the ``[runtimes.*]`` tables in force (the project's wins by name).

    Every table of every file is checked, those an untrusted project file had left out
    too, so a broken definition is reported the same before and after ``trust``; a problem
    raises one RuntimeConfigError naming the file, the runtime and every field at fault.
    """
    for source in config.sources:
        for name, spec in source.settings.runtimes.items():
            problems = _check(name, spec)
            if problems:
                raise RuntimeConfigError(f"{source.path}: [runtimes.{name}] {'; '.join(problems)}")
    return [
        adapter_from_spec(name, spec)
        for name, spec in config.runtimes.items()
        if spec.defines_runtime
    ]


def specs_digest(config: CouncilConfig) -> str:
    """Changes whenever a runtime definition in force does, so a cached detection is not
    reused for a different set."""
    tables = {
        name: spec.model_dump(mode="json", exclude={"max_concurrent"})
        for name, spec in config.runtimes.items()
        if spec.defines_runtime
    }
    blob = json.dumps(tables, sort_keys=True).encode("utf-8")
    return hashlib.sha256(blob).hexdigest()[:16]
