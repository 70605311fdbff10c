//! `--algo`/`--proto`: one sweep per pin (docs/algorithms.md). Before the
//! sweep, every rank checks each pin against the library found (its
//! variables in that release's syntax, the collectives the algorithm
//! runs, NCCL's own variables not already set); each sweep then runs on a
//! communicator of every rank made under its pin, freed after.

use super::Session;
use crate::backend::Backend;
use crate::engine::groups::Groups;
use crate::engine::{Engine, RunContext, Summary};
use crate::error::Error;
use crate::plan::{Plan, Reservation};
use crate::record::Record;
use crate::types::AlgoPin;
use crate::world::World;

/// A pin's variables (`NCCL_ALGO=...`), for the header.
fn describe(vars: &[(&'static str, String)]) -> String {
    let set: Vec<String> = vars.iter().map(|(k, v)| format!("{k}={v}")).collect();
    set.join(" ")
}

impl<W: World> Session<'_, W> {
    /// The plan of the pinned sweeps: the cases any pin measures, each
    /// pin checked on this rank's library, and the header's line per pin.
    pub(super) fn pin_plans(&self, backend: &mut dyn Backend, plan: Plan) -> Result<(Plan, Vec<String>), Error> {
        let pins = &self.cfg.timing.algo_pins;
        let kind = backend.identity().kind;
        let collectives = plan.collectives();
        let Some(pinning) = backend.pins() else {
            return Err(Error::usage(format!(
                "--algo/--proto: the {kind} backend cannot pin an algorithm (NCCL with ncclCommSplit, 2.18 and later)"
            )));
        };
        let mut notes = Vec::new();
        for &pin in pins {
            let vars = pinning.pin_variables(pin, &collectives).map_err(Error::usage)?;
            for (name, _) in &vars {
                if let Ok(set) = std::env::var(name) {
                    return Err(Error::usage(format!(
                        "--algo/--proto {pin}: {name} is set in the environment (to '{set}') and would pin every \
                         communicator; unset it, or leave the pin to it"
                    )));
                }
            }
            let runs: Vec<&str> = plan.pinned(pin).collectives().iter().map(|c| c.name()).collect();
            notes.push(format!(
                "pinned sweep {pin}: {} with {}",
                runs.join(", "),
                describe(&vars)
            ));
        }
        Ok((self.pinned_only(plan), notes))
    }

    /// The cases of `plan` a pinned sweep measures (all without a pin).
    pub(super) fn pinned_only(&self, plan: Plan) -> Plan {
        let pins = &self.cfg.timing.algo_pins;
        if pins.is_empty() {
            return plan;
        }
        let cases = plan
            .cases
            .into_iter()
            .filter(|c| pins.iter().any(|&p| c.runs_pinned(p)))
            .collect();
        Plan {
            nranks: plan.nranks,
            cases,
        }
    }

    /// What `plan` reserves (`rotate`: its buffers rotate), with a pinned
    /// sweep's communicator where the run has pins.
    pub(super) fn reservation(&self, plan: &Plan, rotate: bool) -> Reservation {
        Reservation {
            pinned: !self.cfg.timing.algo_pins.is_empty(),
            ..plan.reservation(rotate)
        }
    }

    /// The points the pinned sweeps measure, for the progress and the
    /// header.
    pub(super) fn shown_plan(&self, plan: &Plan) -> Plan {
        let pins = &self.cfg.timing.algo_pins;
        if pins.is_empty() {
            return plan.clone();
        }
        Plan {
            nranks: plan.nranks,
            cases: pins.iter().flat_map(|&p| plan.pinned(p).cases).collect(),
        }
    }

    /// Every pinned sweep in turn, each on its own communicator; their
    /// summaries added up. Stops at the first stop signal or error.
    pub(super) fn pinned_sweeps(
        &self,
        backend: &mut dyn Backend,
        plan: &Plan,
        ctx: &RunContext,
        watchdog: Option<&crate::engine::watchdog::Watchdog>,
        on_record: &mut dyn FnMut(&Record) -> Result<(), Error>,
    ) -> Result<Summary, Error> {
        let world = self.world;
        // the first rank of each process changes the process's environment
        let processes = Groups::process_indices(world.ranks());
        let me = processes[world.rank()];
        let set_here = processes.iter().position(|&p| p == me) == Some(world.rank());
        let timing = self.cfg.timing.for_backend(ctx.backend);
        let mut total = Summary::default();
        for &pin in &self.cfg.timing.algo_pins {
            let pinned = plan.pinned(pin);
            let sub = self.pinned_group(backend, pin, &pinned, set_here)?;
            let summary = Engine::new(self.context(backend, watchdog), &timing, ctx)
                .with_pin(Some((pin, sub)))
                .run(&pinned, &mut *on_record)?;
            if let Some(groups) = backend.sub_groups() {
                groups.free(sub)?;
            }
            let stopped = summary.stopped_by.is_some();
            total.add(summary);
            if stopped {
                break;
            }
        }
        Ok(total)
    }

    /// The communicator of `pin`, every rank together.
    fn pinned_group(
        &self,
        backend: &mut dyn Backend,
        pin: AlgoPin,
        pinned: &Plan,
        set_here: bool,
    ) -> Result<crate::backend::SubGroup, Error> {
        let world = self.world;
        let Some(pinning) = backend.pins() else {
            return Err(Error::runtime("internal error: the backend lost its pins"));
        };
        let vars = pinning
            .pin_variables(pin, &pinned.collectives())
            .map_err(Error::usage)?;
        let made = pinning.pinned_group(&vars, set_here, &|| world.barrier());
        self.agreed(made)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pins_variables_read_as_set() {
        assert_eq!(
            describe(&[("NCCL_ALGO", "AllReduce:Tree".into()), ("NCCL_PROTO", "LL".into())]),
            "NCCL_ALGO=AllReduce:Tree NCCL_PROTO=LL"
        );
    }
}
