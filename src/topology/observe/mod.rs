//! The transport a run actually used, beside the one it asked for: the
//! CSV's `transport_observed`, and the check that fails a run whose
//! profile was not honoured.
//!
//! Two sources. MPI: the components Open MPI kept after MPI_Init, read
//! from its valid control variables (`ompi`). NCCL: each rank's private INFO log, read once the
//! communicator is initialised (`nccl_log`). Each rank observes its own
//! view; `merge` makes the CSV value from all of them.

pub mod nccl_log;
pub mod ompi;

use crate::error::Error;
use crate::topology::profile::{EnvPlan, NcclLogging, Profile};

/// What `transport_observed` says when nothing could be observed.
pub const UNKNOWN: &str = "unknown";

/// Parts of one rank's observation are joined by this in the CSV value.
const SEPARATOR: &str = " + ";

/// One rank's observation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Observed {
    /// This rank's `transport_observed`.
    pub text: String,
    /// Why nothing (or only part) could be observed, for the header.
    pub note: Option<String>,
    /// Why the observation contradicts the requested profile.
    pub contradiction: Option<String>,
}

impl Observed {
    pub fn unknown(note: impl Into<String>) -> Observed {
        Observed {
            text: UNKNOWN.into(),
            note: Some(note.into()),
            contradiction: None,
        }
    }

    /// From the names of the valid control variables after MPI_Init
    /// (`Err`: MPI_T failed, with why).
    pub fn from_mpi(profile: Profile, cvar_names: Result<Vec<String>, String>) -> Observed {
        let names = match cvar_names {
            Ok(names) => names,
            Err(why) => return Observed::unknown(format!("MPI_T control variables unreadable: {why}")),
        };
        match ompi::Selection::from_cvar_names(&names) {
            Some(selection) => Observed {
                text: selection.text(),
                note: None,
                contradiction: selection.contradiction(profile),
            },
            None => Observed::unknown(
                "the MPI library exposes no Open MPI pml/btl control variables (MPICH and others are not observed)",
            ),
        }
    }

    /// From this rank's NCCL log, once its communicator is initialised
    /// (the NCCL backend's `TransportObserver::observe_transport`). `same_node(a, b)`:
    /// ranks `a` and `b` share a node. collbench's private log stays where
    /// it is: the ranks of one process (`-g`) share it, each reads it, and
    /// the run removes it when it ends well (`EnvPlan::remove_nccl_log`);
    /// where it contradicts the profile it is the evidence, and the
    /// message names it (the run then fails and keeps it).
    pub fn from_nccl_log(
        profile: Profile,
        logging: &NcclLogging,
        same_node: &dyn Fn(usize, usize) -> bool,
    ) -> Observed {
        let path = match logging {
            NcclLogging::Private(path) => path,
            NcclLogging::UserOwned(var) => {
                return Observed::unknown(format!(
                    "{var} was set before the run, so NCCL's log is not collbench's"
                ));
            }
            NcclLogging::NotUsed => return Observed::unknown("NCCL's log was not requested"),
        };
        let mut observed = match std::fs::read_to_string(path) {
            Ok(text) => Observed::from_nccl_text(profile, &text, same_node),
            Err(e) => return Observed::unknown(format!("cannot read NCCL's log {}: {e}", path.display())),
        };
        if let Some(why) = &mut observed.contradiction {
            *why += &format!("; NCCL's log is kept at {}", path.display());
        }
        observed
    }

    /// From the text of one rank's NCCL log.
    pub fn from_nccl_text(profile: Profile, text: &str, same_node: &dyn Fn(usize, usize) -> bool) -> Observed {
        let log = nccl_log::parse(text);
        let labels = log.labels();
        if labels.is_empty() {
            // One rank, or connections made lazily (NCCL_RUNTIME_CONNECT=1
            // set by the user): nothing to judge.
            return Observed::unknown("NCCL's log has no channel connections (one rank, or lazy connection set up)");
        }
        Observed {
            text: labels.join(SEPARATOR),
            note: None,
            contradiction: log.contradiction(profile, same_node),
        }
    }

    /// `Err` (exit 1), one line naming the requested and the observed
    /// transport, when they contradict. `plan` names the variables the
    /// environment kept, the usual cause.
    pub fn check(&self, plan: &EnvPlan) -> Result<(), Error> {
        let Some(why) = &self.contradiction else {
            return Ok(());
        };
        let cause = if plan.kept.is_empty() {
            "see `collbench run --transport help` for what the profile sets".to_string()
        } else {
            let kept: Vec<String> = plan
                .kept
                .iter()
                .map(|k| format!("{}={}", k.name, k.user_value))
                .collect();
            format!(
                "{} {} set before the run and {} over the profile",
                kept.join(" "),
                if kept.len() == 1 { "was" } else { "were" },
                if kept.len() == 1 { "wins" } else { "win" }
            )
        };
        Err(Error::runtime(format!(
            "transport {} was requested but {} was observed: {why} ({cause})",
            plan.profile, self.text
        )))
    }
}

