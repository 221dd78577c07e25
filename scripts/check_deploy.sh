#!/usr/bin/env bash
# Check deploy/: every kustomization renders with `kubectl kustomize`, every rendered object is valid
# against the Kubernetes schemas bundled with kubernetes-validate (offline), the layouts copy is in
# sync, and the RBAC of each overlay covers exactly the calls the agent makes on the simulator.
# Needs kubectl on PATH and the package installed with its `test` extra (pip install -e '.[test]').
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v kubectl >/dev/null 2>&1; then
  echo "check_deploy: kubectl is not on PATH; it renders deploy/ (kubectl kustomize)" >&2
  exit 1
fi

for kustomization in deploy/base deploy/overlays/*/; do
  kustomization=${kustomization%/}
  echo "== kubectl kustomize $kustomization"
  kubectl kustomize "$kustomization" >/dev/null
done

echo "== deploy tests (schemas, layouts copy, RBAC against the agent's calls)"
python -m pytest tests/integration/deploy "$@"
