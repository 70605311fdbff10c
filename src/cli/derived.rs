//! What derives from the options' definitions: each option's value
//! (`options_of`, `RunArgs::options`), a suite launch's arguments, the
//! cross-rank digest of any command's options (`digest_of`) and the
//! docs/options.md table.

use clap::ArgAction;
use serde::Serialize;

use crate::error::Error;

use super::{Cli, OUTPUT, RunArgs, parse_run, run_command};

/// One option of a command with its value in given arguments.
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
        options_of(&run_command(), self)
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
}

/// Every option of `command` (a subcommand as clap defines it), in
/// definition order, with its value in `args` (its parsed options, whose
/// serialization is flat and keyed by clap's ids).
pub fn options_of(command: &clap::Command, args: &impl Serialize) -> Result<Vec<OptionValue>, Error> {
    let values = match serde_json::to_value(args) {
        Ok(serde_json::Value::Object(map)) => map,
        Ok(_) => return Err(Error::runtime("internal error: the options are not a map")),
        Err(e) => return Err(Error::usage(format!("the options cannot be written out: {e}"))),
    };
    let mut out = Vec::new();
    for arg in command.get_arguments() {
        let id = arg.get_id().as_str();
        let Some(value) = values.get(id) else {
            continue;
        };
        let flag = match (arg.get_long(), arg.is_positional()) {
            (Some(long), _) => format!("--{long}"),
            (None, true) => id.to_uppercase(),
            (None, false) => continue,
        };
        let is_flag = matches!(arg.get_action(), ArgAction::SetTrue);
        let value = match value {
            serde_json::Value::Null => None,
            serde_json::Value::String(s) => Some(s.clone()),
            other => Some(other.to_string()),
        };
        out.push(OptionValue {
            id: id.to_string(),
            flag,
            is_flag,
            heading: arg.get_help_heading().map(str::to_string),
            value,
        });
    }
    Ok(out)
}

/// What every rank must agree on before the first collective, as
/// (option, value): the collbench version, the subcommand, then every
/// option of `args` (the parsed options of `collbench SUBCOMMAND`) but the
/// outputs (rank 0's business) and `--config` (its keys are in the other
/// options already). One digest for every command: a rank given other
/// options than rank 0's is found at the first agreement.
pub fn digest_of(subcommand: &str, args: &impl Serialize) -> Result<Vec<(String, String)>, Error> {
    let mut cli = <Cli as clap::CommandFactory>::command();
    cli.build();
    let command = cli
        .find_subcommand(subcommand)
        .ok_or_else(|| Error::runtime(format!("internal error: no subcommand {subcommand}")))?;
    let mut fields = vec![
        ("collbench version".to_string(), env!("CARGO_PKG_VERSION").to_string()),
        ("command".to_string(), subcommand.to_string()),
    ];
    for o in options_of(command, args)? {
        if o.heading.as_deref() == Some(OUTPUT) || o.id == "config" {
            continue;
        }
        fields.push((o.flag, o.value.unwrap_or_default()));
    }
    Ok(fields)
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
