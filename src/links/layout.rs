//! Where each endpoint sits: its host, and its leaf switch and rack when a
//! topology mapping (`host leaf [rack]` lines) or a hostname pattern
//! (`r{rack}-l{leaf}-*`) gives them. From that come the display order of
//! the matrix and the heatmap (rack, leaf, host, local index) with its
//! group boundaries, and each pair's class: pairs are only ever compared
//! with pairs of the same class (on one host, under one leaf, across
//! leaves, across racks).

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::Serialize;

use super::Endpoint;
use super::schedule::hosts;
use crate::error::Error;

/// A host's place in the network, where known.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Place {
    pub rack: Option<String>,
    pub leaf: Option<String>,
}

/// Host -> place.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Topology {
    places: BTreeMap<String, Place>,
}

impl Topology {
    /// One host per line: `host leaf [rack]`, separated by white space;
    /// `#` starts a comment. Errors name the line.
    pub fn parse(text: &str) -> Result<Topology, String> {
        let mut places = BTreeMap::new();
        for (i, line) in text.lines().enumerate() {
            let words: Vec<&str> = line.split('#').next().unwrap_or("").split_whitespace().collect();
            let place = match words.as_slice() {
                [] => continue,
                [_, leaf] => Place {
                    rack: None,
                    leaf: Some(leaf.to_string()),
                },
                [_, leaf, rack] => Place {
                    rack: Some(rack.to_string()),
                    leaf: Some(leaf.to_string()),
                },
                _ => {
                    return Err(format!(
                        "line {}: expected `host leaf [rack]`, found {} words",
                        i + 1,
                        words.len()
                    ));
                }
            };
            if places.insert(words[0].to_string(), place).is_some() {
                return Err(format!("line {}: host {} is placed twice", i + 1, words[0]));
            }
        }
        Ok(Topology { places })
    }

    /// Every host's place by `pattern`; a host it does not match is a
    /// usage error.
    pub fn from_pattern(pattern: &HostPattern, hosts: &[String]) -> Result<Topology, Error> {
        let mut places = BTreeMap::new();
        for h in hosts {
            let place = pattern.matches(h).ok_or_else(|| {
                Error::usage(format!(
                    "host pattern {pattern}: host {h} does not match it (write literal text, {{leaf}}, {{rack}} and * for any text)"
                ))
            })?;
            places.insert(h.clone(), place);
        }
        Ok(Topology { places })
    }

    /// The mapping must place every host of the launch and no other.
    pub fn check(&self, hosts: &[String], source: &str) -> Result<(), Error> {
        let launch: BTreeSet<&str> = hosts.iter().map(String::as_str).collect();
        let unknown: Vec<&str> = self
            .places
            .keys()
            .map(String::as_str)
            .filter(|h| !launch.contains(h))
            .collect();
        // "{source} names 2 hosts this launch does not have: a, b"
        let refuse = |verb: &str, hosts: &[&str], rest: &str| {
            Err(Error::usage(format!(
                "{source} {verb} {} host{} {rest}: {}",
                hosts.len(),
                if hosts.len() == 1 { "" } else { "s" },
                list(hosts)
            )))
        };
        if !unknown.is_empty() {
            return refuse("names", &unknown, "this launch does not have");
        }
        let missing: Vec<&str> = launch
            .iter()
            .copied()
            .filter(|h| !self.places.contains_key(*h))
            .collect();
        if !missing.is_empty() {
            return refuse("does not place", &missing, "of this launch");
        }
        Ok(())
    }

    pub fn place(&self, host: &str) -> Place {
        self.places.get(host).cloned().unwrap_or_default()
    }
}

/// At most five names, then how many more.
fn list(names: &[&str]) -> String {
    let mut s = names.iter().take(5).copied().collect::<Vec<_>>().join(", ");
    if names.len() > 5 {
        s.push_str(&format!(" and {} more", names.len() - 5));
    }
    s
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Token {
    Text(String),
    Leaf,
    Rack,
    Any,
}

/// A hostname pattern: literal text, `{leaf}` and `{rack}` (each one or
/// more characters, the shortest that lets the rest match) and `*` (any
/// text, possibly none). `gpu-r{rack}-l{leaf}-*` places `gpu-r2-l07-n13`
/// under leaf `07` of rack `2`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostPattern {
    text: String,
    tokens: Vec<Token>,
}

