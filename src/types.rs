//! Vocabulary shared by every layer: element types, reduction operations,
//! buffer placements, the cross-rank time reduction, which backend; and the
//! value types of options (sizes, lists, switches), each of which parses
//! and prints itself.
//!
//! Pure data with parsing and display; no I/O, no backend knowledge. What a
//! backend can execute is the backend's business (its capabilities).
//! Every type here reads and writes the same names on the command line, in
//! config files, in CSV columns and in JSON. The closed vocabularies here
//! and across the crate are written by `vocabulary!` (`vocabulary.rs`)
//! from one list of their names.

mod algo;
mod c_integer;
mod choice;
mod commands;
mod nccl_version;
mod register;
mod size;
mod split;
mod switch;
mod vocabulary;

pub use algo::{
    Algo, AlgoChoice, AlgoPin, AlgoRecord, AlgoRecording, AlgoSetup, AlgoSource, Chosen, LOG_WORDS, PLUGIN_WORDS,
    ProfilerEnv, Proto,
};
pub use c_integer::read_c_integer;
pub use choice::{Choice, Named, RootChoice, known};
pub use commands::{Dimension, Format, Metric, ProgressMode, SeriesBy, Source};
pub use nccl_version::NcclVersion;
pub use register::Register;
pub use size::{Size, count_of, human_bytes, human_volume, ordinal, parse_size};
pub use split::{SplitOp, SplitRule};
pub use switch::Switch;
pub use vocabulary::Case;
pub(crate) use vocabulary::{by_name, display_by_name, named, vocabulary};

vocabulary! {
    /// Element type of the buffers, named as nccl-tests names them, in
    /// nccl-tests' order.
    #[derive(Hash, PartialOrd, Ord, Default)]
    pub enum DType: "element type", AnyCase {
        Int8 = "int8" | "char" | "i8",
        Uint8 = "uint8" | "u8",
        Int32 = "int32" | "int" | "i32",
        Uint32 = "uint32" | "u32",
        Int64 = "int64" | "i64",
        Uint64 = "uint64" | "u64",
        Half = "half" | "float16" | "fp16" | "f16",
        #[default]
        Float = "float" | "float32" | "fp32" | "f32",
        Double = "double" | "float64" | "fp64" | "f64",
        Bfloat16 = "bfloat16" | "bf16",
    }
}

impl DType {
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
}

vocabulary! {
    /// Reduction operation of all_reduce, reduce and reduce_scatter.
    #[derive(Hash, PartialOrd, Ord)]
    pub enum ReduceOp: "operation", AnyCase { Sum = "sum", Prod = "prod", Min = "min", Max = "max", Avg = "avg" }
}

vocabulary! {
    /// Where the output goes: a separate buffer, or the input buffer itself.
    #[derive(Hash, Default)]
    pub enum Placement: "placement", Exact { #[default] OutOfPlace = "out_of_place", InPlace = "in_place" }
}

impl Placement {
    /// Every size runs out-of-place, then in-place (nccl-tests' order).
    pub const BOTH: [Placement; 2] = Placement::ALL;
}

vocabulary! {
    /// How per-rank times become the reported time (nccl-tests' `-a`):
    /// by name, or by nccl-tests' numbers 0..3 (and `mean`).
    pub enum Average: "average mode", AnyCase {
        Rank0 = "rank0" | "0", Avg = "avg" | "1" | "mean", Min = "min" | "2", Max = "max" | "3",
    }
}

impl Average {
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

vocabulary! {
    /// How a point's time is taken: the CSV's `timing` column.
    #[derive(Hash)]
    pub enum TimingMethod: "timing method", Exact {
        /// nccl-tests' method: a barrier, then the clock around `iters`
        /// operations launched back to back.
        Batched = "batched",
        /// OSU's method (`-z`): a barrier before each operation, each timed
        /// alone.
        Blocking = "blocking",
    }
}

vocabulary! {
    /// How a point's timed iteration count was chosen: the CSV's
    /// `iter_policy` column.
    #[derive(Hash)]
    pub enum IterPolicy: "iteration policy", Exact {
        /// `-n N`: as many as asked.
        Fixed = "fixed",
        /// Enough to fill `--min-time`.
        MinTime = "min-time",
        /// Until the estimate is precise enough, or a time cap.
        Precision = "precision",
    }
}

vocabulary! {
    /// Which data plane runs the collectives: the CSV's `backend` column, the
    /// header, and what `--backend` names besides `auto`.
    #[derive(Hash, PartialOrd, Ord, Default)]
    pub enum BackendKind: "backend", AnyCase {
        /// Host buffers, MPI's own collectives.
        #[default]
        Mpi = "mpi",
        /// GPU buffers, libnccl loaded at run time.
        Nccl = "nccl",
        /// Host buffers, collectives computed across the threads of one
        /// process (`backend::memory`): `-g N --backend memory`, N ranks as
        /// threads without MPI or a GPU, and the engine's test backend.
        Memory = "memory",
    }
}

/// `--backend`: one backend, or `auto` (nccl where every rank has a GPU
/// and libnccl, else mpi).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendChoice {
    Auto,
    Only(BackendKind),
}

impl BackendChoice {
    pub const ALL: [BackendChoice; 4] = [
        BackendChoice::Auto,
        BackendChoice::Only(BackendKind::Mpi),
        BackendChoice::Only(BackendKind::Nccl),
        BackendChoice::Only(BackendKind::Memory),
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

named!(BackendChoice, "backend", ALL);

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
