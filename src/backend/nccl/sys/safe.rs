//! Safe handles over the NCCL binding, each owning what it releases:
//! `Comm` (a communicator that is destroyed, never leaked, and whose `Drop`
//! cannot panic; split with ncclCommSplit; its buffer registrations,
//! ncclCommRegister's handles and ncclCommWindowRegister's symmetric
//! windows, released before it is destroyed), `DeviceMemory` (one device allocation, plain
//! cuMemAlloc as nccl-tests' cudaMalloc, or ncclMemAlloc from NCCL 2.19,
//! rather than cudarc's stream-ordered pool, whose memory other GPUs of the
//! same process cannot reach without extra pool access rights, and without
//! cudarc's per-use event records in the timed loop), and the launches:
//! `Comm::launch` and `Comm::launch_group` check every pointer range against
//! the device allocation it comes from before handing it to NCCL (and always
//! close a group they opened), and `Buffers::copy` is the checked
//! device-to-device copy of the hierarchical all-reduce's padding.
#![allow(unsafe_code)]
#![warn(clippy::undocumented_unsafe_blocks)]

use std::ffi::{c_int, c_void};
use std::fmt;
use std::sync::Arc;

use cudarc::driver::{CudaStream, DriverError};

use super::launch::{At, Buf, Launch, Op};
use super::raw::{Api, DataType, RawComm, RawConfig, RawStream, RawWindow, UNIQUE_ID_BYTES};
use super::result::{AllocError, CommQuery, CopyError, NcclError};

/// The device buffers one launch may point into, and how far the
/// operation rotates through them: `Send` and `Recv` positions move `shift`
/// elements further (buffer rotation), `Scratch` positions never do.
///
/// The GPU writes `recv` and `scratch` through these shared references:
/// what Rust holds of a `DeviceMemory` (an address and a length) never
/// changes, and Rust code never reads the device bytes behind it directly.
#[derive(Clone, Copy)]
pub struct Buffers<'a> {
    pub send: &'a DeviceMemory,
    pub recv: &'a DeviceMemory,
    pub scratch: &'a DeviceMemory,
    pub shift: usize,
}

/// Each buffer's device address and size in bytes.
type Spans = [(Buf, u64, usize); 3];

impl Buffers<'_> {
    fn spans(&self) -> Spans {
        [
            (Buf::Send, self.send.raw_ptr(), self.send.len_bytes()),
            (Buf::Recv, self.recv.raw_ptr(), self.recv.len_bytes()),
            (Buf::Scratch, self.scratch.raw_ptr(), self.scratch.len_bytes()),
        ]
    }

    /// Every buffer is ordered on one stream, so the calls and copies of
    /// one launch run in the order they are enqueued.
    fn one_stream(&self) -> bool {
        self.send.same_stream(self.recv) && self.send.same_stream(self.scratch)
    }

    /// Enqueues a device-to-device copy of `count` elements of `dtype` from
    /// `from` to `to` on the buffers' stream (the hierarchical all-reduce's
    /// padding); both ranges are checked against their buffers first.
    pub fn copy(&self, from: At, to: At, count: usize, dtype: DataType) -> Result<(), CopyError> {
        if !self.one_stream() {
            return Err(CopyError::Range(NcclError::usage(
                "copy",
                "the buffers are on different streams",
            )));
        }
        let elem = dtype.size_bytes();
        let spans = self.spans();
        let src = locate(&spans, from, count, elem, self.shift).map_err(CopyError::Range)?;
        let dst = locate(&spans, to, count, elem, self.shift).map_err(CopyError::Range)?;
        if count == 0 {
            return Ok(());
        }
        let stream = &self.recv.stream;
        stream.context().bind_to_thread().map_err(CopyError::Cuda)?;
        // SAFETY: `src..src+count*elem` and `dst..dst+count*elem` lie inside
        // live allocations (checked by `locate`) that are freed only after
        // their stream has finished its work (`DeviceMemory::drop`), and the
        // copy is ordered on that stream.
        unsafe { cudarc::driver::result::memcpy_dtod_async(dst, src, count * elem, stream.cu_stream()) }
            .map_err(CopyError::Cuda)
    }
}