impl fmt::Display for HostPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl HostPattern {
    pub fn parse(text: &str) -> Result<HostPattern, Error> {
        let bad = |why: &str| Error::usage(format!("host pattern {text}: {why}"));
        let mut tokens = Vec::new();
        let mut rest = text;
        while !rest.is_empty() {
            if let Some(after) = rest.strip_prefix('{') {
                let close = after.find('}').ok_or_else(|| bad("a { without its }"))?;
                tokens.push(match &after[..close] {
                    "leaf" => Token::Leaf,
                    "rack" => Token::Rack,
                    other => return Err(bad(&format!("{{{other}}} is neither {{leaf}} nor {{rack}}"))),
                });
                rest = &after[close + 1..];
            } else if let Some(after) = rest.strip_prefix('*') {
                tokens.push(Token::Any);
                rest = after;
            } else {
                let end = rest.find(['{', '*']).unwrap_or(rest.len());
                tokens.push(Token::Text(rest[..end].to_string()));
                rest = &rest[end..];
            }
        }
        let count = |t: &Token| tokens.iter().filter(|x| *x == t).count();
        if count(&Token::Leaf) != 1 || count(&Token::Rack) > 1 {
            return Err(bad("give {leaf} once, and {rack} at most once"));
        }
        Ok(HostPattern {
            text: text.to_string(),
            tokens,
        })
    }

    /// The place of `host`, or None when it does not match.
    pub fn matches(&self, host: &str) -> Option<Place> {
        let mut place = Place::default();
        walk(&self.tokens, host, &mut place).then_some(place)
    }
}

/// Backtracking match of `tokens` against all of `text`.
fn walk(tokens: &[Token], text: &str, place: &mut Place) -> bool {
    let Some((first, rest)) = tokens.split_first() else {
        return text.is_empty();
    };
    match first {
        Token::Text(t) => text
            .strip_prefix(t.as_str())
            .is_some_and(|after| walk(rest, after, place)),
        Token::Any => text
            .char_indices()
            .map(|(i, _)| i)
            .chain([text.len()])
            .any(|i| walk(rest, &text[i..], place)),
        Token::Leaf | Token::Rack => {
            for (i, _) in text.char_indices().skip(1).chain([(text.len(), ' ')]) {
                if walk(rest, &text[i..], place) {
                    let value = Some(text[..i].to_string());
                    if *first == Token::Leaf {
                        place.leaf = value;
                    } else {
                        place.rack = value;
                    }
                    return true;
                }
            }
            false
        }
    }
}

crate::types::vocabulary! {
    /// Which pairs are compared with which.
    #[derive(Default, PartialOrd, Ord, Hash)]
    pub enum PairClass: "pair class", Exact {
        /// Both ranks on one host (NVLink, PCIe, shared memory).
        IntraHost = "intra-host",
        /// Two hosts under one leaf switch.
        IntraLeaf = "intra-leaf",
        /// Two leaves (of one rack, where racks are known).
        CrossLeaf = "cross-leaf",
        /// Two racks.
        CrossRack = "cross-rack",
        /// Two hosts, nothing known of the network between them.
        #[default]
        InterHost = "inter-host",
    }
}

impl PairClass {
    /// Whether the pair crosses the network.
    pub fn network(self) -> bool {
        self != PairClass::IntraHost
    }
}

/// A run of the display order sharing a host, leaf or rack.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Span {
    pub name: String,
    /// Positions in the display order, `start..end`.
    pub start: usize,
    pub end: usize,
}

/// The display order of the measured ranks and its groups.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Layout {
    /// Measured ranks, by rack, leaf, host and local index.
    pub order: Vec<usize>,
    pub hosts: Vec<Span>,
    pub leaves: Vec<Span>,
    pub racks: Vec<Span>,
    /// Each rank's place (indexed by rank; default where unknown).
    places: Vec<Place>,
    host_of: Vec<String>,
}

