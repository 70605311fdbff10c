//! Which algorithm NCCL ran, on the nccl backend (`--algo-record`,
//! docs/algorithms.md): from collbench's profiler plugin (`profiler`), or
//! from the TUNING lines rank 0 writes to NCCL's private log, one per
//! collective it schedules (`nccl_log::message::tuning` reads them); each
//! point takes what was recorded since the last one. `Recorder` is the one
//! interface: `take(&call)`.
//!
//! The log file is opened before `ncclCommInitRank` and kept open, so
//! that its lines are read even where its name goes (a user's clean-up of
//! the temporary folder); NCCL keeps writing to the file it opened. Only rank 0
//! reads (NCCL prints the line on a communicator's rank 0), and only lines
//! its own device printed (`-g` ranks share one process and one log).
//! Nothing is guessed: a point whose lines are missing, or name a kernel
//! outside NCCL's algorithms, is `unknown`.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use super::profiler::{self, Library, PROFILER_SINCE, Plugin};
use crate::backend::Call;
use crate::collective::Collective;
use crate::nccl_log::message::{Tuning, tuning};
use crate::nccl_log::{Level, lines};
use crate::types::{
    AlgoChoice, AlgoRecord, AlgoRecording, AlgoSetup, AlgoSource, LOG_WORDS, NcclVersion, PLUGIN_WORDS, ProfilerEnv,
};

/// The first release whose rank 0 prints a TUNING line per collective
/// (src/enqueue.cc: commented out up to 2.19).
const TUNING_SINCE: NcclVersion = NcclVersion::new(2, 20, 0);

/// NCCL's name of a collective on its TUNING lines (`ncclFuncToString`);
/// `None` for those NCCL runs as sends and receives, which it does not tune.
fn nccl_function(c: Collective) -> Option<&'static str> {
    Some(match c {
        Collective::AllReduce => "AllReduce",
        Collective::AllGather => "AllGather",
        Collective::ReduceScatter => "ReduceScatter",
        Collective::Broadcast => "Broadcast",
        Collective::Reduce => "Reduce",
        _ => return None,
    })
}

/// Whether NCCL_DEBUG_SUBSYS `value` lets TUNING through, as NCCL reads
/// it: a comma list, `ALL`, or `^` before a list to turn those off.
fn lets_tuning(value: &str) -> bool {
    let (invert, list) = match value.strip_prefix('^') {
        Some(rest) => (true, rest),
        None => (false, value),
    };
    let listed = list
        .split(',')
        .any(|s| s.trim().eq_ignore_ascii_case("TUNING") || s.trim().eq_ignore_ascii_case("ALL"));
    listed != invert
}

/// NCCL's private log, read on from where the last read stopped (whole
/// lines only).
#[derive(Debug)]
struct LogTail {
    file: File,
    offset: u64,
}

impl LogTail {
    /// Opens `path`, creating it where NCCL has not yet (NCCL opens it
    /// with "w" later: the same file, emptied).
    fn open(path: &Path) -> std::io::Result<LogTail> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(path)?;
        Ok(LogTail { file, offset: 0 })
    }

    /// The whole lines written since the last call. NCCL empties the file
    /// once when it opens it: an offset past the end starts again at 0.
    fn read_new(&mut self) -> String {
        let len = self.file.metadata().map_or(0, |m| m.len());
        if len < self.offset {
            self.offset = 0;
        }
        let mut bytes = Vec::new();
        if self.file.seek(SeekFrom::Start(self.offset)).is_err() || self.file.read_to_end(&mut bytes).is_err() {
            return String::new();
        }
        let whole = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        self.offset += whole as u64;
        String::from_utf8_lossy(&bytes[..whole]).into_owned()
    }
}

/// What rank 0's TUNING lines say, from NCCL's private log.
#[derive(Debug)]
struct TuningLog {
    /// Rank 0's open log, where the lines can be read.
    tail: Option<LogTail>,
    /// This rank's CUDA device, which NCCL prints on its lines.
    device: u32,
}

/// What neither source records.
const P2P_UNKNOWN: &str =
    "sendrecv, alltoall, gather and scatter are sends and receives that NCCL does not tune: unknown";

