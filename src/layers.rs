//! The layer rule of `lib.rs`, checked: every `crate::` or `super::` path in
//! the source points down [`LAYERS`], and no two modules name each other
//! (a parent and its own child aside: `pub mod` and `use super::Flow` are
//! how Rust nests). A path in a comment is not an import and is skipped.
//!
//! A path is not the only way up. Rust lets any module add methods to a
//! type of the crate (`workload::kinds` gives `plan::TestKind` its
//! workload row, `desc()`), and a call of one (`plan.test.desc()`) names
//! no module. So the methods a module adds to a type defined in
//! another are found too, and a call of one below the module that adds it
//! counts as an import that does not point down. The scan is by text: a
//! method of the same name on another type of a lower module would be
//! reported as well (rename one).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The top-level modules, top to bottom. A module may name only modules on
/// a later line; modules on one line do not name each other.
const LAYERS: &[&[&str]] = &[
    &["cmd"],
    &["cli"],
    &["monitor"],
    &["export", "store"],
    &["agg", "sweep", "curve"],
    &["control"],
    &["analysis"],
    &["result"],
    &["engine"],
    &["workload"],
    &["io"],
    &["sensors", "stats"],
    &["plan", "text", "clock", "term", "warning", "nofollow"],
    &["units"],
];

/// Pairs that do import each other today, each to be broken: a split of
/// one file in two whose halves still share a type. A pair that is gone
/// must leave this list (a test says so), and no other may join it.
const KNOWN_CYCLES: &[(&str, &str)] = &[];

type Module = Vec<String>;

fn rank(top: &str) -> usize {
    LAYERS
        .iter()
        .position(|l| l.contains(&top))
        .unwrap_or_else(|| panic!("module `{top}` is on no line of LAYERS"))
}

/// Every module of `src/` with the text of its file.
fn modules(dir: &Path, prefix: &[String], out: &mut BTreeMap<Module, String>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_stem().unwrap().to_string_lossy().into_owned();
        if p.is_dir() {
            let mut m = prefix.to_vec();
            m.push(name);
            modules(&p, &m, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            let mut m = prefix.to_vec();
            if name != "mod" {
                m.push(name);
            }
            out.insert(m, std::fs::read_to_string(&p).unwrap());
        }
    }
}

/// The segments of each path that starts with `anchor` in `code`.
fn paths<'a>(code: &'a str, anchor: &str) -> Vec<Vec<&'a str>> {
    let mut v = Vec::new();
    for (at, _) in code.match_indices(anchor) {
        if code[..at]
            .chars()
            .last()
            .is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':')
        {
            continue;
        }
        let rest = &code[at + anchor.len()..];
        let end = rest
            .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
            .unwrap_or(rest.len());
        v.push(rest[..end].split("::").filter(|s| !s.is_empty()).collect());
    }
    v
}

/// The longest prefix of `base` + `segs` that is a module.
fn resolve(all: &BTreeMap<Module, String>, base: &[String], segs: &[&str]) -> Option<Module> {
    let mut m: Module = base.to_vec();
    let mut found = None;
    for s in segs {
        m.push(s.to_string());
        if all.contains_key(&m) {
            found = Some(m.clone());
        }
    }
    found
}

/// Every module of the crate with its code (comment lines dropped), but the
/// root, `main` and this checker.
fn checked_modules() -> BTreeMap<Module, String> {
    let mut all = BTreeMap::new();
    modules(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &[],
        &mut all,
    );
    all.into_iter()
        .filter(|(m, _)| {
            !(m.is_empty() || m[..] == ["lib"] || m[..] == ["main"] || m[..] == ["layers"])
        })
        .map(|(m, text)| {
            let code = text
                .lines()
                .filter(|l| !l.trim_start().starts_with("//"))
                .collect::<Vec<_>>()
                .join("\n");
            (m, code)
        })
        .collect()
}

/// Module → the modules its code names.
fn imports() -> BTreeMap<Module, BTreeSet<Module>> {
    let all = checked_modules();
    let mut graph = BTreeMap::new();
    for (m, code) in &all {
        let mut to = BTreeSet::new();
        for segs in paths(code, "crate::") {
            to.extend(resolve(&all, &[], &segs));
        }
        let parent = &m[..m.len() - 1];
        for segs in paths(code, "super::") {
            to.extend(resolve(&all, parent, &segs).or_else(|| Some(parent.to_vec())));
        }
        // The crate root (a top-level file's `super::*` in its tests).
        to.remove(&Vec::new());
        to.remove(m);
        graph.insert(m.clone(), to);
    }
    graph
}

