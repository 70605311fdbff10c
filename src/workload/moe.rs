//! Mixture-of-experts training with expert parallelism: each expert-
//! parallel rank holds `experts / ep` of every MoE layer's experts, and
//! tokens travel to their experts and back by all-to-all.
//!
//! Follows Megatron-LM's MoE layer with the all-to-all token dispatcher
//! (megatron/core/transformer/moe/token_dispatcher.py,
//! `MoEAlltoAllTokenDispatcher`, `--moe-token-dispatcher-type alltoall`;
//! tensor parallelism 1), per MoE layer:
//! - forward, `preprocess`: each rank's token count per expert (`experts`
//!   int64) gathered over the expert-parallel group
//!   (`gather_from_sequence_parallel_region(num_local_tokens_per_expert,
//!   group=tp_ep_group)`); `token_dispatch`: the routed tokens (`tokens x
//!   top_k` rows of `hidden`) all-to-all to their experts' ranks, then their
//!   routing probabilities (one per row); `token_combine`: the experts'
//!   outputs all-to-all back;
//! - backward, in reverse layer order, the same all-to-alls reversed
//!   (autograd of `all_to_all`): the combine's, then the probabilities'
//!   and the tokens' ("Backward launch order: probs A2A -> tokens A2A");
//!   the count gather has no gradient.
//!
//! Routing decides how many rows go to each rank; with a balanced router
//! each rank sends `tokens x top_k / ep` rows to every rank of its group.
//! collbench's all-to-all sends the same count to every peer, so a router's
//! imbalance (`Options::moe_imbalance`: the busiest rank's rows over the
//! mean) is modelled the way capacity-factor dispatch sends it
//! (`--moe-expert-capacity-factor` with `--moe-pad-expert-input-to-capacity`):
//! every peer's block padded to the busiest one's. The busiest rank's
//! transfer bounds a dropless all-to-all's time; the other links carry more
//! here than they would. A factor above what routing can give
//! (`max_imbalance`) is refused.
//!
//! Gradients after backward (Megatron's default `overlap_grad_reduce =
//! False`): the dense parameters (attention, routers, shared experts, norms,
//! embeddings) all-reduced over every rank in DDP buckets, each rank's own
//! experts over the ranks that hold the same experts (`world / ep`; none
//! when that is one rank), in the reduce type (Megatron reduces bf16
//! gradients in fp32). Tensor, sequence and pipeline parallelism, the
//! auxiliary load-balancing loss (no communication with tp = 1) and token
//! dropping are not modelled.

use crate::collective::Collective;
use crate::error::Error;
use crate::types::DType;

use super::ddp;
use super::groups::{Group, GroupLayout};
use super::model::Model;
use super::op::{Op, Phase};
use super::options::Options;

/// Rows (token copies) each rank sends to every peer of its
/// expert-parallel group: `tokens x top_k / ep`, padded to the busiest;
/// never more than the tokens can send one rank (`max_imbalance`).
pub fn rows_per_peer(tokens: u64, top_k: usize, experts: usize, ep: usize, imbalance: f64) -> u64 {
    let ep = ep.max(1);
    let mean = (tokens * top_k as u64) as f64 / ep as f64;
    let most = tokens * top_k.min(experts / ep).max(1) as u64;
    ((mean * imbalance.max(1.0)).ceil() as u64).min(most)
}

/// The largest router imbalance (the busiest rank's rows over the mean)
/// routing can give: a token's `top_k` rows go to `top_k` different
/// experts, and a rank holds `experts / ep` of them, so the busiest rank
/// receives at most `min(top_k, experts / ep)` rows of each token against
/// a mean of `top_k / ep`: `min(ep, experts / top_k)`.
pub fn max_imbalance(top_k: usize, experts: usize, ep: usize) -> f64 {
    (ep as f64).min(experts as f64 / top_k.max(1) as f64)
}

