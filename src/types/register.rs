//! `-R 0|1|2`, nccl-tests' `--local_register`: no registration, the
//! buffers registered with ncclCommRegister, or registered as symmetric
//! windows with ncclCommWindowRegister (NCCL 2.27 and later); also
//! true/false, yes/no, on/off for 1 and 0, and `symmetric` for 2.

use std::fmt;
use std::str::FromStr;

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Ordered from the least registration to the most: the weakest of
/// several communicators' is their `min`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum Register {
    #[default]
    Off,
    /// `-R 1`: ncclCommRegister.
    Buffers,
    /// `-R 2`: ncclCommWindowRegister with NCCL_WIN_COLL_SYMMETRIC.
    Symmetric,
}

impl Register {
    /// In order, so that `ALL[r.level()] == r`.
    pub const ALL: [Register; 3] = [Register::Off, Register::Buffers, Register::Symmetric];

    /// 0, 1 or 2, as `-R` spells it.
    pub fn level(self) -> u8 {
        self as u8
    }

    /// Any registration asked for.
    pub fn on(self) -> bool {
        self != Register::Off
    }

    /// The CSV's `register` value: `false`, `true` (`-R 1`, as before `-R 2`
    /// existed) or `symmetric`.
    pub fn column(self) -> &'static str {
        match self {
            Register::Off => "false",
            Register::Buffers => "true",
            Register::Symmetric => "symmetric",
        }
    }
}

impl FromStr for Register {
    type Err = String;

    fn from_str(text: &str) -> Result<Register, String> {
        match text.trim().to_ascii_lowercase().as_str() {
            "1" | "true" | "yes" | "on" => Ok(Register::Buffers),
            "0" | "false" | "no" | "off" => Ok(Register::Off),
            "2" | "symmetric" => Ok(Register::Symmetric),
            other => Err(format!("'{other}' is not 0, 1 or 2")),
        }
    }
}

impl fmt::Display for Register {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Register::Off => "0",
            Register::Buffers => "1",
            Register::Symmetric => "2",
        })
    }
}

/// In JSON (and the CSV): `false` and `true` as before `-R 2` existed,
/// `"symmetric"` for `-R 2`.
impl Serialize for Register {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Register::Off => s.serialize_bool(false),
            Register::Buffers => s.serialize_bool(true),
            Register::Symmetric => s.serialize_str(self.column()),
        }
    }
}

/// Reads what `Serialize` writes, and the option's own words and numbers.
impl<'de> Deserialize<'de> for Register {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Register, D::Error> {
        struct Visit;
        impl Visitor<'_> for Visit {
            type Value = Register;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("false, true, symmetric, 0, 1 or 2")
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Register, E> {
                Ok(if v { Register::Buffers } else { Register::Off })
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Register, E> {
                self.visit_str(&v.to_string())
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Register, E> {
                self.visit_str(&v.to_string())
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Register, E> {
                v.parse().map_err(E::custom)
            }
        }
        d.deserialize_any(Visit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn register_reads_nccl_tests_numbers_and_words() {
        for (text, want) in [
            ("0", Register::Off),
            ("off", Register::Off),
            ("1", Register::Buffers),
            ("true", Register::Buffers),
            ("2", Register::Symmetric),
            ("Symmetric", Register::Symmetric),
        ] {
            assert_eq!(text.parse(), Ok(want), "{text}");
            assert_eq!(want.to_string().parse(), Ok(want));
        }
        assert!("3".parse::<Register>().unwrap_err().contains("not 0, 1 or 2"));
        assert_eq!(
            [Register::Off, Register::Buffers, Register::Symmetric].map(Register::column),
            ["false", "true", "symmetric"]
        );
        // JSON keeps -R 1's `true` and -R 0's `false`, and reads back
        for r in [Register::Off, Register::Buffers, Register::Symmetric] {
            let json = serde_json::to_string(&r).unwrap();
            assert_eq!(serde_json::from_str::<Register>(&json).unwrap(), r, "{json}");
        }
        assert_eq!(serde_json::to_string(&Register::Buffers).unwrap(), "true");
        assert_eq!(serde_json::to_string(&Register::Symmetric).unwrap(), "\"symmetric\"");
    }
}