/// The device address of `len` elements of `elem` bytes at `at`, checked to
/// lie inside its buffer; `Send` and `Recv` positions move `shift` elements
/// further, `Scratch` positions stay.
fn locate(spans: &Spans, at: At, len: usize, elem: usize, shift: usize) -> Result<u64, NcclError> {
    let (_, base, bytes) = spans
        .iter()
        .copied()
        .find(|b| b.0 == at.buf)
        .ok_or_else(|| NcclError::usage("launch", "no such buffer"))?;
    let shift = if at.buf == Buf::Scratch { 0 } else { shift };
    let offset = at
        .offset
        .checked_add(shift)
        .ok_or_else(|| NcclError::usage("launch", "element range overflows"))?;
    let end = offset
        .checked_add(len)
        .and_then(|e| e.checked_mul(elem))
        .ok_or_else(|| NcclError::usage("launch", "element range overflows"))?;
    if end > bytes {
        return Err(NcclError::usage("launch", "element range beyond its device buffer"));
    }
    Ok(base + (offset * elem) as u64)
}

// ---------------------------------------------------------------------------
// Communicators

/// A communicator. Destroyed when dropped (after releasing its buffer
/// registrations); `Drop` never panics and reports nothing (an error while
/// tearing down is of no use to anyone).
pub struct Comm {
    raw: RawComm,
    api: Arc<Api>,
    nranks: usize,
    scratch: Vec<(Op, [u64; 2], c_int)>,
    /// Buffers registered with this communicator (`-R`): device address
    /// and NCCL's handle or window.
    registered: Vec<(u64, Registered)>,
}

/// What NCCL returned for one registered buffer.
#[derive(Clone, Copy)]
enum Registered {
    /// ncclCommRegister's handle (`-R 1`).
    Handle(*mut c_void),
    /// ncclCommWindowRegister's symmetric window (`-R 2`).
    Window(RawWindow),
    /// ncclCommWindowRegister returned success and no window (`-R 2`
    /// where NCCL has no symmetric memory for this communicator): kept, so
    /// that the buffer is not asked again and nothing is released.
    NoWindow,
}

/// What a communicator holds for one buffer (`-R`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Held {
    /// Not registered with this communicator.
    Nothing,
    /// ncclCommRegister's handle.
    Handle,
    /// A symmetric window.
    Window,
    /// ncclCommWindowRegister was asked and returned no window.
    NoWindow,
}

impl fmt::Debug for Comm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Comm")
            .field("nranks", &self.nranks)
            .finish_non_exhaustive()
    }
}

impl Api {
    /// `ncclCommInitRank` on the calling thread's current CUDA device (the
    /// caller binds its context first). Collective: every rank must call it.
    pub fn init_rank(
        self: &Arc<Self>,
        nranks: usize,
        id: &[u8; UNIQUE_ID_BYTES],
        rank: usize,
    ) -> Result<Comm, NcclError> {
        let raw = self.comm_init(nranks, id, rank)?;
        Ok(Comm::wrap(raw, self, nranks))
    }
}

// Every `unsafe` call below passes `self.raw`, which is live for as long as
// `self` holds it: it is made by `Api::init_rank` or `split`, and released
// only by `abort` (which consumes `self` and nulls the field) or by `Drop`.
impl Comm {
    fn wrap(raw: RawComm, api: &Arc<Api>, nranks: usize) -> Comm {
        Comm {
            raw,
            api: Arc::clone(api),
            nranks,
            scratch: Vec::new(),
            registered: Vec::new(),
        }
    }

    pub fn nranks(&self) -> usize {
        self.nranks
    }

    /// `ncclCommSplit`: the ranks that pass the same `color` get one new
    /// communicator, their ranks ordered by `key`. Collective over this
    /// communicator: every rank calls it, in the same order. The new
    /// communicator inherits this one's configuration.
    pub fn split(&self, color: usize, key: usize) -> Result<Comm, NcclError> {
        self.split_with(color, key, None)
    }

    /// `split`, with `config` instead of this communicator's configuration.
    pub fn split_with(&self, color: usize, key: usize, config: Option<RawConfig>) -> Result<Comm, NcclError> {
        // SAFETY: `self.raw` is live (see the impl comment).
        let new = unsafe { self.api.comm_split(self.raw, color, key, config) }?;
        let mut comm = Comm::wrap(new, &self.api, 0);
        comm.nranks = usize::try_from(comm.count()?).unwrap_or(0);
        Ok(comm)
    }

