//! MPI calls that rsmpi does not expose, made through its raw bindings: the
//! MPI_IN_PLACE variants of the collectives, MPI_Reduce_scatter with
//! per-rank counts (uneven slices of the hierarchical all-reduce), and the
//! names of the valid control variables (the transport observed): from
//! Open MPI's MCA base where the library has one, else through the MPI_T
//! tool interface.
//!
//! This file and the NCCL binding are the only homes of `unsafe`. Every
//! function takes a Rust slice whose length is exactly what the call reads
//! and writes, checks that every count fits a C int, and turns a non-success
//! return code into an error (rsmpi installs MPI_ERRORS_ARE_FATAL, so the
//! check is a second line of defence).
#![allow(unsafe_code)]

use std::ffi::{CStr, c_char, c_int, c_void};

use mpi::collective::SystemOperation;
use mpi::datatype::Equivalence;
use mpi::ffi;
use mpi::raw::AsRaw;
use mpi::topology::SimpleCommunicator;

use crate::error::Error;

unsafe extern "C" {
    /// Defined in in_place_shim.c: the MPI_IN_PLACE of the MPI headers.
    fn collbench_mpi_in_place() -> *mut c_void;
}

fn in_place_marker() -> *mut c_void {
    // SAFETY: a C function without arguments that returns a constant.
    unsafe { collbench_mpi_in_place() }
}

fn c_count(n: usize) -> Result<c_int, Error> {
    c_int::try_from(n).map_err(|_| Error::runtime(format!("{n} elements exceed MPI's count limit of {}", c_int::MAX)))
}

fn check(name: &str, rc: c_int) -> Result<(), Error> {
    if rc == ffi::MPI_SUCCESS as c_int {
        Ok(())
    } else {
        Err(Error::runtime(format!("{name} failed with MPI error code {rc}")))
    }
}

/// MPI's count for a call that reads or writes `n` blocks of `per_rank`
/// elements of `buf` (allgather, reduce-scatter, alltoall, gather,
/// scatter): refuses a buffer that holds fewer, so that MPI never touches
/// memory past the slice, whoever calls.
fn block_count(name: &str, n: usize, buf_len: usize, per_rank: usize) -> Result<c_int, Error> {
    if per_rank.checked_mul(n).is_none_or(|need| need > buf_len) {
        return Err(Error::runtime(format!(
            "internal error: {name} needs {n} blocks of {per_rank} elements, the buffer holds {buf_len}"
        )));
    }
    c_count(buf_len)?;
    c_count(per_rank)
}

fn comm_size(comm: &SimpleCommunicator) -> usize {
    use mpi::topology::Communicator;
    comm.size() as usize
}

/// `root` as MPI's rank, where it is a rank of `comm`.
fn check_root(name: &str, comm: &SimpleCommunicator, root: usize) -> Result<c_int, Error> {
    let n = comm_size(comm);
    if root >= n {
        return Err(Error::runtime(format!(
            "internal error: {name} at root {root} of {n} ranks"
        )));
    }
    c_count(root)
}

/// MPI_Allreduce(MPI_IN_PLACE, buf, ...): `buf` is input and output.
pub fn all_reduce<T: Equivalence>(comm: &SimpleCommunicator, buf: &mut [T], op: SystemOperation) -> Result<(), Error> {
    let count = c_count(buf.len())?;
    // SAFETY: `buf` is a live, exclusively borrowed slice of `count`
    // elements of the type whose MPI datatype is passed; MPI_IN_PLACE tells
    // MPI to read and write only `buf`. The handles come from live rsmpi
    // objects borrowed for the duration of the call.
    let rc = unsafe {
        ffi::MPI_Allreduce(
            in_place_marker(),
            buf.as_mut_ptr().cast(),
            count,
            T::equivalent_datatype().as_raw(),
            op.as_raw(),
            comm.as_raw(),
        )
    };
    check("MPI_Allreduce", rc)
}

