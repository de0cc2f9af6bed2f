"""The rules every other layer builds on: the voice contract and its errors, answer parsing,
prompts and schemas, bounded JSON and TOML, text made safe to print, secret redaction, the
``Runtime`` protocol and model families.

Nothing here imports the rest of the package; import the module you need, e.g.
``from rune_council.core.contract import PerspectiveRequest``.
"""