/// Refuses an expert-parallel degree that does not divide the experts,
/// and an imbalance above `max_imbalance` (one line saying why).
fn check_degree(imbalance: f64, top_k: usize, experts: usize, ep: usize) -> Result<(), Error> {
    if !experts.is_multiple_of(ep) {
        return Err(Error::usage(format!(
            "the expert-parallel degree {ep} does not divide the {experts} experts of each layer"
        )));
    }
    let most = max_imbalance(top_k, experts, ep);
    if imbalance <= most * (1.0 + 1e-12) {
        return Ok(());
    }
    if ep == 1 {
        return Err(Error::usage(format!(
            "--moe-imbalance {imbalance} is more than routing can give: at expert-parallel degree 1 every rank \
             holds all {experts} experts and no token leaves its rank (--ep N for an all-to-all)"
        )));
    }
    let most = format!("{most:.2}");
    Err(Error::usage(format!(
        "--moe-imbalance {imbalance} is more than routing can give: the busiest of {ep} expert-parallel ranks \
         receives at most {}x the mean, since each token's {top_k} rows (top-{top_k}) go to {top_k} different \
         experts and a rank holds {} of the {experts}",
        most.trim_end_matches('0').trim_end_matches('.'),
        experts / ep
    )))
}

fn all_to_all(count: u64, dtype: DType, phase: Phase, label: String) -> Op {
    Op {
        collective: Collective::AllToAll,
        count,
        dtype,
        op: None,
        root: None,
        shift: None,
        group: Group::Ep,
        phase,
        label,
        logged: None,
    }
}

/// One step of expert-parallel MoE training.
pub(super) fn step(model: &Model, layout: &GroupLayout, opts: &Options) -> Result<Vec<Op>, Error> {
    let moe = model.moe.ok_or_else(|| {
        Error::usage(format!(
            "the moe strategy needs a mixture-of-experts model ({} has none): --model mixtral-8x7b or deepseek-moe-16b, or --experts N with --params",
            model.name
        ))
    })?;
    let ep = layout.ep;
    check_degree(opts.moe_imbalance, moe.top_k, moe.experts, ep)?;
    let rows = rows_per_peer(
        opts.micro_batch * opts.seq_len,
        moe.top_k,
        moe.experts,
        ep,
        opts.moe_imbalance,
    );
    let act = rows * model.hidden;
    let dtype = model.param_dtype;
    let moe_layers: Vec<usize> = (model.first_layers..model.layers).collect();
    let mut ops = Vec::new();
    if ep > 1 {
        for &i in &moe_layers {
            ops.push(Op::gather(
                moe.experts as u64,
                DType::Int64,
                Group::Ep,
                Phase::Forward,
                format!("layer {i} tokens per expert"),
            ));
            ops.push(all_to_all(act, dtype, Phase::Forward, format!("layer {i} dispatch")));
            ops.push(all_to_all(
                rows,
                dtype,
                Phase::Forward,
                format!("layer {i} dispatch probs"),
            ));
            ops.push(all_to_all(act, dtype, Phase::Forward, format!("layer {i} combine")));
        }
        for &i in moe_layers.iter().rev() {
            ops.push(all_to_all(act, dtype, Phase::Backward, format!("layer {i} combine")));
            ops.push(all_to_all(
                rows,
                dtype,
                Phase::Backward,
                format!("layer {i} dispatch probs"),
            ));
            ops.push(all_to_all(act, dtype, Phase::Backward, format!("layer {i} dispatch")));
        }
    }
    // gradients, in gradient-ready order (reverse parameters())
    let tensors = model.tensors();
    let dense: Vec<u64> = tensors
        .iter()
        .rev()
        .filter(|(_, t)| !t.expert)
        .map(|(_, t)| t.elements)
        .collect();
    ops.extend(ddp::gradient_ops(&dense, model.grad_dtype, Group::World, opts));
    if layout.world / ep > 1 {
        // this rank's experts: the first experts / ep of each layer's
        // (every expert has the same tensors)
        let mut local: Vec<u64> = Vec::new();
        for i in 0..model.layers {
            let experts: Vec<u64> = model
                .layer_tensors(i)
                .iter()
                .filter(|t| t.expert)
                .map(|t| t.elements)
                .collect();
            local.extend(&experts[..experts.len() / ep]);
        }
        local.reverse();
        for mut op in ddp::gradient_ops(&local, model.grad_dtype, Group::ExpertDp, opts) {
            op.label = format!("expert {}", op.label);
            ops.push(op);
        }
    }
    Ok(ops)
}

#[cfg(test)]
mod tests {
    use super::super::model::{Moe, Tensor};
    use super::super::schedule::{Strategy, schedule};
    use super::*;
    use crate::types::ReduceOp;

