"""Renders the chart offline with the real Helm engine (helm-python-sdk) and checks the manifests:
strict lint and the Kubernetes schema (kubernetes-validate --strict) for the oldest and newest
supported Kubernetes versions, with the default values and ci/production-values.yaml, plus the
rules the chart promises (values schema, secrets by reference, Pod Security "restricted", drain,
disruption budgets, connection budget, ingress, monitoring). Run: scripts/chart-test.sh"""

import copy
import json
import os
import re
import subprocess
import sys
import traceback

import helm_python
import kubernetes_validate
import yaml

# The Dockerfile's checks run in the same pass (they need cargo, not a Docker engine).
from test_dockerfile import (  # noqa: F401 - collected by main()
    test_dependencies_are_cooked_in_their_own_layer_and_binaries_stripped,
    test_every_workspace_binary_is_built_and_copied_into_the_image,
    test_the_runtime_stage_is_slim_and_runs_as_a_non_root_user,
)

CHART = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
ROOT = os.path.abspath(os.path.join(CHART, "..", ".."))
# Oldest and newest supported Kubernetes versions (Chart.yaml kubeVersion: >=1.27).
KUBE_VERSIONS = ["1.27.0", "1.37.0"]
SERVICES = ["gateway", "write", "query", "snapshot", "policy"]
VALUES = {"operator": {"pubkeys": "a" * 64, "apiOrigin": "https://ops.example.com"}}
with open(os.path.join(CHART, "ci", "production-values.yaml"), encoding="utf-8") as f:
    PRODUCTION = yaml.safe_load(f)
with open(os.path.join(CHART, "ci", "in-cluster-values.yaml"), encoding="utf-8") as f:
    IN_CLUSTER = yaml.safe_load(f)
CRD_KINDS = {"ServiceMonitor", "PrometheusRule"}


