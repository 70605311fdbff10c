//! Vocabulary shared by every layer: element types, reduction operations,
//! buffer placements, the cross-rank time reduction, which backend; and the
//! value types of options (sizes, lists, switches), each of which parses
//! and prints itself.
//!
//! Pure data with parsing and display; no I/O, no backend knowledge. What a
//! backend can execute is the backend's business (its capabilities).
//! Every type here reads and writes the same names on the command line, in
//! config files, in CSV columns and in JSON.

mod c_integer;
mod choice;
mod commands;
mod nccl_log;
mod nccl_version;
mod register;
mod size;
mod split;
mod switch;

pub use c_integer::read_c_integer;
pub use choice::{Choice, Named, RootChoice, known};
pub use commands::{Dimension, Format, Metric, ProgressMode, SeriesBy, Source};
pub use nccl_log::{INFO_MARK, split_info};
pub use nccl_version::NcclVersion;
pub use register::Register;
pub use size::{Size, human_bytes, parse_size};
pub use split::{SplitOp, SplitRule};
pub use switch::Switch;

/// Serializes a vocabulary type as its name and reads it back through its
/// `parse`, so CSV and JSON hold the names users type.
macro_rules! by_name {
    ($t:ty, $what:expr) => {
        impl serde::Serialize for $t {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.name())
            }
        }

        impl<'de> serde::Deserialize<'de> for $t {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let text = <std::borrow::Cow<'de, str> as serde::Deserialize>::deserialize(d)?;
                <$t>::parse(&text).ok_or_else(|| serde::de::Error::custom(format!("unknown {} '{}'", $what, text)))
            }
        }
    };
}
pub(crate) use by_name;

/// `Display` for a type with a `name()`: the name as it is (`T`), or padded
/// to the formatter's width and alignment (`pad T`).
macro_rules! display_by_name {
    (pad $t:ty) => {
        impl std::fmt::Display for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.pad(self.name())
            }
        }
    };
    ($t:ty) => {
        impl std::fmt::Display for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}
pub(crate) use display_by_name;

/// `Named` for a type with an inherent `name`, `parse` and list of every
/// value (`ALL`), `what` naming one value in messages; and its serde by
/// name (`by_name!`), which names it the same.
macro_rules! named {
    ($t:ty, $what:expr, $all:ident) => {
        impl $crate::types::Named for $t {
            const WHAT: &'static str = $what;
            fn all() -> &'static [Self] {
                &<$t>::$all
            }
            fn name(self) -> &'static str {
                <$t>::name(self)
            }
            fn parse(text: &str) -> Option<Self> {
                <$t>::parse(text)
            }
        }

        $crate::types::by_name!($t, $what);
    };
}
pub(crate) use named;

/// Element type of the buffers, named as nccl-tests names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum DType {
    Int8,
    Uint8,
    Int32,
    Uint32,
    Int64,
    Uint64,
    Half,
    #[default]
    Float,
    Double,
    Bfloat16,
}

impl DType {
    /// Every type the tool knows, in nccl-tests' order.
    pub const ALL: [DType; 10] = [
        DType::Int8,
        DType::Uint8,
        DType::Int32,
        DType::Uint32,
        DType::Int64,
        DType::Uint64,
        DType::Half,
        DType::Float,
        DType::Double,
        DType::Bfloat16,
    ];

    pub fn name(self) -> &'static str {
        match self {
            DType::Int8 => "int8",
            DType::Uint8 => "uint8",
            DType::Int32 => "int32",
            DType::Uint32 => "uint32",
            DType::Int64 => "int64",
            DType::Uint64 => "uint64",
            DType::Half => "half",
            DType::Float => "float",
            DType::Double => "double",
            DType::Bfloat16 => "bfloat16",
        }
    }

    /// Bytes per element.
    pub fn size_bytes(self) -> usize {
        match self {
            DType::Int8 | DType::Uint8 => 1,
            DType::Half | DType::Bfloat16 => 2,
            DType::Int32 | DType::Uint32 | DType::Float => 4,
            DType::Int64 | DType::Uint64 | DType::Double => 8,
        }
    }

    /// Largest integer `m` such that every integer in `0..=m` is exactly
    /// representable, and sums, products, minima and maxima of such integers
    /// that stay within `m` are exact in this type. Validation patterns keep
    /// every intermediate value within it, so results never depend on the
    /// reduction order and never overflow (Open MPI 4.1 saturates 8-bit sums,
    /// open-mpi/ompi#8045).
    pub fn exact_max(self) -> u64 {
        match self {
            DType::Int8 => i8::MAX as u64,
            DType::Uint8 => u8::MAX as u64,
            DType::Int32 => i32::MAX as u64,
            DType::Uint32 => u32::MAX as u64,
            DType::Int64 => i64::MAX as u64,
            DType::Uint64 => u64::MAX,
            DType::Half => 1 << 11,
            DType::Bfloat16 => 1 << 8,
            DType::Float => 1 << 24,
            DType::Double => 1 << 53,
        }
    }

    pub fn parse(s: &str) -> Option<DType> {
        let t = match s.trim().to_ascii_lowercase().as_str() {
            "int8" | "char" | "i8" => DType::Int8,
            "uint8" | "u8" => DType::Uint8,
            "int32" | "int" | "i32" => DType::Int32,
            "uint32" | "u32" => DType::Uint32,
            "int64" | "i64" => DType::Int64,
            "uint64" | "u64" => DType::Uint64,
            "half" | "float16" | "fp16" | "f16" => DType::Half,
            "float" | "float32" | "fp32" | "f32" => DType::Float,
            "double" | "float64" | "fp64" | "f64" => DType::Double,
            "bfloat16" | "bf16" => DType::Bfloat16,
            _ => return None,
        };
        Some(t)
    }
}

