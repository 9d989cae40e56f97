//! Every way a step is refused, each message naming what to fix.

use super::*;

#[test]
fn an_empty_annotation_is_refused_by_name() {
    let message = denied(&pod(&[("input-uri", " ")]));
    assert_eq!(message, format!("annotation {P}input-uri is empty"));
}

#[test]
fn flags_must_be_true_or_false() {
    for key in ["unpack", "debug"] {
        let message = denied(&pod(&[("input-uri", "w/in:v1"), (key, "yes")]));
        assert!(
            message.contains(&format!("{P}{key} is \"yes\"")),
            "{message}"
        );
        assert!(message.contains("\"true\" or \"false\""), "{message}");
    }
}

#[test]
fn names_and_registries_must_be_well_formed() {
    let message = denied(&pod(&[("input-uri", "w/in:v1"), ("oras-env", "Bad_Name")]));
    assert!(
        message.contains(&format!("{P}oras-env")) && message.contains("Secret"),
        "{message}"
    );
    let message = denied(&pod(&[("input-uri", "w/in:v1"), ("oras-cache", "-x")]));
    assert!(message.contains(&format!("{P}oras-cache")), "{message}");
    for registry in ["ftp://host", "host/with/path", "https://"] {
        let message = denied(&pod(&[("input-uri", "w/in:v1"), ("registry", registry)]));
        assert!(
            message.contains(&format!("{P}registry")),
            "{registry}: {message}"
        );
    }
}

