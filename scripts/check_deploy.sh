#!/usr/bin/env bash
# Check deploy/: every kustomization renders with `kubectl kustomize`, every rendered object is valid
# against the Kubernetes schemas bundled with kubernetes-validate (offline), the layouts copy is in
# sync, and the RBAC of each overlay covers exactly the calls the agent makes on the simulator.
# Needs kubectl on PATH and the package installed with its `test` extra (pip install -e '.[test]'):
# PYTHON, else the checkout's .venv (activated or not), else python3.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-$( [[ -x .venv/bin/python ]] && echo .venv/bin/python || echo python3 )}
if ! "$python" -c 'import migagent, pytest' 2>/dev/null; then
  echo "check_deploy: $python cannot import migagent and pytest; set PYTHON to the interpreter of a checkout" \
    "installed with pip install -e '.[test]' (e.g. PYTHON=.venv/bin/python)" >&2
  exit 1
fi

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
"$python" -m pytest tests/integration/deploy "$@"
