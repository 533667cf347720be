"""Runs the chart's pods as local processes, exactly as rendered, and fails on any mismatch that
rendering alone cannot catch. Run: scripts/chart-run.sh (it builds nothing; see its header).

For each of two renders (the default values, and ci/production-values.yaml) with only ports and
connection settings overridden (private ports, loopback endpoints, own NATS subject and Redis key
prefixes, a fresh database), it:
  1. resolves every workload's env/envFrom from the rendered ConfigMaps and the test Secrets below
     (secretKeyRef, configMapKeyRef, fieldRef, $(VAR) expansion), adds what a kubelet adds
     (HOSTNAME, Service links), writes its Secret/ConfigMap volumes to files, maps Service DNS names
     to 127.0.0.1 and the Service's target port;
  2. checks every rendered env name is one the binary reads (its `--help` lists clap's env names;
     a few documented pass-throughs are read directly: RUST_LOG, BUZZ_LOG_FORMAT, OTEL_*, and
     libpq's PGSSL* by sqlx), that no kubelet-injected Service-link variable collides with one,
     that every file-valued variable names a mounted file, every mounted file is named, and every
     test Secret key is consumed;
  3. runs the pre-install hook (the migrate Job) to completion, starts every Deployment (one
     process each) and probes it as a kubelet would (startupProbe, then readinessProbe, with their
     port, path, initialDelaySeconds, periodSeconds and failureThreshold; named ports resolved),
     then checks every containerPort is listened on by that process on all addresses (not only
     loopback: a kubelet probes the pod IP), every Service port answers, every ServiceMonitor
     endpoint scrapes, and the livenessProbe passes;
  4. provisions the community of helmTest.host through the policy-service's operator API (as
     `buzz operator create-community`), runs the `helm test` pod to completion, checks every
     service is still up, and stops them with SIGTERM: each must exit 0 within
     terminationGracePeriodSeconds.
The production render asks for TLS everywhere with CA files and NATS credentials: the run starts a
private TLS NATS server and a private TLS Redis on its own ports and a TLS front for the local
PostgreSQL (SSLRequest, then plain to 127.0.0.1:5432), with a throwaway CA, so the mounted CA and
credentials files are really used (sslmode verify-full included).

Environment: CHART_RUN_BIN_DIR (default $CARGO_TARGET_DIR/debug, CARGO_TARGET_DIR defaulting to
/var/tmp/buzz-target) replaces /usr/local/bin; CHART_RUN_EXEC_PREFIX (e.g. `chroot
--userspec=65532:65532 /rootfs`) prefixes every command run (binaries, --help, keygen, exec
probes); CHART_RUN_ROOTFS, when the prefix changes the root, is that root: mounted files are then
written at their rendered paths under it (no path rewriting). CHART_RUN_PORT_BASE (default 19500):
the default render listens on base..base+6, production on base+50..base+56 and its TLS endpoints
on base+60..base+62. CHART_RUN_WORK_DIR: where logs and files go (scripts/chart-run.sh makes one).
CHART_RUN_ONLY=default|production runs one render. Keys under the Redis prefix `chartrun:` on the
machine's Redis are removed before and after a run.
"""

import base64
import json
import os
import re
import secrets as pysecrets
import select
import shlex
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_render import CHART, PRODUCTION, merged, render  # noqa: E402

TARGET = os.environ.get("CARGO_TARGET_DIR") or "/var/tmp/buzz-target"
BIN_DIR = os.environ.get("CHART_RUN_BIN_DIR") or os.path.join(TARGET, "debug")
PREFIX = shlex.split(os.environ.get("CHART_RUN_EXEC_PREFIX", ""))
ROOTFS = os.environ.get("CHART_RUN_ROOTFS", "")
PORT_BASE = int(os.environ.get("CHART_RUN_PORT_BASE", "19500"))
WORK = os.environ.get("CHART_RUN_WORK_DIR") or ""
READY_SECONDS = 60  # how long a started pod may stay unready before the run fails
PG_ADMIN = "postgres://postgres@127.0.0.1:5432/postgres"
DB = "buzz_chart_run"
PREFIX_NAME = "chartrun"
NAMESPACE = "relay"  # test_render.render's release namespace; its release name is "buzz"
IMAGE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# Read by every binary outside clap (telemetry's std::env reads; the tracing filter) and therefore
# absent from --help: documented pass-throughs.
PASS_THROUGH = {"RUST_LOG", "BUZZ_LOG_FORMAT"}
PASS_THROUGH_PREFIXES = ("OTEL_",)
# libpq's variables that sqlx reads when it parses DATABASE_URL: only for binaries that take one.
SQLX_ENV = {"PGHOST", "PGPORT", "PGUSER", "PGPASSWORD", "PGDATABASE", "PGSSLMODE", "PGSSLROOTCERT",
            "PGSSLCERT", "PGSSLKEY", "PGAPPNAME", "PGOPTIONS"}
# Processes started (pids; each leads its own process group) for scripts/chart-run.sh's backstop.
PIDS_FILE = os.path.join(WORK, "pids") if WORK else ""


class Mismatch(Exception):
    """What a cluster would show as a broken install: reported, and the run exits 1."""


def log(msg):
    print(f"chart-run: {msg}", file=sys.stderr, flush=True)


def prefixed(argv):
    return PREFIX + list(argv)


def host_bin(path):
    """The local binary for an image path (/usr/local/bin/X -> BIN_DIR/X)."""
    if path.startswith("/usr/local/bin/"):
        return os.path.join(BIN_DIR, os.path.basename(path))
    return path


def run_cli(argv, env=None, timeout=60):
    r = subprocess.run(prefixed(argv), env=env or {"PATH": IMAGE_PATH}, capture_output=True, text=True,
                       timeout=timeout, check=False)
    if r.returncode != 0:
        raise Mismatch(f"`{' '.join(argv)}` exited {r.returncode}: {r.stderr.strip()[-2000:]}")
    return r.stdout


def keygen():
    return json.loads(run_cli([host_bin("/usr/local/bin/buzz"), "keygen"]))


