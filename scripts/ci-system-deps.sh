#!/usr/bin/env bash
# System packages the test suite uses beyond Python, from Debian's archive:
#   pgbouncer  tests/integration/test_pgbouncer.py
#   chromium   tests/integration/test_report_browser.py (the HTML report drawn headless; marked `browser`)
# The tests skip without them, saying to run this; `make test` runs it first when either is missing.
# Idempotent: installs only what is missing, with at most one `apt-get update`, non-interactively.
# Where it cannot install (no apt-get, not root, no passwordless sudo) it fails with one line saying what to run.
set -euo pipefail

packages=(pgbouncer chromium)

missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done
if [ "${#missing[@]}" -eq 0 ]; then
  echo "ci-system-deps: already installed: ${packages[*]}"
  exit 0
fi

cannot_install() {
  echo "install ${missing[*]}: sudo apt-get install ${missing[*]} (or run bash scripts/ci-system-deps.sh as root)" >&2
  exit 1
}
command -v apt-get >/dev/null 2>&1 || cannot_install
as_root=()
if [ "$(id -u)" -ne 0 ]; then
  sudo -n true 2>/dev/null || cannot_install
  as_root=(sudo -n)
fi

echo "ci-system-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${as_root[@]}" apt-get update -qq
"${as_root[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