/// Module → the methods it adds to types defined elsewhere: the `fn`s of
/// each top-level inherent `impl Name {` whose `Name` this module does not
/// define.
fn extension_methods(all: &BTreeMap<Module, String>) -> BTreeMap<Module, Vec<String>> {
    let mut out = BTreeMap::new();
    for (m, code) in all {
        let mut lines = code.lines();
        while let Some(line) = lines.next() {
            let Some(name) = line
                .strip_prefix("impl ")
                .and_then(|l| l.strip_suffix(" {"))
                .filter(|n| n.chars().all(|c| c.is_alphanumeric() || c == '_'))
            else {
                continue;
            };
            let defined = ["struct", "enum", "type", "union"].iter().any(|k| {
                let def = format!("{k} {name}");
                code.match_indices(&def).any(|(at, _)| {
                    !code[at + def.len()..].starts_with(|c: char| c.is_alphanumeric() || c == '_')
                })
            });
            let methods: Vec<String> = lines
                .by_ref()
                .take_while(|l| *l != "}")
                .filter_map(|l| {
                    let l = l.trim_start();
                    l.strip_prefix("pub fn ")
                        .or_else(|| l.strip_prefix("pub(crate) fn "))
                })
                .filter_map(|l| l.split(['(', '<']).next())
                .map(str::to_string)
                .collect();
            if !defined {
                out.entry(m.clone())
                    .or_insert_with(Vec::new)
                    .extend(methods);
            }
        }
    }
    out
}

#[test]
fn no_method_added_above_is_called_below() {
    let all = checked_modules();
    let mut up = Vec::new();
    for (adder, methods) in extension_methods(&all) {
        for (m, code) in &all {
            if rank(&m[0]) <= rank(&adder[0]) {
                continue;
            }
            for f in &methods {
                if code.contains(&format!(".{f}(")) {
                    up.push(format!(
                        "{} calls {}'s {f}()",
                        m.join("::"),
                        adder.join("::")
                    ));
                }
            }
        }
    }
    assert!(
        up.is_empty(),
        "calls of methods added by a higher module:\n{}",
        up.join("\n")
    );
}

#[test]
fn every_import_points_down_the_layers() {
    let mut up = Vec::new();
    for (from, to) in imports() {
        for t in to {
            if from[0] != t[0] && rank(&from[0]) >= rank(&t[0]) {
                up.push(format!("{} -> {}", from.join("::"), t.join("::")));
            }
        }
    }
    assert!(
        up.is_empty(),
        "imports that do not point down:\n{}",
        up.join("\n")
    );
}

#[test]
fn no_two_modules_import_each_other() {
    let g = imports();
    let nests = |a: &Module, b: &Module| a.starts_with(b) || b.starts_with(a);
    let mut both = Vec::new();
    for (a, to) in &g {
        for b in to {
            if a < b && !nests(a, b) && g.get(b).is_some_and(|t| t.contains(a)) {
                both.push((a.join("::"), b.join("::")));
            }
        }
    }
    let known: Vec<(String, String)> = KNOWN_CYCLES
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    let new: Vec<_> = both.iter().filter(|p| !known.contains(p)).collect();
    assert!(new.is_empty(), "modules that import each other: {new:?}");
    let gone: Vec<_> = known.iter().filter(|p| !both.contains(p)).collect();
    assert!(
        gone.is_empty(),
        "broken cycles still in KNOWN_CYCLES: {gone:?}"
    );
}

#[test]
fn the_checker_sees_an_import() {
    // `agg::cpu` takes its clock from the bottom layer; were the parse
    // blind, the two tests above would pass on anything.
    let g = imports();
    let cpu = g[&vec!["agg".to_string(), "cpu".to_string()]].clone();
    assert!(cpu.contains(&vec!["clock".to_string()]), "{cpu:?}");
    let run = &g[&vec!["agg".to_string(), "run".to_string()]];
    assert!(
        run.contains(&vec!["agg".to_string(), "cpu".to_string()]),
        "{run:?}"
    );
    // The test's row is added to `plan::TestKind` by `workload::kinds`.
    let added = extension_methods(&checked_modules());
    let kinds = &added[&vec!["workload".to_string(), "kinds".to_string()]];
    assert!(kinds.iter().any(|k| k == "desc"), "{kinds:?}");
}

/// A file longer than this before its unit tests holds more than one idea
/// (issue 27: crr.rs and control/analysis.rs had grown to 1,364 and 1,065
/// lines); split it by what its parts own.
const MAX_LINES_BEFORE_TESTS: usize = 900;

#[test]
fn no_file_is_over_900_lines_before_its_tests() {
    let mut all = BTreeMap::new();
    modules(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &[],
        &mut all,
    );
    assert!(all.len() > 100, "{} modules found", all.len());
    let long: Vec<String> = all
        .iter()
        .filter_map(|(m, text)| {
            let n = text
                .lines()
                .position(|l| l.trim() == "#[cfg(test)]")
                .unwrap_or_else(|| text.lines().count());
            (n > MAX_LINES_BEFORE_TESTS).then(|| format!("{} ({n} lines)", m.join("::")))
        })
        .collect();
    assert!(
        long.is_empty(),
        "over {MAX_LINES_BEFORE_TESTS} lines before the tests: {long:?}"
    );
}
