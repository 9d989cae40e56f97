//! A workflow in a namespace that enforces Pod Security `restricted` from its creation, on a real
//! node with the chart installed from ocifit's own image: the cache's registry pod, a step that
//! pushes (restricted by its container's settings alone, which its helpers do not inherit) and a
//! step that pulls it (restricted by its pod's settings) are all admitted by the apiserver's
//! PodSecurity admission after ocifit injected its helpers, run, and the result reads back with
//! the ORAS Python SDK.

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::PostParams;
use serde_json::{Value, json};

use crate::artifact_cache::workflow::{
    NODE, ReadyCache, WORKFLOW, cache_address, contract, generated_login, ready_cache,
    run_first_step, run_job, sdk_pull, stage_with,
};

/// Where a step states that it is restricted: on the pod (which its helpers then inherit) or on
/// its container only (which they do not).
#[derive(Clone, Copy)]
enum Stated {
    OnThePod,
    OnTheContainer,
}

/// A Job as its author writes it for a `restricted` namespace: a non-root user, no privilege
/// escalation, every capability dropped, the runtime's seccomp profile.
fn restricted_job(
    name: &str,
    image: &str,
    annotations: &[(&str, &str)],
    script: &str,
    stated: Stated,
) -> Job {
    let non_root = json!({
        "runAsNonRoot": true, "runAsUser": 1000, "runAsGroup": 1000,
        "seccompProfile": {"type": "RuntimeDefault"}
    });
    let mut container_security = json!({
        "allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}
    });
    let mut spec: Value = json!({
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 1,
        "nodeSelector": {"kubernetes.io/hostname": NODE},
        "volumes": [{"name": "out", "emptyDir": {}}]
    });
    match stated {
        Stated::OnThePod => spec["securityContext"] = non_root,
        Stated::OnTheContainer => {
            if let (Some(security), Value::Object(more)) =
                (container_security.as_object_mut(), non_root)
            {
                security.extend(more);
            }
        }
    }
    spec["containers"] = json!([{
        "name": "step", "image": image, "command": ["sh", "-c", script], "workingDir": "/work",
        "securityContext": container_security,
        "volumeMounts": [{"name": "out", "mountPath": "/work/out"}]
    }]);
    serde_json::from_value(json!({
        "metadata": {"name": name, "annotations": contract(annotations)},
        "spec": {"backoffLimit": 0, "template": {"spec": spec}}
    }))
    .expect("a Job")
}

/// PodSecurity enforces `restricted` in the namespace: a pod that is not is refused.
async fn restricted_is_enforced(client: &kube::Client, image: &str) {
    let plain: Pod = serde_json::from_value(json!({
        "metadata": {"name": "plain"},
        "spec": {"containers": [{"name": "c", "image": image}]}
    }))
    .expect("a pod");
    let dry_run = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let refused = Api::<Pod>::namespaced(client.clone(), WORKFLOW)
        .create(&dry_run, &plain)
        .await
        .expect_err("a plain pod is refused under restricted");
    assert!(refused.to_string().contains("PodSecurity"), "{refused}");
}

#[tokio::test]
async fn a_workflow_runs_in_a_namespace_enforcing_restricted() {
    let stage = stage_with(&[
        ("pod-security.kubernetes.io/enforce", "restricted"),
        ("pod-security.kubernetes.io/enforce-version", "latest"),
    ])
    .await;
    let ReadyCache { jobs, .. } = ready_cache(&stage, json!({"image": stage.cache_image})).await;
    let address = cache_address(&stage.client).await;

    restricted_is_enforced(&stage.client, &stage.step).await;
    let pushes = restricted_job(
        "pushes",
        &stage.step,
        &[
            ("output-uri", "workflow/restricted:v1"),
            ("output-path", "out"),
        ],
        "echo under restricted > out/said.txt",
        Stated::OnTheContainer,
    );
    let took = run_first_step(&stage.cluster, &jobs, &pushes).await;
    eprintln!("a restricted step pushing: {took:.1} s");
    let pulls = restricted_job(
        "pulls",
        &stage.step,
        &[
            ("input-uri", "workflow/restricted:v1"),
            // Copied in as the step's user (1000): into a directory it can write.
            ("input-path", "out/in"),
            ("output-uri", "workflow/restricted-again:v1"),
            ("output-pipe", "out/again.txt"),
        ],
        "cat out/in/out/said.txt",
        Stated::OnThePod,
    );
    let took = run_job(&stage.cluster, &jobs, &pulls, true).await;
    eprintln!("a restricted step pulling and pushing: {took:.1} s");

    let pulled = tempfile::tempdir().expect("a temp dir");
    let (user, password) = generated_login(&stage.client, WORKFLOW).await;
    sdk_pull(
        &address,
        "workflow/restricted-again:v1",
        pulled.path(),
        Some((&user, &password)),
    );
    let again =
        std::fs::read_to_string(pulled.path().join("out/again.txt")).expect("out/again.txt");
    assert_eq!(again, "under restricted\n");
}
