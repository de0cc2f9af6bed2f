"""``python -m rune_council.serve``: what ``rune council serve`` runs.

The command line door hands its process over to this one (``exec``) instead of importing it:
the doors stand side by side, and this one needs the ``serve`` extra.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ..core.errors import CouncilError, ExitCode, exit_code_for
from ..core.safetext import plain

PROG = "rune council serve"


def _say(line: str) -> None:
    """One line on stderr, inert: an error's text, a path or a host can carry escapes."""
    print(plain(line), file=sys.stderr)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG,
        description="Serve councils over HTTP, with a live web view at /. Requests must come "
        "from this server's own pages or from programs, never from another web page. Other "
        "accounts on this machine can reach a loopback server too: on a shared machine use "
        "--require-token. Any address but loopback, --allow-host and --allow-origin need a "
        "token.",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (127.0.0.1)")
    p.add_argument("--port", type=int, default=8765, help="port to listen on (8765)")
    p.add_argument("--max-concurrent", type=int, default=4, help="councils that run at once (4)")
    p.add_argument(
        "--max-queued", type=int, default=32, help="councils that may wait; beyond, 429 (32)"
    )
    p.add_argument(
        "--artifact-root", type=Path, help="directory requests may name artifact files under"
    )
    p.add_argument(
        "--cors-origin", action="append", default=[], help="allow this browser origin; repeatable"
    )
    p.add_argument(
        "--require-token",
        action="store_true",
        help="require a bearer token: $RUNE_COUNCIL_SERVE_TOKEN, else the per-user token file "
        "(made on first use, mode 0600)",
    )
    p.add_argument(
        "--token-file", type=Path, help="require the token kept in this file (made if missing)"
    )
    p.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="also answer to this Host (NAME or NAME:PORT; a reverse proxy, a LAN name); "
        "needs a token; repeatable",
    )
    p.add_argument(
        "--allow-origin",
        action="append",
        default=[],
        metavar="URL",
        help="the browser origin the server is reached at behind a proxy "
        "(https://council.example); needs a token; repeatable",
    )
    p.add_argument(
        "--max-body-bytes", type=int, default=1_000_000, help="largest request body (1 MB)"
    )
    p.add_argument("--subagent-cmd", help="command answering a prompt on stdin; takes empty slots")
    p.add_argument("--subagent-family", help="model family of the subagent command")
    p.add_argument("--rune-dir", type=Path, help="where .rune files go (default ./.rune)")
    p.add_argument(
        "--yes",
        "-y",
        action="store_true",
        help="allow councils to use the external AI CLIs found (no request can grant this)",
    )
    p.add_argument("--log-level", default="warning", help="uvicorn log level (warning)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    from ..config import load_config
    from ..core.paths import RuneDir
    from .settings import TOKEN_ENV, ServeSettings
    from .token import default_token_file, load_or_create

    token = os.environ.get(TOKEN_ENV) or None
    token_source = f"${TOKEN_ENV}" if token else None
    try:
        where = RuneDir.resolve(args.rune_dir)
        council_dir = where.council_dir  # a rune directory it refuses is said before serving
        load_config(where)  # a council.toml that cannot be read is said now, not per council
        if args.token_file is not None or (args.require_token and token is None):
            token_path = (args.token_file or default_token_file()).expanduser().absolute()
            token = load_or_create(token_path)
            token_source = str(token_path)
    except CouncilError as exc:
        _say(f"rune council: {exc}")
        return exit_code_for(exc)
    settings = ServeSettings(
        rune_dir=where.root,
        host=args.host,
        port=args.port,
        token=token,
        token_source=token_source,
        max_concurrent=args.max_concurrent,
        max_queued=args.max_queued,
        artifact_root=args.artifact_root.absolute() if args.artifact_root else None,
        allow_external=True if args.yes else None,
        cors_origins=tuple(args.cors_origin),
        allow_hosts=tuple(args.allow_host),
        allow_origins=tuple(args.allow_origin),
        max_body_bytes=args.max_body_bytes,
        subagent_command=args.subagent_cmd,
        subagent_family=args.subagent_family,
    )
    try:
        settings.check()
        from .server import serve
    except CouncilError as exc:
        _say(f"rune council: {exc}")
        return exit_code_for(exc)
    except ImportError as exc:
        _say(
            f"rune council: serve needs the serve extra ({exc.name} is missing): "
            "pip install 'rune-council[serve]'"
        )
        return ExitCode.BAD_INPUT  # a missing extra is bad input, as elsewhere
    # A browser sent to 0.0.0.0 would name it in Host, which no server answers to.
    shown = "127.0.0.1" if args.host in ("0.0.0.0", "::", "[::]", "") else args.host
    shown = f"[{shown.strip('[]')}]" if ":" in shown else shown
    url = f"http://{shown}:{args.port}/"
    _say(f"{PROG}: {url} (run files in {council_dir})")
    if token is not None and token_source is not None and token_source != f"${TOKEN_ENV}":
        # The fragment never reaches a server or a proxy log; the page trades it for a
        # cookie and drops it from the address bar. Only a terminal gets the token itself.
        if sys.stderr.isatty():
            _say(f"{PROG}: token required; open {url}#token={token}")
        else:
            _say(
                f"{PROG}: token required; it is in {token_source} "
                f"(open {url}#token=<token>, or paste it on the page)"
            )
    elif token is not None:
        _say(f"{PROG}: token required (from {token_source})")
    else:
        _say(
            f"{PROG}: no token: web pages cannot use it, but every account on this machine "
            "can (on a shared machine, use --require-token)"
        )
    serve(settings, log_level=args.log_level)
    return ExitCode.OK


if __name__ == "__main__":
    sys.exit(main())
