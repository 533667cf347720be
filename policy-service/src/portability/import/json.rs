//! An import's lines read in place (issue 37 item 4): a line is never parsed into a JSON tree.
//! Its `type` and `row` are borrowed from the line's own buffer, a row's columns are the raw JSON
//! text of each value, only the names a section has are accepted (an unknown one is refused at
//! once, before anything else of the line is looked at), and a value is parsed only where the
//! import needs it (ids, numbers, an event's JSON). A row goes into its batch as the text it was.
//! So a line costs about its own length in memory, whatever it holds (a tree of `[[],[],...]`
//! costs 20 times its text as `serde_json::Value`).

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::portability::format::{section_of, SECTIONS};
use crate::portability::import::input::{invalid, ImportError};

/// The longest part of a name quoted in an error.
const QUOTED: usize = 64;

/// A line's own keys: `type`, and `row` (a section line) or `counts` (the end line).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLine<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(borrow, default)]
    row: Option<&'a RawValue>,
    #[serde(borrow, default)]
    counts: Option<&'a RawValue>,
}

/// A line after the community line.
pub enum Line<'a> {
    /// A row of section `SECTIONS[section]`.
    Row {
        /// Its section's index.
        section: usize,
        /// Its columns.
        row: Row<'a>,
    },
    /// The end line: rows per section it names.
    End([Option<u64>; SECTIONS.len()]),
}

/// A row's columns, each the JSON text of its value, borrowed from the line.
pub struct Row<'a> {
    text: &'a RawValue,
    columns: Vec<(&'static str, &'a RawValue)>,
}

impl<'a> Row<'a> {
    /// The row's JSON object, as the file has it.
    pub fn text(&self) -> &'a str {
        self.text.get()
    }

    /// Its columns in the file's order.
    pub fn columns(&self) -> &[(&'static str, &'a RawValue)] {
        &self.columns
    }

    /// Column `name`'s JSON text, if the row has it.
    pub fn get(&self, name: &str) -> Option<&'a RawValue> {
        self.columns.iter().find(|(c, _)| *c == name).map(|(_, v)| *v)
    }

    /// Column `name` as a `T`.
    pub fn parse<T: Deserialize<'a>>(&self, name: &str, what: &str) -> Result<T, ImportError> {
        let value = self.get(name).map_or("null", RawValue::get);
        serde_json::from_str(value).map_err(|_| invalid(format!("{name} must be {what}")))
    }

    /// Column `name` as a string (unescaped: borrowed when it has no escapes).
    pub fn str(&self, name: &str) -> Result<Cow<'a, str>, ImportError> {
        let value = self.get(name).ok_or_else(|| invalid(format!("{name} must be a string")))?;
        let text: Cow<'a, str> = match serde_json::from_str::<Text<'a>>(value.get()) {
            Ok(Text(text)) => text,
            Err(_) => return Err(invalid(format!("{name} must be a string"))),
        };
        Ok(text)
    }
}

