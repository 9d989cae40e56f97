//! Schema descriptions reflowed into paragraphs. They come from doc comments, wrapped at 100
//! columns for the source; `kubectl explain` prints every newline, so each wrapped line would read
//! as a line of its own. A paragraph (lines up to a blank line) becomes one line; a line opening a
//! list item (`- `, `* `, `1. `) keeps its own line.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};

/// Reflows the description of every schema in every version of `crd`.
pub(super) fn reflow_crd(crd: &mut CustomResourceDefinition) {
    for version in &mut crd.spec.versions {
        if let Some(schema) = version
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
        {
            reflow_schema(schema);
        }
    }
}

fn reflow_schema(schema: &mut JSONSchemaProps) {
    if let Some(description) = schema.description.as_mut() {
        *description = reflow(description);
    }
    let children = schema
        .properties
        .iter_mut()
        .flat_map(|p| p.values_mut())
        .chain(schema.all_of.iter_mut().flatten())
        .chain(schema.any_of.iter_mut().flatten())
        .chain(schema.one_of.iter_mut().flatten())
        .chain(schema.not.as_deref_mut());
    let items = match schema.items.as_mut() {
        Some(JSONSchemaPropsOrArray::Schema(one)) => vec![one.as_mut()],
        Some(JSONSchemaPropsOrArray::Schemas(many)) => many.iter_mut().collect(),
        None => Vec::new(),
    };
    let additional = match schema.additional_properties.as_mut() {
        Some(JSONSchemaPropsOrBool::Schema(one)) => Some(one.as_mut()),
        _ => None,
    };
    for child in children.chain(items).chain(additional) {
        reflow_schema(child);
    }
}

/// One line per paragraph and per list item; blank lines between paragraphs kept.
pub(super) fn reflow(text: &str) -> String {
    text.split("\n\n")
        .map(|paragraph| {
            let mut joined = String::new();
            for line in paragraph.lines().map(str::trim_end) {
                if joined.is_empty() {
                    joined.push_str(line);
                } else if opens_item(line) {
                    joined.push('\n');
                    joined.push_str(line);
                } else {
                    joined.push(' ');
                    joined.push_str(line.trim_start());
                }
            }
            joined
        })
        .collect::<Vec<_>>()
        .join("\n\n")
}

fn opens_item(line: &str) -> bool {
    let line = line.trim_start();
    let numbered = line
        .split_once(". ")
        .is_some_and(|(n, _)| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()));
    line.starts_with("- ") || line.starts_with("* ") || numbered
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrapped_lines_join_into_one_paragraph_and_paragraphs_stay_apart() {
        let text = "Settings per architecture: tolerations to add and a\nscheduling preference.\n\nAbsent: none.";
        assert_eq!(
            reflow(text),
            "Settings per architecture: tolerations to add and a scheduling preference.\n\nAbsent: none."
        );
    }

    #[test]
    fn list_items_keep_their_own_lines() {
        let text = "Either:\n- a tag, or\n  its digest;\n- nothing.\n1. first\n2. second";
        assert_eq!(
            reflow(text),
            "Either:\n- a tag, or its digest;\n- nothing.\n1. first\n2. second"
        );
    }

    /// Every description in `schema` and beneath it.
    fn descriptions(schema: &JSONSchemaProps, out: &mut Vec<String>) {
        out.extend(schema.description.clone());
        for child in schema.properties.iter().flat_map(|p| p.values()) {
            descriptions(child, out);
        }
        if let Some(JSONSchemaPropsOrArray::Schema(item)) = &schema.items {
            descriptions(item, out);
        }
        if let Some(JSONSchemaPropsOrBool::Schema(value)) = &schema.additional_properties {
            descriptions(value, out);
        }
    }

    #[test]
    fn the_committed_crds_describe_every_field_in_paragraphs_not_wrapped_lines() {
        for name in [
            "artifactcaches.ocifit.io",
            "imageselectionpolicies.ocifit.io",
            "placementpolicies.ocifit.io",
        ] {
            let path = format!("{}/crds/{name}.yaml", env!("CARGO_MANIFEST_DIR"));
            let text = std::fs::read_to_string(&path).expect("a committed CRD");
            let crd: CustomResourceDefinition = serde_saphyr::from_str(&text).expect("a CRD");
            let schema = crd.spec.versions[0]
                .schema
                .as_ref()
                .and_then(|s| s.open_api_v3_schema.as_ref())
                .expect("a schema");
            let mut all = Vec::new();
            descriptions(schema, &mut all);
            assert!(all.len() > 20, "{name}: descriptions read: {}", all.len());
            for description in all {
                assert_eq!(
                    reflow(&description),
                    description,
                    "{name}: a description still wrapped as its doc comment was"
                );
            }
        }
    }
}
