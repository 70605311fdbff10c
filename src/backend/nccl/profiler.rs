//! collbench's profiler plugin on the nccl backend (docs/algorithms.md,
//! "The profiler plugin"): where it is (`locate`), what the run's
//! environment asks of NCCL before it starts (`env_request`: the plugin in
//! NCCL_PROFILER_PLUGIN, TUNING lines for the fallback), and the records
//! the plugin kept of this rank's communicator (`Plugin`), read through the
//! plugin's `collbench_profiler_*` calls on the handle collbench opens:
//! NCCL's dlopen of the same path returns the same library, so what NCCL's
//! calls recorded is what collbench reads.
//!
//! This rank's communicators are those whose context the plugin's `init`
//! made on this rank's thread after the mark taken before
//! `ncclCommInitRank` (NCCL runs a blocking communicator's creation on its
//! caller's thread).
//!
//! An FFI module (the plugin's C calls through libloading): it opts in to
//! `unsafe`, each block with its SAFETY line.
#![allow(unsafe_code)]

use std::path::{Path, PathBuf};

use crate::types::{Algo, AlgoChoice, AlgoRecord, AlgoRecording, AlgoSource, NcclVersion, Proto};

/// The plugin's file name, beside the collbench binary.
pub const FILE: &str = "libcollbench_profiler.so";
/// Overrides where the plugin is.
pub const OVERRIDE: &str = "COLLBENCH_PROFILER_PLUGIN";
/// The first release with a profiler plugin interface (2.23.4 reads
/// `ncclProfiler_v1`; src/misc/profiler.cc).
pub const PROFILER_SINCE: NcclVersion = NcclVersion::new(2, 23, 0);
/// The version of the plugin's query interface this collbench reads.
const QUERY_ABI: u32 = 1;
/// NCCL's codes for a record's name the plugin did not know.
const OTHER: u8 = 255;

/// One record, as the plugin's `CollbenchRecord` lays it out
/// (profiler/src/query.rs; 40 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Record {
    pub comm_hash: u64,
    pub seq: u64,
    pub count: u64,
    pub rank: i32,
    pub func: u8,
    pub datatype: u8,
    pub algo: u8,
    pub proto: u8,
    pub nchannels: u8,
    pub nwarps: u8,
    pub pad: [u8; 2],
}

type Abi = unsafe extern "C" fn() -> u32;
type Generation = unsafe extern "C" fn() -> u64;
type Find = unsafe extern "C" fn(u64) -> u64;
type Read = unsafe extern "C" fn(u64, *mut Record, usize, *mut u64) -> i64;

/// The plugin's absolute path: COLLBENCH_PROFILER_PLUGIN, else beside this
/// binary; or why there is none.
pub fn locate(env: &dyn Fn(&str) -> Option<String>) -> Result<PathBuf, String> {
    let path = match env(OVERRIDE) {
        Some(p) => PathBuf::from(p),
        None => {
            let exe = std::env::current_exe().map_err(|e| format!("cannot find collbench's own path ({e})"))?;
            exe.with_file_name(FILE)
        }
    };
    if !path.is_file() {
        return Err(format!(
            "no profiler plugin at {} (cargo build puts {FILE} beside the binary; {OVERRIDE} names another)",
            path.display()
        ));
    }
    std::fs::canonicalize(&path).map_err(|e| format!("{}: {e}", path.display()))
}

/// The library's calls, while it is open.
#[derive(Debug)]
pub struct Library {
    _lib: libloading::Library,
    generation: Generation,
    find: Find,
    read: Read,
}

