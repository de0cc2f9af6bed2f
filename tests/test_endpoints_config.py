"""Endpoints by name in council.toml, presets, --endpoint arguments, and where keys come from."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path

import keyring
import pytest
from keyring.backend import KeyringBackend

from rune_council.config import trust_file
from rune_council.core.errors import RuntimeConfigError
from rune_council.core.paths import RuneDir
from rune_council.endpoints import (
    PRESETS,
    EndpointSpec,
    configured_endpoints,
    load_setup,
    setup_from_options,
    spec_from_argument,
)
from rune_council.endpoints.keys import resolve_key


@pytest.fixture(autouse=True)
def no_user_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    user_dir = tmp_path / "user-config"
    monkeypatch.setenv("RUNE_COUNCIL_CONFIG_DIR", str(user_dir))
    return user_dir


def rune_dir(tmp_path: Path, toml: str) -> RuneDir:
    (tmp_path / "council.toml").write_text(toml, encoding="utf-8")
    # The project's file is trusted, as its user would after reading it.
    with contextlib.suppress(RuntimeConfigError):  # a broken file: the test is about that
        trust_file(tmp_path / "council.toml")
    return RuneDir(tmp_path)


def test_a_preset_name_is_a_whole_endpoint(tmp_path: Path) -> None:
    where = rune_dir(
        tmp_path,
        """
[endpoints.nim]
prefer = ["meta/*"]

[endpoints.ollama]
models = ["llama3.1:8b"]
""",
    )
    specs = configured_endpoints(where)
    assert specs["nim"].base_url == "https://integrate.api.nvidia.com/v1"
    assert specs["nim"].key_env == "NVIDIA_API_KEY"
    assert specs["nim"].prefer == ("meta/*",)
    assert specs["ollama"].base_url == "http://127.0.0.1:11434/v1"
    assert not specs["ollama"].has_key_source
    assert specs["ollama"].models == ("llama3.1:8b",)


def test_a_named_endpoint_with_every_setting(tmp_path: Path) -> None:
    where = rune_dir(
        tmp_path,
        """
[endpoints.lab]
base_url = "http://gpu-box:8000/"
key_env = "LAB_KEY"
prefer = ["qwen/*"]
exclude = ["*-base"]
models = ["qwen/qwen2.5-72b-instruct"]
failover_on_failure = false
max_attempts = 2
stream = false
max_tokens = 2048