def clear_redis_prefix():
    """Our own keys on the machine's Redis (prefix chartrun:), so no run sees a previous one's."""
    if not shutil.which("redis-cli"):
        return
    cli = ["redis-cli", "-h", "127.0.0.1", "-p", "6379"]
    keys = subprocess.run([*cli, "--scan", "--pattern", f"{PREFIX_NAME}:*"], capture_output=True, text=True,
                          check=True, timeout=30).stdout.split()
    for i in range(0, len(keys), 500):
        subprocess.run([*cli, "UNLINK", *keys[i:i + 500]], capture_output=True, check=True, timeout=30)


def psql(sql):
    subprocess.run(["psql", "-q", "-v", "ON_ERROR_STOP=1", PG_ADMIN, "-c", sql], check=True,
                   capture_output=True, text=True)


# ---------------------------------------------------------------------------------------------
# Throwaway TLS endpoints for the production render.

def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, text=True)


def make_ca(d):
    os.makedirs(d, exist_ok=True)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    openssl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.crt", "-days", "2", "-subj", "/CN=chart-run CA",
            "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=d)
    openssl("req", *ec, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=127.0.0.1", cwd=d)
    with open(os.path.join(d, "ext.cnf"), "w", encoding="utf-8") as f:
        f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n")
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", "server.crt", "-days", "2", "-extfile", "ext.cnf", cwd=d)
    os.chmod(os.path.join(d, "server.key"), 0o644)  # the private servers may run as another user
    return {k: os.path.join(d, k) for k in ("ca.crt", "server.crt", "server.key")}


def _crc16(data):
    crc = 0
    for b in data:
        crc ^= b << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
            crc &= 0xFFFF
    return crc


def nats_creds():
    """A NATS credentials file (user JWT + nkey seed) the client can parse and sign with; the
    private server has no auth configured, so it accepts any."""
    prefix_seed, prefix_user = 18 << 3, 20 << 3
    raw = bytes([prefix_seed | (prefix_user >> 5), (prefix_user & 31) << 3]) + pysecrets.token_bytes(32)
    seed = base64.b32encode(raw + _crc16(raw).to_bytes(2, "little")).decode().rstrip("=")
    b64 = lambda o: base64.urlsafe_b64encode(json.dumps(o).encode()).decode().rstrip("=")  # noqa: E731
    jwt = f"{b64({'typ': 'JWT', 'alg': 'ed25519-nkey'})}.{b64({'name': 'chart-run', 'nats': {'type': 'user'}})}.c2ln"
    return (f"-----BEGIN NATS USER JWT-----\n{jwt}\n------END NATS USER JWT------\n\n"
            f"-----BEGIN USER NKEY SEED-----\n{seed}\n------END USER NKEY SEED------\n")


class PgTlsFront:
    """PostgreSQL's in-protocol TLS (SSLRequest, 'S', handshake) in front of the local server,
    which is reached in plain text: lets sslmode=verify-full with PGSSLROOTCERT really verify."""

    def __init__(self, port, cert, key):
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ctx.load_cert_chain(cert, key)
        self.sock = socket.create_server(("127.0.0.1", port))
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self):
        self.closed = True
        self.sock.close()

    def _accept(self):
        while not self.closed:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    @staticmethod
    def _read(sock, n):
        buf = b""
        while len(buf) < n:
            chunk = sock.recv(n - len(buf))
            if not chunk:
                raise OSError("closed")
            buf += chunk
        return buf

    def _serve(self, conn):
        try:
            first = self._read(conn, 8)
            while first[4:8] == (80877104).to_bytes(4, "big"):  # GSSENCRequest: no
                conn.sendall(b"N")
                first = self._read(conn, 8)
            if first[4:8] == (80877103).to_bytes(4, "big"):  # SSLRequest
                conn.sendall(b"S")
                client, pending = self.ctx.wrap_socket(conn, server_side=True), b""
            else:
                client, pending = conn, first
            upstream = socket.create_connection(("127.0.0.1", 5432))
            upstream.sendall(pending)
            self._pump(client, upstream)
        except (OSError, ssl.SSLError):
            conn.close()

    @staticmethod
    def _pump(a, b):
        socks = [a, b]
        try:
            while True:
                ready = [s for s in socks if isinstance(s, ssl.SSLSocket) and s.pending()]
                if not ready:
                    ready, _, _ = select.select(socks, [], [], 5)
                for s in ready:
                    data = s.recv(65536)
                    if not data:
                        return
                    (b if s is a else a).sendall(data)
        except (OSError, ssl.SSLError):
            pass
        finally:
            a.close()
            b.close()


# ---------------------------------------------------------------------------------------------
# Processes.

class Procs:
    def __init__(self, logs):
        self.logs = logs
        self.items = []  # (name, Popen, logpath)

    def start(self, name, argv, env, cwd):
        path = os.path.join(self.logs, f"{name}.log")
        out = open(path, "wb")  # noqa: SIM115 - closed with the process
        p = subprocess.Popen(argv, env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL, start_new_session=True)
        out.close()
        self.items.append((name, p, path))
        if PIDS_FILE:
            with open(PIDS_FILE, "a", encoding="utf-8") as f:
                f.write(f"{p.pid}\n")
        return p

    def tail(self, name, lines=25):
        for n, _, path in self.items:
            if n == name:
                with open(path, encoding="utf-8", errors="replace") as f:
                    return "".join(f.readlines()[-lines:])
        return ""

    def stop_all(self):
        for _, p, _ in self.items:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        for _, p, _ in self.items:
            p.wait()
        self.items = []


def port_free(port):
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("0.0.0.0", port))
            return True
        except OSError:
            return False


def listeners():
    """pid -> [(address, port)] of listening TCP sockets (ss; one network namespace here)."""
    out = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, check=True).stdout
    found = {}
    for line in out.splitlines():
        cols = line.split()
        if len(cols) < 6:
            continue
        addr, _, port = cols[3].rpartition(":")
        for pid in re.findall(r"pid=(\d+)", line):
            found.setdefault(int(pid), []).append((addr.strip("[]").split("%")[0], int(port)))
    return found


def port_open(port, timeout=1.0):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout):
            return True
    except OSError:
        return False


def wait_port(port, proc, what, seconds=20):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if port_open(port, 0.2):
            return
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    raise Mismatch(f"{what} did not listen on 127.0.0.1:{port}")