/// MPI_Allgather(MPI_IN_PLACE, ..., buf, per_rank, ...): every rank's
/// input is its own block of `buf`, which is `n * per_rank` long.
pub fn all_gather<T: Equivalence>(comm: &SimpleCommunicator, buf: &mut [T], per_rank: usize) -> Result<(), Error> {
    let count = block_count("MPI_Allgather", comm_size(comm), buf.len(), per_rank)?;
    // SAFETY: `buf` holds the `n * per_rank` elements MPI writes (checked
    // above against the communicator's rank count); send arguments are
    // ignored with MPI_IN_PLACE; datatype and communicator are live.
    let rc = unsafe {
        ffi::MPI_Allgather(
            in_place_marker(),
            0,
            T::equivalent_datatype().as_raw(),
            buf.as_mut_ptr().cast(),
            count,
            T::equivalent_datatype().as_raw(),
            comm.as_raw(),
        )
    };
    check("MPI_Allgather", rc)
}

/// MPI_Reduce_scatter_block(MPI_IN_PLACE, buf, per_rank, ...): `buf` holds
/// the full `n * per_rank` input; this rank's block lands at its start.
pub fn reduce_scatter_block<T: Equivalence>(
    comm: &SimpleCommunicator,
    buf: &mut [T],
    per_rank: usize,
    op: SystemOperation,
) -> Result<(), Error> {
    let count = block_count("MPI_Reduce_scatter_block", comm_size(comm), buf.len(), per_rank)?;
    // SAFETY: `buf` holds `n * per_rank` elements (checked above), all of which MPI reads
    // and the first `per_rank` of which it writes; handles are live.
    let rc = unsafe {
        ffi::MPI_Reduce_scatter_block(
            in_place_marker(),
            buf.as_mut_ptr().cast(),
            count,
            T::equivalent_datatype().as_raw(),
            op.as_raw(),
            comm.as_raw(),
        )
    };
    check("MPI_Reduce_scatter_block", rc)
}

/// MPI_Alltoall(MPI_IN_PLACE, ..., buf, per_peer, ...): `buf` holds `n`
/// blocks of `per_peer` elements, replaced by the received blocks.
pub fn all_to_all<T: Equivalence>(comm: &SimpleCommunicator, buf: &mut [T], per_peer: usize) -> Result<(), Error> {
    let count = block_count("MPI_Alltoall", comm_size(comm), buf.len(), per_peer)?;
    // SAFETY: `buf` holds `n * per_peer` elements (checked above), read and written by MPI;
    // send arguments are ignored with MPI_IN_PLACE; handles are live.
    let rc = unsafe {
        ffi::MPI_Alltoall(
            in_place_marker(),
            0,
            T::equivalent_datatype().as_raw(),
            buf.as_mut_ptr().cast(),
            count,
            T::equivalent_datatype().as_raw(),
            comm.as_raw(),
        )
    };
    check("MPI_Alltoall", rc)
}

/// One rank's blocks of an MPI_Alltoallv, in elements: what it sends
/// each rank and where in its input, what it receives from each rank and
/// where in its output.
pub struct Blocks {
    pub send_counts: Vec<c_int>,
    pub send_displs: Vec<c_int>,
    pub recv_counts: Vec<c_int>,
    pub recv_displs: Vec<c_int>,
}

impl Blocks {
    /// Blocks from (count, displacement) pairs in peer order, each checked
    /// against C's int.
    pub fn new(send: &[(usize, usize)], recv: &[(usize, usize)]) -> Result<Blocks, Error> {
        let ints = |pairs: &[(usize, usize)], pick: fn(&(usize, usize)) -> usize| {
            pairs
                .iter()
                .map(|p| c_count(pick(p)))
                .collect::<Result<Vec<c_int>, Error>>()
        };
        Ok(Blocks {
            send_counts: ints(send, |p| p.0)?,
            send_displs: ints(send, |p| p.1)?,
            recv_counts: ints(recv, |p| p.0)?,
            recv_displs: ints(recv, |p| p.1)?,
        })
    }

    /// Elements from the start of a buffer to the end of its last block.
    fn extent(counts: &[c_int], displs: &[c_int]) -> usize {
        counts
            .iter()
            .zip(displs)
            .map(|(&c, &d)| (c as usize).saturating_add(d as usize))
            .max()
            .unwrap_or(0)
    }

    /// One count and displacement per rank of `comm`, every block inside a
    /// buffer of `send_len` and of `recv_len` elements.
    fn check(&self, comm: &SimpleCommunicator, send_len: usize, recv_len: usize) -> Result<(), Error> {
        use mpi::topology::Communicator;
        let n = comm.size() as usize;
        let lens = [
            self.send_counts.len(),
            self.send_displs.len(),
            self.recv_counts.len(),
            self.recv_displs.len(),
        ];
        if lens.iter().any(|&l| l != n)
            || Blocks::extent(&self.send_counts, &self.send_displs) > send_len
            || Blocks::extent(&self.recv_counts, &self.recv_displs) > recv_len
        {
            return Err(Error::runtime(format!(
                "internal error: alltoallv blocks do not fit buffers of {send_len} and {recv_len} elements at {n} ranks"
            )));
        }
        Ok(())
    }
}