impl Library {
    /// Opens the plugin at `path` and checks its query interface.
    pub fn open(path: &Path) -> Result<Library, String> {
        let cannot = |e: &dyn std::fmt::Display| format!("cannot load the profiler plugin {}: {e}", path.display());
        // SAFETY: the library is collbench's plugin (or what the user named
        // in COLLBENCH_PROFILER_PLUGIN); its initialisers are Rust's std.
        let lib = unsafe { libloading::Library::new(path) }.map_err(|e| cannot(&e))?;
        // SAFETY: each symbol is looked up with the type the plugin's
        // query.rs declares; the pointers are used while `_lib` is open.
        let (abi, generation, find, read) = unsafe {
            let abi = *lib.get::<Abi>(b"collbench_profiler_abi\0").map_err(|e| cannot(&e))?;
            let generation = *lib
                .get::<Generation>(b"collbench_profiler_generation\0")
                .map_err(|e| cannot(&e))?;
            let find = *lib.get::<Find>(b"collbench_profiler_find\0").map_err(|e| cannot(&e))?;
            let read = *lib.get::<Read>(b"collbench_profiler_read\0").map_err(|e| cannot(&e))?;
            (abi, generation, find, read)
        };
        // SAFETY: a C call without arguments.
        let version = unsafe { abi() };
        if version != QUERY_ABI {
            return Err(cannot(&format!(
                "its query interface is version {version}, this collbench reads {QUERY_ABI} (a plugin of another build)"
            )));
        }
        Ok(Library {
            _lib: lib,
            generation,
            find,
            read,
        })
    }

    /// How many communicators the plugin has seen made.
    pub fn generation(&self) -> u64 {
        // SAFETY: a C call without arguments, on the open library.
        unsafe { (self.generation)() }
    }

    /// The context of the communicator this thread made after `mark`.
    pub fn find(&self, mark: u64) -> Option<u64> {
        // SAFETY: a C call with a number, on the open library.
        let id = unsafe { (self.find)(mark) };
        (id != 0).then_some(id)
    }

    /// Every record of context `id` since the last read, and how many
    /// were dropped; `None` where the context is gone.
    pub fn read(&self, id: u64) -> Option<(Vec<Record>, u64)> {
        const CHUNK: usize = 4096;
        let mut all = Vec::new();
        let mut dropped_total = 0;
        loop {
            let mut buf = vec![Record::default(); CHUNK];
            let mut dropped = 0u64;
            // SAFETY: `buf` holds CHUNK records of the plugin's layout and
            // `dropped` one u64, both writable for the call.
            let n = unsafe { (self.read)(id, buf.as_mut_ptr(), CHUNK, &mut dropped) };
            let n = usize::try_from(n).ok()?;
            dropped_total += dropped;
            all.extend_from_slice(&buf[..n.min(CHUNK)]);
            if n < CHUNK {
                return Some((all, dropped_total));
            }
        }
    }
}

/// What the environment must hold before NCCL starts, for `recording`:
/// TUNING among NCCL's log subsystems, and the plugin to set
/// NCCL_PROFILER_PLUGIN to (where the user set none). `version`: the
/// release found (`None`: not known yet); `plugin`: `locate`'s answer,
/// with the library loaded once to check it.
pub fn env_request(
    recording: AlgoRecording,
    version: Option<NcclVersion>,
    user_plugin: bool,
    plugin: Result<PathBuf, String>,
) -> (bool, Option<PathBuf>) {
    let usable = || plugin.ok().filter(|p| !user_plugin && Library::open(p).is_ok());
    match recording {
        AlgoRecording::Off => (false, None),
        AlgoRecording::Log => (true, None),
        AlgoRecording::Plugin => (false, usable()),
        AlgoRecording::Auto => match version {
            Some(v) if v < PROFILER_SINCE => (true, None),
            known => {
                let plugin = usable();
                (plugin.is_none() || known.is_none(), plugin)
            }
        },
    }
}

/// The plugin's records of one rank's communicators: the world's, and
/// every one this rank's thread made after it (sendrecv's, a pinned
/// sweep's, the hierarchical modes'), each a context of the plugin's.
#[derive(Debug)]
pub struct Plugin {
    lib: Library,
    /// The plugin's generation before the world communicator was made.
    mark: u64,
}

