//! Byte sizes as users write them (`8`, `64K`, `16M`, `1G`), and as
//! messages show them (`1.5 KiB`).

use std::fmt;
use std::str::FromStr;

use serde::{Serialize, Serializer};

/// A byte count given with an optional binary suffix (nccl-tests' `-b/-e`
/// syntax). Prints as plain bytes, so that what it prints parses back to
/// the same value.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Size(pub u64);

impl Size {
    pub fn bytes(self) -> u64 {
        self.0
    }
}

impl FromStr for Size {
    type Err = String;

    fn from_str(text: &str) -> Result<Size, String> {
        parse_size(text).map(Size)
    }
}

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl Serialize for Size {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(self.0)
    }
}

/// Parses a byte size: digits with an optional binary suffix K, M, G or T
/// (also KB/KiB, case-insensitive), as nccl-tests' `-b/-e` take them.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    if t.is_empty() {
        return Err("empty size".into());
    }
    if t.starts_with('-') {
        return Err(format!("'{t}' is negative; sizes are byte counts"));
    }
    let digits_end = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, suffix) = t.split_at(digits_end);
    if digits.is_empty() {
        return Err(format!("'{t}' has no number; write e.g. 8, 64K, 16M, 1G"));
    }
    let shift = match suffix.to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        s if s.starts_with('.') => return Err(format!("'{t}' is not a whole number of bytes")),
        _ => {
            return Err(format!("'{t}' has an unknown unit '{suffix}' (use K, M, G or T)"));
        }
    };
    let value: u64 = digits.parse().map_err(|_| format!("'{t}' is too large"))?;
    value
        .checked_mul(1u64 << shift)
        .ok_or_else(|| format!("'{t}' is too large"))
}

/// 1536 -> "1.5 KiB".
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// A volume in decimal units (1 kB = 1000 bytes, as bandwidths in GB/s
/// count them), scaled so that its figures show: `512 B`, `12.29 kB`,
/// `4.19 MB`, `1.342 GB`.
pub fn human_volume(bytes: f64) -> String {
    const UNITS: [(&str, f64, usize); 4] = [("TB", 1e12, 3), ("GB", 1e9, 3), ("MB", 1e6, 2), ("kB", 1e3, 2)];
    match UNITS.iter().find(|(_, scale, _)| bytes.abs() >= *scale) {
        Some((unit, scale, decimals)) => format!("{:.*} {unit}", decimals, bytes / scale),
        None => format!("{bytes:.0} B"),
    }
}

/// `1 rank`, `2 ranks`: a count with its noun, singular for one.
pub fn count_of(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// `1st`, `2nd`, `3rd`, `4th`, `11th`, `12th`, `13th`, `21st`.
pub fn ordinal(n: usize) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn volumes_scale_to_a_unit_their_figures_show_in() {
        assert_eq!(human_volume(0.0), "0 B");
        assert_eq!(human_volume(512.0), "512 B");
        assert_eq!(human_volume(12_288.0), "12.29 kB");
        assert_eq!(human_volume(4_194_304.0), "4.19 MB");
        assert_eq!(human_volume(1.3421e9), "1.342 GB");
        assert_eq!(human_volume(2.5e12), "2.500 TB");
        assert_eq!(
            (count_of(1, "rank"), count_of(3, "rank")),
            ("1 rank".into(), "3 ranks".into())
        );
    }

    #[test]
    fn sizes_take_binary_suffixes() {
        assert_eq!(parse_size("8"), Ok(8));
        assert_eq!(parse_size("1K"), Ok(1024));
        assert_eq!(parse_size("16M"), Ok(16 << 20));
        assert_eq!(parse_size("16m"), Ok(16 << 20));
        assert_eq!(parse_size("2G"), Ok(2 << 30));
        assert_eq!(parse_size("1T"), Ok(1 << 40));
        assert_eq!(parse_size("64KiB"), Ok(64 << 10));
        assert_eq!(parse_size(" 4MB "), Ok(4 << 20));
    }

    #[test]
    fn bad_sizes_are_refused_with_a_reason() {
        for bad in [
            "",
            "-8",
            "M",
            "1.5M",
            "12X",
            "99999999999999999999",
            "17179869184G",
            "0x10",
        ] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_size_prints_as_bytes_that_parse_back() {
        let s: Size = "16M".parse().unwrap();
        assert_eq!(s.to_string(), "16777216");
        assert_eq!(s.to_string().parse::<Size>(), Ok(s));
    }

    #[test]
    fn human_bytes_uses_binary_units() {
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_bytes(3 << 30), "3.0 GiB");
    }

    proptest! {
        #[test]
        fn size_parser_never_panics(s in "\\PC{0,12}") {
            let _ = parse_size(&s);
        }

        #[test]
        fn size_parser_round_trips_suffixed_values(v in 0u64..(1 << 20), unit in 0usize..4) {
            let (suffix, shift) = [("", 0), ("K", 10), ("M", 20), ("G", 30)][unit];
            prop_assert_eq!(parse_size(&format!("{v}{suffix}")), Ok(v << shift));
        }
    }

    #[test]
    fn ordinals_take_their_english_suffixes() {
        let got: Vec<String> = [1, 2, 3, 4, 11, 12, 13, 21, 22, 23, 101, 111, 112]
            .map(ordinal)
            .to_vec();
        assert_eq!(
            got,
            [
                "1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "23rd", "101st", "111th", "112th"
            ]
        );
    }
}
