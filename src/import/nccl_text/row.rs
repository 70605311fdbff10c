//! The result rows of an open table: splitting a line into values,
//! checking each against its column, joining rows split by interleaved
//! output, and the points a complete row holds.

use super::{Fragment, Measured, Point, Rejected, Row, Table, dtype_name};
use crate::types::Placement;

/// A line inside an open table.
pub(super) fn row_line(table: &mut Table, no: usize, content: &str, warnings: &mut Vec<String>) {
    let Some(tokens) = row_tokens(content, table.wrapper) else {
        if let Some(f) = table.fragment.as_mut() {
            f.between.push(no);
        }
        return;
    };
    if let Some(f) = table.fragment.take() {
        if let Some(points) = join(&table.columns, &f, &tokens, warnings) {
            let lines: Vec<String> = f.between.iter().map(|l| l.to_string()).collect();
            warnings.push(format!(
                "line {}: a result row split by interleaved output (line {}) was joined with its rest on line {no}",
                f.line,
                lines.join(", ")
            ));
            table.rows.push(Row { line: f.line, points });
            return;
        }
        table
            .rejected
            .push((f.line, Rejected::Incomplete(f.tokens.len(), table.columns.len())));
    }
    match parse_row(&table.columns, &tokens) {
        RowParse::Full(tokens) => {
            let points = points(&table.columns, &tokens, no, warnings);
            table.rows.push(Row { line: no, points });
        }
        RowParse::Prefix => {
            table.fragment = Some(Fragment {
                line: no,
                tokens,
                between: Vec::new(),
            })
        }
        RowParse::Bad(reason) => table.rejected.push((no, Rejected::Bad(reason))),
    }
}

/// The words of a line that starts like a row (a number first), after the
/// header's wrapper words; None for any other line.
pub(super) fn row_tokens(content: &str, wrapper: usize) -> Option<Vec<String>> {
    let words: Vec<&str> = content.split_whitespace().collect();
    let numeric = |w: &str| {
        let b = w.as_bytes();
        let digit_at = |i: usize| b.get(i).is_some_and(u8::is_ascii_digit);
        w.parse::<f64>().is_ok() && (digit_at(0) || (matches!(b[0], b'-' | b'.') && digit_at(1)))
    };
    [wrapper, 0]
        .into_iter()
        .find(|&skip| words.get(skip).is_some_and(|w| numeric(w)))
        .map(|skip| merge_timestamps(&words[skip..]))
}

/// A fragment and the line after it as one row: the two as they are, or
/// with the token they split in two put back together.
fn join(columns: &[String], f: &Fragment, rest: &[String], warnings: &mut Vec<String>) -> Option<Vec<Point>> {
    let mut side_by_side = f.tokens.clone();
    side_by_side.extend(rest.iter().cloned());
    let mut glued = f.tokens.clone();
    if let (Some(last), Some(first)) = (glued.last_mut(), rest.first()) {
        last.push_str(first);
        glued.extend(rest[1..].iter().cloned());
    }
    [side_by_side, glued].into_iter().find_map(|tokens| {
        let words: Vec<&str> = tokens.iter().map(String::as_str).collect();
        match parse_row(columns, &merge_timestamps(&words)) {
            RowParse::Full(tokens) => Some(points(columns, &tokens, f.line, warnings)),
            _ => None,
        }
    })
}

/// Joins `2025-10-14` `12:00:01` into one token.
fn merge_timestamps(tokens: &[&str]) -> Vec<String> {
    let is_date = |t: &str| t.len() == 10 && t.as_bytes().get(4) == Some(&b'-') && t.as_bytes().get(7) == Some(&b'-');
    let is_time = |t: &str| t.len() == 8 && t.as_bytes().get(2) == Some(&b':') && t.as_bytes().get(5) == Some(&b':');
    let mut out: Vec<String> = Vec::with_capacity(tokens.len());
    let mut i = 0;
    while i < tokens.len() {
        if is_date(tokens[i]) && tokens.get(i + 1).is_some_and(|t| is_time(t)) {
            out.push(format!("{} {}", tokens[i], tokens[i + 1]));
            i += 2;
        } else {
            out.push(tokens[i].to_string());
            i += 1;
        }
    }
    out
}

pub(super) enum RowParse {
    /// Every column has its value (a blank redop filled in as "").
    Full(Vec<String>),
    /// The first values of a row, every one valid: the rest may follow.
    Prefix,
    Bad(String),
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Count,
    Root,
    Name,
    Number,
    Wrong,
    Any,
}