def merged(base, extra):
    out = copy.deepcopy(base)
    for k, v in extra.items():
        out[k] = merged(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def render_files(values):
    chart = helm_python.Chart.load(CHART)
    try:
        return chart.render(values, name="buzz", namespace="relay", is_install=True)
    finally:
        chart.close()


def render(values=VALUES):
    docs = []
    for path, text in sorted(render_files(values).items()):
        if path.endswith("NOTES.txt"):
            continue
        docs.extend((path, d) for d in yaml.safe_load_all(text) if d)
    return docs


def notes(values=VALUES):
    return next(t for p, t in render_files(values).items() if p.endswith("NOTES.txt"))


def render_error(values):
    try:
        render(values)
    except helm_python.HelmError as e:
        return str(e)
    raise AssertionError("rendered, but should have been refused")


def by_kind(docs, kind):
    return {d["metadata"]["name"]: d for _, d in docs if d["kind"] == kind}


def pod_specs(docs):
    for _, d in docs:
        if d["kind"] in ("Deployment", "Job"):
            yield d["metadata"]["name"], d["spec"]["template"]["spec"]
        elif d["kind"] == "Pod":
            yield d["metadata"]["name"], d["spec"]


def env_of(container):
    return {e["name"]: e for e in container.get("env", [])}


def test_lint_is_strict_clean_for_oldest_and_newest_kubernetes():
    for values in (VALUES, PRODUCTION, IN_CLUSTER):
        for kube in KUBE_VERSIONS:
            result = helm_python.lint(CHART, values, strict=True, kube_version=kube)
            # Helm severities: 1 info, 2 warning, 3 error. Warnings fail too.
            problems = result["errors"] + [m for m in result["messages"] if m["severity"] >= 2]
            assert not problems, (kube, result)


def test_every_manifest_is_valid_kubernetes_for_oldest_and_newest_versions():
    for values in (VALUES, PRODUCTION, IN_CLUSTER):
        for kube in KUBE_VERSIONS:
            for path, doc in render(values):
                if doc["kind"] in CRD_KINDS:
                    continue  # prometheus-operator CRDs: checked in test_monitoring_objects
                kubernetes_validate.validate(doc, kube, strict=True)


def test_unknown_keys_and_bad_values_are_refused_by_the_schema():
    assert "additional" in render_error(merged(VALUES, {"replicaCount": 3})).lower()
    assert "additional" in render_error(merged(VALUES, {"services": {"gateway": {"replica": 3}}})).lower()
    assert "sslMode" in render_error(merged(VALUES, {"database": {"sslMode": "verify"}}))
    assert "redis" in render_error(merged(VALUES, {"redis": {"url": "http://redis:6379"}}))


def test_grace_and_pre_stop_are_validated_so_the_gateway_drain_stays_positive():
    assert "terminationGracePeriodSeconds" in render_error(merged(VALUES, {"terminationGracePeriodSeconds": 5}))
    assert "preStopDelaySeconds" in render_error(merged(VALUES, {"preStopDelaySeconds": 11}))
    # The tightest accepted combination still leaves the gateway a positive drain.
    docs = render(merged(VALUES, {"terminationGracePeriodSeconds": 15, "preStopDelaySeconds": 10}))
    gw = by_kind(docs, "Deployment")["buzz-gateway"]["spec"]["template"]["spec"]["containers"][0]
    assert int(env_of(gw)["BUZZ_SHUTDOWN_GRACE_SECS"]["value"]) == 3
    assert gw["lifecycle"]["preStop"]["exec"]["command"] == ["sleep", "10"]


def test_the_connection_budget_is_enforced():
    err = render_error(merged(VALUES, {"services": {"write": {"autoscaling": {"maxReplicas": 20}}}}))
    assert "database connection budget exceeded" in err and "write 160" in err, err
    render(merged(VALUES, {"database": {"maxConnections": 300}, "services": {"write": {"autoscaling": {"maxReplicas": 20}}}}))
    deps = by_kind(render(), "Deployment")
    write = env_of(deps["buzz-write"]["spec"]["template"]["spec"]["containers"][0])
    # The write pool plus two connections per group-commit lane (posts, revisions): 6 + 2, counted as
    # 8 in the budget.
    assert write["BUZZ_WRITE_DB_CONNECTIONS"]["value"] == "6"
    assert write["BUZZ_WRITE_BATCH_LANES"]["value"] == "1" and write["BUZZ_WRITE_BATCH_MAX"]["value"] == "64"
    err = render_error(merged(VALUES, {"services": {"write": {"batchLanes": 8}}}))
    assert "database connection budget exceeded" in err and "write 88" in err, err


def test_the_snapshot_service_gets_the_database_and_counts_in_the_budget():
    deps = by_kind(render(), "Deployment")
    snap = env_of(deps["buzz-snapshot"]["spec"]["template"]["spec"]["containers"][0])
    assert "DATABASE_URL" in snap and snap["BUZZ_SNAPSHOT_DB_CONNECTIONS"]["value"] == "3"
    # At full scale write 32 + query 32 + policy 20 + snapshot 2 x 3 = 90, the whole budget:
    # a third snapshot replica (or a bigger pool) no longer fits.
    err = render_error(merged(VALUES, {"services": {"snapshot": {"replicas": 3}}}))
    assert "database connection budget exceeded" in err and "snapshot 9" in err, err
    render(merged(VALUES, {"database": {"maxConnections": 103}, "services": {"snapshot": {"replicas": 3}}}))


def test_disruption_budgets_only_where_two_replicas_are_guaranteed():
    assert set(by_kind(render(), "PodDisruptionBudget")) == {f"buzz-{s}" for s in SERVICES}
    one = merged(VALUES, {"services": {"snapshot": {"replicas": 1}, "gateway": {"autoscaling": {"minReplicas": 1}}}})
    pdbs = set(by_kind(render(one), "PodDisruptionBudget"))
    assert "buzz-snapshot" not in pdbs and "buzz-gateway" not in pdbs, pdbs
    assert "snapshot" in notes(one) and "block node drains" in notes(one)


def test_replicas_under_an_autoscaler_are_left_to_it_and_said_so():
    deps = by_kind(render(), "Deployment")
    assert "replicas" not in deps["buzz-gateway"]["spec"]
    assert deps["buzz-snapshot"]["spec"]["replicas"] == 2
    text = notes(merged(VALUES, {"services": {"gateway": {"replicas": 5}}}))
    assert "services.gateway.replicas (5) is ignored" in text, text
    assert "is ignored" not in notes()


def test_pods_meet_pod_security_restricted():
    docs = render(PRODUCTION)
    sa = by_kind(docs, "ServiceAccount")["buzz"]
    assert sa["automountServiceAccountToken"] is False
    for name, spec in pod_specs(docs):
        assert spec["automountServiceAccountToken"] is False, name
        assert spec["securityContext"]["runAsNonRoot"] is True, name
        assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}, name
        for c in spec["containers"]:
            sc = c["securityContext"]
            assert sc["allowPrivilegeEscalation"] is False and sc["capabilities"]["drop"] == ["ALL"], name
            assert sc["seccompProfile"] == {"type": "RuntimeDefault"}, name