    /// 2 MoE layers of hidden 4: attention 16, router 4x4=16, 4 experts of
    /// 8 elements, norm 4; an 8-element embedding; top-2.
    fn small() -> Model {
        let mut layer = vec![Tensor::new("attn", 16, true), Tensor::new("router", 16, false)];
        for e in 0..4 {
            layer.push(Tensor {
                expert: true,
                ..Tensor::new(&format!("expert {e}"), 8, true)
            });
        }
        layer.push(Tensor::new("norm", 4, false));
        Model {
            name: "small-moe".into(),
            moe: Some(Moe { experts: 4, top_k: 2 }),
            ..Model::for_tests(2, 4, vec![Tensor::new("emb", 8, true)], layer, vec![])
        }
    }

    type Row = (Collective, u64, DType, Group, Phase, String);

    fn rows(ops: &[Op]) -> Vec<Row> {
        ops.iter()
            .map(|o| (o.collective, o.count, o.dtype, o.group, o.phase, o.label.clone()))
            .collect()
    }

    fn opts(imbalance: f64) -> Options {
        Options {
            micro_batch: 1,
            seq_len: 6,
            moe_imbalance: imbalance,
            // every gradient bucket closes at once
            first_bucket_bytes: 1,
            bucket_cap_bytes: 1,
            ..Options::default()
        }
    }

    #[test]
    fn two_ranks_dispatch_and_combine_each_moe_layer_forward_and_backward() {
        use Collective::{AllGather as AG, AllReduce as AR, AllToAll as A2A};
        use DType::{Bfloat16 as BF, Float as F32, Int64 as I64};
        use Group::{Ep, World};
        use Phase::{Backward as B, Forward as Fw};
        let l = GroupLayout::new(2, 2, 1).unwrap().with_ep(2).unwrap();
        let s = schedule(Strategy::Moe, &small(), &l, &opts(1.0)).unwrap();
        // 6 tokens x top-2 = 12 rows, 6 to each of the 2 ranks; x hidden 4 = 24
        let r = |c, n, t, g, p, l: &str| (c, n, t, g, p, l.to_string());
        let want = vec![
            r(AG, 4, I64, Ep, Fw, "layer 0 tokens per expert"),
            r(A2A, 24, BF, Ep, Fw, "layer 0 dispatch"),
            r(A2A, 6, BF, Ep, Fw, "layer 0 dispatch probs"),
            r(A2A, 24, BF, Ep, Fw, "layer 0 combine"),
            r(AG, 4, I64, Ep, Fw, "layer 1 tokens per expert"),
            r(A2A, 24, BF, Ep, Fw, "layer 1 dispatch"),
            r(A2A, 6, BF, Ep, Fw, "layer 1 dispatch probs"),
            r(A2A, 24, BF, Ep, Fw, "layer 1 combine"),
            r(A2A, 24, BF, Ep, B, "layer 1 combine"),
            r(A2A, 6, BF, Ep, B, "layer 1 dispatch probs"),
            r(A2A, 24, BF, Ep, B, "layer 1 dispatch"),
            r(A2A, 24, BF, Ep, B, "layer 0 combine"),
            r(A2A, 6, BF, Ep, B, "layer 0 dispatch probs"),
            r(A2A, 24, BF, Ep, B, "layer 0 dispatch"),
            // dense gradients, backward order: L1 norm, router, attn; L0 ...; emb
            r(AR, 4, F32, World, B, "bucket 0"),
            r(AR, 16, F32, World, B, "bucket 1"),
            r(AR, 16, F32, World, B, "bucket 2"),
            r(AR, 4, F32, World, B, "bucket 3"),
            r(AR, 16, F32, World, B, "bucket 4"),
            r(AR, 16, F32, World, B, "bucket 5"),
            r(AR, 8, F32, World, B, "bucket 6"),
        ];
        assert_eq!(rows(&s.ops), want, "no expert gradients: each expert lives on one rank");
        assert!(s.ops[..14].iter().all(|o| o.op.is_none()));
        assert!(s.ops[14..].iter().all(|o| o.op == Some(ReduceOp::Sum)));
    }

