//! The knobs of the strategies (`Options`), with the frameworks' defaults;
//! those the command line sets are defined here too (`KnobArgs`, which
//! `cli::WorkloadArgs` flattens) and come into `Options` field by field
//! (`Options::with_knobs`).

use clap::Args;
use serde::{Deserialize, Serialize};

use crate::error::Error;

/// How ZeRO-1/2 reduce a gradient bucket.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ZeroReduction {
    /// DeepSpeed's default (`reduce_scatter: true` with
    /// `use_multi_rank_bucket_allreduce: true`): one all_reduce per bucket,
    /// each rank keeping its partition.
    AllReduce,
    /// The ZeRO paper's reduce-scatter of each bucket (also Megatron's
    /// distributed optimizer).
    ReduceScatter,
}

/// A PyTorch release, for what changed between releases (`--pytorch 2.3`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct TorchVersion {
    pub major: u32,
    pub minor: u32,
}

impl TorchVersion {
    pub const fn new(major: u32, minor: u32) -> TorchVersion {
        TorchVersion { major, minor }
    }

    /// Since 2.4 an explicit `bucket_cap_mb` sizes DDP's first bucket too
    /// (pytorch/pytorch#121640: `first_bucket_bytes_cap` is
    /// `_DEFAULT_FIRST_BUCKET_BYTES` only when `bucket_cap_mb` is left at
    /// its default).
    pub const FIRST_BUCKET_FOLLOWS_CAP: TorchVersion = TorchVersion::new(2, 4);
}

impl std::str::FromStr for TorchVersion {
    type Err = String;

    /// `2.3`, `2.4.1`, `2.5.0+cu124`.
    fn from_str(text: &str) -> Result<TorchVersion, String> {
        let core = text.trim().split(['+', 'a', 'r']).next().unwrap_or("");
        let mut parts = core.split('.').map(|p| p.parse::<u32>().ok());
        match (parts.next().flatten(), parts.next().flatten()) {
            (Some(major), Some(minor)) if major >= 1 => Ok(TorchVersion { major, minor }),
            _ => Err(format!("'{}' is not a PyTorch version (2.3, 2.4.1, ...)", text.trim())),
        }
    }
}

impl std::fmt::Display for TorchVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// The strategies' knobs on the command line (`collbench workload`
/// flattens them), with their help text and the frameworks' defaults: each
/// field is the `Options` field of the same name below (`Job::workload`
/// reads them into it through serde, `Options::with_knobs`), so a knob is
/// one field here and one in `Options`, in this file.
#[derive(Clone, Debug, Args, Serialize)]
#[command(next_help_heading = "Workload")]
pub struct KnobArgs {
    /// Activations of tp, moe and pp: sequence length (tokens per micro-batch)
    #[arg(long, value_name = "N", default_value = "2048", value_parser = clap::value_parser!(u64).range(1..))]
    pub seq_len: u64,

    /// Activations of tp, moe and pp: micro-batch size
    #[arg(long, value_name = "N", default_value = "1", value_parser = clap::value_parser!(u64).range(1..))]
    pub micro_batch: u64,

    /// pp's micro-batches per step [default: as many as stages]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub micro_batches: Option<u64>,

    /// moe's router imbalance: the busiest expert rank's tokens over the mean (1: balanced; at most min(ep, experts / top-k))
    #[arg(long, value_name = "F", default_value = "1", value_parser = imbalance_arg)]
    pub moe_imbalance: f64,

    /// The PyTorch release DDP is modelled on (2.3: a 1 MiB first bucket even with --bucket) [default: current, 2.4 and later]
    #[arg(long, value_name = "VERSION")]
    pub pytorch: Option<TorchVersion>,
}

/// `--moe-imbalance`: a finite factor of at least 1.
fn imbalance_arg(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(f) if f.is_finite() && f >= 1.0 => Ok(f),
        _ => Err("the router's imbalance is a factor of at least 1 (the busiest rank's tokens over the mean)".into()),
    }
}

/// The knobs of the strategies, with the frameworks' defaults.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Options {
    /// DDP `bucket_cap_mb` in bytes (PyTorch: 25 MiB).
    pub bucket_cap_bytes: u64,
    /// Whether `bucket_cap_mb` was given (`--bucket`), not left at its
    /// default: since PyTorch 2.4 it then sizes the first bucket too.
    pub bucket_explicit: bool,
    /// The PyTorch release DDP is modelled on; `None`: current (2.4 and
    /// later).
    pub pytorch: Option<TorchVersion>,
    /// DDP's first bucket (PyTorch `_DEFAULT_FIRST_BUCKET_BYTES`: 1 MiB).
    pub first_bucket_bytes: u64,
    /// DeepSpeed `reduce_bucket_size` in elements (5e8).
    pub zero_bucket_elements: u64,
    pub zero_reduction: ZeroReduction,
    /// Tensor parallelism's activation shape: micro-batch and sequence.
    pub micro_batch: u64,
    pub seq_len: u64,
    /// Micro-batches per step of the pipeline; `None`: as many as stages.
    pub micro_batches: Option<u64>,
    /// The router's imbalance: the busiest expert rank's tokens over the
    /// mean (1: balanced).
    pub moe_imbalance: f64,
}

