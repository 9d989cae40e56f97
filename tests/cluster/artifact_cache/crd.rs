//! The ArtifactCache CRD in `crds/` on a real kube-apiserver: the example cache is stored with its
//! defaults and reads back as ocifit's Rust type, the workflow example's Jobs pass validation,
//! the CEL rules refuse contradictory specs with their messages (replicas above 1 without a bucket among
//! them), the schema's bounds an over-long
//! string, an over-full list or map and an over-long map key naming the field, and `kubectl get ac` prints the
//! printer columns. With `ocifit run` as its controller, a deleted or changed owned object is put
//! back and an Event on the cache says what and why. A step's admission on a replica whose store
//! lags reads the cache again from the apiserver.

#![allow(clippy::unwrap_used)] // helpers outside #[test] fns fail the test loudly on bad setup

use std::path::PathBuf;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::events::v1::Event;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams};
use ocifit::admission::Route;
use ocifit::api::ArtifactCache;
use ocifit::artifact_cache::{Helper, StepRegistries};
use ocifit::artifact_cache::{PODS, StepPods, Steps, read_cache_again};
use ocifit_testkit::{Cluster, SharedCluster, SharedClusterGuard, apply_crd_dir, create_namespace};

use crate::support::{Controller, Env};

static CLUSTER: SharedCluster = SharedCluster::new(Cluster::builder);

/// The registry image these caches name, on the controller's allow-list.
const IMAGES: &str = "--artifact-cache-images=registry:3";

/// The shared cluster with the repository's CRDs and the `workflow` namespace (idempotent).
async fn cluster() -> SharedClusterGuard {
    let cluster = CLUSTER.get().await.expect("the shared cluster");
    let client = cluster.client().unwrap();
    let names = apply_crd_dir(&client, &repo().join("crds")).await.unwrap();
    assert!(
        names.contains(&"artifactcaches.ocifit.io".to_string()),
        "{names:?}"
    );
    // A second test finds the namespace there already.
    let _ = create_namespace(&client, "workflow").await;
    cluster
}

fn repo() -> PathBuf {
    ocifit_testkit::repo_root()
}

fn cache(name: &str, spec: &str) -> String {
    format!(
        "apiVersion: ocifit.io/v1alpha1\nkind: ArtifactCache\nmetadata:\n  name: {name}\n  namespace: workflow\nspec:\n{spec}"
    )
}

async fn refused(cluster: &SharedClusterGuard, manifest: &str) -> String {
    cluster
        .kubectl_with_input(["apply", "-f", "-"], manifest)
        .await
        .unwrap_err()
        .to_string()
}

#[tokio::test]
async fn the_example_cache_is_stored_with_its_defaults() {
    let cluster = cluster().await;
    let example = repo().join("example/artifacts/cache.yaml");
    cluster
        .kubectl(["apply", "-f", example.to_str().unwrap()])
        .await
        .unwrap();
    let stored = Api::<ArtifactCache>::namespaced(cluster.client().unwrap(), "workflow")
        .get("oras")
        .await
        .unwrap();
    assert!(stored.spec.deploy, "deploy defaults to true");
    assert!(!stored.spec.plain_http);
    assert!(stored.spec.storage.unwrap().empty_dir.is_some());

    cluster
        .kubectl_with_input(
            ["apply", "-f", "-"],
            &cache("auth", "  htpasswdSecretRef: {name: cache-users}\n"),
        )
        .await
        .unwrap();
    let auth = Api::<ArtifactCache>::namespaced(cluster.client().unwrap(), "workflow")
        .get("auth")
        .await
        .unwrap();
    assert_eq!(auth.spec.htpasswd_secret_ref.unwrap().key, "htpasswd");
}

