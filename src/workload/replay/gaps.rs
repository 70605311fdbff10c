//! Whether the kept rank's sequence is whole: a call line of its own that
//! is cut short or damaged in the middle of its sequence is a gap, and the
//! log is refused (another rank may be whole: `--rank`); its last call
//! line cut short (a job killed while writing, the end of a paste) is no
//! gap, since nothing of it follows: the calls before it are replayed and
//! a note names the line. The lines skipped elsewhere (other ranks' cut or
//! damaged lines, lines without their prefix, NCCL 2.3 lines, elided
//! communicators) are named in the notes.

use super::scan::{Cut, Scan};
use crate::error::Error;

pub(super) fn numbers(lines: &[usize]) -> String {
    let shown: Vec<String> = lines.iter().take(8).map(|n| n.to_string()).collect();
    format!("{}{}", shown.join(", "), if lines.len() > 8 { ", ..." } else { "" })
}

/// Refuses a kept rank whose sequence has a gap; notes its final line cut
/// short, and the lines skipped.
pub(super) fn gaps(s: &Scan, slot: usize, notes: &mut Vec<String>) -> Result<(), Error> {
    let who = s.slots[slot].name();
    let calls = s.calls.iter().filter(|c| c.at.slot == slot).count();
    let last_call = s.calls.iter().filter(|c| c.at.slot == slot).map(|c| c.line).max();
    let own: Vec<&Cut> = s
        .cuts
        .iter()
        .filter(|c| c.slot == Some(slot) && c.name != "INIT")
        .collect();
    // in a log of one rank, a line cut before its prefix could be read is its too
    let unknown: Vec<&Cut> = s
        .cuts
        .iter()
        .filter(|c| c.slot.is_none() && c.name != "INIT" && s.slots.len() == 1)
        .collect();
    let last = own.iter().chain(&unknown).map(|c| c.line).max();
    let end = last.filter(|&l| calls > 0 && last_call.is_some_and(|c| c < l));
    refuse(s, slot, &who, &own, &unknown, end)?;
    if let Some(c) = own.iter().chain(&unknown).find(|c| Some(c.line) == end) {
        let what = if c.malformed {
            format!("cannot be read: it has no {}", c.missing.trim_start_matches("a "))
        } else {
            format!("is cut short (it lacks {})", c.missing)
        };
        let before = match calls {
            1 => "the call before it is replayed".to_string(),
            n => format!("the {n} calls before it are replayed"),
        };
        notes.push(format!("line {}, {who}'s last call line, {what}: {before}", c.line));
    }
    note_skipped(s, &who, end, notes);
    Ok(())
}

/// Refuses the kept rank (`who`, in `slot`) when one of its call lines
/// before `end` is cut short or damaged, or may be missing.
fn refuse(s: &Scan, slot: usize, who: &str, own: &[&Cut], unknown: &[&Cut], end: Option<usize>) -> Result<(), Error> {
    let middle = |c: &&&Cut| Some(c.line) != end;
    let cut: Vec<usize> = own.iter().filter(|c| !c.malformed).map(|c| c.line).collect();
    if own.iter().filter(middle).any(|c| !c.malformed) {
        return Err(Error::usage(format!(
            "{who}'s sequence has a gap: its call line{} {} {} cut short (at a terminal's width, by other output, or at the end of the file) and no later line holds the rest; replay another rank (--rank) or a complete log",
            if cut.len() > 1 { "s" } else { "" },
            numbers(&cut),
            if cut.len() > 1 { "are" } else { "is" }
        )));
    }
    if let Some(c) = own.iter().find(|c| middle(c)) {
        return Err(Error::usage(format!(
            "{who}'s sequence has a gap: its call line {} cannot be read: it has no {}; replay another rank (--rank) or repair the line",
            c.line,
            c.missing.trim_start_matches("a ")
        )));
    }
    let ptrs: Vec<u64> = s.members.iter().filter(|m| m.slot == slot).map(|m| m.ptr).collect();
    let stray: Vec<usize> = s
        .orphans
        .iter()
        .filter(|(_, comm)| comm.is_some_and(|c| ptrs.contains(&c)))
        .map(|(n, _)| *n)
        .collect();
    if !stray.is_empty() {
        return Err(Error::usage(format!(
            "{who}'s sequence may have a gap: line {} {} a call on its communicator without its `host:pid:tid [dev] NCCL INFO` prefix (other output took it)",
            numbers(&stray),
            if stray.len() > 1 { "are" } else { "is" }
        )));
    }
    let unknown: Vec<usize> = unknown.iter().filter(middle).map(|c| c.line).collect();
    if !unknown.is_empty() {
        return Err(Error::usage(format!(
            "{who}'s sequence may have a gap: call line{} {} {} cut short before its prefix or communicator could be read",
            if unknown.len() > 1 { "s" } else { "" },
            numbers(&unknown),
            if unknown.len() > 1 { "are" } else { "is" }
        )));
    }
    Ok(())
}

/// Notes the lines skipped: cut short or damaged (but `end`, the kept
/// rank's own final line, noted apart), without their prefix, without the
/// operation's name, or with an elided communicator.
fn note_skipped(s: &Scan, who: &str, end: Option<usize>, notes: &mut Vec<String>) {
    let skipped = |malformed: bool| -> Vec<&Cut> {
        s.cuts
            .iter()
            .filter(|c| c.malformed == malformed && Some(c.line) != end)
            .collect()
    };
    let mut cut: Vec<usize> = skipped(false)
        .iter()
        .map(|c| c.line)
        .chain(s.cut_inits.iter().copied())
        .collect();
    cut.sort();
    if !cut.is_empty() {
        notes.push(format!(
            "{} lines cut short (line {}) were skipped: none is {who}'s{}",
            cut.len(),
            numbers(&cut),
            match s.cut_inits.as_slice() {
                [] => String::new(),
                [one] => format!(" (line {one}, an INIT line cut after its fields, is read up to the cut)"),
                many => format!(
                    " (lines {}, INIT lines cut after their fields, are read up to the cut)",
                    numbers(many)
                ),
            }
        ));
    }
    let damaged = skipped(true);
    if !damaged.is_empty() {
        let shown: Vec<String> = damaged
            .iter()
            .take(4)
            .map(|c| format!("line {}: {}", c.line, c.missing.trim_start_matches("a readable ")))
            .collect();
        notes.push(format!(
            "{} call lines with a value that cannot be read were skipped ({}{}): none is {who}'s",
            damaged.len(),
            shown.join("; "),
            if damaged.len() > 4 { "; ..." } else { "" }
        ));
    }
    if !s.orphans.is_empty() {
        let lines: Vec<usize> = s.orphans.iter().map(|(n, _)| *n).collect();
        notes.push(format!(
            "{} call lines without their `host:pid:tid [dev] NCCL INFO` prefix (output interleaved by another process) were skipped: line {}",
            lines.len(),
            numbers(&lines)
        ));
    }
    if !s.unnamed.is_empty() {
        notes.push(format!(
            "{} NCCL 2.3 COLL lines without the operation's name were skipped (line {})",
            s.unnamed.len(),
            numbers(&s.unnamed)
        ));
    }
    if !s.elided.is_empty() {
        notes.push(format!(
            "{} NCCL CALL trace lines with an elided communicator were skipped (line {})",
            s.elided.len(),
            numbers(&s.elided)
        ));
    }
}
