//! NIP-AR channel artifacts: the kind-45010 revision envelope, validated without I/O
//! (`../shared/spec/NIP-AR.md`, "Event format").

use uuid::Uuid;

use crate::event::Event;

/// An artifact revision.
pub const KIND_REVISION: u32 = 45010;
/// The relay-signed removal a move leaves in the source channel.
pub const KIND_REMOVAL: u32 = 45011;
/// Most tags a revision may carry.
pub const MAX_TAGS: usize = 256;
/// Largest `type`, in bytes.
pub const MAX_TYPE_BYTES: usize = 128;
/// Largest `title`, in UTF-8 bytes.
pub const MAX_TITLE_BYTES: usize = 512;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Create,
    Update,
    Move,
    Delete,
    Restore,
}

impl Op {
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
    pub h: Uuid,
    pub type_name: String,
    /// Absent exactly on delete.
    pub title: Option<String>,
    pub op: Op,
    /// Conversation anchor event id in `h`.
    pub root: Option<String>,
    /// Previous accepted revision id; absent exactly on create.
    pub prev: Option<String>,
}

/// Validates a kind-45010 event's envelope (every "Event format" rule of the spec). The error is
/// the text after `invalid: `, naming the rule that failed. NIP-OA `auth` tags are checked
/// elsewhere (signatures), but their count and shape rules on delete revisions are checked here.
pub fn parse(event: &Event) -> Result<Envelope, String> {
    let _ = event;
    todo!("nipar::parse")
}
