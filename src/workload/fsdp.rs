//! PyTorch FullyShardedDataParallel (FSDP1, `torch.distributed.fsdp`) with
//! the transformer auto-wrap policy: one unit per transformer layer plus
//! the root unit (embeddings, final norm, output head). Each unit's
//! parameters form one flat parameter, sharded over the shard group.
//!
//! Follows torch/distributed/fsdp/_runtime_utils.py and _flat_param.py:
//! - the flat parameter is padded to a multiple of the shard group size, so
//!   each rank holds `ceil(numel / n)` elements (`FlatParamHandle._get_shard`)
//!   and every all_gather and reduce_scatter of a unit has that per-rank
//!   count;
//! - forward: the root unshards first (`_root_pre_forward`), then each layer
//!   in order (`_pre_forward_unshard`, `forward_prefetch` off by default);
//! - `_post_forward_reshard` frees a unit's parameters after forward for
//!   FULL_SHARD and HYBRID_SHARD, except the root's ("Do not free the
//!   root's parameters in the post-forward for FULL_SHARD with the
//!   intention that they are immediately used for backward"); SHARD_GRAD_OP
//!   and _HYBRID_SHARD_ZERO2 keep every unit, so backward gathers nothing;
//! - backward with the default `BackwardPrefetch.BACKWARD_PRE`: a layer's
//!   pre-backward hook unshards it if not yet prefetched, then prefetches
//!   the previous layer before the gradient computation, and the
//!   post-backward hook reduce-scatters the gradient (`_reduce_grad`); the
//!   root's flat parameter completes last (the embedding's gradient is the
//!   last produced), so its reduce-scatter is last. Issue order:
//!   AG(L-1) AG(L-2) RS(L-1) AG(L-3) RS(L-2) ... AG(0) RS(1) RS(0) RS(root);
//! - HYBRID_SHARD shards over the node and, after each reduce-scatter,
//!   all-reduces the gradient shard over the ranks with the same local rank
//!   (`_reduce_grad`: `dist.all_reduce(new_sharded_grad,
//!   group=state._inter_node_pg)`).
//!
//! All-gathers use the parameter type (FSDP's `param_dtype`), reductions the
//! gradient type (`reduce_dtype`). FSDP2 (`fully_shard`) differs in details
//! this does not model (per-parameter sharding, the root's reshard choice).

use crate::collective::Collective;

use super::groups::{Group, GroupLayout};
use super::model::Model;
use super::op::{Op, Phase};

/// Element counts of the root unit's flat parameter and of each layer's.
fn units(model: &Model) -> (u64, Vec<u64>) {
    let root = model.pre_params() + model.post_params();
    (root, (0..model.layers).map(|i| model.layer_params_of(i)).collect())
}

/// One FSDP (or HSDP, `hybrid`) step.
pub(super) fn step(model: &Model, layout: &GroupLayout, reshard_after_forward: bool, hybrid: bool) -> Vec<Op> {
    let shard_group = if hybrid { Group::Node } else { Group::World };
    let n = layout.size(shard_group) as u64;
    let (root, layers) = units(model);
    let shard = |numel: u64| numel.div_ceil(n);
    let param = model.param_dtype;
    let ag = |numel: u64, phase, label: String| Op::gather(shard(numel), param, shard_group, phase, label);
    let mut ops = Vec::new();
    // forward
    ops.push(ag(root, Phase::Forward, "root".into()));
    for (i, &numel) in layers.iter().enumerate() {
        ops.push(ag(numel, Phase::Forward, format!("layer {i}")));
    }
    // backward
    let reduce = |ops: &mut Vec<Op>, numel: u64, label: String| {
        let count = shard(numel);
        ops.push(Op::reduce(
            Collective::ReduceScatter,
            count,
            model.grad_dtype,
            shard_group,
            Phase::Backward,
            label.clone(),
        ));
        if hybrid {
            ops.push(Op::reduce(
                Collective::AllReduce,
                count,
                model.grad_dtype,
                Group::CrossNode,
                Phase::Backward,
                label,
            ));
        }
    };
    let last = layers.len();
    if reshard_after_forward && last > 0 {
        ops.push(ag(layers[last - 1], Phase::Backward, format!("layer {}", last - 1)));
    }
    for i in (0..last).rev() {
        if reshard_after_forward && i > 0 {
            ops.push(ag(layers[i - 1], Phase::Backward, format!("layer {}", i - 1)));
        }
        reduce(&mut ops, layers[i], format!("layer {i}"));
    }
    reduce(&mut ops, root, "root".into());
    ops
}

#[cfg(test)]
mod tests {
    use super::super::model::Tensor;
    use super::super::options::Options;
    use super::super::schedule::{Strategy, schedule};
    use super::*;
    use crate::types::DType;

    /// 3 layers of 10 elements (two tensors), a 7-element root.
    fn small() -> Model {
        let t = |name: &str, elements| Tensor::new(name, elements, true);
        Model::for_tests(3, 2, vec![t("emb", 4)], vec![t("a", 6), t("b", 4)], vec![t("norm", 3)])
    }

