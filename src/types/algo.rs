//! Which algorithm and protocol NCCL ran (docs/algorithms.md): the
//! vocabularies (`Algo`, `Proto`), where a row's choice came from
//! (`AlgoSource`), how a run records it (`AlgoRecording`), one choice and
//! how many launches made it (`AlgoChoice`), a point's choices
//! (`AlgoRecord`), and a cell that is one value or `mixed` (`Chosen`).
//!
//! Pure data: what NCCL's lines say is read by `nccl_log` and the NCCL
//! backend; here only the names and NCCL's numeric codes (the
//! `NCCL_ALGO_*` and `NCCL_PROTO_*` values of nccl_common.h, the same from
//! 2.20 to 2.30).

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::Named;

crate::types::vocabulary! {
    /// An NCCL algorithm, named as the `algo` column names it; NCCL's own
    /// spellings (`NVLS_TREE`, `COLLNET_DIRECT`) read too.
    #[derive(Hash, PartialOrd, Ord)]
    pub enum Algo: "algorithm", AnyCase {
        Ring = "ring",
        Tree = "tree",
        Nvls = "nvls",
        NvlsTree = "nvls_tree" | "nvlstree",
        CollnetDirect = "collnet_direct" | "collnetdirect",
        CollnetChain = "collnet_chain" | "collnetchain",
        Pat = "pat",
    }
}

crate::types::vocabulary! {
    /// An NCCL protocol (the `proto` column).
    #[derive(Hash, PartialOrd, Ord)]
    pub enum Proto: "protocol", AnyCase {
        Ll = "ll",
        Ll128 = "ll128",
        Simple = "simple",
    }
}

crate::types::vocabulary! {
    /// Where a row's algorithm came from (the `algo_source` column).
    pub enum AlgoSource: "algorithm source", AnyCase {
        /// collbench's profiler plugin: NCCL's own event for each
        /// collective (NCCL 2.23 and later).
        Plugin = "plugin",
        /// Rank 0's TUNING lines in NCCL's log.
        Log = "log",
        /// A pinned sweep (`--algo`, `--proto`) whose launches nothing
        /// recorded: the pin's values, as NCCL was told to run.
        Pinned = "pinned",
        /// Nothing said it (the run header says why and how to get it).
        Unknown = "unknown",
    }
}

/// How the run header's backend note names the source it recorded from
/// (`backend::nccl`'s recorder writes them; `import` reads them back, as
/// the table's `algo` cell does not say where it came from).
pub const PLUGIN_WORDS: &str = "algorithm, protocol and channels from collbench's profiler plugin";
/// The TUNING lines' counterpart of `PLUGIN_WORDS`.
pub const LOG_WORDS: &str = "algorithm and protocol from rank 0's TUNING lines in NCCL's log";

impl AlgoSource {
    /// The source a run header's backend note says the run recorded from
    /// (`PLUGIN_WORDS`, `LOG_WORDS`); `None` where it recorded nothing.
    pub fn in_header(note: &str) -> Option<AlgoSource> {
        [(PLUGIN_WORDS, AlgoSource::Plugin), (LOG_WORDS, AlgoSource::Log)]
            .into_iter()
            .find_map(|(words, source)| note.contains(words).then_some(source))
    }
}

crate::types::vocabulary! {
    /// `--algo-record`: how a run learns which algorithm NCCL chose.
    #[derive(Default)]
    pub enum AlgoRecording: "way to record the algorithm", AnyCase {
        /// On the nccl backend, the plugin where the release has a
        /// profiler interface and it loads, else the TUNING log, else
        /// `unknown`; elsewhere off.
        #[default]
        Auto = "auto",
        /// collbench's profiler plugin (NCCL 2.23 and later), nothing else.
        Plugin = "plugin",
        /// Rank 0's TUNING lines (NCCL 2.20 and later): one log line per
        /// launch, written inside the timed loop.
        Log = "log",
        /// Not recorded: no algorithm columns.
        Off = "off",
    }
}

impl AlgoRecording {
    /// What this choice means on `backend`: `auto` is off where no NCCL
    /// algorithm runs (no columns).
    pub fn on(self, backend: super::BackendKind) -> AlgoRecording {
        match (self, backend) {
            (AlgoRecording::Auto, super::BackendKind::Mpi | super::BackendKind::Memory) => AlgoRecording::Off,
            (how, _) => how,
        }
    }

    /// Asked for by name (`plugin`, `log`): a backend without NCCL says
    /// it cannot.
    pub fn explicit(self) -> bool {
        matches!(self, AlgoRecording::Plugin | AlgoRecording::Log)
    }
}

/// Where NCCL_PROFILER_PLUGIN stands for a run on the nccl backend.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProfilerEnv {
    /// collbench set it to its plugin, at this absolute path.
    Ours(std::path::PathBuf),
    /// It was set before the run (the user's own plugin): this value.
    User(String),
    /// Not set: collbench did not ask for its plugin, or could not use it.
    Unset,
}

