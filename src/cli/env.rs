//! The environment variables of nccl-tests that `collbench run` reads,
//! each standing for one option: a set variable becomes that option's
//! argument, placed before the `--config` file's and the command line's
//! (which win, as the last value does). Its value is checked here by the
//! option's own parser, so that a bad one is one line naming the variable,
//! its value and what is allowed, never an option nobody gave; a variable
//! for alltoallv is ignored, with a note for the header, when the run
//! measures no alltoallv (docs/options.md, "Environment").

use super::run::{RunArgs, parse_run};
use crate::collective::Collective;

/// A variable and the option it sets.
pub struct EnvOption {
    pub var: &'static str,
    /// The option's long name.
    pub long: &'static str,
    /// Only alltoallv reads it.
    pub alltoallv: bool,
}

/// nccl-tests' variable of alltoallv's traffic matrix.
const MATRIX_FILE: &str = "NCCL_TESTS_ALLTOALLV_MATRIX_FILE";

/// Every variable `collbench run` reads for its options.
pub const ENV_OPTIONS: [EnvOption; 5] = [
    EnvOption {
        var: "NCCL_TESTS_ALLTOALLV_SPREAD",
        long: "alltoallv-spread",
        alltoallv: true,
    },
    EnvOption {
        var: MATRIX_FILE,
        long: "alltoallv-matrix",
        alltoallv: true,
    },
    EnvOption {
        var: "NCCL_TESTS_ALLTOALLV_MATRIX_SCALE",
        long: "alltoallv-matrix-scale",
        alltoallv: true,
    },
    EnvOption {
        var: "NCCL_TESTS_SPLIT",
        long: "split",
        alltoallv: false,
    },
    EnvOption {
        var: "NCCL_TESTS_SPLIT_MASK",
        long: "split-mask",
        alltoallv: false,
    },
];

/// What the environment adds to a run.
#[derive(Debug, Default, PartialEq)]
pub struct FromEnv {
    /// Arguments to place before the config file's and the command line's.
    pub args: Vec<String>,
    /// Variables ignored, one line each, for the header.
    pub notes: Vec<String>,
}

