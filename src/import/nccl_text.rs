//! nccl-tests' text output, every layout since 2018 (docs/import.md lists
//! what each line means and every decision below). What it reads:
//! - run sections, started by a version line, `# Collective test
//!   starting: xxx_perf`, an echoed command line naming an `xxx_perf` or
//!   `xxx_perf_mpi` binary, the `# nThread ...` line or a column header,
//!   whichever comes first after the previous table;
//! - `#  Rank N [Group G] Pid P on HOST device D ...`: the rank count is
//!   the highest N + 1 and the hosts come from these lines;
//! - the column header, which places every value by name, whatever the
//!   layout (`redop`/`root` present or not, `#wrong` or the old `error`,
//!   `timestamp`, per-iteration columns);
//! - result rows under it: an out-of-place and an in-place point each.
//!
//! Launcher prefixes are removed first (`launch::content`); lines that fit
//! nowhere (NCCL INFO, PMIX, banners) are skipped, but a line under a
//! header that starts like a row and is not one is reported with its line
//! number. A row split by an interleaved line is joined back.
//!
//! The rank count is never guessed: it is checked against the nThread
//! line, the echoed command and the log's own busbw column, which nccl-tests
//! computed with the true rank count; a log whose count cannot be known is
//! refused.

use super::launch::{self, Command};
use super::{Given, Measured, Parsed, Run, dtype_name, perf_binary, perf_collective, record, run_id};
use crate::collective::Collective;
use crate::types::{BackendKind, Placement};

/// What one line (without its launcher prefix) is.
enum Item {
    Version {
        tests: String,
        library: Option<String>,
    },
    Starting(String),
    Threads {
        threads: u64,
        gpus: u64,
        iters: u64,
        warmup: u64,
    },
    Rank(RankLine),
    Header {
        columns: Vec<String>,
        wrapper: usize,
    },
    OutOfBounds(u64),
    Footer,
    NcclVersion(String),
    Command(Command),
    Other,
}

#[derive(Clone, Debug)]
struct RankLine {
    line: usize,
    rank: u64,
    pid: Option<String>,
    host: Option<String>,
}

/// One run: everything from its first line to the end of its table.
#[derive(Default)]
struct Section {
    first_line: usize,
    version: Option<String>,
    library: Option<String>,
    nccl_version: Option<String>,
    /// The binary that named the collective, as written.
    binary: Option<String>,
    collective: Option<Collective>,
    command: Option<(usize, Command)>,
    /// (line, nThread, nGpus)
    threads: Option<(usize, u64, u64)>,
    iters: u64,
    warmup: u64,
    ranks: Vec<RankLine>,
    table: Option<Table>,
    /// (line, count) of a `# Out of bounds values : N FAILED` line.
    failed: Option<(usize, u64)>,
}

struct Table {
    line: usize,
    columns: Vec<String>,
    /// Words a wrapper put before the header's `#`, and so before each row.
    wrapper: usize,
    open: bool,
    rows: Vec<Row>,
    /// (line, reason) of every row-like line that was not imported.
    rejected: Vec<(usize, Rejected)>,
    fragment: Option<Fragment>,
}

/// A row's beginning, waiting for the line that continues it.
struct Fragment {
    line: usize,
    tokens: Vec<String>,
    between: Vec<usize>,
}

enum Rejected {
    /// A fragment nothing completed: (values, columns).
    Incomplete(usize, usize),
    Bad(String),
}

struct Row {
    line: usize,
    points: Vec<Point>,
}

/// One point with the text nccl-tests printed for it, for the busbw check.
struct Point {
    m: Measured,
    time_text: String,
    busbw_text: Option<String>,
}