    /// `ncclCommRegister` of the whole of `memory` (`-R`); registering the
    /// same buffer again does nothing, and an empty buffer is not
    /// registered. The owner of `memory` calls `deregister` before freeing
    /// it; whatever is still registered is released before the
    /// communicator is destroyed.
    pub fn register(&mut self, memory: &DeviceMemory) -> Result<(), NcclError> {
        let address = memory.raw_ptr();
        if memory.len_bytes() == 0 || self.registered.iter().any(|r| r.0 == address) {
            return Ok(());
        }
        // SAFETY: `self.raw` is live; `address..address+len_bytes` is a live
        // device allocation that stays allocated until `deregister` (the
        // owner's duty, above) or until this communicator is destroyed,
        // which releases the handle first.
        let handle = unsafe { self.api.comm_register(self.raw, address, memory.len_bytes()) }?;
        self.registered.push((address, Registered::Handle(handle)));
        Ok(())
    }

    /// `ncclCommWindowRegister` of the whole of `memory` as a symmetric
    /// window (`-R 2`); registering the same buffer again does nothing, and
    /// an empty buffer is not registered. Collective: every rank of this
    /// communicator registers a buffer of the same size, in the same order.
    /// NCCL requires memory from its ncclMemAlloc: other memory is refused
    /// here. Released as `register`'s handles are. Where NCCL returns no
    /// window, that answer is kept (`Held::NoWindow`) and nothing is
    /// released for it.
    pub fn register_window(&mut self, memory: &DeviceMemory) -> Result<(), NcclError> {
        let address = memory.raw_ptr();
        if memory.len_bytes() == 0 || self.registered.iter().any(|r| r.0 == address) {
            return Ok(());
        }
        if !memory.nccl.as_ref().is_some_and(|api| Arc::ptr_eq(api, &self.api)) {
            return Err(NcclError::usage(
                "ncclCommWindowRegister",
                "the buffer does not come from this library's ncclMemAlloc",
            ));
        }
        // SAFETY: `self.raw` is live; `address..address+len_bytes` is a live
        // allocation of this library's ncclMemAlloc (checked above) that
        // stays allocated until `deregister` (the owner's duty) or until
        // this communicator is destroyed, which releases the window first.
        let window = unsafe { self.api.comm_window_register(self.raw, address, memory.len_bytes()) }?;
        let registered = window.map_or(Registered::NoWindow, Registered::Window);
        self.registered.push((address, registered));
        Ok(())
    }

    /// What this communicator holds for `memory`.
    pub fn held(&self, memory: &DeviceMemory) -> Held {
        let address = memory.raw_ptr();
        match self.registered.iter().find(|r| r.0 == address) {
            None => Held::Nothing,
            Some((_, Registered::Handle(_))) => Held::Handle,
            Some((_, Registered::Window(_))) => Held::Window,
            Some((_, Registered::NoWindow)) => Held::NoWindow,
        }
    }

    /// Releases the registration of `memory`, if it has one. A window's
    /// release is collective, as its registration, and its error is
    /// returned; ncclCommDeregister's is ignored (the buffer is about to go).
    pub fn deregister(&mut self, memory: &DeviceMemory) -> Result<(), NcclError> {
        match self.registered.iter().position(|r| r.0 == memory.raw_ptr()) {
            Some(i) => {
                let (_, registered) = self.registered.swap_remove(i);
                self.release(registered)
            }
            None => Ok(()),
        }
    }

    /// Releases one registration that has left `registered`.
    fn release(&self, registered: Registered) -> Result<(), NcclError> {
        match registered {
            Registered::Handle(handle) => {
                // SAFETY: `self.raw` is live and `handle` came from
                // ncclCommRegister on it; it left the list, so it is
                // released exactly once.
                unsafe { self.api.comm_deregister(self.raw, handle) };
                Ok(())
            }
            // SAFETY: `self.raw` is live and `window` came from
            // ncclCommWindowRegister on it; it left the list, so it is
            // released exactly once.
            Registered::Window(window) => unsafe { self.api.comm_window_deregister(self.raw, window) },
            // NCCL made nothing: nothing to release (nccl-tests hands the
            // NULL back to ncclCommWindowDeregister, which returns at once).
            Registered::NoWindow => Ok(()),
        }
    }

    fn query(&self, which: CommQuery) -> Result<i32, NcclError> {
        // SAFETY: `self.raw` is live (see the impl comment).
        unsafe { self.api.comm_query(self.raw, which) }
    }