/// MPI_Alltoallv(send, ..., recv, ...): `blocks` says what goes where.
pub fn all_to_all_v<T: Equivalence>(
    comm: &SimpleCommunicator,
    send: &[T],
    recv: &mut [T],
    blocks: &Blocks,
) -> Result<(), Error> {
    blocks.check(comm, send.len(), recv.len())?;
    // SAFETY: every block lies inside `send` (read) or `recv` (written),
    // as checked; the two are live slices that do not overlap (one shared,
    // one exclusive); the count arrays hold one int per rank of `comm`
    // and live until the call returns; handles are live rsmpi objects.
    let rc = unsafe {
        ffi::MPI_Alltoallv(
            send.as_ptr().cast(),
            blocks.send_counts.as_ptr(),
            blocks.send_displs.as_ptr(),
            T::equivalent_datatype().as_raw(),
            recv.as_mut_ptr().cast(),
            blocks.recv_counts.as_ptr(),
            blocks.recv_displs.as_ptr(),
            T::equivalent_datatype().as_raw(),
            comm.as_raw(),
        )
    };
    check("MPI_Alltoallv", rc)
}

/// MPI_Alltoallv with `buf` as both the send and the receive buffer, as
/// nccl-tests runs its in-place alltoallv (one pointer for both): MPI
/// leaves the result undefined (the blocks race), so it is timed, never
/// checked. MPI_IN_PLACE is no substitute: it exchanges the receive blocks
/// both ways, which only a symmetric traffic has.
pub fn all_to_all_v_one_buffer<T: Equivalence>(
    comm: &SimpleCommunicator,
    buf: &mut [T],
    blocks: &Blocks,
) -> Result<(), Error> {
    blocks.check(comm, buf.len(), buf.len())?;
    let ptr: *mut c_void = buf.as_mut_ptr().cast();
    // SAFETY: every block lies inside `buf`, as checked; `buf` is a live,
    // exclusively borrowed slice, handed to MPI as raw pointers only (no
    // Rust reference aliases it during the call); what MPI writes over
    // what it still reads is undefined data, never memory outside `buf`.
    // The count arrays and handles are live, as above.
    let rc = unsafe {
        ffi::MPI_Alltoallv(
            ptr.cast_const(),
            blocks.send_counts.as_ptr(),
            blocks.send_displs.as_ptr(),
            T::equivalent_datatype().as_raw(),
            ptr,
            blocks.recv_counts.as_ptr(),
            blocks.recv_displs.as_ptr(),
            T::equivalent_datatype().as_raw(),
            comm.as_raw(),
        )
    };
    check("MPI_Alltoallv", rc)
}

/// MPI_Reduce(MPI_IN_PLACE, buf, ...) at the root: the root reduces into
/// its own input. Other ranks call rsmpi's `reduce_into`.
pub fn reduce_at_root<T: Equivalence>(
    comm: &SimpleCommunicator,
    root: usize,
    buf: &mut [T],
    op: SystemOperation,
) -> Result<(), Error> {
    let count = c_count(buf.len())?;
    let root = check_root("MPI_Reduce", comm, root)?;
    // SAFETY: at the root, `buf` is read and written for `count` elements;
    // handles are live; `root` is a rank of `comm` (checked above).
    let rc = unsafe {
        ffi::MPI_Reduce(
            in_place_marker(),
            buf.as_mut_ptr().cast(),
            count,
            T::equivalent_datatype().as_raw(),
            op.as_raw(),
            root,
            comm.as_raw(),
        )
    };
    check("MPI_Reduce", rc)
}