pub(super) fn parse(text: &str, name: &str, given: &Given) -> Result<Parsed, String> {
    let (sections, mut warnings) = read(text);
    // Where the text stops without a newline: a row there was cut.
    let cut_at = (!text.ends_with('\n')).then(|| text.lines().count());
    let tables: Vec<&Section> = sections.iter().filter(|s| s.table.is_some()).collect();
    let Some(first) = tables.first() else {
        return Err(
            "no nccl-tests result rows found: no column header ('#  size  count  type ...') in the file \
                    (expected the output of an nccl-tests *_perf binary)"
                .into(),
        );
    };
    let with_rows: Vec<&Section> = tables
        .iter()
        .copied()
        .filter(|s| s.table.as_ref().is_some_and(|t| !t.rows.is_empty()))
        .collect();
    if with_rows.is_empty() {
        return Err(no_rows(&tables, first, cut_at));
    }
    for s in &tables {
        warnings.extend(section_warnings(s, cut_at));
    }
    let mut records = Vec::new();
    for (i, s) in with_rows.iter().enumerate() {
        let located = |e: String| {
            if with_rows.len() > 1 && !e.starts_with("line ") {
                format!("the run starting at line {}: {e}", s.first_line)
            } else {
                e
            }
        };
        let (run, points) = run_of(s, given, name, i, with_rows.len()).map_err(located)?;
        for m in &points {
            records.push(record(&run, m).map_err(located)?);
        }
    }
    Ok(Parsed { records, warnings })
}

/// Every line of `text`, sorted into run sections; warnings for rows that
/// were joined back together.
fn read(text: &str) -> (Vec<Section>, Vec<String>) {
    let mut sections: Vec<Section> = Vec::new();
    let mut current = Section::default();
    let mut warnings = Vec::new();
    // The latest header's columns and wrapper: a complete row outside an
    // open table is reported, never dropped without a word.
    let mut last_header: Option<(Vec<String>, usize)> = None;
    for (i, raw) in text.lines().enumerate() {
        let no = i + 1;
        let content = launch::content(raw).trim_end();
        if content.trim().is_empty() {
            continue;
        }
        let item = classify(content);
        let starts_new = match &item {
            Item::Version { .. } => current.table.is_some() || current.version.is_some(),
            Item::Threads { .. } => current.table.is_some() || current.threads.is_some(),
            Item::Starting(_) | Item::Command(_) | Item::Rank(_) | Item::Header { .. } => current.table.is_some(),
            _ => false,
        };
        if starts_new {
            close(&mut current);
            sections.push(std::mem::take(&mut current));
        }
        if current.first_line == 0 {
            current.first_line = no;
        }
        if let Item::Header { columns, wrapper } = &item {
            last_header = Some((columns.clone(), *wrapper));
        }
        let in_table = current.table.as_ref().is_some_and(|t| t.open);
        if let (Item::Other, false, Some((columns, wrapper))) = (&item, in_table, &last_header)
            && let Some(tokens) = row_tokens(content, *wrapper)
            && matches!(parse_row(columns, &tokens), RowParse::Full(_))
        {
            warnings.push(format!(
                "line {no}: a result row outside any table (after its run's footer, or where a new run began): \
                 not imported"
            ));
        }
        apply(&mut current, no, content, item, &mut warnings);
    }
    close(&mut current);
    sections.push(current);
    (sections, warnings)
}

