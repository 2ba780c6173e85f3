//! The layer rule of `lib.rs`, checked: every `crate::` or `super::` path in
//! the source points down [`LAYERS`] (and, inside a module split into
//! rooms, down its [`ROOMS`]), no two modules name each other (a parent
//! and its own child aside: `pub mod` and `use super::Flow` are how Rust
//! nests), and no module names itself back through others, however long
//! the way round: the strongly connected components of the import graph
//! (`crate::`, `super::` and `self::` paths; tests left out) are single
//! modules. A path in a comment is not an import and is skipped.
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
    &["netperf"],
    &["cli"],
    &["monitor", "web"],
    &["export", "store"],
    &["agg", "sweep", "curve", "fleet"],
    &["control"],
    &["analysis"],
    &["result"],
    &["engine"],
    &["workload"],
    &["io"],
    &["sensors", "stats"],
    &["plan", "text", "clock", "term", "warning", "nofollow"],
    &["units", "httpd"],
];

/// Rooms inside a top-level module, top to bottom, as [`LAYERS`] orders
/// the top level: a file in a room may name files of its own room and of
/// lower ones, and the module's files in no room sit below them all. In
/// `export`, a page embeds charts and text tables, a chart may format its
/// numbers as the text does, and the text exporters (human, CSV, keyval,
/// fields, JSON, the curve's and the sweep's tables) name neither: a table
/// never waits on the plotting code.
const ROOMS: &[(&str, &[&str])] = &[("export", &["page", "draw"])];

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
    graph(&checked_modules())
}

/// The import graph of `all`: each module to the modules its code names
/// through a `crate::`, `super::` or `self::` path.
fn graph(all: &BTreeMap<Module, String>) -> BTreeMap<Module, BTreeSet<Module>> {
    let mut graph = BTreeMap::new();
    for (m, code) in all {
        let mut to = BTreeSet::new();
        for segs in paths(code, "crate::") {
            to.extend(resolve(all, &[], &segs));
        }
        let parent = &m[..m.len() - 1];
        for segs in paths(code, "super::") {
            to.extend(resolve(all, parent, &segs).or_else(|| Some(parent.to_vec())));
        }
        for segs in paths(code, "self::") {
            to.extend(resolve(all, m, &segs));
        }
        // The crate root (a top-level file's `super::*` in its tests).
        to.remove(&Vec::new());
        to.remove(m);
        graph.insert(m.clone(), to);
    }
    graph
}

/// `code` without its test-only items: each `#[cfg(test)]` item (an inline
/// `mod tests { … }`, a helper, a `use`) is dropped to its end, found by
/// rustfmt's layout: an item that opens a block ends at the closing brace
/// on the attribute's indent, any other at its first line ending in `;`.
fn without_tests(code: &str) -> String {
    let mut out = Vec::new();
    let mut lines = code.lines();
    while let Some(line) = lines.next() {
        if line.trim() != "#[cfg(test)]" {
            out.push(line);
            continue;
        }
        let close = format!("{}}}", &line[..line.len() - line.trim_start().len()]);
        for item in lines.by_ref() {
            let t = item.trim_end();
            if t.trim_start().starts_with("#[") {
                continue;
            }
            if t.ends_with('{') {
                lines.by_ref().find(|l| l.trim_end() == close);
                break;
            }
            if t.ends_with(';') {
                break;
            }
        }
    }
    out.join("\n")
}

/// The modules that exist only in tests: a file declared `#[cfg(test)] mod
/// NAME;` (or with `#[path = "FILE.rs"]`) by its parent.
fn test_files(all: &BTreeMap<Module, String>) -> BTreeSet<Module> {
    let mut out = BTreeSet::new();
    for (m, code) in all {
        let mut lines = code.lines().map(str::trim).peekable();
        while let Some(line) = lines.next() {
            if line != "#[cfg(test)]" {
                continue;
            }
            let mut stem = None;
            while let Some(attr) = lines.next_if(|l| l.starts_with("#[")) {
                stem = attr
                    .strip_prefix("#[path = \"")
                    .and_then(|a| a.strip_suffix(".rs\"]"))
                    .map(str::to_string);
            }
            let Some(name) = lines
                .next()
                .map(|l| {
                    l.trim_start_matches("pub(crate) ")
                        .trim_start_matches("pub ")
                })
                .and_then(|l| l.strip_prefix("mod "))
                .and_then(|l| l.strip_suffix(';'))
            else {
                continue;
            };
            let stem = stem.unwrap_or_else(|| name.to_string());
            // A `mod` in `a/mod.rs` is `a/NAME.rs`, in `a/b.rs` it is
            // `a/b/NAME.rs`; a `#[path]` is beside the declaring file.
            for dir in [&m[..], &m[..m.len().saturating_sub(1)]] {
                let mut f = dir.to_vec();
                f.push(stem.clone());
                if all.contains_key(&f) {
                    out.insert(f);
                    break;
                }
            }
        }
    }
    out
}

/// The import graph with every test left out: test-only files and each
/// file's `#[cfg(test)]` items. A test may reach anywhere to build its
/// fixtures; the code that ships may not.
fn shipped_imports() -> BTreeMap<Module, BTreeSet<Module>> {
    let all = checked_modules();
    let tests = test_files(&all);
    let shipped = all
        .iter()
        .filter(|(m, _)| !tests.contains(*m))
        .map(|(m, code)| (m.clone(), without_tests(code)))
        .collect();
    graph(&shipped)
}

