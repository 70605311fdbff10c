//! Lists as users write them: comma-separated values of one vocabulary
//! (`float,int8`), or `all`; and a root rank or `all`. Each parses and
//! prints itself, so a value read from the command line, a config file or
//! a suite prints back to the same text.

use std::fmt;
use std::str::FromStr;

use serde::{Serialize, Serializer};

/// A closed vocabulary (element types, operations, collectives, hierarchy
/// modes): every value, its name, and the names it is parsed from.
pub trait Named: Copy + PartialEq + 'static {
    /// What one value is called in messages ("element type").
    const WHAT: &'static str;
    /// Every value, in the order sweeps and lists use.
    fn all() -> &'static [Self];
    fn name(self) -> &'static str;
    /// The other names `parse` takes (clap matches them too).
    fn aliases(self) -> &'static [&'static str] {
        &[]
    }
    /// The value `text` names (aliases included), if any.
    fn parse(text: &str) -> Option<Self>;
    /// Why `text`, a name users may expect, is not a value (what it would
    /// mean, and what is offered instead), if it is such a name.
    fn refused(_text: &str) -> Option<String> {
        None
    }
}

/// The names of every value, comma-separated, for messages.
pub fn known<T: Named>() -> String {
    T::all().iter().map(|v| v.name()).collect::<Vec<_>>().join(", ")
}

/// `all`, or an explicit list (in the user's order, without repeats).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Choice<T> {
    All,
    List(Vec<T>),
}

impl<T: Named> Choice<T> {
    /// The values chosen, `all` being every value of the vocabulary.
    pub fn values(&self) -> Vec<T> {
        match self {
            Choice::All => T::all().to_vec(),
            Choice::List(v) => v.clone(),
        }
    }

    /// One value.
    pub fn one(value: T) -> Choice<T> {
        Choice::List(vec![value])
    }
}

impl<T: Named> FromStr for Choice<T> {
    type Err = String;

    /// Splits at commas, refusing empty items and `all` mixed with values,
    /// and drops repeats.
    fn from_str(text: &str) -> Result<Choice<T>, String> {
        let items: Vec<&str> = text.split(',').map(str::trim).collect();
        if items.iter().all(|s| s.is_empty()) {
            return Err(format!("the list is empty; name at least one {} or `all`", T::WHAT));
        }
        if items.iter().any(|s| s.is_empty()) {
            return Err("the list has an empty item".into());
        }
        if items.iter().any(|s| s.eq_ignore_ascii_case("all")) {
            if items.len() > 1 {
                return Err("`all` cannot be combined with other values".into());
            }
            return Ok(Choice::All);
        }
        let mut out = Vec::new();
        for s in items {
            if let Some(why) = T::refused(s) {
                return Err(why);
            }
            let v =
                T::parse(s).ok_or_else(|| format!("unknown {} '{s}' (expected {}, or all)", T::WHAT, known::<T>()))?;
            if !out.contains(&v) {
                out.push(v);
            }
        }
        Ok(Choice::List(out))
    }
}

impl<T: Named> fmt::Display for Choice<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // pad, not write_str: a width in the format ({:<24}) applies
        match self {
            Choice::All => f.pad("all"),
            Choice::List(v) => {
                let names: Vec<&str> = v.iter().map(|x| x.name()).collect();
                f.pad(&names.join(","))
            }
        }
    }
}

impl<T: Named> Serialize for Choice<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// The root of rooted collectives: one rank, or every rank in turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RootChoice {
    All,
    Rank(usize),
}

impl FromStr for RootChoice {
    type Err = String;

    fn from_str(text: &str) -> Result<RootChoice, String> {
        let t = text.trim();
        if t.eq_ignore_ascii_case("all") {
            return Ok(RootChoice::All);
        }
        t.parse::<usize>()
            .map(RootChoice::Rank)
            .map_err(|_| format!("'{t}' is not a rank number or `all`"))
    }
}

impl fmt::Display for RootChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RootChoice::All => f.write_str("all"),
            RootChoice::Rank(r) => write!(f, "{r}"),
        }
    }
}

impl Serialize for RootChoice {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{DType, ReduceOp};

    #[test]
    fn a_choice_honours_the_width_it_is_printed_in() {
        let list = Choice::List(vec![DType::Float, DType::Int8]);
        assert_eq!(format!("[{list:<12}]"), "[float,int8  ]");
        assert_eq!(format!("[{:>5}]", Choice::<DType>::All), "[  all]");
    }

    #[test]
    fn lists_parse_all_and_drop_repeats() {
        assert_eq!(
            "float, int8,float".parse::<Choice<DType>>(),
            Ok(Choice::List(vec![DType::Float, DType::Int8]))
        );
        assert_eq!("ALL".parse::<Choice<ReduceOp>>(), Ok(Choice::All));
    }

    #[test]
    fn bad_lists_say_what_is_wrong_in_one_line() {
        for (text, needle) in [
            ("", "empty"),
            ("float,,int8", "empty item"),
            ("all,sum", "cannot be combined"),
            ("int9", "unknown element type 'int9' (expected int8,"),
        ] {
            let e = if text == "all,sum" {
                text.parse::<Choice<ReduceOp>>().unwrap_err()
            } else {
                text.parse::<Choice<DType>>().unwrap_err()
            };
            assert!(e.contains(needle), "{text:?}: {e}");
            assert!(!e.contains('\n'));
        }
    }

    #[test]
    fn lists_and_roots_print_back_to_what_parses_to_them() {
        for text in ["all", "float,int8", "bfloat16"] {
            let c: Choice<DType> = text.parse().unwrap();
            assert_eq!(c.to_string(), text);
        }
        for text in ["all", "0", "3"] {
            let r: RootChoice = text.parse().unwrap();
            assert_eq!(r.to_string(), text);
        }
        assert!("-1".parse::<RootChoice>().unwrap_err().contains("not a rank number"));
    }
}
