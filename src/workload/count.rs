//! Parameter counts as people write them: `7B`, `7e9`, `6.7B`, `350M`,
//! `124439808`. One parser, exact (decimal arithmetic, no floats), with a
//! one-line error for anything else.
//!
//! Suffixes are decimal, as model names use them (`K` = 10^3, `M` = 10^6,
//! `B` or `G` = 10^9, `T` = 10^12), unlike byte sizes, whose `M` is 2^20
//! (`config::parse_size`). A mantissa may carry a fraction and an exponent
//! (`1.5e9`, `6.738415616B`) as long as the result is a whole number.

/// A count as people write it (`--params`, `--hidden`, `--vocab`), parsed
/// by `parse_count`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Count(pub u64);

/// The digest compares the count itself.
impl serde::Serialize for Count {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(self.0)
    }
}

impl std::str::FromStr for Count {
    type Err = String;

    fn from_str(text: &str) -> Result<Count, String> {
        parse_count(text).map(Count)
    }
}

/// Parses a count of parameters (or layers, or any element count written
/// the same way).
pub fn parse_count(text: &str) -> Result<u64, String> {
    let t = text.trim();
    if t.is_empty() {
        return Err("empty count; write e.g. 7B, 7e9 or 350M".into());
    }
    if t.starts_with('-') {
        return Err(format!("'{t}' is negative; a count is at least 0"));
    }
    let (number, suffix_exp) = split_suffix(t)?;
    let (mantissa, exp) = split_exponent(t, number)?;
    let (digits, frac_len) = mantissa_digits(t, mantissa)?;
    let scale = i64::from(suffix_exp) + exp - frac_len as i64;
    scale_exact(t, &digits, scale)
}

/// Splits off a K/M/B/G/T suffix, returning the number part and the
/// suffix's power of ten.
fn split_suffix(t: &str) -> Result<(&str, u32), String> {
    let last = t.chars().last().unwrap_or('0');
    // a trailing `e` is an exponent left empty, not a suffix
    if last.is_ascii_digit() || matches!(last, '.' | 'e' | 'E') {
        return Ok((t, 0));
    }
    let exp = match last.to_ascii_uppercase() {
        'K' => 3,
        'M' => 6,
        'B' | 'G' => 9,
        'T' => 12,
        _ => {
            return Err(format!(
                "'{t}' has an unknown suffix '{last}' (use K, M, B or T, or write e.g. 7e9)"
            ));
        }
    };
    Ok((&t[..t.len() - last.len_utf8()], exp))
}

/// Splits `1.5e9` into `1.5` and 9.
fn split_exponent<'a>(t: &str, number: &'a str) -> Result<(&'a str, i64), String> {
    match number.find(['e', 'E']) {
        None => Ok((number, 0)),
        Some(at) => {
            let exp_text = &number[at + 1..];
            let exp: i64 = exp_text
                .strip_prefix('+')
                .unwrap_or(exp_text)
                .parse()
                .map_err(|_| format!("'{t}' has a malformed exponent '{exp_text}'"))?;
            if exp.abs() > 30 {
                return Err(format!("'{t}' is out of range"));
            }
            Ok((&number[..at], exp))
        }
    }
}

/// The mantissa's digits without the point, and how many followed it.
fn mantissa_digits(t: &str, mantissa: &str) -> Result<(String, usize), String> {
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    if int.is_empty() && frac.is_empty() {
        return Err(format!("'{t}' has no number; write e.g. 7B, 7e9 or 350M"));
    }
    if !int.chars().chain(frac.chars()).all(|c| c.is_ascii_digit()) {
        return Err(format!("'{t}' is not a number; write e.g. 7B, 7e9 or 350M"));
    }
    Ok((format!("{int}{frac}"), frac.len()))
}

/// `digits x 10^scale`, refusing fractions and overflow.
fn scale_exact(t: &str, digits: &str, scale: i64) -> Result<u64, String> {
    let too_large = || format!("'{t}' is too large");
    let mut value: u128 = 0;
    for d in digits.bytes() {
        value = value
            .checked_mul(10)
            .and_then(|v| v.checked_add(u128::from(d - b'0')))
            .ok_or_else(too_large)?;
    }
    if scale >= 0 {
        for _ in 0..scale {
            value = value.checked_mul(10).ok_or_else(too_large)?;
        }
    } else {
        for _ in 0..(-scale) {
            if !value.is_multiple_of(10) {
                return Err(format!("'{t}' is not a whole number"));
            }
            value /= 10;
        }
    }
    u64::try_from(value).map_err(|_| too_large())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_parse_with_suffixes_exponents_and_fractions() {
        let cases = [
            ("7B", 7_000_000_000),
            ("7b", 7_000_000_000),
            ("7e9", 7_000_000_000),
            ("7E+9", 7_000_000_000),
            ("350M", 350_000_000),
            ("1.1B", 1_100_000_000),
            ("6.738415616B", 6_738_415_616),
            ("1.5e9", 1_500_000_000),
            ("70G", 70_000_000_000),
            ("2T", 2_000_000_000_000),
            ("64K", 64_000),
            (" 124439808 ", 124_439_808),
            ("0", 0),
            (".5K", 500),
            ("12e0", 12),
        ];
        for (input, want) in cases {
            assert_eq!(parse_count(input), Ok(want), "{input:?}");
        }
    }

    #[test]
    fn bad_counts_are_one_line_errors_that_quote_the_input() {
        let cases = [
            ("", "empty count; write e.g. 7B, 7e9 or 350M"),
            ("-7B", "'-7B' is negative; a count is at least 0"),
            (
                "7X",
                "'7X' has an unknown suffix 'X' (use K, M, B or T, or write e.g. 7e9)",
            ),
            ("1.5", "'1.5' is not a whole number"),
            ("1e-3", "'1e-3' is not a whole number"),
            ("7e", "'7e' has a malformed exponent ''"),
            ("B", "'B' has no number; write e.g. 7B, 7e9 or 350M"),
            ("1,000", "'1,000' is not a number; write e.g. 7B, 7e9 or 350M"),
            ("99999999999T", "'99999999999T' is too large"),
            ("1e99", "'1e99' is out of range"),
        ];
        for (input, want) in cases {
            assert_eq!(parse_count(input).unwrap_err(), want, "{input:?}");
        }
    }
}
