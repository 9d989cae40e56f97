//! One outbound fence: no code in `src/` builds an HTTP client but the fenced constructor
//! (`src/registry/fence.rs`), whose resolver and URL check every request to a registry, a token
//! realm or a redirect goes through. Reads the sources with `syn`: every path in code, `use`
//! declarations (renames included) and the tokens of macro invocations. Test code (`tests.rs`
//! files, files under a `tests/` directory, `#[cfg(test)]` modules) is left out. kube's client
//! is not an outbound client of this kind: it reaches only the apiserver its kubeconfig names.

use std::path::{Path, PathBuf};

use syn::visit::Visit;

/// The one file that may build an HTTP client.
const FENCED_CONSTRUCTOR: &str = "src/registry/fence.rs";

/// Paths (consecutive segments) that build, or name the builder of, an HTTP client.
const CLIENT_PATHS: &[&[&str]] = &[
    &["reqwest", "Client"],
    &["reqwest", "ClientBuilder"],
    &["reqwest", "blocking"],
    &["reqwest", "get"],
    &["hyper", "client"],
    &["hyper_util", "client"],
    &["ClientBuilder"],
];

/// Crates whose client a rename would hide.
const HTTP_CRATES: &[&str] = &["reqwest", "hyper", "hyper_util"];

fn names_a_client(segments: &[String]) -> bool {
    CLIENT_PATHS.iter().any(|pattern| {
        segments
            .windows(pattern.len())
            .any(|window| window.iter().zip(pattern.iter()).all(|(s, p)| s == p))
    })
}

/// Where a file names an HTTP client: `line: what`.
#[derive(Default)]
struct Finder {
    found: Vec<String>,
}

impl Finder {
    fn check(&mut self, segments: Vec<String>, line: usize) {
        if names_a_client(&segments) {
            self.found.push(format!("{line}: {}", segments.join("::")));
        }
    }

    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(path) => {
                prefix.push(path.ident.to_string());
                self.use_tree(prefix, &path.tree);
                prefix.pop();
            }
            syn::UseTree::Name(name) => {
                let mut whole = prefix.clone();
                whole.push(name.ident.to_string());
                self.check(whole, name.ident.span().start().line);
            }
            syn::UseTree::Rename(rename) => {
                let mut whole = prefix.clone();
                whole.push(rename.ident.to_string());
                let line = rename.ident.span().start().line;
                if prefix.is_empty() && HTTP_CRATES.contains(&rename.ident.to_string().as_str()) {
                    self.found.push(format!("{line}: {} renamed", rename.ident));
                }
                self.check(whole, line);
            }
            syn::UseTree::Glob(glob) => {
                let line = glob.star_token.spans[0].start().line;
                self.check(prefix.clone(), line);
                if prefix.len() == 1 && HTTP_CRATES.contains(&prefix[0].as_str()) {
                    self.found
                        .push(format!("{line}: {}::* imported", prefix[0]));
                }
            }
            syn::UseTree::Group(group) => {
                for tree in &group.items {
                    self.use_tree(prefix, tree);
                }
            }
        }
    }
}

impl<'ast> Visit<'ast> for Finder {
    fn visit_path(&mut self, path: &'ast syn::Path) {
        let segments = path.segments.iter().map(|s| s.ident.to_string()).collect();
        let line = path
            .segments
            .first()
            .map_or(0, |s| s.ident.span().start().line);
        self.check(segments, line);
        syn::visit::visit_path(self, path);
    }

    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        self.use_tree(&mut Vec::new(), &item.tree);
    }

    fn visit_item_extern_crate(&mut self, item: &'ast syn::ItemExternCrate) {
        if HTTP_CRATES.contains(&item.ident.to_string().as_str()) && item.rename.is_some() {
            let line = item.ident.span().start().line;
            self.found
                .push(format!("{line}: extern crate {} renamed", item.ident));
        }
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        // Macro arguments stay tokens: read their identifiers in order.
        let mut segments = Vec::new();
        collect_idents(mac.tokens.clone(), &mut segments);
        self.check(
            segments,
            mac.path
                .segments
                .first()
                .map_or(0, |s| s.ident.span().start().line),
        );
        syn::visit::visit_macro(self, mac);
    }

    fn visit_item_mod(&mut self, module: &'ast syn::ItemMod) {
        if !test_only(&module.attrs) {
            syn::visit::visit_item_mod(self, module);
        }
    }
}

