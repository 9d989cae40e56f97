//! The few fields of a review that [`explain`](super::explain) names, read leniently: any JSON
//! is accepted where they stand (what is not the expected shape reads as absent), and
//! everything else is skipped as it streams past, so a refused body never becomes a tree.

use std::fmt;
use std::marker::PhantomData;

use serde::de::value::MapAccessDeserializer;
use serde::de::{Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// A `T` where the JSON has the shape `T` reads (an object, or a string for `String`), else
/// `None`; never an error for a value of another type.
#[derive(Debug, Default)]
pub(super) struct Lenient<T>(pub(super) Option<T>);

/// The review's head.
#[derive(Debug, Default, serde::Deserialize)]
pub(super) struct Review {
    #[serde(rename = "apiVersion", default)]
    pub(super) api_version: Lenient<String>,
    #[serde(default)]
    pub(super) kind: Lenient<String>,
    #[serde(default)]
    pub(super) request: Lenient<Request>,
}

/// The request's head.
#[derive(Debug, Default, serde::Deserialize)]
pub(super) struct Request {
    #[serde(default)]
    pub(super) uid: Lenient<String>,
    #[serde(default)]
    pub(super) kind: Lenient<Kind>,
}

/// The kind the request is about.
#[derive(Debug, Default, serde::Deserialize)]
pub(super) struct Kind {
    #[serde(default)]
    pub(super) group: Lenient<String>,
    #[serde(default)]
    pub(super) version: Lenient<String>,
    #[serde(default)]
    pub(super) kind: Lenient<String>,
}

/// Which shape a [`Lenient`] keeps.
trait Shape<'de>: Sized {
    /// Reads an object as `Self` (`None`: objects are not this shape).
    fn from_map<A: MapAccess<'de>>(map: A) -> Result<Option<Self>, A::Error>;
    /// Reads a string as `Self` (`None`: strings are not this shape).
    fn from_str(text: &str) -> Option<Self>;
}

impl<'de> Shape<'de> for String {
    fn from_map<A: MapAccess<'de>>(map: A) -> Result<Option<Self>, A::Error> {
        skip_map(map).map(|()| None)
    }

    fn from_str(text: &str) -> Option<Self> {
        Some(text.to_owned())
    }
}

macro_rules! object_shape {
    ($($t:ty),*) => {$(
        impl<'de> Shape<'de> for $t {
            fn from_map<A: MapAccess<'de>>(map: A) -> Result<Option<Self>, A::Error> {
                <$t>::deserialize(MapAccessDeserializer::new(map)).map(Some)
            }

            fn from_str(_: &str) -> Option<Self> {
                None
            }
        }
    )*};
}
object_shape!(Review, Request, Kind);

fn skip_map<'de, A: MapAccess<'de>>(mut map: A) -> Result<(), A::Error> {
    while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
    Ok(())
}

impl<'de, T: Shape<'de>> Deserialize<'de> for Lenient<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(LenientVisitor(PhantomData))
    }
}

struct LenientVisitor<T>(PhantomData<T>);

impl<'de, T: Shape<'de>> Visitor<'de> for LenientVisitor<T> {
    type Value = Lenient<T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        T::from_map(map).map(Lenient)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Lenient(None))
    }

    fn visit_str<E>(self, text: &str) -> Result<Self::Value, E> {
        Ok(Lenient(T::from_str(text)))
    }

    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok(Lenient(None))
    }

    fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
        Ok(Lenient(None))
    }

    fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
        Ok(Lenient(None))
    }

    fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
        Ok(Lenient(None))
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(Lenient(None))
    }

    fn visit_none<E>(self) -> Result<Self::Value, E> {
        Ok(Lenient(None))
    }
}
