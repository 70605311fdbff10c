//! Control plane: who the ranks are, where they run, and the few
//! cross-rank operations the engine needs (barrier, agreement, time and
//! error-count reduction, abort).
//!
//! The data plane never goes through here; backends own their own
//! communicators. A run has exactly one `World`: MPI's (`mpi`), the TCP
//! store's for launches without MPI (`store`, found by `launch`), or one
//! thread per rank (`threads`).

pub mod launch;
#[cfg(feature = "mpi")]
pub mod mpi;
pub mod store;
pub mod threads;

use std::sync::{Mutex, PoisonError};

use crate::error::Error;
use crate::topology::Nodes;

/// One rank's identity, for the run header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RankInfo {
    pub rank: usize,
    pub host: String,
    pub pid: u32,
}

pub trait World {
    fn rank(&self) -> usize;
    fn size(&self) -> usize;
    /// This rank's hostname.
    fn host(&self) -> &str;
    /// Every rank's host and pid, in rank order (same on every rank).
    fn ranks(&self) -> &[RankInfo];
    /// Name and version of the control-plane library.
    fn library_version(&self) -> String;

    fn barrier(&self);
    /// Sum over ranks, known to every rank.
    fn sum_u64(&self, value: u64) -> u64;
    /// Maximum over ranks, known to every rank.
    fn max_u64(&self, value: u64) -> u64;
    /// Minimum over ranks, known to every rank.
    fn min_u64(&self, value: u64) -> u64;
    /// Every rank's value, on rank 0 only (in rank order).
    fn gather_f64(&self, value: f64) -> Option<Vec<f64>>;
    /// The element-wise maximum over ranks of `values` (the same length on
    /// every rank), on rank 0 only.
    fn max_f64s_to_root(&self, values: &[f64]) -> Option<Vec<f64>>;
    /// Rank 0's bytes, on every rank.
    fn broadcast_bytes(&self, bytes: &[u8]) -> Vec<u8>;
    /// Every rank's `values` (the same length on every rank), rank-major,
    /// on every rank.
    fn all_gather_u64s(&self, values: &[u64]) -> Vec<u64>;
    /// Every rank's text, cut to `max_bytes`, on every rank.
    fn all_gather_text(&self, text: &str, max_bytes: usize) -> Vec<String>;
    /// Every rank's text, cut to `max_bytes`, on rank 0 only (in rank
    /// order): each rank sends what it has, not `max_bytes`.
    fn gather_text_to_root(&self, text: &str, max_bytes: usize) -> Option<Vec<String>>;
    /// Ends every rank of the job now with `code`.
    fn abort(&self, code: u8) -> !;
    /// The hosts: ranks that share memory form a node.
    fn nodes(&self) -> &Nodes;

    /// Makes every rank agree on a step that may fail on some of them.
    /// Returns `Ok` on every rank only if it succeeded on every rank.
    /// Otherwise the lowest failing rank prints its error (one line, with
    /// rank and host when it is not rank 0) and every rank gets the highest
    /// failing exit code, plus its own result where it succeeded, so that
    /// it can undo what it did (remove files it created).
    fn agree<T>(&self, local: Result<T, Error>) -> Result<T, Disagreed<T>>
    where
        Self: Sized,
    {
        let code = match &local {
            Ok(_) => 0,
            Err(e) => u64::from(e.exit_code()),
        };
        let worst = self.max_u64(code);
        match local {
            Ok(value) if worst == 0 => Ok(value),
            Ok(value) => {
                self.min_u64(u64::MAX);
                Err(Disagreed {
                    code: worst as u8,
                    local: Some(value),
                })
            }
            Err(e) => {
                if self.min_u64(self.rank() as u64) == self.rank() as u64 {
                    crate::error::say(&self.error_line(&e));
                }
                Err(Disagreed {
                    code: worst as u8,
                    local: None,
                })
            }
        }
    }

    /// `collbench: <msg>` on rank 0, `collbench: rank R on HOST: <msg>`
    /// elsewhere.
    fn error_line(&self, e: &Error) -> String {
        if self.rank() == 0 {
            format!("collbench: {e}")
        } else {
            format!("collbench: rank {} on {}: {e}", self.rank(), self.host())
        }
    }
}

/// `text` cut to at most `max_bytes`, at a character boundary.
pub(crate) fn cut_text(text: &str, max_bytes: usize) -> &str {
    let mut cut = text.len().min(max_bytes);
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    &text[..cut]
}

