//! Every watch holds only what ocifit reads: each kube watch in `src/` (a call of `watcher` or
//! `metadata_watcher`, test code left out as in `outbound.rs`) has its row in `docs/security.md`'s
//! table "What each watch holds", naming its file, the kind it watches and how it is trimmed. A new
//! watch fails here until its author adds the row, and so thinks about what it holds.

use std::collections::HashMap;
use std::path::Path;

use syn::visit::Visit;

use super::outbound::{production_files, test_only};

/// The functions that start a kube watch.
const WATCH_FUNCTIONS: &[&str] = &["watcher", "metadata_watcher"];

/// The heading of the table in `docs/security.md`.
const TABLE_HEADING: &str = "### What each watch holds";

/// A watch in a source file: the line of its call and the kind it watches (`?` when the finder
/// cannot tell).
#[derive(Debug, PartialEq)]
struct Watch {
    line: usize,
    kind: String,
}

#[derive(Default)]
struct Finder {
    /// The `Api<K>` variables of the function being read, with their `K`.
    apis: HashMap<String, String>,
    found: Vec<Watch>,
}

/// A type as written, without spaces: `PartialObjectMeta<Namespace>`.
fn type_name(ty: &syn::Type) -> String {
    match ty {
        syn::Type::Path(path) => path_name(&path.path),
        _ => "?".to_owned(),
    }
}

fn path_name(path: &syn::Path) -> String {
    let segments: Vec<String> = path
        .segments
        .iter()
        .map(|segment| match &segment.arguments {
            syn::PathArguments::AngleBracketed(args) => {
                format!("{}<{}>", segment.ident, generic_types(args).join(","))
            }
            _ => segment.ident.to_string(),
        })
        .collect();
    segments.join("::")
}

fn generic_types(args: &syn::AngleBracketedGenericArguments) -> Vec<String> {
    args.args
        .iter()
        .filter_map(|arg| match arg {
            syn::GenericArgument::Type(ty) => Some(type_name(ty)),
            _ => None,
        })
        .collect()
}

/// The `K` of a path through `Api<K>` (`Api<K>`, `Api::<K>::all`).
fn api_kind(path: &syn::Path) -> Option<String> {
    path.segments
        .iter()
        .find(|segment| segment.ident == "Api")
        .and_then(|segment| match &segment.arguments {
            syn::PathArguments::AngleBracketed(args) => generic_types(args).into_iter().next(),
            _ => None,
        })
}

fn type_api_kind(ty: &syn::Type) -> Option<String> {
    match ty {
        syn::Type::Path(path) => api_kind(&path.path),
        syn::Type::Reference(reference) => type_api_kind(&reference.elem),
        _ => None,
    }
}

impl Finder {
    /// The kind the watch's first argument, an `Api`, names.
    fn kind_of(&self, api: Option<&syn::Expr>) -> String {
        let kind = match api {
            Some(syn::Expr::Call(call)) => match call.func.as_ref() {
                syn::Expr::Path(func) => api_kind(&func.path),
                _ => None,
            },
            Some(syn::Expr::Path(variable)) => variable
                .path
                .get_ident()
                .and_then(|ident| self.apis.get(&ident.to_string()).cloned()),
            _ => None,
        };
        kind.unwrap_or_else(|| "?".to_owned())
    }

    fn function(&mut self, inputs: &syn::punctuated::Punctuated<syn::FnArg, syn::Token![,]>) {
        self.apis.clear();
        for input in inputs {
            if let syn::FnArg::Typed(typed) = input
                && let syn::Pat::Ident(name) = typed.pat.as_ref()
                && let Some(kind) = type_api_kind(&typed.ty)
            {
                self.apis.insert(name.ident.to_string(), kind);
            }
        }
    }
}

impl<'ast> Visit<'ast> for Finder {
    fn visit_item_fn(&mut self, item: &'ast syn::ItemFn) {
        self.function(&item.sig.inputs);
        syn::visit::visit_item_fn(self, item);
    }

    fn visit_impl_item_fn(&mut self, item: &'ast syn::ImplItemFn) {
        self.function(&item.sig.inputs);
        syn::visit::visit_impl_item_fn(self, item);
    }

    fn visit_local(&mut self, local: &'ast syn::Local) {
        let (name, kind) = match &local.pat {
            syn::Pat::Type(typed) => (typed.pat.as_ref(), type_api_kind(&typed.ty)),
            pat => (
                pat,
                local
                    .init
                    .as_ref()
                    .and_then(|init| match init.expr.as_ref() {
                        syn::Expr::Call(call) => match call.func.as_ref() {
                            syn::Expr::Path(func) => api_kind(&func.path),
                            _ => None,
                        },
                        _ => None,
                    }),
            ),
        };
        if let (syn::Pat::Ident(name), Some(kind)) = (name, kind) {
            self.apis.insert(name.ident.to_string(), kind);
        }
        syn::visit::visit_local(self, local);
    }

