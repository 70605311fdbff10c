//! The GPU side, through cudarc's safe driver API: which GPU a rank uses, its
//! context and stream, device buffers (`sys::DeviceMemory`), host<->device
//! copies, completion polling, timing events (`-I`, `--phase-times`) and
//! CUDA graph capture and replay (`-G`). No `unsafe` here.
//!
//! cudarc loads libcuda lazily and panics when it or one of its symbols is
//! missing, so every entry point first passes `sys::check_cuda_driver`,
//! which turns that into `DeviceError::Driver`.

use std::sync::{Arc, OnceLock};

use cudarc::driver::{CudaContext, CudaEvent, CudaGraph, CudaStream, DriverError};
use thiserror::Error;

pub use super::sys::DeviceMemory;
use super::sys::{self, CudaDriver, DriverMissing};

/// Why a rank has no usable GPU, or a device call failed. One line each.
#[derive(Clone, Debug, Error)]
pub enum DeviceError {
    #[error("{0}")]
    Driver(#[from] DriverMissing),
    #[error(
        "no GPU visible: the CUDA driver {driver} found no device ({reason}){}",
        visible_note()
    )]
    NoGpu { driver: String, reason: String },
    #[error(
        "{local_ranks} ranks share host {host} but only {gpus} GPU{} {} visible{}; start at most one rank per GPU \
         (or give each its own GPU: CUDA_VISIBLE_DEVICES per rank, Slurm's --gpus-per-task=1, or NCCL_TESTS_DEVICE)",
        if *.gpus == 1 { "" } else { "s" },
        if *.gpus == 1 { "is" } else { "are" },
        visible_note()
    )]
    TooManyRanks {
        host: String,
        local_ranks: usize,
        gpus: usize,
    },
    #[error(
        "NCCL_TESTS_DEVICE={value}: {why}; this process sees {gpus} GPU{}{}",
        if *.gpus == 1 { "" } else { "s" },
        visible_note()
    )]
    BadDevice { value: String, why: String, gpus: usize },
    #[error(
        "ranks {first} and {second} on host {host} would share one GPU (PCI {pci}){}; give each rank its own GPU",
        visible_note()
    )]
    SharedGpu {
        host: String,
        first: usize,
        second: usize,
        pci: String,
    },
    #[error("CUDA {what} failed: {text}")]
    Cuda { what: &'static str, text: String },
}

fn visible_note() -> String {
    match std::env::var("CUDA_VISIBLE_DEVICES") {
        Ok(v) => format!(" (CUDA_VISIBLE_DEVICES={v})"),
        Err(_) => String::new(),
    }
}

/// `CUDA_ERROR_OUT_OF_MEMORY (out of memory)` rather than cudarc's Debug.
pub fn driver_text(e: &DriverError) -> String {
    let name = e.error_name().map(|s| s.to_string_lossy().into_owned()).ok();
    let text = e.error_string().map(|s| s.to_string_lossy().into_owned()).ok();
    match (name, text) {
        (Some(n), Some(t)) => format!("{n} ({t})"),
        (Some(n), None) => n,
        _ => format!("CUDA error {}", e.0 as i32),
    }
}

fn cuda(what: &'static str) -> impl Fn(DriverError) -> DeviceError {
    move |e| DeviceError::Cuda {
        what,
        text: driver_text(&e),
    }
}

/// The driver check is done once per process; its result is shared.
fn driver() -> Result<CudaDriver, DeviceError> {
    static DRIVER: OnceLock<Result<CudaDriver, DriverMissing>> = OnceLock::new();
    DRIVER
        .get_or_init(sys::check_cuda_driver)
        .clone()
        .map_err(DeviceError::Driver)
}

/// One visible GPU, for `collbench info`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GpuInfo {
    pub ordinal: usize,
    pub name: String,
    pub total_bytes: usize,
}

/// What the CUDA driver reports, without creating any context.
#[derive(Clone, Debug)]
pub struct CudaInfo {
    pub driver: CudaDriver,
    pub gpus: Vec<GpuInfo>,
}