# ---------------------------------------------------------------------------------------------
# Rendering and resolving.

def k8s_objects(docs, kind):
    return {d["metadata"]["name"]: d for _, d in docs if d["kind"] == kind}


def expand(value, env):
    """Kubernetes' $(VAR) expansion ($$ escapes; unknown references stay as written)."""
    return re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)",
                  lambda m: "$" if m.group(0) == "$$" else env.get(m.group(1), m.group(0)), value)


class Run:
    """One render of the chart, run end to end."""

    def __init__(self, label, values, base, secrets, work):
        self.label = label
        self.base = base
        self.work = work
        self.docs = render(values)
        self.values = values
        self.secrets = secrets  # name -> {key: value}
        self.configmaps = {n: d.get("data", {}) or {} for n, d in k8s_objects(self.docs, "ConfigMap").items()}
        self.consumed = set()  # (secret, key)
        self.procs = Procs(os.path.join(work, "logs"))
        os.makedirs(self.procs.logs, exist_ok=True)
        self.written = []  # files written under CHART_RUN_ROOTFS
        self.help_cache = {}
        self.noted = set()
        self.user_env = [e["name"] for e in values.get("extraEnv", []) or []]
        self.user_read, self.user_unread = {}, {}
        self._services()

    def say(self, msg):
        log(f"[{self.label}] {msg}")

    def fail(self, msg):
        raise Mismatch(f"[{self.label}] {msg}")

    # -- Services ----------------------------------------------------------------------------

    def pods(self):
        """(kind, name, labels, spec, annotations) of every workload."""
        out = []
        for _, d in self.docs:
            if d["kind"] in ("Deployment", "Job"):
                t = d["spec"]["template"]
                out.append((d["kind"], d["metadata"]["name"], t["metadata"].get("labels", {}), t["spec"],
                            d["metadata"].get("annotations", {}) or {}))
            elif d["kind"] == "Pod":
                out.append(("Pod", d["metadata"]["name"], d["metadata"].get("labels", {}), d["spec"],
                            d["metadata"].get("annotations", {}) or {}))
            elif d["kind"] in ("StatefulSet", "DaemonSet", "CronJob", "ReplicaSet"):
                self.fail(f"{d['kind']} {d['metadata']['name']}: not supported by chart-run")
        return out

    def _services(self):
        """Service name -> {port: local port}, through the selected Deployment's container ports."""
        self.service_ports = {}
        self.service_named = {}
        self.service_links = {}
        deployments = [p for p in self.pods() if p[0] == "Deployment"]
        for i, (name, svc) in enumerate(sorted(k8s_objects(self.docs, "Service").items())):
            sel = svc["spec"].get("selector", {})
            matches = [p for p in deployments if all(p[2].get(k) == v for k, v in sel.items())]
            if len(matches) != 1:
                self.fail(f"Service {name} selects {len(matches)} Deployments ({[m[1] for m in matches]}), expected 1")
            spec = matches[0][3]
            named = {p["name"]: p["containerPort"] for c in spec["containers"] for p in c.get("ports", []) if "name" in p}
            ports = {}
            ip = f"10.96.0.{i + 10}"
            env_name = name.upper().replace("-", "_")
            for j, sp in enumerate(svc["spec"]["ports"]):
                target = sp.get("targetPort", sp["port"])
                if isinstance(target, str):
                    if target not in named:
                        self.fail(f"Service {name} port {sp.get('name')} targets the named port {target!r}, "
                                  f"which Deployment {matches[0][1]} does not declare ({sorted(named)})")
                    target = named[target]
                ports[sp["port"]] = target
                if sp.get("name"):
                    self.service_named.setdefault(name, {})[sp["name"]] = target
                proto = sp.get("protocol", "TCP")
                # Docker-link variables a kubelet injects into every pod of the namespace.
                if j == 0:
                    self.service_links[f"{env_name}_SERVICE_HOST"] = ip
                    self.service_links[f"{env_name}_SERVICE_PORT"] = str(sp["port"])
                    self.service_links[f"{env_name}_PORT"] = f"{proto.lower()}://{ip}:{sp['port']}"
                if sp.get("name"):
                    self.service_links[f"{env_name}_SERVICE_PORT_{sp['name'].upper().replace('-', '_')}"] = str(sp["port"])
                pre = f"{env_name}_PORT_{sp['port']}_{proto}"
                self.service_links.update({pre: f"{proto.lower()}://{ip}:{sp['port']}", f"{pre}_PROTO": proto.lower(),
                                           f"{pre}_PORT": str(sp["port"]), f"{pre}_ADDR": ip})
            self.service_ports[name] = ports

    def map_services(self, value, where):
        """Service DNS names (short, namespaced, cluster.local) with a port -> 127.0.0.1:target."""
        names = "|".join(re.escape(n) for n in sorted(self.service_ports, key=len, reverse=True))
        if not names:
            return value
        pattern = re.compile(rf"(?<![\w.-])({names})(?:\.{NAMESPACE}(?:\.svc(?:\.cluster\.local)?)?)?(?::(\d+))?(?![\w.-])")

        def sub(m):
            svc, port = m.group(1), m.group(2)
            if port is None:
                self.fail(f"{where}: names Service {svc} without a port: {value!r}")
            if int(port) not in self.service_ports[svc]:
                self.fail(f"{where}: {svc}:{port} is not a port of Service {svc} ({sorted(self.service_ports[svc])})")
            return f"127.0.0.1:{self.service_ports[svc][int(port)]}"

        return pattern.sub(sub, value)

    # -- Containers ----------------------------------------------------------------------------

    def binary_env_names(self, argv):
        """Env names the binary reads: clap's [env: NAME] in `<binary> [subcommand...] --help`."""
        sub = []
        for a in argv[1:]:
            if a.startswith("-"):
                break
            sub.append(a)
        key = (argv[0], tuple(sub))
        if key not in self.help_cache:
            r = subprocess.run(prefixed([argv[0], *sub, "--help"]), env={"PATH": IMAGE_PATH},
                               capture_output=True, text=True, timeout=30, check=False)
            if r.returncode != 0:
                self.fail(f"`{' '.join([argv[0], *sub])} --help` exited {r.returncode}: {r.stderr.strip()[-500:]}")
            self.help_cache[key] = set(re.findall(r"\[env:\s*([A-Za-z_][A-Za-z0-9_]*)", r.stdout))
        return self.help_cache[key]

    def fields(self, kind, name, labels, spec, annotations):
        pod = f"{name}-{uuid.uuid4().hex[:10]}" if kind != "Pod" else name
        f = {"metadata.name": pod, "metadata.namespace": NAMESPACE, "metadata.uid": str(uuid.uuid4()),
             "spec.nodeName": "chart-run-node", "spec.serviceAccountName": spec.get("serviceAccountName", "default"),
             "status.hostIP": "127.0.0.1", "status.podIP": "127.0.0.1", "status.podIPs": "127.0.0.1",
             "status.hostIPs": "127.0.0.1"}
        f.update({f"metadata.labels['{k}']": v for k, v in labels.items()})
        f.update({f"metadata.annotations['{k}']": v for k, v in annotations.items()})
        return f

    def secret_value(self, ref, where):
        name, key = ref["name"], ref["key"]
        if name not in self.secrets or key not in self.secrets[name]:
            if ref.get("optional"):
                return None
            self.fail(f"{where}: Secret {name} key {key!r} does not exist (test Secrets: "
                      f"{ {n: sorted(v) for n, v in self.secrets.items()} })")
        self.consumed.add((name, key))
        return self.secrets[name][key]

    def resolve(self, kind, name, labels, spec, annotations):
        """argv, env, cwd and the checks of one pod's single container."""
        if len(spec["containers"]) != 1 or spec.get("initContainers"):
            self.fail(f"{name}: chart-run runs single-container pods without init containers")
        c = spec["containers"][0]
        where = f"{kind} {name}"
        fields = self.fields(kind, name, labels, spec, annotations)
        if not c.get("command"):
            self.fail(f"{where}: no command (the image's CMD would run): chart-run needs it rendered")
        env, rendered = {}, []
        for ef in c.get("envFrom", []) or []:
            pre = ef.get("prefix", "")
            if "configMapRef" in ef:
                ref = ef["configMapRef"]
                data = self.configmaps.get(ref["name"])
                if data is None:
                    if not ref.get("optional"):
                        self.fail(f"{where}: envFrom ConfigMap {ref['name']} is not rendered and not optional")
                    if ref["name"] not in self.noted:
                        self.noted.add(ref["name"])
                        self.say(f"envFrom ConfigMap {ref['name']} is absent and optional: skipped, as a kubelet does")
                    continue
            else:
                ref = ef["secretRef"]
                data = self.secrets.get(ref["name"])
                if data is None:
                    if not ref.get("optional"):
                        self.fail(f"{where}: envFrom Secret {ref['name']} does not exist and is not optional")
                    continue
                self.consumed.update((ref["name"], k) for k in data)
            for k, v in data.items():
                env[pre + k] = v
                rendered.append(pre + k)
        n_from = len(rendered)
        for e in c.get("env", []) or []:
            n = e["name"]
            if "valueFrom" not in e:
                v = expand(str(e.get("value", "")), env)
            else:
                vf = e["valueFrom"]
                if "secretKeyRef" in vf:
                    v = self.secret_value(vf["secretKeyRef"], f"{where} env {n}")
                elif "configMapKeyRef" in vf:
                    ref = vf["configMapKeyRef"]
                    v = (self.configmaps.get(ref["name"]) or {}).get(ref["key"])
                    if v is None and not ref.get("optional"):
                        self.fail(f"{where} env {n}: ConfigMap {ref['name']} key {ref['key']} is not rendered")
                elif "fieldRef" in vf:
                    path = vf["fieldRef"]["fieldPath"]
                    if path not in fields:
                        self.fail(f"{where} env {n}: fieldRef {path} not supported")
                    v = fields[path]
                elif "resourceFieldRef" in vf:
                    r = vf["resourceFieldRef"]["resource"]
                    kind_, res = r.split(".", 1)
                    v = str((c.get("resources", {}).get(kind_, {}) or {}).get(res, "0"))
                else:
                    self.fail(f"{where} env {n}: unsupported valueFrom {vf}")
                if v is None:
                    continue
            env[n] = v
            rendered.append(n)
        env = {k: self.map_services(v, f"{where} env {k}") for k, v in env.items()}
        argv = [expand(a, env) for a in c["command"] + (c.get("args") or [])]
        argv = [argv[0]] + [self.map_services(a, f"{where} args") for a in argv[1:]]
        binary = host_bin(argv[0])
        if not PREFIX and not os.access(binary, os.X_OK):
            self.fail(f"{where}: {argv[0]} -> {binary} is not an executable (build it, or set CHART_RUN_BIN_DIR)")
        argv[0] = binary

        # Every rendered variable must be one the binary reads.
        reads = self.binary_env_names(argv)
        allowed = reads | PASS_THROUGH | (SQLX_ENV if "DATABASE_URL" in reads else set())
        unread = sorted(n for n in set(rendered) if n not in allowed and not n.startswith(PASS_THROUGH_PREFIXES))
        # The operator's extraEnv/envFrom go to every container by design: such a name only has to
        # be read by one binary that receives it (checked over the whole run in execute()).
        user = set(self.user_env) | set(rendered[:n_from])
        for n in unread:
            if n in user:
                self.user_unread.setdefault(n, []).append(os.path.basename(binary))
        unread = [n for n in unread if n not in user]
        for n in user & set(rendered):
            self.user_read.setdefault(n, False)
            if n in allowed or n.startswith(PASS_THROUGH_PREFIXES):
                self.user_read[n] = True
        if unread:
            self.fail(f"{where}: rendered env {unread} is read by no option of {os.path.basename(binary)} "
                      f"(its --help names: {sorted(reads)})")
        collide = sorted(set(self.service_links) & reads if kind != "Job" else set())
        if collide:
            self.fail(f"{where}: the kubelet's Service-link variables {collide} collide with "
                      f"{os.path.basename(binary)}'s env names (set enableServiceLinks: false)")

        # Volumes: Secret/ConfigMap files where the pod would see them.
        pod_dir = os.path.join(self.work, "pods", name)
        os.makedirs(pod_dir, exist_ok=True)
        volumes = {v["name"]: v for v in spec.get("volumes", []) or []}
        remap, mounted = [], {}
        for m in c.get("volumeMounts", []) or []:
            if m["name"] not in volumes:
                self.fail(f"{where}: volumeMount {m['name']} has no volume")
            mp = m["mountPath"]
            local = os.path.join(ROOTFS, mp.lstrip("/")) if ROOTFS else os.path.join(pod_dir, "mounts", mp.lstrip("/"))
            files = self.volume_files(volumes[m["name"]], f"{where} volume {m['name']}")
            if m.get("subPath"):
                files = {"": files[m["subPath"]]} if m["subPath"] in files else self.fail(
                    f"{where}: subPath {m['subPath']} is not a key of volume {m['name']}")
            fs_group = (spec.get("securityContext") or {}).get("fsGroup")
            for rel, (data, mode) in files.items():
                path = os.path.join(local, rel) if rel else local
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "w", encoding="utf-8") as f:
                    f.write(data)
                os.chmod(path, mode)
                if ROOTFS:
                    self.written.append(path)
                    if fs_group is not None and os.geteuid() == 0:
                        os.chown(path, 0, fs_group)
                mounted[os.path.join(mp, rel) if rel else mp] = path
            if not ROOTFS:
                remap.append((mp, local))
        remap.sort(key=lambda x: -len(x[0]))

        def rewrite(v):
            for mp, local in remap:
                if v == mp or v.startswith(mp.rstrip("/") + "/"):
                    return local + v[len(mp):]
            return v

        # Every absolute path a variable names must be a mounted file; every mounted file named.
        named = set()
        for k, v in env.items():
            if v.startswith("/"):
                if v not in mounted and not (ROOTFS and os.path.exists(os.path.join(ROOTFS, v.lstrip("/")))):
                    self.fail(f"{where}: env {k}={v} names a file the pod does not have (mounted: {sorted(mounted)})")
                named.add(v)
        for a in argv[1:]:
            for part in re.split(r"[=,]", a):
                if part in mounted:
                    named.add(part)
        unnamed = sorted(set(mounted) - named)
        if unnamed:
            self.fail(f"{where}: mounted files {unnamed} are named by no env var or argument")
        env = {k: rewrite(v) for k, v in env.items()}
        argv = [argv[0]] + [rewrite(a) for a in argv[1:]]
        if remap:
            self.say(f"{name}: mounts {', '.join(mp for mp, _ in remap)} at {pod_dir}/mounts/... "
                     "(env and args naming them rewritten)")

        # What a kubelet adds: image PATH, HOSTNAME, Service links (not for pre-install hooks: no
        # Service exists yet). Rendered env wins.
        full = {"PATH": IMAGE_PATH, "HOSTNAME": fields["metadata.name"], "HOME": "/"}
        if kind != "Job" and spec.get("enableServiceLinks", True):
            full.update(self.service_links)
        full.update(env)
        ports = {p["name"]: p["containerPort"] for p in c.get("ports", []) or [] if p.get("name")}
        return {"name": name, "argv": prefixed(argv), "env": full, "cwd": "/" if PREFIX else pod_dir,
                "container": c, "ports": ports, "all_ports": [p["containerPort"] for p in c.get("ports", []) or []],
                "spec": spec, "where": where}

    def volume_files(self, vol, where):
        """{relative path: (text, mode)} of a Secret or ConfigMap volume."""
        if "secret" in vol:
            src = vol["secret"]
            data = self.secrets.get(src["secretName"])
            kind, name = "Secret", src["secretName"]
        elif "configMap" in vol:
            src = vol["configMap"]
            data = self.configmaps.get(src["name"])
            kind, name = "ConfigMap", src["name"]
        elif "emptyDir" in vol:
            return {}
        else:
            self.fail(f"{where}: volume type {sorted(vol)} not supported")
        if data is None:
            if src.get("optional"):
                return {}
            self.fail(f"{where}: {kind} {name} does not exist")
        mode = src.get("defaultMode", 0o644)
        items = src.get("items") or [{"key": k, "path": k} for k in data]
        out = {}
        for it in items:
            if it["key"] not in data:
                self.fail(f"{where}: {kind} {name} has no key {it['key']!r}")
            if kind == "Secret":
                self.consumed.add((name, it["key"]))
            out[it["path"]] = (data[it["key"]], it.get("mode", mode))
        return out

    # -- Probes ----------------------------------------------------------------------------------

    def probe_once(self, pod, probe, what):
        timeout = probe.get("timeoutSeconds", 1)
        if "httpGet" in probe:
            h = probe["httpGet"]
            port = self.probe_port(pod, h["port"], what)
            scheme = h.get("scheme", "HTTP").lower()
            url = f"{scheme}://127.0.0.1:{port}{h.get('path', '/')}"
            req = urllib.request.Request(url, headers={x["name"]: x["value"] for x in h.get("httpHeaders", [])})
            try:
                with urllib.request.urlopen(req, timeout=timeout, context=ssl._create_unverified_context()  # noqa: S323 - kubelet skips verification too
                                            if scheme == "https" else None) as r:
                    return 200 <= r.status < 400, f"HTTP {r.status}"
            except urllib.error.HTTPError as e:
                return 200 <= e.code < 400, f"HTTP {e.code}"
            except (OSError, ValueError) as e:
                return False, str(getattr(e, "reason", e))
        if "tcpSocket" in probe:
            port = self.probe_port(pod, probe["tcpSocket"]["port"], what)
            return port_open(port, timeout), f"tcp {port}"
        if "exec" in probe:
            r = subprocess.run(prefixed(probe["exec"]["command"]), env=pod["env"], capture_output=True,
                               timeout=max(timeout, 1), check=False)
            return r.returncode == 0, f"exit {r.returncode}"
        self.fail(f"{pod['where']} {what}: probe type {sorted(probe)} not supported")
        return False, ""

    def probe_port(self, pod, port, what):
        if isinstance(port, str) and not port.isdigit():
            if port not in pod["ports"]:
                self.fail(f"{pod['where']} {what}: named port {port!r} is not a container port ({sorted(pod['ports'])})")
            return pod["ports"][port]
        return int(port)

    def await_probes(self, pod, proc, started):
        """Startup, then readiness, as a kubelet schedules them."""
        c = pod["container"]
        for what in ("startupProbe", "readinessProbe"):
            probe = c.get(what)
            if not probe:
                continue
            period, threshold = probe.get("periodSeconds", 10), probe.get("failureThreshold", 3)
            due = started + probe.get("initialDelaySeconds", 0)
            failures, last = 0, ""
            while True:
                now = time.monotonic()
                if now < due:
                    if proc.poll() is not None:
                        break
                    time.sleep(min(0.1, due - now))
                    continue
                if proc.poll() is not None:
                    break
                ok, last = self.probe_once(pod, probe, what)
                if ok:
                    break
                failures += 1
                # A failed startupProbe gets the container killed; a failing readinessProbe only keeps
                # the pod out of its Services, so that one is given READY_SECONDS before it counts.
                if (what == "startupProbe" and failures >= threshold) or (
                        what == "readinessProbe" and time.monotonic() - started > max(READY_SECONDS, period * threshold)):
                    self.fail(f"{pod['where']}: {what} failed {failures} times ({last}); "
                              f"log:\n{self.procs.tail(pod['name'])}")
                due += period
            if proc.poll() is not None:
                self.fail(f"{pod['where']}: exited {proc.returncode} before its {what} passed; log:\n"
                          f"{self.procs.tail(pod['name'])}")
            self.say(f"{pod['name']}: {what} passed after {time.monotonic() - started:.1f}s")
            started = time.monotonic()

    # -- The run ---------------------------------------------------------------------------------

    def check_ports_free(self):
        for pod in self.pods():
            for c in pod[3]["containers"]:
                for p in c.get("ports", []) or []:
                    if not port_free(p["containerPort"]):
                        raise Mismatch(f"[{self.label}] port {p['containerPort']} ({pod[1]}) is in use: another "
                                       "chart-run, or something else; set CHART_RUN_PORT_BASE")

    def run_to_completion(self, pod, timeout):
        p = self.procs.start(pod["name"], pod["argv"], pod["env"], pod["cwd"])
        try:
            rc = p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.fail(f"{pod['where']}: still running after {timeout}s; log:\n{self.procs.tail(pod['name'])}")
        if rc != 0:
            self.fail(f"{pod['where']}: exited {rc}; log:\n{self.procs.tail(pod['name'], 40)}")

    def execute(self, operator_secret, owner_pubkey):
        t0 = time.monotonic()
        pods = self.pods()
        hooks = lambda ann: [h.strip() for h in ann.get("helm.sh/hook", "").split(",") if h.strip()]  # noqa: E731
        pre = sorted((p for p in pods if "pre-install" in hooks(p[4])), key=lambda p: int(p[4].get("helm.sh/hook-weight", "0")))
        tests = [p for p in pods if "test" in hooks(p[4])]
        deployments = [p for p in pods if p[0] == "Deployment"]
        others = [p for p in pods if p not in pre and p not in tests and p not in deployments]
        if others:
            self.fail(f"workloads chart-run does not know when to run: {[p[1] for p in others]}")
        resolved = {p[1]: self.resolve(*p) for p in pre + deployments + tests}
        never = sorted(n for n, read in self.user_read.items() if not read)
        if never:
            self.fail(f"extraEnv/envFrom variables {never} are read by none of the binaries that get them "
                      f"({ {n: sorted(set(self.user_unread.get(n, []))) for n in never} })")
        unused = sorted(f"{n}/{k}" for n, keys in self.secrets.items() for k in keys if (n, k) not in self.consumed)
        if unused:
            self.fail(f"test Secret keys consumed by no pod (the chart names other keys?): {unused}")
        self.check_ports_free()

        for p in pre:
            self.run_to_completion(resolved[p[1]], 120)
            self.say(f"{p[1]} (hook {p[4]['helm.sh/hook']}) completed")

        procs = {}
        for p in deployments:
            pod = resolved[p[1]]
            procs[p[1]] = (pod, self.procs.start(p[1], pod["argv"], pod["env"], pod["cwd"]), time.monotonic())
        errors = []

        def wait(name):
            pod, proc, started = procs[name]
            try:
                self.await_probes(pod, proc, started)
            except Mismatch as e:
                errors.append(str(e))

        threads = [threading.Thread(target=wait, args=(n,)) for n in procs]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise Mismatch("\n".join(errors))
        listening = listeners()
        for name, (pod, proc, _) in procs.items():
            mine = listening.get(proc.pid, [])
            for port in pod["all_ports"]:
                addrs = [a for a, p in mine if p == port]
                if not addrs:
                    self.fail(f"{pod['where']}: containerPort {port} is not listened on by the pod's process "
                              f"(it listens on {sorted(f'{a}:{p}' for a, p in mine)})")
                if all(a.startswith("127.") or a == "::1" for a in addrs):
                    self.fail(f"{pod['where']}: containerPort {port} is bound to loopback only ({addrs}): "
                              "the kubelet's probes and Services reach the pod IP")
            live = pod["container"].get("livenessProbe")
            if live:
                ok, why = self.probe_once(pod, live, "livenessProbe")
                if not ok:
                    self.fail(f"{pod['where']}: livenessProbe fails once ready ({why})")
        for svc, ports in self.service_ports.items():
            for sport, target in ports.items():
                if not port_open(target):
                    self.fail(f"Service {svc} port {sport} -> {target}: nothing answers")
        scraped = self.scrape()
        self.say(f"{len(procs)} Deployments ready, their ports and Services answer{scraped} ({time.monotonic() - t0:.1f}s)")

        if tests:
            self.provision(operator_secret, owner_pubkey)
        for p in tests:
            self.run_to_completion(resolved[p[1]], 120)
            self.say(f"{p[1]} (helm test) passed")
        for name, (pod, proc, _) in procs.items():
            if proc.poll() is not None:
                self.fail(f"{pod['where']}: exited {proc.returncode} during the run; log:\n{self.procs.tail(name)}")
        self.stop(procs)
        self.scan_logs(operator_secret)
        self.say(f"done in {time.monotonic() - t0:.1f}s")

    def never_logged(self, operator_secret):
        """Every secret the pods were given: the Secrets' keys and certificates' keys, and the
        passwords in any URL of the Secrets or the values (the default render puts one in each)."""
        urls = [v for keys in self.secrets.values() for v in keys.values()]
        urls += [self.values.get(dep, {}).get("url", "") for dep in ("nats", "redis")]
        needles = {operator_secret}
        for u in urls:
            m = re.match(r"^[a-z]+://[^/@:]*:([^/@]+)@", u or "")
            if m:
                needles.add(m.group(1))
        for name, keys in self.secrets.items():
            for key, value in keys.items():
                if key.endswith(".creds"):  # the user JWT and the nkey seed, each on its own line
                    needles.update(ln.strip() for ln in value.splitlines() if ln.strip() and "--" not in ln
                                   and not ln.lstrip().startswith("*"))
                elif "secret" in key or key.endswith(".key"):
                    needles.add(value.strip())
        return {n for n in needles if len(n) >= 8}

    def scan_logs(self, operator_secret):
        """No process's output (every pod, hook and helm test of the run) holds a secret it was
        given (docs/security.md, "Secrets never in logs or traces")."""
        needles = self.never_logged(operator_secret)
        found = []
        for f in sorted(os.listdir(self.procs.logs)):
            with open(os.path.join(self.procs.logs, f), encoding="utf-8", errors="replace") as fh:
                text = fh.read()
            found += [f"{f}: {n[:6]}..." for n in needles if n in text]
        if found:
            self.fail(f"secrets in the pods' logs: {found}")
        self.say(f"no secret of {len(needles)} (URL passwords, keys) in {len(os.listdir(self.procs.logs))} logs")

    def scrape(self):
        """Every ServiceMonitor endpoint, on every Service it selects, as Prometheus would scrape it."""
        n = 0
        services = k8s_objects(self.docs, "Service")
        for mon_name, mon in k8s_objects(self.docs, "ServiceMonitor").items():
            sel = mon["spec"].get("selector", {}).get("matchLabels", {})
            selected = [s for s, d in services.items() if all(d["metadata"].get("labels", {}).get(k) == v for k, v in sel.items())]
            if not selected:
                self.fail(f"ServiceMonitor {mon_name} selects no Service")
            for ep in mon["spec"]["endpoints"]:
                for svc in selected:
                    port = self.service_named.get(svc, {}).get(ep["port"])
                    if port is None:
                        self.fail(f"ServiceMonitor {mon_name}: Service {svc} has no port named {ep['port']!r}")
                    url = f"http://127.0.0.1:{port}{ep.get('path', '/metrics')}"
                    try:  # 200 (an HTTPError is an OSError); a service registers series lazily
                        with urllib.request.urlopen(url, timeout=5) as r:
                            r.read()
                    except (OSError, ValueError) as e:
                        self.fail(f"ServiceMonitor {mon_name}: scraping {svc} at {url} failed: {e}")
                    n += 1
        return f", {n} ServiceMonitor scrapes answer" if n else ""

    def provision(self, operator_secret, owner_pubkey):
        """The test community, through the operator API as an operator would, at the policy
        Service (`<fullname>-policy`, port `http`)."""
        policy = next(n for n in self.service_ports if n.endswith("-policy"))
        port = self.values["services"]["policy"]["port"]
        url = "http://" + self.map_services(f"{policy}:{port}", "operator URL")
        with open(os.path.join(CHART, "values.yaml"), encoding="utf-8") as f:
            host = merged(yaml.safe_load(f), self.values)["helmTest"]["host"]
        out = run_cli([host_bin("/usr/local/bin/buzz"), "operator", "create-community", "--url", url,
                       "--host", host, "--owner-pubkey", owner_pubkey],
                      env={"PATH": IMAGE_PATH, "BUZZ_OPERATOR_SECRET_KEY": operator_secret})
        self.say(f"community for host {host} provisioned through {url}: {out.strip()[:200]}")

    def stop(self, procs):
        """SIGTERM (after the preStop command is checked to exist), as a kubelet ends a pod."""
        for name, (pod, proc, _) in procs.items():
            pre = ((pod["container"].get("lifecycle") or {}).get("preStop") or {}).get("exec")
            if pre:
                cmd = pre["command"][0]
                root = ROOTFS or "/"
                found = (os.access(os.path.join(root, cmd.lstrip("/")), os.X_OK) if cmd.startswith("/")
                         else any(os.access(os.path.join(root, d.lstrip("/"), cmd), os.X_OK) for d in IMAGE_PATH.split(":")))
                if not found:
                    self.fail(f"{pod['where']}: preStop command {cmd!r} not found {'in ' + ROOTFS if ROOTFS else 'on PATH'}")
            proc.send_signal(signal.SIGTERM)
        for name, (pod, proc, _) in procs.items():
            grace = pod["spec"].get("terminationGracePeriodSeconds", 30)
            try:
                rc = proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                self.fail(f"{pod['where']}: still running {grace}s (terminationGracePeriodSeconds) after SIGTERM")
            if rc != 0:
                self.fail(f"{pod['where']}: exited {rc} on SIGTERM; log:\n{self.procs.tail(name)}")

    def cleanup(self):
        self.procs.stop_all()
        for path in self.written:
            try:
                os.remove(path)
            except OSError:
                pass