/// The import circles of `g`, of any length: its strongly connected
/// components (Tarjan's algorithm) of more than one module, each sorted. A
/// module in one reaches itself back through the others, so none of them
/// can be read, tested or moved without the rest.
fn circles(g: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<Vec<Module>> {
    struct Tarjan<'a> {
        g: &'a BTreeMap<Module, BTreeSet<Module>>,
        index: BTreeMap<&'a Module, usize>,
        low: BTreeMap<&'a Module, usize>,
        stack: Vec<&'a Module>,
        on_stack: BTreeSet<&'a Module>,
        found: Vec<Vec<Module>>,
    }
    impl<'a> Tarjan<'a> {
        fn visit(&mut self, v: &'a Module) {
            let n = self.index.len();
            self.index.insert(v, n);
            self.low.insert(v, n);
            self.stack.push(v);
            self.on_stack.insert(v);
            for w in self.g.get(v).into_iter().flatten() {
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let lw = self.low[w];
                    let lv = self.low.get_mut(v).unwrap();
                    *lv = (*lv).min(lw);
                } else if self.on_stack.contains(w) {
                    let iw = self.index[w];
                    let lv = self.low.get_mut(v).unwrap();
                    *lv = (*lv).min(iw);
                }
            }
            if self.low[v] == self.index[v] {
                let mut scc = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack.remove(w);
                    scc.push(w.clone());
                    if w == v {
                        break;
                    }
                }
                if scc.len() > 1 {
                    scc.sort();
                    self.found.push(scc);
                }
            }
        }
    }
    let mut t = Tarjan {
        g,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for v in g.keys() {
        if !t.index.contains_key(v) {
            t.visit(v);
        }
    }
    t.found.sort();
    t.found
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

/// Where `m` stands among its top-level module's [`ROOMS`]: the index of
/// its room, or one past the last for a file in none.
fn room_rank(m: &Module) -> usize {
    let rooms = ROOMS
        .iter()
        .find(|(top, _)| *top == m[0])
        .map_or(&[][..], |r| r.1);
    m.get(1)
        .and_then(|r| rooms.iter().position(|x| x == r))
        .unwrap_or(rooms.len())
}

#[test]
fn every_import_points_down_the_rooms() {
    let mut up = Vec::new();
    for (from, to) in imports() {
        for t in to {
            if from[0] == t[0] && room_rank(&from) > room_rank(&t) {
                up.push(format!("{} -> {}", from.join("::"), t.join("::")));
            }
        }
    }
    assert!(
        up.is_empty(),
        "imports that do not point down the rooms of their module:\n{}",
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
fn no_import_circle_of_any_length() {
    let found: Vec<String> = circles(&shipped_imports())
        .iter()
        .map(|c| {
            c.iter()
                .map(|m| m.join("::"))
                .collect::<Vec<_>>()
                .join(", ")
        })
        .collect();
    assert!(
        found.is_empty(),
        "modules that import themselves back through others:\n{}",
        found.join("\n")
    );
}

#[test]
fn a_circle_of_three_is_found_and_a_dag_passes() {
    let m = |s: &str| -> Module { s.split("::").map(String::from).collect() };
    let g = |edges: &[(&str, &str)]| {
        let mut g: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
        for (a, b) in edges {
            g.entry(m(a)).or_default().insert(m(b));
            g.entry(m(b)).or_default();
        }
        g
    };
    // No two of the three name each other, so the pair check is blind to it.
    let three = g(&[
        ("export::chart", "export::html"),
        ("export::html", "export::human"),
        ("export::human", "export::chart"),
        ("export::human", "units"),
        ("cmd", "export::html"),
    ]);
    assert_eq!(
        circles(&three),
        vec![vec![
            m("export::chart"),
            m("export::html"),
            m("export::human")
        ]]
    );
    let dag = g(&[
        ("cmd", "export::page"),
        ("cmd", "export::draw"),
        ("export::page", "export::draw"),
        ("export::page", "export::human"),
        ("export::draw", "export::human"),
        ("export::human", "units"),
    ]);
    assert!(circles(&dag).is_empty(), "{:?}", circles(&dag));
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
    // A page names its chart and the text it prints; the rooms' order is
    // checked on real imports.
    let m = |s: &str| -> Module { s.split("::").map(String::from).collect() };
    let page = &g[&m("export::page::mix")];
    assert!(page.contains(&m("export::draw::mix")), "{page:?}");
    assert!(page.contains(&m("export::mix")), "{page:?}");
    assert!(room_rank(&m("export::page::mix")) < room_rank(&m("export::draw::mix")));
    assert!(room_rank(&m("export::draw::mix")) < room_rank(&m("export::mix")));
    // Tests are left out of the circle check: the test-only files, and a
    // file's `#[cfg(test)]` items, but not the code after them.
    let all = checked_modules();
    let tests = test_files(&all);
    for f in [
        "workload::harness",
        "workload::crr::tests",
        "control::client_tests",
    ] {
        let f: Module = f.split("::").map(String::from).collect();
        assert!(
            tests.contains(&f),
            "{f:?} not seen as a test file: {tests:?}"
        );
    }
    let code = "use a;\n#[cfg(test)]\nmod tests {\n    use crate::x;\n}\n#[cfg(test)]\n#[path = \"t.rs\"]\nmod t;\nfn b() {\n    #[cfg(test)]\n    fn c() {\n        d();\n    }\n    e();\n}";
    assert_eq!(without_tests(code), "use a;\nfn b() {\n    e();\n}");
}

/// A file longer than this before its unit tests holds more than one idea
/// (crr.rs and control/analysis.rs had grown to 1,364 and 1,065 lines
/// before they were split); split it by what its parts own.
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
