//! The check of every rank in a log before anything is replayed: the
//! members of each communicator must issue the same collectives in the same
//! order (the classic hang is one rank calling AllGather where the others
//! call AllReduce), and every Send must have its Recv (as RCCL's replayer
//! checks before it replays).
//!
//! Calls are matched within each communicator: by opCount where every
//! member's opCount advances (so an excerpt that shows each rank at a
//! different point still lines up), else by their order, since opCount is
//! no key (it stays 0 in some logs, and NCCL 2.27+ advances it only when
//! the network proxy runs, NVIDIA/nccl PR #2021). Point-to-point calls are
//! matched per (sender, receiver) pair in order, where the ranks in the
//! communicator are known. A rank that shows fewer calls than another is
//! not a divergence (its log may simply end there): the notes say so. A
//! Send (or Recv) whose peer went on to later calls without the matching
//! half is one-sided.
//!
//! Pure: the `Scan` in, a `Check` out.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::codes::{self, LogType};
use super::convert::{Kind, device_ranks_note, devices_are_ranks, kind};
use super::scan::{Call, CommKey, Scan};

/// A disagreement between ranks: the earliest line involved and the words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    pub line: usize,
    pub text: String,
}

/// One communicator as checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommSummary {
    pub name: String,
    pub size: usize,
    /// Ranks (or processes) shown, and their call counts.
    pub members: Vec<(String, usize)>,
    pub how: &'static str,
}

/// What the check found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Check {
    pub comms: Vec<CommSummary>,
    /// Collectives that differ between ranks at the same place.
    pub divergences: Vec<Finding>,
    /// Sends or Recvs whose peer went on without the other half.
    pub one_sided: Vec<Finding>,
    /// Calls without a counterpart where a log ends; what was not checked.
    pub notes: Vec<String>,
}

impl Check {
    pub fn disagrees(&self) -> bool {
        !self.divergences.is_empty() || !self.one_sided.is_empty()
    }

    /// The first disagreement, by line.
    pub fn first(&self) -> Option<&Finding> {
        self.divergences.iter().chain(&self.one_sided).min_by_key(|f| f.line)
    }
}

/// What a call is, for comparing: its operation, count, type, reduction
/// (reductions only) and root (rooted collectives only).
fn shape(c: &Call) -> (String, u64, i64, Option<i64>, Option<i64>) {
    let k = kind(&c.name);
    let reduction = matches!(k, Some(Kind::Coll(x)) if x.spec().is_reduction());
    let rooted = matches!(k, Some(Kind::Coll(x)) if x.spec().has_root());
    (
        c.name.clone(),
        c.count,
        c.datatype,
        reduction.then_some(c.op),
        rooted.then_some(c.root),
    )
}

/// `AllReduce 2097152 bfloat16 sum`.
fn describe(s: &Scan, c: &Call) -> String {
    let (name, count, datatype, op, root) = shape(c);
    let t = match codes::datatype(datatype, s.version) {
        Ok(LogType::Known(t)) => t.name().to_string(),
        Ok(other) => other.nccl_name().to_string(),
        Err(_) => format!("datatype {datatype}"),
    };
    let mut out = format!("{name} {count} {t}");
    if let Some(op) = op {
        match codes::reduce_op(op, s.version) {
            Ok((o, false)) => write!(out, " {}", o.name()).ok(),
            Ok((_, true)) => write!(out, " premul-sum").ok(),
            Err(_) => write!(out, " op {op}").ok(),
        };
    }
    if let Some(r) = root {
        write!(out, " root {r}").ok();
    }
    out
}

fn comm_name(s: &Scan, key: &CommKey, first: usize) -> String {
    let m = &s.members[first];
    match key {
        CommKey::Id(id) => format!("commId {id:#x}"),
        CommKey::World => format!("the communicator of all {} ranks", m.nranks),
        CommKey::Split { seq, color, .. } => {
            format!("comm {:#x} (split {seq}, color {color}, of {} ranks)", m.ptr, m.nranks)
        }
        CommKey::Alone(_) => format!("comm {:#x}", m.ptr),
    }
}

fn list(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [head @ .., last] => format!("{} and {last}", head.join(", ")),
    }
}

fn lines(calls: &[&Call]) -> String {
    let l: Vec<String> = calls.iter().map(|c| c.line.to_string()).collect();
    format!("line{} {}", if l.len() > 1 { "s" } else { "" }, list(&l))
}

