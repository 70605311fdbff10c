//! The one mechanism of the closed vocabularies (element types, operations,
//! transports, metrics, levels, verdicts, ...): `vocabulary!` writes an
//! enum and, from the one list of its values' names, everything that reads
//! or writes them: `ALL`, `name`, `aliases`, `parse`, `Display`, `Named`
//! and serde by name. A name is added, renamed or given an alias in that
//! list and nowhere else; clap's value enums (`cli`), `Choice<T>`, the CSV
//! and JSON readers and the check profile reader all parse through it.
//!
//! The smaller macros below serve the few vocabularies whose values carry
//! data or whose names live elsewhere (`BackendChoice`, `Collective`,
//! `Strategy`), which keep their own `name` and `parse`.

/// How `parse` compares the user's text (trimmed) with a value's names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Case {
    /// Exactly as listed.
    Exact,
    /// ASCII letters in either case.
    AnyCase,
    /// ASCII letters in either case, and `_` read as `-` (`RS_AR_AG` is
    /// `rs-ar-ag`); the listed names are lower case.
    AnyCaseDash,
}

impl Case {
    /// Whether `text` (already trimmed) is `name` or one of `aliases`.
    pub fn names(self, name: &str, aliases: &[&str], text: &str) -> bool {
        std::iter::once(name)
            .chain(aliases.iter().copied())
            .any(|n| self.same(n, text))
    }

    /// Whether `text` reads as `name`. A `const fn` (hence the loop), so
    /// that `distinct` runs when the crate compiles.
    const fn same(self, name: &str, text: &str) -> bool {
        let (name, text) = (name.as_bytes(), text.as_bytes());
        if name.len() != text.len() {
            return false;
        }
        let mut i = 0;
        while i < name.len() {
            let t = match self {
                Case::Exact => text[i],
                Case::AnyCase => text[i].to_ascii_lowercase(),
                Case::AnyCaseDash if text[i] == b'_' => b'-',
                Case::AnyCaseDash => text[i].to_ascii_lowercase(),
            };
            let n = match self {
                Case::AnyCase => name[i].to_ascii_lowercase(),
                Case::Exact | Case::AnyCaseDash => name[i],
            };
            if n != t {
                return false;
            }
            i += 1;
        }
        true
    }

    /// Whether every name of `values` (each value's name and aliases)
    /// reads as itself and as no other value's name: `vocabulary!` asserts
    /// it at compile time, so `parse` finds each value by each of its names.
    pub const fn distinct(self, values: &[&[&str]]) -> bool {
        let mut a = 0;
        while a < values.len() {
            let mut i = 0;
            while i < values[a].len() {
                if !self.same(values[a][i], values[a][i]) {
                    return false;
                }
                let mut b = a + 1;
                while b < values.len() {
                    let mut j = 0;
                    while j < values[b].len() {
                        if self.same(values[a][i], values[b][j]) || self.same(values[b][j], values[a][i]) {
                            return false;
                        }
                        j += 1;
                    }
                    b += 1;
                }
                i += 1;
            }
            a += 1;
        }
        true
    }
}

/// Writes a closed vocabulary from one list:
///
/// ```text
/// vocabulary! {
///     /// Element type of the buffers.
///     #[derive(Hash, Default)]
///     pub enum DType: "element type", AnyCase {
///         Int8 = "int8" | "char" | "i8",
///         #[default]
///         Float = "float" | "fp32",
///     }
/// }
/// ```
///
/// gives the enum (its attributes and variants' attributes kept, with
/// `Clone, Copy, Debug, PartialEq, Eq` derived), `ALL` (every value, in
/// declaration order), `name` (the first name: what is printed, written
/// and listed), `aliases` (the others), `parse` (the trimmed text against
/// every name, compared as the `Case` after the description says),
/// `Display` (the name, or after `, pad` the name padded to the
/// formatter's width), `Named` (the description naming one value in
/// messages) and serde by name.
macro_rules! vocabulary {
    (
        $(#[$attr:meta])*
        $vis:vis enum $name:ident: $what:literal, $case:ident $(, $pad:ident)? {
            $(
                $(#[$vattr:meta])*
                $variant:ident = $first:literal $(| $alias:literal)*
            ),+ $(,)?
        }
    ) => {
        $(#[$attr])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        $vis enum $name {
            $($(#[$vattr])* $variant,)+
        }

        const _: () = assert!(
            $crate::types::Case::$case.distinct(&[$(&[$first $(, $alias)*]),+]),
            concat!("a name of ", stringify!($name), " is another value's, or never parses")
        );

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: [$name; [$(stringify!($variant)),+].len()] = [$($name::$variant),+];

            /// The value's name: what is printed, written and listed.
            pub fn name(self) -> &'static str {
                match self {
                    $($name::$variant => $first,)+
                }
            }

            /// The other names `parse` takes.
            pub fn aliases(self) -> &'static [&'static str] {
                match self {
                    $($name::$variant => &[$($alias),*],)+
                }
            }

            /// The value `text` names (trimmed), by its name or an alias.
            pub fn parse(text: &str) -> Option<$name> {
                let text = text.trim();
                $name::ALL
                    .into_iter()
                    .find(|v| $crate::types::Case::$case.names(v.name(), v.aliases(), text))
            }
        }

        $crate::types::display_by_name!($($pad)? $name);

        impl $crate::types::Named for $name {
            const WHAT: &'static str = $what;
            fn all() -> &'static [Self] {
                &$name::ALL
            }
            fn name(self) -> &'static str {
                $name::name(self)
            }
            fn aliases(self) -> &'static [&'static str] {
                $name::aliases(self)
            }
            fn parse(text: &str) -> Option<Self> {
                $name::parse(text)
            }
        }

        $crate::types::by_name!($name, $what);
    };
}
pub(crate) use vocabulary;

