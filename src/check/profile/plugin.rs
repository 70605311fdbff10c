//! The plugin environment a profile's thresholds were measured with (a
//! `[plugin]` table, docs/check.md): an NCCL network plugin and the
//! variables its source set (Google Cloud's GPUDirect-TCPX, TCPXO and gIB
//! plugins, say). Where a rank's environment lacks it, the figures are not
//! comparable with the thresholds: the profile's checks are not judged,
//! and `PluginNeed::missing` says why, as a value for the verdict.

use serde::Deserialize;
use toml::Spanned;

use super::read::Reader;
use crate::error::Error;

/// What the `[plugin]` table holds, as serde reads it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPlugin {
    name: String,
    source: Option<String>,
    /// Variables that must be set: `NAME` (any value) or `NAME=VALUE`.
    #[serde(default)]
    env: Vec<String>,
    /// An entry LD_LIBRARY_PATH must hold: where the plugin library is.
    library_path: Option<String>,
}

/// One variable the plugin environment needs.
#[derive(Clone, Debug, PartialEq)]
pub struct NeededVar {
    pub name: String,
    /// The value it must have; `None`: any, but set and not empty.
    pub value: Option<String>,
}

/// The plugin environment a profile's thresholds need.
#[derive(Clone, Debug, PartialEq)]
pub struct PluginNeed {
    pub name: String,
    pub source: String,
    pub env: Vec<NeededVar>,
    pub library_path: Option<String>,
    /// The `[plugin]` table's line.
    pub line: usize,
}

impl PluginNeed {
    /// Why `env` (a rank's environment) lacks this plugin environment, or
    /// `None` where it holds it: every variable set (to its value, where
    /// one is given) and the plugin's folder on LD_LIBRARY_PATH.
    pub fn missing(&self, env: &dyn Fn(&str) -> Option<String>) -> Option<String> {
        let mut lacks: Vec<String> = Vec::new();
        for var in &self.env {
            let have = env(&var.name).filter(|v| !v.is_empty());
            match (&var.value, have) {
                (_, None) => lacks.push(format!("{} unset", var.name)),
                (Some(want), Some(have)) if *want != have => {
                    lacks.push(format!("{}={have} where it needs {want}", var.name))
                }
                _ => {}
            }
        }
        if let Some(dir) = &self.library_path {
            let path = env("LD_LIBRARY_PATH").unwrap_or_default();
            let trimmed = |p: &str| p.trim_end_matches('/').to_string();
            if !path.split(':').any(|p| trimmed(p) == trimmed(dir)) {
                lacks.push(format!("LD_LIBRARY_PATH holds no {dir}"));
            }
        }
        (!lacks.is_empty()).then(|| {
            format!(
                "its thresholds were measured with the {} plugin environment ({}), which this rank lacks: {}",
                self.name,
                self.source,
                lacks.join(", ")
            )
        })
    }
}

impl Reader<'_> {
    /// The `[plugin]` table: a name, a source, and at least one variable
    /// or a library path.
    pub(super) fn plugin(&self, raw: Option<&Spanned<RawPlugin>>) -> Result<Option<PluginNeed>, Error> {
        let Some(raw) = raw else {
            return Ok(None);
        };
        let span = raw.span();
        let p = raw.get_ref();
        let name = p.name.trim().to_string();
        let source = p.source.as_deref().map(str::trim).unwrap_or_default().to_string();
        if name.is_empty() || source.is_empty() {
            return Err(self.err_at(
                span,
                "[plugin] needs a name and a source (where the thresholds' plugin environment comes from)",
            ));
        }
        if p.env.is_empty() && p.library_path.is_none() {
            return Err(self.err_at(
                span,
                "[plugin] names nothing to check: give env = [\"NAME\", \"NAME=VALUE\"] or library_path",
            ));
        }
        let mut env = Vec::new();
        for entry in &p.env {
            let (var, value) = match entry.split_once('=') {
                Some((k, v)) => (k.trim(), Some(v.trim().to_string())),
                None => (entry.trim(), None),
            };
            if var.is_empty() || !var.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return Err(self.err_at(span, format!("[plugin] env entry '{entry}': use NAME or NAME=VALUE")));
            }
            env.push(NeededVar {
                name: var.to_string(),
                value,
            });
        }
        Ok(Some(PluginNeed {
            name,
            source,
            env,
            library_path: p.library_path.as_deref().map(|d| d.trim().to_string()),
            line: self.line_of(span),
        }))
    }
}

