//! The frozen manifest: entries packed 64 bytes each (artifact UUID, revision id, channel UUID),
//! cut into pages of at most `pageRows` entries and `pageBytes` of JSON; tokens and cursors.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use buzz_bus::snapshot::{SnapshotCode, LIMITS};
use buzz_core::{ChannelId, EventId};
use uuid::Uuid;

/// Bytes of one packed entry.
pub const ENTRY_BYTES: usize = 64;

/// One captured identity: the artifact, its captured (then current) revision and home channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    /// The artifact's `d` identifier.
    pub d: Uuid,
    /// The revision id (sha256), raw.
    pub revision: [u8; 32],
    /// The artifact's home channel.
    pub channel: ChannelId,
}

impl Entry {
    /// The entry of revision `revision` of artifact `d` in `channel`.
    #[must_use]
    pub fn new(d: Uuid, revision: &EventId, channel: ChannelId) -> Self {
        Self { d, revision: revision.to_bytes(), channel }
    }

    /// The revision id as 64 lowercase hex characters.
    #[must_use]
    pub fn revision_hex(&self) -> String {
        hex::encode(self.revision)
    }

    fn pack_into(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(self.d.as_bytes());
        out.extend_from_slice(&self.revision);
        out.extend_from_slice(self.channel.0.as_bytes());
    }

    /// The direct body record of this entry: artifact and channel (32 bytes).
    #[must_use]
    pub fn body_record(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(32);
        v.extend_from_slice(self.d.as_bytes());
        v.extend_from_slice(self.channel.0.as_bytes());
        v
    }

    /// The JSON object of a page entry.
    #[must_use]
    pub fn to_json(&self) -> String {
        format!(
            "{{\"artifactId\":\"{}\",\"revisionId\":\"{}\",\"channelId\":\"{}\"}}",
            self.d,
            self.revision_hex(),
            self.channel
        )
    }
}

/// Decodes a packed page (a stored blob); a malformed blob is a lost record.
pub fn unpack(blob: &[u8]) -> Result<Vec<Entry>, SnapshotCode> {
    if !blob.len().is_multiple_of(ENTRY_BYTES) {
        return Err(SnapshotCode::SnapshotReset);
    }
    Ok(blob
        .chunks_exact(ENTRY_BYTES)
        .map(|c| {
            let mut revision = [0u8; 32];
            revision.copy_from_slice(&c[16..48]);
            Entry {
                d: Uuid::from_slice(&c[..16]).unwrap_or_default(),
                revision,
                channel: ChannelId(Uuid::from_slice(&c[48..]).unwrap_or_default()),
            }
        })
        .collect())
}

/// A direct body record back to (artifact, channel).
#[must_use]
pub fn body_record(record: &[u8]) -> Option<(Uuid, ChannelId)> {
    (record.len() == 32).then(|| {
        (
            Uuid::from_slice(&record[..16]).unwrap_or_default(),
            ChannelId(Uuid::from_slice(&record[16..]).unwrap_or_default()),
        )
    })
}

/// Cuts entries into packed pages: at most `page_rows` entries and `page_bytes` of entry JSON
/// (plus the response's framing, which is small and fixed) per page. At least one page, which
/// may be empty.
#[must_use]
pub fn pages(entries: &[Entry]) -> Vec<Vec<u8>> {
    let budget = LIMITS.page_bytes - 1024;
    let mut out = vec![Vec::new()];
    let (mut rows, mut bytes) = (0usize, 0usize);
    for e in entries {
        let len = e.to_json().len() + 1;
        if rows == LIMITS.page_rows || bytes + len > budget {
            out.push(Vec::new());
            rows = 0;
            bytes = 0;
        }
        let page = out.last_mut().expect("at least one page");
        e.pack_into(page);
        rows += 1;
        bytes += len;
    }
    out
}