    /// `ncclCommUserRank`.
    pub fn user_rank(&self) -> Result<i32, NcclError> {
        self.query(CommQuery::UserRank)
    }

    /// `ncclCommCount`.
    pub fn count(&self) -> Result<i32, NcclError> {
        self.query(CommQuery::Count)
    }

    /// `ncclCommCuDevice`.
    pub fn cu_device(&self) -> Result<i32, NcclError> {
        self.query(CommQuery::CuDevice)
    }

    /// `ncclCommGetAsyncError`: `Ok` while the communicator is healthy (or
    /// still working), the error once NCCL has seen one (a peer died, a
    /// network failure, a CUDA error in its kernels).
    pub fn async_error(&self) -> Result<(), NcclError> {
        // SAFETY: `self.raw` is live (see the impl comment).
        unsafe { self.api.comm_async_error(self.raw) }
    }

    /// `ncclCommAbort`: frees the communicator without waiting for peers,
    /// for use after an error (NCCL releases its registrations too).
    pub fn abort(mut self) {
        let raw = std::mem::replace(&mut self.raw, std::ptr::null_mut());
        // SAFETY: `raw` is live; `self.raw` is now null, so Drop does not
        // release it a second time.
        unsafe { self.api.comm_release(raw, true) };
    }

    /// Enqueues `launch` on the stream of the buffers (positions rotated by
    /// `bufs.shift`). Every pointer range is checked against its buffer
    /// first, so NCCL never gets a pointer outside a live allocation.
    pub fn launch(&mut self, launch: &Launch, dtype: DataType, bufs: &Buffers) -> Result<(), NcclError> {
        if !bufs.one_stream() {
            return Err(NcclError::usage("launch", "the buffers are on different streams"));
        }
        let dt = dtype as c_int;
        let stream = bufs.recv.raw_stream();
        // Check and convert everything before enqueuing anything, so that a
        // refusal never leaves a group open or half a launch enqueued.
        // `scratch` keeps its capacity between launches: nothing allocates
        // in the timed loop.
        let mut resolved = std::mem::take(&mut self.scratch);
        let checked = self.resolve(launch, dtype, bufs, &mut resolved);
        if let Err(e) = checked {
            self.scratch = resolved;
            return Err(e);
        }
        if launch.grouped
            && let Err(e) = self.api.group_start()
        {
            self.scratch = resolved;
            return Err(e);
        }
        let mut first_error = Ok(());
        for &(op, [p0, p1], param) in &resolved {
            // SAFETY: `self.raw` is live; `p0` and `p1` were checked by
            // `resolve` to lie inside live allocations with room for every
            // element the call touches, and those are freed only after their
            // stream, `stream`, has finished its work (`DeviceMemory::drop`);
            // `resolve` refused entry points the library lacks.
            let enqueued = unsafe { self.api.enqueue(self.raw, op, p0, p1, param, dt, stream) };
            if let Err(e) = enqueued {
                first_error = Err(e);
                break;
            }
        }
        self.scratch = resolved;
        if launch.grouped {
            // A group that was opened is always closed, even after an error.
            let ended = self.api.group_end();
            first_error?;
            return ended;
        }
        first_error
    }

    /// Every op of `launch` with its two device pointers (checked against
    /// the buffers) and its root or peer, into `resolved`.
    fn resolve(
        &self,
        launch: &Launch,
        dtype: DataType,
        bufs: &Buffers,
        resolved: &mut Vec<(Op, [u64; 2], c_int)>,
    ) -> Result<(), NcclError> {
        let elem = dtype.size_bytes();
        let spans = bufs.spans();
        let int = |v: usize, what: &str| c_int::try_from(v).map_err(|_| NcclError::usage("launch", what));
        resolved.clear();
        for op in &launch.ops {
            let mut ptrs = [0u64; 2];
            for (i, extent) in op.extents(self.nranks).into_iter().enumerate() {
                if let Some((at, len)) = extent {
                    ptrs[i] = locate(&spans, at, len, elem, bufs.shift)?;
                }
            }
            let param = match *op {
                Op::Broadcast { root, .. }
                | Op::Reduce { root, .. }
                | Op::Gather { root, .. }
                | Op::Scatter { root, .. } => int(root, "root out of range")?,
                Op::Send { peer, .. } | Op::Recv { peer, .. } => int(peer, "peer out of range")?,
                _ => 0,
            };
            let missing = match op {
                Op::AlltoAll { .. } if self.api.alltoall.is_none() => Some("ncclAlltoAll"),
                Op::Gather { .. } if self.api.gather.is_none() => Some("ncclGather"),
                Op::Scatter { .. } if self.api.scatter.is_none() => Some("ncclScatter"),
                _ => None,
            };
            if let Some(name) = missing {
                return Err(NcclError::usage(name, "not in this NCCL library"));
            }
            resolved.push((*op, ptrs, param));
        }
        Ok(())
    }