#[tokio::test]
async fn the_workflow_examples_jobs_pass_the_apiservers_validation() {
    let cluster = cluster().await;
    let example = repo().join("example/artifacts/workflow.yaml");
    let out = cluster
        .kubectl(["apply", "--dry-run=server", "-f", example.to_str().unwrap()])
        .await
        .unwrap();
    for job in ["step-one", "step-two"] {
        assert!(
            out.contains(&format!("job.batch/{job} created (server dry run)")),
            "{out}"
        );
    }
}

#[tokio::test]
async fn contradictory_specs_are_refused_by_the_cel_rules() {
    let cluster = cluster().await;
    let err = refused(
        &cluster,
        &cache("both", "  endpoint: registry.example.com\n"),
    )
    .await;
    assert!(
        err.contains("set endpoint exactly when deploy is false"),
        "{err}"
    );
    let err = refused(&cluster, &cache("nowhere", "  deploy: false\n")).await;
    assert!(
        err.contains("set endpoint exactly when deploy is false"),
        "{err}"
    );
    let err = refused(
        &cluster,
        &cache(
            "external-image",
            "  deploy: false\n  endpoint: registry.example.com\n  image: registry:3\n",
        ),
    )
    .await;
    assert!(err.contains("cannot be set with deploy: false"), "{err}");
    let err = refused(
        &cluster,
        &cache(
            "two-stores",
            "  storage:\n    emptyDir: {sizeLimit: 1Gi}\n    persistentVolumeClaim: {size: 1Gi}\n",
        ),
    )
    .await;
    let one_store =
        "set exactly one of storage.emptyDir, storage.persistentVolumeClaim and storage.s3";
    assert!(err.contains(one_store), "{err}");
    let s3 = "    s3: {bucket: artifacts, endpoint: \"http://10.0.0.9:8333\", credentialsSecretRef: {name: keys}}\n";
    let err = refused(
        &cluster,
        &cache(
            "disk-and-bucket",
            &format!("  storage:\n    emptyDir: {{sizeLimit: 1Gi}}\n{s3}"),
        ),
    )
    .await;
    assert!(err.contains(one_store), "{err}");
    // Replicas share content only through a bucket.
    for (name, storage) in [
        ("replicas-default", String::new()),
        (
            "replicas-disk",
            "  storage:\n    emptyDir: {sizeLimit: 1Gi}\n".to_string(),
        ),
    ] {
        let err = refused(&cluster, &cache(name, &format!("  replicas: 2\n{storage}"))).await;
        assert!(
            err.contains("replicas above 1 need storage.s3"),
            "{name}: {err}"
        );
    }
    cluster
        .kubectl_with_input(
            ["apply", "-f", "-"],
            &cache(
                "replicas-bucket",
                &format!("  replicas: 2\n  storage:\n{s3}"),
            ),
        )
        .await
        .unwrap();
    let err = refused(
        &cluster,
        &cache(
            "bucket-path",
            "  storage:\n    s3: {bucket: artifacts, endpoint: \"http://h/p\", credentialsSecretRef: {name: keys}}\n",
        ),
    )
    .await;
    assert!(err.contains("spec.storage.s3.endpoint"), "{err}");
    let err = refused(
        &cluster,
        &cache(
            "two-cas",
            "  storage:\n    s3: {bucket: artifacts, endpoint: \"https://h\", credentialsSecretRef: {name: keys}, ca: {secretKeyRef: {name: a, key: b}, configMapKeyRef: {name: a, key: b}}}\n",
        ),
    )
    .await;
    assert!(
        err.contains("set exactly one of ca.secretKeyRef and ca.configMapKeyRef"),
        "{err}"
    );
    let err = refused(
        &cluster,
        &cache(
            "bad-endpoint",
            "  deploy: false\n  endpoint: \"https://x/y\"\n",
        ),
    )
    .await;
    assert!(err.contains("spec.endpoint"), "{err}");
}