#[test]
fn uris_must_be_artifact_references() {
    let message = denied(&pod(&[
        ("input-uri", "Upper/Case:v1"),
        ("input-path", "/d"),
    ]));
    assert!(message.contains(&format!("{P}input-uri")), "{message}");
    assert!(message.contains("\"Upper/Case:v1\""), "{message}");
    let message = denied(&pod(&[
        (
            "output-uri",
            "w/out@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        ),
        ("output-path", "/out"),
    ]));
    assert!(message.contains("pushed to a tag"), "{message}");
}

#[test]
fn a_missing_or_unready_cache_is_named() {
    let object = pod(&[
        ("input-uri", "w/in:v1"),
        ("input-path", "/d"),
        ("oras-cache", "data"),
    ]);
    let StepPlan::Deny(missing) = plan_json(&object, &|_| CacheState::Missing) else {
        panic!("expected a denial");
    };
    let message = missing.to_string();
    assert!(
        message.contains("ArtifactCache \"data\" does not exist in namespace \"workflow\""),
        "{message}"
    );
    let StepPlan::Deny(unready) = plan_json(&object, &|_| CacheState::NotReady {
        reason: "the registry has no ready replica".into(),
        stuck: false,
    }) else {
        panic!("expected a denial");
    };
    assert_eq!(
        unready.to_string(),
        "ArtifactCache \"data\" is not Ready: the registry has no ready replica"
    );
}

#[test]
fn the_default_cache_is_oras() {
    let object = pod(&[("input-uri", "w/in:v1"), ("input-path", "/d")]);
    let asked = std::cell::RefCell::new(Vec::new());
    let lookup = |name: &str| {
        asked.borrow_mut().push(name.to_string());
        CacheState::Missing
    };
    let _ = plan_json(&object, &lookup);
    assert_eq!(*asked.borrow(), ["oras"]);
}

#[test]
fn the_container_annotation_must_name_a_container() {
    let mut object = pod(&[("output-pipe", "out.txt"), ("container", "c")]);
    object["spec"]["containers"] = json!([
        {"name": "a", "command": ["x"]},
        {"name": "b", "command": ["y"]}
    ]);
    let message = denied(&object);
    assert!(
        message.contains("\"c\", which is not a container of the pod (a, b)"),
        "{message}"
    );
}

#[test]
fn outputs_need_the_steps_command_because_an_entrypoint_cannot_be_read() {
    let mut object = pod(&[("output-uri", "w/out:v1"), ("output-path", "/out")]);
    object["spec"]["containers"][0]
        .as_object_mut()
        .unwrap()
        .remove("command");
    let message = denied(&object);
    assert!(
        message.contains("container \"step\" has no command"),
        "{message}"
    );
    assert!(message.contains("ENTRYPOINT"), "{message}");
    // Inputs alone can be mounted, so any image works.
    let inputs = without_command(pod(&[("input-uri", "w/in:v1"), ("input-path", "/d")]));
    assert!(matches!(plan_json(&inputs, &ready), StepPlan::Patch { .. }));
}

#[test]
fn without_command_inputs_need_an_absolute_place_and_the_denial_says_what_to_write() {
    let message = denied(&without_command(pod(&[
        ("input-uri", "w/in:v1"),
        ("input-path", "data"),
    ])));
    assert!(
        message.contains("input-path \"data\" is relative and there is no workingDir"),
        "{message}"
    );
    let message = denied(&without_command(pod(&[("input-uri", "w/in:v1")])));
    assert!(
        message.contains(
            "no input-path and no workingDir for container \"step\", which has no command"
        ),
        "{message}"
    );
    assert!(message.contains("set command (and args)"), "{message}");
}

#[test]
fn without_command_inputs_are_not_mounted_over_an_existing_mount() {
    let mut object = without_command(pod(&[("input-uri", "w/in:v1"), ("input-path", "/data")]));
    object["spec"]["containers"][0]["volumeMounts"] = json!([{"name": "v", "mountPath": "/data/"}]);
    let message = denied(&object);
    assert_eq!(
        message,
        "container \"step\" already mounts a volume at /data, where the inputs would be mounted"
    );
}

#[test]
fn a_controllers_pod_that_pushes_and_restarts_forever_is_refused_saying_what_to_write() {
    let mut object = pod(&[("output-uri", "w/out:v1"), ("output-path", "/out")]);
    object["spec"]["restartPolicy"] = json!("Always");
    object["metadata"]["ownerReferences"] = json!([{
        "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "steps-7d9f", "uid": "u", "controller": true
    }]);
    let message = denied(&object);
    assert!(
        message.contains("its pods are made by ReplicaSet steps-7d9f"),
        "{message}"
    );
    assert!(
        message.contains("run the step as a Job with restartPolicy Never or OnFailure"),
        "{message}"
    );
}

#[test]
fn a_pod_without_containers_is_refused() {
    let object = json!({"metadata": {"annotations": annotations(&[("output-pipe", "o")])}, "spec": {"containers": []}});
    assert_eq!(
        plan_json(&object, &ready),
        StepPlan::Deny(Denial::NoContainers)
    );
}

#[test]
fn a_step_pushing_with_credentials_never_shares_its_process_namespace() {
    let pushes = [("output-uri", "w/out:v1"), ("output-path", "out")];
    for (field, set) in [
        ("shareProcessNamespace", "shareProcessNamespace"),
        ("hostPID", "hostPID"),
    ] {
        // With the cache's credentials, and with its own (`oras-env`).
        for object in [
            pod(&pushes),
            pod(&[pushes[0], pushes[1], ("oras-env", "creds")]),
        ] {
            let mut object = object;
            object["spec"][set] = json!(true);
            let message = denied(&object);
            assert!(
                message.starts_with(&format!("the pod sets {field}: true"))
                    && message.contains("ocifit-push")
                    && message.ends_with(&format!("remove {field}")),
                "{message}"
            );
        }
    }
    // Set false, it is admitted.
    let mut object = pod(&pushes);
    object["spec"]["shareProcessNamespace"] = json!(false);
    admitted(&object);
}

#[test]
fn a_shared_process_namespace_is_admitted_where_no_helper_beside_the_step_holds_credentials() {
    // Inputs only: the puller is an init container, done before the step's containers start.
    let mut object = pod(&[("input-uri", "w/in:v1")]);
    object["spec"]["shareProcessNamespace"] = json!(true);
    admitted(&object);
    // A registry without credentials: the sidecar holds none.
    let mut object = pod(&[
        ("registry", "127.0.0.1:5000"),
        ("output-uri", "w/out:v1"),
        ("output-path", "out"),
    ]);
    object["spec"]["shareProcessNamespace"] = json!(true);
    admitted(&object);
}
