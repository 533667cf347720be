//! Channel administration (kinds 9000, 9001, 9002, 9005, 9008), NIP-09 deletion of one's own
//! events (kind 5), and the relay-signed channel state (39000 metadata, 39002 members).

use buzz_bus::{Actor, LiveEvent, Scope};
use buzz_core::kinds::{
    CHANNEL_MEMBERS, CHANNEL_METADATA, DELETE_CHANNEL, EDIT_CHANNEL, PUT_USER, REDACT, REMOVE_USER,
};
use buzz_core::Event;
use buzz_store::access::{self, Channel, Credential, Standing, WriteDenial};
use buzz_store::{ChannelType, Role, Visibility};
use sqlx::PgConnection;
use uuid::Uuid;

use crate::error::WriteResult;
use crate::rules::admission::credential;
use crate::rules::post::channel_tag;
use crate::rules::Refusal;
use crate::shared::{live_event, store_and_announce, Accepted, Relay};
use crate::store;

const UNRESTRICTED: Credential<'static> =
    Credential { can_read_messages: true, can_write_messages: true, channel_ids: None };

/// The credential's scope (its channel restriction is checked by the caller).
fn need(actor: &Actor, scope: Scope) -> Result<(), Refusal> {
    if actor.has_scope(scope) {
        Ok(())
    } else {
        Err(Refusal::ChannelChangeScope)
    }
}

fn moderator(standing: Standing) -> Result<(), Refusal> {
    if standing.channel_admin || standing.community_admin {
        Ok(())
    } else {
        Err(Refusal::NotModerator)
    }
}

fn target_pubkey(event: &Event) -> Result<String, Refusal> {
    let p = event.tag_value("p").unwrap_or_default();
    if buzz_core::is_lower_hex(p, 64) {
        Ok(p.to_owned())
    } else {
        Err(Refusal::BadTargetPubkey)
    }
}

/// Kinds 9000/9001/9002/9005/9008. The channel row is locked for the change; the change and its
/// event commit together; membership, visibility, archive and deletion changes are access changes.
pub async fn moderate(
    tx: &mut PgConnection,
    community: Uuid,
    actor: &Actor,
    event: Event,
    relay: &Relay<'_>,
) -> WriteResult<Accepted> {
    let channel_id = channel_tag(&event)?;
    let member = actor.member_key().to_owned();
    let locked = store::lock_channel(tx, community, channel_id).await?;
    let standing = access::standing(tx, community, channel_id, &member).await?;
    let Some(mut channel) = locked.filter(|c| access::can_read(c, standing, UNRESTRICTED)) else {
        return Err(WriteDenial::NotFound.into());
    };
    if actor.channel_ids.as_ref().is_some_and(|ids| !ids.contains(&channel_id)) {
        return Err(WriteDenial::Scope.into());
    }
    let dm = channel.channel_type == ChannelType::Dm;
    let (metadata, members) = match event.kind {
        PUT_USER => {
            if dm {
                return Err(Refusal::DmParticipantsFixed.into());
            }
            need(actor, Scope::ChannelsWrite)?;
            moderator(standing)?;
            let target = target_pubkey(&event)?;
            let role = match event.tags_named("p").next().and_then(|t| t.get(2)) {
                None => Role::Member,
                Some(r) => Role::parse(r).filter(|r| *r != Role::Owner).ok_or(Refusal::BadChannelRole)?,
            };
            if access::community_role(tx, community, &target).await?.is_none() {
                return Err(Refusal::TargetNotCommunityMember.into());
            }
            if store::channel_role(tx, community, channel_id, &target).await? == Some(Role::Owner) {
                return Err(Refusal::OwnerRoleFixed.into());
            }
            store::add_channel_members(tx, community, channel_id, &[target], role).await?;
            (false, true)
        }
        REMOVE_USER => {
            if dm {
                return Err(Refusal::DmParticipantsFixed.into());
            }
            let target = target_pubkey(&event)?;
            if target == member {
                need(actor, Scope::MessagesWrite)?;
            } else {
                need(actor, Scope::ChannelsWrite)?;
                moderator(standing)?;
                let role = store::channel_role(tx, community, channel_id, &target).await?;
                if role == Some(Role::Owner) && !standing.community_admin {
                    return Err(Refusal::OwnerRemoval.into());
                }
            }
            if !store::remove_channel_member(tx, community, channel_id, &target, target != member).await? {
                return Err(Refusal::TargetNotChannelMember.into());
            }
            (false, true)
        }
        EDIT_CHANNEL => {
            need(actor, Scope::ChannelsWrite)?;
            moderator(standing)?;
            edit(&mut channel, &event)?;
            store::update_channel(tx, community, &channel).await?;
            (true, false)
        }
        REDACT => {
            redact(tx, community, actor, &event, channel_id, standing).await?;
            (false, false)
        }
        DELETE_CHANNEL => {
            need(actor, Scope::ChannelsWrite)?;
            let role = store::channel_role(tx, community, channel_id, &member).await?;
            if role != Some(Role::Owner) && !standing.community_admin {
                return Err(Refusal::ChannelDeletion.into());
            }
            store::delete_channel(tx, community, channel_id).await?;
            (false, false)
        }
        _ => return Err(Refusal::KindNotAccepted(event.kind).into()),
    };
    let access_changed =
        matches!(event.kind, PUT_USER | REMOVE_USER | EDIT_CHANNEL | DELETE_CHANNEL).then_some(channel_id);
    let mut accepted = store_and_announce(tx, community, event, &channel, None).await?;
    accepted.access_changed = access_changed;
    let kinds: Vec<u32> = [(metadata, CHANNEL_METADATA), (members, CHANNEL_MEMBERS)]
        .into_iter()
        .filter_map(|(changed, kind)| changed.then_some(kind))
        .collect();
    accepted.also = relay_state(tx, community, &channel, relay, &kinds).await?;
    Ok(accepted)
}

