//! The one canonical text form of a UUID on this relay: 36 characters, lowercase, hyphenated
//! (`h` and `d` tags, channel ids in URLs and tokens, artifact query `#d` values). Braces,
//! `urn:uuid:`, the simple (unhyphenated) form and uppercase are refused rather than normalised,
//! so that one channel or artifact never has two spellings.

use uuid::Uuid;

/// `s` as a UUID when it is in the canonical form (the nil UUID included).
#[must_use]
pub fn parse_uuid(s: &str) -> Option<Uuid> {
    let uuid = Uuid::try_parse(s).ok()?;
    let mut buf = Uuid::encode_buffer();
    (*uuid.hyphenated().encode_lower(&mut buf) == *s).then_some(uuid)
}

/// [`parse_uuid`] that also refuses the nil UUID, for ids that name something (channels,
/// artifacts).
#[must_use]
pub fn parse_id(s: &str) -> Option<Uuid> {
    parse_uuid(s).filter(|u| !u.is_nil())
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "6f1c2a4e-8a51-4b0e-9d3f-0c1b2a3d4e5f";

    #[test]
    fn only_the_lowercase_hyphenated_form_is_accepted() {
        assert_eq!(parse_uuid(ID).map(|u| u.to_string()).as_deref(), Some(ID));
        for other in [
            ID.to_uppercase(),
            ID.replace('-', ""),
            format!("{{{ID}}}"),
            format!("urn:uuid:{ID}"),
            format!(" {ID}"),
            String::new(),
        ] {
            assert_eq!(parse_uuid(&other), None, "{other}");
        }
    }

    #[test]
    fn the_nil_uuid_parses_but_names_nothing() {
        let nil = "00000000-0000-0000-0000-000000000000";
        assert_eq!(parse_uuid(nil), Some(Uuid::nil()));
        assert_eq!(parse_id(nil), None);
        assert!(parse_id(ID).is_some());
    }
}
