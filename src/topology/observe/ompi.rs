//! Which PML and BTLs Open MPI kept, read from the names of its valid MCA
//! variables (MPI_T's control variables; `backend::mpi::raw` reads them).
//!
//! Every MCA component registers its parameters as control variables
//! (`btl_tcp_if_include`, `pml_ob1_priority`, ...). When a framework
//! selects, Open MPI closes the components it did not select, and their
//! variables become invalid (MPI_T_cvar_get_info fails on their index). So
//! after MPI_Init, the PML whose variables are still valid is the one
//! selected, and the BTLs whose variables are valid are the ones with
//! modules. Measured on Open MPI 4.1.4: the default run keeps
//! `pml_ob1` and `btl_self, btl_tcp, btl_vader`; `OMPI_MCA_btl=self,vader`
//! keeps `btl_self, btl_vader`; `OMPI_MCA_pml=ucx` keeps only `pml_ucx`.
//!
//! What this cannot tell: which of several kept BTLs carried a given
//! message (ob1 picks per peer: shared memory to ranks on the node, the
//! network to the others), and which UCX transport UCX chose. Pure: the
//! names come from `backend::mpi::raw`.

use crate::topology::profile::Profile;

/// The selection, as far as the variables show it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Selection {
    /// The PML with valid variables (`ob1`, `ucx`, `cm`).
    pub pml: Option<String>,
    /// BTLs with valid variables, sorted.
    pub btls: Vec<String>,
    /// MTLs with valid variables, sorted (they matter only under `cm`).
    pub mtls: Vec<String>,
}

/// Open MPI's shared-memory BTLs: `vader` (1.8 to 4.1), `sm` (5.0), and
/// `smcuda`.
pub const SHARED_MEMORY_BTLS: [&str; 3] = ["vader", "sm", "smcuda"];

/// Components of `framework` named by `names` (`btl_tcp_...` -> `tcp`),
/// without the framework's own `base` variables, sorted and unique.
fn components<'a>(names: &[&'a str], framework: &str) -> Vec<&'a str> {
    let prefix = format!("{framework}_");
    let mut found: Vec<&str> = names
        .iter()
        .filter_map(|n| n.strip_prefix(&prefix))
        .filter_map(|rest| rest.split_once('_').map(|(component, _)| component))
        .filter(|c| !c.is_empty() && *c != "base")
        .collect();
    found.sort_unstable();
    found.dedup();
    found
}

impl Selection {
    /// The selection named by the valid control variables, or `None` when
    /// they are not Open MPI's (no `pml_*` component: MPICH, another MPI).
    pub fn from_cvar_names<S: AsRef<str>>(names: &[S]) -> Option<Selection> {
        let names: Vec<&str> = names.iter().map(AsRef::as_ref).collect();
        let pmls = components(&names, "pml");
        // `v` (message logging) and `monitoring` wrap the real PML.
        let pml = pmls
            .iter()
            .find(|p| !["v", "monitoring"].contains(p))
            .map(|p| p.to_string());
        pml.as_ref()?;
        Some(Selection {
            pml,
            btls: components(&names, "btl").into_iter().map(String::from).collect(),
            mtls: components(&names, "mtl").into_iter().map(String::from).collect(),
        })
    }

    fn has_btl(&self, names: &[&str]) -> bool {
        self.btls.iter().any(|b| names.contains(&b.as_str()))
    }

    /// `ob1/vader`, `ob1/tcp+vader`, `ucx`, `cm/psm2`: the PML, and for ob1
    /// the BTLs that reach other processes (`self` only loops back).
    pub fn text(&self) -> String {
        let pml = self.pml.as_deref().unwrap_or("unknown");
        match pml {
            "ob1" => {
                let btls: Vec<&str> = self.btls.iter().map(String::as_str).filter(|b| *b != "self").collect();
                if btls.is_empty() {
                    "ob1/self".into()
                } else {
                    format!("ob1/{}", btls.join("+"))
                }
            }
            "cm" if !self.mtls.is_empty() => format!("cm/{}", self.mtls.join("+")),
            other => other.into(),
        }
    }