/// 9002: any of `name`, `visibility` (not for DMs), `archived` ("true"/"false").
fn edit(channel: &mut Channel, event: &Event) -> Result<(), Refusal> {
    let mut changed = false;
    if let Some(name) = event.tag_value("name") {
        let name = name.trim();
        if name.is_empty() || name.len() > 256 {
            return Err(Refusal::BadName);
        }
        channel.name = name.to_owned();
        changed = true;
    }
    if let Some(v) = event.tag_value("visibility") {
        if channel.channel_type == ChannelType::Dm {
            return Err(Refusal::DmAlwaysPrivate);
        }
        channel.visibility = Visibility::parse(v).ok_or(Refusal::BadVisibility)?;
        changed = true;
    }
    if let Some(a) = event.tag_value("archived") {
        channel.archived = match a {
            "true" => true,
            "false" => false,
            _ => return Err(Refusal::BadArchived),
        };
        changed = true;
    }
    if changed {
        Ok(())
    } else {
        Err(Refusal::EmptyEdit)
    }
}

/// 9005: the event's author (with `messages:write`) or a moderator (with `channels:write`) redacts
/// an event of this channel. It stays stored and counted as accepted, but is never served again.
async fn redact(
    tx: &mut PgConnection,
    community: Uuid,
    actor: &Actor,
    event: &Event,
    channel_id: Uuid,
    standing: Standing,
) -> WriteResult<()> {
    let target = event.tag_value("e").unwrap_or_default();
    if !buzz_core::is_lower_hex(target, 64) {
        return Err(Refusal::BadRedactTarget.into());
    }
    let found = store::event_owner(tx, community, target).await?;
    let Some((author, _, _)) = found.filter(|(_, c, _)| *c == Some(channel_id)) else {
        return Err(Refusal::NoSuchEvent.into());
    };
    if author == actor.pubkey {
        need(actor, Scope::MessagesWrite)?;
    } else {
        need(actor, Scope::ChannelsWrite)?;
        moderator(standing)?;
    }
    Ok(store::redact_event(tx, community, target).await?)
}

