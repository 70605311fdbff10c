//! What derives from `RunArgs`' definitions: the lists of options other
//! commands refuse, each option's value (`RunArgs::options`), a suite
//! launch's arguments, the cross-rank digest and the docs/options.md table.

use clap::ArgAction;

use crate::error::Error;

use super::{OUTPUT, RunArgs, parse_run, run_command};

/// `run`'s options that mean nothing for a step of `workload` or `replay`,
/// by clap id, each with what to use instead where there is something:
/// the one list both the refusal (`RunArgs::step_refusal`) and the help
/// (hidden there, so it lists only what applies) come from.
pub const STEP_REFUSED: [(&str, &str); 30] = [
    ("minbytes", ""),
    ("maxbytes", ""),
    ("stepfactor", ""),
    ("stepbytes", ""),
    ("iters", "use --steps"),
    ("min_time", ""),
    ("precision", ""),
    ("max_time", ""),
    ("per_iter", ""),
    ("agg_iters", ""),
    ("cuda_graph", ""),
    ("warmup", "use --warmup-steps"),
    ("cycles", "use --steps"),
    ("collectives", ""),
    ("dtype", "use --param-dtype, --grad-dtype"),
    ("op", ""),
    ("root", ""),
    ("hierarchy", ""),
    ("alltoallv_spread", ""),
    ("alltoallv_matrix", ""),
    ("alltoallv_matrix_scale", ""),
    ("split", ""),
    ("split_mask", ""),
    ("average", "times are the slowest rank's"),
    ("json", ""),
    ("output_format", ""),
    ("timestamps", ""),
    ("rotate", ""),
    ("phase_times", ""),
    ("config", ""),
];

/// `run`'s options that mean nothing for `collbench links`, by clap id,
/// with what to use instead where there is something: the refusal
/// (`RunArgs::refusal`) and the help (hidden there) come from it.
pub const LINKS_REFUSED: [(&str, &str); 26] = [
    ("minbytes", "use --size"),
    ("maxbytes", "use --size"),
    ("stepfactor", ""),
    ("stepbytes", ""),
    ("min_time", "use -n"),
    ("precision", "use -n and --samples"),
    ("max_time", ""),
    ("per_iter", ""),
    ("straggler_threshold", ""),
    ("rotate", ""),
    ("agg_iters", ""),
    ("cuda_graph", ""),
    ("register", ""),
    ("average", "a pair's time is its slower end's"),
    ("blocking", ""),
    ("cycles", "use --samples"),
    ("collectives", ""),
    ("dtype", ""),
    ("op", ""),
    ("root", ""),
    ("hierarchy", ""),
    ("phase_times", ""),
    ("no_progress", ""),
    ("progress", ""),
    ("config", ""),
    ("no_rotate", ""),
];

/// `run`'s options that mean nothing for `collbench check` (the profile
/// says what to measure and how often), each with what to use instead.
pub const CHECK_REFUSED: [(&str, &str); 26] = [
    ("minbytes", "the profile sets each check's size"),
    ("maxbytes", "the profile sets each check's size"),
    ("stepfactor", ""),
    ("stepbytes", ""),
    ("iters", "the profile sets each check's iterations"),
    ("min_time", ""),
    ("precision", ""),
    ("max_time", ""),
    ("per_iter", ""),
    ("straggler_threshold", ""),
    ("agg_iters", ""),
    ("cuda_graph", ""),
    ("warmup", "the profile sets each check's warm-up"),
    (
        "collectives",
        "the profile names each check's collective; --only picks checks",
    ),
    ("dtype", ""),
    ("op", ""),
    ("root", ""),
    ("hierarchy", ""),
    ("average", "a group's time is its ranks' mean, as nccl-tests'"),
    ("blocking", ""),
    ("csv", "use --out"),
    ("json", "use --out"),
    ("rotate", ""),
    ("phase_times", ""),
    ("label", ""),
    ("config", ""),
];

/// One option of `collbench run` with its value in a given `RunArgs`.
#[derive(Clone, Debug, PartialEq)]
pub struct OptionValue {
    /// clap's id: the field name.
    pub id: String,
    /// `--maxbytes`.
    pub flag: String,
    /// A flag without a value (`--per-iter`): `value` is "true" or "false".
    pub is_flag: bool,
    pub heading: Option<String>,
    /// The value as it would be typed; `None` when not given and without a
    /// default.
    pub value: Option<String>,
}

impl RunArgs {
    /// Every option at its default.
    pub fn defaults() -> RunArgs {
        match parse_run(std::iter::empty::<String>()) {
            Ok(args) => args,
            // The definitions above give every required value a default;
            // a test parses them.
            Err(e) => panic!("collbench run has an option without a default: {e}"),
        }
    }

    /// Every option, in definition order, with its value here.
    pub fn options(&self) -> Result<Vec<OptionValue>, Error> {
        let values = match serde_json::to_value(self) {
            Ok(serde_json::Value::Object(map)) => map,
            Ok(_) => return Err(Error::runtime("internal error: run options are not a map")),
            Err(e) => return Err(Error::usage(format!("the run's options cannot be written out: {e}"))),
        };
        let command = run_command();
        let mut out = Vec::new();
        for arg in command.get_arguments() {
            let id = arg.get_id().as_str();
            let (Some(long), Some(value)) = (arg.get_long(), values.get(id)) else {
                continue;
            };
            let is_flag = matches!(arg.get_action(), ArgAction::SetTrue);
            let value = match value {
                serde_json::Value::Null => None,
                serde_json::Value::String(s) => Some(s.clone()),
                other => Some(other.to_string()),
            };
            out.push(OptionValue {
                id: id.to_string(),
                flag: format!("--{long}"),
                is_flag,
                heading: arg.get_help_heading().map(str::to_string),
                value,
            });
        }
        Ok(out)
    }