fn apply(s: &mut Section, no: usize, content: &str, item: Item, warnings: &mut Vec<String>) {
    match item {
        Item::Version { tests, library } => (s.version, s.library) = (Some(tests), library),
        Item::Starting(binary) => {
            s.collective = perf_binary(&binary);
            s.binary = Some(binary);
        }
        Item::Command(c) => {
            if s.binary.is_none() {
                s.collective = perf_binary(c.binary.rsplit('/').next().unwrap_or_default());
                s.binary = Some(c.binary.clone());
            }
            s.command = Some((no, c));
        }
        Item::Threads {
            threads,
            gpus,
            iters,
            warmup,
        } => {
            (s.threads, s.iters, s.warmup) = (Some((no, threads, gpus)), iters, warmup);
        }
        Item::Rank(mut r) => {
            r.line = no;
            s.ranks.push(r);
        }
        Item::Header { columns, wrapper } => {
            s.table = Some(Table {
                line: no,
                columns,
                wrapper,
                open: true,
                rows: Vec::new(),
                rejected: Vec::new(),
                fragment: None,
            });
        }
        Item::OutOfBounds(n) => {
            s.failed = (n > 0).then_some((no, n));
            close(s);
        }
        Item::Footer => close(s),
        Item::NcclVersion(v) => {
            s.nccl_version.get_or_insert(v);
            interleaved(s, no);
        }
        Item::Other => {
            if let Some(table) = s.table.as_mut().filter(|t| t.open) {
                row_line(table, no, content, warnings);
            }
        }
    }
}

/// A line inside a table that is not a row: it may sit inside a split row.
fn interleaved(s: &mut Section, no: usize) {
    if let Some(f) = s.table.as_mut().and_then(|t| t.fragment.as_mut()) {
        f.between.push(no);
    }
}

/// The table takes no more rows; a waiting fragment stays incomplete.
fn close(s: &mut Section) {
    if let Some(t) = s.table.as_mut() {
        t.open = false;
        if let Some(f) = t.fragment.take() {
            t.rejected
                .push((f.line, Rejected::Incomplete(f.tokens.len(), t.columns.len())));
        }
    }
}

fn classify(content: &str) -> Item {
    let words: Vec<&str> = content.split_whitespace().collect();
    let find = |seq: &[&str]| words.windows(seq.len()).position(|w| w == seq);
    let word = |i: usize| words.get(i).copied().unwrap_or_default();
    if let Some(i) = find(&["nccl-tests", "version"]) {
        let library = words
            .iter()
            .find_map(|w| w.strip_prefix("nccl-library="))
            .and_then(nccl_code);
        return Item::Version {
            tests: word(i + 2).to_string(),
            library,
        };
    }
    if let Some(i) = find(&["Collective", "test", "starting:"]) {
        return Item::Starting(word(i + 3).to_string());
    }
    if find(&["Collective", "test", "concluded:"]).is_some() || find(&["Avg", "bus", "bandwidth"]).is_some() {
        return Item::Footer;
    }
    if let Some(i) = find(&["Out", "of", "bounds", "values", ":"]) {
        let failed = if word(i + 6) == "OK" {
            0
        } else {
            word(i + 5).parse().unwrap_or(1)
        };
        return Item::OutOfBounds(failed);
    }
    if let Some(i) = words.iter().position(|w| *w == "nThread")
        && word(i + 2) == "nGpus"
        && let (Ok(threads), Ok(gpus)) = (word(i + 1).parse(), word(i + 3).parse())
    {
        return Item::Threads {
            threads,
            gpus,
            iters: iters_after(&words, None).unwrap_or(0),
            warmup: iters_after(&words, Some("warmup")).unwrap_or(0),
        };
    }
    if let Some(rank) = rank_line(&words) {
        return Item::Rank(rank);
    }
    if let Some(header) = header(&words) {
        return header;
    }
    if word(0) == "NCCL" && word(1) == "version" {
        return Item::NcclVersion(word(2).to_string());
    }
    if !content.trim_start().starts_with('#')
        && let Some(c) = launch::command(content, |w| w.ends_with("_perf") || w.ends_with("_perf_mpi"))
    {
        return Item::Command(c);
    }
    Item::Other
}

/// `nccl-library=22902` -> `2.29.2` (NCCL_VERSION_CODE since 2.9).
fn nccl_code(code: &str) -> Option<String> {
    let code: u64 = code.parse().ok()?;
    (code >= 20900).then(|| format!("{}.{}.{}", code / 10000, code / 100 % 100, code % 100))
}

