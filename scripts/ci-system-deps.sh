#!/usr/bin/env bash
# System packages the test suite uses beyond Python, from Debian's archive:
#   pgbouncer  tests/integration/test_pgbouncer.py (the test skips without it)
# Idempotent: installs only what is missing, with at most one `apt-get update`, non-interactively.
set -euo pipefail

packages=(pgbouncer)

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

if ! command -v apt-get >/dev/null 2>&1; then
  echo "ci-system-deps: no apt-get here; install ${missing[*]} by hand (the tests that need them skip)" >&2
  exit 0
fi
as_root=()
if [ "$(id -u)" -ne 0 ]; then
  as_root=(sudo -n)
fi

echo "ci-system-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${as_root[@]}" apt-get update -qq
"${as_root[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
