//! The memory backend's extensions of `Backend`: graphs that record and
//! replay operations, iteration marks on the rank's clock, profiler ranges
//! in the journal, and point-to-point groups through the home fabric's
//! mailboxes.

use std::sync::Arc;

use super::{Event, Fault, MemoryBackend, regions};
use crate::backend::{Call, Graphs, IterationMarks, PeerOp, PointToPoint, ProfilerRanges};
use crate::error::Error;
use crate::types::Placement;

impl Graphs for MemoryBackend {
    fn begin_capture(&mut self) -> Result<(), Error> {
        self.journal.push(Event::BeginCapture);
        self.capturing = Some(Vec::new());
        Ok(())
    }

    fn end_capture(&mut self) -> Result<(), Error> {
        self.journal.push(Event::EndCapture);
        self.graph = self.capturing.take().unwrap_or_default();
        Ok(())
    }

    fn replay(&mut self, times: u32) -> Result<(), Error> {
        self.journal.push(Event::Replay { times });
        let graph = std::mem::take(&mut self.graph);
        let mut result = Ok(());
        'replays: for _ in 0..times {
            for (call, placement, iter) in &graph {
                result = self.run(call, *placement, *iter);
                if result.is_err() {
                    break 'replays;
                }
            }
        }
        self.graph = graph;
        result
    }
}

impl IterationMarks for MemoryBackend {
    fn start_marks(&mut self, iters: u32) -> Result<(), Error> {
        self.journal.push(Event::StartMarks { iters });
        self.marks = Some(Vec::with_capacity(iters as usize + 1));
        Ok(())
    }

    fn mark_iteration(&mut self, i: u32) -> Result<(), Error> {
        self.journal.push(Event::Mark { i });
        let now = self.clock().now();
        let marks = self.marks.get_or_insert_with(Vec::new);
        marks.truncate(i as usize);
        marks.push(now);
        Ok(())
    }

    fn marked_times(&mut self) -> Result<Vec<f64>, Error> {
        let marks = self.marks.as_deref().unwrap_or_default();
        Ok(marks
            .windows(2)
            .map(|w| w[1].saturating_sub(w[0]).as_secs_f64())
            .collect())
    }
}

impl ProfilerRanges for MemoryBackend {
    fn range_push(&mut self, label: &str) {
        self.journal.push(Event::RangePush(label.to_string()));
    }

    fn range_pop(&mut self) {
        self.journal.push(Event::RangePop);
    }
}

/// Sends of the call's input, receives into its output, through the home
/// fabric's mailboxes; then the group's fault and delay, as one operation's.
impl PointToPoint for MemoryBackend {
    fn launch_p2p(&mut self, call: &Call, ops: &[PeerOp]) -> Result<(), Error> {
        self.journal.push(Event::PeerGroup(ops.to_vec()));
        let placement = Placement::OutOfPlace;
        let peer = ops.first().map(|op| match *op {
            PeerOp::Send(p) | PeerOp::Recv(p) => p,
        });
        let (op, fault) = self.begin_op(call, placement, 0, peer)?;
        let r = regions(call, placement);
        let e = call.dtype.size_bytes();
        let (input, output) = (
            r.input.1.start * e..r.input.1.end * e,
            r.output.1.start * e..r.output.1.end * e,
        );
        let (fabric, me) = (Arc::clone(&self.home.0), self.home.1);
        for op in ops {
            if let PeerOp::Send(p) = *op {
                fabric.post(me, p, self.send.bytes()[input.clone()].to_vec())?;
            }
        }
        for op in ops {
            if let PeerOp::Recv(p) = *op {
                let message = fabric.take(p, me)?;
                if message.len() != output.len() {
                    self.break_all(format!("rank {me} of the memory backend got a message of another size"));
                    return Err(Error::runtime(format!(
                        "rank {me} receives {} bytes from rank {p}, which sent {}",
                        output.len(),
                        message.len()
                    )));
                }
                self.recv.bytes_mut()[output.clone()].copy_from_slice(&message);
            }
        }
        if let Some(Fault::Corrupt(n)) = fault {
            let corrupt = output.start..output.start + (n * e).min(output.len());
            for byte in &mut self.recv.bytes_mut()[corrupt] {
                *byte ^= 0x5a;
            }
        }
        self.end_op(&op);
        Ok(())
    }
}
