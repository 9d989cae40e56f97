//! Label values in snake_case, as Prometheus's conventions have them, from the CamelCase names
//! ocifit's Events and conditions use.

use std::borrow::Cow;

/// `value` in snake_case (`ArtifactNotFound` → `artifact_not_found`, `TLSError` → `tls_error`):
/// the label values of the names ocifit's Events and conditions spell in CamelCase.
pub fn snake_case(value: &str) -> Cow<'_, str> {
    if !value.chars().any(|c| c.is_ascii_uppercase()) {
        return Cow::Borrowed(value);
    }
    let chars: Vec<char> = value.chars().collect();
    let mut out = String::with_capacity(value.len() + 4);
    for (i, &c) in chars.iter().enumerate() {
        if c.is_ascii_uppercase() {
            let previous = i.checked_sub(1).and_then(|p| chars.get(p));
            let next_lower = chars.get(i + 1).is_some_and(char::is_ascii_lowercase);
            let boundary = previous.is_some_and(|p| {
                p.is_ascii_lowercase()
                    || p.is_ascii_digit()
                    || (p.is_ascii_uppercase() && next_lower)
            });
            if boundary {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::snake_case;

    #[test]
    fn camel_case_names_become_snake_case_and_snake_case_stays() {
        for (name, label) in [
            ("Ok", "ok"),
            ("ArtifactError", "artifact_error"),
            ("NodeNameSet", "node_name_set"),
            ("TLSError", "tls_error"),
            ("Step2Held", "step2_held"),
            ("True", "true"),
            ("not_found", "not_found"),
            ("/placement", "/placement"),
        ] {
            assert_eq!(snake_case(name), label, "{name}");
        }
    }
}
