//! The layout of `src/` stays true: no file-level import cycle anywhere (in `src/` nor in the test
//! kit's `testkit/src/`), and every room depends only on rooms of lower floors (never on a sibling
//! of its own floor). Reads the sources with `syn`: `use` declarations and `crate::`/`super::`/
//! `self::`/child-module paths in code and inside macro invocations (whose tokens `syn` leaves
//! unparsed), each resolved to the file that defines the module it names (following a room's
//! `pub use` re-exports to the file that defines the item), so importing through a room's face
//! counts as importing the file behind it. And no target compiles another's file into itself
//! with `#[path]`: code is shared through crates.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use syn::visit::Visit;

/// The floors, lowest first. A room may use rooms of lower floors only. `engine` and `platform`
/// are the ground's footing (the API types, node classes and the registry read their types), and
/// `process` (the registry reads its growing delay as every feature does);
/// `cli` is the edge of the binary, over `startup`.
const FLOORS: &[(&str, &[&str])] = &[
    ("footing", &["engine", "platform", "process"]),
    ("ground", &["api", "classes", "registry", "telemetry"]),
    ("shared", &["cluster", "admission", "step_helper"]),
    (
        "features",
        &["image_selection", "placement", "artifact_cache"],
    ),
    ("top", &["startup"]),
    ("edge", &["cli"]),
];

/// A module path below the crate root, e.g. `["engine", "artifact"]`.
type ModPath = Vec<String>;

/// What one file says.
#[derive(Debug, Default)]
struct FileFacts {
    /// The module this file defines.
    module: ModPath,
    /// Modules this file references (not yet resolved to files).
    references: Vec<ModPath>,
    /// Re-exports: (module the `pub use` sits in, name it exports) → the path it points to.
    reexports: Vec<(ModPath, String, ModPath)>,
    /// Inline modules (`mod tests { … }`) defined in this file.
    inline_modules: Vec<ModPath>,
}

struct Crate {
    /// Module path → the file defining it (inline modules map to their file).
    files: BTreeMap<ModPath, PathBuf>,
    facts: BTreeMap<PathBuf, FileFacts>,
    /// (module, exported name) → target path.
    reexports: BTreeMap<(ModPath, String), ModPath>,
}

fn module_of(src: &Path, file: &Path) -> Option<ModPath> {
    let relative = file.strip_prefix(src).ok()?;
    let mut parts: Vec<String> = relative
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop()?;
    match last.as_str() {
        "lib.rs" if parts.is_empty() => Some(Vec::new()),
        "main.rs" if parts.is_empty() => None,
        "mod.rs" => Some(parts),
        other => {
            parts.push(other.strip_suffix(".rs")?.to_owned());
            Some(parts)
        }
    }
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("a readable source directory")
        .map(|e| e.expect("a directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Collects a file's references, tracking inline modules so `super` means what it means there.
struct Collector<'a> {
    module: ModPath,
    /// Names of child modules declared in each module of this file.
    children: &'a BTreeMap<ModPath, BTreeSet<String>>,
    facts: FileFacts,
}

impl Collector<'_> {
    /// Resolves a path's leading segments (`crate`, `super`, `self`, a child module) to a module
    /// path plus the rest; `None` for external crates and local names.
    fn absolute(&self, segments: &[String]) -> Option<ModPath> {
        let mut out = self.module.clone();
        let mut rest = segments;
        match rest.first().map(String::as_str) {
            Some("crate") => {
                out.clear();
                rest = &rest[1..];
            }
            Some("super") | Some("self") => {
                while let Some(first) = rest.first() {
                    match first.as_str() {
                        "super" => {
                            out.pop()?;
                        }
                        "self" => {}
                        _ => break,
                    }
                    rest = &rest[1..];
                }
            }
            Some(first)
                if self
                    .children
                    .get(&self.module)
                    .is_some_and(|c| c.contains(first)) => {}
            _ => return None,
        }
        out.extend(rest.iter().cloned());
        Some(out)
    }

    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree, public: bool) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(prefix, &p.tree, public);
                prefix.pop();
            }
            syn::UseTree::Name(n) => self.used(prefix, &n.ident.to_string(), None, public),
            syn::UseTree::Rename(r) => self.used(
                prefix,
                &r.ident.to_string(),
                Some(r.rename.to_string()),
                public,
            ),
            syn::UseTree::Glob(_) => {
                if let Some(path) = self.absolute(prefix) {
                    self.facts.references.push(path);
                }
            }
            syn::UseTree::Group(g) => {
                for item in &g.items {
                    self.use_tree(prefix, item, public);
                }
            }
        }
    }

    fn used(&mut self, prefix: &[String], name: &str, rename: Option<String>, public: bool) {
        let mut segments = prefix.to_vec();
        if name != "self" {
            segments.push(name.to_owned());
        }
        let Some(path) = self.absolute(&segments) else {
            return;
        };
        let exported = rename.unwrap_or_else(|| segments.last().cloned().unwrap_or_default());
        // A `pub use` of something below this module is its face, not a dependency.
        if public && path.starts_with(&self.module) {
            self.facts
                .reexports
                .push((self.module.clone(), exported, path));
            return;
        }
        self.facts.references.push(path);
    }
}