impl Layout {
    pub fn new(endpoints: &[Endpoint], units: &[usize], topology: Option<&Topology>) -> Layout {
        let host_rank: BTreeMap<String, usize> = hosts(endpoints)
            .into_iter()
            .enumerate()
            .map(|(i, (h, _))| (h, i))
            .collect();
        let n = endpoints.iter().map(|e| e.rank + 1).max().unwrap_or(0);
        let mut places = vec![Place::default(); n];
        let mut host_of = vec![String::new(); n];
        for e in endpoints {
            places[e.rank] = topology.map(|t| t.place(&e.host)).unwrap_or_default();
            host_of[e.rank] = e.host.clone();
        }
        let by_rank: BTreeMap<usize, &Endpoint> = endpoints.iter().map(|e| (e.rank, e)).collect();
        let mut order: Vec<usize> = units.to_vec();
        let key = |r: &usize| {
            let e = by_rank[r];
            (
                places[*r].rack.clone(),
                places[*r].leaf.clone(),
                host_rank.get(&e.host).copied(),
                e.local,
            )
        };
        order.sort_by(|x, y| {
            let (kx, ky) = (key(x), key(y));
            natural_opt(&kx.0, &ky.0)
                .then_with(|| natural_opt(&kx.1, &ky.1))
                .then(kx.2.cmp(&ky.2))
                .then(kx.3.cmp(&ky.3))
        });
        let spans = |name: &dyn Fn(usize) -> Option<String>| {
            let mut out: Vec<Span> = Vec::new();
            for (i, &r) in order.iter().enumerate() {
                let Some(n) = name(r) else { continue };
                match out.last_mut() {
                    Some(s) if s.name == n && s.end == i => s.end = i + 1,
                    _ => out.push(Span {
                        name: n,
                        start: i,
                        end: i + 1,
                    }),
                }
            }
            out
        };
        let hosts = spans(&|r| Some(host_of[r].clone()));
        let leaves = spans(&|r| places[r].leaf.clone());
        let racks = spans(&|r| places[r].rack.clone());
        Layout {
            order,
            hosts,
            leaves,
            racks,
            places,
            host_of,
        }
    }

    pub fn place(&self, rank: usize) -> Place {
        self.places.get(rank).cloned().unwrap_or_default()
    }

    pub fn class(&self, a: usize, b: usize) -> PairClass {
        if self.host_of.get(a) == self.host_of.get(b) {
            return PairClass::IntraHost;
        }
        let (pa, pb) = (self.place(a), self.place(b));
        match (&pa.leaf, &pb.leaf) {
            (Some(x), Some(y)) if x == y && pa.rack == pb.rack => PairClass::IntraLeaf,
            (Some(_), Some(_)) => match (&pa.rack, &pb.rack) {
                (Some(x), Some(y)) if x != y => PairClass::CrossRack,
                _ => PairClass::CrossLeaf,
            },
            _ => PairClass::InterHost,
        }
    }

    /// Position of each rank in the display order (None: not measured).
    pub fn positions(&self) -> BTreeMap<usize, usize> {
        self.order.iter().enumerate().map(|(i, &r)| (r, i)).collect()
    }
}

fn natural_opt(a: &Option<String>, b: &Option<String>) -> Ordering {
    match (a, b) {
        (Some(a), Some(b)) => natural(a, b),
        (a, b) => a.is_some().cmp(&b.is_some()),
    }
}

