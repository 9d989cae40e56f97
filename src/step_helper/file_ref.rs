//! `PATH[:MEDIA_TYPE]` push arguments, read as `oras push` reads them: split at the last ':'
//! (a path that holds ':' is written with a trailing one, `a:b.txt:`, for the default type), so
//! `ocifit artifact push REF a.txt:text/plain` gives that layer the type `text/plain`. Pure.

use std::path::PathBuf;

/// A path to push and the media type its layer is given (`None`: the ORAS default).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushPath {
    pub path: PathBuf,
    pub media_type: Option<String>,
}

impl PushPath {
    /// A path pushed with the default media type.
    pub fn plain(path: impl Into<PathBuf>) -> Self {
        PushPath {
            path: path.into(),
            media_type: None,
        }
    }
}

/// Why a push argument names no path and type.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FileRefError {
    #[error("{0:?} names no file to push before its ':'")]
    EmptyPath(String),
    #[error(
        "in {arg:?}, {media_type:?} is not a media type (type/subtype); a path that holds ':' is \
         written with a trailing ':' (e.g. a:b.txt:)"
    )]
    MediaType { arg: String, media_type: String },
}

/// Reads one push argument.
pub fn parse_file_ref(arg: &str) -> Result<PushPath, FileRefError> {
    let Some((path, media_type)) = arg.rsplit_once(':') else {
        return Ok(PushPath::plain(arg));
    };
    if path.is_empty() {
        return Err(FileRefError::EmptyPath(arg.to_string()));
    }
    if media_type.is_empty() {
        return Ok(PushPath::plain(path));
    }
    if !is_media_type(media_type) {
        return Err(FileRefError::MediaType {
            arg: arg.to_string(),
            media_type: media_type.to_string(),
        });
    }
    Ok(PushPath {
        path: PathBuf::from(path),
        media_type: Some(media_type.to_string()),
    })
}

/// RFC 6838's `type/subtype`: each a restricted name of at most 127 characters.
fn is_media_type(text: &str) -> bool {
    let restricted = |name: &str| {
        name.len() <= 127
            && name
                .bytes()
                .next()
                .is_some_and(|b| b.is_ascii_alphanumeric())
            && name.bytes().all(|b| {
                b.is_ascii_alphanumeric()
                    || matches!(
                        b,
                        b'!' | b'#' | b'$' | b'&' | b'-' | b'^' | b'_' | b'.' | b'+'
                    )
            })
    };
    text.split_once('/')
        .is_some_and(|(kind, subtype)| restricted(kind) && restricted(subtype))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_media_type_after_the_last_colon_types_the_layer() {
        assert_eq!(
            parse_file_ref("a.txt:text/plain"),
            Ok(PushPath {
                path: "a.txt".into(),
                media_type: Some("text/plain".into())
            })
        );
        assert_eq!(
            parse_file_ref("dir/conf.json:application/vnd.acme.config.v1+json")
                .unwrap()
                .media_type
                .as_deref(),
            Some("application/vnd.acme.config.v1+json")
        );
        assert_eq!(parse_file_ref("a.txt"), Ok(PushPath::plain("a.txt")));
    }

    #[test]
    fn a_path_holding_a_colon_is_written_with_a_trailing_one_as_with_oras() {
        assert_eq!(parse_file_ref("a:b.txt:"), Ok(PushPath::plain("a:b.txt")));
        assert_eq!(
            parse_file_ref("a:b.txt:text/plain").unwrap().path,
            PathBuf::from("a:b.txt")
        );
        let err = parse_file_ref("a:b.txt").unwrap_err();
        assert_eq!(
            err,
            FileRefError::MediaType {
                arg: "a:b.txt".into(),
                media_type: "b.txt".into()
            }
        );
        assert!(err.to_string().contains("a:b.txt:"), "{err}");
        assert_eq!(
            parse_file_ref(":text/plain"),
            Err(FileRefError::EmptyPath(":text/plain".into()))
        );
    }
}
