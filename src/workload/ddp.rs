//! PyTorch DistributedDataParallel: one all_reduce (sum) of the gradients
//! per bucket, in bucket order, during backward.
//!
//! Follows torch/csrc/distributed/c10d/reducer.cpp. After the first
//! iteration `Reducer::rebuild_buckets` assigns buckets in gradient-ready
//! order with the size limits `{first_bucket_bytes_cap_, bucket_bytes_cap_}`
//! (reducer.hpp: kDefaultFirstBucketBytes = 1 MiB, kDefaultBucketBytesCap =
//! 25 MiB = `bucket_cap_mb` 25), and `compute_bucket_assignment_by_size`
//! closes a bucket as soon as its size reaches the current limit (`if
//! (bucket.size >= bucket_size_limit)`, the tensor that crosses it
//! included), then moves to the next limit; a tensor larger than the cap
//! is a bucket of its own. Buckets are reduced in order. The steady-state
//! step is modelled, so the gradient-ready order is taken as the reverse of
//! `parameters()` (the order PyTorch itself assumes before the rebuild);
//! buckets hold one dtype (the model's gradient type).
//!
//! Not modelled: the construction-time broadcast of parameters (once, not
//! per step), `broadcast_buffers` (LLMs in the presets have no persistent
//! buffers), `find_unused_parameters`, communication hooks.

use crate::collective::Collective;
use crate::types::DType;

use super::groups::Group;
use super::model::Model;
use super::op::{Op, Phase};
use super::options::Options;

/// Bucket element counts for gradients arriving in `ready` order, as
/// `compute_bucket_assignment_by_size` fills them: the first bucket closes
/// at `first_cap_bytes`, every later one at `cap_bytes`.
pub fn buckets(ready: &[u64], elem_bytes: u64, first_cap_bytes: u64, cap_bytes: u64) -> Vec<u64> {
    let mut out = Vec::new();
    let mut limit = first_cap_bytes;
    let mut elements = 0u64;
    for &t in ready {
        elements += t;
        if elements * elem_bytes >= limit {
            out.push(elements);
            elements = 0;
            limit = cap_bytes;
        }
    }
    if elements > 0 {
        out.push(elements);
    }
    out
}

/// All-reduces of gradient buckets over `group`, for tensors in `ready`
/// order.
pub(super) fn gradient_ops(ready: &[u64], dtype: DType, group: Group, opts: &Options) -> Vec<Op> {
    let elem = dtype.size_bytes() as u64;
    buckets(ready, elem, opts.ddp_first_bucket_bytes(), opts.bucket_cap_bytes)
        .into_iter()
        .enumerate()
        .map(|(i, count)| {
            Op::reduce(
                Collective::AllReduce,
                count,
                dtype,
                group,
                Phase::Backward,
                format!("bucket {i}"),
            )
        })
        .collect()
}

/// One DDP step over all ranks.
pub(super) fn step(model: &Model, opts: &Options) -> Vec<Op> {
    let ready: Vec<u64> = model.tensors().iter().rev().map(|(_, t)| t.elements).collect();
    gradient_ops(&ready, model.grad_dtype, Group::World, opts)
}

#[cfg(test)]
mod tests {
    use super::super::groups::GroupLayout;
    use super::super::model::Tensor;
    use super::super::schedule::{Strategy, schedule};
    use super::*;

    const MIB: u64 = 1 << 20;

    #[test]
    fn buckets_close_when_they_reach_the_limit_and_the_first_is_smaller() {
        // 4-byte elements; limits 16 bytes (first), then 40 bytes
        let b = buckets(&[1, 2, 1, 5, 3, 3, 4, 20, 1], 4, 16, 40);
        // 1+2+1 = 4 elements = 16 bytes: reaches 16, closes
        // 5+3+3 = 11 elements = 44 bytes: reaches 40, closes
        // 4+20 = 24 elements = 96 bytes: closes on the large tensor
        // 1 remains
        assert_eq!(b, vec![4, 11, 24, 1]);
        assert_eq!(buckets(&[], 4, 16, 40), Vec::<u64>::new());
        assert_eq!(buckets(&[100], 2, 16, 40), vec![100]);
    }

    /// A small model: 2 layers of tensors a, b, c of 2, 1 and 3 MiB of
    /// 4-byte floats, nothing before or after the layers.
    fn small() -> Model {
        let t = |name: &str, bytes: u64| Tensor::new(name, bytes / 4, true);
        Model {
            vocab: 0,
            param_dtype: DType::Float,
            ..Model::for_tests(
                2,
                512,
                vec![],
                vec![t("a", 2 * MIB), t("b", MIB), t("c", 3 * MIB)],
                vec![],
            )
        }
    }

    #[test]
    fn a_ddp_step_all_reduces_buckets_in_reverse_layer_order() {
        let m = small();
        assert_eq!(m.params(), 2 * (6 * MIB / 4));
        let l = GroupLayout::new(4, 4, 1).unwrap();
        let opts = Options {
            bucket_cap_bytes: 4 * MIB,
            ..Options::default()
        };
        let s = schedule(Strategy::Ddp, &m, &l, &opts).unwrap();
        // ready order: L1.c 3 MiB, L1.b 1 MiB, L1.a 2 MiB, L0.c 3, L0.b 1, L0.a 2
        // first bucket (1 MiB limit): L1.c alone (3 MiB)
        // then 4 MiB limit: L1.b + L1.a + L0.c = 6 MiB; L0.b + L0.a = 3 MiB (end)
        let counts: Vec<u64> = s.ops.iter().map(|o| o.count).collect();
        assert_eq!(counts, vec![3 * MIB / 4, 6 * MIB / 4, 3 * MIB / 4]);
        for (i, op) in s.ops.iter().enumerate() {
            assert_eq!(op.collective, Collective::AllReduce);
            assert_eq!(op.dtype, DType::Float);
            assert_eq!(op.op, Some(crate::types::ReduceOp::Sum));
            assert_eq!(op.group, Group::World);
            assert_eq!(op.phase, Phase::Backward);
            assert_eq!(op.label, format!("bucket {i}"));
        }
        let total: u64 = counts.iter().sum();
        assert_eq!(total, m.params(), "every gradient is reduced once");
    }

    #[test]
    fn a_larger_bucket_cap_makes_fewer_larger_buckets_of_the_same_total() {
        let m = Model::preset("llama-2-7b").unwrap();
        let l = GroupLayout::new(8, 8, 1).unwrap();
        let mut last = usize::MAX;
        for cap_mib in [1, 4, 25, 100] {
            let opts = Options {
                bucket_cap_bytes: cap_mib * MIB,
                ..Options::default()
            };
            let s = schedule(Strategy::Ddp, &m, &l, &opts).unwrap();
            assert!(s.ops.len() <= last, "{cap_mib} MiB");
            last = s.ops.len();
            assert_eq!(s.ops.iter().map(|o| o.count).sum::<u64>(), m.params());
            // the first bucket is the untied lm_head (262 MB), alone
            assert_eq!(s.ops[0].count, 32000 * 4096);
            // every bucket but the last reaches its limit
            for op in &s.ops[1..s.ops.len() - 1] {
                assert!(op.count * 2 >= cap_mib * MIB, "{cap_mib} MiB: {}", op.count);
            }
        }
    }
}
