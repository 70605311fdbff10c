//! The bytes of a log file as text, or one line naming what they are
//! instead: the one decoder of the logs `import` and the NCCL log reader
//! (`nccl_log::read_paths`) take. Logs reach them through editors,
//! notebooks, Windows shells and archives, so this decodes what keeps the
//! text intact (UTF-8 with or without a BOM, UTF-16 with or without a BOM,
//! CRLF line ends, gzip) and refuses what is not a log (binaries, other
//! archives) by name.
//!
//! It owns no knowledge of any log format: parsers get a `String` whose
//! line ends they split with `str::lines` (which takes `\r\n` too).

use std::io::Read;

/// gzip is decoded up to this many bytes: a log is megabytes, and a
/// decompression bomb must not take the machine's memory.
const MAX_DECODED_BYTES: u64 = 1 << 30;

/// How many leading bytes the UTF-16 and binary heuristics look at.
const SNIFF_BYTES: usize = 4096;

/// The text of `bytes`, or why there is none.
pub fn decode(bytes: &[u8]) -> Result<String, String> {
    if bytes.is_empty() {
        return Err("the file is empty (0 bytes)".into());
    }
    if bytes.starts_with(&[0x1f, 0x8b]) {
        let inner = gunzip(bytes)?;
        if inner.starts_with(&[0x1f, 0x8b]) {
            return Err("a gzip file inside a gzip file: gunzip it twice and import the result".into());
        }
        return text(&inner).map_err(|e| format!("gzip-compressed; once decompressed, {e}"));
    }
    text(bytes)
}

/// Text that is not compressed with gzip.
fn text(bytes: &[u8]) -> Result<String, String> {
    if bytes.is_empty() {
        return Err("the file is empty (0 bytes)".into());
    }
    if let Some(what) = foreign_format(bytes) {
        return Err(what);
    }
    if let Some(rest) = bytes.strip_prefix(&[0xff, 0xfe]) {
        return Ok(utf16(rest, u16::from_le_bytes));
    }
    if let Some(rest) = bytes.strip_prefix(&[0xfe, 0xff]) {
        return Ok(utf16(rest, u16::from_be_bytes));
    }
    if let Some(little_endian) = utf16_without_bom(bytes) {
        let from = if little_endian {
            u16::from_le_bytes
        } else {
            u16::from_be_bytes
        };
        return Ok(utf16(bytes, from));
    }
    let bytes = bytes.strip_prefix(&[0xef, 0xbb, 0xbf]).unwrap_or(bytes);
    if bytes.contains(&0) {
        return Err("a binary file, not text (it holds NUL bytes): expected a tool's text output".into());
    }
    match std::str::from_utf8(bytes) {
        Ok(s) => Ok(s.to_string()),
        Err(_) => {
            // A few stray bytes (a Latin-1 host name) keep the rest usable;
            // mostly invalid UTF-8 is not text at all.
            let lossy = String::from_utf8_lossy(bytes);
            let bad = lossy.chars().filter(|&c| c == char::REPLACEMENT_CHARACTER).count();
            if bad * 100 > lossy.chars().count() {
                Err(format!(
                    "a binary file, not text ({bad} of its {} bytes are not UTF-8): expected a tool's text output",
                    bytes.len()
                ))
            } else {
                Ok(lossy.into_owned())
            }
        }
    }
}

/// Formats that are recognisably not a log, by their magic bytes.
fn foreign_format(bytes: &[u8]) -> Option<String> {
    let named = |what: &str, todo: &str| Some(format!("{what}, not a text log: {todo}"));
    if bytes.starts_with(b"\x7fELF") {
        return named(
            "an ELF binary (a program or library)",
            "import the tool's output, not the tool",
        );
    }
    if bytes.starts_with(&[0xfd, b'7', b'z', b'X', b'Z', 0]) {
        return named("xz-compressed", "unxz it first");
    }
    if bytes.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        return named("zstd-compressed", "unzstd it first");
    }
    if bytes.len() > 3 && bytes.starts_with(b"BZh") && bytes[3].is_ascii_digit() {
        return named("bzip2-compressed", "bunzip2 it first");
    }
    if bytes.starts_with(b"PK\x03\x04") {
        return named("a zip archive", "unzip it and import the logs inside");
    }
    None
}

fn gunzip(bytes: &[u8]) -> Result<Vec<u8>, String> {
    // MultiGzDecoder: `cat a.gz b.gz > c.gz` is a valid gzip file too.
    let mut out = Vec::new();
    flate2::read::MultiGzDecoder::new(bytes)
        .take(MAX_DECODED_BYTES + 1)
        .read_to_end(&mut out)
        .map_err(|e| format!("gzip-compressed but damaged ({e}): gunzip it by hand to see what is left"))?;
    if out.len() as u64 > MAX_DECODED_BYTES {
        return Err(format!(
            "gzip-compressed to more than {} GiB: gunzip it and import the log itself",
            MAX_DECODED_BYTES >> 30
        ));
    }
    Ok(out)
}