/// The driver and the GPUs it sees (honouring CUDA_VISIBLE_DEVICES, which
/// the driver applies itself).
pub fn probe() -> Result<CudaInfo, DeviceError> {
    let driver = driver()?;
    let count = visible_gpus(&driver)?;
    let mut gpus = Vec::with_capacity(count);
    for ordinal in 0..count {
        let dev = cudarc::driver::result::device::get(ordinal as i32).map_err(cuda("cuDeviceGet"))?;
        let name = cudarc::driver::result::device::get_name(dev).map_err(cuda("cuDeviceGetName"))?;
        let total_bytes = sys::device_total_mem(dev).map_err(cuda("cuDeviceTotalMem"))?;
        gpus.push(GpuInfo {
            ordinal,
            name,
            total_bytes,
        });
    }
    Ok(CudaInfo { driver, gpus })
}

/// cuInit and cuDeviceGetCount: zero devices, or a driver that cannot
/// initialise (no GPU in the machine, a driver/kernel-module mismatch), is
/// `NoGpu`.
fn visible_gpus(driver: &CudaDriver) -> Result<usize, DeviceError> {
    let no_gpu = |reason: String| DeviceError::NoGpu {
        driver: format!("{} (CUDA {})", driver.library, driver.version_text()),
        reason,
    };
    cudarc::driver::result::init().map_err(|e| no_gpu(driver_text(&e)))?;
    let count = CudaContext::device_count().map_err(|e| no_gpu(driver_text(&e)))?;
    if count <= 0 {
        return Err(no_gpu("cuDeviceGetCount returned 0".into()));
    }
    Ok(count as usize)
}

/// Whether this machine's CUDA driver can capture and replay graphs (`-G`):
/// cudarc resolves those entry points lazily and would panic on a missing
/// one, so they are checked before the first capture.
pub fn graph_support() -> Result<(), String> {
    let driver = driver().map_err(|e| e.to_string())?;
    let missing = sys::missing_driver_symbols(&driver.library, &sys::GRAPH_SYMBOLS);
    if missing.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "-G/--cuda-graph needs CUDA graphs, but the CUDA driver {} (CUDA {}) lacks {}; update the NVIDIA driver or drop -G",
            driver.library,
            driver.version_text(),
            missing.join(", ")
        ))
    }
}

/// The GPU one rank drives: its primary context and one non-blocking stream
/// on which every copy and every NCCL call of this rank is ordered.
pub struct Device {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    /// Re-recorded by `mark`, polled by `is_done`.
    done: CudaEvent,
    /// Timing events for `-I`: one before the first timed iteration and
    /// one after each; created on first use and kept for the run.
    iteration_marks: Vec<CudaEvent>,
    /// Timing events around the phases of hierarchical operations.
    phase_marks: PhaseMarks,
    /// The current point's captured iterations (`-G`).
    graph: Option<CudaGraph>,
    ordinal: usize,
    name: String,
}

/// `--phase-times` on the GPU: four events per hierarchical operation (before
/// its first phase and after each of the three), recorded on the stream
/// between the phases, from a pool that grows outside the timed loop
/// (`reserve`) and is reused point after point.
#[derive(Default)]
struct PhaseMarks {
    sets: Vec<[CudaEvent; 4]>,
    /// Sets recorded since the last `take`.
    used: usize,
}

/// Where a rank sits, for choosing its GPU (`choose_ordinal`).
#[derive(Clone, Debug, PartialEq)]
pub struct Seat<'a> {
    pub host: &'a str,
    pub local_rank: usize,
    pub local_ranks: usize,
    /// This rank's index among the ranks of its process (`-g`), and how
    /// many the process has.
    pub process_index: usize,
    pub process_ranks: usize,
}