    fn visit_expr_call(&mut self, call: &'ast syn::ExprCall) {
        if let syn::Expr::Path(func) = call.func.as_ref()
            && let Some(last) = func.path.segments.last()
            && WATCH_FUNCTIONS.iter().any(|name| last.ident == name)
        {
            self.found.push(Watch {
                line: last.ident.span().start().line,
                kind: self.kind_of(call.args.first()),
            });
        }
        syn::visit::visit_expr_call(self, call);
    }

    fn visit_item_mod(&mut self, module: &'ast syn::ItemMod) {
        if !test_only(&module.attrs) {
            syn::visit::visit_item_mod(self, module);
        }
    }
}

/// The watches `source` starts, outside test code.
fn watches_in(source: &str) -> Vec<Watch> {
    let file = syn::parse_file(source).expect("Rust source");
    let mut finder = Finder::default();
    finder.visit_file(&file);
    finder.found
}

/// The table's rows as `(file, kind)`: the first two cells, each a code span.
fn table_rows(security: &str) -> Vec<(String, String)> {
    let Some((_, after)) = security.split_once(TABLE_HEADING) else {
        panic!("docs/security.md has no section {TABLE_HEADING:?}");
    };
    let code = |cell: &str| cell.trim().trim_matches('`').to_owned();
    after
        .lines()
        .skip_while(|line| !line.starts_with('|'))
        .take_while(|line| line.starts_with('|'))
        .filter_map(|line| {
            let mut cells = line.split('|').skip(1);
            let file = cells.next()?;
            let kind = cells.next()?;
            file.trim()
                .starts_with("`src/")
                .then(|| (code(file), code(kind)))
        })
        .collect()
}

#[test]
fn every_watch_in_src_has_its_row_in_the_table_of_what_each_watch_holds() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut rows = table_rows(
        &std::fs::read_to_string(root.join("docs/security.md")).expect("docs/security.md"),
    );
    assert!(!rows.is_empty(), "the table has rows");
    let mut files = Vec::new();
    production_files(&root.join("src"), &mut files);
    let mut missing = Vec::new();
    let mut seen = 0;
    for file in files {
        let relative = file.strip_prefix(root).expect("under the root");
        let relative = relative.display().to_string();
        let source = std::fs::read_to_string(&file).expect("a readable source file");
        for watch in watches_in(&source) {
            seen += 1;
            match rows
                .iter()
                .position(|(f, k)| *f == relative && *k == watch.kind)
            {
                Some(row) => {
                    rows.remove(row);
                }
                None => missing.push(format!("{relative}:{}: {}", watch.line, watch.kind)),
            }
        }
    }
    assert!(seen > 5, "the watches were found");
    assert!(
        missing.is_empty(),
        "watches without a row in docs/security.md \"{TABLE_HEADING}\" (file, kind and how it is \
         trimmed to what ocifit reads; name the kind with `Api::<K>` where it shows `?`):\n{}",
        missing.join("\n")
    );
    assert!(
        rows.is_empty(),
        "rows in docs/security.md \"{TABLE_HEADING}\" for watches no longer in src/: {rows:?}"
    );
}

#[test]
fn the_finder_sees_each_watch_and_its_kind_and_skips_test_code() {
    let source = r#"
use kube::runtime::watcher;
fn pods(client: Client) {
    let _ = watcher(Api::<Pod>::all(client), watcher::Config::default());
}
fn lease(client: Client) {
    let leases: Api<Lease> = Api::namespaced(client, "ns");
    let _ = kube::runtime::watcher(leases, by_name);
}
fn by_name<K>(api: Api<K>) {
    let _ = metadata_watcher(api, config);
}
fn namespaces(client: Client) {
    let _ = watcher(Api::<PartialObjectMeta<Namespace>>::all(client), config);
}
#[cfg(test)]
mod tests {
    fn fake(client: Client) {
        let _ = watcher(Api::<Secret>::all(client), config);
    }
}
"#;
    let kinds: Vec<(usize, String)> = watches_in(source)
        .into_iter()
        .map(|watch| (watch.line, watch.kind))
        .collect();
    assert_eq!(
        kinds,
        [
            (4, "Pod".to_owned()),
            (8, "Lease".to_owned()),
            (11, "K".to_owned()),
            (14, "PartialObjectMeta<Namespace>".to_owned()),
        ]
    );
}

#[test]
fn the_table_is_read_from_its_section_only() {
    let doc = "| `src/a.rs` | `Pod` | before |\n\n### What each watch holds\n\nText.\n\n\
               | File | Kind | Trimmed by |\n|---|---|---|\n| `src/b.rs` | `Lease` | name |\n\n\
               | `src/c.rs` | `Pod` | after |\n";
    assert_eq!(
        table_rows(doc),
        [("src/b.rs".to_owned(), "Lease".to_owned())]
    );
}
