//! Schema bounds on everything a tenant writes into ocifit's CRDs: in every `spec`, a string
//! without a `maxLength` (and no `enum`) gets [`STRING`], a list without `maxItems` [`ITEMS`], a
//! map without `maxProperties` [`PROPERTIES`] and a rule bounding its keys to [`KEY`], a
//! quantity (int-or-string) [`QUANTITY`]. The apiserver then refuses an object past them, naming
//! the field, before ocifit's watches (every replica) hold it. Bounds the types set themselves
//! stay; the status is ocifit's own writing and is left as it is.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
    ValidationRule,
};

/// The longest string: an image reference with a tag and a digest (a 255-byte name, a 128-byte
/// tag, a sha512 digest) fits.
pub(super) const STRING: i64 = 1024;
/// The longest map key: a qualified label key (a 253-byte DNS prefix, `/`, a 63-byte name).
pub(super) const KEY: i64 = 317;
/// The longest quantity (`resources`, sizes).
pub(super) const QUANTITY: i64 = 64;
/// The most items in a list.
pub(super) const ITEMS: i64 = 64;
/// The most entries in a map.
pub(super) const PROPERTIES: i64 = 64;

/// Bounds the `spec` of every version of `crd`.
pub(super) fn bound_crd(crd: &mut CustomResourceDefinition) {
    for version in &mut crd.spec.versions {
        let spec = version
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
            .and_then(|s| s.properties.as_mut())
            .and_then(|p| p.get_mut("spec"));
        if let Some(spec) = spec {
            bound_schema(spec);
        }
    }
}

fn bound_schema(schema: &mut JSONSchemaProps) {
    match schema.type_.as_deref() {
        Some("string") if schema.enum_.is_none() => {
            schema.max_length.get_or_insert(STRING);
        }
        Some("array") => {
            schema.max_items.get_or_insert(ITEMS);
        }
        Some("object")
            if matches!(
                schema.additional_properties,
                Some(JSONSchemaPropsOrBool::Schema(_))
            ) =>
        {
            if schema.max_properties.is_none() {
                schema.max_properties = Some(PROPERTIES);
            }
            schema
                .x_kubernetes_validations
                .get_or_insert_default()
                .push(ValidationRule {
                    rule: format!("self.all(k, size(k) <= {KEY})"),
                    message: Some(format!("keys must be at most {KEY} characters")),
                    ..ValidationRule::default()
                });
        }
        None if schema.x_kubernetes_int_or_string == Some(true) => {
            schema.max_length.get_or_insert(QUANTITY);
        }
        _ => {}
    }
    let children = schema
        .properties
        .iter_mut()
        .flat_map(|p| p.values_mut())
        .chain(schema.all_of.iter_mut().flatten())
        .chain(schema.any_of.iter_mut().flatten())
        .chain(schema.one_of.iter_mut().flatten());
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
        bound_schema(child);
    }
}

#[cfg(test)]
mod tests {
    use kube::CustomResourceExt;

    use super::*;
    use crate::api::{ArtifactCache, ImageSelectionPolicy, PlacementPolicy};

    /// Where under `schema` a string, list, map or quantity has no bound.
    fn unbounded(schema: &JSONSchemaProps, path: &str, found: &mut Vec<String>) {
        let missing = match schema.type_.as_deref() {
            Some("string") => schema.max_length.is_none() && schema.enum_.is_none(),
            Some("array") => schema.max_items.is_none(),
            Some("object") => {
                matches!(
                    schema.additional_properties,
                    Some(JSONSchemaPropsOrBool::Schema(_))
                ) && schema.max_properties.is_none()
            }
            _ => schema.x_kubernetes_int_or_string == Some(true) && schema.max_length.is_none(),
        };
        if missing {
            found.push(path.to_owned());
        }
        for (name, child) in schema.properties.iter().flatten() {
            unbounded(child, &format!("{path}.{name}"), found);
        }
        if let Some(JSONSchemaPropsOrArray::Schema(item)) = &schema.items {
            unbounded(item, &format!("{path}[]"), found);
        }
        if let Some(JSONSchemaPropsOrBool::Schema(value)) = &schema.additional_properties {
            unbounded(value, &format!("{path}{{}}"), found);
        }
    }

    fn spec_of(crd: &CustomResourceDefinition) -> &JSONSchemaProps {
        crd.spec.versions[0]
            .schema
            .as_ref()
            .and_then(|s| s.open_api_v3_schema.as_ref())
            .and_then(|s| s.properties.as_ref())
            .and_then(|p| p.get("spec"))
            .unwrap()
    }

    #[test]
    fn every_string_list_map_and_quantity_a_tenant_writes_is_bounded() {
        for mut crd in [
            ImageSelectionPolicy::crd(),
            PlacementPolicy::crd(),
            ArtifactCache::crd(),
        ] {
            let mut before = Vec::new();
            unbounded(spec_of(&crd), "spec", &mut before);
            assert!(!before.is_empty(), "the types alone leave some unbounded");
            bound_crd(&mut crd);
            let mut after = Vec::new();
            unbounded(spec_of(&crd), "spec", &mut after);
            assert_eq!(after, Vec::<String>::new(), "{:?}", crd.metadata.name);
        }
    }

    #[test]
    fn a_types_own_bound_is_kept() {
        let mut crd = ArtifactCache::crd();
        bound_crd(&mut crd);
        let spec = spec_of(&crd).properties.as_ref().unwrap();
        assert_eq!(spec["image"].max_length, Some(512));
        assert_eq!(spec["tolerations"].max_items, Some(16));
        assert_eq!(spec["nodeSelector"].max_properties, Some(16));
        assert_eq!(spec["endpoint"].max_length, Some(253));
    }
}
