//! On/off values of options that take one (`-z 0|1`), as
//! nccl-tests writes them; also true/false, yes/no, on/off.

use std::fmt;
use std::str::FromStr;

use serde::{Serialize, Serializer};

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Switch(pub bool);

impl Switch {
    pub fn on(self) -> bool {
        self.0
    }
}

impl FromStr for Switch {
    type Err = String;

    fn from_str(text: &str) -> Result<Switch, String> {
        match text.trim().to_ascii_lowercase().as_str() {
            "1" | "true" | "yes" | "on" => Ok(Switch(true)),
            "0" | "false" | "no" | "off" => Ok(Switch(false)),
            other => Err(format!("'{other}' is not 0 or 1")),
        }
    }
}

impl fmt::Display for Switch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0 { "1" } else { "0" })
    }
}

impl Serialize for Switch {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn switches_read_nccl_tests_numbers_and_words() {
        for on in ["1", "true", "YES", "on"] {
            assert_eq!(on.parse(), Ok(Switch(true)), "{on}");
        }
        for off in ["0", "false", "no", "Off"] {
            assert_eq!(off.parse(), Ok(Switch(false)), "{off}");
        }
        assert!("2".parse::<Switch>().unwrap_err().contains("not 0 or 1"));
        assert_eq!(Switch(true).to_string().parse(), Ok(Switch(true)));
    }
}
