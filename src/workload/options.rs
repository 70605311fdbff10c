//! The knobs of the strategies (`Options`), with the frameworks' defaults;
//! those the command line sets come from `cli::KnobArgs`, field by field
//! (`Options::with_knobs`).

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

/// The knobs of the strategies, with the frameworks' defaults.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Options {
    /// DDP `bucket_cap_mb` in bytes (PyTorch: 25 MiB).
    pub bucket_cap_bytes: u64,
    /// DDP's first bucket (PyTorch `_DEFAULT_FIRST_BUCKET_BYTES`: 1 MiB).
    pub first_bucket_bytes: u64,
    /// DeepSpeed `reduce_bucket_size` in elements (5e8).
    pub zero_bucket_elements: u64,
    pub zero_reduction: ZeroReduction,
    /// Tensor parallelism's activation shape: micro-batch and sequence.
    pub micro_batch: u64,
    pub seq_len: u64,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            bucket_cap_bytes: 25 << 20,
            first_bucket_bytes: 1 << 20,
            zero_bucket_elements: 500_000_000,
            zero_reduction: ZeroReduction::AllReduce,
            micro_batch: 1,
            seq_len: 2048,
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
        ];
        for (what, v) in positive {
            if v == 0 {
                return Err(Error::usage(format!("{what} must be at least 1")));
            }
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
    }
}
