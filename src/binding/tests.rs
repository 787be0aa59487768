//! The binding's shape, checked (the binding itself is not compiled for `cargo test`): its
//! modules form the one-way stack that `binding/mod.rs` describes.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The binding's modules, bottom first: each may import only those before it.
const STACK: &[&str] = &[
    "protocol", "debug", "js", "uv", "slab", "inbox", "registry", "env", "conn", "pool", "request",
    "deliver", "exports",
];

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The identifiers right after `prefix` at each place it occurs: one name, or each item of
/// a braced list.
fn names_after(text: &str, prefix: &str) -> Vec<String> {
    let mut out = Vec::new();
    let ident = |s: &str| -> String {
        s.trim_start()
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    for (at, _) in text.match_indices(prefix) {
        // `super::super::x` is read at its first `super::` only.
        if prefix == "super::" && text[..at].ends_with("super::") {
            continue;
        }
        let rest = &text[at + prefix.len()..];
        if let Some(list) = rest.strip_prefix('{') {
            // Each item of the list at its own level (`a::{b, c}, d` gives `a` and `d`).
            let mut depth = 0;
            let mut start = 0;
            for (i, c) in list.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => {
                        out.push(ident(&list[start..i]));
                        break;
                    }
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        out.push(ident(&list[start..i]));
                        start = i + 1;
                    }
                    _ => {}
                }
            }
        } else {
            out.push(ident(rest));
        }
    }
    out
}

/// The top modules of the binding that `file` (of top module `top`, `depth` modules below
/// the binding) refers to.
fn imports(text: &str, depth: usize) -> BTreeSet<String> {
    let code = text.split("#[cfg(test)]\nmod tests").next().unwrap_or(text);
    let mut found: BTreeSet<String> = names_after(code, "crate::binding::").into_iter().collect();
    // `super::` repeated `depth` times reaches the binding; fewer stay in the same module.
    let reach = "super::".repeat(depth);
    for name in names_after(code, &reach) {
        found.insert(name);
    }
    found
}

#[test]
fn no_module_of_the_binding_imports_one_above_it() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/binding");
    let mut files = Vec::new();
    sources(&root, &mut files);
    let mut broken = Vec::new();
    let mut seen = BTreeSet::new();
    for file in &files {
        let rel = file.strip_prefix(&root).unwrap();
        let parts: Vec<String> = rel
            .with_extension("")
            .iter()
            .map(|p| p.to_string_lossy().into_owned())
            .collect();
        if parts == ["mod"] || parts == ["tests"] {
            continue;
        }
        let top = parts[0].clone();
        // The module path below the binding: `request/mod.rs` is `request`.
        let depth = parts.len() - usize::from(parts.last().is_some_and(|p| p == "mod"));
        let Some(level) = STACK.iter().position(|m| *m == top) else {
            broken.push(format!("{} is not in the stack", rel.display()));
            continue;
        };
        seen.insert(top.clone());
        let text = std::fs::read_to_string(file).unwrap();
        for name in imports(&text, depth) {
            if let Some(other) = STACK.iter().position(|m| *m == name) {
                if other > level {
                    broken.push(format!("{} imports {name}", rel.display()));
                }
            }
        }
    }
    assert!(broken.is_empty(), "imports up the stack: {broken:?}");
    // Every module of the stack was read: the scan found the files it checks.
    assert_eq!(seen.len(), STACK.len(), "modules read: {seen:?}");
}