#[tokio::test]
async fn an_over_long_or_over_full_spec_is_refused_naming_the_field() {
    let cluster = cluster().await;
    let labels: String = (0..17).map(|n| format!("    l{n}: v\n")).collect();
    let err = refused(
        &cluster,
        &cache("many-labels", &format!("  nodeSelector:\n{labels}")),
    )
    .await;
    assert!(err.contains("spec.nodeSelector"), "{err}");
    assert!(err.contains("must have at most 16 items"), "{err}");
    let long = "k".repeat(1025);
    let err = refused(
        &cluster,
        &cache(
            "long-toleration",
            &format!("  tolerations:\n  - key: {long}\n    operator: Exists\n"),
        ),
    )
    .await;
    assert!(err.contains("spec.tolerations[0].key"), "{err}");
    assert!(err.contains("may not be more than 1024 bytes"), "{err}");
    let key = "k".repeat(318);
    let err = refused(
        &cluster,
        &cache(
            "long-label-key",
            &format!("  nodeSelector:\n    {key}: v\n"),
        ),
    )
    .await;
    assert!(err.contains("keys must be at most 317 characters"), "{err}");
    let quantity = "1".repeat(65);
    let err = refused(
        &cluster,
        &cache(
            "long-quantity",
            &format!("  resources:\n    limits:\n      memory: \"{quantity}\"\n"),
        ),
    )
    .await;
    assert!(err.contains("spec.resources.limits.memory"), "{err}");
    // Within the bounds, stored.
    cluster
        .kubectl_with_input(
            ["apply", "-f", "-"],
            &cache(
                "bounded",
                &format!("  nodeSelector:\n    {}: v\n", "k".repeat(317)),
            ),
        )
        .await
        .unwrap();
}

#[tokio::test]
async fn kubectl_get_ac_prints_the_printer_columns() {
    let cluster = cluster().await;
    cluster
        .kubectl_with_input(
            ["apply", "-f", "-"],
            &cache(
                "external",
                "  deploy: false\n  endpoint: 10.0.0.12:5000\n  plainHTTP: true\n",
            ),
        )
        .await
        .unwrap();
    let table = cluster
        .kubectl(["get", "ac", "-n", "workflow", "external"])
        .await
        .unwrap();
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "READY", "ENDPOINT", "AGE"]);
    assert!(
        table.lines().nth(1).unwrap().starts_with("external "),
        "{table}"
    );
}

/// The controller puts back what someone deleted or changed, and says so on the cache: a Warning
/// `ObjectRestored` naming the object and what happened to it.
#[tokio::test]
async fn a_deleted_or_changed_owned_object_is_put_back_with_an_event_saying_so() {
    let env = Env::start(crate::support::ocifit_binary()).await;
    create_namespace(&env.client, "workflow").await.unwrap();
    let _controller = Controller::start(&env, "cache-restore", &[IMAGES]).await;
    env.cluster
        .kubectl_with_input(
            ["apply", "-f", "-"],
            &cache("restore", "  image: registry:3\n"),
        )
        .await
        .unwrap();
    let caches = Api::<ArtifactCache>::namespaced(env.client.clone(), "workflow");
    eventually("the cache's status", async || {
        let status = caches.get("restore").await.ok()?.status?;
        (status.observed_generation == Some(1)).then_some(())
    })
    .await;
    assert!(
        restorations(&env.client).await.is_empty(),
        "creating the objects is no put back"
    );

    let services = Api::<Service>::namespaced(env.client.clone(), "workflow");
    let old = services.get("restore-registry").await.unwrap();
    services
        .delete("restore-registry", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the Service created again", async || {
        let service = services.get_opt("restore-registry").await.ok()??;
        (service.metadata.uid != old.metadata.uid).then_some(())
    })
    .await;
    let deleted = "its Service restore-registry was deleted; created again";
    eventually("an Event on the Service put back", async || {
        let found = restorations(&env.client).await;
        found
            .iter()
            .any(|(_, note, _)| note == deleted)
            .then_some(())
    })
    .await;

    let deployments = Api::<Deployment>::namespaced(env.client.clone(), "workflow");
    deployments
        .patch(
            "restore-registry",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"replicas": 0}})),
        )
        .await
        .unwrap();
    eventually("the Deployment back at one replica", async || {
        let deployment = deployments.get("restore-registry").await.ok()?;
        (deployment.spec?.replicas == Some(1)).then_some(())
    })
    .await;
    let changed = "its Deployment restore-registry was changed (spec); put back as the cache asks";
    let found = eventually("an Event on the Deployment put back", async || {
        let found = restorations(&env.client).await;
        found
            .iter()
            .any(|(_, note, _)| note == changed)
            .then_some(found)
    })
    .await;
    let mut related: Vec<&str> = found.iter().map(|(_, _, r)| r.as_str()).collect();
    related.sort_unstable();
    assert_eq!(
        related,
        ["Deployment/restore-registry", "Service/restore-registry"],
        "one Event per object put back: {found:?}"
    );
    assert!(
        found.iter().all(|(type_, _, _)| type_ == "Warning"),
        "{found:?}"
    );
}

