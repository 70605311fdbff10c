//! The closed vocabularies of the commands around a run: what `compare`
//! and `plot` measure (`Metric`), `compare`'s formats and `--by`
//! dimensions, `plot`'s old `--by`, `import`'s sources, and when progress
//! is shown. Each parses and prints its names (clap lists them through
//! `cli`); what a value does is its command's business.

crate::types::vocabulary! {
    /// What is compared; each also goes by its CSV column.
    pub enum Metric: "metric", AnyCase {
        Busbw = "busbw" | "busbw_gbps", Algbw = "algbw" | "algbw_gbps", Time = "time" | "time_us",
    }
}

impl Metric {
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

crate::types::vocabulary! {
    /// Output format of `compare`.
    pub enum Format: "format", AnyCase { Table = "table" | "text", Markdown = "markdown" | "md", Json = "json" }
}

crate::types::vocabulary! {
    /// `compare --by`: what the rows are grouped by.
    pub enum Dimension: "dimension", AnyCase { Hierarchy = "hierarchy", Transport = "transport" }
}

crate::types::vocabulary! {
    /// `--by`: kept so that old command lines still run. Series are always
    /// split by everything that differs between rows (`series`), so it no
    /// longer changes which lines are drawn.
    pub enum SeriesBy: "series", AnyCase { Run = "run", Hierarchy = "hierarchy", Transport = "transport" }
}

crate::types::vocabulary! {
    /// What `import` reads.
    pub enum Source: "source", AnyCase {
        NcclTests = "nccl-tests" | "nccl_tests" | "nccl", Osu = "osu" | "omb",
        /// collbench's own table (standard output of `collbench run`).
        Collbench = "collbench",
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