    /// Why this selection contradicts `profile`, if it does.
    pub fn contradiction(&self, profile: Profile) -> Option<String> {
        let pml = self.pml.as_deref().unwrap_or("");
        match profile {
            Profile::Shm => {
                if pml != "ob1" {
                    Some(format!("the PML is {pml}, not ob1"))
                } else if !self.has_btl(&SHARED_MEMORY_BTLS) {
                    Some("no shared-memory BTL is loaded".into())
                } else {
                    let other: Vec<&str> = self
                        .btls
                        .iter()
                        .map(String::as_str)
                        .filter(|b| *b != "self" && !SHARED_MEMORY_BTLS.contains(b))
                        .collect();
                    (!other.is_empty()).then(|| format!("network BTLs are loaded too: {}", other.join(", ")))
                }
            }
            Profile::Tcp => {
                if pml != "ob1" {
                    Some(format!("the PML is {pml}, not ob1"))
                } else if !self.has_btl(&["tcp"]) {
                    Some("the TCP BTL is not loaded".into())
                } else if self.has_btl(&SHARED_MEMORY_BTLS) {
                    Some("a shared-memory BTL is loaded too, and ob1 prefers it between ranks of a node".into())
                } else {
                    None
                }
            }
            Profile::Ucx => (pml != "ucx").then(|| format!("the PML is {pml}, not ucx")),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Valid control variables after MPI_Init on Open MPI 4.1.4, a
    /// representative subset of each case measured on the development VM.
    fn names(btls: &[&str], pml: &str) -> Vec<String> {
        let mut v: Vec<String> = ["btl", "pml", "btl_base_verbose", "pml_base_verbose", "mtl_base_verbose"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        for b in btls {
            v.push(format!("btl_{b}_priority"));
            v.push(format!("btl_{b}_exclusivity"));
        }
        v.push(format!("pml_{pml}_priority"));
        v.extend(["mtl_ofi_provider_include", "mtl_psm2_priority", "coll_tuned_priority"].map(String::from));
        v
    }

    #[test]
    fn the_default_selection_is_ob1_with_every_btl_that_has_modules() {
        let s = Selection::from_cvar_names(&names(&["tcp", "vader", "self"], "ob1")).unwrap();
        assert_eq!(s.pml.as_deref(), Some("ob1"));
        assert_eq!(s.btls, vec!["self", "tcp", "vader"]);
        assert_eq!(s.mtls, vec!["ofi", "psm2"]);
        assert_eq!(s.text(), "ob1/tcp+vader");
        assert_eq!(s.contradiction(Profile::Auto), None);
    }

    #[test]
    fn the_shm_and_tcp_profiles_read_back_as_one_btl_each() {
        let shm = Selection::from_cvar_names(&names(&["vader", "self"], "ob1")).unwrap();
        assert_eq!(shm.text(), "ob1/vader");
        assert_eq!(shm.contradiction(Profile::Shm), None);
        let tcp = Selection::from_cvar_names(&names(&["tcp", "self"], "ob1")).unwrap();
        assert_eq!(tcp.text(), "ob1/tcp");
        assert_eq!(tcp.contradiction(Profile::Tcp), None);
        // Open MPI 5 calls the shared-memory BTL `sm`.
        let sm = Selection::from_cvar_names(&names(&["sm", "self"], "ob1")).unwrap();
        assert_eq!(sm.contradiction(Profile::Shm), None);
    }

    #[test]
    fn a_selection_that_differs_from_the_profile_is_a_contradiction() {
        let shm = Selection::from_cvar_names(&names(&["vader", "self"], "ob1")).unwrap();
        assert!(
            shm.contradiction(Profile::Tcp)
                .unwrap()
                .contains("TCP BTL is not loaded")
        );
        let both = Selection::from_cvar_names(&names(&["vader", "tcp", "self"], "ob1")).unwrap();
        assert!(both.contradiction(Profile::Tcp).unwrap().contains("shared-memory"));
        assert!(both.contradiction(Profile::Shm).unwrap().contains("tcp"));
        let ucx = Selection::from_cvar_names(&names(&[], "ucx")).unwrap();
        assert_eq!(ucx.text(), "ucx");
        assert_eq!(ucx.contradiction(Profile::Ucx), None);
        assert!(ucx.contradiction(Profile::Shm).unwrap().contains("PML is ucx"));
        assert!(shm.contradiction(Profile::Ucx).unwrap().contains("PML is ob1"));
    }

    #[test]
    fn wrapper_pmls_and_non_open_mpi_libraries_are_recognised() {
        let mut v = names(&["vader", "self"], "ob1");
        v.push("pml_v_verbose".into());
        v.push("pml_monitoring_enable".into());
        assert_eq!(Selection::from_cvar_names(&v).unwrap().pml.as_deref(), Some("ob1"));
        let mpich = ["MPIR_CVAR_CH4_NETMOD", "MPIR_CVAR_NOLOCAL"];
        assert_eq!(Selection::from_cvar_names(&mpich), None);
        let cm = Selection {
            pml: Some("cm".into()),
            btls: vec![],
            mtls: vec!["psm2".into()],
        };
        assert_eq!(cm.text(), "cm/psm2");
    }
}
