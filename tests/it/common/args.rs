//! Command lines written compactly: `argv!["run --collectives all -b 1K",
//! path_str(&csv)]` is the argument vector `["run", "--collectives", "all",
//! "-b", "1K", csv]`: each string literal split at white space into one
//! argument a word, every other expression one argument as it is.

/// The argument vector of string literals (split into words) and
/// expressions (one argument each), in order.
macro_rules! argv {
    (@push $v:ident) => {};
    (@push $v:ident $words:literal $(, $($rest:tt)*)?) => {
        $v.extend($words.split_whitespace());
        argv!(@push $v $($($rest)*)?);
    };
    (@push $v:ident $arg:expr $(, $($rest:tt)*)?) => {
        $v.push($arg);
        argv!(@push $v $($($rest)*)?);
    };
    ($($parts:tt)*) => {{
        let mut v: Vec<&str> = Vec::new();
        argv!(@push v $($parts)*);
        v
    }};
}
pub(crate) use argv;

/// The words of `line`, one argument each: for a command line kept in a
/// constant.
pub fn words(line: &str) -> Vec<&str> {
    line.split_whitespace().collect()
}
