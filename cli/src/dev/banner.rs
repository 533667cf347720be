//! What `buzz dev` prints once everything is up: where to connect, with which key, and two
//! commands to paste (a nostr-tools client that posts, and `buzz members add`).

use std::path::PathBuf;

use crate::dev::community::{DevKeys, LocalCommunity};
use crate::dev::nip19;

/// Everything the banner names.
pub struct Banner<'a> {
    pub community: &'a LocalCommunity,
    pub keys: &'a DevKeys,
    /// The absolute dev dir, so that the printed commands work from any directory.
    pub dir: PathBuf,
    pub operator_origin: String,
    pub gateway_addr: std::net::SocketAddr,
    /// The gateway's admin listener (`/metrics`; not on the public port).
    pub metrics_addr: std::net::SocketAddr,
}

/// A `node` command (nostr-tools + ws) that authenticates as `nsec`, creates an open channel and
/// posts a kind-9 message in it. Shell-quoted with single quotes, so the JS uses double quotes.
pub fn nostr_tools_snippet(ws_url: &str, nsec: &str) -> String {
    format!(
        r#"node --input-type=module -e '
import {{SimplePool, useWebSocketImplementation}} from "nostr-tools/pool";
import {{finalizeEvent}} from "nostr-tools/pure";
import {{decode}} from "nostr-tools/nip19";
import WebSocket from "ws";
import {{randomUUID}} from "node:crypto";
useWebSocketImplementation(WebSocket);
const url = "{ws_url}", sk = decode("{nsec}").data, h = randomUUID();
const pool = new SimplePool(), onauth = (e) => finalizeEvent(e, sk);
const post = (kind, tags, content) => Promise.all(pool.publish([url],
  finalizeEvent({{kind, tags, content, created_at: Math.floor(Date.now() / 1000)}}, sk), {{onauth}}));
await post(9007, [["h", h], ["name", "hello"], ["visibility", "open"], ["channel_type", "stream"]], "");
await post(9, [["h", h]], "hello from nostr-tools");
console.log("posted a kind-9 message to channel " + h);
pool.destroy();'"#
    )
}

/// `s` as one shell word (single-quoted when it holds anything but plain path characters).
fn shell_word(s: &str) -> String {
    if s.chars().all(|c| c.is_ascii_alphanumeric() || "_./:-+=@".contains(c)) {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// Prints the banner to stdout.
pub fn print(b: &Banner<'_>) {
    let c = b.community;
    let ws_url = format!("ws://{}", c.host);
    let owner_file = b.dir.join("owner.key");
    let state = if c.created { "provisioned now" } else { "provisioned earlier" };
    println!();
    println!("buzz-relay is running (Ctrl-C stops it)");
    println!("  WebSocket URL:  {ws_url}");
    println!("  Community:      {} bound to host {} ({state})", c.id, c.host);
    if let Some(other) = &c.foreign_owner {
        println!("  Owner:          {other}, whose secret key is not in {}", owner_file.display());
        println!(
            "                  (the database outlived the dev dir: use that key, or another DATABASE_URL)"
        );
    } else {
        let owner = &b.keys.owner;
        println!("  Owner nsec:     {}", nip19::nsec(owner));
        println!("  Owner secret:   {}  (hex, kept in {})", owner.secret_hex(), owner_file.display());
        println!("  Owner pubkey:   {}  ({})", owner.public_hex(), nip19::npub(owner));
    }
    println!(
        "  Operator API:   {}  (operator key in {})",
        b.operator_origin,
        b.dir.join("operator.key").display()
    );
    println!("  Probes:         http://{}/healthz  /readyz", b.gateway_addr);
    println!("  Metrics:        http://{}/metrics", b.metrics_addr);
    if c.foreign_owner.is_some() {
        println!();
        return;
    }
    let bin = std::env::current_exe().map_or_else(|_| "buzz".to_owned(), |p| p.display().to_string());
    let owner_file = shell_word(&owner_file.display().to_string());
    println!();
    println!("Post a first message as the owner with nostr-tools (needs `npm install nostr-tools ws`");
    println!("in the current directory, or run it in tests/js after `npm ci` there):");
    println!("{}", nostr_tools_snippet(&ws_url, &nip19::nsec(&b.keys.owner)));
    println!();
    println!("Add a member (NIP-98, signed by the owner):");
    println!(
        "  {} members add --url http://{} --secret-key $(cat {owner_file}) --pubkey <hex>",
        shell_word(&bin),
        c.host,
    );
    println!();
}

#[cfg(test)]
mod tests {
    use super::shell_word;

    #[test]
    fn plain_paths_stay_bare_and_others_are_quoted() {
        assert_eq!(shell_word("/var/tmp/buzz-target/release/buzz"), "/var/tmp/buzz-target/release/buzz");
        assert_eq!(shell_word("/home/a b/it's"), r"'/home/a b/it'\''s'");
    }
}
