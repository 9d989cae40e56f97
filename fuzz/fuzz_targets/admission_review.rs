//! AdmissionReview decoding: any request body yields either a pod request or a denial whose
//! body is a well-formed review that refuses, without panicking.

#![no_main]

use k8s_openapi::api::core::v1::Pod;
use libfuzzer_sys::fuzz_target;
use ocifit::admission;

fuzz_target!(|body: &[u8]| {
    match admission::read_review::<Pod>(body) {
        Ok(request) => {
            let _ = request.object.map(|pod| pod.spec);
        }
        Err(denial) => {
            let encoded: serde_json::Value =
                serde_json::from_slice(&denial.body).expect("a denial is JSON");
            assert_eq!(encoded["response"]["allowed"], false);
        }
    }
});
