//! Whole-number options' refusals in words: clap's integer parsers say
//! `invalid digit found in string` or `0 is not in 1..18446744073709551615`;
//! `readable` turns such an error into `'-1' is not a whole number` or
//! `'0' is not a whole number of 1 or more`, keeping clap's frame (the
//! option, the usage, the help pointer). Any other error is left as it is.

use clap::error::{ContextKind, ContextValue, ErrorKind};

/// `e` with an integer parser's message said in words (see the module
/// doc); `cmd` is the (sub)command whose usage the message ends with.
pub fn readable(e: clap::Error, cmd: &mut clap::Command) -> clap::Error {
    if e.kind() != ErrorKind::ValueValidation {
        return e;
    }
    let (Some(ContextValue::String(arg)), Some(ContextValue::String(value))) =
        (e.get(ContextKind::InvalidArg), e.get(ContextKind::InvalidValue))
    else {
        return e;
    };
    let Some(why) = std::error::Error::source(&e).and_then(|s| in_words(value, &s.to_string())) else {
        return e;
    };
    let message = format!("invalid value '{value}' for '{arg}': {why}");
    let (arg, value) = (arg.clone(), value.clone());
    let mut better = clap::Error::raw(ErrorKind::ValueValidation, message).format(cmd);
    // for the one-line forms (`cli::step_value_error`)
    better.insert(ContextKind::InvalidArg, ContextValue::String(arg));
    better.insert(ContextKind::InvalidValue, ContextValue::String(value));
    better.insert(ContextKind::Custom, ContextValue::String(why));
    better
}

/// What an integer parser's `message` about `value` means, in words;
/// `None` for any other message.
fn in_words(value: &str, message: &str) -> Option<String> {
    match message {
        "invalid digit found in string" | "cannot parse integer from empty string" => {
            Some(format!("'{value}' is not a whole number (digits only)"))
        }
        "number too large to fit in target type" => Some(format!("'{value}' is too large")),
        "number too small to fit in target type" => Some(format!("'{value}' is not a whole number of 0 or more")),
        _ => {
            let (_, bounds) = message.split_once(" is not in ")?;
            let (low, high, inclusive) = match bounds.split_once("..=") {
                Some((l, h)) => (l, h, true),
                None => {
                    let (l, h) = bounds.split_once("..")?;
                    (l, h, false)
                }
            };
            let low = if low.is_empty() { "0" } else { low };
            let high: Option<u128> = high.parse().ok();
            let unbounded = high.is_none_or(|h| h >= u128::from(u32::MAX));
            Some(match high {
                _ if unbounded => format!("'{value}' is not a whole number of {low} or more"),
                Some(h) => {
                    let top = if inclusive { h } else { h - 1 };
                    format!("'{value}' is not a whole number from {low} to {top}")
                }
                None => unreachable!("an unbounded range is handled above"),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_refusals_say_what_a_whole_number_is_wanted() {
        assert_eq!(
            in_words("-1", "invalid digit found in string").unwrap(),
            "'-1' is not a whole number (digits only)"
        );
        assert_eq!(
            in_words("0", "0 is not in 1..18446744073709551615").unwrap(),
            "'0' is not a whole number of 1 or more"
        );
        assert_eq!(
            in_words("-5", "-5 is not in 0..=4294967295").unwrap(),
            "'-5' is not a whole number of 0 or more"
        );
        assert_eq!(
            in_words("99999999", "99999999 is not in ..=31536000").unwrap(),
            "'99999999' is not a whole number from 0 to 31536000"
        );
        assert_eq!(
            in_words("0", "0 is not in 1..=100000").unwrap(),
            "'0' is not a whole number from 1 to 100000"
        );
        assert_eq!(in_words("x", "'x' is not a spread between 0 and 1"), None);
    }

    #[test]
    fn the_rewritten_error_keeps_the_option_the_usage_and_the_help_pointer() {
        let mut cmd = super::super::run_command();
        let e = cmd
            .clone()
            .try_get_matches_from(["run", "--timeout", "-1"])
            .unwrap_err();
        let text = readable(e, &mut cmd).render().to_string();
        assert!(
            text.starts_with(
                "error: invalid value '-1' for '--timeout <SECS>': '-1' is not a whole number (digits only)"
            ),
            "{text}"
        );
        assert!(
            text.contains("Usage: collbench run ") && text.contains("For more information, try '--help'."),
            "{text}"
        );
        let e = cmd
            .clone()
            .try_get_matches_from(["run", "--ranks-per-node", "0"])
            .unwrap_err();
        assert!(
            readable(e, &mut cmd)
                .render()
                .to_string()
                .contains("'0' is not a whole number of 1 or more")
        );
    }
}