/// Kind 5 (NIP-09): the author deletes their own events, all in one channel they can read.
/// Artifact revisions are refused with a reason (NIP-AR moderation).
pub async fn delete_own(
    tx: &mut PgConnection,
    community: Uuid,
    actor: &Actor,
    event: Event,
) -> WriteResult<Accepted> {
    let ids: Vec<String> = event.tags_named("e").filter_map(|t| t.get(1).cloned()).collect();
    if ids.is_empty() || ids.iter().any(|id| !buzz_core::is_lower_hex(id, 64)) {
        return Err(Refusal::DeletionNamesNothing.into());
    }
    let mut channel_id = None;
    for id in &ids {
        if is_known_revision(tx, community, actor, id).await? {
            return Err(Refusal::RevisionDeletion.into());
        }
        let found = store::event_owner(tx, community, id).await?;
        let Some((_, channel, _)) = found.filter(|(author, ..)| *author == event.pubkey) else {
            return Err(Refusal::NotYourEvent.into());
        };
        if channel_id.is_some_and(|c| Some(c) != channel) {
            return Err(Refusal::DeletionSpansChannels.into());
        }
        channel_id = channel;
    }
    let channel_id = channel_id.ok_or(Refusal::NotYourEvent)?;
    let channel = access::load_channel(tx, community, channel_id, true).await?;
    let standing = access::standing(tx, community, channel_id, actor.member_key()).await?;
    let Some(channel) = channel.filter(|c| access::can_read(c, standing, UNRESTRICTED)) else {
        return Err(WriteDenial::NotFound.into());
    };
    if !actor.has_scope(Scope::MessagesWrite)
        || actor.channel_ids.as_ref().is_some_and(|c| !c.contains(&channel_id))
    {
        return Err(WriteDenial::Scope.into());
    }
    store::delete_events(tx, community, &ids).await?;
    store_and_announce(tx, community, event, &channel, None).await
}

/// Is `id` an accepted artifact revision that the sender wrote or can read (its channel, under
/// the sender's credential)? Then a kind 5 aimed at it is told why it is refused, whoever wrote
/// it, redacted or not. One the sender can neither read nor claim as theirs gets the answer any
/// unknown event gets, so the refusal discloses nothing about a channel the sender cannot read.
async fn is_known_revision(
    tx: &mut PgConnection,
    community: Uuid,
    actor: &Actor,
    id: &str,
) -> WriteResult<bool> {
    let Some((channel_id, author)) = crate::artifacts::sql::revision_origin(tx, community, id).await? else {
        return Ok(false);
    };
    if author.as_deref() == Some(actor.pubkey.as_str()) {
        return Ok(true);
    }
    let channel = access::load_channel(tx, community, channel_id, false).await?;
    let standing = access::standing(tx, community, channel_id, actor.member_key()).await?;
    Ok(channel.is_some_and(|c| access::can_read(&c, standing, credential(actor))))
}

/// Regenerates the relay-signed channel events of `kinds` (39000 metadata, 39002 members),
/// keeping only the newest of each.
pub async fn relay_state(
    tx: &mut PgConnection,
    community: Uuid,
    channel: &Channel,
    relay: &Relay<'_>,
    kinds: &[u32],
) -> WriteResult<Vec<LiveEvent>> {
    let d = channel.id.to_string();
    let mut meta = vec![
        vec!["d".to_owned(), d.clone()],
        vec!["name".to_owned(), channel.name.clone()],
        vec![if channel.visibility == Visibility::Open { "public" } else { "private" }.to_owned()],
        vec!["visibility".to_owned(), channel.visibility.as_str().to_owned()],
        vec!["channel_type".to_owned(), channel.channel_type.as_str().to_owned()],
        vec!["archived".to_owned(), channel.archived.to_string()],
    ];
    if let Some(ttl) = channel.ttl_seconds {
        meta.push(vec!["ttl".to_owned(), ttl.to_string()]);
    }
    let mut members = vec![vec!["d".to_owned(), d]];
    for (pubkey, role) in store::channel_members(tx, community, channel.id).await? {
        members.push(vec!["p".to_owned(), pubkey, role.as_str().to_owned()]);
    }
    let mut out = Vec::new();
    for (kind, tags) in [(CHANNEL_METADATA, meta), (CHANNEL_MEMBERS, members)] {
        if !kinds.contains(&kind) {
            continue;
        }
        let signed = relay.keys.sign_new(kind, tags, "");
        store::drop_relay_event(tx, community, channel.id, kind, &signed.pubkey).await?;
        if store::insert_event(tx, community, &signed, Some(channel.id), None, None).await?.is_none() {
            continue;
        }
        out.push(live_event(community, channel, signed));
    }
    Ok(out)
}