/// Reads `raw` as an object whose names are among `allowed`, each at most once.
pub fn row<'a>(raw: &'a RawValue, allowed: &[&'static str], what: &str) -> Result<Row<'a>, ImportError> {
    let mut de = serde_json::Deserializer::from_str(raw.get());
    let columns =
        Columns { allowed }.deserialize(&mut de).map_err(|e| invalid(format!("{what} row: {e}")))?;
    Ok(Row { text: raw, columns })
}

/// A section's column names.
pub fn names(columns: &'static str) -> Vec<&'static str> {
    columns.split(", ").collect()
}

/// Reads a line after the community line: a section row (its names checked) or the end line.
pub fn line(text: &str) -> Result<Line<'_>, ImportError> {
    let shape = "every line must be a JSON object of \"type\" and \"row\" (the end line: \"counts\")";
    let raw: RawLine<'_> = serde_json::from_str(text).map_err(|_| invalid(shape))?;
    if raw.kind == "end" {
        let counts = raw.counts.filter(|_| raw.row.is_none()).ok_or_else(|| invalid(shape))?;
        let kinds: Vec<&'static str> = SECTIONS.iter().map(|s| s.kind).collect();
        let named = row(counts, &kinds, "end counts")?;
        let mut out = [None; SECTIONS.len()];
        for (i, slot) in out.iter_mut().enumerate() {
            if named.get(kinds[i]).is_some() {
                *slot = Some(named.parse::<u64>(kinds[i], "a count")?);
            }
        }
        return Ok(Line::End(out));
    }
    let Some((section, s)) = section_of(&raw.kind) else {
        return Err(invalid(format!("unknown line type {:?}", quoted(&raw.kind))));
    };
    let text = raw.row.filter(|_| raw.counts.is_none()).ok_or_else(|| invalid(shape))?;
    Ok(Line::Row { section, row: row(text, &names(s.columns), s.kind)? })
}

/// Reads a line of type `kind` with a `row` (the community line).
pub fn typed_row<'a>(text: &'a str, kind: &str, allowed: &[&'static str]) -> Result<Row<'a>, ImportError> {
    let raw: RawLine<'a> =
        serde_json::from_str(text).map_err(|_| invalid(format!("the second line must be the {kind}")))?;
    match (raw.kind == kind, raw.row, raw.counts) {
        (true, Some(r), None) => row(r, allowed, kind),
        _ => Err(invalid(format!("the second line must be the {kind}"))),
    }
}

/// What parsing the event JSON `raw` into an `Event` would take in memory, at most, from its
/// tags: each tag (a vector, allocated for four elements) and each element (a string). Counted
/// without storing anything; `None` when `raw` is not an object with a `tags` array of arrays.
pub fn tag_cost(raw: &str) -> Option<usize> {
    #[derive(Deserialize)]
    struct Tags {
        tags: TagCount,
    }
    struct TagCount(usize);
    impl<'de> Deserialize<'de> for TagCount {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct Outer;
            impl<'de> Visitor<'de> for Outer {
                type Value = TagCount;
                fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                    f.write_str("an array of tags")
                }
                fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<TagCount, A::Error> {
                    let mut cost = 0usize;
                    while let Some(Elements(n)) = seq.next_element::<Elements>()? {
                        cost = cost.saturating_add(TAG_BYTES).saturating_add(n.saturating_mul(ELEMENT_BYTES));
                    }
                    Ok(TagCount(cost))
                }
            }
            d.deserialize_seq(Outer)
        }
    }
    struct Elements(usize);
    impl<'de> Deserialize<'de> for Elements {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct Inner;
            impl<'de> Visitor<'de> for Inner {
                type Value = Elements;
                fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                    f.write_str("a tag")
                }
                fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Elements, A::Error> {
                    let mut n = 0usize;
                    while seq.next_element::<de::IgnoredAny>()?.is_some() {
                        n += 1;
                    }
                    Ok(Elements(n))
                }
            }
            d.deserialize_seq(Inner)
        }
    }
    serde_json::from_str::<Tags>(raw).ok().map(|t| t.tags.0)
}

/// The memory of one tag in an `Event`: its slot in the tags vector (doubled while it grows)
/// and its own vector's first allocation (four strings).
const TAG_BYTES: usize = 2 * 24 + 4 * 24;
/// The memory of one element of a tag: its slot (doubled while the vector grows) and a string's
/// smallest allocation.
const ELEMENT_BYTES: usize = 2 * 24 + 16;

/// At most [`QUOTED`] characters of `name`.
fn quoted(name: &str) -> &str {
    name.char_indices().nth(QUOTED).map_or(name, |(i, _)| &name[..i])
}

/// A string, borrowed from the input when it has no escapes.
struct Text<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for Text<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Text<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Owned(v)))
            }
        }
        d.deserialize_str(V)
    }
}

/// An object's entries, refused at the first name not in `allowed` or named twice.
struct Columns<'s> {
    allowed: &'s [&'static str],
}

