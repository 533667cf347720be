//! Real TLS servers for `tls.rs`: a throwaway CA and server certificate made with the `openssl` CLI,
//! and private PostgreSQL, Redis and NATS processes on free loopback ports that only speak TLS.
//! Each process is killed when its handle drops.

#![allow(dead_code, clippy::unwrap_used)]

pub mod nats_jwt;

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The newest Debian-packaged PostgreSQL's binaries (`/usr/lib/postgresql/<version>/bin`).
pub fn pg_bin() -> String {
    let versions = std::fs::read_dir("/usr/lib/postgresql").into_iter().flatten().flatten();
    let newest = versions.filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok()).max().unwrap_or(15);
    format!("/usr/lib/postgresql/{newest}/bin")
}

/// The binary at `path` or on `PATH`, or `None` (the test then skips and says why).
pub fn binary(name: &str) -> Option<PathBuf> {
    if Path::new(name).is_absolute() {
        return Path::new(name).is_file().then(|| PathBuf::from(name));
    }
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/usr/bin")])
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// Skips the calling test (returns early) when a binary is missing, with the reason on stderr.
#[macro_export]
macro_rules! require {
    ($($bin:expr),+) => {
        $(if tls_support::binary($bin).is_none() {
            eprintln!("SKIPPED: {} is not installed (scripts/deps-up.sh installs it)", $bin);
            return;
        })+
    };
}

/// A fresh directory under the system temp dir, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("buzz-tls-{tag}-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }
    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

const CA_CONFIG: &str = "[req]\ndistinguished_name = dn\nx509_extensions = ext\nprompt = no\n[dn]\nCN = buzz test ca\n[ext]\nbasicConstraints = critical, CA:TRUE\nkeyUsage = critical, keyCertSign, cRLSign\nsubjectKeyIdentifier = hash\n";

/// A CA and a server certificate for `localhost` / `127.0.0.1` signed by it.
pub struct Certs {
    pub dir: TempDir,
    pub ca: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl").args(args).current_dir(dir).output().unwrap();
    assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

impl Certs {
    pub fn new() -> Self {
        let dir = TempDir::new("certs");
        let d = &dir.0;
        let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"];
        std::fs::write(d.join("ca.cnf"), CA_CONFIG).unwrap();
        openssl(d, &["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", "ca.key"]);
        openssl(d, &["req", "-x509", "-config", "ca.cnf", "-key", "ca.key", "-out", "ca.pem", "-days", "2"]);
        std::fs::write(d.join("ext.cnf"), "subjectAltName=DNS:localhost,IP:127.0.0.1\n").unwrap();
        openssl(
            d,
            &[&["req"][..], &ec, &["-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=localhost"]]
                .concat(),
        );
        let sign =
            ["x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial"];
        openssl(d, &[&sign[..], &["-days", "2", "-out", "server.pem", "-extfile", "ext.cnf"]].concat());
        Self { ca: d.join("ca.pem"), cert: d.join("server.pem"), key: d.join("server.key"), dir }
    }
}

/// A free loopback port (bound, read, released).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A server process, killed on drop.
pub struct Server {
    pub child: Child,
    pub port: u16,
    pub dir: TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        // SIGQUIT: PostgreSQL's immediate shutdown (its backends go too); the others just stop.
        let _ = Command::new("kill").arg("-QUIT").arg(self.child.id().to_string()).status();
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline && matches!(self.child.try_wait(), Ok(None)) {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Polls until `port` accepts TCP connections (or the process exits), with a deadline.
pub fn wait_listening(child: &mut Child, port: u16, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    while TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("{what} exited before listening: {status}");
        }
        assert!(Instant::now() < deadline, "{what} did not listen on {port} in time");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// redis-server with TLS only (`port 0`), no persistence.
pub fn redis(certs: &Certs) -> Server {
    let dir = TempDir::new("redis");
    let port = free_port();
    let s = |p: &PathBuf| p.display().to_string();
    let mut child = Command::new(binary("redis-server").unwrap())
        .args(["--port", "0", "--tls-port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--tls-cert-file", &s(&certs.cert), "--tls-key-file", &s(&certs.key)])
        .args(["--tls-ca-cert-file", &s(&certs.ca), "--tls-auth-clients", "no"])
        .args(["--save", "", "--appendonly", "no", "--dir", &s(&dir.0)])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    wait_listening(&mut child, port, "redis-server");
    Server { child, port, dir }
}

/// nats-server with a required TLS block and the given extra configuration (e.g. operator mode).
pub fn nats(certs: &Certs, extra: &str) -> Server {
    let dir = TempDir::new("nats");
    let port = free_port();
    let conf = format!(
        "listen: \"127.0.0.1:{port}\"\ntls {{\n  cert_file: \"{}\"\n  key_file: \"{}\"\n}}\n{extra}\n",
        certs.cert.display(),
        certs.key.display()
    );
    std::fs::write(dir.path("nats.conf"), conf).unwrap();
    let mut child = Command::new(binary("nats-server").unwrap())
        .arg("-c")
        .arg(dir.path("nats.conf"))
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_listening(&mut child, port, "nats-server");
    Server { child, port, dir }
}

/// The uid and gid a private PostgreSQL runs as when we are root (initdb refuses root): `postgres`'s.
fn pg_ids() -> Option<(u32, u32)> {
    let id = |args: &[&str]| {
        let out = Command::new("id").args(args).output().ok()?;
        String::from_utf8_lossy(&out.stdout).trim().parse::<u32>().ok()
    };
    if id(&["-u"])? != 0 {
        return None;
    }
    Some((
        id(&["-u", "postgres"]).expect("user postgres (from the postgresql package)"),
        id(&["-g", "postgres"])?,
    ))
}

/// `program` run directly as the PostgreSQL user (no `su` in between, so killing it kills it).
fn as_pg_user(program: PathBuf) -> Command {
    use std::os::unix::process::CommandExt as _;
    let mut c = Command::new(program);
    if let Some((uid, gid)) = pg_ids() {
        c.uid(uid).gid(gid);
    }
    c
}

fn chown_to_pg(path: &Path) {
    if let Some((uid, gid)) = pg_ids() {
        std::os::unix::fs::chown(path, Some(uid), Some(gid)).unwrap();
    }
}

/// A private PostgreSQL cluster with `ssl = on` whose `pg_hba.conf` accepts only TLS connections
/// (plain TCP is rejected), trust auth for user `postgres`.
pub fn postgres(certs: &Certs) -> Server {
    let dir = TempDir::new("pg");
    let data = dir.path("data");
    chown_to_pg(&dir.0);
    let out = as_pg_user(Path::new(&pg_bin()).join("initdb"))
        .args(["-D", &data.display().to_string(), "-U", "postgres", "-A", "trust", "--no-sync"])
        .output()
        .unwrap();
    assert!(out.status.success(), "initdb: {}", String::from_utf8_lossy(&out.stderr));
    for (from, to) in [(&certs.cert, "server.crt"), (&certs.key, "server.key")] {
        std::fs::copy(from, data.join(to)).unwrap();
    }
    let hba = "hostssl all all 127.0.0.1/32 trust\nhostnossl all all 127.0.0.1/32 reject\n";
    std::fs::write(data.join("pg_hba.conf"), hba).unwrap();
    for p in [data.join("server.crt"), data.join("server.key"), data.join("pg_hba.conf")] {
        chown_to_pg(&p);
    }
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(data.join("server.key"), std::fs::Permissions::from_mode(0o600)).unwrap();
    let port = free_port();
    let mut child = as_pg_user(Path::new(&pg_bin()).join("postgres"))
        .args([
            "-D",
            &data.display().to_string(),
            "-p",
            &port.to_string(),
            "-k",
            &dir.0.display().to_string(),
        ])
        .args(["-c", "listen_addresses=127.0.0.1", "-c", "ssl=on", "-c", "fsync=off"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_listening(&mut child, port, "postgres");
    Server { child, port, dir }
}
