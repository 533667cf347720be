//! Settings parsing every service shares: a clap `Parser` reading flags and environment variables,
//! value parsers that trim and check, and errors that name the variable a bad value came from.

use std::ffi::OsString;
use std::fmt::Display;
use std::path::PathBuf;
use std::str::FromStr;

use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::{Arg, Command, CommandFactory, Parser};

/// Parses `A` from `args` (the program name first) and the environment. A bad or missing value
/// that came from the environment is reported with its variable, as an operator sets it:
/// `invalid value for BUZZ_MAX_LIMIT: "x": ...` or `DATABASE_URL must be set`.
pub fn parse<A: Parser>(args: impl IntoIterator<Item = impl Into<OsString>>) -> Result<A, clap::Error> {
    let argv: Vec<OsString> = args.into_iter().map(Into::into).collect();
    A::try_parse_from(&argv).map_err(|e| name_variables(&mut A::command(), e, &argv))
}

/// A setting that is wrong in combination with another, reported like the others.
pub fn invalid<A: CommandFactory>(message: impl Display) -> clap::Error {
    A::command().error(ErrorKind::ValueValidation, message)
}

/// Value parser: the value without surrounding whitespace, parsed as `T`. Empty is refused rather
/// than read as the default: unset the variable for the default.
pub fn trimmed<T: FromStr>(raw: &str) -> Result<T, String>
where
    T::Err: Display,
{
    let v = raw.trim();
    if v.is_empty() {
        return Err("empty (unset the variable to use the default)".to_owned());
    }
    v.parse().map_err(|e: T::Err| e.to_string())
}

/// Value parser: a number above zero (0 would mean "nothing" or "off", which these settings
/// cannot be; set a large value to relax one).
pub fn positive<T: FromStr + PartialOrd + Default>(raw: &str) -> Result<T, String>
where
    T::Err: Display,
{
    let v: T = trimmed(raw)?;
    if v <= T::default() {
        return Err("must be positive".to_owned());
    }
    Ok(v)
}

/// Value parser: the path of a file that exists, so that a typo stops start-up rather than the
/// first (re)connect.
pub fn existing_file(raw: &str) -> Result<PathBuf, String> {
    let path: PathBuf = trimmed(raw)?;
    if !path.is_file() {
        return Err("not a readable file".to_owned());
    }
    Ok(path)
}

/// Rewrites clap's flag-centred message for values taken from the environment.
fn name_variables(cmd: &mut Command, err: clap::Error, argv: &[OsString]) -> clap::Error {
    // Arguments show as clap's messages do only once the command is built.
    cmd.build();
    match (err.kind(), err.get(ContextKind::InvalidArg)) {
        (ErrorKind::ValueValidation | ErrorKind::InvalidValue, Some(ContextValue::String(shown))) => {
            let Some(var) = env_source(cmd, shown, argv) else { return err };
            let value = match err.get(ContextKind::InvalidValue) {
                Some(ContextValue::String(v)) => v.clone(),
                _ => String::new(),
            };
            let reason = std::error::Error::source(&err).map(ToString::to_string).unwrap_or_default();
            cmd.error(ErrorKind::ValueValidation, format!("invalid value for {var}: {value:?}: {reason}"))
        }
        (ErrorKind::MissingRequiredArgument, Some(ContextValue::Strings(shown))) => {
            let missing: Vec<String> = shown
                .iter()
                .filter_map(|s| {
                    let var = env_source(cmd, s, &[])?;
                    Some(format!("{var} must be set (or pass {})", s.split(' ').next().unwrap_or(s)))
                })
                .collect();
            if missing.len() != shown.len() {
                return err;
            }
            cmd.error(ErrorKind::MissingRequiredArgument, missing.join("; "))
        }
        _ => err,
    }
}

/// The variable of the argument clap shows as `shown`, unless its flag was given in `argv`.
fn env_source(cmd: &Command, shown: &str, argv: &[OsString]) -> Option<String> {
    let arg = cmd.get_arguments().find(|a| a.to_string() == shown)?;
    let var = arg.get_env()?.to_string_lossy().into_owned();
    (!flag_given(arg, argv)).then_some(var)
}

fn flag_given(arg: &Arg, argv: &[OsString]) -> bool {
    let Some(long) = arg.get_long() else { return false };
    let flag = format!("--{long}");
    argv.iter().filter_map(|a| a.to_str()).any(|a| a == flag || a.starts_with(&format!("{flag}=")))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[derive(Debug, Parser)]
    struct Args {
        #[arg(long, default_value_t = 7, value_parser = positive::<u32>)]
        count: u32,
        #[arg(long, value_parser = trimmed::<String>)]
        name: String,
    }

    /// The same settings from variables that only the environment test sets.
    #[derive(Debug, Parser)]
    struct EnvArgs {
        #[arg(long, env = "BUZZ_TEST_SETTINGS_COUNT", default_value_t = 7, value_parser = positive::<u32>)]
        count: u32,
        #[arg(long, env = "BUZZ_TEST_SETTINGS_NAME", value_parser = trimmed::<String>)]
        name: String,
    }

    #[test]
    fn flags_and_values_are_trimmed_and_checked() {
        let a: Args = parse(["t", "--name", " n ", "--count", " 3"]).unwrap();
        assert_eq!((a.count, a.name.as_str()), (3, "n"));
        let a: Args = parse(["t", "--name", "n"]).unwrap();
        assert_eq!(a.count, 7);
        let err = parse::<Args>(["t", "--name", "n", "--count", "0"]).unwrap_err().to_string();
        assert!(err.contains("--count") && err.contains("must be positive"), "{err}");
        let err = parse::<Args>(["t", "--name", ""]).unwrap_err().to_string();
        assert!(err.contains("empty (unset the variable"), "{err}");
        assert!(existing_file("/nonexistent/ca.pem").is_err());
    }

    #[test]
    fn a_value_from_the_environment_is_reported_with_its_variable() {
        // The only test of this crate that reads or sets these variables (env is process-wide).
        let err = parse::<EnvArgs>(["t"]).unwrap_err().to_string();
        assert!(err.contains("BUZZ_TEST_SETTINGS_NAME must be set (or pass --name)"), "{err}");
        std::env::set_var("BUZZ_TEST_SETTINGS_NAME", "n");
        std::env::set_var("BUZZ_TEST_SETTINGS_COUNT", "seven");
        let err = parse::<EnvArgs>(["t"]).unwrap_err().to_string();
        assert!(
            err.contains("invalid value for BUZZ_TEST_SETTINGS_COUNT: \"seven\": invalid digit"),
            "{err}"
        );
        // A flag wins over the variable, and its own error names the flag.
        let a: EnvArgs = parse(["t", "--count=2"]).unwrap();
        assert_eq!((a.count, a.name.as_str()), (2, "n"));
        let err = parse::<EnvArgs>(["t", "--count", "0"]).unwrap_err().to_string();
        assert!(err.contains("--count") && !err.contains("BUZZ_TEST_SETTINGS_COUNT"), "{err}");
    }
}
