//! `buzz operator export` and `buzz operator import`: a community to an NDJSON file and back
//! (policy-service/src/portability/export.rs, import/), signed with the operator's key (NIP-98).
//!
//! Export streams the answer to the file chunk by chunk with a progress counter on stderr (the
//! header line carries the row counts) and fails unless the file ends with the `end` line.
//! Import sends the file with a `payload` tag (sha256 of the body, which the relay requires for
//! this route). The file is read twice, in chunks: a first pass hashes it for that tag, a second
//! streams it as the body, so memory stays bounded whatever the file's size.

use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use buzz_core::Keys;

/// How often the progress line is redrawn.
const PROGRESS_EVERY: Duration = Duration::from_millis(500);

/// Why a transfer failed.
#[derive(Debug, thiserror::Error)]
pub enum TransferError {
    /// The file could not be written or read.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The request failed.
    #[error("request failed: {0}")]
    Http(#[from] reqwest::Error),
    /// The relay refused (status and body).
    #[error("HTTP {0}: {1}")]
    Refused(reqwest::StatusCode, String),
    /// The export stopped before its `end` line.
    #[error("the export was cut short (no end line); the file is incomplete")]
    Incomplete,
}

/// Rows written and the total the header announced.
struct Progress {
    rows: u64,
    total: u64,
    shown: Instant,
    quiet: bool,
}

impl Progress {
    fn line(&mut self, line: &[u8]) {
        if self.rows == 0 {
            let header: serde_json::Value = serde_json::from_slice(line).unwrap_or_default();
            let counts = header.get("counts").and_then(serde_json::Value::as_object);
            self.total = counts.map_or(0, |c| c.values().filter_map(serde_json::Value::as_u64).sum());
        }
        self.rows += 1;
        if !self.quiet && self.shown.elapsed() >= PROGRESS_EVERY {
            self.shown = Instant::now();
            self.show();
        }
    }

    fn show(&self) {
        let pct = if self.total == 0 { 100 } else { self.rows.saturating_mul(100) / self.total.max(1) };
        eprint!("\rexported {} of {} rows ({}%)", self.rows, self.total, pct.min(100));
    }
}

/// Downloads community `community_id`'s export from the operator API at `url` into `out`;
/// answers the number of lines written.
pub async fn export(
    keys: &Keys,
    url: &str,
    community_id: uuid::Uuid,
    out: &Path,
    quiet: bool,
) -> Result<u64, TransferError> {
    let url = format!("{}/operator/communities/{community_id}/export", url.trim_end_matches('/'));
    let auth = buzz_core::nip98::authorization_header(keys, "GET", &url, &[]);
    let mut res = reqwest::Client::new().get(&url).header("authorization", auth).send().await?;
    if !res.status().is_success() {
        let status = res.status();
        return Err(TransferError::Refused(status, res.text().await.unwrap_or_default()));
    }
    let mut file = std::io::BufWriter::new(std::fs::File::create(out)?);
    let mut progress = Progress { rows: 0, total: 0, shown: Instant::now(), quiet };
    let mut partial: Vec<u8> = Vec::new();
    let mut last = Vec::new();
    while let Some(chunk) = res.chunk().await? {
        file.write_all(&chunk)?;
        partial.extend_from_slice(&chunk);
        let mut start = 0;
        while let Some(nl) = partial[start..].iter().position(|b| *b == b'\n') {
            let line = &partial[start..start + nl];
            progress.line(line);
            last.clear();
            last.extend_from_slice(line);
            start += nl + 1;
        }
        partial.drain(..start);
    }
    file.flush()?;
    if !quiet {
        progress.show();
        eprintln!();
    }
    if !partial.is_empty() || !last.starts_with(b"{\"type\":\"end\"") {
        return Err(TransferError::Incomplete);
    }
    Ok(progress.rows)
}

/// Bytes read at a time from the file being imported.
const READ_CHUNK: usize = 256 * 1024;

/// The sha256 (hex) and length of `file`, read in chunks.
async fn sha256_of(file: &Path) -> Result<(String, u64), TransferError> {
    use sha2::Digest as _;
    use tokio::io::AsyncReadExt as _;
    let mut f = tokio::fs::File::open(file).await?;
    let mut hash = sha2::Sha256::new();
    let mut buf = vec![0; READ_CHUNK];
    let mut len = 0u64;
    loop {
        let n = f.read(&mut buf).await?;
        if n == 0 {
            return Ok((hex::encode(hash.finalize()), len));
        }
        hash.update(&buf[..n]);
        len += n as u64;
    }
}

/// Sends the export in `file` to the operator API at `url`, bound to `host` when given; answers
/// the relay's JSON answer (201 imported, 200 already imported).
pub async fn import(
    keys: &Keys,
    url: &str,
    file: &Path,
    host: Option<&str>,
) -> Result<serde_json::Value, TransferError> {
    let mut url = format!("{}/operator/communities/import", url.trim_end_matches('/'));
    if let Some(host) = host {
        url.push_str("?host=");
        url.push_str(host);
    }
    let (digest, len) = sha256_of(file).await?;
    let auth = buzz_core::nip98::authorization_header_for(keys, "POST", &url, Some(&digest));
    let stream = tokio_util::io::ReaderStream::with_capacity(tokio::fs::File::open(file).await?, READ_CHUNK);
    let res = reqwest::Client::new()
        .post(&url)
        .header("authorization", auth)
        .header("content-type", "application/x-ndjson")
        .header("content-length", len)
        .body(reqwest::Body::wrap_stream(stream))
        .send()
        .await?;
    let status = res.status();
    let text = res.text().await.unwrap_or_default();
    if !status.is_success() {
        return Err(TransferError::Refused(status, text));
    }
    Ok(serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text)))
}