def test_every_secret_comes_by_reference_and_tls_files_are_mounted():
    deps = by_kind(render(PRODUCTION), "Deployment")
    for name, dep in deps.items():
        spec = dep["spec"]["template"]["spec"]
        c = spec["containers"][0]
        env = env_of(c)
        for secret in ("DATABASE_URL", "BUZZ_RELAY_SECRET_KEY", "REDIS_URL", "RELAY_OPERATOR_PUBKEYS"):
            if secret in env:
                assert "secretKeyRef" in env[secret]["valueFrom"], (name, secret)
        mounts = {m["mountPath"] for m in c.get("volumeMounts", [])}
        for var in ("NATS_CA_FILE", "NATS_CREDS_FILE", "REDIS_CA_FILE", "PGSSLROOTCERT"):
            if var in env:
                assert os.path.dirname(env[var]["value"]) in mounts, (name, var, mounts)
        assert env["NATS_URL"]["value"].startswith("tls://"), name
        assert "NATS_CREDS_FILE" in env and "NATS_CA_FILE" in env, name
        service = name.removeprefix("buzz-")
        assert ("PGSSLMODE" in env) == (service in ("write", "query", "snapshot", "policy")), name
        assert ("DATABASE_URL" in env) == (service in ("write", "query", "snapshot", "policy")), name
        assert ("REDIS_CA_FILE" in env) == (service in ("gateway", "snapshot", "policy")), name
    job = by_kind(render(PRODUCTION), "Job")["buzz-migrate"]["spec"]["template"]["spec"]
    env = env_of(job["containers"][0])
    assert env["PGSSLMODE"]["value"] == "verify-full" and "PGSSLROOTCERT" in env


def test_extra_env_and_env_from_reach_every_service_and_the_migration():
    docs = render(PRODUCTION)
    for name, spec in pod_specs(docs):
        if name in ("buzz-test-roundtrip",):
            continue
        c = spec["containers"][0]
        assert env_of(c)["BUZZ_BUS_TIMEOUT_SECS"]["value"] == "5", name
        assert c["envFrom"] == [{"configMapRef": {"name": "buzz-extra", "optional": True}}], name
    deps = by_kind(docs, "Deployment")
    gw = env_of(deps["buzz-gateway"]["spec"]["template"]["spec"]["containers"][0])
    assert gw["OTEL_EXPORTER_OTLP_ENDPOINT"]["value"] == "http://otel-collector.observability:4318"
    assert gw["BUZZ_LOG_FORMAT"]["value"] == "json"


def test_probes_topology_spread_and_listeners():
    for name, dep in by_kind(render(), "Deployment").items():
        spec = dep["spec"]["template"]["spec"]
        c = spec["containers"][0]
        assert c["startupProbe"]["httpGet"]["path"] == "/healthz", name
        assert c["readinessProbe"]["httpGet"]["path"] == "/readyz", name
        keys = {t["topologyKey"] for t in spec["topologySpreadConstraints"]}
        assert keys == {"topology.kubernetes.io/zone", "kubernetes.io/hostname"}, name
        service = name.removeprefix("buzz-")
        assert c["command"] == [f"/usr/local/bin/buzz-{service}"], name


def test_ingress_for_the_tenant_plane_and_the_operator_api():
    ingresses = by_kind(render(PRODUCTION), "Ingress")
    gw = ingresses["buzz-gateway"]
    assert int(gw["metadata"]["annotations"]["nginx.ingress.kubernetes.io/proxy-read-timeout"]) >= 3600
    assert not any("affinity" in k for k in gw["metadata"]["annotations"]), "no session affinity needed"
    assert [r["host"] for r in gw["spec"]["rules"]] == ["*.relay.example.com", "team.example.com"]
    op = ingresses["buzz-operator"]
    assert op["spec"]["rules"][0]["host"] == "ops.relay.example.com"
    assert [p["path"] for p in op["spec"]["rules"][0]["http"]["paths"]] == ["/operator"]
    assert not by_kind(render(), "Ingress")