/// Checks every communicator the log shows on more than one rank.
pub fn check(s: &Scan) -> Check {
    let mut out = Check::default();
    let keys = comm_keys(s);
    let mut unchecked_p2p = false;
    let mut guessed = false;
    for (key, first) in keys {
        let members = s.members_of(&key);
        let calls: Vec<Vec<&Call>> = members
            .iter()
            .map(|&m| s.calls.iter().filter(|c| c.at.member == m).collect())
            .collect();
        let name = comm_name(s, &key, first);
        let colls = collectives_of(&calls);
        let by_count = colls
            .iter()
            .all(|cs| cs.iter().all(|c| c.op_count.is_some()) && cs.windows(2).all(|w| w[0].op_count < w[1].op_count));
        out.comms.push(CommSummary {
            name: name.clone(),
            size: s.members[first].nranks,
            members: members
                .iter()
                .zip(&calls)
                .map(|(&m, cs)| (s.slots[s.members[m].slot].name(), cs.len()))
                .collect(),
            how: if members.len() < 2 {
                "one rank in the log"
            } else if by_count {
                "matched by opCount"
            } else {
                "matched by order"
            },
        });
        if members.len() < 2 {
            continue;
        }
        let who = |m: usize| s.slots[s.members[members[m]].slot].name();
        let slots: Vec<usize> = members.iter().map(|&m| s.members[m].slot).collect();
        let lined = Members {
            s,
            name: &name,
            colls: &colls,
            slots: &slots,
            by_count,
            who: &who,
        };
        collectives(&lined, &mut out);
        let has_p2p = calls
            .iter()
            .flatten()
            .any(|c| matches!(kind(&c.name), Some(Kind::Send | Kind::Recv)));
        if !has_p2p {
            continue;
        }
        match member_ranks(s, &members, &mut guessed) {
            Some(ranks) => point_to_point(s, &name, &calls, &ranks, &who, &mut out),
            None => unchecked_p2p = true,
        }
    }
    if guessed {
        out.notes.push(device_ranks_note(s));
    }
    if unchecked_p2p {
        out.notes.push(
            "point-to-point calls on communicators without INIT lines were not matched (the ranks in them are unknown)"
                .into(),
        );
    }
    out
}

/// Each communicator the log shows, with its first member's index, in the
/// order of first appearance.
fn comm_keys(s: &Scan) -> Vec<(CommKey, usize)> {
    let mut keys: Vec<(CommKey, usize)> = Vec::new();
    for (i, m) in s.members.iter().enumerate() {
        if !keys.iter().any(|(k, _)| *k == m.key) {
            keys.push((m.key.clone(), i));
        }
    }
    keys
}

/// Each member's calls without its point-to-point ones.
fn collectives_of<'c>(calls: &[Vec<&'c Call>]) -> Vec<Vec<&'c Call>> {
    calls
        .iter()
        .map(|cs| {
            cs.iter()
                .copied()
                .filter(|c| !matches!(kind(&c.name), Some(Kind::Send | Kind::Recv)))
                .collect()
        })
        .collect()
}

/// The members' ranks: from their INIT lines or, on the world communicator
/// when devices are ranks, their devices (`guessed` then set); `None` when
/// one is unknown.
fn member_ranks(s: &Scan, members: &[usize], guessed: &mut bool) -> Option<Vec<usize>> {
    members
        .iter()
        .map(|&m| {
            let mm = &s.members[m];
            mm.rank.or_else(|| {
                (mm.key == CommKey::World && devices_are_ranks(s))
                    .then(|| {
                        *guessed = true;
                        s.slots[mm.slot].dev.map(|d| d as usize)
                    })
                    .flatten()
            })
        })
        .collect()
}

/// A communicator's members and their collectives (a list per member),
/// matched by opCount or by order (`by_count`).
struct Members<'a> {
    s: &'a Scan,
    name: &'a str,
    colls: &'a [Vec<&'a Call>],
    /// Each member's slot.
    slots: &'a [usize],
    by_count: bool,
    /// A member's name.
    who: &'a dyn Fn(usize) -> String,
}

/// The members' collectives, lined up.
fn collectives(m: &Members, out: &mut Check) {
    if let Some(divergence) = first_divergence(m.s, m.name, &lined_up(m.colls, m.by_count), m.by_count, m.who) {
        out.divergences.push(divergence);
        // the first divergence of a communicator: later rows follow from it
        return;
    }
    unfinished(m, out);
}

/// Rows of (place, one call or none per member).
fn lined_up<'c>(colls: &[Vec<&'c Call>], by_count: bool) -> BTreeMap<u64, Vec<Option<&'c Call>>> {
    let mut rows: BTreeMap<u64, Vec<Option<&Call>>> = BTreeMap::new();
    for (m, cs) in colls.iter().enumerate() {
        for (i, c) in cs.iter().enumerate() {
            let at = if by_count { c.op_count.unwrap_or(0) } else { i as u64 };
            rows.entry(at).or_insert_with(|| vec![None; colls.len()])[m] = Some(c);
        }
    }
    rows
}

