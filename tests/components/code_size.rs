//! The size rules of CONTRIBUTING hold in `src/` and `core/src/`: no file over 400 lines of code, no function over
//! 100 lines, no comment over its limit, tests apart (a `tests.rs` file, a file under a `tests/`
//! folder, a `#[cfg(test)]` module, a `#[test]` function). Lines of code are the lines that are
//! neither blank nor only a comment; a function's lines run from its signature to its closing brace.
//! Read with `syn`, so a brace inside a string or a comment never counts.

use std::path::{Path, PathBuf};

use syn::visit::Visit;

const MAX_FILE_LINES: usize = 400;
const MAX_FUNCTION_LINES: usize = 100;
const MAX_COMMENT_LINES: usize = 3;
const MAX_USER_DOC_LINES: usize = 6;
const MAX_MODULE_DOC_LINES: usize = 8;
const MEASUREMENT_UNITS: [&str; 7] = ["ms", "µs", "KiB", "MiB", "GiB", "req/s", "×"];
/// Types whose docs are user-facing text: `--help` (clap) and `kubectl explain` (schemars).
const USER_FACING_DERIVES: [&str; 5] = ["Parser", "Args", "Subcommand", "ValueEnum", "JsonSchema"];

fn is_test_file(src: &Path, file: &Path) -> bool {
    let relative = file.strip_prefix(src).unwrap_or(file);
    relative.file_name().is_some_and(|n| n == "tests.rs")
        || relative.iter().any(|part| part == "tests")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries =
        std::fs::read_dir(dir).unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn is_cfg_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && a.parse_args::<syn::Meta>()
                .is_ok_and(|m| m.path().is_ident("test"))
    })
}

fn is_test_fn(attrs: &[syn::Attribute]) -> bool {
    attrs
        .iter()
        .any(|a| a.path().segments.last().is_some_and(|s| s.ident == "test"))
}

/// What one file holds: its functions' lengths, the line ranges of its test modules and the lines
/// of its user-facing docs.
#[derive(Default)]
struct Sizes {
    functions: Vec<(String, usize, usize)>,
    test_lines: Vec<(usize, usize)>,
    user_docs: Vec<usize>,
}

fn derives_user_facing(attrs: &[syn::Attribute]) -> bool {
    let parse = syn::punctuated::Punctuated::<syn::Path, syn::Token![,]>::parse_terminated;
    attrs
        .iter()
        .filter(|a| a.path().is_ident("derive"))
        .filter_map(|a| a.parse_args_with(parse).ok())
        .flatten()
        .any(|path| {
            let name = path.segments.last().map(|s| s.ident.to_string());
            name.is_some_and(|n| USER_FACING_DERIVES.contains(&n.as_str()))
        })
}

impl Sizes {
    fn function(&mut self, sig: &syn::Signature, attrs: &[syn::Attribute], body: &syn::Block) {
        if !is_test_fn(attrs) {
            let start = sig.fn_token.span.start().line;
            let end = body.brace_token.span.close().end().line;
            self.functions
                .push((sig.ident.to_string(), start, end - start + 1));
        }
    }

    fn note_user_docs<'a>(&mut self, attrs: impl IntoIterator<Item = &'a syn::Attribute>) {
        let docs = attrs.into_iter().filter(|a| a.path().is_ident("doc"));
        self.user_docs
            .extend(docs.map(|a| a.pound_token.span.start().line));
    }

    fn in_tests(&self, line: usize) -> bool {
        self.test_lines
            .iter()
            .any(|(a, b)| (*a..=*b).contains(&line))
    }
}

impl<'ast> Visit<'ast> for Sizes {
    fn visit_item_mod(&mut self, item: &'ast syn::ItemMod) {
        if let (true, Some((brace, _))) = (is_cfg_test(&item.attrs), &item.content) {
            let first = item.attrs.first().map(|a| a.pound_token.span);
            let start = first.unwrap_or(item.mod_token.span).start().line;
            self.test_lines.push((start, brace.span.close().end().line));
        } else {
            syn::visit::visit_item_mod(self, item);
        }
    }

    fn visit_item_struct(&mut self, item: &'ast syn::ItemStruct) {
        if derives_user_facing(&item.attrs) {
            self.note_user_docs(&item.attrs);
            self.note_user_docs(item.fields.iter().flat_map(|f| &f.attrs));
        }
        syn::visit::visit_item_struct(self, item);
    }

    fn visit_item_enum(&mut self, item: &'ast syn::ItemEnum) {
        if derives_user_facing(&item.attrs) {
            self.note_user_docs(&item.attrs);
            for variant in &item.variants {
                self.note_user_docs(&variant.attrs);
                self.note_user_docs(variant.fields.iter().flat_map(|f| &f.attrs));
            }
        }
        syn::visit::visit_item_enum(self, item);
    }