    use Collective::{AllGather as AG, AllReduce as AR, ReduceScatter as RS};
    use Phase::{Backward as B, Forward as F};

    type Row = (Collective, u64, Group, Phase, &'static str);

    fn rows(ops: &[Op]) -> Vec<(Collective, u64, Group, Phase, String)> {
        ops.iter()
            .map(|o| (o.collective, o.count, o.group, o.phase, o.label.clone()))
            .collect()
    }

    fn want(rows: &[Row]) -> Vec<(Collective, u64, Group, Phase, String)> {
        rows.iter()
            .map(|&(c, n, g, p, l)| (c, n, g, p, l.to_string()))
            .collect()
    }

    /// The operations of `strategy`'s step of `m` on `l`, default options.
    fn ops_of(strategy: Strategy, m: &Model, l: &GroupLayout) -> Vec<Op> {
        schedule(strategy, m, l, &Options::default()).unwrap().ops
    }

    #[test]
    fn full_shard_gathers_in_forward_and_again_in_backward_with_prefetch_order() {
        use Group::World as W;
        let l = GroupLayout::new(4, 4, 1).unwrap();
        let fsdp = Strategy::Fsdp {
            reshard_after_forward: true,
        };
        let ops = ops_of(fsdp, &small(), &l);
        // shards: root ceil(7/4) = 2, layers ceil(10/4) = 3
        let expected: &[Row] = &[
            (AG, 2, W, F, "root"),
            (AG, 3, W, F, "layer 0"),
            (AG, 3, W, F, "layer 1"),
            (AG, 3, W, F, "layer 2"),
            (AG, 3, W, B, "layer 2"),
            (AG, 3, W, B, "layer 1"),
            (RS, 3, W, B, "layer 2"),
            (AG, 3, W, B, "layer 0"),
            (RS, 3, W, B, "layer 1"),
            (RS, 3, W, B, "layer 0"),
            (RS, 2, W, B, "root"),
        ];
        assert_eq!(rows(&ops), want(expected));
        for op in &ops {
            let dtype = if op.collective == AG {
                DType::Bfloat16
            } else {
                DType::Float
            };
            assert_eq!(op.dtype, dtype);
        }
    }

    #[test]
    fn shard_grad_op_keeps_parameters_after_forward_and_gathers_nothing_in_backward() {
        use Group::World as W;
        let l = GroupLayout::new(3, 3, 1).unwrap();
        let grad_op = Strategy::Fsdp {
            reshard_after_forward: false,
        };
        let ops = ops_of(grad_op, &small(), &l);
        let expected: &[Row] = &[
            (AG, 3, W, F, "root"),
            (AG, 4, W, F, "layer 0"),
            (AG, 4, W, F, "layer 1"),
            (AG, 4, W, F, "layer 2"),
            (RS, 4, W, B, "layer 2"),
            (RS, 4, W, B, "layer 1"),
            (RS, 4, W, B, "layer 0"),
            (RS, 3, W, B, "root"),
        ];
        assert_eq!(rows(&ops), want(expected));
    }

    #[test]
    fn hybrid_shard_shards_in_the_node_and_all_reduces_shards_across_nodes() {
        use Group::{CrossNode as X, Node as N};
        // 6 ranks on 3 nodes of 2: shards over 2 ranks
        let l = GroupLayout::new(6, 2, 1).unwrap();
        let hsdp = Strategy::Hsdp {
            reshard_after_forward: true,
        };
        let mut m = small();
        m.layers = 2;
        let ops = ops_of(hsdp, &m, &l);
        let expected: &[Row] = &[
            (AG, 4, N, F, "root"),
            (AG, 5, N, F, "layer 0"),
            (AG, 5, N, F, "layer 1"),
            (AG, 5, N, B, "layer 1"),
            (AG, 5, N, B, "layer 0"),
            (RS, 5, N, B, "layer 1"),
            (AR, 5, X, B, "layer 1"),
            (RS, 5, N, B, "layer 0"),
            (AR, 5, X, B, "layer 0"),
            (RS, 4, N, B, "root"),
            (AR, 4, X, B, "root"),
        ];
        assert_eq!(rows(&ops), want(expected));
        assert_eq!(l.size(Group::CrossNode), 3);
    }

    #[test]
    fn every_rank_reduces_a_shard_of_every_parameter() {
        let m = Model::preset("llama-3-8b").unwrap();
        let l = GroupLayout::new(8, 8, 1).unwrap();
        let fsdp = Strategy::Fsdp {
            reshard_after_forward: true,
        };
        let ops = ops_of(fsdp, &m, &l);
        let rs: u64 = ops
            .iter()
            .filter(|o| o.collective == Collective::ReduceScatter)
            .map(|o| o.count * 8)
            .sum();
        // padding adds fewer than 8 elements per unit
        assert!(rs >= m.params() && rs < m.params() + 8 * 33, "{rs}");
        let ags = ops.iter().filter(|o| o.collective == Collective::AllGather).count();
        assert_eq!(ags, 1 + 32 + 32, "root once, every layer twice");
    }
}
