//! NATS decentralised auth made at test time: an operator, an account and a user, their JWTs
//! (signed with nkeys the way `nsc` signs them), the server configuration that trusts the operator,
//! and the user's credentials file.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use nkeys::KeyPair;
use serde_json::{json, Value};

/// Server configuration lines and the user's `.creds` content.
pub struct Decentralised {
    pub server_config: String,
    pub creds: String,
}

fn encode(issuer: &KeyPair, subject: &str, name: &str, nats: Value) -> String {
    let header = URL_SAFE_NO_PAD.encode(json!({"typ": "JWT", "alg": "ed25519-nkey"}).to_string());
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").as_secs();
    let claims = json!({
        "jti": uuid::Uuid::new_v4().simple().to_string().to_uppercase(),
        "iat": now,
        "iss": issuer.public_key(),
        "name": name,
        "sub": subject,
        "nats": nats,
    });
    let payload = URL_SAFE_NO_PAD.encode(claims.to_string());
    let signing_input = format!("{header}.{payload}");
    let signature = issuer.sign(signing_input.as_bytes()).expect("nkey sign");
    format!("{signing_input}.{}", URL_SAFE_NO_PAD.encode(signature))
}

impl Decentralised {
    pub fn new() -> Self {
        let operator = KeyPair::new_operator();
        let account = KeyPair::new_account();
        let user = KeyPair::new_user();
        let operator_jwt = encode(
            &operator,
            &operator.public_key(),
            "test-operator",
            json!({"type": "operator", "version": 2}),
        );
        let unlimited = json!({"subs": -1, "data": -1, "payload": -1, "imports": -1, "exports": -1,
            "wildcards": true, "conn": -1, "leaf": -1});
        let account_jwt = encode(
            &operator,
            &account.public_key(),
            "test-account",
            json!({"limits": unlimited, "type": "account", "version": 2}),
        );
        let user_jwt = encode(
            &account,
            &user.public_key(),
            "test-user",
            json!({"pub": {}, "sub": {}, "subs": -1, "data": -1, "payload": -1, "type": "user", "version": 2}),
        );
        let server_config = format!(
            "operator: {operator_jwt}\nresolver: MEMORY\nresolver_preload: {{\n  {}: {account_jwt}\n}}\n",
            account.public_key()
        );
        let creds = format!(
            "-----BEGIN NATS USER JWT-----\n{user_jwt}\n------END NATS USER JWT------\n\n\
             -----BEGIN USER NKEY SEED-----\n{}\n------END USER NKEY SEED------\n",
            user.seed().expect("user seed")
        );
        Self { server_config, creds }
    }
}