/// Names compared with their digit runs as numbers: `l2` before `l10`.
pub fn natural(a: &str, b: &str) -> Ordering {
    let chunks = |s: &str| -> Vec<(bool, String)> {
        let mut out: Vec<(bool, String)> = Vec::new();
        for c in s.chars() {
            let digit = c.is_ascii_digit();
            match out.last_mut() {
                Some((d, text)) if *d == digit => text.push(c),
                _ => out.push((digit, c.to_string())),
            }
        }
        out
    };
    let (ca, cb) = (chunks(a), chunks(b));
    for (x, y) in ca.iter().zip(&cb) {
        let o = if x.0 && y.0 {
            let (tx, ty) = (x.1.trim_start_matches('0'), y.1.trim_start_matches('0'));
            tx.len().cmp(&ty.len()).then_with(|| tx.cmp(ty))
        } else {
            x.1.cmp(&y.1)
        };
        if o != Ordering::Equal {
            return o;
        }
    }
    ca.len().cmp(&cb.len()).then_with(|| a.cmp(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn endpoints(hosts: &[&str], per: usize) -> Vec<Endpoint> {
        let mut out = Vec::new();
        for (i, h) in hosts.iter().enumerate() {
            for l in 0..per {
                out.push(Endpoint {
                    rank: i * per + l,
                    host: h.to_string(),
                    local: l,
                    ..Endpoint::default()
                });
            }
        }
        out
    }

    #[test]
    fn a_topology_file_places_hosts_and_names_its_bad_lines() {
        let t = Topology::parse("# host leaf rack\nn1 leafA rack1\nn2 leafB\n\n").unwrap();
        assert_eq!(t.place("n1").rack.as_deref(), Some("rack1"));
        assert_eq!(t.place("n2").leaf.as_deref(), Some("leafB"));
        assert_eq!(t.place("n3"), Place::default());
        assert_eq!(
            Topology::parse("n1 a b c").unwrap_err(),
            "line 1: expected `host leaf [rack]`, found 4 words"
        );
        assert_eq!(
            Topology::parse("n1 a\nn1 b").unwrap_err(),
            "line 2: host n1 is placed twice"
        );
    }

    #[test]
    fn a_topology_must_name_exactly_the_hosts_of_the_launch() {
        let t = Topology::parse("n1 a\nn2 a\nzz b").unwrap();
        let hosts = vec!["n1".to_string(), "n2".to_string()];
        let e = t.check(&hosts, "topology file t.txt").unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert_eq!(
            e.to_string(),
            "topology file t.txt names 1 host this launch does not have: zz"
        );
        let t = Topology::parse("n1 a").unwrap();
        let e = t.check(&hosts, "topology file t.txt").unwrap_err();
        assert_eq!(
            e.to_string(),
            "topology file t.txt does not place 1 host of this launch: n2"
        );
    }

    #[test]
    fn host_patterns_capture_leaf_and_rack() {
        let p = HostPattern::parse("gpu-r{rack}-l{leaf}-*").unwrap();
        let place = p.matches("gpu-r2-l07-n13").unwrap();
        assert_eq!((place.rack.as_deref(), place.leaf.as_deref()), (Some("2"), Some("07")));
        assert_eq!(p.matches("cpu-r2-l07-n13"), None);
        let p = HostPattern::parse("l{leaf}-n*").unwrap();
        assert_eq!(p.matches("l03-n051").unwrap().leaf.as_deref(), Some("03"));
        // {leaf} is never empty
        assert_eq!(p.matches("l-n051"), None);
        for bad in ["n*", "{leaf}{leaf}", "{leaf", "{pod}-{leaf}"] {
            let e = HostPattern::parse(bad).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{bad}");
            assert!(e.to_string().starts_with(&format!("host pattern {bad}: ")), "{e}");
        }
        let hosts = vec!["l1-n1".to_string(), "other".to_string()];
        let e = Topology::from_pattern(&HostPattern::parse("l{leaf}-n*").unwrap(), &hosts).unwrap_err();
        assert!(e.to_string().contains("host other does not match it"), "{e}");
    }

    #[test]
    fn the_layout_orders_by_rack_leaf_host_and_local_index() {
        // launch order interleaves leaves; display order groups them, l2 before l10
        let e = endpoints(&["l10-a", "l2-b", "l10-c", "l2-d"], 2);
        let hosts: Vec<String> = e.iter().map(|e| e.host.clone()).collect();
        let t = Topology::from_pattern(&HostPattern::parse("l{leaf}-*").unwrap(), &hosts).unwrap();
        let units: Vec<usize> = (0..8).collect();
        let l = Layout::new(&e, &units, Some(&t));
        assert_eq!(l.order, vec![2, 3, 6, 7, 0, 1, 4, 5]);
        let names: Vec<&str> = l.leaves.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["2", "10"]);
        assert_eq!((l.leaves[1].start, l.leaves[1].end), (4, 8));
        assert_eq!(l.hosts.len(), 4);
        assert_eq!(l.class(0, 1), PairClass::IntraHost);
        assert_eq!(l.class(0, 4), PairClass::IntraLeaf);
        assert_eq!(l.class(0, 2), PairClass::CrossLeaf);
        let plain = Layout::new(&e, &units, None);
        assert_eq!(plain.order, units);
        assert_eq!(plain.class(0, 2), PairClass::InterHost);
        assert!(plain.leaves.is_empty());
    }

    #[test]
    fn racks_split_cross_leaf_from_cross_rack() {
        let e = endpoints(&["a", "b", "c"], 1);
        let t = Topology::parse("a l1 r1\nb l2 r1\nc l3 r2").unwrap();
        let l = Layout::new(&e, &[0, 1, 2], Some(&t));
        assert_eq!(l.class(0, 1), PairClass::CrossLeaf);
        assert_eq!(l.class(0, 2), PairClass::CrossRack);
        assert_eq!(l.racks.len(), 2);
    }

    #[test]
    fn natural_order_reads_numbers_as_numbers() {
        let mut v = vec!["n10", "n9", "n010a", "m1", "n1"];
        v.sort_by(|a, b| natural(a, b));
        assert_eq!(v, ["m1", "n1", "n9", "n10", "n010a"]);
    }
}
