#!/usr/bin/env bash
# Copy the shipped layouts into the kustomize base. kustomize's configMapGenerator only reads files
# inside the kustomization directory (unless every user passes --load-restrictor LoadRestrictionsNone),
# so deploy/base keeps a copy; tests/integration/deploy fails when the copy is stale.
set -euo pipefail
cd "$(dirname "$0")/.."
cp configs/mig-layouts/mig-layouts.yaml deploy/base/mig-layouts.yaml
echo "deploy/base/mig-layouts.yaml updated from configs/mig-layouts/mig-layouts.yaml"
