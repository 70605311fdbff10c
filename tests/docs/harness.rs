//! A test harness for tests known only at run time (one per runnable block
//! of the docs), speaking as much of libtest's command line as `cargo test`
//! and cargo-nextest use: `--list [--format terse] [--ignored]`, filters
//! (substrings, or whole names with `--exact`), `--skip`,
//! `--test-threads`, and the flags that change nothing here
//! (`--nocapture`, `--quiet`, `--color`, ...). A test fails by panicking;
//! the exit code is 101 when one did, as libtest's.

use std::process::ExitCode;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// One test: its name and what it runs.
pub struct Test {
    pub name: String,
    pub run: Box<dyn Fn() + Send + Sync>,
}

impl Test {
    pub fn new(name: impl Into<String>, run: impl Fn() + Send + Sync + 'static) -> Test {
        Test {
            name: name.into(),
            run: Box::new(run),
        }
    }
}

#[derive(Default)]
struct Args {
    list: bool,
    /// `--ignored`: only the ignored tests, of which there are none.
    ignored: bool,
    exact: bool,
    filters: Vec<String>,
    skip: Vec<String>,
    threads: Option<usize>,
}

fn parse(argv: impl Iterator<Item = String>) -> Result<Args, String> {
    let mut a = Args::default();
    let mut argv = argv.peekable();
    while let Some(arg) = argv.next() {
        let mut value = |name: &str| argv.next().ok_or(format!("{name} needs a value"));
        match arg.as_str() {
            "--list" => a.list = true,
            "--ignored" => a.ignored = true,
            "--exact" => a.exact = true,
            "--skip" => a.skip.push(value("--skip")?),
            "--test-threads" => {
                let n = value("--test-threads")?;
                a.threads = Some(n.parse().map_err(|_| format!("--test-threads {n}"))?);
            }
            "--format" | "--color" | "--logfile" | "-Z" => {
                value(&arg)?;
            }
            "--include-ignored" | "--nocapture" | "--no-capture" | "--show-output" | "--quiet" | "-q" | "--test"
            | "--bench" => {}
            flag if flag.starts_with("--") && flag.contains('=') => {}
            flag if flag.starts_with('-') => return Err(format!("unknown option {flag}")),
            filter => a.filters.push(filter.to_string()),
        }
    }
    Ok(a)
}

impl Args {
    fn selects(&self, name: &str) -> bool {
        let hit = |f: &String| {
            if self.exact {
                name == f
            } else {
                name.contains(f.as_str())
            }
        };
        !self.ignored
            && (self.filters.is_empty() || self.filters.iter().any(hit))
            && !self.skip.iter().any(|s| {
                if self.exact {
                    name == s
                } else {
                    name.contains(s.as_str())
                }
            })
    }
}

/// Lists or runs `tests` as the command line asks.
pub fn main(tests: Vec<Test>) -> ExitCode {
    let args = match parse(std::env::args().skip(1)) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(101);
        }
    };
    let chosen: Vec<Test> = tests.into_iter().filter(|t| args.selects(&t.name)).collect();
    if args.list {
        for t in &chosen {
            println!("{}: test", t.name);
        }
        return ExitCode::SUCCESS;
    }
    let threads = args
        .threads
        .or_else(|| std::env::var("RUST_TEST_THREADS").ok().and_then(|n| n.parse().ok()))
        .unwrap_or(2)
        .max(1);
    println!("\nrunning {} tests", chosen.len());
    let failed = run_all(&chosen, threads);
    println!();
    if !failed.is_empty() {
        println!("failures:");
        for name in &failed {
            println!("    {name}");
        }
    }
    let verdict = if failed.is_empty() { "ok" } else { "FAILED" };
    println!(
        "\ntest result: {verdict}. {} passed; {} failed; 0 ignored; 0 measured; {} filtered out\n",
        chosen.len() - failed.len(),
        failed.len(),
        0
    );
    if failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(101)
    }
}

/// Runs `tests` on `threads` threads of their own, each taking the next
/// test; the names of those that failed.
fn run_all(tests: &[Test], threads: usize) -> Vec<String> {
    let (next, failed) = (AtomicUsize::new(0), Mutex::new(Vec::new()));
    let (next, failed_ref) = (&next, &failed);
    std::thread::scope(|s| {
        for _ in 0..threads.min(tests.len().max(1)) {
            s.spawn(move || {
                while let Some(t) = tests.get(next.fetch_add(1, Ordering::Relaxed)) {
                    // the thread carries the test's name, as libtest's do
                    // (the tests' program log reads it)
                    let run = std::thread::Builder::new()
                        .name(t.name.clone())
                        .spawn_scoped(s, || (t.run)());
                    let ok = run.map(|h| h.join().is_ok()).unwrap_or(false);
                    println!("test {} ... {}", t.name, if ok { "ok" } else { "FAILED" });
                    if !ok {
                        failed_ref
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .push(t.name.clone());
                    }
                }
            });
        }
    });
    failed.into_inner().unwrap_or_else(|e| e.into_inner())
}
