//! The fenced blocks of README.md and docs/*.md, and what a block's info
//! string asks for: `sh runnable` (run it, expect exit 0), `exit=N` or
//! `exit=N|M` (expect N, or either: only for a verdict that the machine's
//! noise decides), `id=NAME` (a block whose files later blocks read) and
//! `after=NAME` (runs after block NAME, in its folder, in the same test).

use std::path::{Path, PathBuf};

/// The repository root.
pub fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// One fenced block of a markdown file.
#[derive(Debug, Clone)]
pub struct Block {
    /// The file, relative to the repository root.
    pub file: String,
    /// The line of the opening fence, from 1.
    pub line: usize,
    pub info: String,
    pub code: String,
}

/// What a runnable block's info string asks for.
#[derive(Debug, PartialEq)]
pub struct Runnable {
    /// The exit codes it may end with.
    pub exit: Vec<i32>,
    /// `id=NAME`: later blocks of its page may run after it.
    pub id: Option<String>,
    /// `after=NAME`: it runs after the block `id=NAME` of its page.
    pub after: Option<String>,
}

impl Block {
    /// `None` for a plain block; a runnable block's requests; anything
    /// else that mentions `runnable` is a mistake in the docs, reported
    /// rather than skipped.
    pub fn kind(&self) -> Result<Option<Runnable>, String> {
        let words: Vec<&str> = self.info.split_whitespace().collect();
        if !words.contains(&"runnable") {
            return Ok(None);
        }
        let bad = || format!("{}:{}: bad info string {:?}", self.file, self.line, self.info);
        let ["sh", "runnable", options @ ..] = words.as_slice() else {
            return Err(bad());
        };
        let mut r = Runnable {
            exit: vec![0],
            id: None,
            after: None,
        };
        for option in options {
            match option.split_once('=') {
                Some(("exit", codes)) => {
                    r.exit = codes
                        .split('|')
                        .map(|n| n.parse().ok())
                        .collect::<Option<Vec<i32>>>()
                        .ok_or_else(bad)?
                }
                Some(("id", name)) if !name.is_empty() => r.id = Some(name.to_string()),
                Some(("after", name)) if !name.is_empty() => r.after = Some(name.to_string()),
                _ => return Err(bad()),
            }
        }
        Ok(Some(r))
    }

    /// The block's requests where it is runnable; a bad info string panics.
    pub fn runnable(&self) -> Option<Runnable> {
        self.kind().unwrap_or_else(|e| panic!("{e}"))
    }

    /// `file:line`, as the test names and reports give it.
    pub fn at(&self) -> String {
        format!("{}:{}", self.file, self.line)
    }
}

/// Every fenced block of `text` (backtick fences, indented or not, as in
/// list items); the content loses the opening fence's indentation.
pub fn blocks(file: &str, text: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut open: Option<(usize, usize, String, Vec<String>)> = None;
    for (i, line) in text.lines().enumerate() {
        let indent = line.len() - line.trim_start().len();
        let trimmed = line.trim_start();
        match &mut open {
            None => {
                if let Some(info) = trimmed.strip_prefix("```") {
                    open = Some((i + 1, indent, info.trim().to_string(), Vec::new()));
                }
            }
            Some((start, fence_indent, info, lines)) => {
                if trimmed.trim_end() == "```" {
                    out.push(Block {
                        file: file.to_string(),
                        line: *start,
                        info: std::mem::take(info),
                        code: lines.join("\n") + "\n",
                    });
                    open = None;
                } else {
                    let cut = indent.min(*fence_indent);
                    lines.push(line[cut..].to_string());
                }
            }
        }
    }
    assert!(open.is_none(), "{file}: a code fence is never closed");
    out
}

/// README.md, then docs/*.md in name order, as (relative path, text).
pub fn markdown_files() -> Vec<(String, String)> {
    let mut docs: Vec<PathBuf> = std::fs::read_dir(repo().join("docs"))
        .expect("docs/ folder")
        .map(|e| e.expect("docs/ entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    let mut files = vec![repo().join("README.md")];
    files.extend(docs);
    files
        .iter()
        .map(|p| {
            let rel = p.strip_prefix(repo()).unwrap().to_string_lossy().into_owned();
            let text = std::fs::read_to_string(p).unwrap_or_else(|e| panic!("reading {rel}: {e}"));
            (rel, text)
        })
        .collect()
}

pub fn all_blocks() -> Vec<Block> {
    markdown_files().iter().flat_map(|(f, t)| blocks(f, t)).collect()
}

/// The runnable blocks of one page, grouped into what one test runs in
/// order in one folder: a block alone, or a block `id=NAME` with every
/// later block `after=NAME`. An `after=` that names no earlier `id=` of the
/// page is an error in the docs.
pub fn groups(file: &str, text: &str) -> Result<Vec<Vec<(Block, Runnable)>>, String> {
    let mut groups: Vec<Vec<(Block, Runnable)>> = Vec::new();
    let mut ids: Vec<(String, usize)> = Vec::new();
    for block in blocks(file, text) {
        let Some(r) = block.kind()? else { continue };
        match &r.after {
            Some(name) => {
                let &(_, g) = ids.iter().find(|(id, _)| id == name).ok_or_else(|| {
                    format!(
                        "{}: after={name}: no earlier block of the page has id={name}",
                        block.at()
                    )
                })?;
                if let Some(id) = &r.id {
                    ids.push((id.clone(), g));
                }
                groups[g].push((block, r));
            }
            None => {
                if let Some(id) = &r.id {
                    ids.push((id.clone(), groups.len()));
                }
                groups.push(vec![(block, r)]);
            }
        }
    }
    Ok(groups)
}