    #[test]
    fn four_ranks_in_expert_groups_of_two_reduce_expert_gradients_over_their_pairs() {
        use Collective::{AllReduce as AR, AllToAll as A2A};
        let l = GroupLayout::new(4, 4, 1).unwrap().with_ep(2).unwrap();
        assert_eq!(l.groups(Group::Ep), vec![vec![0, 1], vec![2, 3]]);
        assert_eq!(l.groups(Group::ExpertDp), vec![vec![0, 2], vec![1, 3]]);
        // imbalance 1.5: the busiest rank gets 9 rows from each peer, not 6
        let s = schedule(Strategy::Moe, &small(), &l, &opts(1.5)).unwrap();
        assert_eq!((s.ops[1].collective, s.ops[1].count), (A2A, 36));
        assert_eq!(s.ops[2].count, 9);
        // each rank holds 2 of the 4 experts of each layer: 2 x 8 elements
        let experts: Vec<(Collective, u64, Group, String)> = s
            .ops
            .iter()
            .filter(|o| o.group == Group::ExpertDp)
            .map(|o| (o.collective, o.count, o.group, o.label.clone()))
            .collect();
        assert_eq!(
            experts,
            (0..4)
                .map(|i| (AR, 8, Group::ExpertDp, format!("expert bucket {i}")))
                .collect::<Vec<_>>()
        );
        // at 4 ranks in one expert group: 3 rows to each peer (12 / 4)
        let l = GroupLayout::new(4, 4, 1).unwrap().with_ep(4).unwrap();
        let s = schedule(Strategy::Moe, &small(), &l, &opts(1.0)).unwrap();
        assert_eq!((s.ops[1].count, s.ops[2].count), (12, 3));
        assert!(s.ops.iter().all(|o| o.group != Group::ExpertDp));
    }

    #[test]
    fn a_dense_model_or_experts_the_degree_does_not_divide_are_refused() {
        let l = GroupLayout::new(4, 4, 1).unwrap().with_ep(4).unwrap();
        let dense = Model::preset("gpt2").unwrap();
        let e = schedule(Strategy::Moe, &dense, &l, &Options::default()).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("the moe strategy needs a mixture-of-experts model (gpt2 has none)")
        );
        let l = GroupLayout::new(8, 8, 1).unwrap().with_ep(8).unwrap();
        let e = schedule(Strategy::Moe, &small(), &l, &Options::default()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "the expert-parallel degree 8 does not divide the 4 experts of each layer"
        );
        assert_eq!(rows_per_peer(2048, 2, 8, 8, 1.0), 512);
        assert_eq!(rows_per_peer(10, 1, 4, 4, 1.0), 3, "rounded up");
        assert_eq!(rows_per_peer(2048, 2, 8, 8, 0.5), 512, "below 1 is balanced");
    }

    #[test]
    fn an_imbalance_routing_cannot_give_is_refused() {
        // 4 experts on 4 ranks, top-2: a rank holds 1 expert, so it gets at
        // most 1 of each token's 2 rows: 6 of the mean 3 (2x)
        let l = GroupLayout::new(4, 4, 1).unwrap().with_ep(4).unwrap();
        assert_eq!(max_imbalance(2, 4, 4), 2.0);
        let s = schedule(Strategy::Moe, &small(), &l, &opts(2.0)).unwrap();
        assert_eq!(
            (s.ops[1].count, s.ops[2].count),
            (24, 6),
            "every token's row to one rank"
        );
        let e = schedule(Strategy::Moe, &small(), &l, &opts(100.0)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "--moe-imbalance 100 is more than routing can give: the busiest of 4 expert-parallel ranks receives \
             at most 2x the mean, since each token's 2 rows (top-2) go to 2 different experts and a rank holds 1 \
             of the 4"
        );
        assert!(matches!(e, Error::Usage(_)));
        assert!(schedule(Strategy::Moe, &small(), &l, &opts(2.01)).is_err());
        // 2 ranks of 2 experts each: a token may send both rows to one
        // rank, all 12 rows of 6 tokens against a mean of 6 (2x = ep)
        let l = GroupLayout::new(2, 2, 1).unwrap().with_ep(2).unwrap();
        assert_eq!(max_imbalance(2, 4, 2), 2.0);
        assert!(schedule(Strategy::Moe, &small(), &l, &opts(2.5)).is_err());
        // 3 of 4 experts per token at ep 4: at most 1 of 3 rows, 4/3 of the
        // mean; the mean rounded up must not pass the bound either
        assert_eq!(max_imbalance(3, 4, 4), 4.0 / 3.0);
        assert_eq!(rows_per_peer(10, 3, 4, 4, 4.0 / 3.0), 10);
        // one expert-parallel rank: nothing to skew
        let l = GroupLayout::new(2, 2, 1).unwrap().with_ep(1).unwrap();
        let e = schedule(Strategy::Moe, &small(), &l, &opts(1.5)).unwrap_err();
        assert!(
            e.to_string()
                .contains("at expert-parallel degree 1 every rank holds all 4 experts"),
            "{e}"
        );
        assert!(schedule(Strategy::Moe, &small(), &l, &opts(1.0)).is_ok());
    }
}
