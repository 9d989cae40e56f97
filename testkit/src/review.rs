//! AdmissionReview bodies as kube-apiserver sends them, for every tier that feeds one to ocifit
//! (component tests, benches, the cluster suite's loopback clients): one shape, so a field the
//! apiserver sends is added in one place.

use serde_json::{Value, json};

/// The AdmissionRequest the apiserver sends when a ReplicaSet's controller creates `object` in
/// `default` (a Pod, or what its `kind` says: the resource is the kind's plural, lower-cased).
pub fn create_request(object: &Value, dry_run: bool) -> Value {
    let kind = object["kind"].as_str().unwrap_or("Pod");
    let (group, version) = match object["apiVersion"]
        .as_str()
        .unwrap_or("v1")
        .split_once('/')
    {
        Some((group, version)) => (group.to_owned(), version.to_owned()),
        None => (
            String::new(),
            object["apiVersion"].as_str().unwrap_or("v1").to_owned(),
        ),
    };
    let gvk = json!({"group": group, "version": version, "kind": kind});
    let gvr = json!({"group": group, "version": version,
        "resource": format!("{}s", kind.to_lowercase())});
    json!({
        "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
        "kind": gvk,
        "resource": gvr,
        "requestKind": gvk,
        "requestResource": gvr,
        "name": object["metadata"]["name"],
        "namespace": object["metadata"]["namespace"].as_str().unwrap_or("default"),
        "operation": "CREATE",
        "userInfo": {"username": "system:serviceaccount:kube-system:replicaset-controller",
                     "uid": "0b0c7e2e-0000-4000-8000-000000000001",
                     "groups": ["system:serviceaccounts", "system:serviceaccounts:kube-system",
                                "system:authenticated"]},
        "object": object,
        "oldObject": null,
        "dryRun": dry_run,
        "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
    })
}

/// `request` in its `admission.k8s.io/v1` AdmissionReview, as the body the apiserver posts.
pub fn admission_review(request: Value) -> Vec<u8> {
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": request,
    })
    .to_string()
    .into_bytes()
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::batch::v1::Job;
    use k8s_openapi::api::core::v1::Pod;
    use kube::core::admission::{AdmissionRequest, AdmissionReview, Operation};

    use super::*;

    #[test]
    fn a_pods_review_reads_as_kube_reads_the_apiservers() {
        let pod = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "team"},
            "spec": {"containers": [{"name": "c", "image": "i"}]}});
        let body = admission_review(create_request(&pod, true));
        let review: AdmissionReview<Pod> = serde_json::from_slice(&body).expect("a review");
        let request: AdmissionRequest<Pod> = review.try_into().expect("a request");
        assert_eq!(request.operation, Operation::Create);
        assert_eq!(request.resource.resource, "pods");
        assert_eq!(request.namespace.as_deref(), Some("team"));
        assert!(request.dry_run);
        let pod = request.object.expect("the pod");
        assert_eq!(pod.metadata.name.as_deref(), Some("p"));
    }

    #[test]
    fn another_kinds_review_names_its_group_and_resource() {
        let job = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
            "spec": {"template": {"spec": {"containers": []}}}});
        let request: AdmissionRequest<Job> =
            serde_json::from_value(create_request(&job, false)).expect("a request");
        assert_eq!(request.resource.group, "batch");
        assert_eq!(request.resource.resource, "jobs");
        assert_eq!(request.namespace.as_deref(), Some("default"));
    }
}