impl<'ast> Visit<'ast> for Collector<'_> {
    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        let public = !matches!(item.vis, syn::Visibility::Inherited);
        let mut prefix = Vec::new();
        if item.leading_colon.is_none() {
            self.use_tree(&mut prefix, &item.tree, public);
        }
    }

    fn visit_item_mod(&mut self, item: &'ast syn::ItemMod) {
        if item.content.is_some() {
            self.module.push(item.ident.to_string());
            self.facts.inline_modules.push(self.module.clone());
            syn::visit::visit_item_mod(self, item);
            self.module.pop();
        }
    }

    fn visit_visibility(&mut self, _: &'ast syn::Visibility) {
        // `pub(super)` names who may see an item, not what it uses.
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
        if path.leading_colon.is_none() {
            self.referenced(&segments);
        }
        syn::visit::visit_path(self, path);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        for segments in paths_in_tokens(&mac.tokens) {
            self.referenced(&segments);
        }
        syn::visit::visit_macro(self, mac);
    }
}

impl Collector<'_> {
    /// Records a path of code that starts at `crate`, `super`, `self` or a child module of this
    /// one (a single segment names a local item, not a module).
    fn referenced(&mut self, segments: &[String]) {
        if segments.len() > 1
            && let Some(absolute) = self.absolute(segments)
        {
            self.facts.references.push(absolute);
        }
    }
}

/// Every `a::b::c` path in a macro's tokens (and in its nested groups), as segments; a path that
/// starts with `::` is an external crate's and is left out.
fn paths_in_tokens(tokens: &proc_macro2::TokenStream) -> Vec<Vec<String>> {
    /// The path being read: its segments, whether it started with `::`, and the colons seen
    /// since its last segment (two join the next identifier to it).
    #[derive(Default)]
    struct Reading {
        segments: Vec<String>,
        external: bool,
        colons: usize,
    }
    fn finish(reading: &mut Reading, paths: &mut Vec<Vec<String>>) {
        let done = std::mem::take(reading);
        if done.segments.len() > 1 && !done.external {
            paths.push(done.segments);
        }
    }
    let mut paths = Vec::new();
    let mut reading = Reading::default();
    for tree in tokens.clone() {
        match tree {
            proc_macro2::TokenTree::Ident(ident) => {
                if reading.colons != 2 && !reading.segments.is_empty() {
                    finish(&mut reading, &mut paths);
                }
                reading.segments.push(ident.to_string());
                reading.colons = 0;
            }
            proc_macro2::TokenTree::Punct(punct) if punct.as_char() == ':' => {
                reading.colons += 1;
                if reading.segments.is_empty() && reading.colons == 2 {
                    reading.external = true;
                }
            }
            proc_macro2::TokenTree::Group(group) => {
                finish(&mut reading, &mut paths);
                paths.extend(paths_in_tokens(&group.stream()));
            }
            proc_macro2::TokenTree::Punct(_) | proc_macro2::TokenTree::Literal(_) => {
                finish(&mut reading, &mut paths);
            }
        }
    }
    finish(&mut reading, &mut paths);
    paths
}

/// Child modules declared in each module of a file (`mod x;` and inline `mod x { … }`).
fn declared_children(
    module: &ModPath,
    items: &[syn::Item],
    out: &mut BTreeMap<ModPath, BTreeSet<String>>,
) {
    for item in items {
        if let syn::Item::Mod(m) = item {
            out.entry(module.clone())
                .or_default()
                .insert(m.ident.to_string());
            if let Some((_, inner)) = &m.content {
                let mut child = module.clone();
                child.push(m.ident.to_string());
                declared_children(&child, inner, out);
            }
        }
    }
}

