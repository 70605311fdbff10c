//! `NcclVersion`: an NCCL release, from `ncclGetVersion`'s integer (the
//! NCCL backend) or from a log's `NCCL version X.Y.Z` banner (replay).

use std::fmt;

/// An NCCL version.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NcclVersion {
    pub major: u32,
    pub minor: u32,
    pub patch: u32,
}

impl NcclVersion {
    pub const fn new(major: u32, minor: u32, patch: u32) -> NcclVersion {
        NcclVersion { major, minor, patch }
    }

    /// `NCCL_VERSION_CODE`: `X*10000 + Y*100 + Z` since 2.9, `X*1000 + Y*100
    /// + Z` before (nccl.h's NCCL_VERSION macro).
    pub fn from_code(code: i32) -> NcclVersion {
        let code = code.max(0) as u32;
        if code >= 10000 {
            NcclVersion::new(code / 10000, code % 10000 / 100, code % 100)
        } else {
            NcclVersion::new(code / 1000, code % 1000 / 100, code % 100)
        }
    }

    /// The version in a line holding `NCCL version X.Y.Z`.
    pub fn find(text: &str) -> Option<NcclVersion> {
        let at = text.find("NCCL version ")?;
        let rest = &text[at + "NCCL version ".len()..];
        let end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let mut parts = rest[..end].split('.').map(|p| p.parse::<u32>().ok());
        let (major, minor, patch) = (parts.next()??, parts.next()??, parts.next()??);
        Some(NcclVersion::new(major, minor, patch))
    }
}

impl fmt::Display for NcclVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}