/// The first row where the members' calls differ in shape.
fn first_divergence(
    s: &Scan,
    name: &str,
    rows: &BTreeMap<u64, Vec<Option<&Call>>>,
    by_count: bool,
    who: &dyn Fn(usize) -> String,
) -> Option<Finding> {
    let place = |at: u64| {
        if by_count {
            format!("opCount {at:#x}")
        } else {
            format!("its call {} in each rank's order", at + 1)
        }
    };
    for (&at, row) in rows {
        let present: Vec<(usize, &Call)> = row.iter().enumerate().filter_map(|(m, c)| Some((m, (*c)?))).collect();
        if present.len() < 2 || present.iter().all(|(_, c)| shape(c) == shape(present[0].1)) {
            continue;
        }
        let mut groups: Vec<(String, Vec<String>, Vec<&Call>)> = Vec::new();
        for (m, c) in &present {
            let d = describe(s, c);
            match groups.iter_mut().find(|g| g.0 == d) {
                Some(g) => {
                    g.1.push(who(*m));
                    g.2.push(c);
                }
                None => groups.push((d, vec![who(*m)], vec![c])),
            }
        }
        let parts: Vec<String> = groups
            .iter()
            .map(|(d, ws, cs)| format!("{} {d} ({})", list(ws), lines(cs)))
            .collect();
        return Some(Finding {
            line: present.iter().map(|(_, c)| c.line).min().unwrap_or(0),
            text: format!("the ranks diverge on {name} at {}: {}", place(at), parts.join("; ")),
        });
    }
    None
}

/// Calls one rank shows and another's log does not reach.
fn unfinished(members: &Members, out: &mut Check) {
    let Members {
        s,
        name,
        colls,
        slots,
        by_count,
        who,
    } = *members;
    let last: Vec<Option<u64>> = colls
        .iter()
        .map(|cs| {
            cs.last().map(|c| {
                if by_count {
                    c.op_count.unwrap_or(0)
                } else {
                    cs.len() as u64 - 1
                }
            })
        })
        .collect();
    let Some(end) = last.iter().flatten().max().copied() else {
        return;
    };
    let behind: Vec<String> = (0..colls.len())
        .filter(|&m| last[m].is_none_or(|l| l < end))
        .map(who)
        .collect();
    if behind.is_empty() {
        return;
    }
    let ahead: Vec<(String, Vec<&Call>)> = (0..colls.len())
        .filter(|&m| last[m] == Some(end))
        .map(|m| {
            let beyond: Vec<&Call> = colls[m]
                .iter()
                .copied()
                .filter(|c| {
                    let at = if by_count {
                        c.op_count.unwrap_or(0)
                    } else {
                        colls[m].iter().position(|x| std::ptr::eq(*x, *c)).unwrap_or(0) as u64
                    };
                    (0..colls.len()).any(|o| last[o].is_none_or(|l| at > l))
                })
                .collect();
            (who(m), beyond)
        })
        .collect();
    let shown: Vec<String> = ahead
        .iter()
        .map(|(w, cs)| format!("{w} ({} more: {})", cs.len(), lines(cs)))
        .collect();
    let cut: usize = (0..colls.len())
        .filter(|&m| last[m].is_none_or(|l| l < end))
        .map(|m| s.cuts.iter().filter(|c| c.slot == Some(slots[m])).count())
        .sum();
    let one = behind.len() == 1;
    out.notes.push(format!(
        "{name}: {} show{} fewer calls than {}: {} log{} end{} there{}, or {} never issued them (a hang)",
        list(&behind),
        if one { "s" } else { "" },
        list(&shown),
        if one { "its" } else { "their" },
        if one { "" } else { "s" },
        if one { "s" } else { "" },
        if cut > 0 {
            format!(" or {} cut short ({cut} cut lines)", if one { "is" } else { "are" })
        } else {
            String::new()
        },
        if one { "it" } else { "they" },
    ));
}

/// A point-to-point call: peer, count, datatype, the call.
type P2p<'a> = (usize, u64, i64, &'a Call);

