//! `--split`: nccl-tests' colouring of ranks into parallel groups
//! (`NCCL_TESTS_SPLIT`, docs/nccl-tests.md). A rule is an operation and a
//! value, read as nccl-tests' parseInt reads it (src/common.cu: `0b`
//! binary, else C's strtoul with base 0: `0x` hexadecimal, a leading `0`
//! octal); a rank's colour is its process's index combined with the value
//! (nccl-tests colours MPI processes: the ranks of one `-g` process share
//! one colour), and the ranks of one colour form one group, ordered by
//! world rank.

use std::fmt;
use std::str::FromStr;

use serde::{Serialize, Serializer};

/// How a rank's colour is made from its world rank.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SplitOp {
    And,
    Or,
    Mod,
    Div,
}

impl SplitOp {
    /// The names and symbols nccl-tests accepts, longest first.
    const SPELLINGS: [(&'static str, SplitOp); 8] = [
        ("AND", SplitOp::And),
        ("MOD", SplitOp::Mod),
        ("DIV", SplitOp::Div),
        ("OR", SplitOp::Or),
        ("&", SplitOp::And),
        ("|", SplitOp::Or),
        ("%", SplitOp::Mod),
        ("/", SplitOp::Div),
    ];

    pub fn name(self) -> &'static str {
        match self {
            SplitOp::And => "AND",
            SplitOp::Or => "OR",
            SplitOp::Mod => "MOD",
            SplitOp::Div => "DIV",
        }
    }
}

/// A colouring rule: `MOD 2`, `AND 0x7`, `/8`, `|0b11`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SplitRule {
    pub op: SplitOp,
    pub value: u64,
}

impl SplitRule {
    /// nccl-tests' `NCCL_TESTS_SPLIT_MASK`: a hexadecimal mask (with or
    /// without `0x`), the same as `AND` of it.
    pub fn mask(text: &str) -> Result<SplitRule, String> {
        let t = text.trim();
        let digits = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")).unwrap_or(t);
        u64::from_str_radix(digits, 16)
            .map(|value| SplitRule {
                op: SplitOp::And,
                value,
            })
            .map_err(|_| format!("'{t}' is not a hexadecimal mask"))
    }

    /// The colour of the ranks of process `process`.
    pub fn color(self, process: usize) -> u64 {
        let r = process as u64;
        match self.op {
            SplitOp::And => r & self.value,
            SplitOp::Or => r | self.value,
            // the value is never 0 (`from_str`)
            SplitOp::Mod => r % self.value,
            SplitOp::Div => r / self.value,
        }
    }

    /// The groups of the ranks whose processes are `process_of` (world
    /// rank `r` runs in process `process_of[r]`): for each group, in
    /// ascending colour, its world ranks in ascending order.
    pub fn groups(self, process_of: &[usize]) -> Vec<Vec<usize>> {
        let colour = |r: usize| self.color(process_of[r]);
        let mut colours: Vec<u64> = (0..process_of.len()).map(colour).collect();
        colours.sort_unstable();
        colours.dedup();
        colours
            .iter()
            .map(|&c| (0..process_of.len()).filter(|&r| colour(r) == c).collect())
            .collect()
    }
}

/// A value as nccl-tests' parseInt reads it: `0b` binary, else C's strtoul
/// with base 0 (`0x` hexadecimal, a leading `0` octal, else decimal).
/// nccl-tests ignores what follows the number and wraps a negative one;
/// both are refused here.
fn parse_value(text: &str) -> Option<u64> {
    let t = text.trim();
    if let Some(bin) = t.get(..2).filter(|p| p.eq_ignore_ascii_case("0b")).map(|_| &t[2..]) {
        return u64::from_str_radix(bin, 2).ok();
    }
    match crate::types::read_c_integer(t)? {
        (v, rest) if rest.trim().is_empty() => u64::try_from(v).ok(),
        _ => None,
    }
}

impl FromStr for SplitRule {
    type Err = String;

    fn from_str(text: &str) -> Result<SplitRule, String> {
        let t = text.trim();
        let bad = || {
            format!(
                "'{t}' is not a split rule: AND, OR, MOD or DIV (or &, |, %, /) and a value, as 'MOD 2' or 'AND 0x7'"
            )
        };
        let (op, rest) = SplitOp::SPELLINGS
            .iter()
            .find_map(|&(spelling, op)| {
                let head = t.get(..spelling.len())?;
                head.eq_ignore_ascii_case(spelling).then(|| (op, &t[spelling.len()..]))
            })
            .ok_or_else(bad)?;
        let value = parse_value(rest).ok_or_else(bad)?;
        if value == 0 && matches!(op, SplitOp::Mod | SplitOp::Div) {
            return Err(format!("'{t}': {} by 0 has no groups", op.name()));
        }
        Ok(SplitRule { op, value })
    }
}