[subagent]
endpoint = "lab"
model = "qwen/qwen2.5-72b-instruct"
""",
    )
    setup = load_setup(where)
    [lab] = setup.endpoints
    assert lab == EndpointSpec(
        name="lab",
        base_url="http://gpu-box:8000/v1",  # a bare host gets the conventional /v1
        key_env="LAB_KEY",
        prefer=("qwen/*",),
        exclude=("*-base",),
        models=("qwen/qwen2.5-72b-instruct",),
        failover_on_failure=False,
        max_attempts=2,
        stream=False,
        max_tokens=2048,
    )
    assert setup.subagent is not None
    assert setup.subagent.endpoint.name == "lab"
    assert setup.subagent.model == "qwen/qwen2.5-72b-instruct"


@pytest.mark.parametrize(
    ("toml", "fragment"),
    [
        ('[endpoints.lab]\nbase_url = "http://h/v1"\ncolour = "red"', "colour: Extra inputs"),
        ('[endpoints.lab]\nkey_env = "X"', "needs base_url (or a preset"),
        ('[endpoints.lab]\npreset = "azure"', "unknown preset 'azure'"),
        ('[endpoints.lab]\nbase_url = "ftp://h"', "is not an http:// or https:// base URL"),
        ('[endpoints.lab]\nbase_url = "https://u:sk-secret@h/v1"', "carries credentials"),
        ('[endpoints.lab]\nbase_url = "https://h/v1?key=sk-1"', "query or fragment"),
        ('[endpoints.lab]\nbase_url = "http://h"\nmax_attempts = 0', "max_attempts"),
        ('[endpoints.lab]\nbase_url = "http://h"\nkey_env = "MY KEY"', "not an environment"),
        ('[endpoints."a b"]\nbase_url = "http://h"', "endpoint name 'a b'"),
        ("endpoints = 3", "[endpoints] must be a table"),
    ],
)
def test_a_bad_table_is_one_clear_error_naming_the_file(
    tmp_path: Path, toml: str, fragment: str
) -> None:
    where = rune_dir(tmp_path, toml)
    with pytest.raises(RuntimeConfigError) as caught:
        load_setup(where)
    message = str(caught.value)
    assert fragment in message
    assert "council.toml" in message
    assert "sk-secret" not in message and "sk-1" not in message


def test_endpoint_argument_is_a_url_a_preset_or_a_configured_name() -> None:
    lab = EndpointSpec(name="lab", base_url="http://h/v1", key_env="LAB_KEY")
    url = spec_from_argument("http://127.0.0.1:8080", key_env="MY_KEY", configured={"lab": lab})
    assert (url.name, url.base_url, url.key_env, url.required) == (
        "127.0.0.1-8080",
        "http://127.0.0.1:8080/v1",
        "MY_KEY",
        True,
    )
    assert spec_from_argument("nim", key_env=None, configured={}).key_env == "NVIDIA_API_KEY"
    # The preset's URL given by hand is the preset, and shares its discovery cache.
    by_url = spec_from_argument(PRESETS["nim"].base_url + "/", key_env=None, configured={})
    assert by_url.name == "nim"
    named = spec_from_argument("lab", key_env="OTHER", configured={"lab": lab})
    assert (named.base_url, named.key_env) == ("http://h/v1", "OTHER")
    with pytest.raises(RuntimeConfigError, match="neither an http"):
        spec_from_argument("openrouter", key_env=None, configured={"lab": lab})


def test_endpoint_flags_replace_the_configured_set_for_one_run(tmp_path: Path) -> None:
    where = rune_dir(tmp_path, '[endpoints.lab]\nbase_url = "http://h/v1"\n')
    assert [s.name for s in setup_from_options(where).endpoints] == ["lab"]
    chosen = setup_from_options(where, endpoints=["ollama"], refresh=True)
    assert [s.name for s in chosen.endpoints] == ["ollama"] and chosen.refresh
    with pytest.raises(RuntimeConfigError, match="--subagent-model needs"):
        setup_from_options(where, subagent_model="meta/x")


# --------------------------------------------------------------------------- keys


def test_key_from_the_environment() -> None:
    spec = EndpointSpec(name="lab", base_url="http://h/v1", key_env="LAB_KEY")
    key = resolve_key(spec, {"LAB_KEY": " sk-lab-123456 \n"})
    assert key is not None and key.reveal() == "sk-lab-123456"
    assert "sk-lab" not in str(key) and "sk-lab" not in repr(key)
    assert resolve_key(EndpointSpec(name="o", base_url="http://h/v1"), {}) is None


def test_a_missing_key_says_where_it_was_looked_for() -> None:
    spec = EndpointSpec(name="lab", base_url="http://h/v1", key_env="LAB_KEY")
    with pytest.raises(RuntimeConfigError, match=r"endpoint lab: no API key: \$LAB_KEY is not set"):
        resolve_key(spec, {"LAB_KEY": "  "})


class MemoryKeyring(KeyringBackend):
    priority = 1  # type: ignore[assignment]

    def __init__(self) -> None:
        super().__init__()
        self.store: dict[tuple[str, str], str] = {}

    def get_password(self, service: str, username: str) -> str | None:
        return self.store.get((service, username))

    def set_password(self, service: str, username: str, password: str) -> None:
        self.store[(service, username)] = password

    def delete_password(self, service: str, username: str) -> None:
        self.store.pop((service, username), None)


@pytest.fixture
def memory_keyring() -> Iterator[MemoryKeyring]:
    previous = keyring.get_keyring()
    backend = MemoryKeyring()
    keyring.set_keyring(backend)
    try:
        yield backend
    finally:
        keyring.set_keyring(previous)


def test_key_from_the_os_secret_store_when_the_variable_is_unset(
    memory_keyring: MemoryKeyring,
) -> None:
    spec = PRESETS["nim"]
    memory_keyring.set_password("rune-council", "nim", "nvapi-from-store-42")
    key = resolve_key(spec, {})
    assert key is not None and key.reveal() == "nvapi-from-store-42"
    assert key.source == "secret store rune-council/nim"
    # The variable, when set, wins.
    env_key = resolve_key(spec, {"NVIDIA_API_KEY": "nvapi-env"})
    assert env_key is not None and env_key.reveal() == "nvapi-env"


def test_an_empty_secret_store_is_named_in_the_error(memory_keyring: MemoryKeyring) -> None:
    with pytest.raises(RuntimeConfigError) as caught:
        resolve_key(PRESETS["nim"], {})
    assert "$NVIDIA_API_KEY is not set" in str(caught.value)
    assert "no entry for service 'rune-council', user 'nim'" in str(caught.value)


def test_without_keyring_installed_the_error_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "keyring", None)  # import keyring -> ImportError
    with pytest.raises(RuntimeConfigError) as caught:
        resolve_key(PRESETS["nim"], {})
    message = str(caught.value)
    assert "'keyring' package is not installed" in message
    assert "pip install 'rune-council[keyring]'" in message


def test_endpoints_from_the_user_config_and_the_project_overrides_by_name(
    tmp_path: Path, no_user_config: Path
) -> None:
    no_user_config.mkdir()
    (no_user_config / "council.toml").write_text(
        '[endpoints.nim]\nprefer = ["meta/*"]\n\n[endpoints.home]\nbase_url = "http://h:1"\n'
        '\n[subagent]\nendpoint = "nim"\n'
    )
    where = rune_dir(tmp_path, '[endpoints.nim]\nprefer = ["qwen/*"]\n')
    setup = load_setup(where)
    assert {s.name: s.prefer for s in setup.endpoints} == {"nim": ("qwen/*",), "home": ()}
    assert setup.subagent is not None and setup.subagent.endpoint.prefer == ("qwen/*",)
