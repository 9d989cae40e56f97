//! What reading a review costs in memory, whatever a client sends: the bytes allocated while a
//! 3 MiB body is read, counted by jemalloc for this thread. A generic tree of a JSON array of
//! numbers costs tens of bytes per element, so a body that became a tree would show tens of MiB;
//! read in a streaming pass it costs what the typed request keeps.

use k8s_openapi::api::core::v1::Pod;
use ocifit::admission::{MAX_BODY_BYTES, read_review};
use tikv_jemalloc_ctl::thread::allocatedp;

// The binary's allocator, as ocifit's: jemalloc counts what each thread allocates.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// The bytes this thread allocated while `f` ran (other tests' threads do not count).
fn allocated_by<T>(f: impl FnOnce() -> T) -> (T, u64) {
    let counter = allocatedp::mib()
        .expect("jemalloc's counter")
        .read()
        .expect("a counter");
    let before = counter.get();
    let result = f();
    (result, counter.get() - before)
}

/// A review around `filler` (JSON) at `at`, close to the body limit in all.
fn review(version: &str, at: &str, filler_elements: usize) -> Vec<u8> {
    // An array, or (under "options") an object of as many small members, which no array
    // limit refuses.
    let filler = if at == "options" {
        let members: Vec<String> = (0..filler_elements / 6)
            .map(|i| format!(r#""{i:x}":0"#))
            .collect();
        format!("{{{}}}", members.join(","))
    } else {
        format!("[{}0]", "0,".repeat(filler_elements))
    };
    let object = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"name":"c","image":"i"}]}}"#;
    let request = format!(
        r#"{{"uid":"u","kind":{{"group":"","version":"v1","kind":"Pod"}},"resource":{{"group":"","version":"v1","resource":"pods"}},"operation":"CREATE","userInfo":{{}},"object":{object}{}}}"#,
        if at == "options" {
            format!(r#","options":{filler}"#)
        } else {
            String::new()
        }
    );
    let junk = if at == "top" {
        format!(r#","junk":{filler}"#)
    } else {
        String::new()
    };
    format!(r#"{{"apiVersion":"{version}","kind":"AdmissionReview"{junk},"request":{request}}}"#)
        .into_bytes()
}

#[test]
fn a_refused_body_is_explained_without_a_tree_of_it() {
    let elements = (MAX_BODY_BYTES - 1024) / 2;
    for at in ["top", "options"] {
        let body = review("admission.k8s.io/v1beta1", at, elements);
        assert!(body.len() <= MAX_BODY_BYTES);
        let (answer, allocated) = allocated_by(|| read_review::<Pod>(&body));
        assert!(answer.is_err(), "the body is refused");
        assert!(
            allocated < 256 * 1024,
            "refusing a {} byte body ({at}) allocated {allocated} bytes",
            body.len()
        );
    }
}

#[test]
fn options_are_not_read_into_a_tree_on_the_way_to_the_planner() {
    // A well-formed review whose options are a 3 MiB object: read, but the object is skipped.
    let body = review(
        "admission.k8s.io/v1",
        "options",
        (MAX_BODY_BYTES - 1024) / 2,
    );
    let (request, allocated) = allocated_by(|| read_review::<Pod>(&body));
    request.expect("a well-formed review, its options skipped");
    assert!(allocated < 256 * 1024, "{allocated} bytes allocated");
}

#[test]
fn a_pod_of_20000_containers_is_refused_before_it_is_decoded() {
    // Under 1 MiB of JSON; decoded, it took over 100 MiB.
    let containers: Vec<String> = (0..20_000)
        .map(|i| format!(r#"{{"name":"c{i}","image":"placeholder:latest"}}"#))
        .collect();
    let body = format!(
        r#"{{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{{"uid":"u","kind":{{"group":"","version":"v1","kind":"Pod"}},"resource":{{"group":"","version":"v1","resource":"pods"}},"operation":"CREATE","userInfo":{{}},"object":{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"p"}},"spec":{{"containers":[{}]}}}}}}}}"#,
        containers.join(",")
    );
    let (answer, allocated) = allocated_by(|| read_review::<Pod>(body.as_bytes()));
    assert_eq!(answer.expect_err("refused").reason, "TooLarge");
    assert!(allocated < 256 * 1024, "{allocated} bytes allocated");
}
