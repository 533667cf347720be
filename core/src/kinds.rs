//! Every event kind number the relay gives a meaning to, in one place. SQL binds these values
//! rather than spelling the numbers out, so a grep for a kind finds every rule about it.

/// NIP-09 deletion of the author's own events.
pub const DELETION: u32 = 5;
/// A chat message (NIP-29 style, `h` = channel).
pub const MESSAGE: u32 = 9;
/// Put a user into a channel (`p`, optional role).
pub const PUT_USER: u32 = 9000;
/// Remove a user from a channel, or leave it.
pub const REMOVE_USER: u32 = 9001;
/// Edit a channel's name, visibility or archive flag.
pub const EDIT_CHANNEL: u32 = 9002;
/// Redact an event of a channel (`e`).
pub const REDACT: u32 = 9005;
/// Create a channel.
pub const CREATE_CHANNEL: u32 = 9007;
/// Delete a channel.
pub const DELETE_CHANNEL: u32 = 9008;
/// NIP-42 authentication event.
pub const CLIENT_AUTH: u32 = 22242;
/// NIP-98 HTTP authentication event.
pub const HTTP_AUTH: u32 = 27235;
/// Relay-signed channel metadata (addressable, `d` = channel).
pub const CHANNEL_METADATA: u32 = 39000;
/// Relay-signed channel member list (addressable, `d` = channel).
pub const CHANNEL_MEMBERS: u32 = 39002;
/// A NIP-AR artifact revision.
pub const ARTIFACT_REVISION: u32 = 45010;
/// The relay-signed removal a NIP-AR move leaves in the source channel.
pub const ARTIFACT_REMOVAL: u32 = 45011;

/// The kinds a client may write; any other is refused (`blocked:`), never silently stored.
pub const ACCEPTED_FROM_CLIENTS: [u32; 9] = [
    DELETION,
    MESSAGE,
    PUT_USER,
    REMOVE_USER,
    EDIT_CHANNEL,
    REDACT,
    CREATE_CHANNEL,
    DELETE_CHANNEL,
    ARTIFACT_REVISION,
];

/// True when a client may write events of `kind` to this relay.
#[must_use]
pub fn accepted_from_clients(kind: u32) -> bool {
    ACCEPTED_FROM_CLIENTS.contains(&kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clients_write_chat_channel_and_artifact_kinds_but_not_the_relays_own() {
        for kind in [5, 9, 9000, 9001, 9002, 9005, 9007, 9008, 45010] {
            assert!(accepted_from_clients(kind), "{kind}");
        }
        for kind in [0, 1, 7, 9003, 22242, 27235, 39000, 39002, 45011] {
            assert!(!accepted_from_clients(kind), "{kind}");
        }
    }
}
