//! The workspace's import rules, checked on its sources. Fails, naming the files, when:
//!
//! - two files of one crate import from each other, directly or around a circle (a module using
//!   its own submodules does not count: it declares them);
//! - a module imports an item of its crate root (`crate::Item`, or `super::Item` from a child of
//!   the root): the root only declares modules and re-exports what the crate offers, and modules
//!   import from the module that defines what they use.
//!
//! Code under `#[cfg(test)]` is left out: a test may reach anything. Each crate is read from its
//! library root (`src/lib.rs`, else `src/main.rs`) through its `mod` declarations.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use syn::visit::Visit;

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");

/// A module's path below its crate root: empty for the root.
type ModPath = Vec<String>;

/// One source file of a crate: its module path and its syntax.
struct SourceFile {
    path: PathBuf,
    module: ModPath,
    syntax: syn::File,
}

/// The files of the crate whose root is `root` (lib.rs or main.rs), following `mod x;`.
fn crate_files(root: &Path) -> Vec<SourceFile> {
    let mut files = Vec::new();
    let mut pending = vec![(root.to_path_buf(), ModPath::new())];
    while let Some((path, module)) = pending.pop() {
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let syntax = syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        // Where this file's `mod x;` children live: beside a root or mod.rs, else in a folder
        // named for the file.
        let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or_default();
        let dir = match stem {
            "lib" | "main" | "mod" => path.parent().map(Path::to_path_buf).unwrap_or_default(),
            _ => path.with_extension(""),
        };
        declared_files(&syntax.items, &dir, &module, &mut pending);
        files.push(SourceFile { path, module, syntax });
    }
    files
}

/// Queues the files of the `mod x;` declarations among `items` (inline modules are searched for
/// theirs in a folder of their name), leaving out `#[cfg(test)]` ones.
fn declared_files(items: &[syn::Item], dir: &Path, module: &ModPath, pending: &mut Vec<(PathBuf, ModPath)>) {
    for item in items {
        let syn::Item::Mod(m) = item else { continue };
        if is_test_only(&m.attrs) {
            continue;
        }
        let name = m.ident.to_string();
        let mut child = module.clone();
        child.push(name.clone());
        match &m.content {
            Some((_, inner)) => declared_files(inner, &dir.join(&name), &child, pending),
            None => {
                let flat = dir.join(format!("{name}.rs"));
                let nested = dir.join(&name).join("mod.rs");
                let file = if flat.exists() { flat } else { nested };
                pending.push((file, child));
            }
        }
    }
}

fn is_test_only(attrs: &[syn::Attribute]) -> bool {
    attrs
        .iter()
        .any(|a| a.path().is_ident("cfg") && a.parse_args::<syn::Meta>().is_ok_and(|m| m.path().is_ident("test")))
}

/// Every `crate::`, `super::` and `self::` path a file names outside test code, resolved to
/// module paths below the crate root, with the module each is named in.
#[derive(Default)]
struct Paths {
    /// The module the visitor is in (inline modules included).
    module: ModPath,
    found: Vec<(ModPath, ModPath)>,
}

impl Paths {
    fn add(&mut self, segments: Vec<String>) {
        let mut base = match segments.first().map(String::as_str) {
            Some("crate") => ModPath::new(),
            Some("self") => self.module.clone(),
            Some("super") => {
                let mut m = self.module.clone();
                m.pop();
                m
            }
            _ => return,
        };
        let mut rest = &segments[1..];
        while rest.first().is_some_and(|s| s == "super") {
            base.pop();
            rest = &rest[1..];
        }
        base.extend(rest.iter().cloned());
        self.found.push((self.module.clone(), base));
    }

    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(prefix, &p.tree);
                prefix.pop();
            }
            syn::UseTree::Name(n) => {
                let mut full = prefix.clone();
                if n.ident != "self" {
                    full.push(n.ident.to_string());
                }
                self.add(full);
            }
            syn::UseTree::Rename(r) => {
                let mut full = prefix.clone();
                full.push(r.ident.to_string());
                self.add(full);
            }
            syn::UseTree::Glob(_) => self.add(prefix.clone()),
            syn::UseTree::Group(g) => {
                for tree in &g.items {
                    self.use_tree(prefix, tree);
                }
            }
        }
    }
}

impl<'ast> Visit<'ast> for Paths {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        let attrs = match item {
            syn::Item::Fn(i) => &i.attrs,
            syn::Item::Impl(i) => &i.attrs,
            syn::Item::Mod(i) => &i.attrs,
            syn::Item::Use(i) => &i.attrs,
            syn::Item::Const(i) => &i.attrs,
            syn::Item::Static(i) => &i.attrs,
            syn::Item::Struct(i) => &i.attrs,
            syn::Item::Enum(i) => &i.attrs,
            _ => return syn::visit::visit_item(self, item),
        };
        if !is_test_only(attrs) {
            syn::visit::visit_item(self, item);
        }
    }

    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        // A `mod x;` is a file of its own, read on its own.
        if let Some((_, items)) = &m.content {
            self.module.push(m.ident.to_string());
            for item in items {
                self.visit_item(item);
            }
            self.module.pop();
        }
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        self.use_tree(&mut Vec::new(), &u.tree);
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        self.add(path.segments.iter().map(|s| s.ident.to_string()).collect());
        syn::visit::visit_path(self, path);
    }
}

