//! The JSON-patch (RFC 6902) operations every feature's admission answer and pod release are
//! built from, one definition: each takes the pointer's tokens unescaped and lets `jsonptr`
//! escape them (`ocifit.io/policy` → `ocifit.io~1policy`), so no feature writes a pointer by hand.

use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, PatchOperation, RemoveOperation, ReplaceOperation};
use serde_json::Value;

/// The pointer made of `tokens`, each escaped.
pub fn pointer<T: AsRef<str>>(tokens: &[T]) -> PointerBuf {
    PointerBuf::from_tokens(tokens.iter().map(AsRef::as_ref))
}

/// Adds `value` at `tokens` (a `-` last token appends to a list).
pub fn add<T: AsRef<str>>(tokens: &[T], value: Value) -> PatchOperation {
    PatchOperation::Add(AddOperation {
        path: pointer(tokens),
        value,
    })
}

/// Replaces what is at `tokens` with `value`.
pub fn replace<T: AsRef<str>>(tokens: &[T], value: Value) -> PatchOperation {
    PatchOperation::Replace(ReplaceOperation {
        path: pointer(tokens),
        value,
    })
}

/// Removes what is at `tokens`.
pub fn remove<T: AsRef<str>>(tokens: &[T]) -> PatchOperation {
    PatchOperation::Remove(RemoveOperation {
        path: pointer(tokens),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_escaped_whether_borrowed_or_owned() {
        let borrowed = add(
            &["metadata", "labels", "ocifit.io/policy"],
            Value::from("x"),
        );
        let owned = add(
            &[
                "metadata".to_owned(),
                "labels".into(),
                "ocifit.io/policy".into(),
            ],
            Value::from("x"),
        );
        assert_eq!(borrowed, owned);
        let json = serde_json::to_value(&borrowed).unwrap();
        assert_eq!(json["path"], "/metadata/labels/ocifit.io~1policy");
        assert_eq!(json["op"], "add");
    }

    #[test]
    fn replace_and_remove_name_their_operation() {
        let ops = [
            replace(&["spec", "containers", "0", "image"], Value::from("a")),
            remove(&["spec", "schedulingGates", "1"]),
        ];
        let json = serde_json::to_value(ops).unwrap();
        assert_eq!(json[0]["op"], "replace");
        assert_eq!(json[0]["path"], "/spec/containers/0/image");
        assert_eq!(json[1]["op"], "remove");
        assert_eq!(json[1]["path"], "/spec/schedulingGates/1");
    }
}