/// What the nccl backend's recorder is given: the choice, NCCL's private
/// log (or why there is none) and NCCL_PROFILER_PLUGIN.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AlgoSetup {
    pub recording: AlgoRecording,
    pub log: Result<std::path::PathBuf, String>,
    pub plugin: ProfilerEnv,
}

impl Algo {
    /// NCCL's numeric code (`NCCL_ALGO_TREE` 0 ... `NCCL_ALGO_PAT` 6), as
    /// the TUNING lines before 2.24 print it.
    pub fn from_code(code: i64) -> Option<Algo> {
        Some(match code {
            0 => Algo::Tree,
            1 => Algo::Ring,
            2 => Algo::CollnetDirect,
            3 => Algo::CollnetChain,
            4 => Algo::Nvls,
            5 => Algo::NvlsTree,
            6 => Algo::Pat,
            _ => return None,
        })
    }
}

impl Proto {
    /// NCCL's numeric code (`NCCL_PROTO_LL` 0, `LL128` 1, `SIMPLE` 2).
    pub fn from_code(code: i64) -> Option<Proto> {
        Some(match code {
            0 => Proto::Ll,
            1 => Proto::Ll128,
            2 => Proto::Simple,
            _ => return None,
        })
    }
}

/// A cell that holds one value, or `mixed` where a point's launches used
/// more than one (the JSON lists them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Chosen<T> {
    One(T),
    Mixed,
}

impl<T: Named> Chosen<T> {
    pub fn text(self) -> &'static str {
        match self {
            Chosen::One(v) => v.name(),
            Chosen::Mixed => "mixed",
        }
    }

    pub fn parse(text: &str) -> Option<Chosen<T>> {
        if text.trim().eq_ignore_ascii_case("mixed") {
            Some(Chosen::Mixed)
        } else {
            T::parse(text).map(Chosen::One)
        }
    }
}

impl<T: Named> fmt::Display for Chosen<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.text())
    }
}

impl<T: Named> Serialize for Chosen<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.text())
    }
}

impl<'de, T: Named> Deserialize<'de> for Chosen<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = std::borrow::Cow::<str>::deserialize(d)?;
        Chosen::parse(&text)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown {} '{text}' (expected a name or mixed)", T::WHAT)))
    }
}

/// `--algo`/`--proto`: what one pinned sweep tells NCCL to run, an
/// algorithm, a protocol or both (the `algo_pin` column: `tree`, `ll128`,
/// `tree/ll128`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AlgoPin {
    pub algo: Option<Algo>,
    pub proto: Option<Proto>,
}

impl AlgoPin {
    /// One pin per value of `--algo` times one per value of `--proto`
    /// (either may be empty), in the order given.
    pub fn product(algos: &[Algo], protos: &[Proto]) -> Vec<AlgoPin> {
        let algos: Vec<Option<Algo>> = if algos.is_empty() {
            vec![None]
        } else {
            algos.iter().copied().map(Some).collect()
        };
        let protos: Vec<Option<Proto>> = if protos.is_empty() {
            vec![None]
        } else {
            protos.iter().copied().map(Some).collect()
        };
        let mut pins = Vec::new();
        for &algo in &algos {
            for &proto in &protos {
                let pin = AlgoPin { algo, proto };
                if pin != AlgoPin::default() && !pins.contains(&pin) {
                    pins.push(pin);
                }
            }
        }
        pins
    }

    pub fn text(&self) -> String {
        match (self.algo, self.proto) {
            (Some(a), Some(p)) => format!("{a}/{p}"),
            (Some(a), None) => a.name().to_string(),
            (None, Some(p)) => p.name().to_string(),
            (None, None) => String::new(),
        }
    }

    /// Reads `text` back: `ALGO`, `PROTO` or `ALGO/PROTO`.
    pub fn parse(text: &str) -> Option<AlgoPin> {
        let text = text.trim();
        let pin = match text.split_once('/') {
            Some((a, p)) => AlgoPin {
                algo: Some(Algo::parse(a)?),
                proto: Some(Proto::parse(p)?),
            },
            None => match (Algo::parse(text), Proto::parse(text)) {
                (Some(a), _) => AlgoPin {
                    algo: Some(a),
                    proto: None,
                },
                (None, Some(p)) => AlgoPin {
                    algo: None,
                    proto: Some(p),
                },
                (None, None) => return None,
            },
        };
        Some(pin)
    }