/// Every rank agreed that a step failed somewhere; the error was printed.
#[derive(Debug)]
pub struct Disagreed<T> {
    /// Exit code for every rank.
    pub code: u8,
    /// This rank's own result, where the step succeeded here.
    pub local: Option<T>,
}

/// How this process was started, as `--launcher auto` reads it before
/// any control plane starts: read once (`app::main` asks first), since an
/// MPI singleton's `MPI_Init` sets `OMPI_COMM_WORLD_RANK` in this very
/// process, which would make a process alone look launched (and lose its
/// progress bar). A launch this build refuses (an MPI launch of a build
/// without MPI) still has its ranks, so that rank 0 alone says so.
fn launched() -> Option<(usize, usize)> {
    static LAUNCHED: std::sync::OnceLock<Option<(usize, usize)>> = std::sync::OnceLock::new();
    *LAUNCHED.get_or_init(|| {
        let env = |name: &str| std::env::var(name).ok();
        match launch::detect(launch::LauncherChoice::Auto, &env, cfg!(feature = "mpi")) {
            Ok(found) => found.rank_and_size(&env),
            Err(_) => launch::Launch::Mpi { how: String::new() }.rank_and_size(&env),
        }
    })
}

/// The number of processes a launcher started, where it says (before any
/// MPI call).
pub fn launcher_size() -> Option<usize> {
    launched().map(|(_, size)| size)
}

/// This process's rank as the launcher announced it, before any MPI call:
/// used to let only rank 0 print errors found before the control plane
/// starts. `None` when not launched by a known launcher.
pub fn launcher_rank() -> Option<usize> {
    launched().map(|(rank, _)| rank)
}

/// The control plane is ending the job because a rank failed (the store's
/// rank 0 signals itself so that its reports complete): the failing rank's
/// line says why, and a stop signal that follows is no news.
static JOB_ENDING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

pub(crate) fn mark_job_ending() {
    JOB_ENDING.store(true, std::sync::atomic::Ordering::SeqCst);
}

/// Whether the control plane is ending the job for a failed rank.
pub fn job_ending() -> bool {
    JOB_ENDING.load(std::sync::atomic::Ordering::SeqCst)
}

/// What the running control plane does when this process ends early (the
/// watchdog, a panic): the store tells the other ranks.
type ExitHook = Box<dyn Fn(u8) + Send>;

static EXIT_HOOK: Mutex<Option<ExitHook>> = Mutex::new(None);

pub(crate) fn set_exit_hook(hook: Option<ExitHook>) {
    *EXIT_HOOK.lock().unwrap_or_else(PoisonError::into_inner) = hook;
}

/// Says to the other ranks that this process is about to exit with
/// `code` outside the control plane's own paths (watchdog, panic), so
/// that the job ends with this rank's line only. MPI needs nothing: its
/// launcher ends the job when one rank exits.
pub fn announce_exit(code: u8) {
    if let Ok(hook) = EXIT_HOOK.try_lock()
        && let Some(hook) = hook.as_ref()
    {
        hook(code);
    }
}

crate::types::vocabulary! {
    /// The program that starts the ranks of a suite's launches.
    pub enum Launcher: "launcher", AnyCase {
        /// `srun` inside a Slurm allocation (SLURM_JOB_ID set), else `mpirun`.
        Auto = "auto",
        Mpirun = "mpirun", Srun = "srun",
    }
}

impl Launcher {
    /// `auto` resolved: srun when `slurm_job` (SLURM_JOB_ID) is set.
    pub fn resolve(self, slurm_job: bool) -> Launcher {
        match self {
            Launcher::Auto if slurm_job => Launcher::Srun,
            Launcher::Auto => Launcher::Mpirun,
            other => other,
        }
    }

    pub fn program(self) -> &'static str {
        match self {
            Launcher::Srun => "srun",
            _ => "mpirun",
        }
    }
}

use crate::topology::hostname;

/// "rank 3", "ranks 0-1, 7": ranks (ascending) for a message.
pub fn rank_list(ranks: &[usize]) -> String {
    store::ranges("rank", ranks)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_launcher_is_srun_inside_slurm_and_mpirun_elsewhere() {
        assert_eq!(Launcher::Auto.resolve(true), Launcher::Srun);
        assert_eq!(Launcher::Auto.resolve(false), Launcher::Mpirun);
        assert_eq!(Launcher::Mpirun.resolve(true), Launcher::Mpirun);
        assert_eq!(Launcher::parse("SRUN"), Some(Launcher::Srun));
        assert_eq!(Launcher::parse("aprun"), None);
    }
}
