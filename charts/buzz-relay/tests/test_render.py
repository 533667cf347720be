"""Renders the chart offline with the real Helm engine (helm-python-sdk) and checks the manifests:
lint, the objects each service needs, probes, secrets by reference, and the Kubernetes schema
(kubernetes-validate, strict). Run: python3 charts/buzz-relay/tests/test_render.py"""

import os
import sys
import traceback

import helm_python
import kubernetes_validate
import yaml

CHART = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
KUBE = "1.30.0"
SERVICES = ["gateway", "write", "query", "snapshot", "policy"]
VALUES = {"operator": {"pubkeys": "a" * 64, "apiOrigin": "https://ops.example.com"}}


def render(values=VALUES):
    chart = helm_python.Chart.load(CHART)
    try:
        files = chart.render(values, name="buzz", namespace="relay", is_install=True)
    finally:
        chart.close()
    docs = []
    for path, text in sorted(files.items()):
        for doc in yaml.safe_load_all(text):
            if doc:
                docs.append((path, doc))
    return docs


def by_kind(docs, kind):
    return {d["metadata"]["name"]: d for _, d in docs if d["kind"] == kind}


def test_lint_passes():
    result = helm_python.lint(CHART, VALUES, strict=True)
    # Helm severities: 1 info, 2 warning, 3 error. Warnings fail too.
    problems = result["errors"] + [m for m in result["messages"] if m["severity"] >= 2]
    assert not problems, result


def test_every_service_has_a_deployment_service_and_disruption_budget():
    docs = render()
    for kind in ("Deployment", "Service", "PodDisruptionBudget"):
        names = set(by_kind(docs, kind))
        assert names == {f"buzz-{s}" for s in SERVICES}, (kind, names)
    hpas = set(by_kind(docs, "HorizontalPodAutoscaler"))
    assert hpas == {"buzz-gateway", "buzz-write", "buzz-query"}, hpas


def test_the_migration_runs_as_a_hook_before_install_and_upgrade():
    jobs = by_kind(render(), "Job")
    job = jobs["buzz-migrate"]
    assert job["metadata"]["annotations"]["helm.sh/hook"] == "pre-install,pre-upgrade"
    assert job["spec"]["template"]["spec"]["containers"][0]["command"] == ["/usr/local/bin/buzz", "migrate"]


def test_probes_listeners_and_secrets_by_reference():
    for name, dep in by_kind(render(), "Deployment").items():
        c = dep["spec"]["template"]["spec"]["containers"][0]
        assert c["readinessProbe"]["httpGet"]["path"] == "/readyz", name
        assert c["livenessProbe"]["httpGet"]["path"] == "/healthz", name
        env = {e["name"]: e for e in c["env"]}
        listen = [e for e in env.values() if e.get("value", "").startswith("0.0.0.0:")]
        assert len(listen) == 1, (name, env.keys())
        for secret in ("DATABASE_URL", "BUZZ_RELAY_SECRET_KEY"):
            if secret in env:
                assert "value" not in env[secret] and "secretKeyRef" in env[secret]["valueFrom"], (name, secret)
        service = name.removeprefix("buzz-")
        assert ("DATABASE_URL" in env) == (service in ("write", "query", "policy")), (name, "database")
        assert ("BUZZ_RELAY_SECRET_KEY" in env) == (service in ("gateway", "write")), (name, "relay key")
        assert c["command"] == [f"/usr/local/bin/buzz-{service}"], name


def test_autoscaled_services_leave_replicas_to_the_autoscaler():
    deps = by_kind(render(), "Deployment")
    assert "replicas" not in deps["buzz-gateway"]["spec"]
    assert deps["buzz-snapshot"]["spec"]["replicas"] == 2


def test_every_manifest_is_valid_kubernetes():
    for path, doc in render():
        kubernetes_validate.validate(doc, KUBE, strict=True)


def test_operator_settings_are_required():
    try:
        render({})
    except helm_python.HelmError as e:
        assert "operator.pubkeys is required" in str(e), e
    else:
        raise AssertionError("rendered without operator settings")


def main():
    tests = [(n, f) for n, f in sorted(globals().items()) if n.startswith("test_") and callable(f)]
    failed = 0
    for name, f in tests:
        try:
            f()
            print(f"PASS chart::{name}")
        except Exception:  # noqa: BLE001 - report every failure
            failed += 1
            print(f"FAIL chart::{name}")
            traceback.print_exc()
    print(f"chart: {len(tests) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
