use std::collections::BTreeMap;

use super::*;
use crate::workload::Tally;

/// A configuration of no operations whose timed steps took `step_us`.
fn outcome(name: &str, step_us: Vec<f64>) -> Outcome {
    let median = crate::stats::median(&step_us).unwrap();
    Outcome {
        name: name.into(),
        strategy: Some("ddp".into()),
        bucket_bytes: None,
        layout: GroupLayout::new(2, 2, 1).unwrap(),
        ops: Vec::new(),
        step_median_us: median,
        step_p99_us: median,
        step_mean_us: median,
        step_us,
        overhead_mean_us: 0.0,
        summary: Summary {
            total: Tally::default(),
            by_collective: BTreeMap::new(),
            by_class: Vec::new(),
        },
        wrong: None,
        failed_ops: 0,
        check_passes: 0,
    }
}

/// The `vs fastest` word of every row of a side-by-side table.
fn verdicts(table: &str) -> Vec<String> {
    table
        .lines()
        .filter(|l| !l.is_empty())
        .skip(2)
        .take_while(|l| !l.trim_start().starts_with("note:"))
        .map(|l| {
            ["not significant", "too few steps", "fastest", "slower", "faster"]
                .into_iter()
                .find(|w| l.contains(w))
                .unwrap_or_else(|| panic!("no verdict: {l}"))
                .to_string()
        })
        .collect()
}

/// A fixed stream of step times around 1 ms, each configuration's from
/// the same distribution (a linear congruential generator: the same
/// figures on every machine).
struct Steps(u64);

impl Steps {
    fn next(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        1000.0 * (1.0 + (self.0 >> 11) as f64 / (1u64 << 53) as f64 * 0.3)
    }

    fn take(&mut self, n: usize) -> Vec<f64> {
        (0..n).map(|_| self.next()).collect()
    }
}

#[test]
fn identical_configurations_get_a_false_verdict_in_at_most_one_table_in_20() {
    // 8 configurations of one distribution, 10 steps each, as the
    // reviewer's 8 bucket caps of one schedule: at 95% per row (picked
    // fastest against each), 37% of tables called one slower
    let mut steps = Steps(7);
    let tables = 400;
    let mut false_tables = 0;
    for _ in 0..tables {
        let all: Vec<Outcome> = (0..8).map(|i| outcome(&format!("c{i}"), steps.take(10))).collect();
        let table = side_by_side(&all);
        let v = verdicts(&table);
        assert_eq!(v.iter().filter(|w| *w == "fastest").count(), 1, "{table}");
        if v.iter().any(|w| w == "slower" || w == "faster") {
            false_tables += 1;
        }
    }
    // the family-wise bound is 5%; sampled, 2 to 3%
    assert!(false_tables * 20 <= tables, "{false_tables} of {tables} tables");
}

#[test]
fn the_heading_says_the_interval_level_and_a_real_difference_is_still_slower() {
    let mut steps = Steps(11);
    let mut all: Vec<Outcome> = (0..8).map(|i| outcome(&format!("c{i}"), steps.take(10))).collect();
    all[3].step_us.iter_mut().for_each(|t| *t *= 1.5);
    all[3].step_median_us *= 1.5;
    let table = side_by_side(&all);
    assert!(
        table.contains("with its 99.82% interval; the steps ran interleaved")
            && table.contains(
                "note: each interval at 99.82%, so that all the table's verdicts hold together at 95% (Bonferroni \
                 over the 28 pairs of its 8 configurations: the fastest is picked after the steps)"
            ),
        "{table}"
    );
    let v = verdicts(&table);
    assert_eq!(v[3], "slower", "{table}");
    assert_eq!(v.iter().filter(|w| *w == "slower").count(), 1, "{table}");
    // two configurations: one comparison, at 95%
    let table = side_by_side(&all[2..4]);
    assert!(
        table.contains("with its 95% interval; the steps ran interleaved"),
        "{table}"
    );
    assert!(!table.contains("note:"), "{table}");
    assert_eq!(verdicts(&table), ["fastest", "slower"], "{table}");
}