    fn visit_item_fn(&mut self, item: &'ast syn::ItemFn) {
        self.function(&item.sig, &item.attrs, &item.block);
        syn::visit::visit_item_fn(self, item);
    }

    fn visit_impl_item_fn(&mut self, item: &'ast syn::ImplItemFn) {
        self.function(&item.sig, &item.attrs, &item.block);
        syn::visit::visit_impl_item_fn(self, item);
    }

    fn visit_trait_item_fn(&mut self, item: &'ast syn::TraitItemFn) {
        if let Some(body) = &item.default {
            self.function(&item.sig, &item.attrs, body);
        }
        syn::visit::visit_trait_item_fn(self, item);
    }
}

/// Lines neither blank nor only a comment, outside the given (1-based, inclusive) line ranges.
fn lines_of_code(text: &str, skip: &[(usize, usize)]) -> usize {
    text.lines()
        .enumerate()
        .filter(|(i, _)| !skip.iter().any(|(a, b)| (*a..=*b).contains(&(i + 1))))
        .map(|(_, line)| line.trim())
        .filter(|line| !line.is_empty() && !line.starts_with("//"))
        .count()
}

#[derive(Clone, Copy, PartialEq)]
enum Comment {
    Plain,
    Doc,
    Module,
}

fn comment_kind(line: &str) -> Option<Comment> {
    let line = line.trim_start();
    if line.starts_with("//!") {
        Some(Comment::Module)
    } else if line.starts_with("///") && !line.starts_with("////") {
        Some(Comment::Doc)
    } else {
        line.starts_with("//").then_some(Comment::Plain)
    }
}

/// A number followed by a unit of time, size, rate or ratio, outside `code`.
fn holds_measurement(comment: &str) -> bool {
    comment.split('`').step_by(2).any(|prose| {
        MEASUREMENT_UNITS.iter().any(|unit| {
            prose.match_indices(unit).any(|(at, _)| {
                let before = prose[..at].strip_suffix(' ').unwrap_or(&prose[..at]);
                let after = prose[at + unit.len()..].chars().next();
                before.ends_with(|c: char| c.is_ascii_digit())
                    && !after.is_some_and(char::is_alphanumeric)
            })
        })
    })
}

/// Comment blocks (runs of lines of one kind) over their limit and comment lines holding a
/// measurement, outside test modules, as `line: what`.
fn comment_offences(text: &str, sizes: &Sizes, user_facing_file: bool) -> Vec<String> {
    let mut offences = Vec::new();
    let mut block: Option<(Comment, usize, usize)> = None;
    for (number, line) in (1..).zip(text.lines().chain([""])) {
        let kind = comment_kind(line).filter(|_| !sizes.in_tests(number));
        if kind.is_some() && holds_measurement(line) {
            offences.push(format!(
                "{number}: a measurement (docs/performance.md has them)"
            ));
        }
        match (block, kind) {
            (Some((open, first, length)), Some(kind)) if open == kind => {
                block = Some((open, first, length + 1));
            }
            (closed, kind) => {
                if let Some((open, first, length)) = closed {
                    let user_facing = user_facing_file || sizes.user_docs.contains(&first);
                    let (limit, what) = match open {
                        Comment::Plain => (MAX_COMMENT_LINES, "`//` block"),
                        Comment::Module => (MAX_MODULE_DOC_LINES, "module doc"),
                        Comment::Doc if user_facing => {
                            (MAX_USER_DOC_LINES, "user-facing `///` doc")
                        }
                        Comment::Doc => (MAX_COMMENT_LINES, "`///` doc"),
                    };
                    if length > limit {
                        offences.push(format!("{first}: a {what} of {length} lines, over {limit}"));
                    }
                }
                block = kind.map(|kind| (kind, number, 1));
            }
        }
    }
    offences
}

/// Every file of `src/` and `core/src/` outside tests, with what it holds, by its path in the
/// repository.
fn measured() -> Vec<(PathBuf, String, Sizes)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut measured = Vec::new();
    for dir in ["src", "core/src"] {
        let src = root.join(dir);
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        files.sort();
        measured.extend(
            files
                .into_iter()
                .filter(|file| !is_test_file(&src, file))
                .map(|file| {
                    let text = std::fs::read_to_string(&file)
                        .unwrap_or_else(|e| panic!("reading {}: {e}", file.display()));
                    let syntax = syn::parse_file(&text)
                        .unwrap_or_else(|e| panic!("parsing {}: {e}", file.display()));
                    let mut sizes = Sizes::default();
                    sizes.visit_file(&syntax);
                    let relative = file.strip_prefix(root).unwrap_or(&file).to_path_buf();
                    (relative, text, sizes)
                }),
        );
    }
    measured
}