/// The visible GPU a rank opens, as nccl-tests chooses it (src/common.cu:
/// `NCCL_TESTS_DEVICE` + the rank's index in its process where the
/// variable is set, else the local rank), with one case more: a process
/// of one rank that sees one GPU takes it, whatever its local rank (one
/// GPU per task: Slurm's `--gpus-per-task=1`, or CUDA_VISIBLE_DEVICES set
/// per rank), where nccl-tests needs NCCL_TESTS_DEVICE=0.
pub fn choose_ordinal(seat: &Seat, gpus: usize, device: Option<&str>) -> Result<usize, DeviceError> {
    if let Some(value) = device {
        let bad = |why: String| DeviceError::BadDevice {
            value: value.to_string(),
            why,
            gpus,
        };
        let first = crate::types::read_c_integer(value)
            .filter(|(v, rest)| rest.trim().is_empty() && *v >= 0)
            .map(|(v, _)| v as usize)
            .ok_or_else(|| bad("not a device number".into()))?;
        let ordinal = first + seat.process_index;
        if ordinal >= gpus {
            return Err(bad(format!(
                "rank {} of this process would take device {ordinal}",
                seat.process_index
            )));
        }
        return Ok(ordinal);
    }
    if gpus == 1 && seat.process_ranks == 1 {
        return Ok(0);
    }
    if seat.local_ranks > gpus {
        return Err(DeviceError::TooManyRanks {
            host: seat.host.to_string(),
            local_ranks: seat.local_ranks,
            gpus,
        });
    }
    Ok(seat.local_rank)
}

impl Device {
    /// Opens the GPU `choose_ordinal` gives this rank (`device`:
    /// NCCL_TESTS_DEVICE).
    pub fn open(seat: &Seat, device: Option<&str>) -> Result<Device, DeviceError> {
        let driver = driver()?;
        let gpus = visible_gpus(&driver)?;
        let ordinal = choose_ordinal(seat, gpus, device)?;
        let ctx = CudaContext::new(ordinal).map_err(cuda("context creation"))?;
        let stream = ctx.new_stream().map_err(cuda("stream creation"))?;
        let done = ctx.new_event(None).map_err(cuda("event creation"))?;
        let name = ctx.name().unwrap_or_else(|_| "unknown GPU".into());
        Ok(Device {
            ctx,
            stream,
            done,
            iteration_marks: Vec::new(),
            phase_marks: PhaseMarks::default(),
            graph: None,
            ordinal,
            name,
        })
    }

    /// The GPU's PCI location (domain, bus, device), which tells two
    /// ordinals of different processes apart: the same location is the
    /// same GPU.
    pub fn pci_location(&self) -> Result<u64, DeviceError> {
        use cudarc::driver::sys::CUdevice_attribute as A;
        let attr = |a| self.ctx.attribute(a).map_err(cuda("cuDeviceGetAttribute"));
        let (domain, bus, dev) = (
            attr(A::CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID)?,
            attr(A::CU_DEVICE_ATTRIBUTE_PCI_BUS_ID)?,
            attr(A::CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID)?,
        );
        Ok(((domain as u32 as u64) << 32) | ((bus as u32 as u64 & 0xffff) << 16) | (dev as u32 as u64 & 0xffff))
    }

    pub fn ordinal(&self) -> usize {
        self.ordinal
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Makes this device's context current on the calling thread (NCCL's
    /// communicator initialisation uses the current device).
    pub fn bind(&self) -> Result<(), DeviceError> {
        self.ctx.bind_to_thread().map_err(cuda("context binding"))
    }

    /// (free, total) device memory in bytes.
    pub fn memory(&self) -> Result<(usize, usize), DeviceError> {
        self.ctx.mem_get_info().map_err(cuda("cuMemGetInfo"))
    }

    /// `bytes` of zeroed device memory on this device's stream; from
    /// ncclMemAlloc when `nccl` is given (`DeviceMemory::alloc`).
    pub fn alloc(&self, bytes: usize, nccl: Option<&Arc<super::sys::Api>>) -> Result<DeviceMemory, DeviceError> {
        DeviceMemory::alloc(&self.stream, bytes, nccl).map_err(|e| DeviceError::Cuda {
            what: "memory allocation",
            text: format!("{e} for {bytes} bytes"),
        })
    }

    /// Copies `host` into `memory` at byte `offset`.
    pub fn upload(memory: &mut DeviceMemory, offset: usize, host: &[u8]) -> Result<(), DeviceError> {
        match memory.upload(offset, host) {
            Some(result) => result.map_err(cuda("host-to-device copy")),
            None => Err(DeviceError::Cuda {
                what: "host-to-device copy",
                text: "range beyond the device buffer".into(),
            }),
        }
    }

    /// Copies from `memory` at byte `offset` into `host`.
    pub fn download(memory: &DeviceMemory, offset: usize, host: &mut [u8]) -> Result<(), DeviceError> {
        match memory.download(offset, host) {
            Some(result) => result.map_err(cuda("device-to-host copy")),
            None => Err(DeviceError::Cuda {
                what: "device-to-host copy",
                text: "range beyond the device buffer".into(),
            }),
        }
    }

    /// Prepares timing `iters` iterations on the stream (`-I`): creates the
    /// `iters + 1` events that are still missing, before the barrier and
    /// outside the timed loop, which must not allocate. Records none: the
    /// first is recorded after the barrier (`mark_iteration(0)`).
    pub fn start_marks(&mut self, iters: usize) -> Result<(), DeviceError> {
        let timing = Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT);
        while self.iteration_marks.len() < iters + 1 {
            let event = self.ctx.new_event(timing).map_err(cuda("event creation"))?;
            self.iteration_marks.push(event);
        }
        Ok(())
    }

