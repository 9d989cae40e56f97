//! Why one attempt at a registry request failed, read from reqwest's error or the registry's
//! answer, with what the retry policy should know; and the capped read of an answer's body.

use std::sync::Arc;
use std::time::SystemTime;

use bytes::{Bytes, BytesMut};
use reqwest::Response;
use reqwest::header::RETRY_AFTER;

use crate::registry::error::{Access, ContentProblem, Error, Target};
use crate::registry::fence::Refused;
use crate::registry::retry::{self, Failure};

/// A failed attempt: the error to report, and what retrying should know (None: never retry).
pub(super) struct AttemptError {
    pub(super) error: Error,
    pub(super) failure: Option<Failure>,
}

impl From<Error> for AttemptError {
    fn from(error: Error) -> Self {
        AttemptError {
            error,
            failure: None,
        }
    }
}

pub(super) fn unauthorized(target: &Target, status: u16, access: Access) -> Error {
    Error::Unauthorized {
        target: target.clone(),
        status,
        access,
    }
}

pub(super) fn transport_error(target: &Target, err: reqwest::Error) -> AttemptError {
    let mut cause = std::error::Error::source(&err);
    while let Some(now) = cause {
        if let Some(refused) = now.downcast_ref::<Refused>() {
            return Error::NotAllowed {
                target: target.clone(),
                host: refused.host.clone(),
                why: refused.why,
            }
            .into();
        }
        cause = now.source();
    }
    let failure = if err.is_timeout() {
        Failure::Timeout
    } else {
        Failure::Connection
    };
    let summary = if err.is_timeout() {
        "request timed out"
    } else if err.is_connect() {
        "failed to connect"
    } else {
        "request failed"
    };
    // The innermost cause says what actually happened ("Connection refused", "invalid peer
    // certificate: UnknownIssuer"); requests carry no credentials in their errors.
    let mut root = std::error::Error::source(&err);
    while let Some(next) = root.and_then(std::error::Error::source) {
        root = Some(next);
    }
    let detail = match root {
        Some(cause) => format!("{summary} ({cause})"),
        None => summary.to_string(),
    };
    AttemptError {
        error: Error::Transport {
            target: target.clone(),
            detail,
            source: Some(Arc::new(err.without_url())),
        },
        failure: Some(failure),
    }
}

/// A status that is neither success, 404 nor an auth refusal: rate limiting, server errors, and
/// anything unexpected (never retried unless the retry policy says it is transient).
pub(super) fn status_error(target: &Target, response: &Response, what: &str) -> AttemptError {
    let code = response.status().as_u16();
    let retry_after = response
        .headers()
        .get(RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| retry::parse_retry_after(v, SystemTime::now()));
    let error = if code == 429 {
        Error::RateLimited {
            target: target.clone(),
            retry_after,
        }
    } else {
        Error::Transport {
            target: target.clone(),
            detail: format!("the registry answered HTTP {code} for the {what}"),
            source: None,
        }
    };
    AttemptError {
        error,
        failure: Some(Failure::Status { code, retry_after }),
    }
}

pub(super) async fn read_body(
    target: &Target,
    mut response: Response,
    limit: u64,
) -> Result<Bytes, AttemptError> {
    let too_large = || Error::content(target, ContentProblem::TooLarge { limit });
    if response.content_length().is_some_and(|len| len > limit) {
        return Err(too_large().into());
    }
    let mut body = BytesMut::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|err| transport_error(target, err))?
    {
        if (body.len() + chunk.len()) as u64 > limit {
            return Err(too_large().into());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body.freeze())
}
