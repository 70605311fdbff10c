//! Pipeline parallelism: the layers split over `pp` stages, micro-batches
//! handed from stage to stage, activations forward and their gradients
//! back, in Megatron-LM's 1F1B order.
//!
//! Follows megatron/core/pipeline_parallel/schedules.py
//! (`forward_backward_pipelining_without_interleaving`) and
//! p2p_communication.py: stage s runs `pp - s - 1` warm-up forwards, then
//! one forward and one backward per remaining micro-batch
//! (`send_forward_recv_backward`, `send_backward_recv_forward`), then the
//! cool-down backwards. Every transfer between neighbouring stages is one
//! activation tensor `seq_len x micro_batch x hidden` of the parameter type
//! forward, or its gradient backward. Seen at the stage boundaries, the
//! step's transfers are, in 1F1B order: the first `min(pp - 1, M)`
//! forwards F1.., then F(w+1) B1, F(w+2) B2, ..., then the last backwards,
//! for M micro-batches (`Options::micro_batches`, default as many as
//! stages).
//!
//! collbench's steps are SPMD (every rank runs the same operations), so
//! each transfer is one exchange on the pipeline group in which every stage
//! sends at once: a forward transfer to the next stage (a sendrecv shifted
//! by 1), a backward one to the previous stage (shifted by `pp - 1`). The
//! last stage's forward send (and the first's backward one) wraps around the
//! ring: the pipeline has no such link, so that exchange carries one
//! transfer more than the pipeline does, at the same time on symmetric
//! links; the volume is the busiest link's, as for every sendrecv. No
//! bubble (no compute), no interleaved virtual stages.
//!
//! After backward each stage all-reduces its gradients over its data-
//! parallel group (`world / pp` consecutive ranks; none when that is one
//! rank) in DDP buckets, in the reduce type. Stages hold layers `L / pp`
//! each, the first also the embedding, the last the final norm and head;
//! the stage with the most parameters stands for all (SPMD). Tied
//! embeddings' all-reduce between the first and last stage is not
//! modelled.

use crate::collective::Collective;
use crate::error::Error;

use super::ddp;
use super::groups::{Group, GroupLayout};
use super::model::{Model, Place};
use super::op::{Op, Phase};
use super::options::Options;

/// The order of the step's transfers: `(forward, micro-batch)` from 1.
pub fn one_f_one_b(stages: usize, micro_batches: usize) -> Vec<(bool, usize)> {
    let warm = stages.saturating_sub(1).min(micro_batches);
    let mut out: Vec<(bool, usize)> = (1..=warm).map(|i| (true, i)).collect();
    for j in 1..=micro_batches - warm {
        out.push((true, warm + j));
        out.push((false, j));
    }
    out.extend((micro_batches - warm + 1..=micro_batches).map(|i| (false, i)));
    out
}

/// One step of pipeline-parallel training.
pub(super) fn step(model: &Model, layout: &GroupLayout, opts: &Options) -> Result<Vec<Op>, Error> {
    let stages = layout.pp;
    if !model.layers.is_multiple_of(stages) {
        return Err(Error::usage(format!(
            "the {} layers of {} do not split evenly over {stages} pipeline stages",
            model.layers, model.name
        )));
    }
    let micro_batches = opts.micro_batches.map_or(stages, |m| m as usize);
    let act = opts.micro_batch * opts.seq_len * model.hidden;
    let mut ops = Vec::new();
    if stages > 1 {
        for (forward, i) in one_f_one_b(stages, micro_batches) {
            ops.push(Op {
                collective: Collective::SendRecv,
                count: act,
                dtype: model.param_dtype,
                op: None,
                root: None,
                shift: Some(if forward { 1 } else { stages - 1 }),
                group: Group::Pp,
                phase: if forward { Phase::Forward } else { Phase::Backward },
                label: format!("micro-batch {i} {}", if forward { "activations" } else { "gradients" }),
                logged: None,
            });
        }
    }
    if layout.world / stages > 1 {
        ops.extend(ddp::gradient_ops(
            &largest_stage(model, stages),
            model.grad_dtype,
            Group::StageDp,
            opts,
        ));
    }
    Ok(ops)
}

