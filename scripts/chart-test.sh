#!/usr/bin/env bash
# Lints and renders the Helm chart offline with the real Helm engine (PyPI: helm-python-sdk, no
# helm binary) and validates every manifest against the Kubernetes schema (kubernetes-validate).
set -euo pipefail
ROOT=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$ROOT"
command -v python3 >/dev/null || { echo "chart-test: python3 is required (apt-get install -y python3 python3-pip)" >&2; exit 1; }
if ! python3 -c "import helm_python, kubernetes_validate, yaml" 2>/dev/null; then
  python3 -m pip install -q --disable-pip-version-check helm-python-sdk kubernetes-validate pyyaml 2>/dev/null ||
    python3 -m pip install -q --disable-pip-version-check --break-system-packages helm-python-sdk kubernetes-validate pyyaml
fi
exec python3 charts/buzz-relay/tests/test_render.py