    /// The arguments that give these options over the defaults: only what
    /// differs from them, as `--flag` or `--name=value` (so a value that
    /// starts with `-` stays a value).
    pub fn to_args(&self) -> Result<Vec<String>, Error> {
        let defaults = RunArgs::defaults().options()?;
        let mut args = Vec::new();
        for (o, d) in self.options()?.into_iter().zip(defaults) {
            if o.value == d.value {
                continue;
            }
            match (o.is_flag, o.value) {
                (true, Some(v)) if v == "true" => args.push(o.flag),
                (true, _) | (false, None) => {}
                (false, Some(v)) => args.push(format!("{}={v}", o.flag)),
            }
        }
        Ok(args)
    }

    /// What every rank must agree on before the first collective, as
    /// (option, value): every option but the outputs (rank 0's business)
    /// and `--config` (its keys are in the other options already), after
    /// the collbench version.
    pub fn digest(&self) -> Result<Vec<(String, String)>, Error> {
        let mut fields = vec![("collbench version".to_string(), env!("CARGO_PKG_VERSION").to_string())];
        for o in self.options()? {
            if o.heading.as_deref() == Some(OUTPUT) || o.id == "config" {
                continue;
            }
            fields.push((o.flag, o.value.unwrap_or_default()));
        }
        Ok(fields)
    }
}

impl RunArgs {
    /// The first option of `STEP_REFUSED` given a value other than its
    /// default, as a refusal names it: `-n/--iters (use --steps)`.
    pub fn step_refusal(&self) -> Result<Option<String>, Error> {
        self.refusal(&STEP_REFUSED)
    }

    /// The first option of `refused` (clap id, what to use instead) given
    /// a value other than its default, as a refusal names it.
    pub fn refusal(&self, refused: &[(&str, &str)]) -> Result<Option<String>, Error> {
        let defaults = RunArgs::defaults().options()?;
        let given = self.options()?;
        let command = run_command();
        for &(id, instead) in refused {
            let differs = |o: &&OptionValue| o.id == id && defaults.iter().any(|d| d.id == id && d.value != o.value);
            if !given.iter().any(|o| differs(&o)) {
                continue;
            }
            let arg = command.get_arguments().find(|a| a.get_id() == id);
            let long = arg.and_then(|a| a.get_long()).unwrap_or(id);
            let mut name = match arg.and_then(|a| a.get_short()) {
                Some(c) => format!("-{c}/--{long}"),
                None => format!("--{long}"),
            };
            if !instead.is_empty() {
                name += &format!(" ({instead})");
            }
            return Ok(Some(name));
        }
        Ok(None)
    }
}

/// docs/options.md's reference table of `collbench run` options, from the
/// definitions above: flag and value, default, help text.
pub fn run_options_markdown() -> String {
    let mut out = String::from("| option | default | meaning |\n|---|---|---|\n");
    for arg in run_command().get_arguments() {
        if arg.is_hide_set() || arg.get_long().is_none() || arg.get_id() == "help" {
            continue;
        }
        let switch = matches!(arg.get_action(), ArgAction::SetTrue);
        let mut flag = match arg.get_short() {
            Some(c) => format!("-{c}, --{}", arg.get_long().unwrap_or_default()),
            None => format!("--{}", arg.get_long().unwrap_or_default()),
        };
        if arg.get_action().takes_values() {
            let name = arg
                .get_value_names()
                .and_then(|n| n.first())
                .map(|n| n.to_string())
                .unwrap_or_default();
            let optional = arg.get_num_args().is_some_and(|n| n.min_values() == 0);
            flag += &if optional {
                format!(" [{name}]")
            } else {
                format!(" {name}")
            };
        }
        let help = arg.get_help().map(|h| h.to_string()).unwrap_or_default();
        let (meaning, stated) = match help.rsplit_once(" [default: ") {
            Some((text, rest)) => (text.to_string(), rest.strip_suffix(']').map(str::to_string)),
            None => (help.clone(), None),
        };
        let values: Vec<String> = arg
            .get_possible_values()
            .iter()
            .map(|v| v.get_name().to_string())
            .collect();
        let meaning = if values.is_empty() || switch {
            meaning
        } else {
            format!("{meaning}; one of {}", values.join(", "))
        };
        let default = match (arg.get_default_values().first(), stated) {
            _ if switch => "off".into(),
            (Some(d), _) => d.to_string_lossy().into_owned(),
            (None, Some(s)) => s,
            (None, None) if !arg.get_action().takes_values() => "off".into(),
            (None, None) => "none".into(),
        };
        let cell = |t: &str| t.replace('|', "\\|").replace('<', "&lt;").replace('>', "&gt;");
        out += &format!("| `{}` | {} | {} |\n", cell(&flag), cell(&default), cell(&meaning));
    }
    out
}
