//! The pre-flight of a launch: every rank meets over the control plane,
//! with a deadline, before NCCL starts (docs/launch.md), so that a broken
//! launcher or control plane is told apart from a failing NCCL; and a
//! warning when the ranks see different NCCL_* variables.
//!
//! The store's start is its own meeting with a deadline
//! (`world::store`); MPI's is guarded here.

#[cfg(feature = "mpi")]
use std::sync::mpsc;
#[cfg(feature = "mpi")]
use std::time::Duration;

use super::Session;
#[cfg(feature = "mpi")]
use super::is_first_rank;
#[cfg(feature = "mpi")]
use crate::error::exit;
use crate::error::say;
use crate::world::World;

/// The MPI pre-flight's timer: MPI_Init and a first barrier must end
/// within `--timeout`, else rank 0 says the launcher or control plane is
/// broken and the rank exits with 5 (the launcher ends the others).
#[cfg(feature = "mpi")]
pub(super) struct Preflight {
    done: Option<mpsc::Sender<()>>,
}

#[cfg(feature = "mpi")]
impl Preflight {
    pub(super) fn arm(limit: Option<Duration>, how: &str) -> Preflight {
        let Some(limit) = limit else {
            return Preflight { done: None };
        };
        let (done, wait) = mpsc::channel::<()>();
        let how = match how {
            "" => "a process alone".to_string(),
            how => format!("launched by {how}"),
        };
        let spawned = std::thread::Builder::new()
            .name("collbench-preflight".into())
            .spawn(move || {
                if let Err(mpsc::RecvTimeoutError::Timeout) = wait.recv_timeout(limit) {
                    if is_first_rank() {
                        say(&format!(
                            "collbench: the launcher or control plane is broken: MPI did not start on every rank \
                             within --timeout {} s (MPI_Init and a barrier of all ranks, {how}); NCCL \
                             was not started; an MPI hello world under the same launcher should hang the same way",
                            limit.as_secs_f64()
                        ));
                    }
                    std::process::exit(i32::from(exit::TIMEOUT));
                }
            });
        Preflight {
            done: spawned.ok().map(|_| done),
        }
    }

    /// Every rank met: the timer stops.
    pub(super) fn passed(self) {
        if let Some(done) = self.done {
            let _ = done.send(());
        }
    }
}

/// Variables that differ between ranks by design: collbench's private
/// NCCL log is one file per process; nccl-tests' NCCL_TESTS_DEVICE (which
/// NCCL does not read) is the device of each.
const PER_PROCESS: [&str; 2] = ["NCCL_DEBUG_FILE", "NCCL_TESTS_DEVICE"];

/// The longest NCCL environment compared in full.
const NCCL_ENV_BYTES: usize = 16 * 1024;

impl<W: World> Session<'_, W> {
    /// Rank 0 warns when the ranks see different NCCL_* variables: NCCL
    /// reads them in each process, so ranks that differ may choose
    /// different transports or algorithms, or hang. One exchange of a hash;
    /// the variables themselves only when the hashes differ.
    pub(super) fn warn_on_nccl_environment(&self) {
        let world = self.world;
        let mine = nccl_environment(std::env::vars());
        let hashes = world.all_gather_u64s(&[crate::engine::digest::fnv1a(mine.as_bytes())]);
        if hashes.iter().all(|&h| h == hashes[0]) {
            return;
        }
        let all = world.all_gather_text(&mine, NCCL_ENV_BYTES);
        if world.rank() == 0
            && let Some(what) = differences(&all)
        {
            say(&format!(
                "collbench: warning: the ranks see different NCCL_* variables, so NCCL may behave differently on \
                 them: {what}"
            ));
        }
    }
}

/// This process's NCCL_* variables, sorted, one `NAME=value` per line.
fn nccl_environment(vars: impl Iterator<Item = (String, String)>) -> String {
    let mut nccl: Vec<String> = vars
        .filter(|(k, _)| k.starts_with("NCCL_") && !PER_PROCESS.contains(&k.as_str()))
        .map(|(k, v)| format!("{k}={v}\n"))
        .collect();
    nccl.sort();
    nccl.concat()
}

/// "NCCL_IB_HCA is mlx5_0 on ranks 0-1 and unset on ranks 2-3; ...", for
/// the first three variables that differ; `None` when none does.
fn differences(per_rank: &[String]) -> Option<String> {
    let parsed: Vec<Vec<(&str, &str)>> = per_rank
        .iter()
        .map(|text| text.lines().filter_map(|l| l.split_once('=')).collect())
        .collect();
    let mut names: Vec<&str> = parsed.iter().flatten().map(|(k, _)| *k).collect();
    names.sort_unstable();
    names.dedup();
    let value = |rank: usize, name: &str| parsed[rank].iter().find(|(k, _)| *k == name).map(|(_, v)| *v);
    let mut said = Vec::new();
    let mut differing = 0;
    for name in names {
        let mut groups: Vec<(Option<&str>, Vec<usize>)> = Vec::new();
        for rank in 0..parsed.len() {
            let v = value(rank, name);
            match groups.iter_mut().find(|(g, _)| *g == v) {
                Some((_, ranks)) => ranks.push(rank),
                None => groups.push((v, vec![rank])),
            }
        }
        if groups.len() < 2 {
            continue;
        }
        differing += 1;
        if said.len() < 3 {
            let parts: Vec<String> = groups
                .iter()
                .map(|(v, ranks)| {
                    let v = v.map_or("unset".to_string(), |v| format!("'{v}'"));
                    format!("{v} on {}", crate::world::rank_list(ranks))
                })
                .collect();
            said.push(format!("{name} is {}", parts.join(" and ")));
        }
    }
    match differing {
        0 => None,
        n if n > said.len() => Some(format!("{} (and {} more)", said.join("; "), n - said.len())),
        _ => Some(said.join("; ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_nccl_variables_count_and_collbenchs_own_log_does_not() {
        let vars = [
            ("PATH", "/bin"),
            ("NCCL_DEBUG_FILE", "/tmp/x.%h"),
            ("NCCL_IB_HCA", "mlx5_0"),
            ("NCCL_ALGO", "Ring"),
        ];
        let text = nccl_environment(vars.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        assert_eq!(text, "NCCL_ALGO=Ring\nNCCL_IB_HCA=mlx5_0\n");
    }

    #[test]
    fn differing_variables_are_named_with_the_ranks_of_each_value() {
        let same = "NCCL_ALGO=Ring\n".to_string();
        assert_eq!(differences(&[same.clone(), same.clone()]), None);
        let ranks = vec![
            "NCCL_IB_HCA=mlx5_0\n".to_string(),
            "NCCL_IB_HCA=mlx5_0\n".to_string(),
            String::new(),
            "NCCL_IB_HCA=mlx5_1\n".to_string(),
        ];
        assert_eq!(
            differences(&ranks).as_deref(),
            Some("NCCL_IB_HCA is 'mlx5_0' on ranks 0-1 and unset on rank 2 and 'mlx5_1' on rank 3")
        );
        let many: Vec<String> = (0..2)
            .map(|r| (0..5).map(|i| format!("NCCL_V{i}={r}\n")).collect())
            .collect();
        assert!(differences(&many).unwrap().ends_with("(and 2 more)"));
    }
}