impl fmt::Display for SplitRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.op {
            SplitOp::And | SplitOp::Or => write!(f, "{} {:#x}", self.op.name(), self.value),
            SplitOp::Mod | SplitOp::Div => write!(f, "{} {}", self.op.name(), self.value),
        }
    }
}

impl Serialize for SplitRule {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(text: &str) -> SplitRule {
        text.parse().unwrap()
    }

    #[test]
    fn every_spelling_of_nccl_tests_parses() {
        let and7 = SplitRule {
            op: SplitOp::And,
            value: 7,
        };
        for text in ["AND 0x7", "and7", "&7", "& 0b111", " AND 0X7 "] {
            assert_eq!(rule(text), and7, "{text}");
        }
        assert_eq!(rule("OR 0x7").op, SplitOp::Or);
        assert_eq!(rule("|3").value, 3);
        assert_eq!(
            rule("MOD 8"),
            SplitRule {
                op: SplitOp::Mod,
                value: 8
            }
        );
        assert_eq!(rule("%2").op, SplitOp::Mod);
        assert_eq!(rule("DIV 8").op, SplitOp::Div);
        assert_eq!(rule("/ 4").value, 4);
        // strtoul with base 0: a leading 0 is octal, as in nccl-tests
        assert_eq!(rule("MOD 010").value, 8);
        assert_eq!(rule("AND 0X1f").value, 31);
        assert!("MOD 00".parse::<SplitRule>().unwrap_err().contains("MOD by 0"));
        assert_eq!(SplitRule::mask("7").unwrap(), and7);
        assert_eq!(SplitRule::mask("0x10").unwrap().value, 16);
    }

    #[test]
    fn bad_rules_are_refused_in_one_line() {
        for text in ["", "XOR 3", "MOD", "MOD two", "AND 0xg", "MOD 08", "DIV 2x", "AND -1"] {
            let e = text.parse::<SplitRule>().unwrap_err();
            assert!(e.contains("is not a split rule"), "{text}: {e}");
        }
        assert!("MOD 0".parse::<SplitRule>().unwrap_err().contains("MOD by 0"));
        assert!("/0".parse::<SplitRule>().unwrap_err().contains("DIV by 0"));
        assert!(SplitRule::mask("zz").is_err());
    }

    #[test]
    fn colours_follow_the_rank_arithmetic() {
        // 8 ranks, nccl-tests' README examples
        let colours = |text: &str| (0..8).map(|r| rule(text).color(r)).collect::<Vec<_>>();
        assert_eq!(colours("AND 0x7"), vec![0, 1, 2, 3, 4, 5, 6, 7]);
        assert_eq!(colours("MOD 8"), colours("AND 0x7"));
        assert_eq!(colours("OR 0x7"), vec![7; 8]);
        assert_eq!(colours("DIV 8"), vec![0; 8]);
        assert_eq!(colours("AND 0x1"), vec![0, 1, 0, 1, 0, 1, 0, 1]);
        assert_eq!(colours("MOD 2"), colours("AND 0x1"));
        assert_eq!(colours("DIV 3"), vec![0, 0, 0, 1, 1, 1, 2, 2]);
    }

    #[test]
    fn groups_are_ordered_by_colour_then_rank() {
        // one rank per process (mpirun): the process is the rank
        let each = |n: usize| (0..n).collect::<Vec<_>>();
        assert_eq!(rule("MOD 2").groups(&each(4)), vec![vec![0, 2], vec![1, 3]]);
        assert_eq!(rule("MOD 2").groups(&each(3)), vec![vec![0, 2], vec![1]]);
        assert_eq!(rule("DIV 2").groups(&each(3)), vec![vec![0, 1], vec![2]]);
        assert_eq!(rule("OR 0x1").groups(&each(4)), vec![vec![0, 1], vec![2, 3]]);
        assert_eq!(rule("MOD 8").groups(&each(2)), vec![vec![0], vec![1]]);
    }

    #[test]
    fn the_ranks_of_one_process_share_its_colour_as_in_nccl_tests() {
        // -g 4 in one process: one group, whatever the rule
        assert_eq!(rule("MOD 2").groups(&[0, 0, 0, 0]), vec![vec![0, 1, 2, 3]]);
        // two processes of -g 2: MOD 2 separates the processes
        assert_eq!(rule("MOD 2").groups(&[0, 0, 1, 1]), vec![vec![0, 1], vec![2, 3]]);
    }

    #[test]
    fn a_rule_prints_as_it_parses() {
        for text in ["MOD 2", "DIV 8", "AND 0x7", "OR 0x3"] {
            assert_eq!(rule(text).to_string(), text);
            assert_eq!(rule(&rule(text).to_string()), rule(text));
        }
    }
}
