//! The body's shape, checked in one streaming pass before it is decoded (where a count of its
//! commas says it may fail, [`check`]): no array longer than [`MAX_ARRAY_ELEMENTS`], since
//! decoding allocates per element (docs/security.md's limits) and no object the apiserver admits
//! needs arrays that long. The pass keeps `request.uid`, so the host's own denials answer the
//! request they refuse: the apiserver rejects an answer with another uid as a failed call.

use std::cell::RefCell;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// The longest array a review may hold.
pub const MAX_ARRAY_ELEMENTS: usize = 4096;

/// What the pass found.
#[derive(Debug, Default)]
pub(crate) struct Scan {
    /// `request.uid`, if the pass read it before it ended.
    pub(crate) uid: Option<String>,
    /// Why the body's shape is refused, or the JSON error that stopped the pass.
    pub(crate) refused: Option<String>,
}

/// Reads `body` (a whole body, or only its first bytes) once, keeping nothing but the uid.
pub(crate) fn scan(body: &[u8]) -> Scan {
    let uid = RefCell::new(None);
    let mut deserializer = serde_json::Deserializer::from_slice(body);
    let walked = Walk {
        place: Place::Root,
        uid: &uid,
    }
    .deserialize(&mut deserializer)
    .and_then(|()| deserializer.end());
    Scan {
        uid: uid.into_inner(),
        refused: walked.err().map(|err| err.to_string()),
    }
}

/// Where the pass stands, as far as the uid is concerned.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Place {
    /// The review.
    Root,
    /// `request`.
    Request,
    /// `request.uid`.
    Uid,
    /// Anywhere else.
    Other,
}

/// Any JSON value at `place`, read without keeping anything but the uid, arrays counted.
struct Walk<'a> {
    place: Place,
    uid: &'a RefCell<Option<String>>,
}

impl Walk<'_> {
    fn at(&self, place: Place) -> Self {
        Walk {
            place,
            uid: self.uid,
        }
    }
}

impl<'de> DeserializeSeed<'de> for Walk<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Walk<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut count = 0usize;
        while seq.next_element_seed(self.at(Place::Other))?.is_some() {
            count += 1;
            if count > MAX_ARRAY_ELEMENTS {
                return Err(serde::de::Error::custom(format!(
                    "an array of more than {MAX_ARRAY_ELEMENTS} elements, over ocifit's limit"
                )));
            }
        }
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let (wanted, inside) = match self.place {
            Place::Root => (Some("request"), Place::Request),
            Place::Request => (Some("uid"), Place::Uid),
            Place::Uid | Place::Other => (None, Place::Other),
        };
        while let Some(matched) = map.next_key_seed(KeyIs(wanted))? {
            let place = if matched { inside } else { Place::Other };
            map.next_value_seed(self.at(place))?;
        }
        Ok(())
    }

    fn visit_str<E>(self, text: &str) -> Result<(), E> {
        if self.place == Place::Uid {
            self.uid.borrow_mut().get_or_insert_with(|| text.to_owned());
        }
        Ok(())
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }

    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }

    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }

    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_none<E>(self) -> Result<(), E> {
        Ok(())
    }
}

/// A map key: whether it is the wanted one (never, with none wanted).
struct KeyIs(Option<&'static str>);

impl<'de> DeserializeSeed<'de> for KeyIs {
    type Value = bool;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<bool, D::Error> {
        match self.0 {
            Some(_) => deserializer.deserialize_str(self),
            None => deserializer
                .deserialize_ignored_any(IgnoredAny)
                .map(|_| false),
        }
    }
}

impl Visitor<'_> for KeyIs {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a key")
    }

    fn visit_str<E>(self, key: &str) -> Result<bool, E> {
        Ok(self.0 == Some(key))
    }
}

/// The pass, where `body` may hold an array over the limit; else nothing found, unread. An array
/// of `n` elements has `n - 1` commas, so a body of fewer than [`MAX_ARRAY_ELEMENTS`] commas
/// holds none over it, and counting them is far cheaper than the pass.
pub(crate) fn check(body: &[u8]) -> Scan {
    let commas = body.iter().filter(|&&byte| byte == b',').count();
    if commas < MAX_ARRAY_ELEMENTS {
        Scan::default()
    } else {
        scan(body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A request holding `[0,0,…]` of `elements` (at least one): no other comma in the body.
    fn with_array(elements: usize) -> Vec<u8> {
        let zeros = "0,".repeat(elements - 1);
        format!(r#"{{"request":{{"object":[{zeros}0]}}}}"#).into_bytes()
    }

    #[test]
    fn the_tightest_array_over_the_limit_is_still_refused_by_the_check() {
        // One-digit elements and no other comma: as few commas as an array over the limit can
        // be written with.
        let over = check(&with_array(MAX_ARRAY_ELEMENTS + 1));
        assert!(
            over.refused
                .is_some_and(|why| why.contains("over ocifit's limit"))
        );
        // At the limit, one comma fewer: the body is not worth the pass, and passes unread.
        let at = check(&with_array(MAX_ARRAY_ELEMENTS));
        assert_eq!((at.uid, at.refused), (None, None));
        assert!(scan(&with_array(MAX_ARRAY_ELEMENTS)).refused.is_none());
    }

    #[test]
    fn commas_in_strings_make_the_check_read_the_body_and_find_nothing_wrong() {
        let commas = ",".repeat(MAX_ARRAY_ELEMENTS);
        let body = format!(r#"{{"request":{{"uid":"u","name":"{commas}"}}}}"#);
        let read = check(body.as_bytes());
        assert_eq!((read.uid.as_deref(), read.refused), (Some("u"), None));
    }
}