impl Options {
    /// DDP's first bucket: `first_bucket_bytes`, or the cap itself when
    /// the cap was given and PyTorch is 2.4 or later.
    pub fn ddp_first_bucket_bytes(&self) -> u64 {
        let follows = self.pytorch.is_none_or(|v| v >= TorchVersion::FIRST_BUCKET_FOLLOWS_CAP);
        if self.bucket_explicit && follows {
            self.bucket_cap_bytes
        } else {
            self.first_bucket_bytes
        }
    }
}

impl Default for Options {
    fn default() -> Options {
        Options {
            bucket_cap_bytes: 25 << 20,
            bucket_explicit: false,
            pytorch: None,
            first_bucket_bytes: 1 << 20,
            zero_bucket_elements: 500_000_000,
            zero_reduction: ZeroReduction::AllReduce,
            micro_batch: 1,
            seq_len: 2048,
            micro_batches: None,
            moe_imbalance: 1.0,
        }
    }
}

impl Options {
    /// The defaults with every knob of `knobs` (a command line's: fields
    /// named as the fields here) put in. `Err` only when a knob names no
    /// field here or has another type: a mistake in this program.
    pub fn with_knobs(knobs: &impl Serialize) -> Result<Options, serde_json::Error> {
        let mut value = serde_json::to_value(Options::default())?;
        let (serde_json::Value::Object(fields), serde_json::Value::Object(given)) =
            (&mut value, serde_json::to_value(knobs)?)
        else {
            return Err(serde::de::Error::custom("the knobs are not a map"));
        };
        for (name, v) in given {
            if !fields.contains_key(&name) {
                return Err(serde::de::Error::custom(format!("no option `{name}`")));
            }
            fields.insert(name, v);
        }
        serde_json::from_value(value)
    }

    /// Every size and count at least 1; one line naming the first that is not.
    pub(super) fn check(&self) -> Result<(), Error> {
        let positive = [
            ("the DDP bucket size", self.bucket_cap_bytes),
            ("the first DDP bucket size", self.first_bucket_bytes),
            ("the ZeRO bucket size", self.zero_bucket_elements),
            ("the micro-batch", self.micro_batch),
            ("the sequence length", self.seq_len),
            ("the number of micro-batches", self.micro_batches.unwrap_or(1)),
        ];
        for (what, v) in positive {
            if v == 0 {
                return Err(Error::usage(format!("{what} must be at least 1")));
            }
        }
        if !(self.moe_imbalance >= 1.0 && self.moe_imbalance.is_finite()) {
            return Err(Error::usage(format!(
                "the router's imbalance must be at least 1 (the busiest rank's tokens over the mean), not {}",
                self.moe_imbalance
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn knobs_replace_their_defaults_field_by_field() {
        #[derive(Serialize)]
        struct Knobs {
            seq_len: u64,
        }
        let o = Options::with_knobs(&Knobs { seq_len: 512 }).unwrap();
        assert_eq!(
            o,
            Options {
                seq_len: 512,
                ..Options::default()
            }
        );
        #[derive(Serialize)]
        struct Stray {
            sequence: u64,
        }
        let e = Options::with_knobs(&Stray { sequence: 1 }).unwrap_err();
        assert!(e.to_string().contains("no option `sequence`"), "{e}");
    }

    #[test]
    fn the_defaults_are_the_frameworks_defaults() {
        let o = Options::default();
        assert_eq!(o.bucket_cap_bytes, 25 * 1024 * 1024);
        assert_eq!(o.first_bucket_bytes, 1024 * 1024);
        assert_eq!(o.zero_bucket_elements, 500_000_000);
        assert_eq!(o.zero_reduction, ZeroReduction::AllReduce);
        assert_eq!((o.micro_batches, o.moe_imbalance, o.pytorch), (None, 1.0, None));
    }

    #[test]
    fn an_explicit_bucket_cap_sizes_the_first_bucket_from_pytorch_2_4_on() {
        let cap = Options {
            bucket_cap_bytes: 4 << 20,
            bucket_explicit: true,
            ..Options::default()
        };
        assert_eq!(cap.ddp_first_bucket_bytes(), 4 << 20, "current PyTorch");
        let v = |t: &str| Some(t.parse::<TorchVersion>().unwrap());
        assert_eq!(
            Options {
                pytorch: v("2.4"),
                ..cap
            }
            .ddp_first_bucket_bytes(),
            4 << 20
        );
        assert_eq!(
            Options {
                pytorch: v("2.3.1"),
                ..cap
            }
            .ddp_first_bucket_bytes(),
            1 << 20
        );
        assert_eq!(
            Options::default().ddp_first_bucket_bytes(),
            1 << 20,
            "the default cap keeps 1 MiB"
        );
        assert_eq!(v("2.5.0+cu124"), Some(TorchVersion::new(2, 5)));
        assert!("two".parse::<TorchVersion>().is_err());
        assert!("2".parse::<TorchVersion>().is_err());
    }
}
