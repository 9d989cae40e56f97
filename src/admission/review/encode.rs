//! The review the apiserver reads back, written straight into the answer's bytes: the envelope
//! as fixed text (nothing in it needs escaping), the uid, messages and warnings escaped as JSON
//! strings, and the JSON patch's base64 appended straight to the answer (it needs no escaping:
//! it is never checked for it), encoded with SIMD.

use std::io;

use base64_simd::STANDARD as BASE64;
use serde::Serialize;

use crate::admission::patch::Patched;

/// A review's `response.status`.
#[derive(Serialize)]
pub(super) struct Status<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) status: Option<&'static str>,
    pub(super) message: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) reason: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) code: Option<u16>,
}

/// The review answering the request with `uid`. The patch goes out base64-encoded, as the
/// apiserver documents it (kube would write an array of numbers, which Go accepts but which is
/// four times larger).
pub(super) fn encode(
    uid: &str,
    allowed: bool,
    status: Option<Status<'_>>,
    patch: Option<Patched<'_>>,
    warnings: &[String],
) -> Vec<u8> {
    write(uid, allowed, status, patch, warnings).unwrap_or_else(|err| {
        // Not reachable (plain data; a patch is plain JSON); still an answer, never a 500.
        let message = format!("ocifit failed to encode its answer: {err}");
        let status = Status {
            status: Some("Failure"),
            message: &message,
            reason: Some("InternalError"),
            code: None,
        };
        write(uid, false, Some(status), None, &[]).unwrap_or_default()
    })
}

fn write(
    uid: &str,
    allowed: bool,
    status: Option<Status<'_>>,
    patch: Option<Patched<'_>>,
    warnings: &[String],
) -> io::Result<Vec<u8>> {
    // The envelope, uid and messages fit in 512 bytes; a written patch's base64 is known ahead,
    // so the answer is never copied to grow.
    let patch_room = match patch {
        Some(Patched::Written(patch)) => patch.as_bytes().len().div_ceil(3) * 4,
        Some(Patched::Operations(_)) => 2048,
        None => 0,
    };
    let mut out = Vec::with_capacity(512 + patch_room);
    out.extend_from_slice(
        br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"#,
    );
    serde_json::to_writer(&mut out, uid)?;
    out.extend_from_slice(if allowed {
        br#","allowed":true"#
    } else {
        br#","allowed":false"#
    });
    if let Some(status) = status {
        out.extend_from_slice(br#","status":"#);
        serde_json::to_writer(&mut out, &status)?;
    }
    if let Some(patch) = patch {
        out.extend_from_slice(br#","patch":""#);
        match patch {
            Patched::Operations(patch) => {
                BASE64.encode_append(serde_json::to_vec(patch)?, &mut out)
            }
            Patched::Written(patch) => BASE64.encode_append(patch.as_bytes(), &mut out),
        }
        out.extend_from_slice(br#"","patchType":"JSONPatch""#);
    }
    if !warnings.is_empty() {
        out.extend_from_slice(br#","warnings":"#);
        serde_json::to_writer(&mut out, warnings)?;
    }
    out.extend_from_slice(b"}}");
    Ok(out)
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::admission::patch::{WrittenPatch, add_op};
    use json_patch::Patch;

    fn review_of(body: &[u8]) -> Value {
        serde_json::from_slice(body).unwrap()
    }

    #[test]
    fn a_patch_of_any_length_reads_back_whole_from_its_base64() {
        // Every remainder of 3 and of the SIMD encoder's blocks, short and long (the patch's JSON
        // is about 60 bytes more than the value).
        let lengths = (0..100).chain(980..1050).chain([4096, 9216]);
        let path = ["metadata", "annotations", "ocifit.io/a"];
        for length in lengths {
            let value = "x".repeat(length);
            let patch = Patch(vec![add_op(&path, Value::from(value.as_str()))]);
            let mut written = WrittenPatch::default();
            written.add(&[&path], value.as_str());
            for answered in [Patched::Operations(&patch), Patched::Written(&written)] {
                let review = review_of(&encode("u", true, None, Some(answered), &[]));
                let base64 = review["response"]["patch"].as_str().unwrap();
                let json = BASE64.decode_to_vec(base64).unwrap();
                assert_eq!(json, serde_json::to_vec(&patch).unwrap(), "{length}");
                assert_eq!(review["response"]["patchType"], "JSONPatch");
            }
        }
    }

    #[test]
    fn text_from_the_request_and_the_planner_is_escaped() {
        let status = Status {
            status: Some("Failure"),
            message: "no \"quotes\"\n",
            reason: Some("InvalidRequest"),
            code: None,
        };
        let body = encode("u\"\\", false, Some(status), None, &["a\u{1}".into()]);
        assert_eq!(
            review_of(&body),
            json!({
                "apiVersion": "admission.k8s.io/v1",
                "kind": "AdmissionReview",
                "response": {
                    "uid": "u\"\\",
                    "allowed": false,
                    "status": {"status": "Failure", "message": "no \"quotes\"\n",
                               "reason": "InvalidRequest"},
                    "warnings": ["a\u{1}"]
                }
            })
        );
    }
}
