"""What a headless AI CLI is to the council: its flags, environment, parser and family.

Each built-in CLI describes itself with one ``CliAdapter`` in ``runtimes/clis/<name>.py``;
user-defined (``[runtimes.NAME]``) and plug-in (``rune_council.runtimes`` entry point) CLIs
are adapters too, so every one of them goes through the same DETECT, consent and dispatch
rules.

An adapter hard-codes only the headless, read-only and output-format flags. Model and
endpoint choices stay in the user's own CLI configuration, which the adapter passes through
(its config directory and its own variables), so a council uses whatever the user set up.
"""

from __future__ import annotations

import os
import re
import signal
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from ..core.contract import AttemptOutcome, FamilyConfidence
from .auth import AuthProbe
from .backend_family import BackendReader
from .base import EnvPolicy
from .parsers import Parsed, one_line

PromptVia = Literal["stdin", "file"]
# A runtime name is a file-name-safe word: it appears in run files, paths and reports.
ADAPTER_NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,39}$")
# In an adapter's args, these stand for the private support directory and the prompt file.
SUPPORT_DIR = "{support_dir}"
PROMPT_FILE = "{prompt_file}"
# In ``answer_schema_args``, the file holding the voice answer's wire schema.
ANSWER_SCHEMA_FILE = "{answer_schema}"

# Keys a wrapper CLI may need, depending on which provider its user configured. A wrapper
# gets these (and only these) besides its own variables.
PROVIDER_KEY_NAMES = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "OPENAI_API_BASE",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "GOOGLE_GENERATIVE_AI_API_KEY",
    "OPENROUTER_API_KEY",
    "GROQ_API_KEY",
    "DEEPSEEK_API_KEY",
    "MISTRAL_API_KEY",
    "XAI_API_KEY",
    "TOGETHER_API_KEY",
    "FIREWORKS_API_KEY",
    "AZURE_API_KEY",
    "AZURE_API_BASE",
    "AZURE_API_VERSION",
    "OLLAMA_API_BASE",
    "OLLAMA_HOST",
)


def _no_names(env: Mapping[str, str]) -> list[str]:
    return []


@dataclass(frozen=True)
class CliAdapter:
    name: str
    executable: str
    model_family: str
    family_confidence: FamilyConfidence
    args: tuple[str, ...]
    env: EnvPolicy
    parse: Callable[[str, str], Parsed]
    version_args: tuple[str, ...] = ("--version",)
    extra_env_names: Callable[[Mapping[str, str]], list[str]] = field(default=_no_names)
    # A constant argument some CLIs insist on beside stdin (cline's --json mode). It is
    # part of the adapter, never anything from the question.
    fixed_prompt_arg: str | None = None
    prompt_via: PromptVia = "stdin"
    # Files written into a private directory for the run only; SUPPORT_DIR in args names it.
    support_files: Mapping[str, str] = field(default_factory=dict)
    # Set when the CLI cannot meet the dispatch safety rules: detected, never dispatched.
    ineligible: str | None = None
    # A wrapper fronts a model its user chose; ``backend`` reads that choice, if it can.
    wrapper: bool = False
    backend: BackendReader | None = None
    # Output that calls for exactly one more try of the same run (opencode's upgrade demand).
    retry_once_when: Callable[[str, str], bool] | None = None
    verified: Literal["real binary", "docs only"] = "real binary"
    # Processes of this CLI a batch runs at once unless council.toml says otherwise: each
    # is a whole agent process (hundreds of MB, its own rate limit with the vendor).
    max_concurrent: int = 4
    # Whether the CLI can answer, found out offline (runtimes/auth.py); None: not known how.
    auth: AuthProbe | None = None
    # Flags that hold the CLI's final answer to a JSON Schema (codex's --output-schema),
    # added only when a voice answer is wanted; ANSWER_SCHEMA_FILE names the schema's file.
    answer_schema_args: tuple[str, ...] = ()

    def argv(
        self,
        path: str,
        support_dir: str | None = None,
        prompt_file: str | None = None,
        answer_schema: str | None = None,
    ) -> list[str]:
        def fill(arg: str) -> str:
            if support_dir is not None:
                arg = arg.replace(SUPPORT_DIR, support_dir)
            if prompt_file is not None:
                arg = arg.replace(PROMPT_FILE, prompt_file)
            return arg

        argv = [path, *(fill(a) for a in self.args)]
        if answer_schema is not None:
            argv += [a.replace(ANSWER_SCHEMA_FILE, answer_schema) for a in self.answer_schema_args]
        if self.fixed_prompt_arg is not None:
            argv.append(self.fixed_prompt_arg)
        return argv

    @property
    def needs_support_dir(self) -> bool:
        return bool(self.support_files) or self.prompt_via == "file"


def _exit_words(code: int) -> str:
    if code >= 0:
        return f"exited {code}"
    try:
        return f"killed by {signal.Signals(-code).name}"
    except ValueError:
        return f"killed by signal {-code}"


def classify_exit(exit_code: int | None, parsed: Parsed) -> tuple[AttemptOutcome, str]:
    """Exit code and parsed output together decide whether the voice answered."""
    error = one_line(parsed.error) if parsed.error else None
    if exit_code not in (0, None):
        how = _exit_words(exit_code)
        return "exit_nonzero", f"{how}: {error}" if error else how
    if parsed.text is None:
        return "error_reported", error or "no answer in output"
    return "ok", "answered"


def adapter_env(
    adapter: CliAdapter,
    parent: Mapping[str, str] | None = None,
    allow: tuple[str, ...] = (),
) -> dict[str, str]:
    """The exact environment the adapter's CLI gets; ``allow`` adds names the user allows."""
    parent = dict(os.environ) if parent is None else parent
    return adapter.env.build(parent, [*adapter.extra_env_names(parent), *allow])