fn none_over(over: &[String]) {
    assert!(
        over.is_empty(),
        "split by what the parts are (CONTRIBUTING):\n{}",
        over.join("\n")
    );
}

#[test]
fn no_file_in_src_has_more_than_400_lines_of_code_outside_its_tests() {
    let files = measured();
    assert!(files.len() > 100, "src/ was read: {} files", files.len());
    let over: Vec<String> = files
        .iter()
        .map(|(file, text, sizes)| (file, lines_of_code(text, &sizes.test_lines)))
        .filter(|(_, lines)| *lines > MAX_FILE_LINES)
        .map(|(file, lines)| format!("{}: {lines} lines of code", file.display()))
        .collect();
    none_over(&over);
}

#[test]
fn no_function_in_src_is_longer_than_100_lines_outside_tests() {
    let files = measured();
    let counted: usize = files.iter().map(|(_, _, s)| s.functions.len()).sum();
    assert!(counted > 1000, "functions were found: {counted}");
    let over: Vec<String> = files
        .iter()
        .flat_map(|(file, _, sizes)| {
            sizes
                .functions
                .iter()
                .filter(|(_, start, _)| {
                    !sizes
                        .test_lines
                        .iter()
                        .any(|(a, b)| (*a..=*b).contains(start))
                })
                .filter(|(_, _, lines)| *lines > MAX_FUNCTION_LINES)
                .map(move |(name, start, lines)| {
                    format!("{}:{start} {name}: {lines} lines", file.display())
                })
        })
        .collect();
    none_over(&over);
}

/// Comments say why in a line or two (CONTRIBUTING "Comments and errors"): a `//` block or a `///`
/// doc of at most 3 lines, a module's `//!` doc of at most 8; 6 for a `///` doc that is user-facing
/// text: in `src/api/` (CRD descriptions), or on a type deriving one of [`USER_FACING_DERIVES`], its
/// fields or variants. No comment holds a measurement: docs/performance.md has them. Fixtures apart.
#[test]
fn no_comment_in_src_is_over_its_limit_or_holds_a_measurement() {
    let over: Vec<String> = measured()
        .iter()
        .filter(|(file, _, _)| !file.ends_with("fixtures.rs"))
        .flat_map(|(file, text, sizes)| {
            let offences = comment_offences(text, sizes, file.starts_with("src/api"));
            offences
                .into_iter()
                .map(move |offence| format!("{}:{offence}", file.display()))
        })
        .collect();
    assert!(
        over.is_empty(),
        "say why in a line or two; a longer explanation goes to docs/ (CONTRIBUTING):\n{}",
        over.join("\n")
    );
}

#[test]
fn a_long_comment_a_long_module_doc_and_a_measurement_are_found_but_user_facing_docs_are_let_be() {
    let text = format!(
        "{}{}{}#[derive(clap::Args)]\nstruct A {{\n{}    b: u8,\n}}\n",
        "//! m\n".repeat(9),
        "// why\n".repeat(4),
        "/// took 40 ms, `250ms`\nfn f() {}\n",
        "    /// help\n".repeat(6),
    );
    let mut sizes = Sizes::default();
    sizes.visit_file(&syn::parse_file(&text).expect("Rust"));
    assert_eq!(
        comment_offences(&text, &sizes, false),
        [
            "1: a module doc of 9 lines, over 8",
            "14: a measurement (docs/performance.md has them)",
            "10: a `//` block of 4 lines, over 3",
        ]
    );
    assert!(!holds_measurement("/// `250ms` and 3 msgs, arm64"));
}

#[test]
fn a_line_count_skips_blank_lines_comments_and_test_modules() {
    let text =
        "fn a() {\n\n    // why\n    let x = 1;\n}\n#[cfg(test)]\nmod tests {\n    fn t() {}\n}\n";
    assert_eq!(lines_of_code(text, &[]), 7);
    assert_eq!(lines_of_code(text, &[(6, 9)]), 3);
}

#[test]
fn a_long_function_and_a_test_module_are_measured_from_their_first_to_their_last_line() {
    let body = "    let x = 1;\n".repeat(3);
    let text = format!(
        "fn long() {{\n{body}}}\n#[cfg(test)]\nmod tests {{\n    #[test]\n    fn t() {{}}\n}}\n"
    );
    let mut sizes = Sizes::default();
    sizes.visit_file(&syn::parse_file(&text).expect("Rust"));
    assert_eq!(sizes.functions, [("long".to_owned(), 1, 5)]);
    assert_eq!(sizes.test_lines, [(6, 10)]);
}
