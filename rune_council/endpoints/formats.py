"""Which output constraint each endpoint model takes, remembered for this user.

An endpoint that refuses the voice answer's ``json_schema`` (or ``json_object``) costs a
refused request on every call until someone remembers it. ``runtimes.http`` learns it from
the refusal and tells a ``UserFormatMemory``, which keeps it in the user's own config
directory (``endpoint-formats.json`` beside ``council.toml``), never under a project's
``.rune/``: a repository can ship anything there, and a planted entry would quietly take the
constraint off the user's voices. Entries are keyed by base URL and model, hold the rung of
``FORMAT_LADDER`` to start at, when and why it was learnt, and nothing from a request (no
key, no prompt). An entry older than ``FORMAT_TTL`` is not used, so a server upgraded since
is asked for the schema again.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..config import user_config_dir
from ..core.contract import ResponseFormatKind
from ..core.errors import CouncilError
from ..core.made import made
from ..core.safetext import one_line
from ..files import atomic_write_json
from ..safefile import read_capped

FORMATS_FILE = "endpoint-formats.json"
FORMAT_TTL = dt.timedelta(days=7)
MAX_ENTRIES = 500
_CAP = 2_000_000


# Both are built on first use: a machine that has never had a format refused has no file,
# and its councils never validate one.
class FormatEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    base_url: str = Field(max_length=2000)
    model: str = Field(max_length=500)
    start: ResponseFormatKind
    learned_at: str
    why: str = Field(default="", max_length=400)


class FormatsFile(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    schema_version: Literal["1"] = "1"
    entries: list[FormatEntry] = Field(default_factory=list)


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _age(entry: FormatEntry, now: dt.datetime) -> dt.timedelta | None:
    try:
        learned = dt.datetime.fromisoformat(entry.learned_at)
    except ValueError:
        return None
    if learned.tzinfo is None:
        return None
    return now - learned


class UserFormatMemory:
    """``runtimes.http.FormatMemory`` over ``<user config dir>/endpoint-formats.json``.

    A file that cannot be read is treated as empty and one that cannot be written is left
    as it is: forgetting costs one refused request next time, never a voice.
    """

    def __init__(self, directory: Path, *, now: dt.datetime | None = None) -> None:
        self.path = Path(directory) / FORMATS_FILE
        self._now = now

    @classmethod
    def for_user(cls, env: Mapping[str, str] | None = None) -> UserFormatMemory:
        return cls(user_config_dir(env))

    def _moment(self) -> dt.datetime:
        return self._now or _utcnow()

    def _load(self) -> FormatsFile:
        try:
            raw, cut = read_capped(self.path, _CAP)
            if cut:
                return made(FormatsFile)
            return FormatsFile.model_validate_json(raw)
        except (OSError, ValidationError, ValueError):
            return made(FormatsFile)  # nothing remembered: every field at its default

    def recall(self, base_url: str, model: str) -> ResponseFormatKind | None:
        now = self._moment()
        for entry in self._load().entries:
            if entry.base_url == base_url and entry.model == model:
                age = _age(entry, now)
                # A time in the future means a wrong clock then or now: do not trust it.
                if age is None or not dt.timedelta(0) <= age < FORMAT_TTL:
                    return None
                return entry.start
        return None

    def remember(self, base_url: str, model: str, kind: ResponseFormatKind, why: str) -> None:
        if len(base_url) > 2000 or len(model) > 500:
            return  # not a name this file keeps; the run still knows it
        now = self._moment()
        entry = FormatEntry(
            base_url=base_url,
            model=model,
            start=kind,
            learned_at=now.isoformat(timespec="seconds"),
            why=one_line(why, 400),
        )
        kept = [
            e for e in self._load().entries if not (e.base_url == base_url and e.model == model)
        ]
        kept.append(entry)
        kept = kept[-MAX_ENTRIES:]
        with contextlib.suppress(OSError, CouncilError):
            atomic_write_json(self.path, FormatsFile(entries=kept).model_dump(mode="json"))
