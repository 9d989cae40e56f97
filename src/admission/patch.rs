//! The JSON-patch (RFC 6902) operations every feature's admission answer and pod release are
//! built from, one definition: each takes the pointer's tokens unescaped and lets `jsonptr`
//! escape them (`ocifit.io/policy` → `ocifit.io~1policy`), so no feature writes a pointer by hand.
//! A patch is either operations on JSON values ([`json_patch::Patch`]), or a [`WrittenPatch`]:
//! operations written straight as JSON text from typed values, for a planner whose values are
//! large (a step's helper containers) and would otherwise be built as a tree, written, and dropped.

use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, Patch, PatchOperation, RemoveOperation, ReplaceOperation};
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

/// A patch already written as JSON text: an array of `add` operations, each written as it is
/// added, by the value itself ([`WriteJson`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WrittenPatch {
    json: Vec<u8>,
}

/// A value that writes itself as JSON text: compact, each object's keys in the order of their
/// names (what serde_json writes of the same value as a `Value`). Hand-written for the step
/// patch, the one large written answer: its constant parts are pre-written text, copied.
pub trait WriteJson {
    fn write_json(&self, out: &mut JsonText<'_>);
}

/// JSON text being written.
pub struct JsonText<'a>(&'a mut Vec<u8>);

impl JsonText<'_> {
    /// Text that is JSON already (a key and its colon, a constant value).
    pub fn raw(&mut self, json: &str) {
        self.0.extend_from_slice(json.as_bytes());
    }

    /// `text` as a JSON string.
    pub fn string(&mut self, text: &str) {
        self.0.push(b'"');
        self.string_contents(text);
        self.0.push(b'"');
    }

    /// A list of values, `[a,b]`.
    pub fn list<T: WriteJson>(&mut self, items: &[T]) {
        self.0.push(b'[');
        for (i, item) in items.iter().enumerate() {
            if i > 0 {
                self.0.push(b',');
            }
            item.write_json(self);
        }
        self.0.push(b']');
    }

    /// `text` escaped as serde_json escapes it: `"`, `\` and control characters; the rest as is.
    fn string_contents(&mut self, text: &str) {
        // Without a branch per byte, so the common case (nothing to escape) is a scan and a copy.
        let plain = text.bytes().fold(true, |plain, b| plain & !escaped(b));
        if plain {
            self.0.extend_from_slice(text.as_bytes());
            return;
        }
        for b in text.bytes() {
            match b {
                b'"' => self.0.extend_from_slice(b"\\\""),
                b'\\' => self.0.extend_from_slice(b"\\\\"),
                b'\n' => self.0.extend_from_slice(b"\\n"),
                b'\r' => self.0.extend_from_slice(b"\\r"),
                b'\t' => self.0.extend_from_slice(b"\\t"),
                0x08 => self.0.extend_from_slice(b"\\b"),
                0x0c => self.0.extend_from_slice(b"\\f"),
                b if b < 0x20 => {
                    const HEX: &[u8; 16] = b"0123456789abcdef";
                    self.0.extend_from_slice(b"\\u00");
                    self.0.push(HEX[usize::from(b >> 4)]);
                    self.0.push(HEX[usize::from(b & 0xf)]);
                }
                b => self.0.push(b),
            }
        }
    }

    /// A JSON pointer's text, each token escaped as `jsonptr` escapes it (`~` → `~0`, `/` → `~1`).
    fn pointer(&mut self, tokens: &[&[&str]]) {
        self.0.push(b'"');
        for token in tokens.iter().flat_map(|part| part.iter()) {
            self.0.push(b'/');
            let mut rest = *token;
            while let Some(at) = rest.find(['~', '/']) {
                self.string_contents(&rest[..at]);
                self.raw(if rest.as_bytes()[at] == b'~' {
                    "~0"
                } else {
                    "~1"
                });
                rest = &rest[at + 1..];
            }
            self.string_contents(rest);
        }
        self.0.push(b'"');
    }
}

/// Whether serde_json escapes this byte in a string.
fn escaped(b: u8) -> bool {
    b < 0x20 || b == b'"' || b == b'\\'
}

impl WriteJson for str {
    fn write_json(&self, out: &mut JsonText<'_>) {
        out.string(self);
    }
}

impl WriteJson for String {
    fn write_json(&self, out: &mut JsonText<'_>) {
        out.string(self);
    }
}

impl<T: WriteJson + ?Sized> WriteJson for &T {
    fn write_json(&self, out: &mut JsonText<'_>) {
        (**self).write_json(out);
    }
}

impl<T: WriteJson> WriteJson for [T] {
    fn write_json(&self, out: &mut JsonText<'_>) {
        out.list(self);
    }
}

impl<T: WriteJson> WriteJson for Vec<T> {
    fn write_json(&self, out: &mut JsonText<'_>) {
        out.list(self);
    }
}

/// A map of strings, as a JSON object (a `BTreeMap` keeps its keys in order).
impl<K: AsRef<str>, V: WriteJson> WriteJson for std::collections::BTreeMap<K, V> {
    fn write_json(&self, out: &mut JsonText<'_>) {
        out.0.push(b'{');
        for (i, (key, value)) in self.iter().enumerate() {
            if i > 0 {
                out.0.push(b',');
            }
            out.string(key.as_ref());
            out.0.push(b':');
            value.write_json(out);
        }
        out.0.push(b'}');
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
    /// Adds `value` at the pointer made of `tokens`' parts, in turn (a `-` last token appends to
    /// a list).
    pub fn add<V: WriteJson + ?Sized>(&mut self, tokens: &[&[&str]], value: &V) {
        // Always a whole array: the closing bracket is moved past each operation written.
        self.json.pop();
        if self.json.len() > 1 {
            self.json.push(b',');
        }
        let mut out = JsonText(&mut self.json);
        out.raw(r#"{"op":"add","path":"#);
        out.pointer(tokens);
        out.raw(r#","value":"#);
        value.write_json(&mut out);
        out.raw("}]");
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
        let labels = std::collections::BTreeMap::from([("a/b", "c"), ("a\"b", "d\n")]);
        written.add(&[&["metadata", "labels"]], &labels);
        written.add(&[&["spec"], &["containers", "-"]], &["x", "y"][..]);
        written.add(&[&["metadata", "annotations", "ocifit.io/a~b\"q"]], "v");
        let read: Patch = serde_json::from_slice(written.as_bytes()).unwrap();
        let built = Patch(vec![
            add_op(
                &["metadata", "labels"],
                serde_json::json!({"a/b": "c", "a\"b": "d\n"}),
            ),
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
    fn a_string_is_escaped_as_serde_json_escapes_it() {
        let mut every_byte: String = (0u8..0x80).map(char::from).collect();
        every_byte.push_str("é\u{2028}🦀");
        for text in [
            "",
            "plain",
            "a\"b\\c",
            "tab\tnew\nline\r",
            every_byte.as_str(),
        ] {
            let mut json = Vec::new();
            JsonText(&mut json).string(text);
            assert_eq!(
                String::from_utf8(json).unwrap(),
                serde_json::to_string(text).unwrap(),
                "{text:?}"
            );
        }
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
