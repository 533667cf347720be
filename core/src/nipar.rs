//! NIP-AR channel artifacts: the kind-45010 revision envelope, validated without I/O
//! (`../shared/spec/NIP-AR.md`, "Event format").

use uuid::Uuid;

use crate::event::Event;
use crate::ids::{ChannelId, EventId};

/// An artifact revision.
pub const KIND_REVISION: u32 = crate::kinds::ARTIFACT_REVISION;
/// The relay-signed removal a move leaves in the source channel.
pub const KIND_REMOVAL: u32 = crate::kinds::ARTIFACT_REMOVAL;
/// Most tags a revision may carry.
pub const MAX_TAGS: usize = 256;
/// Largest `type`, in bytes.
pub const MAX_TYPE_BYTES: usize = 128;
/// Largest `title`, in UTF-8 bytes.
pub const MAX_TITLE_BYTES: usize = 512;

/// A NIP-AR revision's `op` tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// The first revision of an artifact.
    Create,
    /// A new version in the same home channel.
    Update,
    /// A new version in another home channel.
    Move,
    /// The artifact is deleted (kept for history and restore).
    Delete,
    /// A deleted artifact is current again.
    Restore,
}

impl Op {
    /// The tag value, e.g. `create`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Create => "create",
            Self::Update => "update",
            Self::Move => "move",
            Self::Delete => "delete",
            Self::Restore => "restore",
        }
    }
}

/// The envelope of a valid revision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Envelope {
    /// Stable artifact id (`d`).
    pub d: Uuid,
    /// Home channel (`h`).
    pub h: ChannelId,
    /// The artifact type (`type` tag), e.g. `buzz.task`.
    pub type_name: String,
    /// Absent exactly on delete.
    pub title: Option<String>,
    /// What this revision does.
    pub op: Op,
    /// Conversation anchor event id in `h`.
    pub root: Option<EventId>,
    /// Previous accepted revision id; absent exactly on create.
    pub prev: Option<EventId>,
}

/// Tags that make up the envelope. Each has exactly two string elements and occurs at most once;
/// any other name except `auth` (NIP-OA) is a client tag.
pub const ENVELOPE_TAGS: [&str; 8] = ["ar", "d", "h", "type", "title", "op", "root", "prev"];

/// The only envelope version this relay accepts (`ar`).
pub const ENVELOPE_VERSION: &str = "1";

impl Op {
    /// The op named by an `op` tag value (exact, lowercase).
    #[must_use]
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "create" => Self::Create,
            "update" => Self::Update,
            "move" => Self::Move,
            "delete" => Self::Delete,
            "restore" => Self::Restore,
            _ => return None,
        })
    }
}

/// The tags of the relay-signed kind-45011 removal a move leaves in its source: the artifact
/// (`d`), the source scope (`h`) and the revision it replaced (`e`); no destination metadata and
/// no content. The write-service signs it when it accepts a move; a community import derives it
/// again, from the imported revision records, for the removals its file carries.
#[must_use]
pub fn removal_tags(d: Uuid, source: ChannelId, replaced: &str) -> Vec<Vec<String>> {
    vec![
        vec!["d".to_owned(), d.to_string()],
        vec!["h".to_owned(), source.to_string()],
        vec!["e".to_owned(), replaced.to_owned()],
    ]
}