/// The library under `src` (its `bin/` programs and `main.rs` are crates of their own).
fn read_crate_at(src: &Path) -> Crate {
    let mut paths = Vec::new();
    rust_files(src, &mut paths);
    let sources = paths
        .into_iter()
        .filter(|path| !path.starts_with(src.join("bin")))
        .map(|path| {
            let text = std::fs::read_to_string(&path).expect("a readable source file");
            (path, text)
        })
        .collect();
    crate_of(src, sources)
}

/// The crate made of `sources` (each file's path under `src` and its text).
fn crate_of(src: &Path, sources: Vec<(PathBuf, String)>) -> Crate {
    let mut files = BTreeMap::new();
    let mut facts = BTreeMap::new();
    for (path, text) in sources {
        let Some(module) = module_of(src, &path) else {
            continue;
        };
        let parsed = syn::parse_file(&text)
            .unwrap_or_else(|e| panic!("{} does not parse: {e}", path.display()));
        let mut children = BTreeMap::new();
        declared_children(&module, &parsed.items, &mut children);
        let mut collector = Collector {
            module: module.clone(),
            children: &children,
            facts: FileFacts {
                module: module.clone(),
                ..FileFacts::default()
            },
        };
        collector.visit_file(&parsed);
        for inline in &collector.facts.inline_modules {
            files.insert(inline.clone(), path.clone());
        }
        files.insert(module, path.clone());
        facts.insert(path, collector.facts);
    }
    let reexports = facts
        .values()
        .flat_map(|f| f.reexports.iter())
        .map(|(module, name, target)| ((module.clone(), name.clone()), target.clone()))
        .collect();
    Crate {
        files,
        facts,
        reexports,
    }
}

impl Crate {
    /// The file defining what `path` names: its longest prefix that is a module, through
    /// re-exports to where the item is defined.
    fn file_of(&self, path: &ModPath) -> Option<&PathBuf> {
        let mut path = path.clone();
        for _ in 0..16 {
            let module_len = (0..=path.len())
                .rev()
                .find(|n| self.files.contains_key(&path[..*n]))?;
            let module = path[..module_len].to_vec();
            let followed = path
                .get(module_len)
                .and_then(|name| self.reexports.get(&(module.clone(), name.clone())));
            match followed {
                Some(target) if target != &path => {
                    let mut next = target.clone();
                    next.extend(path[module_len + 1..].iter().cloned());
                    path = next;
                }
                _ => return self.files.get(&module),
            }
        }
        None
    }

    /// File → the files it depends on.
    /// A module's parts may use the module they are part of (`super::Item`, the room's error
    /// type): an edge to a file of one of its own ancestor modules is not a dependency between
    /// peers, so it is left out; every other edge, the parent's calls into its parts included,
    /// counts.
    fn graph(&self) -> BTreeMap<PathBuf, BTreeSet<PathBuf>> {
        let mut graph = BTreeMap::new();
        for (file, facts) in &self.facts {
            let ancestors: BTreeSet<&PathBuf> = (0..facts.module.len())
                .filter_map(|n| self.files.get(&facts.module[..n]))
                .collect();
            let targets: BTreeSet<PathBuf> = facts
                .references
                .iter()
                .filter_map(|path| self.file_of(path))
                .filter(|target| *target != file && !ancestors.contains(target))
                .cloned()
                .collect();
            graph.insert(file.clone(), targets);
        }
        graph
    }
}

fn room_of(src: &Path, file: &Path) -> Option<String> {
    let relative = file.strip_prefix(src).ok()?;
    let first = relative.iter().next()?.to_string_lossy().into_owned();
    Some(first.strip_suffix(".rs").unwrap_or(&first).to_owned())
}

fn floor_of(room: &str) -> Option<usize> {
    FLOORS.iter().position(|(_, rooms)| rooms.contains(&room))
}