/// `Rank  3 Group  0 Pid 1234 on host device  3 [...]` (Group since 2.13).
fn rank_line(words: &[&str]) -> Option<RankLine> {
    let i = words.iter().position(|w| *w == "Rank")?;
    if !directive_at(words, i) {
        return None;
    }
    // No job has 2^32 ranks: a bigger index is not a device line.
    let rank = words.get(i + 1)?.parse::<u32>().ok()?.into();
    let rest = &words[i + 2..];
    let pid_at = rest.iter().position(|w| *w == "Pid")?;
    rest.iter().position(|w| *w == "device")?;
    let after = |key: &str| {
        rest.iter()
            .position(|w| *w == key)
            .and_then(|j| rest.get(j + 1))
            .map(|s| s.to_string())
    };
    Some(RankLine {
        line: 0,
        rank,
        pid: rest.get(pid_at + 1).map(|s| s.to_string()),
        host: after("on"),
    })
}

/// The column header: names from `size` on.
fn header(words: &[&str]) -> Option<Item> {
    let at = words.iter().position(|w| *w == "size")?;
    if !directive_at(words, at) {
        return None;
    }
    let columns: Vec<String> = words[at..].iter().map(|w| w.to_string()).collect();
    let has = |n: &str| columns.iter().any(|c| c == n);
    if !(has("count") && (has("time") || has("busbw"))) {
        return None;
    }
    let wrapper = words[..at].iter().filter(|w| **w != "#").count();
    Some(Item::Header { columns, wrapper })
}

/// Whether the word at `i` starts what nccl-tests printed: right after its
/// `#`, or first on a line whose `#` an editor removed; not in the middle
/// of someone else's log line.
fn directive_at(words: &[&str], i: usize) -> bool {
    i == 0 || words[i - 1].ends_with('#')
}

/// The number after `iters:`, the plain one or the one after `prefix`
/// (`warmup iters: 5 iters: 20 agg iters: 1`).
fn iters_after(words: &[&str], prefix: Option<&str>) -> Option<u64> {
    words.windows(3).find_map(|w| {
        let matches = match prefix {
            Some(p) => w[0] == p && w[1] == "iters:",
            None => w[1] == "iters:" && w[0] != "warmup" && w[0] != "agg",
        };
        if matches { w[2].parse().ok() } else { None }
    })
}

