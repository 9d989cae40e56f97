//! AdmissionReview decoding: any request body yields either a pod request or a denial that
//! encodes into a review, without panicking.

#![no_main]

use libfuzzer_sys::fuzz_target;
use ocifit::webhook::review;

fuzz_target!(|body: &[u8]| {
    match review::read(body) {
        Ok(request) => {
            let _ = request.object.map(|pod| pod.spec);
        }
        Err(denial) => {
            let encoded = denial.encode();
            assert!(serde_json::from_slice::<serde_json::Value>(&encoded).is_ok());
        }
    }
});