/// MPI_Gather(MPI_IN_PLACE, ..., buf, per_rank, ...) at the root: the
/// root's block is already in place in `buf` (`n * per_rank` long).
pub fn gather_at_root<T: Equivalence>(
    comm: &SimpleCommunicator,
    root: usize,
    buf: &mut [T],
    per_rank: usize,
) -> Result<(), Error> {
    let count = block_count("MPI_Gather", comm_size(comm), buf.len(), per_rank)?;
    let root = check_root("MPI_Gather", comm, root)?;
    // SAFETY: at the root, MPI writes `n * per_rank` elements of `buf`
    // (checked above to hold them);
    // send arguments are ignored with MPI_IN_PLACE; handles are live.
    let rc = unsafe {
        ffi::MPI_Gather(
            in_place_marker(),
            0,
            T::equivalent_datatype().as_raw(),
            buf.as_mut_ptr().cast(),
            count,
            T::equivalent_datatype().as_raw(),
            root,
            comm.as_raw(),
        )
    };
    check("MPI_Gather", rc)
}

/// MPI_Scatter(buf, per_rank, ..., MPI_IN_PLACE, ...) at the root: the
/// root's own block stays where it is in `buf` (`n * per_rank` long).
pub fn scatter_at_root<T: Equivalence>(
    comm: &SimpleCommunicator,
    root: usize,
    buf: &mut [T],
    per_rank: usize,
) -> Result<(), Error> {
    let count = block_count("MPI_Scatter", comm_size(comm), buf.len(), per_rank)?;
    let root = check_root("MPI_Scatter", comm, root)?;
    // SAFETY: at the root, MPI reads `n * per_rank` elements of `buf`
    // (checked above to hold them);
    // receive arguments are ignored with MPI_IN_PLACE; handles are live.
    let rc = unsafe {
        ffi::MPI_Scatter(
            buf.as_ptr().cast(),
            count,
            T::equivalent_datatype().as_raw(),
            in_place_marker(),
            0,
            T::equivalent_datatype().as_raw(),
            root,
            comm.as_raw(),
        )
    };
    check("MPI_Scatter", rc)
}

/// MPI_Reduce_scatter(send, recv, counts, ...): rank `i` of `comm` gets
/// the reduction of block `i` (`counts[i]` elements) of every rank's `send`.
/// `recv` is this rank's block; `send` holds the sum of `counts` elements.
pub fn reduce_scatter<T: Equivalence>(
    comm: &SimpleCommunicator,
    send: &[T],
    recv: &mut [T],
    counts: &[c_int],
    op: SystemOperation,
) -> Result<(), Error> {
    check_counts(comm, send.len(), recv.len(), counts)?;
    // SAFETY: `send` holds every block and `recv` this rank's block, as
    // checked against `counts` (one per rank of `comm`); both are live
    // slices that do not overlap (one is shared, the other exclusive);
    // handles come from live rsmpi objects.
    let rc = unsafe {
        ffi::MPI_Reduce_scatter(
            send.as_ptr().cast(),
            recv.as_mut_ptr().cast(),
            counts.as_ptr(),
            T::equivalent_datatype().as_raw(),
            op.as_raw(),
            comm.as_raw(),
        )
    };
    check("MPI_Reduce_scatter", rc)
}

/// MPI_Reduce_scatter(MPI_IN_PLACE, buf, counts, ...): `buf` holds every
/// block; this rank's reduced block lands at its start.
pub fn reduce_scatter_in_place<T: Equivalence>(
    comm: &SimpleCommunicator,
    buf: &mut [T],
    counts: &[c_int],
    op: SystemOperation,
) -> Result<(), Error> {
    check_counts(comm, buf.len(), 0, counts)?;
    // SAFETY: `buf` holds the sum of `counts` elements (checked), all read
    // and the first `counts[rank]` written by MPI; handles are live.
    let rc = unsafe {
        ffi::MPI_Reduce_scatter(
            in_place_marker(),
            buf.as_mut_ptr().cast(),
            counts.as_ptr(),
            T::equivalent_datatype().as_raw(),
            op.as_raw(),
            comm.as_raw(),
        )
    };
    check("MPI_Reduce_scatter", rc)
}

/// `counts` has one entry per rank, sums to `total`, and this rank's entry
/// fits `mine` (0 = not checked, for the in-place form).
fn check_counts(comm: &SimpleCommunicator, total: usize, mine: usize, counts: &[c_int]) -> Result<(), Error> {
    use mpi::topology::Communicator;
    let ok_len = counts.len() == comm.size() as usize;
    let sum: i64 = counts.iter().map(|&c| i64::from(c)).sum();
    let own = counts.get(comm.rank() as usize).copied().unwrap_or(-1);
    if !ok_len || sum != total as i64 || (mine != 0 && own as usize != mine) || counts.iter().any(|&c| c < 0) {
        return Err(Error::runtime(format!(
            "internal error: reduce-scatter counts {counts:?} do not match buffers of {total} and {mine} elements"
        )));
    }
    Ok(())
}