/// A Service of the cache's registry name that someone else made stays theirs: ocifit writes
/// nothing (not the Service, not a Deployment), the cache says which object is in the way with a
/// Warning Event, and deleting the cache (foreground: it is gone only once every object it owns
/// is) leaves the Service as it was.
#[tokio::test]
async fn an_object_the_cache_does_not_own_is_left_untouched_and_named() {
    let env = Env::start_with(
        crate::support::ocifit_binary(),
        Cluster::builder().with_controller_manager(),
    )
    .await;
    create_namespace(&env.client, "workflow").await.unwrap();
    let services = Api::<Service>::namespaced(env.client.clone(), "workflow");
    let theirs: Service = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "taken-registry", "labels": {"team": "theirs"}},
        "spec": {"selector": {"app": "theirs"}, "ports": [{"port": 8080}]}
    }))
    .unwrap();
    let before = services
        .create(&kube::api::PostParams::default(), &theirs)
        .await
        .unwrap();
    let _controller = Controller::start(&env, "cache-conflict", &[IMAGES]).await;
    env.cluster
        .kubectl_with_input(
            ["apply", "-f", "-"],
            &cache("taken", "  image: registry:3\n"),
        )
        .await
        .unwrap();
    let caches = Api::<ArtifactCache>::namespaced(env.client.clone(), "workflow");
    let condition = eventually("the cache naming the conflict", async || {
        let status = caches.get("taken").await.ok()?.status?;
        let ready = status.conditions.into_iter().find(|c| c.type_ == "Ready")?;
        (ready.reason == "Conflict").then_some(ready)
    })
    .await;
    assert_eq!(condition.status, "False");
    assert!(
        condition.message.starts_with(
            "the Service workflow/taken-registry exists and is not owned by this ArtifactCache"
        ),
        "{}",
        condition.message
    );
    let warned = eventually("a Warning Event saying so", async || {
        let events = Api::<Event>::namespaced(env.client.clone(), "workflow")
            .list(&Default::default())
            .await
            .ok()?;
        events.items.into_iter().find(|e| {
            e.reason.as_deref() == Some("Conflict")
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("taken")
        })
    })
    .await;
    assert_eq!(warned.type_.as_deref(), Some("Warning"));
    let now = services.get("taken-registry").await.unwrap();
    assert_eq!(
        now.metadata.resource_version,
        before.metadata.resource_version
    );
    assert_eq!(now.metadata.owner_references, None);
    let deployments = Api::<Deployment>::namespaced(env.client.clone(), "workflow");
    assert!(
        deployments
            .get_opt("taken-registry")
            .await
            .unwrap()
            .is_none()
    );

    caches
        .delete("taken", &DeleteParams::foreground())
        .await
        .unwrap();
    eventually("the cache gone with everything it owns", async || {
        caches.get_opt("taken").await.ok()?.is_none().then_some(())
    })
    .await;
    let after = services.get("taken-registry").await.unwrap();
    assert_eq!(after.metadata.uid, before.metadata.uid);
    assert_eq!(
        after.metadata.resource_version,
        before.metadata.resource_version
    );
}

