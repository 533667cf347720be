//! `BUZZ_NIP_FI_MODE` and the effective requirement it makes of a stored flag.

use std::fmt;
use std::str::FromStr;

/// The deployment-wide FI mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// FI is suspended everywhere; stored requirements are kept but ignored.
    Off,
    /// The stored per-community requirement is enforced.
    #[default]
    Shadow,
    /// Every community requires FI (a global floor).
    Enforce,
    /// Every community requires FI and protected HTTP routes are refused outright.
    DenyProtected,
}

impl Mode {
    /// Whether FI evidence is required for a community whose stored flag is `stored`.
    #[must_use]
    pub fn effective_required(self, stored: bool) -> bool {
        match self {
            Self::Off => false,
            Self::Shadow => stored,
            Self::Enforce | Self::DenyProtected => true,
        }
    }

    /// Whether evaluating admission needs the stored policy at all (`off` does not read it).
    #[must_use]
    pub fn reads_policy(self) -> bool {
        self == Self::Shadow
    }

    /// The name as `BUZZ_NIP_FI_MODE` spells it.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Off => "off",
            Self::Shadow => "shadow",
            Self::Enforce => "enforce",
            Self::DenyProtected => "deny_protected",
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "off" => Ok(Self::Off),
            "shadow" => Ok(Self::Shadow),
            "enforce" => Ok(Self::Enforce),
            "deny_protected" => Ok(Self::DenyProtected),
            _ => Err("expected off, shadow, enforce or deny_protected".into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn effective_required_follows_the_contract_table() {
        for stored in [false, true] {
            assert!(!Mode::Off.effective_required(stored));
            assert_eq!(Mode::Shadow.effective_required(stored), stored);
            assert!(Mode::Enforce.effective_required(stored));
            assert!(Mode::DenyProtected.effective_required(stored));
        }
        assert_eq!("deny_protected".parse::<Mode>(), Ok(Mode::DenyProtected));
        assert!("Shadow".parse::<Mode>().is_err());
        assert!(!Mode::Off.reads_policy());
    }
}