display_by_name!(DType);

named!(DType, "element type", ALL);

/// Reduction operation of all_reduce, reduce and reduce_scatter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ReduceOp {
    Sum,
    Prod,
    Min,
    Max,
    Avg,
}

impl ReduceOp {
    pub const ALL: [ReduceOp; 5] = [
        ReduceOp::Sum,
        ReduceOp::Prod,
        ReduceOp::Min,
        ReduceOp::Max,
        ReduceOp::Avg,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "sum",
            ReduceOp::Prod => "prod",
            ReduceOp::Min => "min",
            ReduceOp::Max => "max",
            ReduceOp::Avg => "avg",
        }
    }

    pub fn parse(s: &str) -> Option<ReduceOp> {
        ReduceOp::ALL
            .into_iter()
            .find(|op| op.name().eq_ignore_ascii_case(s.trim()))
    }
}

display_by_name!(ReduceOp);

named!(ReduceOp, "operation", ALL);

/// Where the output goes: a separate buffer, or the input buffer itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Placement {
    #[default]
    OutOfPlace,
    InPlace,
}

impl Placement {
    /// Every size runs out-of-place, then in-place (nccl-tests' order).
    pub const BOTH: [Placement; 2] = [Placement::OutOfPlace, Placement::InPlace];

    pub fn name(self) -> &'static str {
        match self {
            Placement::OutOfPlace => "out_of_place",
            Placement::InPlace => "in_place",
        }
    }

    pub fn parse(text: &str) -> Option<Placement> {
        Placement::BOTH.into_iter().find(|p| p.name() == text.trim())
    }
}

by_name!(Placement, "placement");

display_by_name!(Placement);

/// How per-rank times become the reported time (nccl-tests' `-a`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Average {
    Rank0,
    Avg,
    Min,
    Max,
}

impl Average {
    pub const ALL: [Average; 4] = [Average::Rank0, Average::Avg, Average::Min, Average::Max];

    pub fn name(self) -> &'static str {
        match self {
            Average::Rank0 => "rank0",
            Average::Avg => "avg",
            Average::Min => "min",
            Average::Max => "max",
        }
    }

    /// Accepts the names and nccl-tests' numeric forms 0..3.
    pub fn parse(s: &str) -> Option<Average> {
        let a = match s.trim().to_ascii_lowercase().as_str() {
            "0" | "rank0" => Average::Rank0,
            "1" | "avg" | "mean" => Average::Avg,
            "2" | "min" => Average::Min,
            "3" | "max" => Average::Max,
            _ => return None,
        };
        Some(a)
    }

    /// Other names `parse` takes: nccl-tests' numbers 0..3, and `mean`.
    pub fn aliases(self) -> &'static [&'static str] {
        match self {
            Average::Rank0 => &["0"],
            Average::Avg => &["1", "mean"],
            Average::Min => &["2"],
            Average::Max => &["3"],
        }
    }

    /// The reported time from every rank's time, `times[0]` being rank 0's.
    pub fn reduce(self, times: &[f64]) -> f64 {
        match self {
            Average::Rank0 => times.first().copied().unwrap_or(0.0),
            Average::Avg => times.iter().sum::<f64>() / times.len().max(1) as f64,
            Average::Min => times.iter().copied().fold(f64::INFINITY, f64::min),
            Average::Max => times.iter().copied().fold(0.0, f64::max),
        }
    }
}

display_by_name!(Average);

by_name!(Average, "average mode");

/// How a point's time is taken: the CSV's `timing` column.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TimingMethod {
    /// nccl-tests' method: a barrier, then the clock around `iters`
    /// operations launched back to back.
    Batched,
    /// OSU's method (`-z`): a barrier before each operation, each timed
    /// alone.
    Blocking,
}

impl TimingMethod {
    pub const ALL: [TimingMethod; 2] = [TimingMethod::Batched, TimingMethod::Blocking];

    pub fn name(self) -> &'static str {
        match self {
            TimingMethod::Batched => "batched",
            TimingMethod::Blocking => "blocking",
        }
    }

    pub fn parse(text: &str) -> Option<TimingMethod> {
        TimingMethod::ALL.into_iter().find(|m| m.name() == text.trim())
    }
}

display_by_name!(TimingMethod);

by_name!(TimingMethod, "timing method");