impl TuningLog {
    /// Before `ncclCommInitRank`; why the lines cannot be read otherwise.
    fn new(
        log: &Result<PathBuf, String>,
        version: NcclVersion,
        rank: usize,
        device: usize,
        subsys: Option<&str>,
    ) -> Result<TuningLog, String> {
        if version < TUNING_SINCE {
            return Err(format!("NCCL {version} prints no TUNING line (2.20 and later do)"));
        }
        let path = log.as_ref().map_err(Clone::clone)?;
        if let Some(value) = subsys.filter(|v| !lets_tuning(v)) {
            return Err(format!(
                "NCCL_DEBUG_SUBSYS={value} was set before the run and leaves TUNING out; add TUNING to it"
            ));
        }
        let tail = match (rank, LogTail::open(path)) {
            (0, Ok(tail)) => Some(tail),
            (0, Err(e)) => return Err(format!("cannot open NCCL's log {}: {e}", path.display())),
            _ => None,
        };
        Ok(TuningLog {
            tail,
            device: device as u32,
        })
    }

    /// What `call`'s launches since the last call used, by rank 0's lines
    /// of this rank's device and of the call's function (before 2.23 the
    /// lines name none); `unknown` on other ranks, where a line is missing
    /// or where one names no algorithm of NCCL_ALGO's.
    fn take(&mut self, call: &Call) -> AlgoRecord {
        let Some(tail) = &mut self.tail else {
            return AlgoRecord::unknown();
        };
        let text = tail.read_new();
        let Some(func) = nccl_function(call.collective) else {
            return AlgoRecord::unknown();
        };
        let mut choices = Vec::new();
        for line in lines(&text).filter_map(|l| l.nccl) {
            if line.level != Level::Info || line.origin.dev != Some(self.device) {
                continue;
            }
            match tuning(line.message) {
                Some(Tuning::Chosen {
                    func: named,
                    algo,
                    proto,
                    nchannels,
                    ..
                }) if named.as_deref().is_none_or(|n| n == func) => choices.push(AlgoChoice {
                    algo,
                    proto,
                    nchannels,
                    calls: 1,
                }),
                Some(Tuning::Special { func: named, .. }) if named == func => return AlgoRecord::unknown(),
                Some(Tuning::Unreadable(_)) => return AlgoRecord::unknown(),
                _ => {}
            }
        }
        AlgoRecord::of(AlgoSource::Log, choices)
    }
}

/// Where this rank's choices come from.
#[derive(Debug)]
enum How {
    Plugin(Plugin),
    Log(TuningLog),
    Unknown,
}

/// How this rank learns NCCL's choices (`take`), and what the header says
/// of it.
#[derive(Debug)]
pub(super) struct Recorder {
    how: How,
    /// The header's note: where the choices come from, or why they
    /// cannot be recorded and how to get them.
    note: String,
    /// The plugin's path, for the note once NCCL loaded it.
    plugin_path: Option<PathBuf>,
    /// NCCL's log, where its INIT line says the plugin loaded.
    log: Option<PathBuf>,
}

impl Recorder {
    /// Before `ncclCommInitRank`. `setup`: the run's choice, NCCL's
    /// private log and NCCL_PROFILER_PLUGIN; `subsys`: this process's
    /// NCCL_DEBUG_SUBSYS.
    pub(super) fn new(
        setup: &AlgoSetup,
        version: NcclVersion,
        rank: usize,
        device: usize,
        subsys: Option<&str>,
    ) -> Recorder {
        let log = || TuningLog::new(&setup.log, version, rank, device, subsys);
        let recorder = |how: How, note: String| Recorder {
            how,
            note,
            plugin_path: None,
            log: setup.log.as_ref().ok().cloned(),
        };
        let plugin = match setup.recording {
            AlgoRecording::Log | AlgoRecording::Off => Err(String::new()),
            AlgoRecording::Plugin | AlgoRecording::Auto => plugin_before_init(setup, version),
        };
        match (plugin, setup.recording) {
            (Ok((p, path)), _) => Recorder {
                plugin_path: Some(path),
                ..recorder(How::Plugin(p), String::new())
            },
            (Err(why), AlgoRecording::Plugin) => recorder(
                How::Unknown,
                format!("algorithm not recorded: {why}; --algo-record log reads NCCL's TUNING lines instead"),
            ),
            (Err(why), _) => {
                let not_plugin = if why.is_empty() {
                    String::new()
                } else {
                    format!("{why}; ")
                };
                match log() {
                    Ok(l) => recorder(
                        How::Log(l),
                        format!(
                            "{not_plugin}{LOG_WORDS} (one line per collective, written inside the timed loop); {P2P_UNKNOWN}"
                        ),
                    ),
                    Err(no_log) => recorder(How::Unknown, format!("{not_plugin}algorithm not recorded: {no_log}")),
                }
            }
        }
    }