# ---------------------------------------------------------------------------------------------

def ports_for(base):
    """Only ports move: every public and admin port into the private range."""
    return {"services": {"gateway": {"port": base, "adminPort": base + 1}, "write": {"adminPort": base + 2},
                         "query": {"adminPort": base + 3}, "snapshot": {"adminPort": base + 4},
                         "policy": {"port": base + 5, "adminPort": base + 6}}}


def scenarios(keys):
    relay, operator, owner = keys["relay"], keys["operator"], keys["owner"]
    # The default render's dependencies take passwords in their URLs (trust auth, a server without
    # auth and Redis's passwordless default user accept any), so the log scan has them to look for.
    pw = {dep: f"{dep}-pw-{pysecrets.token_hex(8)}" for dep in ("pg", "nats", "redis")}
    db_url = f"postgres://postgres:{pw['pg']}@127.0.0.1:5432/{DB}"

    def default(base, work):
        values = merged({"operator": {"pubkeys": operator["pubkey"]}}, ports_for(base))
        values = merged(values, {
            "nats": {"url": f"nats://buzz:{pw['nats']}@127.0.0.1:4222", "subjectPrefix": PREFIX_NAME},
            "redis": {"url": f"redis://default:{pw['redis']}@127.0.0.1:6379", "keyPrefix": f"{PREFIX_NAME}:"},
            "operator": {"apiOrigin": f"http://127.0.0.1:{base + 5}"},
        })
        secrets = {"buzz-relay-database": {"url": db_url}, "buzz-relay-key": {"secret-key": relay["secret_key"]},
                   "buzz-relay-helm-test": {"owner-secret": owner["secret_key"]}}
        return values, secrets, []

    def production(base, work):
        tls = make_ca(os.path.join(work, "tls"))
        ca = open(tls["ca.crt"], encoding="utf-8").read()
        nats_port, redis_port, pg_port = base + 10, base + 11, base + 12
        for p in (nats_port, redis_port, pg_port):
            if not port_free(p):
                raise Mismatch(f"[production] port {p} is in use; set CHART_RUN_PORT_BASE")
        procs = Procs(os.path.join(work, "logs"))
        os.makedirs(procs.logs, exist_ok=True)
        nats = procs.start("nats-server-tls", ["nats-server", "-a", "127.0.0.1", "-p", str(nats_port), "--tls",
                                               "--tlscert", tls["server.crt"], "--tlskey", tls["server.key"]],
                           {"PATH": os.environ["PATH"]}, work)
        redis = procs.start("redis-server-tls", ["redis-server", "--port", "0", "--bind", "127.0.0.1",
                                                 "--tls-port", str(redis_port), "--tls-cert-file", tls["server.crt"],
                                                 "--tls-key-file", tls["server.key"], "--tls-ca-cert-file", tls["ca.crt"],
                                                 "--tls-auth-clients", "no", "--save", "", "--appendonly", "no",
                                                 "--dir", work], {"PATH": os.environ["PATH"]}, work)
        front = PgTlsFront(pg_port, tls["server.crt"], tls["server.key"])
        try:
            wait_port(nats_port, nats, f"the private TLS nats-server (log: {procs.tail('nats-server-tls')})")
            wait_port(redis_port, redis, f"the private TLS redis-server (log: {procs.tail('redis-server-tls')})")
        except Mismatch:
            procs.stop_all()
            front.close()
            raise
        values = merged(PRODUCTION, ports_for(base))
        values = merged(values, {
            "nats": {"url": f"tls://127.0.0.1:{nats_port}", "subjectPrefix": PREFIX_NAME},
            "redis": {"url": f"rediss://127.0.0.1:{redis_port}", "keyPrefix": f"{PREFIX_NAME}:"},
            "operator": {"apiOrigin": f"http://127.0.0.1:{base + 5}"},
        })
        secrets = {
            "buzz-db": {"url": f"postgres://postgres@127.0.0.1:{pg_port}/{DB}"},
            "buzz-db-ca": {"ca.crt": ca},
            "buzz-nats-creds": {"user.creds": nats_creds()},
            "buzz-nats-ca": {"ca.crt": ca},
            "buzz-redis": {"url": f"rediss://127.0.0.1:{redis_port}"},
            "buzz-redis-ca": {"ca.crt": ca},
            "buzz-relay-key": {"secret-key": relay["secret_key"]},
            "buzz-operator": {"pubkeys": operator["pubkey"]},
            "buzz-relay-helm-test": {"owner-secret": owner["secret_key"]},
        }
        return values, secrets, [procs.stop_all, front.close]

    return [("default", PORT_BASE, default), ("production", PORT_BASE + 50, production)]


