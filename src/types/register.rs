//! `-R 0|1|2`, nccl-tests' `--local_register`: no registration, the
//! buffers registered with ncclCommRegister, or registered as symmetric
//! windows with ncclCommWindowRegister (NCCL 2.27 and later); also
//! true/false, yes/no, on/off for 1 and 0, and `symmetric` for 2.

use std::fmt;
use std::str::FromStr;

use serde::{Serialize, Serializer};

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Register {
    #[default]
    Off,
    /// `-R 1`: ncclCommRegister.
    Buffers,
    /// `-R 2`: ncclCommWindowRegister with NCCL_WIN_COLL_SYMMETRIC.
    Symmetric,
}

impl Register {
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

impl Serialize for Register {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
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
    }
}
