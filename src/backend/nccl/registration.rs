//! `-R`: the send and receive buffers registered with every communicator
//! a call can run on (the world's, sendrecv's, the hierarchical modes',
//! and every `SubGroups::split` group: `--split`, `check`'s node and pair
//! checks, a workload's and a replay's groups), as nccl-tests registers on
//! the communicator it runs on (src/common.cu:1633-1646); what each
//! communicator holds (a handle, a symmetric window, or no window where
//! NCCL declined one), the `register` value of a call, and the header's
//! line per communicator without a window (docs/gpu.md, "Symmetric
//! windows NCCL declines").

use super::hierarchy::SubComms;
use super::sys::{Comm, Held, NcclVersion};
use super::{NcclBackend, Registration};
use crate::backend::{Call, Registrations, SubGroup};
use crate::collective::Collective;
use crate::error::Error;
use crate::types::Register;

impl NcclBackend {
    /// With `-R`: registers the send and receive buffers with every
    /// communicator (registering one twice does nothing); with `-R 2` as
    /// symmetric windows, which is collective: every rank registers the
    /// same buffers (sized by the plan, the same on every rank) with the
    /// same communicators in the same order (the order they were made in,
    /// which is the same on every rank).
    pub(super) fn register_buffers(&mut self) -> Result<(), Error> {
        let windows = match self.registration {
            Registration::On => false,
            Registration::Symmetric => true,
            Registration::Off | Registration::Unavailable => return Ok(()),
        };
        let (send, recv) = (&self.send, &self.recv);
        let mut result = Ok(());
        for (_, comm) in every_comm(&mut self.comm, &mut self.p2p, &mut self.sub, &mut self.groups) {
            for memory in [send, recv] {
                let registered = if windows {
                    comm.register_window(memory)
                } else {
                    comm.register(memory)
                };
                if let Err(e) = registered {
                    result = Err(e);
                }
            }
        }
        result.or_else(|e| self.fail(e))
    }

    /// The header's lines on registration: what `-R` did, and each
    /// communicator NCCL gave no symmetric window, with why where the
    /// release tells.
    pub(super) fn registration_notes(&self) -> Vec<String> {
        let mut notes = match self.registration {
            Registration::Off => return Vec::new(),
            Registration::On => vec!["buffers registered with ncclCommRegister on every communicator (-R)".into()],
            Registration::Symmetric => vec![
                "buffers registered as symmetric windows with ncclCommWindowRegister on every communicator (-R 2)"
                    .into(),
            ],
            Registration::Unavailable => vec![format!(
                "-R: ncclCommRegister is missing from the NCCL library of at least one rank ({} here); \
                 buffers are not registered",
                self.library.describe()
            )],
        };
        let without: Vec<String> = named_comms(&self.comm, &self.p2p, &self.sub, &self.groups)
            .filter(|(_, comm)| [&self.send, &self.recv].iter().any(|m| comm.held(m) == Held::NoWindow))
            .map(|(name, _)| name)
            .collect();
        if !without.is_empty() {
            notes.push(format!(
                "-R 2: NCCL returned no symmetric window on {} ({}); \
                 rows on {} run unregistered (register column false)",
                without.join(", "),
                no_window_reason(self.library.version(), &|name| std::env::var(name).ok()),
                if without.len() == 1 { "it" } else { "them" }
            ));
        }
        notes
    }

    /// The communicators `call` runs on: its group's, sendrecv's (where
    /// there is one), the two of a hierarchical all-reduce, or the world's.
    fn comms_of(&self, call: &Call) -> Vec<&Comm> {
        if let Some(SubGroup(g)) = call.group {
            return self.groups.get(g).and_then(Option::as_ref).into_iter().collect();
        }
        if call.collective == Collective::AllReduce && !call.hierarchy.is_flat() {
            return self.sub.iter().flat_map(SubComms::comms).collect();
        }
        match (&self.p2p, call.collective == Collective::SendRecv) {
            (Some(p2p), true) => vec![p2p],
            _ => self.comm.iter().collect(),
        }
    }
}

impl Registrations for NcclBackend {
    /// The weakest registration of the buffers on the communicators the
    /// call runs on: `Symmetric` only where every one holds windows,
    /// `Buffers` where every one holds a handle, else `Off` (a declined
    /// window, a library without ncclCommRegister, or `-R 0`).
    fn registered(&self, call: &Call) -> Register {
        let comms = self.comms_of(call);
        let buffers = [&self.send, &self.recv];
        let level = |held: Held| match held {
            Held::Window => 2,
            Held::Handle => 1,
            Held::Nothing | Held::NoWindow => 0,
        };
        let weakest = comms
            .iter()
            .flat_map(|c| buffers.iter().filter(|m| m.len_bytes() > 0).map(|m| level(c.held(m))))
            .min();
        match weakest {
            Some(2) => Register::Symmetric,
            Some(1) => Register::Buffers,
            _ => Register::Off,
        }
    }
}

