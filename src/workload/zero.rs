//! DeepSpeed ZeRO stages 1 and 2: gradients reduced in buckets of
//! `reduce_bucket_size` elements, then, after the optimizer updated each
//! rank's partition, one all_gather of the updated parameters.
//!
//! Follows deepspeed/runtime/zero/stage_1_and_2.py and its config defaults
//! (deepspeed/runtime/zero/config.py: `reduce_bucket_size` 5e8,
//! `reduce_scatter` true, `use_multi_rank_bucket_allreduce` true,
//! `overlap_comm` false for stages 1 and 2, `contiguous_gradients` true):
//! - `reduce_independent_p_g_buckets_and_remove_grads` flushes the bucket
//!   *before* adding a gradient that would make it exceed the size (`if
//!   elements_in_ipg_bucket + param.numel() > reduce_bucket_size`), so a
//!   tensor larger than the size ends up alone in its bucket;
//! - stage 2 registers gradient hooks and fills buckets in gradient-ready
//!   order (taken as reverse `parameters()` order); stage 1 without
//!   `overlap_comm` reduces after backward, walking each parameter group in
//!   `parameters()` order (`reduce_gradients`);
//! - `average_tensor` with `use_multi_rank_bucket_allreduce` hands the
//!   bucket's slices of every rank to `allreduce_and_scatter`, which
//!   all-reduces them and lets each rank keep its own: one all_reduce per
//!   bucket, not a reduce-scatter. `ZeroReduction::ReduceScatter` models
//!   the ZeRO paper's reduce-scatter (per-rank count `ceil(bucket / n)`)
//!   instead;
//! - after the step, `all_gather_dp_groups` all-gathers each rank's
//!   partition of the flat 16-bit group (`all_gather_into_tensor`, one call
//!   per parameter group); the flat group is padded to a multiple of
//!   `nccl_start_alignment_factor` (2) x dp size, so the per-rank count is
//!   `ceil(P / 2n) x 2`.
//!
//! One parameter group is modelled (optimizers that split weight decay
//! make two all_gathers of the same total).

use crate::collective::Collective;

use super::groups::{Group, GroupLayout};
use super::model::Model;
use super::op::{Op, Phase};
use super::options::{Options, ZeroReduction};

/// DeepSpeed's IPG bucket contents (elements) for gradients in `order`.
pub fn ipg_buckets(order: &[u64], bucket_elements: u64) -> Vec<u64> {
    let mut out = Vec::new();
    let mut current = 0u64;
    for &t in order {
        if current > 0 && current + t > bucket_elements {
            out.push(current);
            current = 0;
        }
        current += t;
    }
    if current > 0 {
        out.push(current);
    }
    out
}

/// One ZeRO step of `stage` (1 or 2) over all ranks.
pub(super) fn step(model: &Model, layout: &GroupLayout, opts: &Options, stage: u8) -> Vec<Op> {
    let n = layout.world as u64;
    let mut order: Vec<u64> = model.tensors().iter().map(|(_, t)| t.elements).collect();
    if stage == 2 {
        order.reverse();
    }
    let mut ops: Vec<Op> = ipg_buckets(&order, opts.zero_bucket_elements)
        .into_iter()
        .enumerate()
        .map(|(i, elements)| {
            let (collective, count) = match opts.zero_reduction {
                ZeroReduction::AllReduce => (Collective::AllReduce, elements),
                ZeroReduction::ReduceScatter => (Collective::ReduceScatter, elements.div_ceil(n)),
            };
            Op::reduce(
                collective,
                count,
                model.grad_dtype,
                Group::World,
                Phase::Backward,
                format!("bucket {i}"),
            )
        })
        .collect();
    let per_rank = model.params().div_ceil(2 * n) * 2;
    ops.push(Op::gather(
        per_rank,
        model.param_dtype,
        Group::World,
        Phase::Optimizer,
        "updated parameters".into(),
    ));
    ops
}

#[cfg(test)]
mod tests {
    use super::super::model::Tensor;
    use super::super::schedule::{Strategy, schedule};
    use super::*;
    use crate::types::{DType, ReduceOp};

    #[test]
    fn buckets_flush_before_a_gradient_that_would_overflow_them() {
        assert_eq!(ipg_buckets(&[3, 4, 2, 6, 1], 10), vec![9, 7]);
        // a tensor larger than the bucket is alone
        assert_eq!(ipg_buckets(&[2, 15, 3], 10), vec![2, 15, 3]);
        assert_eq!(ipg_buckets(&[10, 10], 10), vec![10, 10]);
        assert_eq!(ipg_buckets(&[], 10), Vec::<u64>::new());
    }

