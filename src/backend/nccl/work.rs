//! The NCCL work of a call: prepared once per point (flat calls, or the
//! phases of a hierarchical all-reduce) and enqueued at each launch.

use super::calls;
use super::hierarchy::{self, Phases, Step, SubComms};
use super::sys::{self, Buffers, Launch};
use super::{ABORTED, Device, NcclBackend};
use crate::backend::{Call, SubGroup, rotation_offset, rotation_steps};
use crate::error::Error;
use crate::types::{Placement, ReduceOp};

/// The prepared NCCL work of the current call and placement.
pub(super) enum Work {
    Flat(Launch),
    Phases(Phases),
}

impl NcclBackend {
    /// How `call`'s operations rotate through the buffers: (span, steps)
    /// for `rotation_offset`; one step, at the start, without rotation.
    fn rotation_of(&self, call: &Call) -> (usize, usize) {
        if !self.rotate {
            return (0, 1);
        }
        let e = call.dtype.size_bytes();
        let (send_len, recv_len) = calls::buffer_lens(call);
        let span = send_len.max(recv_len);
        let capacity = (self.send.len_bytes() / e).min(self.recv.len_bytes() / e);
        (span, rotation_steps(span, capacity))
    }

    /// The work of `call` in `placement`: the cached one while the call
    /// stays the same, else prepared now (with the point's rotation).
    pub(super) fn take_work(&mut self, call: &Call, placement: Placement) -> Result<Work, Error> {
        if let Some((c, p, work)) = self.cached.take()
            && c == *call
            && p == placement
        {
            return Ok(work);
        }
        let work = if call.collective == crate::collective::Collective::AllReduce && !call.hierarchy.is_flat() {
            let op = calls::red_op(call.op.unwrap_or(ReduceOp::Sum));
            let phases = hierarchy::phases(call.hierarchy, placement, call.shape.count, op, &self.member)
                .map_err(Error::runtime)?;
            Work::Phases(phases)
        } else {
            Work::Flat(calls::launch_shifted(call, placement, self.native, call.at.shift))
        };
        self.rotation = self.rotation_of(call);
        Ok(work)
    }

    /// Enqueues `work` for operations `first_iter .. first_iter + ops` on
    /// `group` (flat work; on the world, sendrecv's communicator where
    /// `p2p` and there is one): one call, `ops` calls in one NCCL group
    /// (`-m`), or the phases of a hierarchical all-reduce once per
    /// operation.
    pub(super) fn enqueue(
        &mut self,
        work: &Work,
        group: Option<SubGroup>,
        p2p: bool,
        dtype: sys::DataType,
        first_iter: u64,
        ops: u32,
    ) -> Result<(), String> {
        // Operation `a` works where operation `first_iter + a` of the point
        // would (nccl-tests shifts each aggregated operation).
        let (span, steps) = self.rotation;
        let shift = move |a: u64| rotation_offset(span, steps, first_iter + a);
        let bufs = Buffers {
            send: &self.send,
            recv: &self.recv,
            scratch: &self.scratch,
            shift: shift(0),
        };
        match work {
            Work::Flat(launch) => {
                let comm = match (group, self.p2p.as_mut()) {
                    (Some(SubGroup(g)), _) => self
                        .groups
                        .get_mut(g)
                        .and_then(Option::as_mut)
                        .ok_or("no such sub-communicator (never made, or freed)")?,
                    (None, Some(p2p_comm)) if p2p => p2p_comm,
                    (None, _) => self.comm.as_mut().ok_or(ABORTED)?,
                };
                let done = if ops <= 1 {
                    comm.launch(launch, dtype, &bufs)
                } else {
                    comm.launch_group(launch, dtype, &bufs, (0..u64::from(ops)).map(shift))
                };
                done.map_err(|e| e.to_string())
            }
            Work::Phases(phases) => {
                let sub = self
                    .sub
                    .as_mut()
                    .ok_or("no sub-communicators: a hierarchical point launched before it was prepared")?;
                let mut marks = self.time_phases.then_some(&mut self.device);
                (0..u64::from(ops)).try_for_each(|a| {
                    let bufs = Buffers {
                        shift: shift(a),
                        ..bufs
                    };
                    enqueue_phases(phases, sub, &bufs, dtype, marks.as_deref_mut())
                })
            }
        }
    }
}

/// Enqueues the three phases of one hierarchical all-reduce; with `marks`,
/// a CUDA event before the first phase and after each (`--phase-times`).
fn enqueue_phases(
    phases: &Phases,
    sub: &mut SubComms,
    bufs: &Buffers,
    dtype: sys::DataType,
    mut marks: Option<&mut Device>,
) -> Result<(), String> {
    if let Some(device) = marks.as_deref_mut() {
        device.mark_phase(0).map_err(|e| e.to_string())?;
    }
    for (k, steps) in phases.0.iter().enumerate() {
        for step in steps {
            match step {
                Step::Copy { from, to, count } => bufs.copy(*from, *to, *count, dtype).map_err(|e| e.to_string())?,
                Step::Call { on, launch } => sub
                    .comm(*on)
                    .launch(launch, dtype, bufs)
                    .map_err(|e| format!("{} communicator: {e}", on.name()))?,
            }
        }
        if let Some(device) = marks.as_deref_mut() {
            device.mark_phase(k + 1).map_err(|e| e.to_string())?;
        }
    }
    Ok(())
}