/// Whether an item is compiled for tests only (`#[cfg(test)]`).
pub(crate) fn test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|attr| {
        attr.path().is_ident("cfg")
            && attr
                .parse_args::<syn::Path>()
                .is_ok_and(|cfg| cfg.is_ident("test"))
    })
}

/// The identifiers of a token stream, with `::` kept adjacent so paths read as paths.
fn collect_idents(tokens: proc_macro2::TokenStream, out: &mut Vec<String>) {
    for token in tokens {
        match token {
            proc_macro2::TokenTree::Ident(ident) => out.push(ident.to_string()),
            proc_macro2::TokenTree::Group(group) => {
                out.push(String::new());
                collect_idents(group.stream(), out);
                out.push(String::new());
            }
            proc_macro2::TokenTree::Punct(punct) if punct.as_char() == ':' => {}
            proc_macro2::TokenTree::Punct(_) | proc_macro2::TokenTree::Literal(_) => {
                out.push(String::new());
            }
        }
    }
}

/// Where `source` names an HTTP client.
fn clients_in(source: &str) -> Vec<String> {
    let file = syn::parse_file(source).expect("Rust source");
    let mut finder = Finder::default();
    finder.visit_file(&file);
    finder.found
}

/// The Rust files of `dir` that are not test code (`tests.rs` files, `tests/` directories), sorted.
pub(crate) fn production_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("a readable source directory")
        .map(|e| e.expect("a directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n != "tests") {
                production_files(&path, out);
            }
        } else if path.extension().is_some_and(|e| e == "rs")
            && path.file_name().is_some_and(|n| n != "tests.rs")
        {
            out.push(path);
        }
    }
}

#[test]
fn no_code_in_src_builds_an_http_client_but_the_fenced_constructor() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    production_files(&root.join("src"), &mut files);
    assert!(files.len() > 50, "the sources were found");
    let mut outside = Vec::new();
    let mut in_fence = 0;
    for file in files {
        let relative = file.strip_prefix(root).expect("under the root");
        let source = std::fs::read_to_string(&file).expect("a readable source file");
        let found = clients_in(&source);
        if relative == Path::new(FENCED_CONSTRUCTOR) {
            in_fence += found.len();
        } else {
            outside.extend(
                found
                    .into_iter()
                    .map(|f| format!("{}:{f}", relative.display())),
            );
        }
    }
    assert!(
        outside.is_empty(),
        "HTTP clients built outside {FENCED_CONSTRUCTOR}, where no fence checks their \
         addresses; build them with registry::fence::FencedClient:\n{}",
        outside.join("\n")
    );
    assert!(in_fence > 0, "the fenced constructor builds the client");
}

#[test]
fn the_finder_sees_every_way_of_naming_a_client() {
    for built in [
        "fn f() { let _ = reqwest::Client::new(); }",
        "fn f() { let _ = reqwest::Client::builder().build(); }",
        "use reqwest::Client; fn f() { let _ = Client::default(); }",
        "use reqwest::{Body, ClientBuilder};",
        "use reqwest as http; fn f() { let _ = http::Client::new(); }",
        "use reqwest::*;",
        "async fn f() { let _ = reqwest::get(\"https://x\").await; }",
        "fn f() { tokio::spawn(async { reqwest::Client::new() }); }",
        "fn f() { let _ = hyper_util::client::legacy::Client::builder(exec); }",
        "use hyper::client::conn::http1;",
        "fn f() { let _ = vec![reqwest::blocking::Client::new()]; }",
    ] {
        assert!(!clients_in(built).is_empty(), "not seen: {built}");
    }
    for fine in [
        "use reqwest::{Body, Method, Response, Url};",
        "fn f(b: reqwest::RequestBuilder) -> reqwest::RequestBuilder { b }",
        "#[cfg(test)] mod tests { fn f() { let _ = reqwest::Client::new(); } }",
        "fn f(c: &FencedClient) { c.request(Method::GET, url); }",
    ] {
        assert!(clients_in(fine).is_empty(), "seen: {fine}");
    }
}
