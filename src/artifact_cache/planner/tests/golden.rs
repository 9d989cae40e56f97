//! The patches of a few step shapes, byte for byte as written before the helpers' containers were
//! written as JSON (they were typed `Container`s turned into JSON values): the apiserver stores
//! what it stored then. `OCIFIT_REGENERATE=1` rewrites the file, which is then read in review.

use super::*;

const GOLDEN: &str = "src/artifact_cache/planner/tests/golden-patches.json";

fn no_credentials(name: &str) -> CacheState {
    assert_eq!(name, "oras");
    CacheState::Ready {
        endpoint: ENDPOINT.into(),
        plain_http: false,
        credentials: None,
    }
}

fn patch_of(plan: StepPlan) -> Value {
    match plan {
        StepPlan::Patch { patch, .. } => {
            let value: Value = serde_json::from_slice(patch.as_bytes()).unwrap();
            // Fields written in the order of their names, as the JSON maps wrote them: the
            // apiserver reads the bytes it read before, not only the same JSON.
            assert_eq!(patch.as_bytes(), serde_json::to_vec(&value).unwrap());
            value
        }
        other => panic!("expected a patch, got {other:?}"),
    }
}

/// Each shape: what it is, and its patch.
fn shapes() -> Vec<(&'static str, Value)> {
    let inputs_and_outputs = pod(&[
        ("input-uri", "w/in:v1"),
        (
            "input-uri_2",
            "w/other@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        ),
        ("output-uri", "w/out:v1"),
        ("output-path", "/out"),
        ("output-pipe", "/out/log.txt"),
    ]);
    let mut own_secret_debug = pod(&[
        ("output-uri", "w/out:v2"),
        ("oras-env", "oras-creds"),
        ("debug", "true"),
        ("unpack", "false"),
    ]);
    own_secret_debug["spec"]["securityContext"] = json!({"runAsUser": 1000});
    own_secret_debug["spec"]["containers"][0]["securityContext"] = json!({"runAsGroup": 3000});
    let mut mounted_inputs = pod(&[("input-uri", "w/in:v1"), ("input-path", "/data")]);
    mounted_inputs["spec"]["containers"][0]
        .as_object_mut()
        .unwrap()
        .remove("command");
    mounted_inputs["spec"]["initContainers"] = json!([{"name": "first", "image": "busybox"}]);
    mounted_inputs["spec"]["volumes"] = json!([{"name": "v", "emptyDir": {}}]);
    mounted_inputs["metadata"]["labels"] = json!({"app": "x"});
    let registry = pod(&[
        ("registry", "http://127.0.0.1:5000"),
        ("input-uri", "w/in:v1"),
        ("output-uri", "w/out:v1"),
    ]);
    let job: Job = serde_json::from_value(json!({
        "metadata": {"name": "j", "annotations": annotations(&[("input-uri", "w/in:v1"), ("output-uri", "w/out:v1")])},
        "spec": {"template": {"spec": {"restartPolicy": "OnFailure", "containers": [
            {"name": "s", "image": "busybox", "command": ["sh", "-c", "true"], "terminationMessagePath": "/tmp/end"}
        ]}}}
    }))
    .unwrap();
    vec![
        (
            "inputs and outputs, the cache's credentials",
            patch_of(plan_json(&inputs_and_outputs, &ready)),
        ),
        (
            "own secret, debug, no unpack, a user and a group",
            patch_of(plan_json(&own_secret_debug, &no_credentials)),
        ),
        (
            "inputs mounted beside existing lists",
            patch_of(plan_json(&mounted_inputs, &ready)),
        ),
        (
            "a registry named on the step",
            patch_of(plan_json(&registry, &ready)),
        ),
        (
            "a Job",
            patch_of(plan_job(&job, "workflow", &ready, &helper(), &allowed())),
        ),
    ]
}

#[test]
fn every_shapes_patch_is_byte_for_byte_the_one_written_before() {
    let written: Value = Value::Array(
        shapes()
            .into_iter()
            .map(|(what, patch)| json!({"shape": what, "patch": patch}))
            .collect(),
    );
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(GOLDEN);
    if std::env::var_os("OCIFIT_REGENERATE").is_some() {
        std::fs::write(
            &path,
            serde_json::to_string_pretty(&written).unwrap() + "\n",
        )
        .unwrap();
    }
    let golden: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    for (now, before) in written
        .as_array()
        .unwrap()
        .iter()
        .zip(golden.as_array().unwrap())
    {
        assert_eq!(
            serde_json::to_string(now).unwrap(),
            serde_json::to_string(before).unwrap(),
            "{}",
            before["shape"]
        );
    }
    assert_eq!(
        written.as_array().unwrap().len(),
        golden.as_array().unwrap().len()
    );
}
