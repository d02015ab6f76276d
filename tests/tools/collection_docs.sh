#!/usr/bin/env bash
# The collection's documentation as Galaxy and the Ansible docsite see it (make docs-check, a part of make static).
#
# 1. galaxy-importer, Galaxy's own import code, on the tarball `ansible-galaxy collection build` writes: the import must
#    report no error, and every module and filter must have documentation (one plugin without it makes ansible-doc fail
#    for its whole type, and Galaxy then shows the docs of none). tests/tools/collection_docs_check.py judges it.
# 2. `antsibull-docs lint-collection-docs --plugin-docs` on the checkout: the docs of every plugin and role entry point
#    validate against the docsite's schema, and every reference (M(), O(), RV()) points at something that exists.
#
# Both come from PyPI at the pinned versions below into their own environment, .build/docs-venv (pip's cache keeps a
# reinstall offline-fast), not into .venv: requirements.txt stays the toolchain everyone installs. The dependencies
# that galaxy.yml declares are taken from .venv's `ansible` package, as the other stages do, so no Galaxy access is needed.
# galaxy-importer's ansible-lint and ansible-test runs are off here: make lint and make sanity run both, stricter.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PYTHON=${PYTHON:-python3}
DOCS_VENV=${DOCS_VENV:-$ROOT/.build/docs-venv}
WORK=$ROOT/.build/collection-docs
# ansible-core as requirements.txt pins it, so that ansible-doc reads the docs as the rest of the toolchain does.
PINS=("galaxy-importer==0.4.44" "antsibull-docs==2.28.0" "$(grep '^ansible-core==' "$ROOT/requirements.txt")")
key=$({ printf '%s\n' "${PINS[@]}"; "$PYTHON" -c 'import sys; print(sys.version, sys.base_prefix)'; } | sha256sum | cut -c1-16)

if [[ ! -e $DOCS_VENV/.installed-$key ]]; then
    echo "Installing ${PINS[*]} into $DOCS_VENV"
    rm -rf "$DOCS_VENV"
    "$PYTHON" -m venv "$DOCS_VENV"
    # pip's output only when it fails: its warnings about the machine's index settings would bury this check's result.
    { "$DOCS_VENV/bin/pip" install --quiet --upgrade pip && "$DOCS_VENV/bin/pip" install --quiet "${PINS[@]}"; } \
        >"$ROOT/.build/docs-venv.log" 2>&1 || { cat "$ROOT/.build/docs-venv.log" >&2; exit 1; }
    touch "$DOCS_VENV/.installed-$key"
fi

bundled=$("$ROOT/.venv/bin/python" -c 'import ansible, pathlib; print(pathlib.Path(ansible.__file__).resolve().parents[1])')
rm -rf "$WORK"
mkdir -p "$WORK/tmp"
# Neither the repository's ansible.cfg (the lab's connection plugins, its collections path) nor ~/.ansible takes part.
: > "$WORK/ansible.cfg"
export ANSIBLE_CONFIG=$WORK/ansible.cfg ANSIBLE_HOME=$WORK/home ANSIBLE_LOCAL_TEMP=$WORK/tmp ANSIBLE_NOCOLOR=1
export PATH=$DOCS_VENV/bin:$PATH

"$DOCS_VENV/bin/ansible-galaxy" collection build --output-path "$WORK/dist" "$ROOT" >/dev/null
tarball=$(echo "$WORK"/dist/onprem-gpu-*.tar.gz)
"$DOCS_VENV/bin/python" "$ROOT/tests/tools/collection_docs_check.py" "$tarball" "$WORK"

# The checkout's dependencies from the bundled collections; the linter copies the collection and them to a temporary tree.
echo "antsibull-docs lint-collection-docs --plugin-docs ($("$DOCS_VENV/bin/antsibull-docs" --version | head -1))"
ANSIBLE_COLLECTIONS_PATH=$bundled "$DOCS_VENV/bin/antsibull-docs" lint-collection-docs --plugin-docs "$ROOT"
echo "antsibull-docs: no problem in the docs of the plugins and roles"
