//! The JSON-patch (RFC 6902) operations every feature's admission answer and pod release are
//! built from, one definition: each takes the pointer's tokens unescaped and lets `jsonptr`
//! escape them (`ocifit.io/policy` → `ocifit.io~1policy`), so no feature writes a pointer by hand.
//! A patch is either operations on JSON values ([`json_patch::Patch`]), or a [`WrittenPatch`]:
//! operations written straight as JSON text from typed values, for a planner whose values are
//! large (a step's helper containers) and would otherwise be built as a tree, written, and dropped.

use json_patch::jsonptr::{PointerBuf, Token};
use json_patch::{AddOperation, Patch, PatchOperation, RemoveOperation, ReplaceOperation};
use serde::Serialize;
use serde_json::Value;

/// The pointer made of `tokens`, each escaped.
pub(super) fn pointer<T: AsRef<str>>(tokens: &[T]) -> PointerBuf {
    PointerBuf::from_tokens(tokens.iter().map(AsRef::as_ref))
}

/// Adds `value` at `tokens` (a `-` last token appends to a list).
pub fn add_op<T: AsRef<str>>(tokens: &[T], value: Value) -> PatchOperation {
    PatchOperation::Add(AddOperation {
        path: pointer(tokens),
        value,
    })
}

/// Replaces what is at `tokens` with `value`.
pub fn replace_op<T: AsRef<str>>(tokens: &[T], value: Value) -> PatchOperation {
    PatchOperation::Replace(ReplaceOperation {
        path: pointer(tokens),
        value,
    })
}

/// Removes what is at `tokens`.
pub fn remove_op<T: AsRef<str>>(tokens: &[T]) -> PatchOperation {
    PatchOperation::Remove(RemoveOperation {
        path: pointer(tokens),
    })
}

/// A patch already written as JSON text: an array of `add` operations, each written from a
/// typed value as it is added.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WrittenPatch {
    json: Vec<u8>,
}

/// One `add` operation as written (the field order `json_patch` writes).
#[derive(Serialize)]
#[serde(bound(serialize = "T: AsRef<str>, V: Serialize"))]
struct Add<'a, T: AsRef<str>, V: ?Sized> {
    op: &'static str,
    path: WrittenPointer<'a, T>,
    value: &'a V,
}

/// A pointer written token by token as `jsonptr` escapes each, without building a
/// [`PointerBuf`] for the one write.
struct WrittenPointer<'a, T>(&'a [T]);

impl<T: AsRef<str>> std::fmt::Display for WrittenPointer<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for token in self.0 {
            f.write_str("/")?;
            f.write_str(Token::new(token.as_ref()).encoded())?;
        }
        Ok(())
    }
}

impl<T: AsRef<str>> Serialize for WrittenPointer<'_, T> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// Room a written patch starts with, enough for a step's helpers and mounts, so the buffer is
/// not copied over as it grows.
const WRITTEN_CAPACITY: usize = 8 * 1024;

impl Default for WrittenPatch {
    fn default() -> Self {
        let mut json = Vec::with_capacity(WRITTEN_CAPACITY);
        json.extend_from_slice(b"[]");
        WrittenPatch { json }
    }
}

impl WrittenPatch {
    /// Adds `value` at `tokens` (a `-` last token appends to a list).
    pub fn add<T: AsRef<str>, V: Serialize + ?Sized>(
        &mut self,
        tokens: &[T],
        value: &V,
    ) -> Result<(), serde_json::Error> {
        // Always a whole array: the closing bracket is moved past each operation written.
        self.json.pop();
        if self.json.len() > 1 {
            self.json.push(b',');
        }
        let written = serde_json::to_writer(
            &mut self.json,
            &Add {
                op: "add",
                path: WrittenPointer(tokens),
                value,
            },
        );
        self.json.push(b']');
        written
    }

    /// The patch's JSON text.
    pub fn as_bytes(&self) -> &[u8] {
        &self.json
    }
}

/// A patch as an answer carries it.
#[derive(Clone, Copy, Debug)]
pub enum Patched<'a> {
    /// Operations on JSON values, written when the answer is.
    Operations(&'a Patch),
    /// Operations written already.
    Written(&'a WrittenPatch),
}

impl<'a> From<&'a Patch> for Patched<'a> {
    fn from(patch: &'a Patch) -> Self {
        Patched::Operations(patch)
    }
}

impl<'a> From<&'a WrittenPatch> for Patched<'a> {
    fn from(patch: &'a WrittenPatch) -> Self {
        Patched::Written(patch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_written_patch_reads_back_as_the_operations_it_was_written_from() {
        let mut written = WrittenPatch::default();
        assert_eq!(written.as_bytes(), b"[]");
        let labels = std::collections::BTreeMap::from([("a/b", "c")]);
        written
            .add(&["metadata", "labels"], &labels)
            .and_then(|()| written.add(&["spec", "containers", "-"], &["x", "y"]))
            .and_then(|()| written.add(&["metadata", "annotations", "ocifit.io/a~b\"q"], "v"))
            .unwrap();
        let read: Patch = serde_json::from_slice(written.as_bytes()).unwrap();
        let built = Patch(vec![
            add_op(&["metadata", "labels"], serde_json::json!({"a/b": "c"})),
            add_op(&["spec", "containers", "-"], serde_json::json!(["x", "y"])),
            add_op(
                &["metadata", "annotations", "ocifit.io/a~b\"q"],
                serde_json::json!("v"),
            ),
        ]);
        assert_eq!(read, built);
        assert_eq!(written.as_bytes(), serde_json::to_vec(&built).unwrap());
    }

    #[test]
    fn tokens_are_escaped_whether_borrowed_or_owned() {
        let borrowed = add_op(
            &["metadata", "labels", "ocifit.io/policy"],
            Value::from("x"),
        );
        let owned = add_op(
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
            replace_op(&["spec", "containers", "0", "image"], Value::from("a")),
            remove_op(&["spec", "schedulingGates", "1"]),
        ];
        let json = serde_json::to_value(ops).unwrap();
        assert_eq!(json[0]["op"], "replace");
        assert_eq!(json[0]["path"], "/spec/containers/0/image");
        assert_eq!(json[1]["op"], "remove");
        assert_eq!(json[1]["path"], "/spec/schedulingGates/1");
    }
}
