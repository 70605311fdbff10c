//! `collbench run`'s sweep on every rank, after the shared set-up
//! (`prepare`): `--split`'s groups, the plan fitted to memory and rank 0's
//! reports (`outputs`), then the engine's sweep, the reports completed,
//! and the verdict (the exit code).

use super::Session;
use super::prepare::Prepared;
use crate::backend::Backend;
use crate::doctor::kept::{self, KeptLogs};
use crate::engine::groups::Groups;
use crate::engine::watchdog::Watchdog;
use crate::engine::{Engine, RunContext, Summary};
use crate::error::{Error, exit, say};
use crate::plan::Plan;
use crate::report::{Reporter, RunInfo};
use crate::world::World;

/// Everything set up on every rank; the sweep can start.
struct Ready {
    backend: Box<dyn Backend>,
    plan: Plan,
    /// `--split`: this rank's group and its sub-communicator.
    groups: Option<Groups>,
    ctx: RunContext,
    /// Rank 0 only.
    outputs: Option<(Reporter, RunInfo)>,
}

impl<W: World> Session<'_, W> {
    /// The sweep's own set-up, the sweep and its verdict; this rank's exit
    /// code.
    pub(super) fn sweep_task(&self, prepared: Prepared, watchdog: Option<&Watchdog>) -> Result<u8, Error> {
        let ready = self.set_up(prepared)?;
        self.mark("plan, buffers, outputs");
        Ok(self.sweep(ready, watchdog))
    }

    /// The sweep's own set-up, agreed step by step: `--split`'s groups,
    /// the plan, memory and rank 0's reports.
    fn set_up(&self, mut prepared: Prepared) -> Result<Ready, Error> {
        let world = self.world;
        // --split: every rank makes its group's sub-communicator together
        // (every rank gets here: a failed set-up ended every rank above).
        let groups = match self.cfg.plan.split {
            Some(rule) => {
                let groups = Groups::of(rule, &Groups::process_indices(world.ranks()), world.rank());
                Some(self.agreed(groups.split(prepared.backend.as_mut(), world.rank()))?)
            }
            None => None,
        };
        // Every rank gets here (a failed step ended every rank above), so
        // this collective cannot hang.
        let free = prepared.backend.gpu().and_then(|g| g.free_bytes());
        let device_free = world.min_u64(free.unwrap_or(u64::MAX));
        match world.agree(self.plan_and_outputs(&mut prepared, device_free, groups.as_ref())) {
            Ok((plan, outputs)) => Ok(self.ready(prepared, plan, groups, outputs)),
            Err(failed) => {
                // Another rank failed: remove the files this one created.
                if let Some((_, Some((mut reporter, _)))) = failed.local {
                    reporter.discard();
                }
                Err(Error::Reported(failed.code))
            }
        }
    }

    /// Every rank set up: the engine's context of every record, and rank
    /// 0's `RunInfo` completed with what every rank observed.
    fn ready(
        &self,
        prepared: Prepared,
        plan: Plan,
        groups: Option<Groups>,
        mut outputs: Option<(Reporter, RunInfo)>,
    ) -> Ready {
        let Prepared {
            nodes,
            backend,
            observed,
            transport_observed,
            gpus,
            identity,
            nccl_logs,
            ..
        } = prepared;
        if let Some((_, info)) = outputs.as_mut() {
            info.transport_observed = transport_observed.clone();
            info.transport_notes = self
                .env_plan
                .describe(identity.backend == crate::types::BackendKind::Nccl);
            info.transport_notes.extend(observed.note.clone());
            for (rank, model) in info.ranks.iter_mut().zip(gpus) {
                rank.gpu = (!model.is_empty()).then_some(model);
            }
            if let Some(texts) = nccl_logs {
                let k = KeptLogs::keep(&texts, kept::beside(&info.csv));
                info.nccl_log_lines = k.footer();
                info.nccl_log = serde_json::to_value(&k).ok();
            }
        }
        let ctx = RunContext {
            run_id: identity.run_id,
            host: self.world.host().into(),
            backend: identity.backend,
            backend_version: identity.backend_version,
            transport: self.cfg.start.transport,
            transport_observed,
            nnodes: nodes.nnodes(),
            ranks_per_node: nodes.ranks_per_node(),
            label: identity.label,
        };
        Ready {
            backend,
            plan,
            groups,
            ctx,
            outputs,
        }
    }

    /// Measures the plan, then the verdict: the exit code.
    fn sweep(&self, ready: Ready, watchdog: Option<&Watchdog>) -> u8 {
        let Ready {
            mut backend,
            plan,
            groups,
            ctx,
            outputs,
        } = ready;
        let (mut reporter, info) = match outputs {
            Some((reporter, info)) => (Some(reporter), Some(info)),
            None => (None, None),
        };
        if let (Some(rep), Some(info)) = (reporter.as_mut(), info.as_ref())
            && let Err(e) = rep.begin(info)
        {
            self.fail(&e);
        }
        let timing = self.cfg.timing.for_backend(ctx.backend);
        let mut on_record = |record: &crate::record::Record| match reporter.as_mut() {
            Some(rep) => rep.record(record),
            None => Ok(()),
        };
        let swept = if timing.algo_pins.is_empty() {
            Engine::new(self.context(backend.as_mut(), watchdog), &timing, &ctx)
                .with_groups(groups.as_ref())
                .run(&plan, &mut on_record)
        } else {
            self.pinned_sweeps(backend.as_mut(), &plan, &ctx, watchdog, &mut on_record)
        };
        let summary = match swept {
            Ok(summary) => summary,
            Err(e) => {
                // rank 0's reports are completed before the job goes down
                say(&self.world.error_line(&e));
                if let Some(rep) = reporter.as_mut() {
                    rep.abandon();
                }
                self.world.abort(e.exit_code())
            }
        };
        self.mark("sweep");
        // Rank 0 judges what its reports hold: a stop signal may have
        // completed them before the point in flight (`report::reporter`).
        let (summary, finished) = match (reporter.as_mut(), info.as_ref()) {
            (Some(rep), Some(info)) => match rep.finish(info, &summary) {
                Ok(reported) => (reported, Ok(())),
                Err(e) => (summary, Err(e)),
            },
            _ => (summary, Ok(())),
        };
        let code = self.verdict(&summary, finished, info.as_ref());
        self.mark("reports completed, verdict");
        code
    }

    /// The exit code of a finished sweep: the reports' failure (1), wrong
    /// results (3), a stop signal (128 + the signal), whichever is highest;
    /// rank 0 says why (its reports say which signal stopped the run).
    fn verdict(&self, summary: &Summary, finished: Result<(), Error>, info: Option<&RunInfo>) -> u8 {
        let first = self.world.rank() == 0;
        let mut code = exit::OK;
        if let Err(e) = finished {
            say(&self.world.error_line(&e));
            code = e.exit_code();
        }
        if summary.wrong > 0 {
            let e = Error::Validation {
                wrong: summary.wrong,
                points: summary.failed_points,
                checked: summary.checked_points,
            };
            if first {
                say(&self.world.error_line(&e));
            }
            code = code.max(e.exit_code());
        }
        if let Some(info) = info
            && info.hierarchy.contains(',')
            && summary.stopped_by.is_none()
        {
            // flat against hierarchical, per size, after the table
            crate::compare::print_after_run(
                &info.csv,
                ("this run", "collbench"),
                |r| r.collective == crate::collective::Collective::AllReduce,
                crate::types::Dimension::Hierarchy,
                None,
            );
        }
        if let Some(signal) = summary.stopped_by {
            code = 128 + signal as u8;
        }
        code
    }
}
