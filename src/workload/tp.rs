//! Megatron-LM tensor parallelism of degree T (no sequence parallelism),
//! with data parallelism over the remaining ranks.
//!
//! Follows megatron/core/tensor_parallel (layers.py, mappings.py,
//! cross_entropy.py), all on the tensor-parallel group:
//! - `VocabParallelEmbedding` all-reduces its output in forward
//!   (`reduce_from_tensor_model_parallel_region`); its input is token ids,
//!   so backward has nothing to reduce;
//! - each transformer layer has two `ColumnParallelLinear` -> `RowParallelLinear`
//!   pairs (attention QKV -> projection, MLP fc1 -> fc2): the row-parallel
//!   output is all-reduced in forward (`_ReduceFromModelParallelRegion`), the
//!   column-parallel input gradient in backward (`_CopyToModelParallelRegion`):
//!   2 all-reduces per layer forward, 2 backward, in reverse order;
//! - the output layer is column-parallel: its input gradient is all-reduced
//!   in backward; `_VocabParallelCrossEntropy` all-reduces the per-token
//!   maximum logit (max), the target logit (sum) and the sum of
//!   exponentials (sum), each `micro_batch x seq` floats in fp32;
//! - every activation all-reduce is `micro_batch x seq x hidden` elements of
//!   the parameter (compute) type.
//!
//! With T = 1 Megatron skips these calls (`if world_size == 1: return
//! input_`), and so does the schedule. The data-parallel part all-reduces
//! each rank's 1/T shard of the gradients (`Tensor::shard_elements`) over
//! the data-parallel group in DDP buckets (`ddp::buckets`, the same
//! `bucket_cap_bytes`), after backward as Megatron's default
//! `overlap_grad_reduce = False` does (`finish_grad_sync`). Megatron's own
//! bucket sizes, pipeline parallelism and sequence parallelism are not
//! modelled.

use crate::collective::Collective;
use crate::types::{DType, ReduceOp};

use super::ddp;
use super::groups::{Group, GroupLayout};
use super::model::Model;
use super::op::{Op, Phase};
use super::options::Options;

/// One step of Megatron tensor parallelism plus data parallelism.
pub(super) fn step(model: &Model, layout: &GroupLayout, opts: &Options) -> Vec<Op> {
    let mut ops = Vec::new();
    if layout.tp > 1 {
        tensor_parallel(model, opts, &mut ops);
    }
    let ready: Vec<u64> = model
        .tensors()
        .iter()
        .rev()
        .map(|(_, t)| t.shard_elements(layout.tp))
        .collect();
    ops.extend(ddp::gradient_ops(&ready, model.grad_dtype, Group::Dp, opts));
    ops
}

fn tensor_parallel(model: &Model, opts: &Options, ops: &mut Vec<Op>) {
    let tokens = opts.micro_batch * opts.seq_len;
    let act = tokens * model.hidden;
    let dtype = model.param_dtype;
    let ar =
        |count, dtype, phase, label: String| Op::reduce(Collective::AllReduce, count, dtype, Group::Tp, phase, label);
    let fwd = Phase::Forward;
    let bwd = Phase::Backward;
    ops.push(ar(act, dtype, fwd, "embedding".into()));
    for i in 0..model.layers {
        ops.push(ar(act, dtype, fwd, format!("layer {i} attn")));
        ops.push(ar(act, dtype, fwd, format!("layer {i} mlp")));
    }
    ops.push(ar(tokens, DType::Float, fwd, "loss max logit".into()).with_op(ReduceOp::Max));
    ops.push(ar(tokens, DType::Float, fwd, "loss target logit".into()));
    ops.push(ar(tokens, DType::Float, fwd, "loss sum exp".into()));
    ops.push(ar(act, dtype, bwd, "output layer".into()));
    for i in (0..model.layers).rev() {
        ops.push(ar(act, dtype, bwd, format!("layer {i} mlp")));
        ops.push(ar(act, dtype, bwd, format!("layer {i} attn")));
    }
}

#[cfg(test)]
mod tests {
    use super::super::model::Tensor;
    use super::super::schedule::{Strategy, schedule};
    use super::*;

    /// 2 layers of a split 8-element matrix and a replicated 2-element norm,
    /// a split 6-element embedding; hidden 4.
    fn small() -> Model {
        let layer = vec![Tensor::new("w", 8, true), Tensor::new("norm", 2, false)];
        Model::for_tests(2, 4, vec![Tensor::new("emb", 6, true)], layer, vec![])
    }

    #[test]
    fn tp_all_reduces_activations_twice_per_layer_each_way_then_data_parallel_gradients() {
        use Group::{Dp, Tp};
        use Phase::{Backward as B, Forward as F};
        let l = GroupLayout::new(4, 4, 2).unwrap();
        let opts = Options {
            micro_batch: 2,
            seq_len: 3,
            // every gradient bucket closes at once: 1 byte limits
            first_bucket_bytes: 1,
            bucket_cap_bytes: 1,
            ..Options::default()
        };
        let s = schedule(Strategy::Tp, &small(), &l, &opts).unwrap();
        // activations 2 x 3 x 4 = 24 elements; loss terms 6 floats
        let bf = DType::Bfloat16;
        let fl = DType::Float;
        let sum = Some(ReduceOp::Sum);
        let max = Some(ReduceOp::Max);
        let expected = [
            (24, bf, sum, Tp, F, "embedding"),
            (24, bf, sum, Tp, F, "layer 0 attn"),
            (24, bf, sum, Tp, F, "layer 0 mlp"),
            (24, bf, sum, Tp, F, "layer 1 attn"),
            (24, bf, sum, Tp, F, "layer 1 mlp"),
            (6, fl, max, Tp, F, "loss max logit"),
            (6, fl, sum, Tp, F, "loss target logit"),
            (6, fl, sum, Tp, F, "loss sum exp"),
            (24, bf, sum, Tp, B, "output layer"),
            (24, bf, sum, Tp, B, "layer 1 mlp"),
            (24, bf, sum, Tp, B, "layer 1 attn"),
            (24, bf, sum, Tp, B, "layer 0 mlp"),
            (24, bf, sum, Tp, B, "layer 0 attn"),
            // gradient shards, backward order: L1 norm 2 (replicated), L1 w 8/2,
            // L0 norm, L0 w, embedding 6/2
            (2, fl, sum, Dp, B, "bucket 0"),
            (4, fl, sum, Dp, B, "bucket 1"),
            (2, fl, sum, Dp, B, "bucket 2"),
            (4, fl, sum, Dp, B, "bucket 3"),
            (3, fl, sum, Dp, B, "bucket 4"),
        ];
        let got: Vec<_> = s
            .ops
            .iter()
            .map(|o| (o.count, o.dtype, o.op, o.group, o.phase, o.label.as_str()))
            .collect();
        assert_eq!(got, expected);
        assert!(s.ops.iter().all(|o| o.collective == Collective::AllReduce));
    }

    #[test]
    fn a_tp_degree_of_one_is_plain_data_parallelism() {
        let l = GroupLayout::new(4, 4, 1).unwrap();
        let opts = Options::default();
        let tp = schedule(Strategy::Tp, &small(), &l, &opts).unwrap();
        let ddp = schedule(Strategy::Ddp, &small(), &l, &opts).unwrap();
        let counts = |s: &super::super::op::Schedule| s.ops.iter().map(|o| o.count).collect::<Vec<_>>();
        assert_eq!(counts(&tp), counts(&ddp));
        assert!(tp.ops.iter().all(|o| o.group == Group::Dp));
        assert_eq!(l.size(Group::Dp), 4);
    }
}
