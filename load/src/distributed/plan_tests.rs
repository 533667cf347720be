//! The load plan's weights, shares and flags ([`super`]).

use super::*;
use crate::distributed::coordinator::args::CoordinatorArgs;
use clap::Parser;

fn plan(args: &[&str]) -> Result<Plan> {
    let mut v = vec![
        "coordinator",
        "--spawn-workers",
        "2",
        "--owner-secret",
        "0000000000000000000000000000000000000000000000000000000000000001",
    ];
    v.extend_from_slice(args);
    CoordinatorArgs::try_parse_from(v)?.validate()
}

#[test]
fn shares_cover_every_client_once() -> Result<()> {
    let p =
        plan(&["--scenario", "fanout", "--subscribers", "1001", "--url", "ws://a:1", "--url", "ws://b:2"])?;
    let n = 3;
    let shares: Vec<Vec<PartShare>> = (0..n).map(|i| assign(&p, n, i)).collect();
    // The one writer lands on worker 0 only.
    let writers: Vec<usize> = shares
        .iter()
        .map(|s| s.iter().filter(|x| x.part.kind == PartKind::Fanout).map(|x| x.clients).sum())
        .collect();
    assert_eq!(writers, vec![1, 0, 0]);
    let mut seen = vec![0u8; p.connections()];
    for s in shares.iter().flatten() {
        for x in seen.iter_mut().skip(s.first).take(s.clients) {
            *x += 1;
        }
    }
    assert!(seen.iter().all(|&x| x == 1), "every global client index exactly once");
    let listen: Vec<usize> = shares
        .iter()
        .map(|s| s.iter().filter(|x| x.part.kind == PartKind::Listen).map(|x| x.clients).sum())
        .collect();
    assert_eq!(listen, vec![334, 334, 333]);
    let rate: f64 = shares.iter().flatten().filter_map(|s| s.rate).sum();
    assert!((rate - 20.0).abs() < 1e-9);
    Ok(())
}

#[test]
fn rates_follow_clients() -> Result<()> {
    let p = plan(&["--clients", "3", "--rate", "300"])?;
    let r: Vec<f64> = (0..2).flat_map(|i| assign(&p, 2, i)).filter_map(|s| s.rate).collect();
    assert!((r[0] - 200.0).abs() < 1e-9 && (r[1] - 100.0).abs() < 1e-9, "{r:?}");
    Ok(())
}

#[test]
fn more_workers_than_clients_leaves_some_idle() -> Result<()> {
    let p = plan(&["--clients", "1"])?;
    assert_eq!(assign(&p, 4, 0).len(), 1);
    assert!(assign(&p, 4, 3).is_empty());
    Ok(())
}

#[test]
fn workday_weights_split_clients() -> Result<()> {
    let w = Weights::parse("chat=50,artifacts=25,queries=15,snapshot=5,storm=5")?;
    let parts = w.parts(20);
    let counts: Vec<(PartKind, usize)> = parts.iter().map(|p| (p.kind, p.clients)).collect();
    assert_eq!(
        counts,
        vec![
            (PartKind::Chat, 10),
            (PartKind::Artifacts, 5),
            (PartKind::Queries, 3),
            (PartKind::Snapshot, 1),
            (PartKind::Storm, 1)
        ]
    );
    assert_eq!(Weights::parse("chat=1").map(|w| w.parts(7).len())?, 1);
    assert_eq!(Weights::parse("chat=1,queries=1")?.parts(3).iter().map(|p| p.clients).sum::<usize>(), 3);
    Ok(())
}

#[test]
fn the_fi_part_takes_its_weight_and_needs_its_flags() -> Result<()> {
    let w = Weights::parse("chat=45,artifacts=30,queries=15,snapshot=5,storm=5,fi=20")?;
    let counts: Vec<(PartKind, usize)> = w.parts(28).iter().map(|p| (p.kind, p.clients)).collect();
    let others =
        [PartKind::Chat, PartKind::Artifacts, PartKind::Queries, PartKind::Snapshot, PartKind::Storm];
    let expected: Vec<(PartKind, usize)> = others.into_iter().zip([11, 8, 3, 1, 1]).collect();
    assert_eq!(counts[..5], expected[..], "the faults suite's 24 clients as before");
    assert_eq!(counts[5], (PartKind::Fi, 4));
    let fi = ["--scenario", "workday", "--weights", "chat=1,fi=1"];
    assert!(plan(&fi).is_err(), "no --operator-url, --fi-issuer, --fi-seed");
    let secret = "0000000000000000000000000000000000000000000000000000000000000002";
    let flags = ["--operator-url", "http://127.0.0.1:1", "--operator-secret", secret];
    let issuer = ["--fi-issuer", "https://issuer.test", "--fi-seed", "s"];
    let p = plan(&[&fi[..], &flags[..], &issuer[..]].concat())?;
    assert!(p.parts.iter().any(|x| x.kind == PartKind::Fi && x.clients == 10), "half the default 20");
    Ok(())
}

#[test]
fn think_scale_multiplies_workday_think_times() -> Result<()> {
    let p = plan(&["--scenario", "workday", "--think-scale", "0.25", "--snapshot-readers", "8"])?;
    let chat = p.parts.iter().find(|x| x.kind == PartKind::Chat).map(|x| x.think_ms);
    assert_eq!(chat, Some(250));
    assert_eq!(p.knobs.snapshot_readers, 8);
    assert!(plan(&["--think-scale", "-1"]).is_err());
    Ok(())
}

#[test]
fn bad_flags_are_refused() {
    assert!(Weights::parse("chat=x").is_err());
    assert!(Weights::parse("lunch=3").is_err());
    assert!(Weights::parse("chat=0").is_err());
    assert!(plan(&["--conflict-share", "2"]).is_err());
    assert!(plan(&["--duration", "0"]).is_err());
    assert!(plan(&["--scenario", "fanout", "--clients", "3"]).is_err());
    assert!(plan(&["--run-id", "a.b"]).is_err());
    assert!(plan(&["--url", "http://x"]).is_err());
    let bad_owner = CoordinatorArgs::try_parse_from(["c", "--spawn-workers", "1", "--owner-secret", "ab"]);
    assert!(bad_owner.map(|a| a.validate().is_err()).unwrap_or(false));
    assert!(CoordinatorArgs::try_parse_from([
        "c",
        "--owner-secret",
        "0000000000000000000000000000000000000000000000000000000000000001"
    ])
    .map(|a| a.validate().is_err())
    .unwrap_or(false));
}
