//! What `ocifit resolve` prints: the decision's answer per class (from [`classes`], exactly what
//! the controller writes into the status), whether each candidate image's platforms were
//! checked, as a table or a stable JSON document.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write as _;

use serde::Serialize;

use super::inputs::Loaded;
use crate::engine::{Explanation, Format, NodeInputs};
use crate::image_selection::{ClassAnswer, PlatformLookup, Platforms, resolve_classes};

/// The JSON document `-o json` prints.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Report {
    /// What was read: the artifact file or reference, or the policy's candidates.
    #[serde(skip)]
    source: String,
    /// The policy evaluated, with `--policy`.
    #[serde(skip_serializing_if = "Option::is_none")]
    policy: Option<String>,
    format: Format,
    /// The artifact manifest's digest, when the artifact came from a registry.
    #[serde(skip_serializing_if = "Option::is_none")]
    digest: Option<String>,
    /// How the format was chosen, when it was detected rather than given.
    #[serde(skip_serializing_if = "Option::is_none")]
    format_detected: Option<&'static str>,
    /// Each candidate image and whether its platforms were checked.
    platforms: Vec<PlatformReport>,
    /// One per class of the nodes that count.
    pub classes: Vec<ClassReport>,
}

#[derive(Debug, Serialize)]
struct PlatformReport {
    image: String,
    /// `checked`, `unreadable` (refused for every class, as the controller would) or
    /// `notChecked` (taken to run anywhere).
    check: &'static str,
    /// The platforms found, or why they were not.
    #[serde(skip_serializing_if = "Option::is_none")]
    note: Option<String>,
}

#[derive(Debug, Serialize)]
pub(crate) struct ClassReport {
    name: String,
    nodes: Vec<String>,
    labels: BTreeMap<String, String>,
    /// The chosen image.
    pub image: Option<String>,
    #[serde(rename = "match")]
    matched: Option<MatchReport>,
    /// Why, in one line (the status row's `reason`).
    reason: String,
    explanation: Explanation,
}

#[derive(Debug, Serialize)]
struct MatchReport {
    index: usize,
    tag: String,
    weight: i32,
    description: String,
}

impl From<ClassAnswer> for ClassReport {
    fn from(answer: ClassAnswer) -> Self {
        let reason = answer.reason();
        let matched = answer.explanation.chosen.as_ref().map(|c| MatchReport {
            index: c.index,
            tag: c.tag.clone(),
            weight: c.weight,
            description: c
                .description
                .clone()
                .or_else(|| c.set.as_ref().and_then(|s| s.description.clone()))
                .unwrap_or_default(),
        });
        ClassReport {
            image: answer.image().map(str::to_owned),
            name: answer.class.name,
            nodes: answer.class.nodes,
            labels: answer.class.labels,
            matched,
            reason,
            explanation: answer.explanation,
        }
    }
}

impl Report {
    /// The answer for `loaded` over `nodes` (those `selector` counts), with `platforms`.
    pub(crate) fn new(
        loaded: &Loaded,
        policy: Option<String>,
        selector: &BTreeMap<String, String>,
        nodes: &[(String, NodeInputs)],
        platforms: &Platforms,
    ) -> Report {
        let answers = resolve_classes(
            &loaded.resolved,
            selector,
            nodes.iter().map(|(name, inputs)| (name.as_str(), inputs)),
            platforms,
        );
        Report {
            source: loaded.source.clone(),
            policy,
            format: loaded.resolved.format,
            digest: loaded.digest.clone(),
            format_detected: loaded.format_detected,
            platforms: platforms
                .iter()
                .map(|(image, lookup)| platform_report(image, lookup))
                .collect(),
            classes: answers.into_iter().map(ClassReport::from).collect(),
        }
    }

    /// The table, under a header saying what was read and what was checked.
    pub(crate) fn table(&self) -> String {
        let mut out = String::new();
        if let Some(policy) = &self.policy {
            let _ = write!(out, "policy {policy}, ");
        }
        let _ = write!(out, "artifact {}", self.source);
        if let Some(digest) = &self.digest {
            let _ = write!(out, " ({digest})");
        }
        let _ = write!(out, " (format {}", self.format);
        if let Some(why) = self.format_detected {
            let _ = write!(out, ", detected: {why}");
        }
        out.push_str(")\n");
        out.push_str(&self.platform_lines());
        out.push('\n');
        let mut table = tabwriter::TabWriter::new(Vec::new()).padding(2);
        let _ = writeln!(table, "CLASS\tNODES\tIMAGE\tWHY\tLABELS");
        for class in &self.classes {
            let labels: Vec<String> = class
                .labels
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            let _ = writeln!(
                table,
                "{}\t{}\t{}\t{}\t{}",
                class.name,
                class.nodes.len(),
                class.image.as_deref().unwrap_or("no match"),
                class.reason,
                labels.join(","),
            );
        }
        let rows = table.into_inner().unwrap_or_default();
        out.push_str(&String::from_utf8_lossy(&rows));
        out
    }

    /// One line for the checked images, one for each image not checked or unreadable.
    fn platform_lines(&self) -> String {
        let mut out = String::new();
        let checked: Vec<&str> = self
            .platforms
            .iter()
            .filter(|p| p.check == "checked")
            .map(|p| p.image.as_str())
            .collect();
        if !checked.is_empty() {
            let _ = writeln!(
                out,
                "platforms checked against the registry: {}",
                checked.join(", ")
            );
        }
        for platform in self.platforms.iter().filter(|p| p.check != "checked") {
            let note = platform.note.as_deref().unwrap_or_default();
            let _ = match platform.check {
                "notChecked" => writeln!(
                    out,
                    "platforms of {} not checked ({note}): taken to run on every node",
                    platform.image
                ),
                _ => writeln!(
                    out,
                    "platforms of {} unreadable ({note}): refused for every class",
                    platform.image
                ),
            };
        }
        out
    }
}

fn platform_report(image: &str, lookup: &PlatformLookup) -> PlatformReport {
    let (check, note) = match lookup {
        PlatformLookup::Known(found) => {
            let found: Vec<String> = found.iter().map(ToString::to_string).collect();
            ("checked", Some(found.join(", ")))
        }
        PlatformLookup::Failed(why) => ("unreadable", Some(why.clone())),
        PlatformLookup::NotChecked(why) => ("notChecked", Some(why.clone())),
    };
    PlatformReport {
        image: image.to_owned(),
        check,
        note,
    }
}
