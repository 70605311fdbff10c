//! What a training step spends on communication, and what a real job did:
//! the collective schedules of data-parallel, ZeRO, FSDP/HSDP,
//! tensor-parallel, expert-parallel (mixture of experts) and
//! pipeline-parallel training for a model (`model`, `schedule` and one file
//! per strategy), the sub-communicators they run on (`groups`), their volume
//! from first principles (`volume`), and the collective sequence of an NCCL
//! debug log (`replay`).
//!
//! Pure descriptions and arithmetic: no I/O, no backend, no timing. The
//! engine executes a `Schedule`'s operations in order on the groups it
//! builds from `GroupLayout`; reports format the volumes beside the times.
//! docs/workload.md says what each schedule follows and simplifies.

pub mod count;
mod ddp;
mod fsdp;
pub mod groups;
pub mod model;
pub mod moe;
pub mod op;
pub mod options;
pub mod plan;
mod pp;
pub mod replay;
pub mod schedule;
mod tp;
pub mod volume;
mod zero;

pub use count::{Count, parse_count};
pub use ddp::buckets as ddp_buckets;
pub use groups::{Group, GroupLayout, Partition};
pub use model::{Model, PlainSpec, PresetName, Tensor};
pub use op::{Logged, Op, Phase, Schedule};
pub use options::{Options, TorchVersion, ZeroReduction};
pub use replay::{Log, LogOptions, parse_log};
pub use schedule::{NOT_MODELLED, Strategy, not_modelled, schedule};
pub use volume::{SizeClass, StepVolume, Summary, Tally, bus_bytes, effective_busbw_gbps, size_bytes};
pub use zero::ipg_buckets as zero_buckets;
