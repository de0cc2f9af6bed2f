"""The council setups shipped with the package, as data: one TOML file per template
(``<name>.toml``, the keys of a ``[templates.NAME]`` table) and ``chains.toml`` (the keys of
``[chains.NAME]`` tables). ``rune_council.config`` validates them with the same models as a
user's ``council.toml``; this module only finds and reads the files.
"""

from __future__ import annotations

from importlib import resources

CHAINS_FILE = "chains.toml"


def _files() -> list[str]:
    return sorted(
        entry.name
        for entry in resources.files(__name__).iterdir()
        if entry.name.endswith(".toml") and entry.is_file()
    )


def template_names() -> list[str]:
    return [name[: -len(".toml")] for name in _files() if name != CHAINS_FILE]


def read_template(name: str) -> bytes:
    return resources.files(__name__).joinpath(f"{name}.toml").read_bytes()


def read_chains() -> bytes:
    return resources.files(__name__).joinpath(CHAINS_FILE).read_bytes()