/// UTF-16 without a BOM, as some Windows tools write it: ASCII text then
/// has a NUL in every other byte. `Some(true)` little-endian, `Some(false)`
/// big-endian.
fn utf16_without_bom(bytes: &[u8]) -> Option<bool> {
    let head = &bytes[..bytes.len().min(SNIFF_BYTES) & !1];
    let pairs = head.len() / 2;
    if pairs < 2 {
        return None;
    }
    let zeros_at = |parity: usize| head.iter().skip(parity).step_by(2).filter(|&&b| b == 0).count();
    let (even, odd) = (zeros_at(0), zeros_at(1));
    // Mostly ASCII: nearly all high bytes are zero and no low byte is.
    let mostly = |n: usize| n * 10 >= pairs * 9;
    match (mostly(odd) && even == 0, mostly(even) && odd == 0) {
        (true, false) => Some(true),
        (false, true) => Some(false),
        _ => None,
    }
}

fn utf16(bytes: &[u8], from: fn([u8; 2]) -> u16) -> String {
    let units = bytes.chunks_exact(2).map(|p| from([p[0], p[1]]));
    char::decode_utf16(units)
        .map(|c| c.unwrap_or(char::REPLACEMENT_CHARACTER))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    const LOG: &str = "# nThread 1 nGpus 1\r\n#  Rank  0 Group  0 Pid 1 on h\u{e9}te device 0\r\n";

    fn utf16_bytes(s: &str, bom: bool, little: bool) -> Vec<u8> {
        let mut out = Vec::new();
        if bom {
            out.extend(if little { [0xff, 0xfe] } else { [0xfe, 0xff] });
        }
        for u in s.encode_utf16() {
            out.extend(if little { u.to_le_bytes() } else { u.to_be_bytes() });
        }
        out
    }

    #[test]
    fn utf16_with_or_without_a_bom_in_either_byte_order_decodes() {
        for bom in [true, false] {
            for little in [true, false] {
                assert_eq!(
                    decode(&utf16_bytes(LOG, bom, little)).unwrap(),
                    LOG,
                    "bom {bom} le {little}"
                );
            }
        }
    }

    #[test]
    fn a_utf8_bom_is_dropped_and_crlf_is_kept_for_lines_to_split() {
        let mut bytes = vec![0xef, 0xbb, 0xbf];
        bytes.extend(LOG.as_bytes());
        let text = decode(&bytes).unwrap();
        assert!(text.starts_with("# nThread"));
        assert_eq!(
            text.lines().nth(1).unwrap(),
            "#  Rank  0 Group  0 Pid 1 on h\u{e9}te device 0"
        );
    }

    #[test]
    fn gzip_is_decompressed_including_concatenated_members() {
        let gz = |s: &str| {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(s.as_bytes()).unwrap();
            e.finish().unwrap()
        };
        assert_eq!(decode(&gz(LOG)).unwrap(), LOG);
        let mut two = gz("a\n");
        two.extend(gz("b\n"));
        assert_eq!(decode(&two).unwrap(), "a\nb\n");
        let mut cut = gz(LOG);
        cut.truncate(cut.len() / 2);
        let e = decode(&cut).unwrap_err();
        assert!(e.contains("gzip-compressed but damaged"), "{e}");
        let e = decode(&gz(&String::from_utf8_lossy(&gz("x")))).unwrap_err();
        assert!(
            e.starts_with("gzip-compressed; once decompressed, a binary file"),
            "{e}"
        );
    }

    #[test]
    fn binaries_archives_and_empty_files_are_named_in_one_line() {
        let cases: [(&[u8], &str); 7] = [
            (b"", "empty"),
            (b"\x7fELF\x02\x01\x01\0\0\0", "ELF binary"),
            (b"\xfd7zXZ\0rest", "unxz"),
            (b"BZh91AY&SY", "bunzip2"),
            (b"PK\x03\x04....", "zip archive"),
            (b"# nThread\0\x01\x02", "NUL bytes"),
            (&[0x80, 0x81, 0xfe, 0xc0, b'a', 0x99, 0xff, 0x85], "not UTF-8"),
        ];
        for (bytes, needle) in cases {
            let e = decode(bytes).unwrap_err();
            assert!(e.contains(needle), "{needle}: {e}");
            assert_eq!(e.lines().count(), 1);
        }
    }

    #[test]
    fn a_stray_latin1_byte_does_not_make_a_log_binary() {
        let mut bytes = b"# nThread 1 nGpus 1 on h".to_vec();
        bytes.push(0xe9);
        bytes.extend(b"te\n".repeat(40));
        assert!(decode(&bytes).unwrap().starts_with("# nThread"));
    }
}
