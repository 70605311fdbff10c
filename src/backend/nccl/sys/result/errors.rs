//! The errors of the binding (`LoadError`, `NcclError`, `CopyError`,
//! `AllocError`), each a one-line message that says what to do, and the
//! count of ranks in the process that NCCL's last-error text needs.

use std::ffi::c_int;
use std::path::PathBuf;

use cudarc::driver::DriverError;
use thiserror::Error;

use super::super::raw::Attempt;

/// Why no NCCL library could be used. Every message is one line.
#[derive(Debug, Error)]
pub enum LoadError {
    #[error(
        "NCCL library not found (tried {}); install NCCL (e.g. `pip install nvidia-nccl-cu12`) \
         or point --nccl-lib or COLLBENCH_NCCL_LIB at libnccl.so.2",
        list(.tried)
    )]
    NotFound { tried: Vec<Attempt> },
    #[error(
        "{} is not a usable NCCL library ({why}); point --nccl-lib or COLLBENCH_NCCL_LIB at libnccl.so.2",
        .path.display()
    )]
    Unusable { path: PathBuf, why: String },
    #[error("NCCL library {}: {source}", .path.display())]
    Call { path: PathBuf, source: NcclError },
}

fn list(tried: &[Attempt]) -> String {
    if tried.is_empty() {
        return "nothing".into();
    }
    tried.iter().map(Attempt::to_string).collect::<Vec<_>>().join("; ")
}

/// A failed NCCL call: which call, NCCL's code and text, and NCCL's last
/// error message where the library keeps one.
#[derive(Clone, Debug, Error)]
#[error("{call} failed: {text} (ncclResult_t {code}){}", if .detail.is_empty() { String::new() } else { format!(": {}", .detail) })]
pub struct NcclError {
    pub call: &'static str,
    pub code: c_int,
    pub text: String,
    pub detail: String,
}

impl NcclError {
    /// A refusal found before calling NCCL (counts, ranges).
    pub(in crate::backend::nccl::sys) fn usage(call: &'static str, what: &str) -> NcclError {
        NcclError {
            call,
            code: 4, // ncclInvalidArgument
            text: what.into(),
            detail: String::new(),
        }
    }
}

/// A failed device-to-device copy.
#[derive(Debug, Error)]
pub enum CopyError {
    #[error("{0}")]
    Range(NcclError),
    #[error("cuMemcpyDtoDAsync failed: {}", crate::backend::nccl::device::driver_text(.0))]
    Cuda(DriverError),
}

/// A failed device allocation.
#[derive(Debug, Error)]
pub enum AllocError {
    #[error("{}", crate::backend::nccl::device::driver_text(.0))]
    Cuda(DriverError),
    #[error("{0}")]
    Nccl(NcclError),
}

impl From<DriverError> for AllocError {
    fn from(e: DriverError) -> AllocError {
        AllocError::Cuda(e)
    }
}

/// Ranks of this process that hold, or are making, a communicator
/// (`RankInProcess`).
static RANKS_IN_PROCESS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
/// The most ranks any of them said the process runs (`RankInProcess::enter`).
static PROCESS_RANKS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// One rank of this process, counted while it lives: with more than one,
/// NCCL's process-wide last-error text cannot be told apart by rank.
#[derive(Debug)]
pub struct RankInProcess(());

impl RankInProcess {
    /// A rank of a process that runs `ranks` ranks in all (`-g`): entered
    /// before its communicator's initialisation, so that an error there
    /// already knows whether another rank's text may be NCCL's last one,
    /// however the ranks' threads interleave.
    pub fn enter(ranks: usize) -> RankInProcess {
        PROCESS_RANKS.fetch_max(ranks, std::sync::atomic::Ordering::SeqCst);
        RANKS_IN_PROCESS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        RankInProcess(())
    }

    /// Whether NCCL's last-error text may be another rank's.
    pub(in crate::backend::nccl::sys) fn shared() -> bool {
        let order = std::sync::atomic::Ordering::SeqCst;
        RANKS_IN_PROCESS.load(order).max(PROCESS_RANKS.load(order)) > 1
    }
}

impl Drop for RankInProcess {
    fn drop(&mut self) {
        RANKS_IN_PROCESS.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}