/// Strongly connected components with more than one file (Tarjan).
fn cycles(graph: &BTreeMap<PathBuf, BTreeSet<PathBuf>>) -> Vec<Vec<PathBuf>> {
    struct State<'g> {
        graph: &'g BTreeMap<PathBuf, BTreeSet<PathBuf>>,
        index: BTreeMap<&'g PathBuf, usize>,
        low: BTreeMap<&'g PathBuf, usize>,
        stack: Vec<&'g PathBuf>,
        on_stack: BTreeSet<&'g PathBuf>,
        found: Vec<Vec<PathBuf>>,
    }
    fn connect<'g>(s: &mut State<'g>, v: &'g PathBuf) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on_stack.insert(v);
        for w in s.graph.get(v).into_iter().flatten() {
            if !s.index.contains_key(w) {
                connect(s, w);
                let low = s.low[v].min(s.low[w]);
                s.low.insert(v, low);
            } else if s.on_stack.contains(w) {
                let low = s.low[v].min(s.index[w]);
                s.low.insert(v, low);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                component.push(w.clone());
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                s.found.push(component);
            }
        }
    }
    let mut state = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for v in graph.keys() {
        if !state.index.contains_key(v) {
            connect(&mut state, v);
        }
    }
    state.found
}

fn shown(src: &Path, file: &Path) -> String {
    file.strip_prefix(src).unwrap_or(file).display().to_string()
}

/// The cycles among `src`'s files, each as its edges (`a.rs → b.rs`).
fn described_cycles(src: &Path, krate: &Crate) -> Vec<String> {
    let graph = krate.graph();
    cycles(&graph)
        .iter()
        .map(|files| {
            let edges: Vec<String> = files
                .iter()
                .flat_map(|from| {
                    graph[from]
                        .iter()
                        .filter(|to| files.contains(to))
                        .map(move |to| format!("{} → {}", shown(src, from), shown(src, to)))
                })
                .collect();
            edges.join(", ")
        })
        .collect()
}

/// In every crate of the house and the test kit (`src/`, `core/src/`, `testkit/src/`).
#[test]
fn no_file_imports_a_file_that_imports_it_back() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let described: Vec<String> = ["src", "core/src", "testkit/src"]
        .into_iter()
        .flat_map(|dir| {
            let src = root.join(dir);
            described_cycles(&src, &read_crate_at(&src))
                .into_iter()
                .map(move |cycle| format!("{dir}: {cycle}"))
        })
        .collect();
    assert!(
        described.is_empty(),
        "import cycles (move the shared item to a file both can use):\n{}",
        described.join("\n")
    );
}

/// Where a room of the crate read from `src` uses a sibling, a higher floor or a room in no floor.
fn floor_faults(src: &Path, krate: &Crate) -> BTreeSet<String> {
    let graph = krate.graph();
    let mut wrong = BTreeSet::new();
    for (file, targets) in &graph {
        let Some(room) = room_of(src, file) else {
            continue;
        };
        if room == "lib" {
            continue;
        }
        let Some(floor) = floor_of(&room) else {
            wrong.insert(format!(
                "{}/{room} is in no floor: add it to FLOORS here and to the layout in CONTRIBUTING.md",
                src.display()
            ));
            continue;
        };
        for target in targets {
            let Some(other) = room_of(src, target).filter(|r| *r != room && r != "lib") else {
                continue;
            };
            let allowed = floor_of(&other).is_some_and(|f| f < floor);
            if !allowed {
                let why = match floor_of(&other) {
                    Some(f) if f == floor => "a sibling on its own floor",
                    Some(_) => "a room of a higher floor",
                    None => "a room in no floor",
                };
                wrong.insert(format!(
                    "{} uses {} ({why})",
                    shown(src, file),
                    shown(src, target)
                ));
            }
        }
    }
    wrong
}

/// The floors hold in both crates of the house: `ocifit` (`src/`) and its pure rooms,
/// `ocifit-core` (`core/src/`: `engine`, `platform`, `classes`), which Cargo keeps from importing
/// anything of `ocifit` or any client, runtime or network crate.
#[test]
fn every_room_uses_only_rooms_of_lower_floors() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut wrong = BTreeSet::new();
    for dir in ["src", "core/src"] {
        let src = root.join(dir);
        wrong.extend(floor_faults(&src, &read_crate_at(&src)));
    }
    assert!(
        wrong.is_empty(),
        "rooms using what they must not:\n{}",
        wrong.into_iter().collect::<Vec<_>>().join("\n")
    );
}

