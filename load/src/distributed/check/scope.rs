//! Who may read what in a run: the open channel every member, the private channel (the
//! workday's) its members only; and which key each listener read as.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

/// Who may read which channel of the run.
#[derive(Debug, Clone, Default)]
pub struct Scope {
    /// The open channel.
    pub open: String,
    /// The private channel, if the run has one.
    pub private: Option<String>,
    /// Its members' public keys.
    pub members: HashSet<String>,
}

impl Scope {
    /// The scope `run.json` names.
    #[must_use]
    pub fn from_run(run: Option<&Value>) -> Self {
        let Some(run) = run else { return Self::default() };
        let members = run["private_members"]
            .as_array()
            .map_or_else(HashSet::new, |m| m.iter().filter_map(Value::as_str).map(str::to_owned).collect());
        Self {
            open: run["channel"].as_str().unwrap_or("").to_owned(),
            private: run["private_channel"].as_str().map(str::to_owned),
            members,
        }
    }

    /// Whether `pk` (unknown: no member) may read `channel`.
    #[must_use]
    pub fn may_read(&self, pk: Option<&str>, channel: &str) -> bool {
        channel == self.open || (self.is_private(channel) && pk.is_some_and(|p| self.members.contains(p)))
    }

    /// Whether `channel` is the private channel.
    #[must_use]
    pub fn is_private(&self, channel: &str) -> bool {
        self.private.as_deref() == Some(channel)
    }
}

/// Listener `l` → its public key, from the `lkey` audit lines.
#[must_use]
pub fn listener_keys(records: &[Value]) -> HashMap<u64, String> {
    records
        .iter()
        .filter(|r| r["t"] == "lkey")
        .filter_map(|r| Some((r["l"].as_u64()?, r["pk"].as_str()?.to_owned())))
        .collect()
}