/// Why NCCL `version` returns success and no window, as its source says
/// for that release, with the variables of this process that decide it.
pub fn no_window_reason(version: NcclVersion, env: &dyn Fn(&str) -> Option<String>) -> String {
    let v = |minor: u32, patch: u32| NcclVersion::new(2, minor, patch);
    let rule = if version < v(28, 0) {
        // v2.27.7-1 src/register/register.cc:209
        format!(
            "NCCL {version} makes none where local registration is off (NCCL_LOCAL_REGISTER=0) \
             or cuMem is (NCCL_CUMEM_ENABLE=0, or a driver before CUDA 12.0)"
        )
    } else if version < v(29, 0) {
        // v2.28.9-1 src/dev_runtime.cc:902 (and 593-597: without symmetric
        // memory but with local registration, a local handle as window)
        format!(
            "NCCL {version} makes none where symmetric memory is unsupported and NCCL_LOCAL_REGISTER=0; \
             symmetric memory needs NCCL_WIN_ENABLE, cuMem and CUDA P2P between the GPUs{}",
            if version < v(28, 7) { ", and one node" } else { "" }
        )
    } else {
        // v2.29.7-1 src/init.cc:1475-1476 and src/dev_runtime.cc:1076,
        // v2.30.7-1 src/init.cc:1674-1675
        format!(
            "NCCL {version} makes none where symmetric memory is unsupported: a communicator across \
             more than one NVLink domain without GIN, NCCL_WIN_ENABLE=0, cuMem off, or GPUs without CUDA P2P"
        )
    };
    let set: Vec<String> = ["NCCL_WIN_ENABLE", "NCCL_CUMEM_ENABLE", "NCCL_LOCAL_REGISTER"]
        .iter()
        .filter_map(|name| env(name).map(|value| format!("{name}={value}")))
        .collect();
    if set.is_empty() {
        rule
    } else {
        format!("{rule}; here {}", set.join(", "))
    }
}

/// Every communicator a buffer is registered with, with its name for the
/// header: the flat one, sendrecv's, the hierarchical modes' and every
/// split group, in the order they were made (the same on every rank).
pub(super) fn every_comm<'a>(
    comm: &'a mut Option<Comm>,
    p2p: &'a mut Option<Comm>,
    sub: &'a mut Option<SubComms>,
    groups: &'a mut [Option<Comm>],
) -> impl Iterator<Item = (String, &'a mut Comm)> {
    let world = comm.iter_mut().map(|c| ("the world communicator".to_string(), c));
    let p2p = p2p.iter_mut().map(|c| ("sendrecv's communicator".to_string(), c));
    let sub = sub
        .iter_mut()
        .flat_map(|s| s.named_comms_mut())
        .map(|(n, c)| (n.to_string(), c));
    let groups = groups
        .iter_mut()
        .enumerate()
        .filter_map(|(g, c)| c.as_mut().map(|c| (format!("sub-communicator {g}"), c)));
    world.chain(p2p).chain(sub).chain(groups)
}

/// `every_comm`, read-only.
fn named_comms<'a>(
    comm: &'a Option<Comm>,
    p2p: &'a Option<Comm>,
    sub: &'a Option<SubComms>,
    groups: &'a [Option<Comm>],
) -> impl Iterator<Item = (String, &'a Comm)> {
    let world = comm.iter().map(|c| ("the world communicator".to_string(), c));
    let p2p = p2p.iter().map(|c| ("sendrecv's communicator".to_string(), c));
    let sub = sub
        .iter()
        .flat_map(|s| s.names().into_iter().zip(s.comms()))
        .map(|(n, c)| (n.to_string(), c));
    let groups = groups
        .iter()
        .enumerate()
        .filter_map(|(g, c)| c.as_ref().map(|c| (format!("sub-communicator {g}"), c)));
    world.chain(p2p).chain(sub).chain(groups)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reason_for_no_window_follows_the_release_and_names_the_variables_set() {
        let none = |_: &str| None;
        let r = no_window_reason(NcclVersion::new(2, 27, 7), &none);
        assert!(r.contains("NCCL_LOCAL_REGISTER=0") && r.contains("cuMem"), "{r}");
        let r = no_window_reason(NcclVersion::new(2, 28, 3), &none);
        assert!(r.contains("and one node"), "{r}");
        let r = no_window_reason(NcclVersion::new(2, 28, 9), &none);
        assert!(!r.contains("one node") && r.contains("NCCL_LOCAL_REGISTER=0"), "{r}");
        let r = no_window_reason(NcclVersion::new(2, 29, 7), &none);
        assert!(r.contains("more than one NVLink domain without GIN"), "{r}");
        assert!(!r.contains("; here"), "{r}");
        let env = |name: &str| (name == "NCCL_WIN_ENABLE").then(|| "0".to_string());
        let r = no_window_reason(NcclVersion::new(2, 32, 3), &env);
        assert!(r.ends_with("; here NCCL_WIN_ENABLE=0"), "{r}");
    }
}