#[test]
fn the_checker_sees_a_cycle_and_follows_re_exports() {
    let a = PathBuf::from("a.rs");
    let b = PathBuf::from("b.rs");
    let c = PathBuf::from("c.rs");
    let graph = BTreeMap::from([
        (a.clone(), BTreeSet::from([b.clone()])),
        (b.clone(), BTreeSet::from([c.clone()])),
        (c.clone(), BTreeSet::from([a.clone()])),
    ]);
    assert_eq!(cycles(&graph), vec![vec![a, b, c]]);
    let krate = read_crate_at(&Path::new(env!("CARGO_MANIFEST_DIR")).join("core/src"));
    let artifact = krate
        .file_of(&vec!["engine".to_owned(), "Artifact".to_owned()])
        .expect("engine::Artifact is defined somewhere");
    assert!(
        artifact.ends_with("engine/artifact.rs"),
        "{}",
        artifact.display()
    );
}

/// Modules below a room's door that may stay `pub`: namespaces of constants the door exports whole
/// (`api::pod`, `api::step`, and placement's pod vocabulary the door names `placement_pod`).
const PUBLIC_NAMESPACES: &[&str] = &[
    "src/api/mod.rs",
    "src/api/artifact_cache.rs",
    "src/api/placement.rs",
];

/// `pub mod` lines below `src/lib.rs` outside [`PUBLIC_NAMESPACES`]: a room's inside is private
/// and what leaves it is re-exported at its door (the compiler then guards the rest, with
/// `unreachable_pub`); a `pub mod` would open the room again without any warning.
fn public_modules(sources: &[(PathBuf, String)]) -> Vec<String> {
    sources
        .iter()
        .filter(|(file, _)| !file.ends_with("src/lib.rs"))
        .filter(|(file, _)| {
            !PUBLIC_NAMESPACES
                .iter()
                .any(|allowed| file.ends_with(allowed))
        })
        .flat_map(|(file, text)| {
            text.lines()
                .enumerate()
                .filter(|(_, line)| line.trim_start().starts_with("pub mod "))
                .map(move |(n, line)| format!("{}:{}: {}", file.display(), n + 1, line.trim()))
        })
        .collect()
}

#[test]
fn every_room_keeps_its_inside_private() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    rust_files(&root.join("core/src"), &mut files);
    let sources: Vec<(PathBuf, String)> = files
        .into_iter()
        .map(|file| {
            let text = std::fs::read_to_string(&file).expect("read a source file");
            (file, text)
        })
        .collect();
    let public = public_modules(&sources);
    assert!(
        public.is_empty(),
        "a room's module is `pub` (make it `mod` and re-export what leaves the room at its door):\n{}",
        public.join("\n")
    );
    let planted = vec![(
        PathBuf::from("src/placement/mod.rs"),
        "mod route;\npub mod planner;\n".to_owned(),
    )];
    assert_eq!(
        public_modules(&planted),
        vec!["src/placement/mod.rs:2: pub mod planner;".to_owned()]
    );
}

/// The parts of a feature that decide without I/O: its `planner/` (and image selection's
/// `resolution/`, which `ocifit resolve` shares).
const PURE_PARTS: &[&str] = &["planner", "resolution"];

/// The parts every feature has, each a file (`NAME.rs`) or a folder.
const EVERY_FEATURE_HAS: &[&str] = &["route", "planner", "controller"];

/// What is wrong with the layout of one feature whose files are `files` (paths under the
/// feature): a part of [`EVERY_FEATURE_HAS`] missing, or two files of one name that are both pure
/// or both adapters (one name means one thing: `planner/X.rs` decides what the adapter `X.rs`
/// carries out, and nothing else is named alike).
fn layout_faults(feature: &str, files: &[PathBuf]) -> Vec<String> {
    let mut faults = Vec::new();
    for part in EVERY_FEATURE_HAS {
        let present = files
            .iter()
            .any(|file| file == Path::new(&format!("{part}.rs")) || file.starts_with(part));
        if !present {
            faults.push(format!("src/{feature} has no {part}.rs nor {part}/"));
        }
    }
    let mut by_name: BTreeMap<(String, bool), Vec<String>> = BTreeMap::new();
    for file in files {
        let name = file
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        let test_only =
            file.iter().any(|part| part == "tests") || name == "tests.rs" || name == "fixtures.rs";
        if name == "mod.rs" || test_only {
            continue;
        }
        let pure = file
            .iter()
            .any(|part| PURE_PARTS.iter().any(|pure| part == *pure));
        by_name
            .entry((name, pure))
            .or_default()
            .push(file.display().to_string());
    }
    for ((name, pure), alike) in by_name {
        if alike.len() > 1 {
            let kind = if pure { "pure" } else { "adapters" };
            faults.push(format!(
                "src/{feature}: {} are all {name} and all {kind}: name each for what it does",
                alike.join(", ")
            ));
        }
    }
    faults
}