impl<'de> DeserializeSeed<'de> for Columns<'_> {
    type Value = Vec<(&'static str, &'de RawValue)>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Columns<'_> {
    type Value = Vec<(&'static str, &'de RawValue)>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object of columns")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut out: Self::Value = Vec::with_capacity(self.allowed.len());
        while let Some(Text(name)) = map.next_key::<Text<'de>>()? {
            let Some(column) = self.allowed.iter().find(|c| **c == name) else {
                return Err(de::Error::custom(format!("unknown column {:?}", quoted(&name))));
            };
            if out.iter().any(|(c, _)| c == column) {
                return Err(de::Error::custom(format!("column {column} twice")));
            }
            out.push((column, map.next_value()?));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> String {
        match line(text) {
            Err(ImportError::Invalid(why)) => why,
            Ok(_) => "accepted".into(),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn rows_keep_their_text_and_only_their_sections_columns() {
        let text =
            r#"{"type":"member","row":{"pubkey":"ab","role":"member","added_at":"2026-01-01T00:00:00Z"}}"#;
        let Ok(Line::Row { section, row }) = line(text) else { panic!("a member row") };
        assert_eq!(SECTIONS[section].kind, "member");
        assert_eq!(row.text(), r#"{"pubkey":"ab","role":"member","added_at":"2026-01-01T00:00:00Z"}"#);
        assert_eq!(row.str("role").unwrap(), "member");
        assert!(matches!(row.str("pubkey").unwrap(), Cow::Borrowed(_)), "no copy without escapes");
        let pad = format!(r#"{{"type":"member","row":{{"pubkey":"ab","{}":1}}}}"#, "p".repeat(1000));
        assert!(
            err(&pad).starts_with(&format!("member row: unknown column \"{}\"", "p".repeat(64))),
            "{}",
            err(&pad)
        );
        assert!(err(r#"{"type":"member","row":{"role":"a","role":"b"}}"#).contains("column role twice"));
        assert!(err(r#"{"type":"member","row":{},"pad":"x"}"#).starts_with("every line must be"));
        assert!(err(r#"{"type":"member","row":[]}"#).contains("member row"));
        assert!(err(r#"{"type":"member","counts":{}}"#).starts_with("every line must be"));
        assert!(err(r#"{"type":"pad","row":{}}"#).starts_with("unknown line type"));
    }

    #[test]
    fn the_cost_of_tags_is_counted_without_reading_them_into_memory() {
        let tags = |t: &str| format!(r#"{{"id":"x","tags":{t},"content":"c"}}"#);
        assert_eq!(tag_cost(&tags("[]")), Some(0));
        assert_eq!(tag_cost(&tags(r#"[["p","a","b"],[""]]"#)), Some(2 * TAG_BYTES + 4 * ELEMENT_BYTES));
        let many = format!("[{}[]]", r#"[""],"#.repeat(1000));
        assert_eq!(tag_cost(&tags(&many)), Some(1001 * TAG_BYTES + 1000 * ELEMENT_BYTES));
        assert_eq!(tag_cost(&tags(r#"["p"]"#)), None, "a tag is an array");
        assert_eq!(tag_cost(r#"{"content":"c"}"#), None);
    }

    #[test]
    fn the_end_line_names_only_sections_with_counts() {
        let Ok(Line::End(counts)) = line(r#"{"type":"end","counts":{"event":3,"ban":0}}"#) else {
            panic!("end")
        };
        let at = |k| section_of(k).map(|(i, _)| i).unwrap();
        assert_eq!((counts[at("event")], counts[at("ban")], counts[at("member")]), (Some(3), Some(0), None));
        assert!(err(r#"{"type":"end","counts":{"x":1}}"#).contains("unknown column"));
        assert!(err(r#"{"type":"end","counts":{"event":-1}}"#).contains("a count"));
        assert!(err(r#"{"type":"end"}"#).starts_with("every line must be"));
    }
}