#[test]
fn too_few_steps_for_the_table_s_level_say_how_many_it_needs() {
    // 6 steps a side reach 95% for one pair (2 / C(12, 6) = 0.002), not
    // 99.82% for 8 configurations: 7 a side do (2 / C(14, 7) = 0.0006)
    let mut steps = Steps(3);
    let all: Vec<Outcome> = (0..8).map(|i| outcome(&format!("c{i}"), steps.take(6))).collect();
    let table = side_by_side(&all);
    assert_eq!(
        verdicts(&table).iter().filter(|w| *w == "too few steps").count(),
        7,
        "{table}"
    );
    assert!(
        table.contains(
            "note: too few steps for the rank test to tell configurations apart at the 99.82% level (7 a side at \
             the least for 8 configurations); --steps 10 gives an interval"
        ),
        "{table}"
    );
    let two = side_by_side(&all[..2]);
    // the same 6 steps give one pair an interval at 95%
    assert!(!two.contains("too few steps"), "{two}");
    // three a side cannot reach even 95%: 4 are needed
    let three: Vec<Outcome> = (0..2).map(|i| outcome(&format!("c{i}"), steps.take(3))).collect();
    let table = side_by_side(&three);
    assert!(
        table.contains("at the 95% level (4 a side at the least); --steps 10"),
        "{table}"
    );
}

#[test]
fn levels_show_the_digits_that_tell_them_from_100_percent() {
    assert_eq!(level(0.05), "95%");
    assert_eq!(level(interval_alpha(3)), "98.3%");
    assert_eq!(level(interval_alpha(8)), "99.82%");
    assert_eq!(level(interval_alpha(14)), "99.945%");
    assert_eq!(interval_alpha(2), 0.05);
    assert_eq!(interval_alpha(1), 0.05);
    // the default 10 steps give an interval up to 96 configurations
    assert_eq!(steps_needed(interval_alpha(2)), 4);
    assert_eq!(steps_needed(interval_alpha(8)), 7);
    assert_eq!(steps_needed(interval_alpha(96)), 10);
    assert_eq!(steps_needed(interval_alpha(97)), 11);
}

#[test]
fn the_validated_line_says_the_passes_and_when_checking_is_off() {
    let line = |wrong: Option<u64>, passes: u32| {
        let o = Outcome {
            wrong,
            check_passes: passes,
            ..outcome("ddp", vec![100.0, 110.0])
        };
        one(&o, None)
            .lines()
            .find(|l| l.trim_start().starts_with("validated"))
            .unwrap()
            .to_string()
    };
    assert_eq!(
        line(Some(0), 1),
        "  validated        every operation once: 0 wrong elements"
    );
    assert_eq!(
        line(Some(6), 3),
        "  validated        every operation 3 times (-c 3): 6 wrong elements"
    );
    assert_eq!(
        line(None, 0),
        "  validated        off (-c 0): no operation's result was checked"
    );
}

/// `o` with operations of `counts` elements, the i-th taking `means[i]`
/// microseconds a step.
fn with_ops(o: Outcome, counts: &[u64], means: &[f64]) -> Outcome {
    use crate::collective::Collective;
    use crate::types::DType;
    use crate::workload::{Group, Op, Phase};
    let ops = counts
        .iter()
        .zip(means)
        .enumerate()
        .map(|(i, (&count, &mean_us))| OpResult {
            op: Op::reduce(
                Collective::AllReduce,
                count,
                DType::Float,
                Group::World,
                Phase::Backward,
                format!("bucket {i}"),
            ),
            run_dtype: DType::Float,
            run_count: count,
            ranks: 2,
            size_bytes: count * 4,
            bus_bytes: count as f64 * 4.0,
            median_us: mean_us,
            p99_us: mean_us,
            mean_us,
        })
        .collect();
    let mut o = Outcome { ops, ..o };
    o.summary.total.time_us = means.iter().sum();
    o
}

#[test]
fn top_0_lists_no_operations_and_no_heading() {
    let o = with_ops(outcome("replay", vec![100.0, 110.0]), &[8, 1, 64], &[10.0, 30.0, 20.0]);
    assert!(!one(&o, Some(0)).contains("top"), "{}", one(&o, Some(0)));
    let empty = outcome("replay", vec![100.0, 110.0]);
    assert!(
        !one(&empty, Some(5)).contains("top"),
        "no operations: {}",
        one(&empty, Some(5))
    );
}

#[test]
fn the_top_list_numbers_its_rows_and_names_each_operation_s_place_in_the_step() {
    let o = with_ops(outcome("replay", vec![100.0, 110.0]), &[8, 1, 64], &[10.0, 30.0, 20.0]);
    let text = one(&o, Some(2));
    let top: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("top"))
        .collect();
    assert!(
        top[0].starts_with("  top 2 operations by time (mean per step, share of the collectives' 60.0 us; median beside it; op N: the step's N-th operation, the CSV's op_index)"),
        "{text}"
    );
    assert_eq!(top.len(), 3, "{text}");
    // the slowest is the step's 2nd operation, of 1 element; then its 3rd
    assert!(
        top[1].starts_with("     1. op 2     all_reduce                 1 element  float "),
        "{}",
        top[1]
    );
    assert!(
        top[2].starts_with("     2. op 3     all_reduce                64 elements float "),
        "{}",
        top[2]
    );
}
