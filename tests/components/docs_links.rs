//! Every relative link in the documentation resolves: README.md, CONTRIBUTING.md, docs/*.md,
//! docs/decisions/*.md and the chart's README. A link's file must exist, and its `#anchor` must name a heading of the
//! target (or of the page itself) as GitHub spells heading anchors: lowercase, spaces to `-`,
//! punctuation dropped, a repeated heading's anchor suffixed `-1`, `-2`, …; or an HTML `id`/`name`.
//! Links with a scheme (`https:`, `mailto:`) are not followed.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};

use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The documentation, by path relative to the repository.
fn documents() -> BTreeMap<PathBuf, String> {
    let mut paths: Vec<PathBuf> = ["README.md", "CONTRIBUTING.md", "charts/ocifit/README.md"]
        .iter()
        .map(PathBuf::from)
        .collect();
    for folder in ["docs", "docs/decisions"] {
        for entry in std::fs::read_dir(root().join(folder)).expect("a docs folder") {
            let path = entry.expect("a docs entry").path();
            if path.extension().is_some_and(|e| e == "md") {
                let name = path.file_name().expect("a file name");
                paths.push(Path::new(folder).join(name));
            }
        }
    }
    paths
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(root().join(&path))
                .unwrap_or_else(|err| panic!("{}: {err}", path.display()));
            (path, text)
        })
        .collect()
}

/// What GitHub's Markdown reads beyond CommonMark.
fn gfm() -> Options {
    Options::ENABLE_TABLES
        | Options::ENABLE_STRIKETHROUGH
        | Options::ENABLE_TASKLISTS
        | Options::ENABLE_FOOTNOTES
        | Options::ENABLE_GFM
}

/// GitHub's anchor for a heading's text.
fn slug(heading: &str) -> String {
    heading
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// A page's anchors: its headings' (repeats numbered) and its HTML `id`s and `name`s.
fn anchors(markdown: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut heading: Option<String> = None;
    for event in Parser::new_ext(markdown, gfm()) {
        match event {
            Event::Start(Tag::Heading { .. }) => heading = Some(String::new()),
            Event::Text(text) | Event::Code(text) => {
                if let Some(heading) = heading.as_mut() {
                    heading.push_str(&text);
                }
            }
            Event::End(TagEnd::Heading(_)) => {
                let base = slug(&heading.take().unwrap_or_default());
                let count = seen.entry(base.clone()).or_insert(0);
                let anchor = match *count {
                    0 => base.clone(),
                    n => format!("{base}-{n}"),
                };
                *count += 1;
                out.insert(anchor);
            }
            Event::Html(html) | Event::InlineHtml(html) => {
                for attribute in ["id=\"", "name=\""] {
                    for (at, _) in html.match_indices(attribute) {
                        let rest = &html[at + attribute.len()..];
                        out.extend(rest.split('"').next().map(str::to_owned));
                    }
                }
            }
            _ => {}
        }
    }
    out
}

/// The link and image targets of a page, outside code.
fn links(markdown: &str) -> Vec<String> {
    Parser::new_ext(markdown, gfm())
        .filter_map(|event| match event {
            Event::Start(Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. }) => {
                Some(dest_url.into_string())
            }
            _ => None,
        })
        .collect()
}

/// `dir/../x` → `x`, without touching the file system.
fn normalise(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// Each relative link of `pages` that does not resolve, as `page: target (why)`. `exists` says
/// whether a path (relative to the repository) that is no page of `pages` exists.
fn broken(pages: &BTreeMap<PathBuf, String>, exists: impl Fn(&Path) -> bool) -> Vec<String> {
    let page_anchors: BTreeMap<&PathBuf, BTreeSet<String>> = pages
        .iter()
        .map(|(path, text)| (path, anchors(text)))
        .collect();
    let mut out = Vec::new();
    for (page, text) in pages {
        for target in links(text) {
            if target.contains(':') || target.starts_with('/') {
                continue;
            }
            let (file, anchor) = match target.split_once('#') {
                Some((file, anchor)) => (file, Some(anchor)),
                None => (target.as_str(), None),
            };
            let resolved = if file.is_empty() {
                page.clone()
            } else {
                normalise(&page.parent().unwrap_or(Path::new("")).join(file))
            };
            let known = page_anchors.get(&resolved);
            if known.is_none() && !exists(&resolved) {
                out.push(format!("{}: {target} (no such file)", page.display()));
                continue;
            }
            let Some(anchor) = anchor else { continue };
            match known {
                Some(anchors) if anchors.contains(anchor) => {}
                Some(_) => out.push(format!(
                    "{}: {target} (no heading of {} has the anchor #{anchor})",
                    page.display(),
                    resolved.display()
                )),
                // An anchor into a file that is not one of the pages (source code, YAML) is a
                // line or nothing GitHub checks.
                None if resolved.extension().is_some_and(|e| e == "md") => out.push(format!(
                    "{}: {target} (a page this test does not read)",
                    page.display()
                )),
                None => {}
            }
        }
    }
    out
}

#[test]
fn every_relative_link_and_anchor_in_the_documentation_resolves() {
    let pages = documents();
    let broken = broken(&pages, |path| root().join(path).exists());
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn a_broken_anchor_or_file_is_reported_and_github_anchors_are_accepted() {
    let pages = BTreeMap::from([
        (
            PathBuf::from("docs/a.md"),
            "# Page A\n\n## The step contract (the oras-operator's)\n\n## Notes\n\n## Notes\n\n\
             [ok](#notes-1) [ok](b.md#status-and-conditions) [ok](../src/x.rs) \
             [ok](#the-step-contract-the-oras-operators) [ok](https://example.com/#x) \
             `[in code](#nowhere)`\n\n\
             [bad](#the-step-contract-unchanged-from-the-oras-operator) [bad](b.md#status) \
             [bad](missing.md)\n"
                .to_owned(),
        ),
        (
            PathBuf::from("docs/b.md"),
            "# B\n\n### Status and `conditions`\n".to_owned(),
        ),
    ]);
    let broken = broken(&pages, |path| path == Path::new("src/x.rs"));
    assert_eq!(
        broken,
        [
            "docs/a.md: #the-step-contract-unchanged-from-the-oras-operator (no heading of \
             docs/a.md has the anchor #the-step-contract-unchanged-from-the-oras-operator)",
            "docs/a.md: b.md#status (no heading of docs/b.md has the anchor #status)",
            "docs/a.md: missing.md (no such file)",
        ]
    );
    assert_eq!(
        slug("Why: RBAC, and `kubectl` (v1.2)!"),
        "why-rbac-and-kubectl-v12"
    );
}