/// Serializes a vocabulary type as its name and reads it back through its
/// `parse`, so CSV and JSON hold the names users type.
macro_rules! by_name {
    ($t:ty, $what:expr) => {
        impl serde::Serialize for $t {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.name())
            }
        }

        impl<'de> serde::Deserialize<'de> for $t {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let text = <std::borrow::Cow<'de, str> as serde::Deserialize>::deserialize(d)?;
                <$t>::parse(&text).ok_or_else(|| serde::de::Error::custom(format!("unknown {} '{}'", $what, text)))
            }
        }
    };
}
pub(crate) use by_name;

/// `Display` for a type with a `name()`: the name as it is (`T`), or padded
/// to the formatter's width and alignment (`pad T`).
macro_rules! display_by_name {
    (pad $t:ty) => {
        impl std::fmt::Display for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.pad(self.name())
            }
        }
    };
    ($t:ty) => {
        impl std::fmt::Display for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}
pub(crate) use display_by_name;

/// `Named` for a type with an inherent `name`, `parse` and list of every
/// value (`ALL`), `what` naming one value in messages; and its serde by
/// name (`by_name!`), which names it the same. For the vocabularies that
/// `vocabulary!` cannot write.
macro_rules! named {
    ($t:ty, $what:expr, $all:ident) => {
        impl $crate::types::Named for $t {
            const WHAT: &'static str = $what;
            fn all() -> &'static [Self] {
                &<$t>::$all
            }
            fn name(self) -> &'static str {
                <$t>::name(self)
            }
            fn parse(text: &str) -> Option<Self> {
                <$t>::parse(text)
            }
        }

        $crate::types::by_name!($t, $what);
    };
}
pub(crate) use named;

#[cfg(test)]
mod tests {
    use super::Case;
    use crate::types::Named;

    vocabulary! {
        /// A test vocabulary.
        #[derive(Hash, Default)]
        enum Fruit: "fruit", AnyCase, pad {
            Apple = "apple" | "malus",
            #[default]
            Pear = "pear",
            BloodOrange = "blood-orange" | "blood_orange",
        }
    }

    vocabulary! {
        enum Strict: "strict value", Exact {
            One = "one" | "1",
            Two = "two-parts",
        }
    }

    vocabulary! {
        enum Dashed: "dashed value", AnyCaseDash {
            Flat = "flat",
            RsArAg = "rs-ar-ag",
        }
    }

    #[test]
    fn all_lists_every_value_in_declaration_order_with_its_names() {
        assert_eq!(Fruit::ALL, [Fruit::Apple, Fruit::Pear, Fruit::BloodOrange]);
        assert_eq!(Fruit::Apple.name(), "apple");
        assert_eq!(Fruit::Apple.aliases(), ["malus"]);
        assert!(Fruit::Pear.aliases().is_empty());
        assert_eq!(Fruit::default(), Fruit::Pear);
        assert_eq!(<Fruit as Named>::all(), Fruit::ALL);
        assert_eq!(<Fruit as Named>::aliases(Fruit::Apple), ["malus"]);
        assert_eq!(Fruit::WHAT, "fruit");
    }

    #[test]
    fn parse_trims_and_compares_as_the_vocabulary_says() {
        assert_eq!(Fruit::parse("  MALUS "), Some(Fruit::Apple));
        assert_eq!(Fruit::parse("Blood_Orange"), Some(Fruit::BloodOrange));
        assert_eq!(Fruit::parse("bloodorange"), None);
        assert_eq!(Strict::parse(" 1 "), Some(Strict::One));
        assert_eq!(Strict::parse("ONE"), None);
        assert_eq!(Strict::parse("two_parts"), None);
        assert_eq!(Dashed::parse("RS_AR_AG"), Some(Dashed::RsArAg));
        assert_eq!(Dashed::parse("Rs-Ar_Ag"), Some(Dashed::RsArAg));
        assert_eq!(Dashed::parse("rsarag"), None);
        assert_eq!(Dashed::parse(""), None);
        assert!(!Case::AnyCaseDash.names("rs-ar-ag", &[], "rs-ar-a"));
    }

    #[test]
    fn a_name_shared_by_two_values_or_unreadable_is_refused() {
        assert!(Case::AnyCase.distinct(&[&["a", "x"], &["b"]]));
        assert!(!Case::AnyCase.distinct(&[&["a", "x"], &["b", "X"]]));
        assert!(Case::Exact.distinct(&[&["a", "x"], &["b", "X"]]));
        assert!(!Case::Exact.distinct(&[&["a"], &["b"], &["b"]]));
        assert!(!Case::AnyCaseDash.distinct(&[&["rs-ar"], &["rs_ar"]]));
        assert!(!Case::AnyCaseDash.distinct(&[&["Flat"]]));
        assert!(Case::AnyCaseDash.distinct(&[&["flat"], &["rs-ar-ag"]]));
    }

    #[test]
    fn display_pads_only_where_asked() {
        assert_eq!(format!("[{:>7}]", Fruit::Pear), "[   pear]");
        assert_eq!(format!("[{:>7}]", Strict::One), "[one]");
    }

    #[test]
    fn serde_writes_the_name_and_reads_through_parse() {
        assert_eq!(serde_json::to_string(&Fruit::BloodOrange).unwrap(), "\"blood-orange\"");
        assert_eq!(serde_json::from_str::<Fruit>("\"MALUS\"").unwrap(), Fruit::Apple);
        let e = serde_json::from_str::<Strict>("\"three\"").unwrap_err().to_string();
        assert!(e.contains("unknown strict value 'three'"), "{e}");
    }
}