#[cfg(test)]
mod tests {
    use crate::check::profile::parse;

    const BASE: &str = "name = \"p\"\ndescription = \"d\"\n";

    fn with(plugin: &str) -> String {
        format!(
            "{BASE}{plugin}\n[[check]]\nname = \"c\"\nscope = \"job\"\ncollective = \"all_reduce\"\nsize = \"1M\"\nfail_below = {{ value = 1.0, source = \"s\" }}\n"
        )
    }

    #[test]
    fn a_plugin_environment_is_read_and_its_absence_is_a_reason_not_a_failure() {
        let text = with(
            "[plugin]\nname = \"GPUDirect-TCPXO\"\nsource = \"the scanner's script\"\nenv = [\"NCCL_FASTRAK_CTRL_DEV\", \"NCCL_TUNER_PLUGIN=libnccl-tuner.so\"]\nlibrary_path = \"/usr/local/tcpxo/lib64\"\n",
        );
        let p = parse(&text, "p.toml").unwrap();
        let plugin = p.plugin.as_ref().unwrap();
        assert_eq!(plugin.line, 3);
        let full = |name: &str| match name {
            "NCCL_FASTRAK_CTRL_DEV" => Some("eth0".to_string()),
            "NCCL_TUNER_PLUGIN" => Some("libnccl-tuner.so".to_string()),
            "LD_LIBRARY_PATH" => Some("/x:/usr/local/tcpxo/lib64/".to_string()),
            _ => None,
        };
        assert_eq!(plugin.missing(&full), None);
        let bare = |_: &str| None;
        let why = plugin.missing(&bare).unwrap();
        assert!(
            why.contains("GPUDirect-TCPXO plugin environment (the scanner's script)"),
            "{why}"
        );
        assert!(
            why.ends_with(
                "NCCL_FASTRAK_CTRL_DEV unset, NCCL_TUNER_PLUGIN unset, LD_LIBRARY_PATH holds no /usr/local/tcpxo/lib64"
            ),
            "{why}"
        );
        let other = |name: &str| {
            (name == "NCCL_TUNER_PLUGIN")
                .then(|| "x.so".to_string())
                .or_else(|| full(name))
        };
        assert!(
            plugin
                .missing(&other)
                .unwrap()
                .ends_with("NCCL_TUNER_PLUGIN=x.so where it needs libnccl-tuner.so")
        );
        assert!(parse(&with(""), "p.toml").unwrap().plugin.is_none());
    }

    #[test]
    fn every_google_cloud_profile_names_the_plugin_its_threshold_was_measured_with() {
        let profiles = crate::check::shipped::all().unwrap();
        let gcp: Vec<_> = profiles.iter().filter(|p| p.name.starts_with("gcp-")).collect();
        assert_eq!(gcp.len(), 5);
        for p in gcp {
            let plugin = p
                .plugin
                .as_ref()
                .unwrap_or_else(|| panic!("{} has no [plugin]", p.name));
            assert!(
                plugin.source.contains("cluster-health-scanner at 81c525d"),
                "{}",
                p.name
            );
            // a machine without the plugin: not judged, with the file and line
            let why = p.not_judged(&|_| None).unwrap();
            assert!(
                why.starts_with(&format!(
                    "{}:{}: its thresholds were measured with ",
                    p.origin, plugin.line
                )),
                "{why}"
            );
        }
        // profiles without a plugin are always judged
        let local = profiles.iter().find(|p| p.name == "local-cpu").unwrap();
        assert_eq!(local.not_judged(&|_| None), None);
    }

    #[test]
    fn a_plugin_table_without_a_source_or_anything_to_check_is_refused_at_its_line() {
        for (table, needle) in [
            ("[plugin]\nname = \"x\"\nenv = [\"A\"]\n", "needs a name and a source"),
            ("[plugin]\nname = \"x\"\nsource = \"s\"\n", "names nothing to check"),
            (
                "[plugin]\nname = \"x\"\nsource = \"s\"\nenv = [\"A B\"]\n",
                "env entry 'A B'",
            ),
            (
                "[plugin]\nname = \"x\"\nsource = \"s\"\nenv = [\"A\"]\nfoo = 1\n",
                "unknown field",
            ),
        ] {
            let e = parse(&with(table), "p.toml").unwrap_err().to_string();
            assert!(e.starts_with("p.toml:3: ") || e.starts_with("p.toml:"), "{e}");
            assert!(e.contains(needle), "{table}: {e}");
        }
    }
}