/// The file of `module`: the longest prefix of it that is a file's module.
fn file_of<'a>(files: &'a BTreeMap<ModPath, PathBuf>, module: &ModPath) -> Option<&'a ModPath> {
    (0..=module.len())
        .rev()
        .find_map(|n| files.get_key_value(&module[..n]).map(|(k, _)| k))
}

/// The crates' library (else binary) roots.
fn crate_roots() -> Vec<PathBuf> {
    let mut roots = Vec::new();
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(format!("{ROOT}/crates"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    dirs.push(PathBuf::from(format!("{ROOT}/tests")));
    dirs.sort();
    for dir in dirs {
        let lib = dir.join("src/lib.rs");
        let main = dir.join("src/main.rs");
        if lib.exists() {
            roots.push(lib);
        } else if main.exists() {
            roots.push(main);
        }
    }
    roots
}

/// The strongly connected groups of more than one file in `edges`.
fn circles(edges: &BTreeMap<ModPath, BTreeSet<ModPath>>) -> Vec<Vec<ModPath>> {
    // Two files are in one circle when each reaches the other.
    let reach = |from: &ModPath| -> BTreeSet<ModPath> {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.clone()];
        while let Some(m) = todo.pop() {
            for next in edges.get(&m).into_iter().flatten() {
                if seen.insert(next.clone()) {
                    todo.push(next.clone());
                }
            }
        }
        seen
    };
    let reached: BTreeMap<&ModPath, BTreeSet<ModPath>> = edges.keys().map(|m| (m, reach(m))).collect();
    let mut groups: Vec<Vec<ModPath>> = Vec::new();
    let mut placed = BTreeSet::new();
    for (m, from_m) in &reached {
        if placed.contains(*m) || !from_m.contains(*m) {
            continue;
        }
        let group: Vec<ModPath> = from_m
            .iter()
            .filter(|other| reached.get(other).is_some_and(|r| r.contains(*m)))
            .cloned()
            .collect();
        placed.extend(group.iter().cloned());
        groups.push(group);
    }
    groups.retain(|g| g.len() > 1);
    groups
}

#[test]
fn no_import_circle_between_files_and_no_import_from_a_crate_root() {
    let mut problems = Vec::new();
    for root in crate_roots() {
        let files = crate_files(&root);
        let by_module: BTreeMap<ModPath, PathBuf> = files.iter().map(|f| (f.module.clone(), f.path.clone())).collect();
        let root_modules: BTreeSet<String> = files.iter().filter_map(|f| f.module.first().cloned()).collect();
        let mut edges: BTreeMap<ModPath, BTreeSet<ModPath>> =
            by_module.keys().map(|m| (m.clone(), BTreeSet::new())).collect();
        for file in &files {
            let mut paths = Paths {
                module: file.module.clone(),
                ..Paths::default()
            };
            for item in &file.syntax.items {
                paths.visit_item(item);
            }
            for (named_in, target) in paths.found {
                let Some(target_file) = file_of(&by_module, &target) else {
                    continue;
                };
                if target_file.is_empty() && !file.module.is_empty() {
                    // An item of the root, unless the path goes on into a module of it.
                    if let Some(first) = target.first().filter(|f| !root_modules.contains(*f)) {
                        problems.push(format!(
                            "{} (module {}) imports {} from its crate root: import it from the module that defines it",
                            file.path.display(),
                            named_in.join("::"),
                            first
                        ));
                    }
                    continue;
                }
                // Itself, or one of its own submodules: not an import between files.
                if target_file.starts_with(&file.module) {
                    continue;
                }
                if let Some(set) = edges.get_mut(&file.module) {
                    set.insert(target_file.clone());
                }
            }
        }
        for group in circles(&edges) {
            let names: Vec<String> = group.iter().map(|m| by_module[m].display().to_string()).collect();
            problems.push(format!("these files import from each other: {}", names.join(", ")));
        }
    }
    let problems: Vec<String> = problems
        .into_iter()
        .map(|p| p.replace(&format!("{ROOT}/"), ""))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn a_circle_is_found_and_a_chain_is_not_one() {
    let m = |s: &str| -> ModPath { s.split('/').filter(|p| !p.is_empty()).map(str::to_owned).collect() };
    let edges = BTreeMap::from([
        (m("a"), BTreeSet::from([m("b")])),
        (m("b"), BTreeSet::from([m("c")])),
        (m("c"), BTreeSet::from([m("a")])),
        (m("d"), BTreeSet::from([m("a")])),
    ]);
    assert_eq!(circles(&edges), vec![vec![m("a"), m("b"), m("c")]]);
    let edges = BTreeMap::from([(m("a"), BTreeSet::from([m("b")])), (m("b"), BTreeSet::new())]);
    assert!(circles(&edges).is_empty());
}