def test_monitoring_objects_and_dashboard_name_only_metrics_the_code_exports():
    docs = render(PRODUCTION)
    monitor = by_kind(docs, "ServiceMonitor")["buzz"]
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["spec"]["endpoints"][0]["path"] == "/metrics"
    rules = by_kind(docs, "PrometheusRule")["buzz"]["spec"]["groups"][0]["rules"]
    dashboard = json.loads(by_kind(docs, "ConfigMap")["buzz-dashboard"]["data"]["buzz-relay.json"])
    exprs = [r["expr"] for r in rules] + [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    source = subprocess.run(["grep", "-rhoE", r'"buzz_[a-z_]+"', "--include=*.rs", ROOT],
                            capture_output=True, text=True, check=True).stdout
    exported = {m.strip('"') for m in source.split()}
    for expr in exprs:
        for metric in re.findall(r"\bbuzz_[a-z_]+", expr):
            # A histogram's series are its name plus _bucket, _sum and _count.
            base = re.sub(r"_(bucket|sum|count)$", "", metric)
            assert metric in exported or (base in exported and base.endswith("_seconds")), (
                metric, "is not exported by any service")
    operations = open(os.path.join(ROOT, "docs", "operations.md"), encoding="utf-8").read()
    for rule in rules:
        assert rule["alert"] in operations, (rule["alert"], "is not explained in docs/operations.md")


def test_metrics_have_their_own_port_and_never_the_public_one():
    docs = render(PRODUCTION)
    admin_env = {"gateway": "BUZZ_GATEWAY_ADMIN_ADDR", "write": "BUZZ_WRITE_ADMIN_ADDR",
                 "query": "BUZZ_QUERY_ADMIN_ADDR", "snapshot": "BUZZ_SNAPSHOT_ADMIN_ADDR",
                 "policy": "BUZZ_POLICY_ADMIN_ADDR"}
    public = {"gateway": ("BUZZ_GATEWAY_ADDR", 7777), "policy": ("BUZZ_POLICY_ADDR", 7070)}
    services = by_kind(docs, "Service")
    for name, dep in by_kind(docs, "Deployment").items():
        service = name.removeprefix("buzz-")
        c = dep["spec"]["template"]["spec"]["containers"][0]
        ports = {p["name"]: p["containerPort"] for p in c["ports"]}
        env = env_of(c)
        assert env[admin_env[service]]["value"] == f"0.0.0.0:{ports['metrics']}", name
        assert c["readinessProbe"]["httpGet"]["port"] == "metrics", name
        svc_ports = {p["name"]: p["port"] for p in services[name]["spec"]["ports"]}
        if service in public:
            var, port = public[service]
            assert env[var]["value"] == f"0.0.0.0:{port}" and ports["http"] == port, name
            assert ports["metrics"] != port, name
            assert svc_ports == {"http": port, "metrics": ports["metrics"]}, name
        else:
            assert set(ports) == {"metrics"} and set(svc_ports) == {"metrics"}, name
    monitor = by_kind(docs, "ServiceMonitor")["buzz"]
    assert [e["port"] for e in monitor["spec"]["endpoints"]] == ["metrics"]
    for ingress in by_kind(docs, "Ingress").values():
        for rule in ingress["spec"]["rules"]:
            for path in rule["http"]["paths"]:
                assert path["backend"]["service"]["port"] == {"name": "http"}, ingress["metadata"]["name"]
    assert "adminPort" in render_error(merged(VALUES, {"services": {"gateway": {"adminPort": 0}}}))


def test_network_policies_admit_only_the_configured_peers():
    pols = by_kind(render(PRODUCTION), "NetworkPolicy")
    assert set(pols) == {f"buzz-{s}" for s in SERVICES}
    assert len(pols["buzz-write"]["spec"]["ingress"]) == 1, "write takes scrapes only"
    assert pols["buzz-write"]["spec"]["ingress"][0]["ports"] == [{"port": "metrics"}]
    # Tenants (through the ingress controller) reach the gateway's http port, not its metrics.
    assert pols["buzz-gateway"]["spec"]["ingress"][1]["ports"] == [{"port": "http"}]
    gw_from = pols["buzz-gateway"]["spec"]["ingress"][1]["from"]
    assert {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "ingress-nginx"}}} in gw_from


def test_helm_test_round_trips_an_event_and_the_load_job_is_optional():
    docs = render()
    pod = by_kind(docs, "Pod")["buzz-test-roundtrip"]
    assert pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    args = pod["spec"]["containers"][0]["args"]
    assert "--require-complete" in args and "--url=ws://buzz-gateway:7777" in args
    assert "buzz-load" not in by_kind(docs, "Job")
    jobs = by_kind(render(merged(VALUES, {"loadTest": {"enabled": True}})), "Job")
    coordinator = jobs["buzz-load"]["spec"]["template"]["spec"]["containers"][0]
    workers = jobs["buzz-load-workers"]
    assert workers["spec"]["parallelism"] == 2 and workers["spec"]["completions"] == 2
    worker = workers["spec"]["template"]["spec"]["containers"][0]
    # Coordinator and workers meet under one run id on the chart's NATS.
    run_id = next(a for a in coordinator["args"] if a.startswith("--run-id="))
    assert coordinator["args"][0] == "coordinator" and "--workers=2" in coordinator["args"]
    assert worker["args"] == ["worker", run_id]
    assert {"name": "NATS_URL", "value": "nats://nats:4222"} in worker["env"]


