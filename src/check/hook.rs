//! `--on-fail CMD`: a command template run once per failing node by rank
//! 0, with `{host}`, `{checks}` and `{reason}` replaced; printed only,
//! unless `--execute`.
//!
//! The template is split into words as a shell would (blanks, single and
//! double quotes, backslashes) before anything is substituted, and the
//! program is started without a shell: a reason holding quotes, `;` or
//! `$(...)` stays one argument and is never run. What is printed is the
//! same argument list, quoted so that it can be pasted into a shell.

use crate::error::Error;

/// The placeholders a template may hold.
pub const PLACEHOLDERS: [&str; 3] = ["{host}", "{checks}", "{reason}"];

/// A checked template: its words, placeholders still in them.
#[derive(Clone, Debug, PartialEq)]
pub struct Template {
    words: Vec<String>,
}

impl Template {
    /// Splits `text`; an unclosed quote, an empty command or an unknown
    /// `{name}` is a usage error.
    pub fn parse(text: &str) -> Result<Template, Error> {
        let words = split(text).map_err(|e| Error::usage(format!("--on-fail: {e}")))?;
        if words.is_empty() {
            return Err(Error::usage("--on-fail: the command is empty"));
        }
        for w in &words {
            let mut rest = w.as_str();
            while let Some(open) = rest.find('{') {
                let after = &rest[open..];
                match after.find('}') {
                    Some(close) if PLACEHOLDERS.contains(&&after[..=close]) => rest = &after[close + 1..],
                    Some(close) => {
                        return Err(Error::usage(format!(
                            "--on-fail: unknown placeholder {} (use {})",
                            &after[..=close],
                            PLACEHOLDERS.join(", ")
                        )));
                    }
                    None => break,
                }
            }
        }
        Ok(Template { words })
    }

    /// The argument list for one node.
    pub fn expand(&self, host: &str, checks: &str, reason: &str) -> Vec<String> {
        self.words
            .iter()
            .map(|w| {
                w.replace("{host}", host)
                    .replace("{checks}", checks)
                    .replace("{reason}", reason)
            })
            .collect()
    }
}

/// Shell-like word splitting: blanks separate words; '...' is literal;
/// "..." keeps blanks and takes \" \\ \$ \` escapes; a backslash outside
/// quotes keeps the next character.
fn split(text: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(ch) => word.push(ch),
                        None => return Err("a single quote is not closed".into()),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(e @ ('"' | '\\' | '$' | '`')) => word.push(e),
                            Some(other) => {
                                word.push('\\');
                                word.push(other);
                            }
                            None => return Err("a double quote is not closed".into()),
                        },
                        Some(ch) => word.push(ch),
                        None => return Err("a double quote is not closed".into()),
                    }
                }
            }
            '\\' => {
                in_word = true;
                match chars.next() {
                    Some(ch) => word.push(ch),
                    None => return Err("the command ends with a backslash".into()),
                }
            }
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        words.push(word);
    }
    Ok(words)
}

/// `args` as one line a POSIX shell reads back into the same words.
pub fn shell_line(args: &[String]) -> String {
    args.iter()
        .map(|a| {
            let plain = !a.is_empty() && a.chars().all(|c| c.is_ascii_alphanumeric() || "-_./=:,@%+".contains(c));
            if plain {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// What running a node's command gave.
#[derive(Clone, Debug, PartialEq)]
pub enum Ran {
    Exited(i32),
    Signalled,
    TimedOut,
    NotStarted(String),
}

/// Runs `args` (no shell), its output going to this process's, for at
/// most `limit`.
pub fn run(args: &[String], limit: std::time::Duration) -> Ran {
    let Some((program, rest)) = args.split_first() else {
        return Ran::NotStarted("empty command".into());
    };
    let mut child = match std::process::Command::new(program).args(rest).spawn() {
        Ok(c) => c,
        Err(e) => return Ran::NotStarted(e.to_string()),
    };
    let start = std::time::Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return status.code().map_or(Ran::Signalled, Ran::Exited),
            Ok(None) if start.elapsed() >= limit => {
                let _ = child.kill();
                let _ = child.wait();
                return Ran::TimedOut;
            }
            Ok(None) => std::thread::sleep(std::time::Duration::from_millis(20)),
            Err(e) => return Ran::NotStarted(e.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_drain_template_keeps_the_reason_one_argument() {
        let t = Template::parse(r#"scontrol update NodeName={host} State=drain Reason="{reason}""#).unwrap();
        let args = t.expand("node7", "a,b", "busbw 0.1 GB/s; rm -rf / $(x) \"q\"");
        assert_eq!(
            args,
            vec![
                "scontrol",
                "update",
                "NodeName=node7",
                "State=drain",
                "Reason=busbw 0.1 GB/s; rm -rf / $(x) \"q\""
            ]
        );
        assert_eq!(
            shell_line(&args),
            "scontrol update NodeName=node7 State=drain 'Reason=busbw 0.1 GB/s; rm -rf / $(x) \"q\"'"
        );
        assert_eq!(shell_line(&["it's".to_string()]), "'it'\\''s'");
    }

    #[test]
    fn words_split_as_a_shell_splits_them() {
        assert_eq!(
            split(r#"a 'b c' "d \"e\" \$f" g\ h"#).unwrap(),
            vec!["a", "b c", "d \"e\" $f", "g h"]
        );
        assert_eq!(split("  kubectl   label  ").unwrap(), vec!["kubectl", "label"]);
        assert_eq!(split("x ''").unwrap(), vec!["x", ""]);
        assert!(split("a 'b").is_err());
        assert!(split("a \"b").is_err());
    }

    #[test]
    fn bad_templates_are_usage_errors() {
        assert!(Template::parse("").is_err());
        let e = Template::parse("echo {node}").unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert_eq!(
            e.to_string(),
            "--on-fail: unknown placeholder {node} (use {host}, {checks}, {reason})"
        );
        assert!(Template::parse("echo '{host}").is_err());
        assert!(Template::parse("echo {host}{checks} {").is_ok());
    }

    #[test]
    fn a_command_runs_without_a_shell_and_reports_its_status() {
        let ok = run(
            &["sh".into(), "-c".into(), "exit 3".into()],
            std::time::Duration::from_secs(10),
        );
        assert_eq!(ok, Ran::Exited(3));
        let slow = run(&["sleep".into(), "5".into()], std::time::Duration::from_millis(100));
        assert_eq!(slow, Ran::TimedOut);
        assert!(matches!(
            run(&["/nonexistent/x".into()], std::time::Duration::from_secs(1)),
            Ran::NotStarted(_)
        ));
    }
}
