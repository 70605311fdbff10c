//! The closed vocabularies of the commands around a run: what `compare`
//! and `plot` measure (`Metric`), `compare`'s formats and `--by`
//! dimensions, `plot`'s old `--by`, `import`'s sources, and when progress
//! is shown. Each parses and prints its names (clap lists them through
//! `cli`); what a value does is its command's business.

use serde::Serialize;

/// What is compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Metric {
    Busbw,
    Algbw,
    Time,
}

impl Metric {
    pub const ALL: [Metric; 3] = [Metric::Busbw, Metric::Algbw, Metric::Time];

    /// The CSV column each metric also goes by.
    pub fn aliases(self) -> &'static [&'static str] {
        match self {
            Metric::Busbw => &["busbw_gbps"],
            Metric::Algbw => &["algbw_gbps"],
            Metric::Time => &["time_us"],
        }
    }

    pub fn parse(s: &str) -> Option<Metric> {
        match s.trim().to_ascii_lowercase().as_str() {
            "busbw" | "busbw_gbps" => Some(Metric::Busbw),
            "algbw" | "algbw_gbps" => Some(Metric::Algbw),
            "time" | "time_us" => Some(Metric::Time),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Metric::Busbw => "busbw",
            Metric::Algbw => "algbw",
            Metric::Time => "time",
        }
    }

    pub fn unit(self) -> &'static str {
        match self {
            Metric::Busbw | Metric::Algbw => "GB/s",
            Metric::Time => "us",
        }
    }

    pub fn higher_is_better(self) -> bool {
        self != Metric::Time
    }

    /// The better of two values.
    pub fn better(self, a: f64, b: f64) -> bool {
        if self.higher_is_better() { a > b } else { a < b }
    }
}

crate::types::display_by_name!(Metric);

/// Output format of `compare`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Table,
    Markdown,
    Json,
}

impl Format {
    pub const ALL: [Format; 3] = [Format::Table, Format::Markdown, Format::Json];

    pub fn name(self) -> &'static str {
        match self {
            Format::Table => "table",
            Format::Markdown => "markdown",
            Format::Json => "json",
        }
    }

    pub fn aliases(self) -> &'static [&'static str] {
        match self {
            Format::Table => &["text"],
            Format::Markdown => &["md"],
            Format::Json => &[],
        }
    }

    pub fn parse(s: &str) -> Option<Format> {
        match s.trim().to_ascii_lowercase().as_str() {
            "table" | "text" => Some(Format::Table),
            "markdown" | "md" => Some(Format::Markdown),
            "json" => Some(Format::Json),
            _ => None,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Dimension {
    Hierarchy,
    Transport,
}

impl Dimension {
    pub const ALL: [Dimension; 2] = [Dimension::Hierarchy, Dimension::Transport];

    pub fn parse(s: &str) -> Option<Dimension> {
        match s.trim().to_ascii_lowercase().as_str() {
            "hierarchy" => Some(Dimension::Hierarchy),
            "transport" => Some(Dimension::Transport),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Dimension::Hierarchy => "hierarchy",
            Dimension::Transport => "transport",
        }
    }
}

/// `--by`: kept so that old command lines still run. Series are always
/// split by everything that differs between rows (`series`), so it no
/// longer changes which lines are drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SeriesBy {
    Run,
    Hierarchy,
    Transport,
}

impl SeriesBy {
    pub const ALL: [SeriesBy; 3] = [SeriesBy::Run, SeriesBy::Hierarchy, SeriesBy::Transport];

    pub fn name(self) -> &'static str {
        match self {
            SeriesBy::Run => "run",
            SeriesBy::Hierarchy => "hierarchy",
            SeriesBy::Transport => "transport",
        }
    }

    pub fn parse(s: &str) -> Option<SeriesBy> {
        match s.trim().to_ascii_lowercase().as_str() {
            "run" => Some(SeriesBy::Run),
            "hierarchy" => Some(SeriesBy::Hierarchy),
            "transport" => Some(SeriesBy::Transport),
            _ => None,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    NcclTests,
    Osu,
    /// collbench's own table (standard output of `collbench run`).
    Collbench,
}

impl Source {
    pub const ALL: [Source; 3] = [Source::NcclTests, Source::Osu, Source::Collbench];

    pub fn name(self) -> &'static str {
        match self {
            Source::NcclTests => "nccl-tests",
            Source::Osu => "osu",
            Source::Collbench => "collbench",
        }
    }

    pub fn aliases(self) -> &'static [&'static str] {
        match self {
            Source::NcclTests => &["nccl_tests", "nccl"],
            Source::Osu => &["omb"],
            Source::Collbench => &[],
        }
    }

    pub fn parse(s: &str) -> Option<Source> {
        match s.trim().to_ascii_lowercase().as_str() {
            "nccl-tests" | "nccl_tests" | "nccl" => Some(Source::NcclTests),
            "osu" | "omb" => Some(Source::Osu),
            "collbench" => Some(Source::Collbench),
            _ => None,
        }
    }
}

/// When progress is shown (`progress` says how).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProgressMode {
    /// A bar where one is safe to draw, else nothing.
    Auto,
    /// A bar where one is safe to draw, else plain lines (`--progress`).
    Always,
    Never,
}
