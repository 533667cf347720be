//! Operator API bodies and query strings as the policy-service reads them: community create,
//! update and change bodies, the `community_id` query, NIP-FI policy requests (general, legacy,
//! read) and binding bodies. First byte picks the parser; the rest is the body or query.
//! Asserts: no panic; refusals are 400 `invalid_request`; accepted values are canonical (hosts
//! are their own community-host form, enable carries an issuer, disable none).
#![no_main]

use axum::extract::OriginalUri;
use buzz_core::host::community_host;
use buzz_http_auth::ApiError;
use buzz_policy::communities::{lifecycle, routes as community_routes};
use buzz_policy::nip_fi::{request, routes as fi_routes};
use libfuzzer_sys::fuzz_target;

fn refusal(e: &ApiError) {
    assert_eq!(e.status.as_u16(), 400, "{e:?}");
    assert_eq!(e.code, "invalid_request", "{e:?}");
}

fn canonical(host: &str) {
    assert_eq!(community_host(host).as_deref(), Ok(host), "host {host:?} is not canonical");
}

fn check(req: &request::PolicyRequest) {
    canonical(&req.expected_host);
    assert_eq!(req.desired, req.expected_issuer.is_some());
    assert_eq!(req.is_legacy(), req.expected_required.is_none());
    assert!(req.expected_generation.is_none_or(|g| g >= 0));
    assert!(!req.operation_id.is_nil() && !req.community_id.is_nil());
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, body)) = data.split_first() else { return };
    match mode % 8 {
        0 => match community_routes::parse_create(body) {
            Ok(req) => {
                assert!(!req.community_id.is_nil());
                canonical(&req.host);
                assert!(req.retention_days.flatten().is_none_or(|d| (1..=36_500).contains(&d)));
            }
            Err(e) => refusal(&e),
        },
        1 => match community_routes::parse_update(body) {
            Ok(changes) => assert!(changes.retention_days.is_some() || changes.names_profile()),
            Err(e) => refusal(&e),
        },
        2 => match lifecycle::parse_change(body) {
            Ok((host, owner)) => {
                assert!(host.is_some() || owner.is_some());
                if let Some(h) = host {
                    canonical(&h);
                }
            }
            Err(e) => refusal(&e),
        },
        3 => {
            let Ok(query) = std::str::from_utf8(body) else { return };
            let Ok(uri) = format!("/operator/communities?{query}").parse::<http::Uri>() else { return };
            match community_routes::community_param(&OriginalUri(uri)) {
                Ok(id) => assert!(!id.is_nil()),
                Err(e) => refusal(&e),
            }
        }
        4 => {
            if let Ok(req) = request::parse_general(body) {
                check(&req);
                assert!(!req.is_legacy());
            }
        }
        5 => {
            if let Ok(req) = request::parse_legacy(body) {
                check(&req);
                assert!(req.is_legacy() && req.desired);
            }
        }
        6 => {
            let Ok(query) = std::str::from_utf8(body) else { return };
            if let Ok(request::ReadForm::Current { expected_host, .. }) =
                request::parse_read(Some(query))
            {
                canonical(&expected_host);
            }
        }
        _ => match fi_routes::binding_body(body) {
            Ok((id, issuer)) => {
                assert!(!id.is_nil());
                assert!(!issuer.is_empty() && issuer.len() <= 2048);
            }
            Err(e) => refusal(&e),
        },
    }
});
