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
use super::{
    Given, Measured, Parsed, Run, Tool, check_given, dtype_name, perf_binary, perf_collective, record, run_id,
};
use crate::collective::Collective;
use crate::types::BackendKind;

mod ranks;
mod row;

use ranks::{rank_count, ranks_by_index};
use row::{RowParse, parse_row, row_line, row_tokens};

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
        let (run, points) =
            run_of(s, given, name, run_id("nccl-tests", name, text, i, with_rows.len())).map_err(located)?;
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
fn run_of(s: &Section, given: &Given, name: &str, run_id: String) -> Result<(Run, Vec<Measured>), String> {
    let rows = s.table.as_ref().map(|t| t.rows.as_slice()).unwrap_or_default();
    check_given(Tool::NcclTests, given, s.collective)?;
    let collective = s.collective.or(given.collective).or_else(|| perf_collective(name));
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
        run_id,
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

#[cfg(test)]
mod tests;