/// Sends against Recvs, per (sender, receiver) pair.
fn point_to_point(
    s: &Scan,
    name: &str,
    calls: &[Vec<&Call>],
    ranks: &[usize],
    who: &dyn Fn(usize) -> String,
    out: &mut Check,
) {
    let index = |r: usize| ranks.iter().position(|&x| x == r);
    let p2p = |m: usize, k: Kind| -> Vec<P2p> {
        calls[m]
            .iter()
            .copied()
            .filter(|c| kind(&c.name) == Some(k) && c.count > 0)
            .map(|c| (c.root.max(0) as usize, c.count, c.datatype, c))
            .collect()
    };
    for (a, &ra) in ranks.iter().enumerate() {
        for (send, k, other) in [(true, Kind::Send, Kind::Recv), (false, Kind::Recv, Kind::Send)] {
            for (peer, list_a) in group_by_peer(p2p(a, k)) {
                let Some(b) = index(peer) else {
                    if send {
                        out.notes.push(format!(
                            "{name}: {} sends to rank {peer}, whose calls are not in the log (line {})",
                            who(a),
                            list_a[0].3.line
                        ));
                    }
                    continue;
                };
                let list_b: Vec<P2p> = p2p(b, other).into_iter().filter(|x| x.0 == ra).collect();
                for (j, x) in list_a.iter().enumerate() {
                    let verb = if send { "sends" } else { "receives" };
                    match list_b.get(j) {
                        Some(y) if (y.1, y.2) != (x.1, x.2) => {
                            if send {
                                out.divergences.push(send_mismatch(s, name, who, (a, x), (b, y)));
                            }
                        }
                        Some(_) => {}
                        None if a == b => {}
                        None => match moved_on(&calls[b], x.3) {
                            Some(later) => out.one_sided.push(Finding {
                                line: x.3.line,
                                text: format!(
                                    "one-sided {}: {} {verb} {} {} {} on {name} (line {}), and {} posts no matching {}{} though its log goes on (line {})",
                                    if send { "Send" } else { "Recv" },
                                    who(a),
                                    describe(s, x.3).split_once(' ').map_or("", |p| p.1),
                                    if send { "to" } else { "from" },
                                    who(b),
                                    x.3.line,
                                    who(b),
                                    if send { "Recv" } else { "Send" },
                                    if send { format!(" from {}", who(a)) } else { format!(" to {}", who(a)) },
                                    later.line
                                ),
                            }),
                            None => out.notes.push(format!(
                                "{name}: {}'s {} of {} elements {} {} (line {}) has no counterpart in {}'s log, which ends before it",
                                who(a),
                                if send { "Send" } else { "Recv" },
                                x.1,
                                if send { "to" } else { "from" },
                                who(b),
                                x.3.line,
                                who(b)
                            )),
                        },
                    }
                }
            }
        }
    }
}

/// A Send (`x`, of member `a`) and the Recv (`y`, of member `b`) posted for it
/// that differ in count or datatype.
fn send_mismatch(
    s: &Scan,
    name: &str,
    who: &dyn Fn(usize) -> String,
    (a, x): (usize, &P2p),
    (b, y): (usize, &P2p),
) -> Finding {
    let (verb, noun) = ("sends", "Recv from");
    Finding {
        line: x.3.line.min(y.3.line),
        text: format!(
            "the ranks diverge on {name}: {} {verb} {} to {} (line {}) but {} posts a {noun} {} of {} (line {})",
            who(a),
            describe(s, x.3).split_once(' ').map_or("", |p| p.1),
            who(b),
            x.3.line,
            who(b),
            who(a),
            describe(s, y.3).split_once(' ').map_or("", |p| p.1),
            y.3.line
        ),
    }
}

/// Whether a member (its calls `mine`) went on past `c` (a call of its
/// peer): a later opCount, or a collective after its last point-to-point
/// call.
fn moved_on<'c>(mine: &[&'c Call], c: &Call) -> Option<&'c Call> {
    if let Some(x) = c.op_count
        && mine.iter().all(|y| y.op_count.is_some())
        && let Some(later) = mine.iter().find(|y| y.op_count.is_some_and(|o| o > x))
    {
        return Some(later);
    }
    let last_p2p = mine
        .iter()
        .rposition(|y| matches!(kind(&y.name), Some(Kind::Send | Kind::Recv)))?;
    mine.get(last_p2p + 1).copied()
}

fn group_by_peer(list: Vec<P2p>) -> BTreeMap<usize, Vec<P2p>> {
    let mut out: BTreeMap<usize, Vec<P2p>> = BTreeMap::new();
    for x in list {
        out.entry(x.0).or_default().push(x);
    }
    out
}

/// The check as text, for `--check-only`.
pub fn report(c: &Check) -> Vec<String> {
    let mut out = Vec::new();
    out.push("communicators".into());
    for comm in &c.comms {
        let m: Vec<String> = comm.members.iter().map(|(w, n)| format!("{w}: {n}")).collect();
        out.push(format!(
            "  {} ({}; {}): calls per rank {}",
            comm.name,
            crate::types::count_of(comm.size, "rank"),
            comm.how,
            m.join(", ")
        ));
    }
    if !c.divergences.is_empty() {
        out.push("divergences".into());
        out.extend(c.divergences.iter().map(|f| format!("  line {}: {}", f.line, f.text)));
    }
    if !c.one_sided.is_empty() {
        out.push("one-sided point-to-point calls".into());
        out.extend(c.one_sided.iter().map(|f| format!("  line {}: {}", f.line, f.text)));
    }
    if !c.notes.is_empty() {
        out.push("notes".into());
        out.extend(c.notes.iter().map(|n| format!("  {n}")));
    }
    out
}