    /// Records mark `i` on the stream: 0 before the first timed iteration,
    /// `i` after iteration `i - 1`.
    pub fn mark_iteration(&self, i: usize) -> Result<(), DeviceError> {
        let event = self.iteration_marks.get(i).ok_or_else(|| DeviceError::Cuda {
            what: "event record",
            text: format!("iteration {i} beyond the {} timing events", self.iteration_marks.len()),
        })?;
        event.record(&self.stream).map_err(cuda("event record"))
    }

    /// Seconds of each of the first `iters` marked iterations, once the
    /// stream has passed them: the time between consecutive events.
    pub fn marked_times(&self, iters: usize) -> Result<Vec<f64>, DeviceError> {
        let marks = self.iteration_marks.get(..iters + 1).ok_or_else(|| DeviceError::Cuda {
            what: "event timing",
            text: format!("{iters} iterations but {} timing events", self.iteration_marks.len()),
        })?;
        marks
            .windows(2)
            .map(|w| {
                w[0].elapsed_ms(&w[1])
                    .map(|ms| f64::from(ms) * 1e-3)
                    .map_err(cuda("event timing"))
            })
            .collect()
    }

    /// Makes room for the phase events of `ops` more hierarchical
    /// operations, so that none is created inside the timed loop.
    pub fn reserve_phase_marks(&mut self, ops: usize) -> Result<(), DeviceError> {
        let want = self.phase_marks.used + ops;
        while self.phase_marks.sets.len() < want {
            let set = self.phase_event_set()?;
            self.phase_marks.sets.push(set);
        }
        Ok(())
    }

