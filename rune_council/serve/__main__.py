"""``python -m rune_council.serve``: what ``rune council serve`` runs.

The command line door hands its process over to this one (``exec``) instead of importing it:
the doors stand side by side, and this one needs the ``serve`` extra.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ..errors import CouncilError, ExitCode, exit_code_for

PROG = "rune council serve"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG,
        description="Serve councils over HTTP, with a live web view at /. Any address but "
        "loopback needs a bearer token in $RUNE_COUNCIL_SERVE_TOKEN.",
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
    from ..paths import RuneDir
    from .settings import TOKEN_ENV, ServeSettings

    where = RuneDir.resolve(args.rune_dir)
    try:
        config = load_config(where)
    except CouncilError as exc:
        print(f"rune council: {exc}", file=sys.stderr)
        return exit_code_for(exc)
    settings = ServeSettings(
        rune_dir=where.root,
        host=args.host,
        port=args.port,
        token=os.environ.get(TOKEN_ENV) or None,
        max_concurrent=args.max_concurrent,
        max_queued=args.max_queued,
        artifact_root=args.artifact_root.absolute() if args.artifact_root else None,
        allow_external=True if args.yes else None,
        cors_origins=tuple(args.cors_origin),
        max_body_bytes=args.max_body_bytes,
        subagent_command=args.subagent_cmd or config.subagent.command,
        subagent_family=args.subagent_family or config.subagent.family or "unknown",
    )
    try:
        settings.check()
        from .server import serve
    except CouncilError as exc:
        print(f"rune council: {exc}", file=sys.stderr)
        return exit_code_for(exc)
    except ImportError as exc:
        print(
            f"rune council: serve needs the serve extra ({exc.name} is missing): "
            "pip install 'rune-council[serve]'",
            file=sys.stderr,
        )
        return ExitCode.BAD_INPUT  # a missing extra is bad input, as elsewhere
    shown = f"[{args.host}]" if ":" in args.host else args.host
    print(
        f"{PROG}: http://{shown}:{args.port}/ (run files in {where.council_dir})", file=sys.stderr
    )
    serve(settings, log_level=args.log_level)
    return ExitCode.OK


if __name__ == "__main__":
    sys.exit(main())
