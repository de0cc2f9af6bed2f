"""What the operator decided when starting the server; no request can change any of it."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from ..core.errors import RequestError

TOKEN_ENV = "RUNE_COUNCIL_SERVE_TOKEN"
# A council request is a question and perhaps an artifact as text; a megabyte is generous.
DEFAULT_MAX_BODY = 1_000_000
DEFAULT_PORT = 8765


@dataclass(frozen=True)
class ServeSettings:
    rune_dir: Path
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    token: str | None = None
    max_concurrent: int = 4
    max_queued: int = 32
    artifact_root: Path | None = None
    # True: the operator said --yes. None: defer to the environment, council.toml or an
    # earlier yes, exactly as the CLI does. Never taken from a request.
    allow_external: bool | None = None
    cors_origins: tuple[str, ...] = ()
    # Names the server is reached by besides its loopback address (a reverse proxy's Host,
    # a LAN name), and the browser origins of pages it serves there.
    allow_hosts: tuple[str, ...] = ()
    allow_origins: tuple[str, ...] = ()
    # Where the token came from, for the startup line and the error messages.
    token_source: str | None = None
    max_body_bytes: int = DEFAULT_MAX_BODY
    # The operator's subagent flags; without them a council seats council.toml's
    # [subagent] itself, by the library's one precedence rule.
    subagent_command: str | None = None
    subagent_family: str | None = None
    retry_after_s: int = 5

    def check(self) -> None:
        """Refuse settings that would expose councils: a non-loopback bind needs a token."""
        if self.max_concurrent < 1:
            raise RequestError("--max-concurrent must be at least 1")
        if self.max_queued < 0:
            raise RequestError("--max-queued must be 0 or more")
        if self.max_body_bytes < 1024:
            raise RequestError("--max-body-bytes must be at least 1024")
        if not is_loopback(self.host) and not self.token:
            raise RequestError(
                f"refusing to listen on {self.host}: anything but a loopback address needs a "
                f"bearer token ({TOKEN_HOWTO})"
            )
        if (self.allow_hosts or self.allow_origins) and not self.token:
            given = "--allow-host" if self.allow_hosts else "--allow-origin"
            raise RequestError(
                f"refusing to start: {given} lets the server be reached beyond this machine's "
                f"loopback, which needs a bearer token ({TOKEN_HOWTO})"
            )
        for name in self.allow_hosts:
            host_name(name)
        for origin in self.allow_origins:
            origin_name(origin, "--allow-origin")
        for origin in self.cors_origins:
            origin_name(origin, "--cors-origin")
        if self.token is not None and len(self.token) < 16:
            raise RequestError(f"${TOKEN_ENV} is too short: use at least 16 characters")
        if self.artifact_root is not None and not self.artifact_root.is_dir():
            raise RequestError(f"--artifact-root {self.artifact_root} is not a directory")


TOKEN_HOWTO = f"--require-token, --token-file PATH or ${TOKEN_ENV}"


def host_name(name: str) -> str:
    """``name`` as a ``Host`` header carries it (lower case, port kept), or a RequestError."""
    text = name.strip().lower()
    parts = urlsplit(f"//{text}")
    try:
        parts.port  # noqa: B018  (raises on a port that is not a number)
    except ValueError:
        parts = urlsplit("//")
    if not text or not parts.hostname or parts.netloc != text or "@" in text:
        raise RequestError(f"--allow-host {name!r} is not a host name (NAME or NAME:PORT)")
    return text


def origin_name(origin: str, flag: str = "--allow-origin") -> str:
    """``origin`` as a browser sends it in ``Origin`` (scheme://host[:port]), or a RequestError."""
    text = origin.strip().lower().rstrip("/")
    parts = urlsplit(text)
    try:
        parts.port  # noqa: B018
    except ValueError:
        parts = urlsplit("")
    if (
        parts.scheme not in ("http", "https")
        or not parts.hostname
        or "@" in parts.netloc
        or parts.path
        or parts.query
        or parts.fragment
    ):
        raise RequestError(
            f"{flag} {origin!r} is not one browser origin "
            "(scheme://host[:port], e.g. https://council.example)"
        )
    return f"{parts.scheme}://{parts.netloc}"


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