fn kind(column: &str) -> Kind {
    match column {
        "size" | "count" => Kind::Count,
        "root" => Kind::Root,
        "type" | "redop" => Kind::Name,
        "time" | "cputime" | "algbw" | "busbw" => Kind::Number,
        // nccl-tests 2019-2020 print `N/A` there with `-c 0`
        "error" => Kind::Wrong,
        "#wrong" | "wrong" => Kind::Wrong,
        _ => Kind::Any,
    }
}

fn valid(kind: Kind, token: &str) -> bool {
    match kind {
        Kind::Count => token.parse::<u64>().is_ok(),
        Kind::Root => token.parse::<i64>().is_ok(),
        Kind::Name => !token.is_empty() && token.parse::<f64>().is_err(),
        Kind::Number => token.parse::<f64>().is_ok(),
        Kind::Wrong => token == "N/A" || token.parse::<f64>().is_ok_and(|v| v >= 0.0),
        Kind::Any => true,
    }
}

/// The first (column, value) whose value does not fit its column.
fn first_bad<'a>(columns: &'a [String], tokens: &'a [String]) -> Option<(&'a String, &'a String)> {
    columns
        .iter()
        .zip(tokens)
        .find(|(c, t)| !(valid(kind(c), t) || (c.as_str() == "redop" && t.is_empty())))
}

pub(super) fn parse_row(columns: &[String], tokens: &[String]) -> RowParse {
    if tokens.len() == columns.len() {
        return match first_bad(columns, tokens) {
            None => RowParse::Full(tokens.to_vec()),
            Some((c, t)) => RowParse::Bad(format!("'{t}' is not a valid {c} value")),
        };
    }
    // Old alltoall printed an empty redop: one value short, and a number
    // where the redop would be.
    if let Some(r) = columns.iter().position(|c| c == "redop")
        && tokens.len() + 1 == columns.len()
        && tokens.get(r).is_some_and(|t| !valid(Kind::Name, t))
    {
        let mut filled = tokens.to_vec();
        filled.insert(r, String::new());
        if first_bad(columns, &filled).is_none() {
            return RowParse::Full(filled);
        }
    }
    match first_bad(columns, tokens) {
        Some((c, t)) => RowParse::Bad(format!("'{t}' is not a valid {c} value")),
        None if tokens.len() < columns.len() => RowParse::Prefix,
        None => RowParse::Bad(format!(
            "{} values where the header has {} columns",
            tokens.len(),
            columns.len()
        )),
    }
}

/// The out-of-place and in-place points of a complete row.
fn points(columns: &[String], tokens: &[String], line: usize, warnings: &mut Vec<String>) -> Vec<Point> {
    let at = |name: &str| columns.iter().position(|c| c == name).map(|i| tokens[i].as_str());
    let nth = |names: &[&str], n: usize| {
        columns
            .iter()
            .enumerate()
            .filter(|(_, c)| names.contains(&c.as_str()))
            .nth(n)
            .map(|(i, _)| tokens[i].as_str())
    };
    let size_bytes = at("size").and_then(|s| s.parse().ok()).unwrap_or(0);
    let count = at("count").and_then(|c| c.parse().ok()).unwrap_or(0);
    // Empty when the layout has no such column: `defaults` fills them in
    // once the section's command line and collective are known.
    let dtype = at("type").map(dtype_name).unwrap_or_default();
    let op = match at("redop") {
        None => String::new(),
        Some("") => "none".to_string(),
        Some(op) => op.to_ascii_lowercase(),
    };
    let root = at("root").and_then(|r| r.parse().ok()).unwrap_or(-1);
    let mut out = Vec::new();
    for (n, placement) in Placement::BOTH.into_iter().enumerate() {
        let Some(time_text) = nth(&["time", "cputime"], n) else {
            continue;
        };
        let Some(time_us) = super::super::time(time_text) else {
            warnings.push(format!(
                "line {line}: the {} time '{time_text}' is not a time: that point is not imported",
                placement.name()
            ));
            continue;
        };
        // `#wrong` counts wrong elements; old nccl-tests' `error` column is
        // a maximum error, which says nothing of how many: left empty.
        let wrong = nth(&["#wrong", "wrong"], n).and_then(|w| w.parse().ok());
        let m = Measured {
            dtype: dtype.clone(),
            op: op.clone(),
            root,
            placement,
            size_bytes,
            count,
            wrong,
            timestamp: at("timestamp").and_then(super::super::utc_timestamp),
            ..Measured::timed(time_us)
        };
        out.push(Point {
            m,
            time_text: time_text.to_string(),
            busbw_text: nth(&["busbw"], n).map(str::to_string),
        });
    }
    out
}
