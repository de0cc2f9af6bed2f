#!/usr/bin/env bash
# Everything the test suite runs besides the Python packages of the `test` extra, from this
# repository's own files: the pinned real CLIs (tests/e2e), the two small real models and
# their loopback server (tests/real_models), and Debian's chromium for the browser tests
# (tests/web). Each step is idempotent, so a second run costs about a second. The README's
# test command and .ci/run both call this one script, so a newcomer installs what CI does.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
bash "$here/e2e/install.sh"
bash "$here/real_models/install.sh"
bash "$here/web/install.sh"