    /// Whether NCCL ran what the pin says, as far as `algo` and `proto`
    /// (one value each, or none where nothing recorded) tell: `None` where
    /// nothing tells.
    pub fn honoured(&self, algo: Option<Chosen<Algo>>, proto: Option<Chosen<Proto>>) -> Option<bool> {
        let algo_ok = self.algo.and_then(|want| algo.map(|got| got == Chosen::One(want)));
        let proto_ok = self.proto.and_then(|want| proto.map(|got| got == Chosen::One(want)));
        match (algo_ok, proto_ok) {
            (None, None) => None,
            (a, p) => Some(a.unwrap_or(true) && p.unwrap_or(true)),
        }
    }
}

impl fmt::Display for AlgoPin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text())
    }
}

impl Serialize for AlgoPin {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text())
    }
}

impl<'de> Deserialize<'de> for AlgoPin {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = std::borrow::Cow::<str>::deserialize(d)?;
        AlgoPin::parse(&text).ok_or_else(|| {
            serde::de::Error::custom(format!("'{text}' is not an algorithm pin (ALGO, PROTO or ALGO/PROTO)"))
        })
    }
}

/// One choice NCCL made, and how many of a point's launches made it.
/// `nchannels` where the line gives it (TUNING lines from 2.24).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AlgoChoice {
    pub algo: Algo,
    pub proto: Proto,
    pub nchannels: Option<u32>,
    pub calls: u64,
}

/// What one point's launches used (NCCL chooses alike on every rank of a
/// communicator; rank 0 says it), and where it was read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AlgoRecord {
    pub source: AlgoSource,
    /// Every distinct choice, the most used first.
    pub choices: Vec<AlgoChoice>,
}

impl AlgoRecord {
    /// Nothing recorded.
    pub fn unknown() -> AlgoRecord {
        AlgoRecord {
            source: AlgoSource::Unknown,
            choices: Vec::new(),
        }
    }

    /// The choices of `launches`, merged: identical choices counted once
    /// each, the most used first (ties in the order first seen); none is
    /// `unknown`, whatever `source`.
    pub fn of(source: AlgoSource, launches: impl IntoIterator<Item = AlgoChoice>) -> AlgoRecord {
        let mut choices: Vec<AlgoChoice> = Vec::new();
        for c in launches {
            match choices
                .iter_mut()
                .find(|k| (k.algo, k.proto, k.nchannels) == (c.algo, c.proto, c.nchannels))
            {
                Some(k) => k.calls += c.calls,
                None => choices.push(c),
            }
        }
        choices.sort_by_key(|c| std::cmp::Reverse(c.calls));
        let source = if choices.is_empty() {
            AlgoSource::Unknown
        } else {
            source
        };
        AlgoRecord { source, choices }
    }

    fn cell<T: PartialEq + Copy>(&self, of: impl Fn(&AlgoChoice) -> Option<T>) -> Option<Chosen<T>> {
        let first = of(self.choices.first()?)?;
        if self.choices.iter().all(|c| of(c) == Some(first)) {
            Some(Chosen::One(first))
        } else {
            Some(Chosen::Mixed)
        }
    }

    /// The `algo` cell: the one algorithm, `mixed`, or none.
    pub fn algo(&self) -> Option<Chosen<Algo>> {
        self.cell(|c| Some(c.algo))
    }

    /// The `proto` cell: the one protocol, `mixed`, or none.
    pub fn proto(&self) -> Option<Chosen<Proto>> {
        self.cell(|c| Some(c.proto))
    }

    /// The `nchannels` cell: the one count every launch used, else none
    /// (the JSON lists each choice's).
    pub fn nchannels(&self) -> Option<u32> {
        match self.cell(|c| c.nchannels) {
            Some(Chosen::One(n)) => Some(n),
            _ => None,
        }
    }

