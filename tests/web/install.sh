#!/usr/bin/env bash
# Debian's chromium for the browser tests of the web view (Playwright drives it through
# executable_path; Playwright's own browser download is never used). Idempotent: does
# nothing when /usr/bin/chromium is already there.
set -euo pipefail
if [[ -x /usr/bin/chromium ]]; then
    exit 0
fi
if [[ "$(id -u)" != 0 ]]; then
    if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
        exec sudo -n bash "$0" "$@"
    fi
    echo "tests/web/install.sh: /usr/bin/chromium is missing and installing it needs root" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
test -x /usr/bin/chromium
