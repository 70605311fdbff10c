//! Terminal output on a thread of its own, so that a stalled standard output
//! never stalls the run.
//!
//! Under mpirun a rank's standard output is a pseudo-terminal that mpirun
//! drains; when mpirun ends a job (Ctrl-C, a failed rank) it stops draining
//! it, then sends SIGTERM and, a second later, SIGKILL. A rank blocked in a
//! `write` there could never complete its CSV and JSON files. Here the sweep
//! only queues text; the printer thread does the writing, and `close` waits
//! for it without limit only when the run ended normally.

use std::io::{self, Write};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use indicatif::ProgressBar;

pub struct Printer {
    queue: Option<Sender<String>>,
    thread: Option<JoinHandle<()>>,
    /// Told when everything queued is written (or the printing gave up).
    done: Option<Receiver<()>>,
}

impl Printer {
    /// Writes queued text to `out`, suspending `progress` around each write.
    /// A write error ends the printing: a warning goes to stderr unless the
    /// reader is simply gone (broken pipe).
    pub fn start(mut out: Box<dyn Write + Send>, progress: Option<ProgressBar>) -> Printer {
        // A hidden bar needs no suspending, and suspending takes the bar's
        // lock, which a stalled write would then hold against the sweep.
        let progress = progress.filter(|bar| !bar.is_hidden());
        let (queue, texts) = mpsc::channel::<String>();
        let (tell_done, done) = mpsc::channel::<()>();
        let spawned = thread::Builder::new().name("collbench-printer".into()).spawn(move || {
            let _tell_done_on_return = tell_done;
            for text in texts {
                let mut write = || -> io::Result<()> {
                    out.write_all(text.as_bytes())?;
                    out.flush()
                };
                let written = match &progress {
                    Some(bar) => bar.suspend(write),
                    None => write(),
                };
                if let Err(e) = written {
                    if e.kind() != io::ErrorKind::BrokenPipe {
                        crate::error::say(&format!(
                            "collbench: warning: the table can no longer be printed ({e}); the CSV still gets every row"
                        ));
                    }
                    return;
                }
            }
        });
        match spawned {
            Ok(thread) => Printer {
                queue: Some(queue),
                thread: Some(thread),
                done: Some(done),
            },
            Err(e) => {
                crate::error::say(&format!(
                    "collbench: warning: no printer thread ({e}); the table is not shown"
                ));
                Printer {
                    queue: None,
                    thread: None,
                    done: None,
                }
            }
        }
    }

    pub fn print(&self, text: String) {
        if let Some(queue) = &self.queue {
            // A closed queue means the printer gave up; nothing to do.
            let _ = queue.send(text);
        }
    }

    /// Ends the queue and waits until everything is printed: as long as
    /// that takes, or at most `limit` (a stopped run: the launcher may have
    /// stopped reading, and the process must still end).
    pub fn close(&mut self, limit: Option<Duration>) {
        self.queue = None;
        let (Some(thread), Some(done)) = (self.thread.take(), self.done.take()) else {
            return;
        };
        // The thread drops its sender when it returns: `Disconnected`.
        let finished = match limit {
            None => done.recv().is_err(),
            Some(limit) => matches!(done.recv_timeout(limit), Err(RecvTimeoutError::Disconnected)),
        };
        if finished {
            let _ = thread.join();
        }
    }
}