/// A line inside an open table.
fn row_line(table: &mut Table, no: usize, content: &str, warnings: &mut Vec<String>) {
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
fn row_tokens(content: &str, wrapper: usize) -> Option<Vec<String>> {
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

enum RowParse {
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

fn parse_row(columns: &[String], tokens: &[String]) -> RowParse {
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
        let Some(time_us) = super::time(time_text) else {
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
            time_us,
            time_min_us: time_us,
            time_max_us: time_us,
            wrong,
            timestamp: at("timestamp").map(str::to_string),
            iters: None,
            sample: None,
        };
        out.push(Point {
            m,
            time_text: time_text.to_string(),
            busbw_text: nth(&["busbw"], n).map(str::to_string),
        });
    }
    out
}

/// Why a section's rejected line was not imported.
fn reason(line: usize, r: &Rejected, cut_at: Option<usize>) -> String {
    let cut = cut_at == Some(line);
    match r {
        Rejected::Incomplete(k, n) if cut => {
            format!("the file ends inside this result row ({k} of {n} values): truncated, not imported")
        }
        Rejected::Incomplete(k, n) => {
            format!("an incomplete result row ({k} of {n} values) that no later line completes: not imported")
        }
        Rejected::Bad(why) if cut => format!("the file ends inside this result row ({why}): truncated, not imported"),
        Rejected::Bad(why) => format!("not a result row ({why}): not imported"),
    }
}

fn section_warnings(s: &Section, cut_at: Option<usize>) -> Vec<String> {
    let mut out = Vec::new();
    let Some(t) = &s.table else { return out };
    for (line, r) in &t.rejected {
        out.push(format!("line {line}: {}", reason(*line, r, cut_at)));
    }
    if t.rows.is_empty() && t.rejected.is_empty() {
        out.push(format!("line {}: a column header with no result rows under it", t.line));
    }
    if let Some((line, n)) = s.failed {
        let error_column = t.columns.iter().any(|c| c == "error");
        out.push(if error_column {
            format!(
                "line {line}: this run reports {n} FAILED checks; its 'error' column is a maximum error, not a count, \
                 so `wrong` is left empty for all its rows"
            )
        } else {
            format!("line {line}: this run reports {n} out-of-bounds values FAILED")
        });
    }
    out
}

/// The refusal when there is a header but not one row could be read.
fn no_rows(tables: &[&Section], first: &Section, cut_at: Option<usize>) -> String {
    for t in tables.iter().filter_map(|s| s.table.as_ref()) {
        if let Some((line, r)) = t.rejected.first() {
            let how = match t.rejected.len() {
                1 => "its one row could not be read".to_string(),
                n => format!("none of the {n} rows under it could be read"),
            };
            return format!(
                "the nccl-tests column header (line {}) was found, but {how}; the first, line {line}: {}",
                t.line,
                reason(*line, r, cut_at)
            );
        }
    }
    let line = first.table.as_ref().map_or(0, |t| t.line);
    format!(
        "the nccl-tests column header (line {line}) is followed by no result rows (the run stopped before its \
         first size?)"
    )
}

/// The run a section describes, and its points.
fn run_of(
    s: &Section,
    given: &Given,
    name: &str,
    index: usize,
    sections: usize,
) -> Result<(Run, Vec<Measured>), String> {
    let rows = s.table.as_ref().map(|t| t.rows.as_slice()).unwrap_or_default();
    let collective = given.collective.or(s.collective).or_else(|| perf_collective(name));
    let Some(collective) = collective else {
        return Err(missing_collective(s, given));
    };
    let nranks = rank_count(s, given, collective, rows)?;
    let ranks = ranks_by_index(&s.ranks);
    let hosts: Vec<String> = ranks.iter().filter_map(|r| r.host.clone()).collect();
    let complete = ranks.len() as u64 == nranks && hosts.len() == ranks.len();
    let nccl = s.nccl_version.clone().or_else(|| s.library.clone());
    let backend_version = match (&s.version, nccl) {
        (Some(t), Some(n)) => format!("nccl-tests {t}, NCCL {n}"),
        (Some(t), None) => format!("nccl-tests {t}"),
        (None, Some(n)) => format!("NCCL {n}"),
        (None, None) => "nccl-tests".into(),
    };
    let run = Run {
        run_id: run_id("nccl-tests", name, index, sections),
        backend: BackendKind::Nccl,
        backend_version,
        collective,
        nranks,
        hosts: if complete { hosts } else { Vec::new() },
        iters: s.iters,
        warmup: s.warmup,
        timestamp: String::new(),
    };
    let points = rows
        .iter()
        .flat_map(|r| r.points.iter())
        .map(|p| defaults(s, collective, &p.m))
        .collect();
    Ok((run, points))
}

/// A point of a layout without a `type` or `redop` column gets what the
/// echoed command line asked for, else nccl-tests' defaults (`-d float`,
/// `-o sum`).
fn defaults(s: &Section, collective: Collective, m: &Measured) -> Measured {
    let command = s.command.as_ref().map(|c| &c.1);
    let mut m = m.clone();
    if m.dtype.is_empty() {
        m.dtype = dtype_name(command.and_then(|c| c.dtype.as_deref()).unwrap_or("float"));
    }
    if m.op.is_empty() {
        m.op = if collective.spec().is_reduction() {
            command
                .and_then(|c| c.op.as_deref())
                .unwrap_or("sum")
                .to_ascii_lowercase()
        } else {
            "none".to_string()
        };
    }
    m
}

fn missing_collective(s: &Section, given: &Given) -> String {
    let what = match &s.binary {
        Some(b) => format!("the log names {b}, which is not a collective collbench imports"),
        None => "no *_perf binary name in the log or in the file name".to_string(),
    };
    let ranks_known =
        given.nranks.is_some() || !s.ranks.is_empty() || s.command.as_ref().is_some_and(|c| c.1.ranks().is_some());
    if ranks_known {
        format!("cannot tell which collective this measured ({what}): pass --collective NAME")
    } else {
        format!(
            "cannot tell which collective this measured ({what}) nor how many ranks ran it (no '#  Rank N' device \
             lines, no echoed command line): pass --collective NAME and --nranks N"
        )
    }
}

/// Rank lines in rank order, one per rank.
fn ranks_by_index(lines: &[RankLine]) -> Vec<RankLine> {
    let mut ranks = lines.to_vec();
    ranks.sort_by_key(|r| r.rank);
    ranks.dedup_by_key(|r| r.rank);
    ranks
}

/// What the Rank lines say: the highest rank and how many below it are
/// missing; an error when one rank is listed by two different processes.
fn rank_lines(lines: &[RankLine]) -> Result<Option<(u64, u64)>, String> {
    let ranks = ranks_by_index(lines);
    for a in lines {
        if let Some(b) = lines
            .iter()
            .find(|b| b.rank == a.rank && (b.pid != a.pid || b.host != a.host))
        {
            return Err(format!(
                "rank {} is listed twice by different processes (lines {} and {}): this log interleaves separate \
                 runs (an nccl-tests built without MPI started by mpirun?); split it, or pass --nranks N",
                a.rank, a.line, b.line
            ));
        }
    }
    Ok(ranks.last().map(|last| (last.rank, last.rank + 1 - ranks.len() as u64)))
}

/// The rank count: --nranks, else the Rank lines, else an echoed command
/// line; every other source in the log must agree, and so must the
/// busbw that nccl-tests printed.
fn rank_count(s: &Section, given: &Given, collective: Collective, rows: &[Row]) -> Result<u64, String> {
    let lines = rank_lines(&s.ranks)?;
    let command = s.command.as_ref().and_then(|(l, c)| c.ranks().map(|n| (*l, n)));
    let (n, source, certain) = match (given.nranks, lines, command) {
        (Some(n), _, _) => (n, "--nranks".to_string(), true),
        (None, Some((max, 0)), _) => (max + 1, format!("the '#  Rank 0..{max}' lines"), true),
        (None, _, Some((l, n))) => (n, format!("the command line at line {l}"), true),
        (None, Some((max, _)), None) => (max + 1, format!("the highest '#  Rank {max}' line"), false),
        (None, None, None) => {
            return Err(
                "cannot tell how many ranks ran this: no '#  Rank N' device lines and no echoed command \
                        line with the launch: pass --nranks N"
                    .into(),
            );
        }
    };
    agree(s, n, &source, lines, command)?;
    let factor = |n: u64| collective.spec().bus_factor(n as usize);
    if let Some(bad) = inconsistent(rows, factor(n)) {
        return Err(format!(
            "line {}: the log's busbw {} is not what {} gives with {n} ranks ({}: {:.4} GB/s), so the rank count \
             ({source}) or the collective ({}) is wrong: pass --nranks N or --collective NAME",
            bad.line,
            bad.printed,
            collective.name(),
            bad.time_text,
            bad.ours,
            collective.name()
        ));
    }
    if !certain {
        let (max, missing) = lines.unwrap_or_default();
        let next = n.saturating_add(1);
        let why = if factor(n) == factor(next) {
            format!("{}'s busbw does not depend on it", collective.name())
        } else if inconsistent(rows, factor(next)).is_none() {
            "the printed busbw is too coarse to tell".to_string()
        } else {
            return Ok(n);
        };
        return Err(format!(
            "{missing} of the '#  Rank 0..{max}' lines are missing (elided?), so the rank count is at least {n} \
             but not known, and {why}: pass --nranks N"
        ));
    }
    Ok(n)
}

/// The sources of the rank count that `n` did not come from must agree.
fn agree(
    s: &Section,
    n: u64,
    source: &str,
    lines: Option<(u64, u64)>,
    command: Option<(usize, u64)>,
) -> Result<(), String> {
    match lines {
        Some((max, 0)) if n != max + 1 => {
            return Err(format!(
                "{n} ranks ({source}), but the '#  Rank' lines list ranks 0 to {max}"
            ));
        }
        Some((max, _)) if n <= max => return Err(format!("{n} ranks ({source}), but there is a '#  Rank {max}' line")),
        _ => {}
    }
    if let Some((line, c)) = command
        && c != n
    {
        return Err(format!(
            "{n} ranks ({source}), but the command line at line {line} starts {c}"
        ));
    }
    if let Some((line, t, g)) = s.threads
        && let Some(per_process) = t.checked_mul(g).filter(|p| *p > 0)
        && !n.is_multiple_of(per_process)
    {
        return Err(format!(
            "{n} ranks ({source}) cannot be: line {line} says each process ran nThread {t} x nGpus {g} = \
             {per_process} ranks"
        ));
    }
    Ok(())
}

struct Inconsistent {
    line: usize,
    printed: String,
    time_text: String,
    ours: f64,
}

/// The point whose printed busbw is not what size / time x `factor` gives,
/// allowing for the rounding of both printed numbers; of several, the one
/// with the largest busbw, whose digits leave the least doubt.
fn inconsistent(rows: &[Row], factor: f64) -> Option<Inconsistent> {
    let mut worst: Option<(f64, Inconsistent)> = None;
    for row in rows {
        for p in &row.points {
            let Some(printed_text) = p.busbw_text.as_deref() else {
                continue;
            };
            let Some(printed) = printed_text.parse::<f64>().ok().filter(|b| b.is_finite()) else {
                continue;
            };
            let size = p.m.size_bytes as f64;
            let (t, dt) = (p.m.time_us, half_unit(&p.time_text));
            let db = half_unit(printed_text);
            // GB/s = bytes / (t us * 1e-6) / 1e9 = bytes / t / 1e3
            let bus = |t: f64| {
                if t > 0.0 {
                    size / t / 1e3 * factor
                } else {
                    f64::INFINITY
                }
            };
            let slack = 1e-9 * printed.abs().max(1.0);
            let (lo, hi) = (bus(t + dt) - db - slack, bus(t - dt) + db + slack);
            let ok = (size == 0.0 && printed == 0.0) || (lo..=hi).contains(&printed);
            if !ok && worst.as_ref().is_none_or(|w| printed > w.0) {
                let found = Inconsistent {
                    line: row.line,
                    printed: printed_text.to_string(),
                    time_text: format!("{} B in {} us", p.m.size_bytes, p.time_text),
                    ours: bus(t),
                };
                worst = Some((printed, found));
            }
        }
    }
    worst.map(|w| w.1)
}

/// Half the last printed digit of a number as printf wrote it: `12.5` ->
/// 0.05, `105854` -> 0.5, `1e+06` -> 5e5.
fn half_unit(text: &str) -> f64 {
    let lower = text.to_ascii_lowercase();
    let (mantissa, exponent) = match lower.split_once('e') {
        Some((m, e)) => (m.to_string(), e.parse::<i32>().unwrap_or(0)),
        None => (lower, 0),
    };
    let decimals = mantissa.split_once('.').map_or(0, |(_, d)| d.len());
    0.5 * 10f64.powi(exponent.saturating_sub(i32::try_from(decimals).unwrap_or(i32::MAX)))
}

#[cfg(test)]
mod tests;