#[test]
fn every_feature_is_laid_out_alike() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let (_, features) = FLOORS
        .iter()
        .find(|(name, _)| *name == "features")
        .expect("a features floor");
    let faults: Vec<String> = features
        .iter()
        .flat_map(|feature| {
            let mut files = Vec::new();
            rust_files(&src.join(feature), &mut files);
            let files: Vec<PathBuf> = files
                .iter()
                .filter_map(|file| file.strip_prefix(src.join(feature)).ok())
                .map(Path::to_path_buf)
                .collect();
            layout_faults(feature, &files)
        })
        .collect();
    assert!(
        faults.is_empty(),
        "features laid out otherwise (see docs/architecture.md, \"Inside a feature\"):\n{}",
        faults.join("\n")
    );
}

#[test]
fn the_checker_sees_a_feature_laid_out_otherwise() {
    let files = |paths: &[&str]| -> Vec<PathBuf> { paths.iter().map(PathBuf::from).collect() };
    assert!(
        layout_faults(
            "placement",
            &files(&[
                "route.rs",
                "status.rs",
                "planner/taints.rs",
                "controller/taints.rs",
                "controller/status_write.rs",
                "route/tests.rs",
                "planner/release/tests.rs",
                "controller/tests.rs",
            ])
        )
        .is_empty()
    );
    assert_eq!(
        layout_faults(
            "placement",
            &files(&[
                "admission.rs",
                "planner/gate.rs",
                "status.rs",
                "controller/status.rs"
            ])
        ),
        [
            "src/placement has no route.rs nor route/",
            "src/placement: status.rs, controller/status.rs are all status.rs and all adapters: \
             name each for what it does",
        ]
    );
}

/// `docs/architecture.md` draws the house from the code: its floors table is [`FLOORS`] and every
/// `src/` path it names exists, so a room moved, added or renamed without the page fails here.
#[test]
fn docs_architecture_draws_the_floors_and_names_only_paths_that_exist() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let page = std::fs::read_to_string(root.join("docs/architecture.md")).expect("the page");
    let drawn: Vec<(String, Vec<String>)> = page
        .lines()
        .skip_while(|line| !line.starts_with("| floor"))
        .skip(2)
        .take_while(|line| line.starts_with("| "))
        .map(|line| {
            let cells: Vec<&str> = line.trim_matches('|').split(" | ").map(str::trim).collect();
            let rooms = cells[1]
                .split(", ")
                .map(|r| r.trim_matches('`').to_owned())
                .collect();
            (cells[0].to_owned(), rooms)
        })
        .collect();
    let floors: Vec<(String, Vec<String>)> = FLOORS
        .iter()
        .map(|(floor, rooms)| {
            (
                (*floor).to_owned(),
                rooms.iter().map(|r| (*r).to_owned()).collect(),
            )
        })
        .collect();
    assert_eq!(
        drawn, floors,
        "docs/architecture.md's floors table and FLOORS differ"
    );
    let missing: Vec<&str> = page
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|span| {
            (span.starts_with("src/") || span.starts_with("core/src/")) && !root.join(span).exists()
        })
        .collect();
    assert!(
        missing.is_empty(),
        "docs/architecture.md names paths not in src/: {missing:?}"
    );
}

/// The cycles of a crate made of `sources` (paths under `/src`).
fn cycles_of(sources: &[(&str, &str)]) -> Vec<String> {
    let src = PathBuf::from("/src");
    let sources = sources
        .iter()
        .map(|(path, text)| (src.join(path), (*text).to_owned()))
        .collect();
    described_cycles(&src, &crate_of(&src, sources))
}

