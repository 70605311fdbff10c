//! What launchers and shells add to a tool's output: line prefixes
//! (`mpirun --tag-output`'s `[1,0]<stdout>:`, `srun --label`'s ` 0: `,
//! MPICH/Intel MPI's `[0] `, with any wrapper text before a tag) and echoed
//! command lines (`$ mpirun -np 4 ./build/all_reduce_perf -g 2`), from
//! which the process count can be read.
//!
//! It knows nothing of any tool's table: parsers call `content` on every
//! line and `command` on lines that name their binary.

/// Launchers, each with the options that give the number of processes it
/// starts (none: it starts an unknown number, as jsrun's resource sets).
const LAUNCHERS: [(&str, &[&str]); 11] = [
    ("mpirun", MPIRUN_NP),
    // MVAPICH's launchers
    ("mpirun_rsh", &["-np", "-n"]),
    ("mpispawn", &["-np", "-n"]),
    ("mpiexec", MPIRUN_NP),
    ("mpiexec.hydra", MPIRUN_NP),
    ("orterun", MPIRUN_NP),
    ("prterun", MPIRUN_NP),
    ("srun", &["-n", "--ntasks"]),
    ("aprun", &["-n"]),
    ("jsrun", &[]),
    ("ibrun", &[]),
];

/// Open MPI's, MPICH's and Intel MPI's spellings of the process count.
const MPIRUN_NP: &[&str] = &["-np", "--np", "-n", "--n", "-c"];

/// The text of `line` without a launcher's prefix.
pub(crate) fn content(line: &str) -> &str {
    // `[1,0]<stdout>:` (Open MPI --tag-output), with whatever a wrapper
    // (pdsh, a CI runner's timestamps) put before it.
    for tag in ["]<stdout>:", "]<stderr>:"] {
        if let Some(end) = line.find(tag) {
            let is_rank_tag = line[..end].rfind('[').is_some_and(|open| {
                let inside = &line[open + 1..end];
                inside
                    .split(',')
                    .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
            });
            if is_rank_tag {
                return &line[end + tag.len()..];
            }
        }
    }
    let t = line.trim_start();
    // `srun --label`: the task number and ": " (` 0: `, `12: `).
    if let Some((label, rest)) = t.split_once(": ")
        && is_digits(label)
    {
        return rest;
    }
    // MPICH `-prepend-rank`, Intel MPI `-l`: `[0] `.
    if let Some((label, rest)) = t.strip_prefix('[').and_then(|r| r.split_once("] "))
        && is_digits(label)
    {
        return rest;
    }
    line
}

fn is_digits(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

/// An echoed command line that starts a benchmark binary.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Command {
    /// The binary's name as written (`./build/all_reduce_perf`).
    pub binary: String,
    /// Processes: 1 when the binary is started directly, the launcher's
    /// `-np`/`-n`/`--ntasks` when one starts it, None when a launcher
    /// starts it without saying how many.
    pub processes: Option<u64>,
    /// nccl-tests' `-t`/`--nthreads` and `-g`/`--ngpus` (default 1).
    pub threads: u64,
    pub gpus: u64,
    /// nccl-tests' `-d`/`--datatype` and `-o`/`--op`, when given.
    pub dtype: Option<String>,
    pub op: Option<String>,
}

impl Command {
    /// Ranks the command starts: processes x threads x GPUs.
    pub fn ranks(&self) -> Option<u64> {
        self.processes
            .and_then(|p| p.checked_mul(self.threads)?.checked_mul(self.gpus))
    }
}

/// The command in `line` whose binary satisfies `is_binary` (a word's
/// last path component), or None when the line names no such binary.
pub(crate) fn command(line: &str, is_binary: impl Fn(&str) -> bool) -> Option<Command> {
    let words: Vec<&str> = line.split_whitespace().collect();
    let at = words.iter().position(|w| is_binary(basename(w)))?;
    let (before, after) = (&words[..at], &words[at + 1..]);
    let launcher = before
        .iter()
        .enumerate()
        .rev()
        .find_map(|(i, w)| LAUNCHERS.iter().find(|l| l.0 == basename(w)).map(|l| (i, l.1)));
    let processes = match launcher {
        Some((i, names)) => option(&before[i + 1..], names),
        // a launcher this list lacks, or one a shell variable names
        // (`$SUBMIT_CMD -n 4 osu_allreduce`): its count option in front of
        // the binary, else an unknown count, never 1
        None => option(before, ANY_NP).or_else(|| (!before.iter().any(|w| is_launcher_word(w))).then_some(1)),
    };
    Some(Command {
        binary: words[at].to_string(),
        processes,
        threads: option(after, &["-t", "--nthreads"]).unwrap_or(1),
        gpus: option(after, &["-g", "--ngpus"]).unwrap_or(1),
        dtype: option_text(after, &["-d", "--datatype"], is_word).map(str::to_string),
        op: option_text(after, &["-o", "--op"], is_word).map(str::to_string),
    })
}

/// Counts any launcher takes: an unknown launcher's `-n 4` before the
/// binary is its process count.
const ANY_NP: &[&str] = &["-np", "--np", "-n", "--ntasks"];

/// A word before the binary that starts it: a shell variable (`$CMD`,
/// `${CMD}`), not the prompt's `$` or an assignment's value.
fn is_launcher_word(word: &str) -> bool {
    let w = word.trim_matches(|c| c == '"' || c == '\'');
    w.len() > 1 && w.starts_with('$') && !w.contains('=')
}

