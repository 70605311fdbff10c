//! Integers as C's `strtol` family reads them with base 0, for values
//! other tools read so: NCCL's `NCCL_*` variables (`strtoll`, its
//! misc/param.cc) and nccl-tests' `NCCL_TESTS_SPLIT` values (`strtoul`,
//! its src/common.cu parseInt). The longest prefix that is a number is
//! read: `0x` hexadecimal, a leading `0` octal, else decimal, after
//! leading white space and a sign.

/// The value at the start of `text` and the text after it; `None` where
/// no digit starts it, or the value does not fit 64 bits (where C reports
/// a range error).
pub fn read_c_integer(text: &str) -> Option<(i128, &str)> {
    let t = text.trim_start();
    let (negative, t) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let hex_digits = |s: &str| s.as_bytes().first().is_some_and(u8::is_ascii_hexdigit);
    let (radix, digits) = match t.get(..2) {
        Some("0x" | "0X") if hex_digits(&t[2..]) => (16, &t[2..]),
        _ if t.starts_with('0') => (8, t),
        _ => (10, t),
    };
    let len = digits.find(|c: char| !c.is_digit(radix)).unwrap_or(digits.len());
    if len == 0 {
        return None;
    }
    let magnitude = u64::from_str_radix(&digits[..len], radix).ok()?;
    let value = i128::from(magnitude);
    Some((if negative { -value } else { value }, &digits[len..]))
}

#[cfg(test)]
mod tests {
    use super::read_c_integer;

    #[test]
    fn values_read_as_c_reads_them_with_base_0() {
        for (text, value, rest) in [
            ("0", 0, ""),
            ("010", 8, ""),
            ("0x1F", 31, ""),
            (" 7", 7, ""),
            ("-1", -1, ""),
            ("+3", 3, ""),
            ("08", 0, "8"),
            ("12abc", 12, "abc"),
            ("0x", 0, "x"),
        ] {
            assert_eq!(read_c_integer(text), Some((value, rest)), "{text}");
        }
        for text in ["", "abc", "-", "99999999999999999999999"] {
            assert_eq!(read_c_integer(text), None, "{text}");
        }
    }
}