/// NCCL's `ncclFunc_t` code of a collective collbench runs as one NCCL
/// collective; `None` for those NCCL runs as sends and receives.
fn func_code(c: crate::collective::Collective) -> Option<u8> {
    use crate::collective::Collective as C;
    Some(match c {
        C::Broadcast => 0,
        C::Reduce => 1,
        C::AllGather => 2,
        C::ReduceScatter => 3,
        C::AllReduce => 4,
        _ => return None,
    })
}

impl Plugin {
    /// Before the communicator is made.
    pub fn before_init(lib: Library) -> Plugin {
        let mark = lib.generation();
        Plugin { lib, mark }
    }

    /// After it was made: whether NCCL initialised the plugin for it.
    pub fn bind(&mut self) -> bool {
        self.lib.find(self.mark).is_some()
    }

    /// The live contexts of the communicators this thread made since the
    /// mark, oldest first.
    fn contexts(&self) -> Vec<u64> {
        std::iter::successors(self.lib.find(self.mark), |&id| self.lib.find(id)).collect()
    }

    /// The choices of this rank's launches of `call`'s function since the
    /// last take, on whichever of its communicators ran them (a point runs
    /// on one); `unknown` where a record names what NCCL_ALGO does not (a
    /// kernel outside NCCL's algorithms), or some were dropped.
    pub fn take(&mut self, call: &crate::backend::Call) -> AlgoRecord {
        let mut records = Vec::new();
        let mut dropped = 0;
        for id in self.contexts() {
            if let Some((r, d)) = self.lib.read(id) {
                records.extend(r);
                dropped += d;
            }
        }
        let Some(func) = func_code(call.collective) else {
            return AlgoRecord::unknown();
        };
        if dropped > 0 {
            return AlgoRecord::unknown();
        }
        let mut choices = Vec::new();
        for r in records.iter().filter(|r| r.func == func) {
            let (Some(algo), Some(proto)) = (
                (r.algo != OTHER).then(|| Algo::from_code(i64::from(r.algo))).flatten(),
                (r.proto != OTHER)
                    .then(|| Proto::from_code(i64::from(r.proto)))
                    .flatten(),
            ) else {
                return AlgoRecord::unknown();
            };
            choices.push(AlgoChoice {
                algo,
                proto,
                nchannels: Some(u32::from(r.nchannels)),
                calls: 1,
            });
        }
        AlgoRecord::of(AlgoSource::Plugin, choices)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_record_is_the_plugins_forty_bytes() {
        assert_eq!(std::mem::size_of::<Record>(), 40);
        assert_eq!(std::mem::offset_of!(Record, rank), 24);
        assert_eq!(std::mem::offset_of!(Record, nwarps), 33);
    }

    /// Which of the plugin and the TUNING lines each choice asks NCCL for:
    /// `auto` takes the plugin where the release has the interface and it
    /// loads, the log otherwise (and where the release is not known yet).
    #[test]
    fn the_environment_asks_for_the_plugin_or_the_log() {
        let missing = || Err::<PathBuf, String>("none".into());
        let v = |m| Some(NcclVersion::new(2, m, 3));
        assert_eq!(env_request(AlgoRecording::Off, v(30), false, missing()), (false, None));
        assert_eq!(env_request(AlgoRecording::Log, v(30), false, missing()), (true, None));
        assert_eq!(
            env_request(AlgoRecording::Plugin, v(30), false, missing()),
            (false, None)
        );
        assert_eq!(env_request(AlgoRecording::Auto, v(30), false, missing()), (true, None));
        assert_eq!(env_request(AlgoRecording::Auto, v(20), false, missing()), (true, None));
        // a file that is no plugin does not load
        let not_a_plugin = std::env::temp_dir().join(format!("collbench-not-a-plugin-{}.so", std::process::id()));
        std::fs::write(&not_a_plugin, b"not a library").unwrap();
        let got = env_request(AlgoRecording::Auto, v(30), false, Ok(not_a_plugin.clone()));
        assert_eq!(got, (true, None));
        assert!(
            Library::open(&not_a_plugin)
                .unwrap_err()
                .contains("cannot load the profiler plugin")
        );
        let _ = std::fs::remove_file(&not_a_plugin);
    }
}