fn basename(word: &str) -> &str {
    let word = word.trim_matches(|c| c == '"' || c == '\'' || c == '`');
    word.rsplit('/').next().unwrap_or(word)
}

/// The number after any of `names` (`-g 2`, `-g2`, `--ngpus=2`).
fn option(words: &[&str], names: &[&str]) -> Option<u64> {
    option_text(words, names, is_digits).and_then(|v| v.parse().ok())
}

/// The value after any of `names` (`-d float`, `-dfloat`, `--datatype=float`)
/// that `accept` takes; the last one wins, as in getopt.
fn option_text<'a>(words: &[&'a str], names: &[&str], accept: fn(&str) -> bool) -> Option<&'a str> {
    let mut found = None;
    for (i, w) in words.iter().enumerate() {
        for name in names {
            let value = if *w == *name {
                words.get(i + 1).copied()
            } else if let Some(v) = w.strip_prefix(name).and_then(|v| v.strip_prefix('=')) {
                Some(v)
            } else if name.len() == 2 {
                // getopt's glued short form: -g2, -dhalf
                w.strip_prefix(name)
            } else {
                None
            };
            if let Some(v) = value.filter(|v| accept(v)) {
                found = Some(v);
            }
        }
    }
    found
}

/// A word value: `float`, `sum` (not another option).
fn is_word(s: &str) -> bool {
    s.bytes().next().is_some_and(|b| b.is_ascii_alphabetic())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn perf(w: &str) -> bool {
        w.ends_with("_perf") || w.ends_with("_perf_mpi")
    }

    #[test]
    fn launcher_prefixes_are_removed_with_any_wrapper_before_a_tag() {
        let row = "           8             2     float";
        for prefix in [
            "[1,0]<stdout>:",
            "[1,12]<stderr>:",
            "node7: [1,0]<stdout>:",
            "2025-01-02T03:04:05.678Z [1,0]<stdout>:",
            " 0: ",
            "12: ",
            "[0] ",
        ] {
            assert_eq!(content(&format!("{prefix}{row}")), row, "{prefix:?}");
        }
        // not prefixes: a host name, a bracketed word, an NCCL INFO line
        for line in [
            "node1:123:456 [0] NCCL INFO Bootstrap : Using eth0",
            "[warn] something: else",
            "#  Rank  0 Group  0 Pid 1 on h device 0",
        ] {
            assert_eq!(content(line), line);
        }
    }

    #[test]
    fn echoed_commands_give_processes_threads_and_gpus() {
        let c = command(
            "root@box:~/nccl-tests# ./build/all_reduce_perf -b 8 -e 1024M -f 2 -g2",
            perf,
        )
        .unwrap();
        assert_eq!((c.binary.as_str(), c.ranks()), ("./build/all_reduce_perf", Some(2)));
        let c = command(
            "Running: CUDA_VISIBLE_DEVICES=1,2 LD_PRELOAD=/x/libnccl.so.2 ./build/all_gather_perf -b 8 -g 12",
            perf,
        )
        .unwrap();
        assert_eq!(c.ranks(), Some(12));
        let c = command(
            "$ mpirun --mca btl ^openib -np 16 -N 8 all_reduce_perf_mpi -t 2 -g 1",
            perf,
        )
        .unwrap();
        assert_eq!((c.processes, c.ranks()), (Some(16), Some(32)));
        let c = command(
            "srun --ntasks=8 --mpi=pmix /opt/nccl-tests/build/broadcast_perf -g 1 -d half -o max",
            perf,
        )
        .unwrap();
        assert_eq!(c.ranks(), Some(8));
        assert_eq!((c.dtype.as_deref(), c.op.as_deref()), (Some("half"), Some("max")));
        let c = command("mpirun --hostfile hosts ./all_reduce_perf", perf).unwrap();
        assert_eq!(c.ranks(), None, "a launcher without a count says nothing");
        let osu = |w: &str| w.starts_with("osu_");
        // a launcher named by a shell variable: its -n (a JSC course's srun wrapper)
        let c = command(
            "[kraus1@jwlogin22 03-Collectives]$ OMPI_MCA_coll_ucc_enable=0 $JSC_SUBMIT_CMD -n 4 osu_allreduce -M 16777216 -d cuda",
            osu,
        )
        .unwrap();
        assert_eq!(c.processes, Some(4));
        let c = command("$LAUNCH osu_allreduce -d cuda", osu).unwrap();
        assert_eq!(
            c.processes, None,
            "an unknown launcher without a count is unknown, not 1"
        );
        // MVAPICH's mpirun_rsh
        let c = command(
            "[gulhane.2@a100-01 libexec]$ $MV2_HOME/bin/mpirun_rsh --export-all -np 2 a100-01 a100-01 MV2_USE_CUDA=1 osu-micro-benchmarks/mpi/collective/osu_allreduce -d",
            osu,
        )
        .unwrap();
        assert_eq!(c.processes, Some(2));
        let c = command("user@host:~$ ./osu_allreduce", osu).unwrap();
        assert_eq!(c.processes, Some(1), "started directly after a prompt");
        assert_eq!(command("# Collective test starting: all_reduce", perf), None);
    }
}
