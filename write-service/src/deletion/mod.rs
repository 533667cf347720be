//! Kind 5 (NIP-09): an author deletes their own live events, all in one channel they can read;
//! a NIP-AR revision is refused with a reason (it is retired with `op=delete`). The smallest
//! event family, and the shape of every one: a [`Family`] whose step gathers the rule's view
//! (load), applies `rules::deletion` (decide) and makes the change with its event (store); its
//! statements are `sql.rs`; one line in `family` (`writer.rs`) registers it for its kind.

pub mod sql;

use buzz_store::access;
use buzz_store::Role;
use sqlx::PgConnection;

use crate::engine::single::{store_and_announce, Family, One, Written};
use crate::engine::Accepted;
use crate::error::WriteResult;
use crate::rules::deletion::{self, RevisionView, TargetView};

/// Kind 5, registered for the one-event transaction.
pub struct Deletion;

impl Family for Deletion {
    fn write<'a>(&'a self, tx: &'a mut PgConnection, w: One<'a>, _role: Role) -> Written<'a> {
        Box::pin(delete_own(tx, w))
    }
}

/// Gathers what the database says about each named event and their channel, applies
/// `rules::deletion`, and deletes them.
async fn delete_own(tx: &mut PgConnection, w: One<'_>) -> WriteResult<Accepted> {
    let One { community, actor, event, .. } = w;
    let ids = deletion::named_ids(&event)?;
    let mut found = Vec::with_capacity(ids.len());
    for id in &ids {
        let origin = sql::revision_origin(tx, community, id).await?;
        let revision = match origin {
            Some((channel_id, author)) => {
                let channel = access::load_channel(tx, community, channel_id, false).await?;
                let standing = access::standing(tx, community, channel_id, actor.member_key()).await?;
                Some((author, channel, standing))
            }
            None => None,
        };
        found.push((revision, sql::event_owner(tx, community, id).await?));
    }
    let targets: Vec<TargetView<'_>> = found
        .iter()
        .map(|(revision, owner)| TargetView {
            revision: revision.as_ref().map(|(author, channel, standing)| RevisionView {
                author: author.as_ref(),
                channel: channel.as_ref(),
                standing: *standing,
            }),
            owner: owner.as_ref().map(|(author, channel, _)| (author, *channel)),
        })
        .collect();
    let channel_id = deletion::channel_of(&event, actor, &targets)?;
    let channel = access::load_channel(tx, community, channel_id, true).await?;
    let standing = access::standing(tx, community, channel_id, actor.member_key()).await?;
    let channel = deletion::deletable(channel, standing, actor)?;
    sql::delete_events(tx, community, &ids).await?;
    store_and_announce(tx, community, event, &channel, None).await
}
