#!/usr/bin/env bash
# Run `ansible-test sanity` offline. ansible-test needs the collection under
# ansible_collections/<namespace>/<name>, so the checkout's files are copied into .build first.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
python_version="$("$repo/.venv/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
# Outside the checkout: inside it, ansible-test would list files through the checkout's git, which ignores .build.
workdir="$(mktemp -d "${TMPDIR:-/tmp}/onprem-gpu-sanity.XXXXXX")"
trap 'rm -rf "$workdir"' EXIT
target="$workdir/ansible_collections/onprem/gpu"

# ansible-test downloads a get-pip script from a host outside the package registries; give it ours.
pip_version="$("$repo/.venv/bin/python" - <<'PY'
import re, ansible_test, pathlib
source = pathlib.Path(ansible_test.__file__).parent.joinpath('_internal', 'python_requirements.py').read_text()
print(re.search(r"pip='([0-9.]+)'", source).group(1))
PY
)"
mkdir -p ~/.ansible/test/cache
cp "$repo/tests/sanity/offline_get_pip.py" ~/.ansible/test/cache/"get_pip_${pip_version//./_}.py"

mkdir -p "$target"
cd "$repo"
git ls-files -z --cached --others --exclude-standard | xargs -0 cp --parents -t "$target"
cd "$target"
"$repo/.venv/bin/ansible-test" sanity --venv --python "$python_version" --color no "$@"