    fn phase_event_set(&self) -> Result<[CudaEvent; 4], DeviceError> {
        let timing = Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT);
        let event = || self.ctx.new_event(timing).map_err(cuda("event creation"));
        Ok([event()?, event()?, event()?, event()?])
    }

    /// Records phase boundary `boundary` of the current hierarchical
    /// operation on the stream: 0 before its first phase (which starts a new
    /// operation), `k` after phase `k` (1 to 3).
    pub fn mark_phase(&mut self, boundary: usize) -> Result<(), DeviceError> {
        if boundary == 0 {
            if self.phase_marks.used == self.phase_marks.sets.len() {
                let set = self.phase_event_set()?;
                self.phase_marks.sets.push(set);
            }
            self.phase_marks.used += 1;
        }
        let set = self
            .phase_marks
            .used
            .checked_sub(1)
            .and_then(|i| self.phase_marks.sets.get(i))
            .ok_or_else(|| DeviceError::Cuda {
                what: "event record",
                text: "a phase boundary before the operation's start".into(),
            })?;
        let event = set.get(boundary).ok_or_else(|| DeviceError::Cuda {
            what: "event record",
            text: format!("phase boundary {boundary} of 0..=3"),
        })?;
        event.record(&self.stream).map_err(cuda("event record"))
    }

    /// Seconds spent in each phase by the operations marked since the last
    /// call, summed (waits for them to finish); resets the marks.
    pub fn take_phase_times(&mut self) -> Result<[f64; 3], DeviceError> {
        let used = std::mem::take(&mut self.phase_marks.used);
        let mut sums = [0.0; 3];
        for set in &self.phase_marks.sets[..used] {
            for (phase, sum) in sums.iter_mut().enumerate() {
                let ms = set[phase].elapsed_ms(&set[phase + 1]).map_err(cuda("event timing"))?;
                *sum += f64::from(ms) * 1e-3;
            }
        }
        Ok(sums)
    }

    /// Starts capturing everything enqueued on the stream into a CUDA graph
    /// (`-G`). Thread-local mode: with `-g`, the other ranks' threads keep
    /// working on their own streams meanwhile. The previous graph is
    /// released first.
    pub fn begin_capture(&mut self) -> Result<(), DeviceError> {
        self.graph = None;
        let mode = cudarc::driver::sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
        self.stream.begin_capture(mode).map_err(cuda("stream capture"))
    }

    /// Ends the capture, instantiates the graph and uploads it to the GPU,
    /// so that its first replay costs no more than the others.
    pub fn end_capture(&mut self) -> Result<(), DeviceError> {
        let flags = cudarc::driver::sys::CUgraphInstantiate_flags(0);
        let graph = self
            .stream
            .end_capture(flags)
            .map_err(cuda("stream capture"))?
            .ok_or_else(|| DeviceError::Cuda {
                what: "stream capture",
                text: "nothing was captured".into(),
            })?;
        graph.upload().map_err(cuda("graph upload"))?;
        self.graph = Some(graph);
        Ok(())
    }

    /// Launches the captured graph `times` times, back to back.
    pub fn replay(&self, times: u32) -> Result<(), DeviceError> {
        let graph = self.graph.as_ref().ok_or_else(|| DeviceError::Cuda {
            what: "graph launch",
            text: "no graph was captured".into(),
        })?;
        for _ in 0..times {
            graph.launch().map_err(cuda("graph launch"))?;
        }
        Ok(())
    }

    /// Releases the graph, and with it what NCCL keeps for the calls it
    /// captured: before any communicator is destroyed.
    pub fn release_graph(&mut self) {
        self.graph = None;
    }

    /// Marks the end of everything enqueued so far on the stream.
    pub fn mark(&self) -> Result<(), DeviceError> {
        self.done.record(&self.stream).map_err(cuda("event record"))
    }

    /// Whether the work before the last `mark` has finished.
    pub fn is_done(&self) -> Result<bool, DeviceError> {
        self.done.try_is_complete().map_err(cuda("event query"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seat(local_rank: usize, local_ranks: usize, process_index: usize, process_ranks: usize) -> Seat<'static> {
        Seat {
            host: "h",
            local_rank,
            local_ranks,
            process_index,
            process_ranks,
        }
    }

    #[test]
    fn each_rank_takes_its_local_rank_or_the_one_gpu_it_sees() {
        // one rank per GPU, all visible: the local rank
        assert_eq!(choose_ordinal(&seat(3, 8, 0, 1), 8, None).unwrap(), 3);
        // one GPU per task: local rank 3 sees one GPU, takes it
        assert_eq!(choose_ordinal(&seat(3, 8, 0, 1), 1, None).unwrap(), 0);
        // -g 4 in one process that sees one GPU: too many ranks
        let e = choose_ordinal(&seat(1, 4, 1, 4), 1, None).unwrap_err().to_string();
        assert!(
            e.contains("4 ranks share host h but only 1 GPU is visible") && e.contains("--gpus-per-task=1"),
            "{e}"
        );
        assert!(choose_ordinal(&seat(5, 8, 0, 1), 4, None).is_err());
    }

    #[test]
    fn nccl_tests_device_is_the_first_device_of_the_process() {
        assert_eq!(choose_ordinal(&seat(3, 8, 0, 1), 8, Some("2")).unwrap(), 2);
        assert_eq!(choose_ordinal(&seat(1, 2, 1, 2), 4, Some("2")).unwrap(), 3);
        assert_eq!(choose_ordinal(&seat(0, 1, 0, 1), 2, Some("0x1")).unwrap(), 1);
        for (value, needle) in [
            ("4", "would take device 4"),
            ("x", "not a device number"),
            ("-1", "not a device number"),
        ] {
            let e = choose_ordinal(&seat(0, 1, 0, 1), 4, Some(value))
                .unwrap_err()
                .to_string();
            assert!(
                e.starts_with(&format!("NCCL_TESTS_DEVICE={value}: ")) && e.contains(needle),
                "{e}"
            );
        }
    }
}