/// Validates a kind-45010 event's envelope (every "Event format" rule of the spec). The error is
/// the text after `invalid: `, naming the rule that failed. NIP-OA `auth` tags are checked
/// elsewhere (signatures), but their count and shape rules on delete revisions are checked here.
/// (The count and shape are checked on every op, through [`crate::nipoa::auth_tag`]: the contract
/// makes more than one `auth` tag invalid on any artifact, and every artifact `auth` tag must verify.)
///
/// Order of checks: kind, tag count, `ar` (so an unsupported version is reported as such rather
/// than as whatever else a future version changed), then every tag's shape and uniqueness, then
/// each envelope value, then the per-op rules.
pub fn parse(event: &Event) -> Result<Envelope, String> {
    if event.kind != KIND_REVISION {
        return Err(format!("kind must be {KIND_REVISION}"));
    }
    if event.tags.len() > MAX_TAGS {
        return Err(format!("more than {MAX_TAGS} tags"));
    }
    check_version(event)?;

    let mut slots: [Option<&str>; ENVELOPE_TAGS.len()] = [None; ENVELOPE_TAGS.len()];
    let mut client_tag: Option<&str> = None;
    for tag in &event.tags {
        let Some(name) = tag.first() else { return Err("empty tag".into()) };
        let Some(i) = ENVELOPE_TAGS.iter().position(|t| t == name) else {
            if name != "auth" && client_tag.is_none() {
                client_tag = Some(name);
            }
            continue;
        };
        let [_, value] = tag.as_slice() else {
            return Err(format!("{name} tag must have exactly two elements"));
        };
        if slots[i].replace(value).is_some() {
            // A second envelope tag (e.g. a client trying to override `h`) is never allowed.
            return Err(format!("duplicate {name} tag"));
        }
    }
    let [_ar, d, h, type_name, title, op, root, prev] = slots;

    let d = uuid_tag("d", d)?;
    let h = ChannelId(uuid_tag("h", h)?);
    let type_name = type_name.ok_or("missing type tag")?;
    check_type(type_name)?;
    let op = op.ok_or("missing op tag")?;
    let op = Op::parse(op).ok_or("op must be one of create, update, move, delete, restore")?;
    let root = root.map(|r| event_id_tag("root", r)).transpose()?;
    let prev = prev.map(|p| event_id_tag("prev", p)).transpose()?;

    let title = if op == Op::Delete {
        if title.is_some() {
            return Err("title must be absent on delete".into());
        }
        None
    } else {
        let title = title.ok_or("missing title tag")?;
        if title.trim().is_empty() {
            return Err("title must not be blank".into());
        }
        if title.len() > MAX_TITLE_BYTES {
            return Err(format!("title exceeds {MAX_TITLE_BYTES} bytes"));
        }
        Some(title)
    };

    match (op, &prev) {
        (Op::Create, Some(_)) => return Err("prev must be absent on create".into()),
        (Op::Create, None) | (_, Some(_)) => {}
        (_, None) => return Err(format!("missing prev tag on {}", op.as_str())),
    }

    // NIP-OA: at most one `auth` tag on any revision, and it must be well formed; its signature and
    // conditions are verified by the write path.
    crate::nipoa::auth_tag(event)?;

    if op == Op::Delete {
        if !event.content.is_empty() {
            return Err("delete content must be empty".into());
        }
        if let Some(name) = client_tag {
            return Err(format!("client tag {} on delete", excerpt(name)));
        }
    }

    Ok(Envelope { d, h, type_name: type_name.to_owned(), title: title.map(str::to_owned), op, root, prev })
}

/// `ar`: present, well formed, once, and the supported version.
fn check_version(event: &Event) -> Result<(), String> {
    let mut ars = event.tags_named("ar");
    let Some(ar) = ars.next() else { return Err("missing ar tag".into()) };
    if ars.next().is_some() {
        return Err("duplicate ar tag".into());
    }
    let [_, version] = ar else { return Err("ar tag must have exactly two elements".into()) };
    if version != ENVELOPE_VERSION {
        return Err(format!("unsupported envelope version ar={}", excerpt(version)));
    }
    Ok(())
}

/// `d` / `h`: a lowercase, hyphenated, non-nil UUID (no braces, `urn:uuid:`, or simple form).
fn uuid_tag(name: &str, value: Option<&str>) -> Result<Uuid, String> {
    let value = value.ok_or_else(|| format!("missing {name} tag"))?;
    let uuid =
        crate::ids::parse_uuid(value).ok_or_else(|| format!("{name} must be a lowercase hyphenated uuid"))?;
    if uuid.is_nil() {
        return Err(format!("{name} must not be the nil uuid"));
    }
    Ok(uuid)
}

/// `root` / `prev`: an event id, exactly 64 lowercase hex characters.
fn event_id_tag(name: &str, value: &str) -> Result<EventId, String> {
    EventId::parse(value).map_err(|_| format!("{name} must be 64 lowercase hex characters"))
}

/// `type`: dot-separated lowercase ASCII components, each `[a-z][a-z0-9_-]*`, at most 128 bytes.
/// `buzz.*` is reserved for published Buzz client contracts; that is a convention between clients,
/// and the relay does not police who uses it.
fn check_type(value: &str) -> Result<(), String> {
    if value.is_empty() {
        return Err("type must not be empty".into());
    }
    if value.len() > MAX_TYPE_BYTES {
        return Err(format!("type exceeds {MAX_TYPE_BYTES} bytes"));
    }
    for component in value.split('.') {
        let mut bytes = component.bytes();
        match bytes.next() {
            None => return Err("type must not have an empty component".into()),
            Some(b'a'..=b'z') => {}
            Some(_) => return Err("type component must start with a lowercase letter".into()),
        }
        if !bytes.all(|b| matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'_' | b'-')) {
            return Err("type component may contain only a-z, 0-9, _ and -".into());
        }
    }
    Ok(())
}

/// A client-supplied value quoted in an error: escaped and cut to 32 characters.
fn excerpt(s: &str) -> String {
    let mut out: String = s.chars().take(32).flat_map(char::escape_debug).collect();
    if s.chars().nth(32).is_some() {
        out.push_str("...");
    }
    out
}

#[cfg(test)]
mod tests;