def main():
    global WORK
    if not WORK:
        import tempfile
        WORK = tempfile.mkdtemp(prefix="buzz-chart-run.")
    only = os.environ.get("CHART_RUN_ONLY", "")
    t0 = time.monotonic()
    # A SIGTERM/SIGINT from scripts/chart-run.sh's trap unwinds through the finally blocks.
    def interrupted(*_):
        log("interrupted: stopping every process started")
        sys.exit(143)

    signal.signal(signal.SIGTERM, interrupted)
    if not PREFIX:
        missing = [b for b in ("buzz", "buzz-gateway", "buzz-write", "buzz-query", "buzz-snapshot", "buzz-policy",
                               "buzz-load") if not os.access(os.path.join(BIN_DIR, b), os.X_OK)]
        if missing:
            log(f"FAIL: {missing} not built in {BIN_DIR}: cargo build -p buzz-cli -p buzz-gateway -p buzz-write "
                "-p buzz-query -p buzz-snapshot -p buzz-policy -p buzz-load --bins (or set CHART_RUN_BIN_DIR)")
            return 1
    try:
        keys = {k: keygen() for k in ("relay", "operator", "owner")}
        done = []
        for label, base, make in scenarios(keys):
            if only and label != only:
                continue
            work = os.path.join(WORK, label)
            os.makedirs(work, exist_ok=True)
            psql(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
            psql(f"CREATE DATABASE {DB}")
            clear_redis_prefix()
            extra_cleanup = []
            run = None
            try:
                values, secrets, extra_cleanup = make(base, work)
                run = Run(label, values, base, secrets, work)
                run.execute(keys["operator"]["secret_key"], keys["owner"]["pubkey"])
                done.append(label)
            finally:
                if run:
                    run.cleanup()
                for f in extra_cleanup:
                    f()
                psql(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
                clear_redis_prefix()
    except Mismatch as e:
        log(f"FAIL {e}")
        log(f"logs and files: {WORK}")
        return 1
    except Exception as e:  # noqa: BLE001 - setup errors (psql, openssl, rendering) end the run too
        import traceback
        traceback.print_exc()
        detail = getattr(e, "stderr", "") or ""
        log(f"FAIL (setup) {e} {detail}")
        log(f"logs and files: {WORK}")
        return 1
    log(f"PASS: the chart's pods ran as rendered ({', '.join(done)} values): migrate hook, every "
        f"Deployment probed ready, helm test round trip ({time.monotonic() - t0:.1f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