    /// Enqueues `launch` once per shift in `shifts`, all inside one NCCL
    /// group (`-m`, as nccl-tests aggregates): NCCL starts them together.
    /// Groups nest, so a launch that is itself grouped stays correct. The
    /// group that was opened is always closed, even after an error.
    pub fn launch_group(
        &mut self,
        launch: &Launch,
        dtype: DataType,
        bufs: &Buffers,
        shifts: impl Iterator<Item = usize>,
    ) -> Result<(), NcclError> {
        self.api.group_start()?;
        let mut first_error = Ok(());
        for shift in shifts {
            if let Err(e) = self.launch(launch, dtype, &Buffers { shift, ..*bufs }) {
                first_error = Err(e);
                break;
            }
        }
        let ended = self.api.group_end();
        first_error?;
        ended
    }
}

impl Drop for Comm {
    fn drop(&mut self) {
        // ncclCommDestroy waits for outstanding work on this communicator;
        // after a failure the owner calls `abort` instead. Errors are
        // ignored: there is nobody to tell, and Drop must not panic.
        if self.raw.is_null() {
            return; // aborted (which releases the registrations too)
        }
        // In registration order, the same on every rank (a window's
        // release is collective).
        for (_, registered) in std::mem::take(&mut self.registered) {
            let _ = self.release(registered);
        }
        // SAFETY: `self.raw` is live and released exactly once, here.
        unsafe { self.api.comm_release(self.raw, false) };
    }
}

// ---------------------------------------------------------------------------
// Device memory

/// One device allocation, ordered on one stream: every copy into or out of
/// it, and every NCCL call that uses it, goes on that stream.
pub struct DeviceMemory {
    ptr: cudarc::driver::sys::CUdeviceptr,
    len: usize,
    stream: Arc<CudaStream>,
    /// The library whose ncclMemAlloc made it (freed with ncclMemFree);
    /// `None`: cuMemAlloc.
    nccl: Option<Arc<Api>>,
}

impl fmt::Debug for DeviceMemory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeviceMemory")
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}

impl DeviceMemory {
    /// `len` zeroed bytes on the stream's device (at least one byte is
    /// allocated, so that every buffer has a real address).
    ///
    /// With `nccl` (NCCL 2.19 and later, as nccl-tests' AllocateBuffs), the
    /// memory comes from ncclMemAlloc, which NVLS buffer registration (`-R`)
    /// and CUDA graphs of registered buffers need; else from cuMemAlloc, as
    /// nccl-tests' cudaMalloc before 2.19.
    pub fn alloc(stream: &Arc<CudaStream>, len: usize, nccl: Option<&Arc<Api>>) -> Result<DeviceMemory, AllocError> {
        stream.context().bind_to_thread()?;
        let bytes = len.max(1);
        let (ptr, nccl) = match nccl.filter(|api| api.mem_alloc.is_some()) {
            // The stream's context is current: the memory is on its device;
            // it is owned below and freed once, in Drop.
            Some(api) => (api.mem_alloc(bytes).map_err(AllocError::Nccl)?, Some(Arc::clone(api))),
            // SAFETY: cuMemAlloc with the stream's context current; the
            // pointer is owned by the value returned below and freed once,
            // in Drop.
            None => (unsafe { cudarc::driver::result::malloc_sync(bytes) }?, None),
        };
        let memory = DeviceMemory {
            ptr,
            len,
            stream: Arc::clone(stream),
            nccl,
        };
        // SAFETY: `ptr` is a live allocation of `bytes` bytes.
        unsafe { cudarc::driver::result::memset_d8_async(ptr, 0, bytes, stream.cu_stream()) }?;
        stream.synchronize()?;
        Ok(memory)
    }

    pub fn len_bytes(&self) -> usize {
        self.len
    }