/// How a point's timed iteration count was chosen: the CSV's
/// `iter_policy` column.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IterPolicy {
    /// `-n N`: as many as asked.
    Fixed,
    /// Enough to fill `--min-time`.
    MinTime,
    /// Until the estimate is precise enough, or a time cap.
    Precision,
}

impl IterPolicy {
    pub const ALL: [IterPolicy; 3] = [IterPolicy::Fixed, IterPolicy::MinTime, IterPolicy::Precision];

    pub fn name(self) -> &'static str {
        match self {
            IterPolicy::Fixed => "fixed",
            IterPolicy::MinTime => "min-time",
            IterPolicy::Precision => "precision",
        }
    }

    pub fn parse(text: &str) -> Option<IterPolicy> {
        IterPolicy::ALL.into_iter().find(|m| m.name() == text.trim())
    }
}

display_by_name!(IterPolicy);

by_name!(IterPolicy, "iteration policy");

/// Which data plane runs the collectives: the CSV's `backend` column, the
/// header, and what `--backend` names besides `auto`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum BackendKind {
    /// Host buffers, MPI's own collectives.
    #[default]
    Mpi,
    /// GPU buffers, libnccl loaded at run time.
    Nccl,
    /// Host buffers, collectives computed across the threads of one
    /// process: the engine's test backend (`backend::memory`), which no
    /// `--backend` value chooses.
    Memory,
}

impl BackendKind {
    pub const ALL: [BackendKind; 3] = [BackendKind::Mpi, BackendKind::Nccl, BackendKind::Memory];

    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Mpi => "mpi",
            BackendKind::Nccl => "nccl",
            BackendKind::Memory => "memory",
        }
    }

    pub fn parse(text: &str) -> Option<BackendKind> {
        BackendKind::ALL
            .into_iter()
            .find(|b| b.name().eq_ignore_ascii_case(text.trim()))
    }
}

display_by_name!(BackendKind);

by_name!(BackendKind, "backend");

/// `--backend`: one backend, or `auto` (nccl where every rank has a GPU
/// and libnccl, else mpi).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendChoice {
    Auto,
    Only(BackendKind),
}

impl BackendChoice {
    pub const ALL: [BackendChoice; 3] = [
        BackendChoice::Auto,
        BackendChoice::Only(BackendKind::Mpi),
        BackendChoice::Only(BackendKind::Nccl),
    ];

    pub fn name(self) -> &'static str {
        match self {
            BackendChoice::Auto => "auto",
            BackendChoice::Only(kind) => kind.name(),
        }
    }

    pub fn parse(text: &str) -> Option<BackendChoice> {
        BackendChoice::ALL
            .into_iter()
            .find(|b| b.name().eq_ignore_ascii_case(text.trim()))
    }
}

display_by_name!(BackendChoice);

by_name!(BackendChoice, "backend");

/// Tests: every value of `all` parses back from its `name`.
#[cfg(test)]
pub(crate) fn assert_names_round_trip<T: Copy + PartialEq + std::fmt::Debug>(
    all: &[T],
    name: fn(T) -> &'static str,
    parse: fn(&str) -> Option<T>,
) {
    for &value in all {
        assert_eq!(parse(name(value)), Some(value));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dtype_names_round_trip() {
        assert_names_round_trip(&DType::ALL, DType::name, DType::parse);
        assert_eq!(DType::parse("FP32"), Some(DType::Float));
        assert_eq!(DType::parse("int9"), None);
    }

    #[test]
    fn dtype_sizes_match_their_rust_types() {
        assert_eq!(DType::Int8.size_bytes(), size_of::<i8>());
        assert_eq!(DType::Uint32.size_bytes(), size_of::<u32>());
        assert_eq!(DType::Int64.size_bytes(), size_of::<i64>());
        assert_eq!(DType::Float.size_bytes(), size_of::<f32>());
        assert_eq!(DType::Double.size_bytes(), size_of::<f64>());
        assert_eq!(DType::Half.size_bytes(), 2);
    }

    #[test]
    fn exact_max_is_exact_in_floating_types() {
        let m = DType::Float.exact_max();
        assert_eq!(m as f32 as u64, m);
        assert_eq!((m - 1) as f32 as u64, m - 1);
        let m = DType::Double.exact_max();
        assert_eq!(m as f64 as u64, m);
    }

    #[test]
    fn average_accepts_names_and_nccl_tests_numbers() {
        assert_eq!(Average::parse("0"), Some(Average::Rank0));
        assert_eq!(Average::parse("1"), Some(Average::Avg));
        assert_eq!(Average::parse("2"), Some(Average::Min));
        assert_eq!(Average::parse("3"), Some(Average::Max));
        assert_eq!(Average::parse("max"), Some(Average::Max));
        assert_eq!(Average::parse("4"), None);
    }

    #[test]
    fn average_reduces_times_as_named() {
        let t = [3.0, 1.0, 2.0, 6.0];
        assert_eq!(Average::Rank0.reduce(&t), 3.0);
        assert_eq!(Average::Avg.reduce(&t), 3.0);
        assert_eq!(Average::Min.reduce(&t), 1.0);
        assert_eq!(Average::Max.reduce(&t), 6.0);
    }
}