/// The `ObjectRestored` Events on the cache `restore`: (type, note, related `Kind/name`).
async fn restorations(client: &kube::Client) -> Vec<(String, String, String)> {
    let events = Api::<Event>::namespaced(client.clone(), "workflow")
        .list(&Default::default())
        .await
        .unwrap();
    events
        .items
        .into_iter()
        .filter(|e| {
            e.reason.as_deref() == Some("ObjectRestored")
                && e.regarding.as_ref().is_some_and(|r| {
                    r.kind.as_deref() == Some("ArtifactCache")
                        && r.name.as_deref() == Some("restore")
                })
        })
        .map(|e| {
            let related = e.related.unwrap_or_default();
            (
                e.type_.unwrap_or_default(),
                e.note.unwrap_or_default(),
                format!(
                    "{}/{}",
                    related.kind.unwrap_or_default(),
                    related.name.unwrap_or_default()
                ),
            )
        })
        .collect()
}

async fn eventually<T>(what: &str, mut check: impl AsyncFnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "{what} not seen within 30 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The leader wrote Ready, this replica's store has not heard yet (here: it never will): the step
/// is admitted on the status read again from the apiserver, not denied `CacheNotReady`.
#[tokio::test]
async fn a_step_is_admitted_on_the_ready_status_the_apiserver_has_when_the_store_lags() {
    let cluster = cluster().await;
    let client = cluster.client().unwrap();
    cluster
        .kubectl_with_input(
            ["apply", "-f", "-"],
            &cache("lagging", "  image: registry:3\n"),
        )
        .await
        .unwrap();
    let caches = Api::<ArtifactCache>::namespaced(client.clone(), "workflow");
    let status = serde_json::json!({"status": {
        "observedGeneration": 1, "endpoint": "10.0.0.9:5000", "plainHttp": true,
        "conditions": [{"type": "Ready", "status": "True", "reason": "Available",
                        "message": "ready", "observedGeneration": 1,
                        "lastTransitionTime": "2026-01-01T00:00:00Z"}]}});
    caches
        .patch_status("lagging", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();

    let (store, _writer) = kube::runtime::reflector::store::<ArtifactCache>();
    let steps = Steps {
        caches: store,
        helper: Some(Helper {
            image: "registry.local/ocifit/ocifit:test".into(),
            pull_policy: None,
        }),
        read_again: read_cache_again(&client),
        registries: StepRegistries::default(),
    };
    let route = Route::new(PODS, StepPods(steps));
    let review = serde_json::json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "0b0c7e2e-0000-4000-8000-000000000002",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": "workflow", "operation": "CREATE",
            "userInfo": {"username": "admin"},
            "object": {
                "metadata": {"name": "step", "annotations": {
                    "oras.converged-computing.github.io/oras-cache": "lagging",
                    "oras.converged-computing.github.io/input-uri": "data:v1"}},
                "spec": {"restartPolicy": "Never", "containers": [
                    {"name": "main", "image": "busybox", "command": ["true"], "workingDir": "/work"}]}},
            "dryRun": false,
        }
    });
    // The admission host plans on the blocking pool; so does this.
    let answer =
        tokio::task::spawn_blocking(move || route.answer(&serde_json::to_vec(&review).unwrap()))
            .await
            .unwrap();
    let body = String::from_utf8_lossy(&answer.body).into_owned();
    assert_eq!(
        (answer.outcome, answer.reason),
        ("patched", "StepInjected"),
        "{body}"
    );
    assert!(body.contains("\"allowed\":true"), "{body}");
}