    /// Launches recorded.
    pub fn calls(&self) -> u64 {
        self.choices.iter().map(|c| c.calls).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn choice(algo: Algo, proto: Proto, nchannels: Option<u32>, calls: u64) -> AlgoChoice {
        AlgoChoice {
            algo,
            proto,
            nchannels,
            calls,
        }
    }

    #[test]
    fn pins_are_every_algorithm_with_every_protocol_and_read_back() {
        let pins = AlgoPin::product(&[Algo::Ring, Algo::Tree], &[Proto::Simple]);
        let texts: Vec<String> = pins.iter().map(AlgoPin::text).collect();
        assert_eq!(texts, ["ring/simple", "tree/simple"]);
        let texts: Vec<String> = AlgoPin::product(&[], &[Proto::Ll, Proto::Ll128, Proto::Ll])
            .iter()
            .map(AlgoPin::text)
            .collect();
        assert_eq!(texts, ["ll", "ll128"]);
        assert!(AlgoPin::product(&[], &[]).is_empty());
        for text in ["ring", "ll128", "nvls_tree/simple", "tree/ll"] {
            assert_eq!(AlgoPin::parse(text).unwrap().text(), text);
        }
        for bad in ["", "ring/", "ring/tree", "fast", "ll/ring"] {
            assert_eq!(AlgoPin::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_pin_is_honoured_where_what_was_recorded_matches_it() {
        let tree = AlgoPin::parse("tree").unwrap();
        fn one<T>(v: T) -> Option<Chosen<T>> {
            Some(Chosen::One(v))
        }
        assert_eq!(tree.honoured(one(Algo::Tree), one(Proto::Ll)), Some(true));
        assert_eq!(tree.honoured(one(Algo::Ring), one(Proto::Ll)), Some(false));
        assert_eq!(tree.honoured(Some(Chosen::Mixed), None), Some(false));
        assert_eq!(tree.honoured(None, None), None);
        let both = AlgoPin::parse("ring/simple").unwrap();
        assert_eq!(both.honoured(one(Algo::Ring), one(Proto::Ll)), Some(false));
        assert_eq!(both.honoured(one(Algo::Ring), one(Proto::Simple)), Some(true));
    }

    #[test]
    fn nccl_spellings_of_every_algorithm_parse() {
        for (text, algo) in [
            ("RING", Algo::Ring),
            ("TREE", Algo::Tree),
            ("COLLNET_DIRECT", Algo::CollnetDirect),
            ("COLLNET_CHAIN", Algo::CollnetChain),
            ("NVLS", Algo::Nvls),
            ("NVLS_TREE", Algo::NvlsTree),
            ("PAT", Algo::Pat),
        ] {
            assert_eq!(Algo::parse(text), Some(algo), "{text}");
        }
        assert_eq!(Proto::parse("SIMPLE"), Some(Proto::Simple));
        assert_eq!(Proto::parse("LL128"), Some(Proto::Ll128));
        assert_eq!(Proto::parse("LL"), Some(Proto::Ll));
    }

    #[test]
    fn numeric_codes_are_nccl_commons() {
        let algos: Vec<Option<Algo>> = (-1..8).map(Algo::from_code).collect();
        assert_eq!(
            algos,
            [
                None,
                Some(Algo::Tree),
                Some(Algo::Ring),
                Some(Algo::CollnetDirect),
                Some(Algo::CollnetChain),
                Some(Algo::Nvls),
                Some(Algo::NvlsTree),
                Some(Algo::Pat),
                None
            ]
        );
        let protos: Vec<Option<Proto>> = (-1..4).map(Proto::from_code).collect();
        assert_eq!(
            protos,
            [None, Some(Proto::Ll), Some(Proto::Ll128), Some(Proto::Simple), None]
        );
    }

    #[test]
    fn one_choice_fills_every_cell_and_two_say_mixed() {
        let one = AlgoRecord::of(AlgoSource::Log, [choice(Algo::Ring, Proto::Simple, Some(2), 10)]);
        assert_eq!(one.algo(), Some(Chosen::One(Algo::Ring)));
        assert_eq!(one.proto(), Some(Chosen::One(Proto::Simple)));
        assert_eq!(one.nchannels(), Some(2));
        let two = AlgoRecord::of(
            AlgoSource::Log,
            [
                choice(Algo::Ring, Proto::Ll, Some(2), 1),
                choice(Algo::Ring, Proto::Simple, Some(4), 3),
                choice(Algo::Ring, Proto::Ll, Some(2), 1),
            ],
        );
        assert_eq!(two.algo(), Some(Chosen::One(Algo::Ring)));
        assert_eq!(two.proto(), Some(Chosen::Mixed));
        assert_eq!(two.nchannels(), None);
        assert_eq!(two.calls(), 5);
        // the most used first, identical choices merged
        assert_eq!(
            two.choices,
            [
                choice(Algo::Ring, Proto::Simple, Some(4), 3),
                choice(Algo::Ring, Proto::Ll, Some(2), 2)
            ]
        );
        let trees = AlgoRecord::of(
            AlgoSource::Log,
            [
                choice(Algo::Tree, Proto::Ll, None, 1),
                choice(Algo::Ring, Proto::Ll, None, 1),
            ],
        );
        assert_eq!(
            (trees.algo(), trees.proto()),
            (Some(Chosen::Mixed), Some(Chosen::One(Proto::Ll)))
        );
    }

    #[test]
    fn nothing_recorded_is_unknown_whatever_the_source() {
        let none = AlgoRecord::of(AlgoSource::Log, []);
        assert_eq!(none, AlgoRecord::unknown());
        assert_eq!((none.algo(), none.proto(), none.nchannels()), (None, None, None));
        assert_eq!(Chosen::<Algo>::parse("MIXED"), Some(Chosen::Mixed));
        assert_eq!(Chosen::<Algo>::parse("nvls_tree"), Some(Chosen::One(Algo::NvlsTree)));
        assert_eq!(Chosen::<Proto>::parse("bogus"), None);
    }
}
