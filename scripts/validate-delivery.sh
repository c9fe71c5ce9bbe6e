#!/usr/bin/env bash
# Offline checks of the delivery files (part of `make test`): the compose file against the
# compose-spec schema, the Kubernetes manifests with kubernetes-validate --strict, and the
# settings both pass against what the binaries read (`--check-config`). The validators
# are installed once into the machine's tools folder (scripts/tools-dir.sh) from PyPI;
# after that nothing needs the network.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/tools-dir.sh

validators="kubernetes-validate==1.37.0 check-jsonschema==0.39.0 pyyaml==6.0.4"
venv="$tools_dir/validate-venv-k8s1.37.0-jsonschema0.39.0-yaml6.0.4"
install_validators() {
    [[ -f "$venv/.installed" ]] && return
    rm -rf "$venv"
    python3 -m venv "$venv"
    # shellcheck disable=SC2086
    "$venv/bin/pip" install --quiet --disable-pip-version-check $validators
    touch "$venv/.installed"
}
with_tools_lock install_validators

echo "== compose file against the compose-spec schema"
"$venv/bin/check-jsonschema" --builtin-schema vendor.compose-spec docker-compose.yml

echo "== Kubernetes manifests (strict, 1.33): each file, then what kustomize renders"
# deploy/compose holds compose's configuration files, not manifests.
manifests=$(find deploy/base deploy/overlays -name '*.yaml' ! -name kustomization.yaml | sort)
# shellcheck disable=SC2086
"$venv/bin/kubernetes-validate" --strict -k 1.33.0 $manifests
if command -v kubectl >/dev/null 2>&1; then
    rendered=$(mktemp -d)
    trap 'rm -rf "$rendered"' EXIT
    for kustomization in $(find deploy/base deploy/overlays -name kustomization.yaml -printf '%h\n' | sort); do
        echo "-- kubectl kustomize $kustomization"
        kubectl kustomize "$kustomization" >"$rendered/out.yaml"
        "$venv/bin/kubernetes-validate" --strict -k 1.33.0 "$rendered/out.yaml"
    done
else
    echo "!! no kubectl: the kustomize renderings of deploy/base and deploy/overlays/* are NOT checked" >&2
fi

echo "== settings in compose and manifests are ones the binaries read"
"$venv/bin/python" scripts/check_delivery_env.py

echo "delivery checks passed"