/// The CSV value from every rank's text: each distinct part once, in rank
/// order; `unknown` only when no rank observed anything.
pub fn merge(texts: &[String]) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for text in texts {
        for part in text.split(SEPARATOR).map(str::trim) {
            if !part.is_empty() && part != UNKNOWN && !parts.contains(&part) {
                parts.push(part);
            }
        }
    }
    if parts.is_empty() {
        UNKNOWN.into()
    } else {
        parts.join(SEPARATOR)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(profile: Profile) -> EnvPlan {
        EnvPlan::new(profile, None, &|_| None)
    }

    #[test]
    fn ranks_merge_into_every_distinct_transport_in_rank_order() {
        let texts = vec![
            "P2P/CUMEM(NVL) + NET/IB/GDRDMA".to_string(),
            "P2P/CUMEM(NVL)".to_string(),
            "unknown".to_string(),
            "NET/IB/GDRDMA/PXN".to_string(),
        ];
        assert_eq!(merge(&texts), "P2P/CUMEM(NVL) + NET/IB/GDRDMA + NET/IB/GDRDMA/PXN");
        assert_eq!(merge(&["ob1/vader".into(), "ob1/vader".into()]), "ob1/vader");
        assert_eq!(merge(&["unknown".into()]), "unknown");
        assert_eq!(merge(&[]), "unknown");
    }

    #[test]
    fn a_contradiction_fails_with_one_line_naming_both() {
        let names: Vec<String> = ["pml_ob1_priority", "btl_self_priority", "btl_vader_priority"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let o = Observed::from_mpi(Profile::Tcp, Ok(names.clone()));
        assert_eq!(o.text, "ob1/vader");
        let env = |k: &str| (k == "OMPI_MCA_btl").then(|| "self,vader".to_string());
        let e = o.check(&EnvPlan::new(Profile::Tcp, None, &env)).unwrap_err();
        assert_eq!(e.exit_code(), 1);
        let m = e.to_string();
        assert!(
            m.starts_with("transport tcp was requested but ob1/vader was observed"),
            "{m}"
        );
        assert!(
            m.contains("OMPI_MCA_btl=self,vader was set before the run and wins"),
            "{m}"
        );
        assert!(!m.contains('\n'));
        let m = o.check(&plan(Profile::Tcp)).unwrap_err().to_string();
        assert!(m.contains("--transport help"), "{m}");
        assert!(
            Observed::from_mpi(Profile::Shm, Ok(names))
                .check(&plan(Profile::Shm))
                .is_ok()
        );
    }

    #[test]
    fn what_cannot_be_observed_is_unknown_with_a_reason_and_never_fails() {
        let o = Observed::from_mpi(Profile::Tcp, Ok(vec!["MPIR_CVAR_ASYNC_PROGRESS".into()]));
        assert_eq!(o.text, "unknown");
        assert!(o.note.as_deref().unwrap_or("").contains("MPICH"));
        assert!(o.check(&plan(Profile::Tcp)).is_ok());
        let o = Observed::from_mpi(Profile::Shm, Err("MPI_T_init_thread failed".into()));
        assert!(o.check(&plan(Profile::Shm)).is_ok());
        let o = Observed::from_nccl_log(
            Profile::Nvlink,
            &NcclLogging::UserOwned("NCCL_DEBUG=WARN".into()),
            &|_, _| true,
        );
        assert_eq!(o.text, "unknown");
        let o = Observed::from_nccl_text(Profile::Ib, "h:1:1 [0] NCCL INFO Using network IB\n", &|_, _| true);
        assert_eq!(o.text, "unknown");
        assert!(o.check(&plan(Profile::Ib)).is_ok());
    }

    #[test]
    fn an_nccl_log_file_is_read_by_every_rank_and_judged() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rank.log");
        let shm = "h:1:1 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via SHM/direct/direct\n";
        std::fs::write(&path, shm).unwrap();
        let logging = NcclLogging::Private(path.clone());
        let o = Observed::from_nccl_log(Profile::Pcie, &logging, &|_, _| true);
        assert_eq!(o.text, "SHM");
        assert!(o.check(&plan(Profile::Pcie)).is_ok());
        // another rank of the process reads the same file
        let again = Observed::from_nccl_log(Profile::Pcie, &logging, &|_, _| true);
        assert_eq!(again.text, "SHM");
        let o = Observed::from_nccl_log(Profile::Nvlink, &logging, &|_, _| true);
        let m = o.check(&plan(Profile::Nvlink)).unwrap_err().to_string();
        assert!(m.contains("host memory (SHM)"), "{m}");
        assert!(m.contains(&format!("kept at {}", path.display())), "{m}");
        assert!(path.exists(), "kept as evidence");
        std::fs::remove_file(&path).unwrap();
        let o = Observed::from_nccl_log(Profile::Pcie, &logging, &|_, _| true);
        assert!(o.note.unwrap().contains("cannot read"));
    }
}