/// The `entries` JSON array of a packed page.
#[must_use]
pub fn entries_json(entries: &[Entry]) -> String {
    let mut s = String::with_capacity(entries.len() * 160 + 2);
    s.push('[');
    for (i, e) in entries.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        s.push_str(&e.to_json());
    }
    s.push(']');
    s
}

/// The client's token: capture generation and a 128-bit secret. Opaque to the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Token {
    /// The capture generation.
    pub generation: u64,
    /// The capture's secret, compared with the stored one.
    pub secret: [u8; 16],
}

impl Token {
    /// Base64url (no padding) of generation and secret.
    #[must_use]
    pub fn encode(&self) -> String {
        let mut raw = self.generation.to_be_bytes().to_vec();
        raw.extend_from_slice(&self.secret);
        URL_SAFE_NO_PAD.encode(raw)
    }
    /// The token a client sent back; anything else is `snapshot_invalid`.
    pub fn decode(s: &str) -> Result<Self, SnapshotCode> {
        let raw = URL_SAFE_NO_PAD.decode(s).map_err(|_| SnapshotCode::SnapshotInvalid)?;
        let (g, secret) = raw.split_first_chunk::<8>().ok_or(SnapshotCode::SnapshotInvalid)?;
        let secret: [u8; 16] = secret.try_into().map_err(|_| SnapshotCode::SnapshotInvalid)?;
        Ok(Self { generation: u64::from_be_bytes(*g), secret })
    }
}

/// A page position within a capture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cursor {
    /// The capture generation.
    pub generation: u64,
    /// The page number, from 0.
    pub page: u32,
}

impl Cursor {
    /// Base64url (no padding) of generation and page.
    #[must_use]
    pub fn encode(&self) -> String {
        let mut raw = self.generation.to_be_bytes().to_vec();
        raw.extend_from_slice(&self.page.to_be_bytes());
        URL_SAFE_NO_PAD.encode(raw)
    }
    /// The cursor a client sent back; anything else is `snapshot_invalid`.
    pub fn decode(s: &str) -> Result<Self, SnapshotCode> {
        let raw = URL_SAFE_NO_PAD.decode(s).map_err(|_| SnapshotCode::SnapshotInvalid)?;
        let raw: [u8; 12] = raw.try_into().map_err(|_| SnapshotCode::SnapshotInvalid)?;
        let (g, p) = raw.split_at(8);
        Ok(Self {
            generation: u64::from_be_bytes(g.try_into().map_err(|_| SnapshotCode::SnapshotInvalid)?),
            page: u32::from_be_bytes(p.try_into().map_err(|_| SnapshotCode::SnapshotInvalid)?),
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn entry(i: u128) -> Entry {
        Entry { d: Uuid::from_u128(i + 1), revision: [7; 32], channel: ChannelId::from_u128(99) }
    }

    #[test]
    fn pages_hold_at_most_page_rows_entries_and_round_trip() {
        let entries: Vec<Entry> = (0..2500).map(entry).collect();
        let cut = pages(&entries);
        assert_eq!(cut.len(), 3);
        let back: Vec<Entry> = cut.iter().flat_map(|p| unpack(p).unwrap()).collect();
        assert_eq!(back, entries);
        assert!(cut.iter().all(|p| entries_json(&unpack(p).unwrap()).len() < LIMITS.page_bytes));
        assert_eq!(pages(&[]).len(), 1);
    }

    #[test]
    fn tokens_and_cursors_round_trip_and_garbage_is_invalid() {
        let t = Token { generation: 42, secret: [9; 16] };
        assert_eq!(Token::decode(&t.encode()), Ok(t));
        let c = Cursor { generation: 42, page: 3 };
        assert_eq!(Cursor::decode(&c.encode()), Ok(c));
        for bad in ["", "!!", "AAAA", &c.encode()] {
            assert_eq!(Token::decode(bad), Err(SnapshotCode::SnapshotInvalid), "{bad}");
        }
        assert_eq!(Cursor::decode(&t.encode()), Err(SnapshotCode::SnapshotInvalid));
    }
}