    /// Layers of [6, 5] elements, a 7-element embedding, a 3-element norm.
    fn small() -> Model {
        let t = |name: &str, elements| Tensor::new(name, elements, true);
        Model::for_tests(2, 4, vec![t("emb", 7)], vec![t("a", 6), t("b", 5)], vec![t("norm", 3)])
    }

    /// `strategy`'s step of `small()` on 3 ranks, with buckets of 12
    /// elements reduced by `zero_reduction`.
    fn small_step(strategy: Strategy, zero_reduction: ZeroReduction) -> Vec<Op> {
        let l = GroupLayout::new(3, 3, 1).unwrap();
        let opts = Options {
            zero_bucket_elements: 12,
            zero_reduction,
            ..Options::default()
        };
        schedule(strategy, &small(), &l, &opts).unwrap().ops
    }

    fn counts(ops: &[Op]) -> Vec<(Collective, u64, Phase)> {
        ops.iter().map(|o| (o.collective, o.count, o.phase)).collect()
    }

    #[test]
    fn zero2_reduces_buckets_in_backward_order_then_gathers_the_parameters() {
        assert_eq!(small().params(), 32);
        let ops = small_step(Strategy::Zero2, ZeroReduction::AllReduce);
        // backward order: norm 3, L1.b 5, L1.a 6, L0.b 5, L0.a 6, emb 7
        // buckets of at most 12: [3+5] [6+5] [6] [7]
        // all_gather: ceil(32 / 6) x 2 = 12 per rank
        use Collective::*;
        assert_eq!(
            counts(&ops),
            vec![
                (AllReduce, 8, Phase::Backward),
                (AllReduce, 11, Phase::Backward),
                (AllReduce, 6, Phase::Backward),
                (AllReduce, 7, Phase::Backward),
                (AllGather, 12, Phase::Optimizer),
            ]
        );
        assert!(
            ops[..4]
                .iter()
                .all(|o| o.dtype == DType::Float && o.op == Some(ReduceOp::Sum))
        );
        assert_eq!(ops[4].dtype, DType::Bfloat16);
        assert_eq!(ops[4].op, None);
        assert!(ops.iter().all(|o| o.group == Group::World));
        assert_eq!(ops[1].label, "bucket 1");
    }

    #[test]
    fn zero1_reduces_in_parameter_order_after_backward() {
        let ops = small_step(Strategy::Zero1, ZeroReduction::AllReduce);
        // forward order: emb 7, L0.a 6, L0.b 5, L1.a 6, L1.b 5, norm 3
        // buckets: [7] [6+5] [6+5] [3]
        let c: Vec<u64> = ops.iter().map(|o| o.count).collect();
        assert_eq!(c, vec![7, 11, 11, 3, 12]);
    }

    #[test]
    fn the_reduce_scatter_variant_sends_per_rank_counts() {
        let ops = small_step(Strategy::Zero2, ZeroReduction::ReduceScatter);
        use Collective::*;
        assert_eq!(
            counts(&ops),
            vec![
                (ReduceScatter, 3, Phase::Backward),
                (ReduceScatter, 4, Phase::Backward),
                (ReduceScatter, 2, Phase::Backward),
                (ReduceScatter, 3, Phase::Backward),
                (AllGather, 12, Phase::Optimizer),
            ]
        );
    }

    #[test]
    fn deepspeed_default_buckets_cover_a_7b_model_in_fourteen_reductions() {
        let m = Model::preset("llama-2-7b").unwrap();
        let l = GroupLayout::new(8, 8, 1).unwrap();
        let s = schedule(Strategy::Zero2, &m, &l, &Options::default()).unwrap();
        let reduced: u64 = s.ops[..s.ops.len() - 1].iter().map(|o| o.count).sum();
        assert_eq!(reduced, m.params());
        assert!(s.ops[..s.ops.len() - 1].iter().all(|o| o.count <= 500_000_000));
        // 6.74e9 / 5e8 = 13.5: at least 14 buckets, and whole tensors of at
        // most 131M elements leave each one nearly full
        assert_eq!(s.ops.len() - 1, 14);
        assert_eq!(s.ops.last().unwrap().count, m.params().div_ceil(16) * 2);
    }
}
