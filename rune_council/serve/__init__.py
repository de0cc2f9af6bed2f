"""``rune council serve``: councils over HTTP and a live web view of their run files.

A door like the CLI: it parses a request, calls the same library function, and reads the
run files the library writes. Nothing here arbitrates or dispatches on its own.
Needs the ``serve`` extra (Starlette and uvicorn).
"""

from __future__ import annotations

from .settings import TOKEN_ENV, ServeSettings

__all__ = ["TOKEN_ENV", "ServeSettings"]
