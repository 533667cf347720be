//! The wire form of typed payloads: what a replica of this version sends and reads.

use buzz_core::{ChannelId, CommunityId};
use serde_json::json;
use uuid::Uuid;

use crate::chat::*;
use crate::payload::*;

fn query(extra: serde_json::Value) -> serde_json::Value {
    let mut v = json!({ "community_id": Uuid::nil(), "reader": {"pubkey": "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "scopes": []}, "filters": [] });
    if let (Some(m), Some(e)) = (v.as_object_mut(), extra.as_object()) {
        m.extend(e.clone());
    }
    v
}

#[test]
fn the_query_kind_travels_as_the_count_flag_and_absent_is_a_page() {
    let kind = |v| serde_json::from_value::<QueryRequest>(v).map(|r| r.kind).ok();
    assert_eq!(kind(query(json!({}))), Some(QueryKind::Page));
    assert_eq!(kind(query(json!({"count": false}))), Some(QueryKind::Page));
    assert_eq!(kind(query(json!({"count": true}))), Some(QueryKind::Count));
    assert_eq!(kind(query(json!({"count": "yes"}))), None);
    let req: QueryRequest =
        serde_json::from_value(query(json!({"count": true}))).unwrap_or_else(|_| unreachable!());
    assert_eq!(serde_json::to_value(&req).ok().map(|v| v["count"].clone()), Some(json!(true)));
}

#[test]
fn write_data_is_the_plain_object_of_its_write() {
    let token = WriteData::Token(IssuedToken {
        scopes: vec![Scope::MessagesRead],
        channel_ids: None,
        expires_at: 1_700_000_000,
    });
    let wire = json!({"scopes": ["messages:read"], "channel_ids": null, "expires_at": 1_700_000_000});
    assert_eq!(serde_json::to_value(&token).ok(), Some(wire.clone()));
    assert_eq!(serde_json::from_value::<WriteData>(wire).ok(), Some(token));
    let up_to = "ab".repeat(32);
    let marker = WriteData::ReadMarker(ReadMarker {
        channel_id: ChannelId::nil(),
        read_up_to: buzz_core::EventId::parse(&up_to).unwrap(),
    });
    let wire = json!({"channel_id": Uuid::nil(), "read_up_to": up_to});
    assert_eq!(serde_json::to_value(&marker).ok(), Some(wire.clone()));
    assert_eq!(serde_json::from_value::<WriteData>(wire).ok(), Some(marker));
}

#[test]
fn each_access_request_is_answered_by_its_own_reply_type() {
    let sent = |r: AccessReply| serde_json::to_value(r).unwrap_or_default();
    let member = sent(AccessReply::Member(MemberReply { role: Some(Role::Admin), banned: false }));
    assert_eq!(member, json!({"role": "admin"}));
    assert_eq!(
        serde_json::from_value::<MemberReply>(member).ok(),
        Some(MemberReply { role: Some(Role::Admin), banned: false })
    );
    // A ban is said only when there is one; a previous release's reply reads as "not banned".
    let banned = sent(AccessReply::Member(MemberReply { role: None, banned: true }));
    assert_eq!(banned, json!({"role": null, "banned": true}));
    assert_eq!(
        serde_json::from_value::<MemberReply>(banned).ok(),
        Some(MemberReply { role: None, banned: true })
    );
    let can_read = sent(AccessReply::CanRead(CanReadReply { can_read: true }));
    assert_eq!(serde_json::from_value::<CanReadReply>(can_read).ok(), Some(CanReadReply { can_read: true }));
    // A reply of another request is not silently read as a refusal.
    assert!(serde_json::from_value::<CanReadReply>(json!({"role": null})).is_err());
    let token = sent(AccessReply::Token(TokenReply { token: None }));
    assert_eq!(serde_json::from_value::<TokenReply>(token).ok(), Some(TokenReply { token: None }));
}

#[test]
fn chat_answers_are_the_json_the_http_api_serves() {
    let wire = json!({
        "channel_id": Uuid::nil(), "message_count": 3, "unread": 1, "mentions": 0,
        "replies": {"abababababababababababababababababababababababababababababababab": 2}, "read_up_to": null
    });
    let answer: ChatAnswer = serde_json::from_value(wire.clone()).unwrap_or_else(|_| unreachable!());
    assert!(matches!(answer, ChatAnswer::Summary(ChannelSummary { unread: 1, .. })));
    assert_eq!(serde_json::to_value(&answer).ok(), Some(wire));
    let page = json!({"mentions": [{"event_id": "eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee", "channel_id": Uuid::nil(), "read": false, "event": {"id": "e"}}]});
    let answer: ChatAnswer = serde_json::from_value(page.clone()).unwrap_or_else(|_| unreachable!());
    assert!(matches!(answer, ChatAnswer::Mentions(_)));
    assert_eq!(serde_json::to_value(&answer).ok(), Some(page));
}

/// The 0.2.0 expand of the lease reply (a community's NIP-11 profile) in both directions of a
/// rolling upgrade: a 0.1.0 policy-service's reply (no `profile`) reads as an empty profile, an
/// empty profile is left out (the reply is byte-for-byte 0.1.0's), and a 0.2.0 reply with a profile
/// reads in a 0.1.0 gateway, whose `CommunityLease` had no such field (serde ignores it).
#[test]
fn a_lease_reply_without_a_profile_reads_both_ways_across_0_1_and_0_2() {
    let v010 = json!({
        "community": {"community_id": Uuid::nil(), "host": "a.test", "owner_pubkey": "abababababababababababababababababababababababababababababababab",
                      "requires_nip_fi": false, "policy_generation": 3, "fi_issuers": []},
        "lease_ms": 1000
    });
    let read: LeaseReply = serde_json::from_value(v010.clone()).unwrap_or_else(|e| unreachable!("{e}"));
    let community = read.community.clone().unwrap_or_else(|| unreachable!());
    assert!(community.profile.is_empty());
    assert_eq!(serde_json::to_value(&read).ok(), Some(v010), "an empty profile is not sent");

    /// `CommunityLease` as 0.1.0 declared it.
    #[derive(serde::Deserialize)]
    #[allow(dead_code)]
    struct LeaseV010 {
        community_id: CommunityId,
        host: String,
        owner_pubkey: String,
        requires_nip_fi: bool,
        policy_generation: i64,
        #[serde(default)]
        fi_issuers: Vec<String>,
    }
    let with_profile = CommunityLease {
        profile: CommunityProfile { name: Some("Acme".into()), description: None, icon: None },
        kinds: buzz_core::nip86::KindRules { allowed: vec![9], disallowed: Vec::new() },
        ..community
    };
    let wire = serde_json::to_value(&with_profile).unwrap_or_else(|e| unreachable!("{e}"));
    assert_eq!(wire["profile"], json!({"name": "Acme"}));
    let old: LeaseV010 = serde_json::from_value(wire.clone()).unwrap_or_else(|e| unreachable!("{e}"));
    assert_eq!((old.host.as_str(), old.policy_generation), ("a.test", 3));
    assert_eq!(serde_json::from_value::<CommunityLease>(wire).ok(), Some(with_profile));
}

/// A gateway in FI mode `off` asks for the identity only; every other request reads as before:
/// an older gateway's request (no field) is a full one, and a full request is sent without the
/// field, so an older policy-service reads it unchanged.
#[test]
fn a_lease_request_is_full_unless_it_asks_for_the_identity_only() {
    let read = |v| serde_json::from_value::<LeaseRequest>(v).map(|r| r.identity_only).ok();
    assert_eq!(read(json!({"host": "a.test"})), Some(false));
    assert_eq!(read(json!({"host": "a.test", "identity_only": true})), Some(true));
    let full = LeaseRequest { host: "a.test".into(), identity_only: false };
    assert_eq!(serde_json::to_value(&full).ok(), Some(json!({"host": "a.test"})));
    let off = LeaseRequest { host: "a.test".into(), identity_only: true };
    assert_eq!(serde_json::to_value(&off).ok(), Some(json!({"host": "a.test", "identity_only": true})));
}

/// The community deletion's purge request (`<p>.v1.snapshot.purge`) and its answers.
#[test]
fn a_purge_is_the_community_id_and_its_answer_a_plain_result() {
    use crate::snapshot::{PurgeCaptures, PurgeReply};
    let req = PurgeCaptures { community_id: CommunityId::nil() };
    assert_eq!(serde_json::to_value(&req).ok(), Some(json!({"community_id": Uuid::nil()})));
    let done: PurgeReply = Ok(());
    assert_eq!(serde_json::to_value(&done).ok(), Some(json!({"Ok": null})));
    let failed = json!({"Err": {"code": "unavailable", "message": "snapshot store unavailable"}});
    let read = serde_json::from_value::<PurgeReply>(failed).ok();
    assert_eq!(read, Some(Err(crate::BusError::unavailable("snapshot store unavailable"))));
}