def test_production_values_run_three_gateways_over_tls():
    deps = by_kind(render(PRODUCTION), "Deployment")
    hpa = by_kind(render(PRODUCTION), "HorizontalPodAutoscaler")["buzz-gateway"]
    assert hpa["spec"]["minReplicas"] >= 3
    assert "replicas" not in deps["buzz-gateway"]["spec"]


def dep_file(name):
    with open(os.path.join(CHART, "deps", name), encoding="utf-8") as f:
        return yaml.safe_load(f)


def test_in_cluster_values_name_exactly_what_the_dependency_files_create():
    nats, redis, pg = dep_file("nats-values.yaml"), dep_file("redis-values.yaml"), dep_file("postgres-cluster.yaml")
    # NATS core only, over TLS, and the service name the official chart derives from fullnameOverride.
    assert nats["config"]["jetstream"]["enabled"] is False
    assert nats["config"]["nats"]["tls"]["enabled"] is True
    assert IN_CLUSTER["nats"]["url"] == f"tls://{nats['fullnameOverride']}:4222"
    assert IN_CLUSTER["nats"]["caSecret"] == nats["config"]["nats"]["tls"]["secretName"]
    # Bitnami Redis: standalone primary `<fullname>-master`, TLS, nothing kept across restarts.
    assert redis["architecture"] == "standalone" and redis["tls"]["enabled"] is True
    assert IN_CLUSTER["redis"]["url"].startswith(f"rediss://{redis['fullnameOverride']}-master:")
    assert IN_CLUSTER["redis"]["caSecret"] == redis["tls"]["existingSecret"]
    # CloudNativePG: the operator's `<cluster>-app` Secret (key `uri`) and `<cluster>-ca` Secret.
    assert pg["kind"] == "Cluster" and pg["apiVersion"].startswith("postgresql.cnpg.io/")
    name = pg["metadata"]["name"]
    assert IN_CLUSTER["database"]["existingSecret"] == f"{name}-app"
    assert IN_CLUSTER["database"]["urlKey"] == "uri"
    assert IN_CLUSTER["database"]["caSecret"] == f"{name}-ca"
    assert int(pg["spec"]["postgresql"]["parameters"]["max_connections"]) == IN_CLUSTER["database"]["maxConnections"]
    deps = by_kind(render(merged(VALUES, IN_CLUSTER)), "Deployment")
    with_db = set()
    for dep_name, dep in deps.items():
        env = env_of(dep["spec"]["template"]["spec"]["containers"][0])
        assert env["NATS_URL"]["value"] == "tls://nats:4222", dep_name
        if "DATABASE_URL" in env:
            ref = env["DATABASE_URL"]["valueFrom"]["secretKeyRef"]
            assert (ref["name"], ref["key"]) == (f"{name}-app", "uri"), dep_name
            assert env["PGSSLMODE"]["value"] == "verify-full", dep_name
            with_db.add(dep_name)
    assert {"buzz-write", "buzz-query", "buzz-policy"} <= with_db, with_db


def test_operator_settings_are_required():
    assert "operator.pubkeys (or operator.existingSecret) is required" in render_error({})


def test_the_chart_run_log_scan_finds_a_password_or_key_a_pod_printed():
    import tempfile
    import types

    import chart_run

    with tempfile.TemporaryDirectory() as logs:
        run = object.__new__(chart_run.Run)
        run.label, run.procs = "scan", types.SimpleNamespace(logs=logs)
        run.values = {"nats": {"url": "nats://buzz:nats-password-1@127.0.0.1:4222"}, "redis": {"url": "redis://h"}}
        run.secrets = {"db": {"url": "postgres://u:db-password-2@h/x"}, "key": {"secret-key": "ab" * 32}}
        assert run.never_logged("cd" * 32) == {"nats-password-1", "db-password-2", "ab" * 32, "cd" * 32}
        with open(os.path.join(logs, "pod.log"), "w", encoding="utf-8") as f:
            f.write("connected to postgres://u@h/x\n")
        run.scan_logs("cd" * 32)  # clean
        for leak in ("nats-password-1", "db-password-2", "ab" * 32, "cd" * 32):
            with open(os.path.join(logs, "pod.log"), "a", encoding="utf-8") as f:
                f.write(f"oops {leak}\n")
            try:
                run.scan_logs("cd" * 32)
            except chart_run.Mismatch as e:
                assert leak[:6] in str(e), e
            else:
                raise AssertionError(f"{leak} in a log was not found")
            with open(os.path.join(logs, "pod.log"), "w", encoding="utf-8") as f:
                f.write("")


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
