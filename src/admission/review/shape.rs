//! The body's shape, checked in one streaming pass before it is decoded: no array longer than
//! [`MAX_ARRAY_ELEMENTS`]. Decoding allocates per element (a pod's container is some 4 KiB as
//! a typed value, so a 1 MiB pod of 20,000 containers decoded to over 100 MiB), and no object
//! the apiserver admits needs arrays that long.

use std::fmt;

use serde::de::{Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// The longest array a review may hold.
pub const MAX_ARRAY_ELEMENTS: usize = 4096;

/// Why the body's shape is refused (or the JSON error that stopped the pass).
pub(super) fn check(body: &[u8]) -> Result<(), String> {
    serde_json::from_slice::<Checked>(body)
        .map(|_| ())
        .map_err(|err| err.to_string())
}

/// Any JSON value, read without keeping anything, arrays counted.
struct Checked;

impl<'de> Deserialize<'de> for Checked {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(CheckedVisitor)
    }
}

struct CheckedVisitor;

impl<'de> Visitor<'de> for CheckedVisitor {
    type Value = Checked;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Checked, A::Error> {
        let mut count = 0usize;
        while seq.next_element::<Checked>()?.is_some() {
            count += 1;
            if count > MAX_ARRAY_ELEMENTS {
                return Err(serde::de::Error::custom(format!(
                    "an array of more than {MAX_ARRAY_ELEMENTS} elements, over ocifit's limit"
                )));
            }
        }
        Ok(Checked)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Checked, A::Error> {
        while map.next_entry::<IgnoredAny, Checked>()?.is_some() {}
        Ok(Checked)
    }

    fn visit_bool<E>(self, _: bool) -> Result<Checked, E> {
        Ok(Checked)
    }

    fn visit_i64<E>(self, _: i64) -> Result<Checked, E> {
        Ok(Checked)
    }

    fn visit_u64<E>(self, _: u64) -> Result<Checked, E> {
        Ok(Checked)
    }

    fn visit_f64<E>(self, _: f64) -> Result<Checked, E> {
        Ok(Checked)
    }

    fn visit_str<E>(self, _: &str) -> Result<Checked, E> {
        Ok(Checked)
    }

    fn visit_unit<E>(self) -> Result<Checked, E> {
        Ok(Checked)
    }

    fn visit_none<E>(self) -> Result<Checked, E> {
        Ok(Checked)
    }
}