/// Longest control-variable name read (Open MPI's are under 100 bytes).
const CVAR_NAME_BYTES: usize = 256;
/// Description buffer: MPI_T_cvar_get_info writes one, truncated to this.
const CVAR_DESC_BYTES: usize = 1024;

/// The names of every valid control variable after MPI_Init: Open MPI
/// invalidates the variables of components it closed, so the names show
/// which PML and BTLs it kept (see `topology::observe::ompi`). Read from
/// Open MPI's MCA base, whose variables MPI_T's control variables are,
/// where the library has one (`mca_variable_names`); else through MPI_T.
pub fn control_variable_names() -> Result<Vec<String>, String> {
    match mca_variable_names() {
        Some(names) => Ok(names),
        None => mpi_t_variable_names(),
    }
}

/// `mca_base_var_dump`'s output type that gives one line, `name=value
/// (source)` (Open MPI's `MCA_BASE_VAR_DUMP_SIMPLE`).
const MCA_BASE_VAR_DUMP_SIMPLE: c_int = 2;

type VarCount = unsafe extern "C" fn() -> c_int;
type VarDump = unsafe extern "C" fn(c_int, *mut *mut *mut c_char, c_int) -> c_int;

unsafe extern "C" {
    /// The C library's symbol lookup (in libc since glibc 2.34; the build
    /// links libdl for older ones).
    fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
    /// The C library's `free`, for the strings Open MPI allocated.
    fn free(ptr: *mut c_void);
}

/// A function of the process's loaded libraries by name (`RTLD_DEFAULT`,
/// the null handle), or null.
fn loaded_symbol(name: &CStr) -> *mut c_void {
    // SAFETY: a null handle is RTLD_DEFAULT (glibc and musl); `name` is a
    // NUL-terminated string that outlives the call.
    unsafe { dlsym(std::ptr::null_mut(), name.as_ptr()) }
}

/// The valid variables' names read from Open MPI's MCA base
/// (`mca_base_var_get_count`, `mca_base_var_dump`, exported by
/// libopen-pal since Open MPI 1.7), the registry behind MPI_T's control
/// variables; `None` where the library has no MCA base (MPICH, ...).
/// MPI_T_init_thread would first register every framework again, opening
/// the components MPI_Init closed (on Open MPI 4.1.4 with libfabric's psm
/// providers: 200 ms per rank, docs/overhead.md); this reads what MPI_Init
/// left, a fraction of a millisecond. An invalid variable's dump fails.
fn mca_variable_names() -> Option<Vec<String>> {
    let count = loaded_symbol(c"mca_base_var_get_count");
    let dump = loaded_symbol(c"mca_base_var_dump");
    if count.is_null() || dump.is_null() {
        return None;
    }
    // SAFETY: both symbols are Open MPI's functions of these C signatures
    // (opal/mca/base/mca_base_var.h: `int mca_base_var_get_count(void)`,
    // `int mca_base_var_dump(int, char ***, mca_base_var_dump_type_t)`).
    let (count, dump) = unsafe {
        (
            std::mem::transmute::<*mut c_void, VarCount>(count),
            std::mem::transmute::<*mut c_void, VarDump>(dump),
        )
    };
    // SAFETY: no arguments; MPI_Init has set the MCA base up.
    let n = unsafe { count() };
    let mut names = Vec::new();
    for index in 0..n.max(0) {
        let mut lines: *mut *mut c_char = std::ptr::null_mut();
        // SAFETY: `index` is below the count; Open MPI writes a
        // NULL-terminated array of malloc'd strings through the pointer to
        // a live local, or fails (an invalid variable) and writes nothing.
        let rc = unsafe { dump(index, &mut lines, MCA_BASE_VAR_DUMP_SIMPLE) };
        if rc != 0 || lines.is_null() {
            continue;
        }
        let mut at = 0;
        loop {
            // SAFETY: the array is NULL-terminated; `at` has not passed
            // its end (the loop stops at the terminator).
            let line = unsafe { *lines.add(at) };
            if line.is_null() {
                break;
            }
            if at == 0 {
                // SAFETY: Open MPI's NUL-terminated string, read before it
                // is freed below.
                let text = unsafe { CStr::from_ptr(line) }.to_string_lossy();
                names.push(text.split('=').next().unwrap_or_default().to_string());
            }
            // SAFETY: each string was malloc'd by Open MPI for the caller,
            // and is freed once.
            unsafe { free(line.cast()) };
            at += 1;
        }
        // SAFETY: the array was malloc'd by Open MPI for the caller; its
        // strings are freed above.
        unsafe { free(lines.cast()) };
    }
    Some(names)
}

