//! The NIP-AR artifact query forms a filter names with `"artifact"` (`../shared/spec/NIP-AR.md`,
//! "Current state and queries"), parsed once so that the rest of the relay matches on an enum.

/// An artifact query form this relay answers. (`snapshot` is a separate transport, refused by
/// filter validation until it is available.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ArtifactForm {
    /// Each artifact's current revision, matched by the current revision's tags.
    Current,
    /// Every readable revision of the `#d` artifacts, in acceptance order.
    History,
}

impl ArtifactForm {
    /// The form named by a filter's `artifact` value; `None` for any other value.
    #[must_use]
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "current" => Some(Self::Current),
            "history" => Some(Self::History),
            _ => None,
        }
    }

    /// The value a filter names this form with.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Current => "current",
            Self::History => "history",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn current_and_history_round_trip_and_nothing_else_parses() {
        for form in [ArtifactForm::Current, ArtifactForm::History] {
            assert_eq!(ArtifactForm::parse(form.as_str()), Some(form));
        }
        for other in ["snapshot", "Current", "", "current "] {
            assert_eq!(ArtifactForm::parse(other), None, "{other}");
        }
    }
}
