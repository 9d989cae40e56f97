//! Deserializers for expression values: a value is a string, and a YAML or JSON number or boolean
//! is read as its text (NFD's YAML reader, sigs.k8s.io/yaml, does the same for string targets, so
//! `value: [6]` means `"6"`). ocifit accepts one value or a list; NFD accepts a list only.
//! Owns no evaluation.

use std::fmt;

use serde::Deserializer;
use serde::de::{self, SeqAccess, Visitor};

/// One value read as text.
pub(crate) struct Text(pub String);

impl<'de> serde::Deserialize<'de> for Text {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(TextVisitor).map(Text)
    }
}

struct TextVisitor;

impl Visitor<'_> for TextVisitor {
    type Value = String;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string (or a number or boolean, read as text)")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<String, E> {
        Ok(v.to_owned())
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<String, E> {
        Ok(v)
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<String, E> {
        Ok(v.to_string())
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<String, E> {
        Ok(v.to_string())
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<String, E> {
        Ok(v.to_string())
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<String, E> {
        Ok(v.to_string())
    }
}

/// ocifit's `value`: absent, null, one value or a list of values.
pub(crate) fn one_or_many<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    struct OneOrMany;

    impl<'de> Visitor<'de> for OneOrMany {
        type Value = Vec<String>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a string or a list of strings")
        }

        fn visit_unit<E: de::Error>(self) -> Result<Vec<String>, E> {
            Ok(Vec::new())
        }

        fn visit_none<E: de::Error>(self) -> Result<Vec<String>, E> {
            Ok(Vec::new())
        }

        fn visit_str<E: de::Error>(self, v: &str) -> Result<Vec<String>, E> {
            Ok(vec![v.to_owned()])
        }

        fn visit_bool<E: de::Error>(self, v: bool) -> Result<Vec<String>, E> {
            TextVisitor.visit_bool(v).map(|v| vec![v])
        }

        fn visit_i64<E: de::Error>(self, v: i64) -> Result<Vec<String>, E> {
            TextVisitor.visit_i64(v).map(|v| vec![v])
        }

        fn visit_u64<E: de::Error>(self, v: u64) -> Result<Vec<String>, E> {
            TextVisitor.visit_u64(v).map(|v| vec![v])
        }

        fn visit_f64<E: de::Error>(self, v: f64) -> Result<Vec<String>, E> {
            TextVisitor.visit_f64(v).map(|v| vec![v])
        }

        fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Vec<String>, A::Error> {
            collect(seq)
        }
    }

    d.deserialize_any(OneOrMany)
}

/// NFD's `value`: absent, null or a list of values (a lone scalar is an error, as in NFD).
pub(crate) fn list_only<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    struct ListOnly;

    impl<'de> Visitor<'de> for ListOnly {
        type Value = Vec<String>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a list of strings (NFD's value is always a list)")
        }

        fn visit_unit<E: de::Error>(self) -> Result<Vec<String>, E> {
            Ok(Vec::new())
        }

        fn visit_none<E: de::Error>(self) -> Result<Vec<String>, E> {
            Ok(Vec::new())
        }

        fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Vec<String>, A::Error> {
            collect(seq)
        }
    }

    d.deserialize_any(ListOnly)
}

fn collect<'de, A: SeqAccess<'de>>(mut seq: A) -> Result<Vec<String>, A::Error> {
    let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0));
    while let Some(Text(v)) = seq.next_element()? {
        out.push(v);
    }
    Ok(out)
}
