#!/usr/bin/env bash
# Install what the end-to-end suite runs, from this repository's own files:
#   - the pinned AI CLIs from npm (package.json + package-lock.json) into tests/e2e/node_modules
#   - aider, pinned in aider-requirements.txt, into its own virtualenv .e2e/aider-venv at the repository root
# Each part is skipped when it is already installed from the same pins, so a second run
# takes a fraction of a second. PYTHON picks the interpreter for aider's venv (3.10-3.12).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
python="${PYTHON:-python3}"

digest() { sha256sum "$@" | sha256sum | cut -d' ' -f1; }

npm_stamp="$here/node_modules/.rune-installed"
want="$(digest "$here/package.json" "$here/package-lock.json")"
if [[ -f "$npm_stamp" && "$(cat "$npm_stamp")" == "$want" ]]; then
    echo "install.sh: npm CLIs already installed"
else
    # `npm install` from the lock, not `npm ci`: the lock cannot list the other platforms'
    # optional binaries this registry does not serve, and `npm ci` refuses such a lock.
    # With the lock present, `npm install` installs exactly its versions and leaves it as is.
    npm install --prefix "$here" --no-audit --no-fund --loglevel=error
    echo "$want" > "$npm_stamp"
fi

venv="$(cd "$here/../.." && pwd)/.e2e/aider-venv"
aider_stamp="$venv/.rune-installed"
want="$(digest "$here/aider-requirements.txt")-$("$python" -c 'import sys; print(sys.version_info[:2])' | tr -d ' (),')"
if [[ -f "$aider_stamp" && "$(cat "$aider_stamp")" == "$want" && -x "$venv/bin/aider" ]]; then
    echo "install.sh: aider already installed"
else
    rm -rf "$venv"
    "$python" -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check -r "$here/aider-requirements.txt"
    "$venv/bin/aider" --version >/dev/null
    echo "$want" > "$aider_stamp"
fi
