//! NIP-50 `search` text: what a filter may carry and what the store is asked.
//!
//! The store answers with PostgreSQL full-text search (`websearch_to_tsquery` syntax: words,
//! `"quoted phrases"`, `-excluded`, `OR`) under the `simple` configuration. This module only
//! decides whether a query can mean anything and strips the NIP-50 extensions the relay ignores.

/// The page of a search without `limit` (NIP-50 results are ranked, so the first few count).
pub const DEFAULT_SEARCH_LIMIT: u32 = 50;

/// Longest `search` accepted, in characters.
pub const MAX_SEARCH_CHARS: usize = 256;

/// The NIP-50 extension keys (`key:value` tokens) the relay recognises and ignores, as NIP-50
/// asks of a relay that does not support them ("Relays SHOULD ignore extensions they don't
/// support"). The relay supports none, so none is listed in NIP-11.
pub const IGNORED_EXTENSIONS: [&str; 5] = ["include", "domain", "language", "sentiment", "nsfw"];

/// The text given to `websearch_to_tsquery`: `raw` without ignored extension tokens, or why the
/// query is refused (the text after `invalid: `).
///
/// Refused: an empty or blank query, one longer than [`MAX_SEARCH_CHARS`], one with NUL, and one
/// with no word left (only operators, quotes, punctuation or ignored extensions), which would
/// match nothing while looking like a search.
pub fn store_query(raw: &str) -> Result<String, String> {
    if raw.trim().is_empty() {
        return Err("search must not be empty".into());
    }
    if raw.chars().count() > MAX_SEARCH_CHARS {
        return Err(format!("search longer than {MAX_SEARCH_CHARS} characters"));
    }
    if raw.contains('\0') {
        return Err("search must not contain NUL (U+0000)".into());
    }
    let kept: Vec<&str> = raw.split_whitespace().filter(|token| !is_ignored_extension(token)).collect();
    let has_word = kept
        .iter()
        .any(|token| !token.eq_ignore_ascii_case("or") && token.chars().any(char::is_alphanumeric));
    if !has_word {
        return Err("search has no words to look for (only operators or extensions)".into());
    }
    Ok(kept.join(" "))
}

/// `key:value` with `key` one of [`IGNORED_EXTENSIONS`] (case-insensitive) and a non-empty value.
fn is_ignored_extension(token: &str) -> bool {
    token.split_once(':').is_some_and(|(key, value)| {
        !value.is_empty() && IGNORED_EXTENSIONS.iter().any(|k| k.eq_ignore_ascii_case(key))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_phrases_and_operators_pass_through() {
        assert_eq!(store_query("payment timeout").unwrap(), "payment timeout");
        assert_eq!(
            store_query("  \"payment timeout\"  -draft OR bug ").unwrap(),
            "\"payment timeout\" -draft OR bug"
        );
        assert_eq!(store_query("café 東京").unwrap(), "café 東京");
    }

    #[test]
    fn ignored_extensions_are_dropped_but_look_alikes_are_kept() {
        assert_eq!(store_query("deploy include:spam language:en").unwrap(), "deploy");
        assert_eq!(store_query("https://example.com/x").unwrap(), "https://example.com/x");
        assert_eq!(store_query("status:open").unwrap(), "status:open");
        assert_eq!(store_query("language: deploy").unwrap(), "language: deploy");
    }

    #[test]
    fn empty_long_nul_and_operator_only_queries_are_refused() {
        for bad in ["", "   ", "-", "OR", "\"\" - or", "!!! ???", "include:spam", "nsfw:false OR"] {
            let err = store_query(bad).unwrap_err();
            assert!(err.starts_with("search "), "{bad:?}: {err}");
        }
        assert!(store_query(&"a".repeat(MAX_SEARCH_CHARS)).is_ok());
        assert_eq!(
            store_query(&"é".repeat(MAX_SEARCH_CHARS + 1)).unwrap_err(),
            "search longer than 256 characters"
        );
        assert!(store_query("a\0b").unwrap_err().contains("NUL"));
    }
}