/// The arguments the variables of `env` give a run of `run` (parsed from
/// the command line and the config file alone), or the one line that
/// refuses a bad value.
pub fn from_env(run: &RunArgs, env: &dyn Fn(&str) -> Option<String>) -> Result<FromEnv, String> {
    let alltoallv = run.cases.collectives.values().contains(&Collective::AllToAllV);
    let mut out = FromEnv::default();
    for o in &ENV_OPTIONS {
        let Some(value) = env(o.var).filter(|v| !v.trim().is_empty()) else {
            continue;
        };
        if o.alltoallv && !alltoallv {
            out.notes
                .push(format!("{}={value} is ignored: this run measures no alltoallv", o.var));
            continue;
        }
        // a variable of a test this run has is checked by its option's
        // parser even where it goes unused (a scale without a matrix): a
        // typo is a mistake either way; those of a test it has not are
        // never read, as nccl-tests' other tests never read them
        let arg = format!("--{}={value}", o.long);
        // the value alone: the options it needs are checked with the rest
        if let Err(e) = parse_run([arg.as_str()])
            && e.kind() != clap::error::ErrorKind::MissingRequiredArgument
        {
            let why = std::error::Error::source(&e).map_or_else(|| super::one_line(&e), |s| s.to_string());
            return Err(format!(
                "{}={value}: {why} (it sets --{}; fix or unset it)",
                o.var, o.long
            ));
        }
        // as nccl-tests: a matrix gives the traffic, and only it is scaled
        let matrix = run.cases.alltoallv_matrix.is_some() || env(MATRIX_FILE).is_some_and(|v| !v.trim().is_empty());
        let unused = match o.long {
            "alltoallv-spread" if matrix => Some("a traffic matrix gives alltoallv's traffic"),
            "alltoallv-matrix-scale" if !matrix => Some("it scales a traffic matrix, and none is given"),
            _ => None,
        };
        if let Some(why) = unused {
            out.notes.push(format!("{}={value} is ignored: {why}", o.var));
            continue;
        }
        if o.long == "alltoallv-matrix"
            && let Err(e) = std::fs::metadata(&value)
        {
            return Err(format!(
                "{}={value}: cannot read that file ({e}); fix or unset it",
                o.var
            ));
        }
        out.args.push(arg);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(args: &[&str]) -> RunArgs {
        parse_run(args).unwrap()
    }

    fn env(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |name| pairs.iter().find(|(k, _)| *k == name).map(|(_, v)| v.to_string())
    }

    #[test]
    fn a_bad_value_names_the_variable_its_value_and_what_is_allowed() {
        let e = from_env(&run(&[]), &env(&[("NCCL_TESTS_ALLTOALLV_SPREAD", "abc")])).unwrap_err();
        assert_eq!(
            e,
            "NCCL_TESTS_ALLTOALLV_SPREAD=abc: 'abc' is not a spread between 0 and 1 (it sets --alltoallv-spread; fix \
             or unset it)"
        );
        let e = from_env(
            &run(&["--collectives", "all_reduce"]),
            &env(&[("NCCL_TESTS_SPLIT", "garbage")]),
        )
        .unwrap_err();
        assert!(
            e.starts_with("NCCL_TESTS_SPLIT=garbage: 'garbage' is not a split rule: AND, OR, MOD or DIV"),
            "{e}"
        );
        let e = from_env(&run(&[]), &env(&[("NCCL_TESTS_SPLIT_MASK", "zz")])).unwrap_err();
        assert!(
            e.starts_with("NCCL_TESTS_SPLIT_MASK=zz: 'zz' is not a hexadecimal mask"),
            "{e}"
        );
        let e = from_env(
            &run(&[]),
            &env(&[("NCCL_TESTS_ALLTOALLV_MATRIX_FILE", "/no/such/m.txt")]),
        )
        .unwrap_err();
        assert!(
            e.starts_with("NCCL_TESTS_ALLTOALLV_MATRIX_FILE=/no/such/m.txt: cannot read that file"),
            "{e}"
        );
    }

    #[test]
    fn alltoallv_variables_are_ignored_with_a_note_when_the_run_measures_no_alltoallv() {
        let vars = env(&[
            ("NCCL_TESTS_ALLTOALLV_SPREAD", "abc"),
            ("NCCL_TESTS_ALLTOALLV_MATRIX_SCALE", "2"),
            ("NCCL_TESTS_SPLIT", "MOD 2"),
        ]);
        let got = from_env(&run(&["--collectives", "all_reduce"]), &vars).unwrap();
        assert_eq!(got.args, ["--split=MOD 2"]);
        assert_eq!(
            got.notes,
            [
                "NCCL_TESTS_ALLTOALLV_SPREAD=abc is ignored: this run measures no alltoallv",
                "NCCL_TESTS_ALLTOALLV_MATRIX_SCALE=2 is ignored: this run measures no alltoallv"
            ]
        );
        let got = from_env(&run(&[]), &env(&[("NCCL_TESTS_ALLTOALLV_SPREAD", "0.5")])).unwrap();
        assert_eq!(
            got,
            FromEnv {
                args: vec!["--alltoallv-spread=0.5".into()],
                notes: vec![]
            }
        );
        assert_eq!(
            from_env(&run(&[]), &env(&[("NCCL_TESTS_SPLIT", " ")])).unwrap(),
            FromEnv::default()
        );
    }

    /// As nccl-tests: a matrix gives the traffic (the spread is unused),
    /// and the scale applies to a matrix only; each unused one is noted.
    /// A value is checked even where the run's alltoallv leaves it unused:
    /// a scale of -1 without a matrix was noted unused, and the run went
    /// on (exit 0).
    #[test]
    fn a_bad_value_is_refused_even_where_the_variable_goes_unused() {
        let e = from_env(&run(&[]), &env(&[("NCCL_TESTS_ALLTOALLV_MATRIX_SCALE", "-1")])).unwrap_err();
        assert!(e.starts_with("NCCL_TESTS_ALLTOALLV_MATRIX_SCALE=-1: "), "{e}");
        let e = from_env(
            &run(&["--alltoallv-matrix", "m.txt"]),
            &env(&[("NCCL_TESTS_ALLTOALLV_SPREAD", "2")]),
        )
        .unwrap_err();
        assert!(e.starts_with("NCCL_TESTS_ALLTOALLV_SPREAD=2: "), "{e}");
    }

    #[test]
    fn a_spread_beside_a_matrix_and_a_scale_without_one_are_noted_unused() {
        let got = from_env(&run(&[]), &env(&[("NCCL_TESTS_ALLTOALLV_MATRIX_SCALE", "2")])).unwrap();
        assert_eq!(got.args, Vec::<String>::new());
        assert_eq!(
            got.notes,
            ["NCCL_TESTS_ALLTOALLV_MATRIX_SCALE=2 is ignored: it scales a traffic matrix, and none is given"]
        );
        let dir = tempfile::tempdir().unwrap();
        let m = dir.path().join("m.txt");
        std::fs::write(&m, "0 1\n1 0\n").unwrap();
        let m = m.display().to_string();
        let got = from_env(
            &run(&["--alltoallv-matrix", &m]),
            &env_owned(vec![
                ("NCCL_TESTS_ALLTOALLV_SPREAD", "0.5".into()),
                ("NCCL_TESTS_ALLTOALLV_MATRIX_SCALE", "2".into()),
            ]),
        )
        .unwrap();
        assert_eq!(got.args, ["--alltoallv-matrix-scale=2"]);
        assert_eq!(
            got.notes,
            ["NCCL_TESTS_ALLTOALLV_SPREAD=0.5 is ignored: a traffic matrix gives alltoallv's traffic"]
        );
        let got = from_env(
            &run(&[]),
            &env_owned(vec![
                ("NCCL_TESTS_ALLTOALLV_MATRIX_FILE", m.clone()),
                ("NCCL_TESTS_ALLTOALLV_SPREAD", "0.5".into()),
            ]),
        )
        .unwrap();
        assert_eq!(got.args, [format!("--alltoallv-matrix={m}")]);
        assert_eq!(got.notes.len(), 1);
    }

    fn env_owned(pairs: Vec<(&'static str, String)>) -> impl Fn(&str) -> Option<String> {
        move |name| pairs.iter().find(|(k, _)| *k == name).map(|(_, v)| v.clone())
    }
}