    /// Before `ncclCommInitRank`, where the run records (`setup`); reads
    /// this process's NCCL_DEBUG_SUBSYS.
    pub(super) fn before_init(
        setup: Option<&AlgoSetup>,
        version: NcclVersion,
        rank: usize,
        device: &super::Device,
    ) -> Option<Recorder> {
        let subsys = std::env::var("NCCL_DEBUG_SUBSYS").ok();
        setup.map(|s| Recorder::new(s, version, rank, device.ordinal(), subsys.as_deref()))
    }

    /// After `ncclCommInitRank`: whether NCCL initialised the plugin for
    /// this communicator (else nothing is recorded, and the note says so).
    pub(super) fn after_init(&mut self) {
        let How::Plugin(plugin) = &mut self.how else {
            return;
        };
        let path = self
            .plugin_path
            .as_deref()
            .map_or(String::new(), |p| p.display().to_string());
        if !plugin.bind() {
            self.how = How::Unknown;
            self.note = format!(
                "algorithm not recorded: NCCL did not initialise the profiler plugin {path} for this communicator \
                 (its INIT lines say why); --algo-record log reads NCCL's TUNING lines instead"
            );
            return;
        }
        let said = self
            .log
            .as_deref()
            .and_then(|p| std::fs::read_to_string(p).ok())
            .and_then(|text| loaded_line(&text))
            .map_or(String::new(), |line| format!(", NCCL: \"{line}\""));
        self.note = format!("{PLUGIN_WORDS} ({path}{said}), each rank's own collectives; {P2P_UNKNOWN}");
    }

    pub(super) fn note(&self) -> &str {
        &self.note
    }

    /// What `call`'s launches since the last call used.
    pub(super) fn take(&mut self, call: &Call) -> AlgoRecord {
        match &mut self.how {
            How::Plugin(p) => p.take(call),
            How::Log(l) => l.take(call),
            How::Unknown => AlgoRecord::unknown(),
        }
    }
}

/// The plugin, opened before the communicator is made, and its path; or
/// why it cannot record: the release, the user's own plugin, a plugin
/// that cannot load.
fn plugin_before_init(setup: &AlgoSetup, version: NcclVersion) -> Result<(Plugin, PathBuf), String> {
    if version < PROFILER_SINCE {
        return Err(format!(
            "NCCL {version} has no profiler plugin interface ({PROFILER_SINCE} and later)"
        ));
    }
    match &setup.plugin {
        ProfilerEnv::Ours(path) => Library::open(path).map(|lib| (Plugin::before_init(lib), path.clone())),
        ProfilerEnv::User(value) => Err(format!(
            "NCCL_PROFILER_PLUGIN={value} was set before the run: NCCL loads one profiler plugin, that one, so \
             collbench cannot record with its own (unset it to record with collbench's)"
        )),
        ProfilerEnv::Unset => Err(profiler::locate(&|v| std::env::var(v).ok())
            .and_then(|p| Library::open(&p).map(|_| p))
            .err()
            .unwrap_or_else(|| "NCCL_PROFILER_PLUGIN was not set for this run".into())),
    }
}