#[test]
fn the_checker_sees_paths_inside_macros() {
    let lib = "mod a; mod b;";
    let b = "pub fn g() -> u8 { crate::a::h(); 1 }";
    assert_eq!(
        cycles_of(&[
            ("lib.rs", lib),
            (
                "a.rs",
                r#"pub fn h() {} pub fn f() -> String { format!("{}", crate::b::g()) }"#
            ),
            ("b.rs", b),
        ]),
        vec!["a.rs → b.rs, b.rs → a.rs".to_owned()]
    );
    // Nested in a group of a macro, after a `$crate`-style `$`, as a turbofish call.
    assert_eq!(
        cycles_of(&[
            ("lib.rs", lib),
            (
                "a.rs",
                "pub fn h() {} macro_rules! m { () => { vec![($crate::b::g::<u8>)] }; }"
            ),
            ("b.rs", b),
        ])
        .len(),
        1
    );
    // An external crate's path (`::b::g`) and a struct field (`b: g`) name no module.
    assert!(
        cycles_of(&[
            ("lib.rs", lib),
            (
                "a.rs",
                r#"pub fn h() {} pub fn f() { println!("{:?}", (::b::g(), S { b: g })) }"#
            ),
            ("b.rs", b),
        ])
        .is_empty()
    );
}

#[test]
fn the_checker_sees_child_module_paths() {
    let b = "pub fn h() -> u8 { crate::a::k() }";
    assert_eq!(
        cycles_of(&[
            ("lib.rs", "mod a; mod b;"),
            (
                "a/mod.rs",
                "mod inner; pub fn k() -> u8 { 1 } pub fn f() -> u8 { inner::g() }"
            ),
            ("a/inner.rs", "pub fn g() -> u8 { crate::b::h() }"),
            ("b.rs", b),
        ]),
        vec!["a/inner.rs → b.rs, a/mod.rs → a/inner.rs, b.rs → a/mod.rs".to_owned()]
    );
    // A name that is no child module (a local `other`) is no module path.
    assert!(
        cycles_of(&[
            ("lib.rs", "mod a; mod b;"),
            (
                "a/mod.rs",
                "mod inner; pub fn k() -> u8 { 1 } pub fn f() -> u8 { other::g() }"
            ),
            ("a/inner.rs", "pub fn g() -> u8 { crate::b::h() }"),
            ("b.rs", b),
        ])
        .is_empty()
    );
    // A part using the module it is part of is no cycle; two parts using each other are.
    let parts = |sibling: &str| {
        cycles_of(&[
            ("lib.rs", "mod a;"),
            (
                "a/mod.rs",
                "mod x; mod y; pub const N: u8 = 1; pub fn f() -> u8 { x::g() }",
            ),
            ("a/x.rs", "pub fn g() -> u8 { super::N + super::y::h() }"),
            ("a/y.rs", sibling),
        ])
    };
    assert!(parts("pub fn h() -> u8 { super::N }").is_empty());
    assert_eq!(
        parts("pub fn h() -> u8 { super::x::g() }"),
        vec!["a/x.rs → a/y.rs, a/y.rs → a/x.rs".to_owned()]
    );
}

/// The modules in `source` that take their text from another file (`#[path = "…"]`).
fn path_includes(source: &str) -> Vec<String> {
    struct Includes(Vec<String>);
    impl<'ast> Visit<'ast> for Includes {
        fn visit_item_mod(&mut self, module: &'ast syn::ItemMod) {
            if module.attrs.iter().any(|a| a.path().is_ident("path")) {
                self.0.push(module.ident.to_string());
            }
            syn::visit::visit_item_mod(self, module);
        }
    }
    let file = syn::parse_file(source).expect("Rust source");
    let mut includes = Includes(Vec::new());
    includes.visit_file(&file);
    includes.0
}

/// Every test, bench, fuzz target and the test kit share code through crates (the test kit, the
/// cluster tests' library), never by compiling another target's file into themselves: such a
/// file is built twice, under two crates' names, and its unused half hidden with `dead_code`.
#[test]
fn no_target_compiles_another_targets_file_with_a_path_attribute() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in [
        "src",
        "core/src",
        "testkit/src",
        "tests",
        "benches",
        "fuzz/fuzz_targets",
    ] {
        rust_files(&root.join(dir), &mut files);
    }
    let found: Vec<String> = files
        .iter()
        .flat_map(|file| {
            let source = std::fs::read_to_string(file).expect("a readable source file");
            path_includes(&source)
                .into_iter()
                .map(move |module| format!("{}: mod {module}", file.display()))
        })
        .collect();
    assert!(
        found.is_empty(),
        "`#[path]` includes:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_checker_sees_a_path_attribute_on_an_inner_module() {
    let source = r#"
        mod outer {
            #[path = "../../tests/cluster/support/mod.rs"]
            #[allow(dead_code)]
            mod support;
        }
        mod plain;
    "#;
    assert_eq!(path_includes(source), ["support"]);
}