/// The names of every valid MPI_T control variable, after MPI_Init
/// (indices whose variable is invalid are skipped).
fn mpi_t_variable_names() -> Result<Vec<String>, String> {
    let mut provided: c_int = 0;
    // SAFETY: RSMPI_THREAD_SINGLE is an immutable constant defined by
    // rsmpi's C shim; MPI_T_init_thread writes one int through a pointer to
    // a live local. MPI_T may be initialised any number of times, before or
    // after MPI_Init, and is paired with the MPI_T_finalize below.
    let rc = unsafe { ffi::MPI_T_init_thread(ffi::RSMPI_THREAD_SINGLE, &mut provided) };
    if rc != ffi::MPI_SUCCESS as c_int {
        return Err(format!("MPI_T_init_thread returned {rc}"));
    }
    let names = read_cvar_names();
    // SAFETY: pairs the successful MPI_T_init_thread above; no MPI_T
    // handle is left allocated (names are read through get_info only).
    unsafe { ffi::MPI_T_finalize() };
    names
}

fn read_cvar_names() -> Result<Vec<String>, String> {
    let mut count: c_int = 0;
    // SAFETY: writes one int through a pointer to a live local; MPI_T is
    // initialised (control_variable_names).
    let rc = unsafe { ffi::MPI_T_cvar_get_num(&mut count) };
    if rc != ffi::MPI_SUCCESS as c_int {
        return Err(format!("MPI_T_cvar_get_num returned {rc}"));
    }
    let mut names = Vec::with_capacity(count.max(0) as usize);
    let mut name = vec![0u8; CVAR_NAME_BYTES];
    let mut desc = vec![0u8; CVAR_DESC_BYTES];
    for index in 0..count {
        let mut name_len = CVAR_NAME_BYTES as c_int;
        let mut desc_len = CVAR_DESC_BYTES as c_int;
        let mut verbosity: c_int = 0;
        let mut bind: c_int = 0;
        let mut scope: c_int = 0;
        // Written by MPI, never read: their representation differs between
        // MPI libraries (a handle pointer in Open MPI, an int in MPICH).
        let mut datatype = std::mem::MaybeUninit::<ffi::MPI_Datatype>::uninit();
        let mut enumtype = std::mem::MaybeUninit::<ffi::MPI_T_enum>::uninit();
        // SAFETY: every pointer refers to a live local or buffer; MPI
        // writes at most `name_len` and `desc_len` bytes (their buffers'
        // lengths, passed in), NUL terminator included, and one value
        // through each of the other pointers. `index` is below the count
        // MPI reported.
        let rc = unsafe {
            ffi::MPI_T_cvar_get_info(
                index,
                name.as_mut_ptr().cast(),
                &mut name_len,
                &mut verbosity,
                datatype.as_mut_ptr(),
                enumtype.as_mut_ptr(),
                desc.as_mut_ptr().cast(),
                &mut desc_len,
                &mut bind,
                &mut scope,
            )
        };
        if rc != ffi::MPI_SUCCESS as c_int {
            // An invalid (closed component's) variable.
            continue;
        }
        let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
        names.push(String::from_utf8_lossy(&name[..end]).into_owned());
    }
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::block_count;

    #[test]
    fn a_blocked_call_refuses_a_buffer_shorter_than_its_blocks() {
        assert_eq!(block_count("MPI_Allgather", 3, 12, 4).unwrap(), 4);
        assert_eq!(block_count("MPI_Allgather", 3, 13, 4).unwrap(), 4);
        let short = block_count("MPI_Allgather", 3, 11, 4).unwrap_err().to_string();
        assert!(
            short.contains("needs 3 blocks of 4 elements, the buffer holds 11"),
            "{short}"
        );
        assert!(block_count("MPI_Alltoall", 2, usize::MAX, usize::MAX).is_err());
        assert_eq!(block_count("MPI_Gather", 1, 0, 0).unwrap(), 0);
    }
}