/// NCCL's INIT line saying it loaded a profiler plugin (2.24 on; 2.23
/// says nothing on success), from `text` of its log.
fn loaded_line(text: &str) -> Option<String> {
    lines(text).filter_map(|l| l.nccl).find_map(|l| {
        let m = l.message.trim();
        (m.starts_with("PROFILER/Plugin: loaded") || m.starts_with("PROFILER/Plugin: Loaded")).then(|| m.to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_subsys_lets_tuning_through_as_nccl_reads_it() {
        for (value, lets) in [
            ("INIT,ENV,GRAPH,TUNING", true),
            ("ALL", true),
            ("tuning", true),
            ("INIT,ENV", false),
            ("^INIT", true),
            ("^TUNING,INIT", false),
            ("^ALL", false),
        ] {
            assert_eq!(lets_tuning(value), lets, "{value}");
        }
    }

    fn log_setup(path: &Path) -> AlgoSetup {
        AlgoSetup {
            recording: AlgoRecording::Log,
            log: Ok(path.to_path_buf()),
            plugin: ProfilerEnv::Unset,
        }
    }

    fn call(collective: Collective) -> Call {
        Call {
            collective,
            hierarchy: crate::topology::Hierarchy::Flat,
            dtype: crate::types::DType::Float,
            op: None,
            shape: collective.spec().shape(16, 2),
            at: crate::collective::Layout::new(2, 0, 0),
            group: None,
        }
    }

    /// Each point takes the lines written since the last: its device's,
    /// of its function (2.23 on) or of none (before), with the launcher's
    /// and NCCL's prefixes around them; a kernel NCCL_ALGO does not name
    /// makes the point unknown, not a guess.
    #[test]
    fn a_point_takes_its_own_devices_lines_of_its_function() {
        use crate::types::{Algo, Chosen, Proto};
        let dir = std::env::temp_dir().join(format!("collbench-algo-take-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("log");
        let v = NcclVersion::new(2, 24, 3);
        let mut rec = Recorder::new(&log_setup(&path), v, 0, 1, Some("INIT,ENV,GRAPH,TUNING"));
        assert!(
            rec.note()
                .starts_with("algorithm and protocol from rank 0's TUNING lines")
        );
        let write = |text: &str| {
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
            f.write_all(text.as_bytes()).unwrap();
        };
        let line = |dev: u32, msg: &str| format!("[0]:node1:41:41 [{dev}] NCCL INFO {msg}\n");
        write(
            &[
                line(1, "AllReduce: 64 Bytes -> Algo TREE proto LL channel{Lo..Hi}={0..0}"),
                line(1, "AllReduce: 64 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..1}"),
                // another rank's thread (`-g`), another function, another subsystem
                line(
                    0,
                    "AllReduce: 64 Bytes -> Algo NVLS proto SIMPLE channel{Lo..Hi}={0..0}",
                ),
                line(
                    1,
                    "Broadcast: 64 Bytes -> Algo RING proto SIMPLE channel{Lo..Hi}={0..0}",
                ),
                line(1, "Channel 00/0 : 0[1] -> 1[0] via P2P/CUMEM"),
                "half a line: AllReduce: 64 Bytes -> Algo PAT".into(),
            ]
            .concat(),
        );
        let r = rec.take(&call(Collective::AllReduce));
        assert_eq!(
            (r.source, r.algo(), r.proto()),
            (AlgoSource::Log, Some(Chosen::Mixed), Some(Chosen::One(Proto::Ll)))
        );
        assert_eq!(r.calls(), 2);
        assert_eq!(r.nchannels(), None, "1 and 2 channels");
        // the half line is the next point's once whole; a p2p call drains
        write(" proto SIMPLE channel{Lo..Hi}={0..3}\n");
        assert_eq!(rec.take(&call(Collective::SendRecv)), AlgoRecord::unknown());
        write(&line(
            1,
            "AllReduce: 64 Bytes -> Algo PAT proto SIMPLE channel{Lo..Hi}={0..3}",
        ));
        let r = rec.take(&call(Collective::AllReduce));
        assert_eq!((r.algo(), r.nchannels()), (Some(Chosen::One(Algo::Pat)), Some(4)));
        write(
            &[
                line(1, "AllReduce: 64 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..0}"),
                line(
                    1,
                    "AllReduce [Symmetric]: 64 Bytes -> Kernel AllReduce_AGxLL_R nchannels 4 nthreads 512",
                ),
            ]
            .concat(),
        );
        assert_eq!(rec.take(&call(Collective::AllReduce)), AlgoRecord::unknown());
        // another rank records nothing; a release before 2.20 and a
        // NCCL_DEBUG_SUBSYS without TUNING say why
        let mut other = Recorder::new(&log_setup(&path), v, 1, 1, None);
        assert_eq!(other.take(&call(Collective::AllReduce)), AlgoRecord::unknown());
        let old = Recorder::new(&log_setup(&path), NcclVersion::new(2, 19, 3), 0, 1, None);
        assert!(
            old.note().contains("NCCL 2.19.3 prints no TUNING line"),
            "{}",
            old.note()
        );
        let subsys = Recorder::new(&log_setup(&path), v, 0, 1, Some("INIT"));
        assert!(
            subsys.note().contains("NCCL_DEBUG_SUBSYS=INIT was set"),
            "{}",
            subsys.note()
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_log_is_read_on_in_whole_lines_after_its_name_is_removed() {
        let dir = std::env::temp_dir().join(format!("collbench-algo-tail-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("log");
        let mut tail = LogTail::open(&path).unwrap();
        let mut writer = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        use std::io::Write;
        write!(writer, "one\ntw").unwrap();
        assert_eq!(tail.read_new(), "one\n");
        writeln!(writer, "o").unwrap();
        assert_eq!(tail.read_new(), "two\n");
        assert_eq!(tail.read_new(), "");
        let _ = std::fs::remove_dir(&dir);
    }
}
