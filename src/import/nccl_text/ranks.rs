//! The rank count of an nccl-tests run section: where it comes from, and
//! the checks that every other source in the log agrees with it.

use super::{Given, RankLine, Row, Section};
use crate::collective::Collective;

/// Rank lines in rank order, one per rank.
pub(super) fn ranks_by_index(lines: &[RankLine]) -> Vec<RankLine> {
    let mut ranks = lines.to_vec();
    ranks.sort_by_key(|r| r.rank);
    ranks.dedup_by_key(|r| r.rank);
    ranks
}

/// What the Rank lines say: the highest rank and how many below it are
/// missing; an error when one rank is listed by two different processes.
fn rank_lines(lines: &[RankLine]) -> Result<Option<(u64, u64)>, String> {
    let ranks = ranks_by_index(lines);
    for a in lines {
        if let Some(b) = lines
            .iter()
            .find(|b| b.rank == a.rank && (b.pid != a.pid || b.host != a.host))
        {
            return Err(format!(
                "rank {} is listed twice by different processes (lines {} and {}): this log interleaves separate \
                 runs (an nccl-tests built without MPI started by mpirun?); split it, or pass --nranks N",
                a.rank, a.line, b.line
            ));
        }
    }
    Ok(ranks.last().map(|last| (last.rank, last.rank + 1 - ranks.len() as u64)))
}

/// The rank count: --nranks, else the Rank lines, else an echoed command
/// line; every other source in the log must agree, and so must the
/// busbw that nccl-tests printed.
pub(super) fn rank_count(s: &Section, given: &Given, collective: Collective, rows: &[Row]) -> Result<u64, String> {
    let lines = rank_lines(&s.ranks)?;
    let command = s.command.as_ref().and_then(|(l, c)| c.ranks().map(|n| (*l, n)));
    let (n, source, certain) = match (given.nranks, lines, command) {
        (Some(n), _, _) => (n, "--nranks".to_string(), true),
        (None, Some((max, 0)), _) => (max + 1, format!("the '#  Rank 0..{max}' lines"), true),
        (None, _, Some((l, n))) => (n, format!("the command line at line {l}"), true),
        (None, Some((max, _)), None) => (max + 1, format!("the highest '#  Rank {max}' line"), false),
        (None, None, None) => {
            return Err(
                "cannot tell how many ranks ran this: no '#  Rank N' device lines and no echoed command \
                        line with the launch: pass --nranks N"
                    .into(),
            );
        }
    };
    agree(s, n, &source, lines, command)?;
    let factor = |n: u64| collective.spec().bus_factor(n as usize);
    if let Some(bad) = inconsistent(rows, factor(n)) {
        return Err(format!(
            "line {}: the log's busbw {} is not what {} gives with {n} ranks ({}: {:.4} GB/s), so the rank count \
             ({source}) or the collective ({}) is wrong: pass --nranks N or --collective NAME",
            bad.line,
            bad.printed,
            collective.name(),
            bad.time_text,
            bad.ours,
            collective.name()
        ));
    }
    if !certain {
        let (max, missing) = lines.unwrap_or_default();
        let next = n.saturating_add(1);
        let why = if factor(n) == factor(next) {
            format!("{}'s busbw does not depend on it", collective.name())
        } else if inconsistent(rows, factor(next)).is_none() {
            "the printed busbw is too coarse to tell".to_string()
        } else {
            return Ok(n);
        };
        return Err(format!(
            "{missing} of the '#  Rank 0..{max}' lines are missing (elided?), so the rank count is at least {n} \
             but not known, and {why}: pass --nranks N"
        ));
    }
    Ok(n)
}

/// The sources of the rank count that `n` did not come from must agree.
fn agree(
    s: &Section,
    n: u64,
    source: &str,
    lines: Option<(u64, u64)>,
    command: Option<(usize, u64)>,
) -> Result<(), String> {
    match lines {
        Some((max, 0)) if n != max + 1 => {
            return Err(format!(
                "{n} ranks ({source}), but the '#  Rank' lines list ranks 0 to {max}"
            ));
        }
        Some((max, _)) if n <= max => return Err(format!("{n} ranks ({source}), but there is a '#  Rank {max}' line")),
        _ => {}
    }
    if let Some((line, c)) = command
        && c != n
    {
        return Err(format!(
            "{n} ranks ({source}), but the command line at line {line} starts {c}"
        ));
    }
    if let Some((line, t, g)) = s.threads
        && let Some(per_process) = t.checked_mul(g).filter(|p| *p > 0)
        && !n.is_multiple_of(per_process)
    {
        return Err(format!(
            "{n} ranks ({source}) cannot be: line {line} says each process ran nThread {t} x nGpus {g} = \
             {per_process} ranks"
        ));
    }
    Ok(())
}

struct Inconsistent {
    line: usize,
    printed: String,
    time_text: String,
    ours: f64,
}

/// The point whose printed busbw is not what size / time x `factor` gives,
/// allowing for the rounding of both printed numbers; of several, the one
/// with the largest busbw, whose digits leave the least doubt.
fn inconsistent(rows: &[Row], factor: f64) -> Option<Inconsistent> {
    let mut worst: Option<(f64, Inconsistent)> = None;
    for row in rows {
        for p in &row.points {
            let Some(printed_text) = p.busbw_text.as_deref() else {
                continue;
            };
            let Some(printed) = printed_text.parse::<f64>().ok().filter(|b| b.is_finite()) else {
                continue;
            };
            let size = p.m.size_bytes as f64;
            let (t, dt) = (p.m.time_us, half_unit(&p.time_text));
            let db = half_unit(printed_text);
            // GB/s = bytes / (t us * 1e-6) / 1e9 = bytes / t / 1e3
            let bus = |t: f64| {
                if t > 0.0 {
                    size / t / 1e3 * factor
                } else {
                    f64::INFINITY
                }
            };
            let slack = 1e-9 * printed.abs().max(1.0);
            let (lo, hi) = (bus(t + dt) - db - slack, bus(t - dt) + db + slack);
            let ok = (size == 0.0 && printed == 0.0) || (lo..=hi).contains(&printed);
            if !ok && worst.as_ref().is_none_or(|w| printed > w.0) {
                let found = Inconsistent {
                    line: row.line,
                    printed: printed_text.to_string(),
                    time_text: format!("{} B in {} us", p.m.size_bytes, p.time_text),
                    ours: bus(t),
                };
                worst = Some((printed, found));
            }
        }
    }
    worst.map(|w| w.1)
}

/// Half the last printed digit of a number as printf wrote it: `12.5` ->
/// 0.05, `105854` -> 0.5, `1e+06` -> 5e5.
pub(super) fn half_unit(text: &str) -> f64 {
    let lower = text.to_ascii_lowercase();
    let (mantissa, exponent) = match lower.split_once('e') {
        Some((m, e)) => (m.to_string(), e.parse::<i32>().unwrap_or(0)),
        None => (lower, 0),
    };
    let decimals = mantissa.split_once('.').map_or(0, |(_, d)| d.len());
    0.5 * 10f64.powi(exponent.saturating_sub(i32::try_from(decimals).unwrap_or(i32::MAX)))
}