/// The gradients of the stage with the most parameters, in gradient-ready
/// order.
fn largest_stage(model: &Model, stages: usize) -> Vec<u64> {
    let per = model.layers / stages;
    let stage_of = |p: Place| match p {
        Place::Pre => 0,
        Place::Layer(i) => i / per,
        Place::Post => stages - 1,
    };
    let tensors = model.tensors();
    let total = |k: usize| -> u64 {
        tensors
            .iter()
            .filter(|(p, _)| stage_of(*p) == k)
            .map(|(_, t)| t.elements)
            .sum()
    };
    let biggest = (0..stages)
        .max_by_key(|&k| (total(k), std::cmp::Reverse(k)))
        .unwrap_or(0);
    tensors
        .iter()
        .rev()
        .filter(|(p, _)| stage_of(*p) == biggest)
        .map(|(_, t)| t.elements)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::model::Tensor;
    use super::super::schedule::{Strategy, schedule};
    use super::*;
    use crate::types::DType;

    /// 4 layers of a 10-element tensor, a 6-element embedding, a 3-element
    /// head; hidden 2.
    fn small() -> Model {
        let t = |name: &str, elements| Tensor::new(name, elements, true);
        Model::for_tests(4, 2, vec![t("emb", 6)], vec![t("w", 10)], vec![t("head", 3)])
    }

    fn opts(micro_batches: Option<u64>) -> Options {
        Options {
            micro_batch: 1,
            seq_len: 3,
            micro_batches,
            first_bucket_bytes: 1,
            bucket_cap_bytes: 1,
            ..Options::default()
        }
    }

    fn rows(ops: &[Op]) -> Vec<(Collective, u64, Option<usize>, Group, Phase, String)> {
        ops.iter()
            .map(|o| (o.collective, o.count, o.shift, o.group, o.phase, o.label.clone()))
            .collect()
    }

    #[test]
    fn the_1f1b_order_warms_up_then_alternates_then_cools_down() {
        assert_eq!(
            one_f_one_b(2, 3),
            [(true, 1), (true, 2), (false, 1), (true, 3), (false, 2), (false, 3)]
        );
        assert_eq!(
            one_f_one_b(4, 4),
            [
                (true, 1),
                (true, 2),
                (true, 3),
                (true, 4),
                (false, 1),
                (false, 2),
                (false, 3),
                (false, 4)
            ]
        );
        assert_eq!(
            one_f_one_b(4, 2),
            [(true, 1), (true, 2), (false, 1), (false, 2)],
            "fewer micro-batches than stages"
        );
        assert_eq!(one_f_one_b(1, 2), [(true, 1), (false, 1), (true, 2), (false, 2)]);
    }

    #[test]
    fn two_stages_exchange_activations_and_gradients_in_1f1b_order() {
        use Phase::{Backward as B, Forward as F};
        let l = GroupLayout::new(2, 2, 1).unwrap().with_pp(2).unwrap();
        let s = schedule(Strategy::Pp, &small(), &l, &opts(Some(3))).unwrap();
        // activations 3 x 1 x 2 = 6; shift 1 both ways at 2 stages
        let sr = |phase, label: &str| (Collective::SendRecv, 6, Some(1), Group::Pp, phase, label.to_string());
        assert_eq!(
            rows(&s.ops),
            vec![
                sr(F, "micro-batch 1 activations"),
                sr(F, "micro-batch 2 activations"),
                sr(B, "micro-batch 1 gradients"),
                sr(F, "micro-batch 3 activations"),
                sr(B, "micro-batch 2 gradients"),
                sr(B, "micro-batch 3 gradients"),
            ],
            "one rank per stage: no data-parallel gradients"
        );
        assert!(s.ops.iter().all(|o| o.dtype == DType::Bfloat16));
    }

    #[test]
    fn four_stages_send_gradients_three_places_on_and_two_pipelines_reduce_per_stage() {
        use Phase::{Backward as B, Forward as F};
        let l = GroupLayout::new(4, 4, 1).unwrap().with_pp(4).unwrap();
        let s = schedule(Strategy::Pp, &small(), &l, &opts(None)).unwrap();
        let want: Vec<_> = (1..=4)
            .map(|i| {
                (
                    Collective::SendRecv,
                    6,
                    Some(1),
                    Group::Pp,
                    F,
                    format!("micro-batch {i} activations"),
                )
            })
            .chain((1..=4).map(|i| {
                (
                    Collective::SendRecv,
                    6,
                    Some(3),
                    Group::Pp,
                    B,
                    format!("micro-batch {i} gradients"),
                )
            }))
            .collect();
        assert_eq!(rows(&s.ops), want, "4 micro-batches by default: as many as stages");
        // 8 ranks as 2 pipelines of 4 stages: stage 0 (emb 6 + layer 10) is
        // the largest, its gradients all-reduced over its 2 ranks
        let l = GroupLayout::new(8, 8, 1).unwrap().with_pp(4).unwrap();
        let s = schedule(Strategy::Pp, &small(), &l, &opts(Some(4))).unwrap();
        let grads: Vec<(Collective, u64, Group)> =
            s.ops[8..].iter().map(|o| (o.collective, o.count, o.group)).collect();
        assert_eq!(
            grads,
            [
                (Collective::AllReduce, 10, Group::StageDp),
                (Collective::AllReduce, 6, Group::StageDp)
            ]
        );
        assert_eq!(l.groups(Group::StageDp)[0], vec![0, 1]);
        assert_eq!(l.groups(Group::Pp)[0], vec![0, 2, 4, 6]);
        let l = GroupLayout::new(3, 3, 1).unwrap().with_pp(3).unwrap();
        let e = schedule(Strategy::Pp, &small(), &l, &opts(Some(4))).unwrap_err();
        assert_eq!(
            e.to_string(),
            "the 4 layers of small do not split evenly over 3 pipeline stages"
        );
    }
}