    fn raw_ptr(&self) -> u64 {
        self.ptr
    }

    /// The stream this memory is ordered on, as NCCL's `cudaStream_t`.
    fn raw_stream(&self) -> RawStream {
        self.stream.cu_stream().cast()
    }

    fn same_stream(&self, other: &DeviceMemory) -> bool {
        Arc::ptr_eq(&self.stream, &other.stream)
    }

    /// Byte offset `offset` and `n` bytes from it, if inside the buffer.
    fn range(&self, offset: usize, n: usize) -> Option<u64> {
        let end = offset.checked_add(n)?;
        (end <= self.len).then_some(self.ptr + offset as u64)
    }

    /// Copies `host` to byte `offset`, after everything enqueued before;
    /// returns when the copy is done. `None` when the range is outside.
    pub fn upload(&mut self, offset: usize, host: &[u8]) -> Option<Result<(), DriverError>> {
        let dst = self.range(offset, host.len())?;
        if host.is_empty() {
            return Some(Ok(()));
        }
        Some(self.stream.context().bind_to_thread().and_then(|()| {
            // SAFETY: `dst..dst+host.len()` lies inside this live allocation
            // (checked by `range`); `host` stays borrowed until the stream
            // is synchronized below, so the asynchronous copy reads valid
            // memory.
            unsafe { cudarc::driver::result::memcpy_htod_async(dst, host, self.stream.cu_stream()) }?;
            self.stream.synchronize()
        }))
    }

    /// Copies bytes from `offset` into `host`, after everything enqueued
    /// before; returns when the copy is done. `None` when outside.
    pub fn download(&self, offset: usize, host: &mut [u8]) -> Option<Result<(), DriverError>> {
        let src = self.range(offset, host.len())?;
        if host.is_empty() {
            return Some(Ok(()));
        }
        Some(self.stream.context().bind_to_thread().and_then(|()| {
            // SAFETY: `src..src+host.len()` lies inside this live allocation;
            // `host` is exclusively borrowed until the stream is
            // synchronized below, so nothing else sees it being written.
            unsafe { cudarc::driver::result::memcpy_dtoh_async(host, src, self.stream.cu_stream()) }?;
            self.stream.synchronize()
        }))
    }
}

impl Drop for DeviceMemory {
    fn drop(&mut self) {
        // Work still queued may use this memory: wait for it, then free.
        // Errors are ignored (a failed run is being torn down), and Drop
        // must not panic.
        let _ = self.stream.context().bind_to_thread();
        let _ = self.stream.synchronize();
        match &self.nccl {
            Some(api) => {
                // SAFETY: `self.ptr` came from this library's ncclMemAlloc
                // and is freed exactly once.
                unsafe { api.mem_free(self.ptr) };
            }
            None => {
                // SAFETY: `self.ptr` came from cuMemAlloc and is freed exactly once.
                let _ = unsafe { cudarc::driver::result::free_sync(self.ptr) };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_rotate_in_send_and_recv_but_not_in_scratch() {
        // 4-byte elements; send 64 bytes at 0x1000, recv 64 at 0x2000,
        // scratch 16 at 0x3000
        let spans: Spans = [
            (Buf::Send, 0x1000, 64),
            (Buf::Recv, 0x2000, 64),
            (Buf::Scratch, 0x3000, 16),
        ];
        let at = |buf, offset| At { buf, offset };
        assert_eq!(locate(&spans, at(Buf::Send, 2), 4, 4, 0).unwrap(), 0x1008);
        assert_eq!(locate(&spans, at(Buf::Recv, 1), 4, 4, 3).unwrap(), 0x2000 + 16);
        assert_eq!(locate(&spans, at(Buf::Scratch, 1), 3, 4, 3).unwrap(), 0x3004);
        // the last element fits; one more does not
        assert!(locate(&spans, at(Buf::Recv, 12), 4, 4, 0).is_ok());
        assert!(locate(&spans, at(Buf::Recv, 12), 5, 4, 0).is_err());
        assert!(locate(&spans, at(Buf::Recv, 0), 16, 4, 1).is_err());
        assert!(locate(&spans, at(Buf::Scratch, 0), 5, 4, 0).is_err());
        let e = locate(&spans, at(Buf::Send, usize::MAX), 1, 4, 1).unwrap_err();
        assert!(e.to_string().contains("overflows"), "{e}");
    }
}
