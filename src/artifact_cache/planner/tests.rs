//! The planner on pods and Jobs as users write them: each test applies the patch to the object as
//! sent and reads the result back, so what is asserted is what the apiserver would store.

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Container, Pod};
use serde_json::{Value, json};

use super::helpers::{LAUNCHER_DIR, PREPARE, PUSH, RUN_DIR};
use super::read_step::{StepJob, StepPod};
use super::*;
use crate::step_helper::{Direction, user};

mod golden;
mod held;
mod jobs;
mod refusals;
mod restricted;

const P: &str = "oras.converged-computing.github.io/";
const ENDPOINT: &str = "10.0.0.17:5000";
const CREDENTIALS: &str = "oras-registry-credentials-x7k2p";

/// A written patch's operations, to apply them.
fn operations(patch: &WrittenPatch) -> json_patch::Patch {
    serde_json::from_slice(patch.as_bytes()).unwrap()
}

fn helper() -> Helper {
    Helper {
        image: "ghcr.io/ocifit/ocifit:0.1.0".into(),
        pull_policy: Some("IfNotPresent".into()),
    }
}

fn ready(name: &str) -> CacheState {
    assert_eq!(name, "oras", "the planner asked for another cache");
    CacheState::Ready {
        endpoint: ENDPOINT.into(),
        plain_http: true,
        credentials: Some(CREDENTIALS.into()),
    }
}

/// `--allowed-registries` as these tests run with.
fn allowed() -> StepRegistries {
    StepRegistries::new(&["127.0.0.1:5000".into(), "ghcr.io".into()]).unwrap()
}

fn annotations(pairs: &[(&str, &str)]) -> Value {
    let map: serde_json::Map<String, Value> = pairs
        .iter()
        .map(|(k, v)| (format!("{P}{k}"), Value::from(*v)))
        .collect();
    Value::Object(map)
}

/// A pod with one container `step` running `cat` with these contract annotations.
fn pod(pairs: &[(&str, &str)]) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "step-1", "annotations": annotations(pairs)},
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "step", "image": "busybox", "command": ["cat"], "args": ["data/in.txt"]}]
        }
    })
}

fn plan_json(object: &Value, caches: &dyn Fn(&str) -> CacheState) -> StepPlan {
    // Read as the step routes read a review's pod.
    let StepPod(pod) = serde_json::from_value(object.clone()).unwrap();
    plan_pod(&pod, "workflow", caches, &helper(), &allowed())
}

/// Plans and applies: the pod as stored, and the warnings.
fn admitted(object: &Value) -> (Pod, Vec<String>) {
    match plan_json(object, &ready) {
        StepPlan::Patch { patch, warnings } => {
            let mut patched = object.clone();
            json_patch::patch(&mut patched, &operations(&patch)).unwrap();
            (serde_json::from_value(patched).unwrap(), warnings)
        }
        other => panic!("expected a patch, got {other:?}"),
    }
}

fn denied(object: &Value) -> String {
    match plan_json(object, &ready) {
        StepPlan::Deny(denial) => denial.to_string(),
        other => panic!("expected a denial, got {other:?}"),
    }
}

fn init<'a>(pod: &'a Pod, name: &str) -> &'a Container {
    pod.spec
        .as_ref()
        .unwrap()
        .init_containers
        .iter()
        .flatten()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no init container {name}"))
}

fn step(pod: &Pod) -> &Container {
    &pod.spec.as_ref().unwrap().containers[0]
}

/// The names of the pod's init containers and volumes, in order.
fn names(pod: &Pod) -> (Vec<String>, Vec<String>) {
    let spec = pod.spec.as_ref().unwrap();
    let inits = spec
        .init_containers
        .iter()
        .flatten()
        .map(|c| c.name.clone())
        .collect();
    let volumes = spec
        .volumes
        .iter()
        .flatten()
        .map(|v| v.name.clone())
        .collect();
    (inits, volumes)
}

fn args(container: &Container) -> Vec<&str> {
    container
        .args
        .iter()
        .flatten()
        .map(String::as_str)
        .collect()
}

fn mounts(container: &Container) -> BTreeMap<String, String> {
    container
        .volume_mounts
        .iter()
        .flatten()
        .map(|m| (m.name.clone(), m.mount_path.clone()))
        .collect()
}

#[test]
fn a_pod_without_the_contract_is_not_a_step() {
    let object = json!({"metadata": {"name": "x", "annotations": {"other/key": "v"}}, "spec": {"containers": [{"name": "c"}]}});
    assert_eq!(plan_json(&object, &ready), StepPlan::NotAStep);
    let bare = json!({"metadata": {"name": "x"}, "spec": {"containers": [{"name": "c"}]}});
    assert_eq!(plan_json(&bare, &ready), StepPlan::NotAStep);
}

/// The step's container without its `command`: the image's ENTRYPOINT runs.
fn without_command(mut object: Value) -> Value {
    object["spec"]["containers"][0]
        .as_object_mut()
        .unwrap()
        .remove("command");
    object
}

#[test]
fn inputs_are_pulled_by_an_init_container_and_copied_into_place_by_the_launcher() {
    let (pod, warnings) = admitted(&pod(&[
        ("input-uri", "dinosaur/hello-world:one"),
        ("input-path", "/data"),
    ]));
    assert!(warnings.is_empty(), "{warnings:?}");
    let prepare = init(&pod, PREPARE);
    assert_eq!(
        args(prepare),
        [
            "artifact",
            "prepare",
            "--input",
            "10.0.0.17:5000/dinosaur/hello-world:one",
            "--into",
            "/ocifit/inputs",
            "--launcher",
            LAUNCHER_DIR,
            "--plain-http",
            "--termination-log",
            "/dev/termination-log"
        ]
    );
    // Nothing is mounted over /data: whatever the image has there stays visible.
    assert_eq!(
        mounts(step(&pod)),
        BTreeMap::from([
            ("ocifit-inputs".into(), "/ocifit/inputs".into()),
            ("ocifit-run".into(), RUN_DIR.into())
        ])
    );
    let command = step(&pod).command.clone().unwrap();
    assert_eq!(
        command[4..],
        [
            "artifact",
            "launch",
            "--run",
            "/ocifit/run",
            "--termination-log",
            "/dev/termination-log",
            "--inputs",
            "/ocifit/inputs",
            "--input-path",
            "/data",
            "--",
            "cat"
        ]
    );
    assert_eq!(step(&pod).args, Some(vec!["data/in.txt".to_string()]));
    assert_eq!(names(&pod).0, [PREPARE], "no pusher without outputs");
}

#[test]
fn without_input_path_the_launcher_copies_into_the_working_directory() {
    // The oras-operator's fan-in: no input-path, no workingDir (the image's WORKDIR decides).
    let (pod, _) = admitted(&pod(&[
        ("input-uri_1", "w/one:v1"),
        ("input-uri_2", "w/two:v1"),
    ]));
    let command = step(&pod).command.clone().unwrap();
    assert!(
        command
            .windows(2)
            .any(|w| w == ["--inputs", "/ocifit/inputs"]),
        "{command:?}"
    );
    assert!(
        !command.contains(&"--input-path".to_string()),
        "{command:?}"
    );
}

#[test]
fn a_step_without_command_gets_its_inputs_mounted_at_input_path() {
    let (pod, warnings) = admitted(&without_command(pod(&[
        ("input-uri", "dinosaur/hello-world:one"),
        ("input-path", "/data"),
    ])));
    assert!(warnings.is_empty(), "{warnings:?}");
    let prepare = init(&pod, PREPARE);
    assert_eq!(
        prepare.image.as_deref(),
        Some("ghcr.io/ocifit/ocifit:0.1.0")
    );
    assert_eq!(
        args(prepare),
        [
            "artifact",
            "prepare",
            "--input",
            "10.0.0.17:5000/dinosaur/hello-world:one",
            "--into",
            "/ocifit/inputs",
            "--plain-http",
            "--termination-log",
            "/dev/termination-log"
        ]
    );
    assert_eq!(
        mounts(prepare),
        BTreeMap::from([("ocifit-inputs".into(), "/ocifit/inputs".into())])
    );
    assert_eq!(
        mounts(step(&pod)),
        BTreeMap::from([("ocifit-inputs".into(), "/data".into())])
    );
    // No command to run under the launcher: the image's entrypoint runs as it is.
    assert_eq!(step(&pod).command, None);
    assert_eq!(step(&pod).args, Some(vec!["data/in.txt".to_string()]));
    assert_eq!(
        names(&pod),
        (vec![PREPARE.to_string()], vec!["ocifit-inputs".to_string()])
    );
    let marker = &pod.metadata.annotations.unwrap()[step::INJECTED];
    assert_eq!(marker, "ArtifactCache oras at 10.0.0.17:5000");
    assert_eq!(super::cache_of(marker), Some("oras"));
    assert_eq!(
        pod.metadata.labels.unwrap()[step::STEP_LABEL],
        step::STEP_LABEL_VALUE,
        "the step's pods are watched by this label"
    );
}

#[test]
fn a_pod_with_labels_keeps_them_and_a_registry_step_names_no_cache() {
    let mut object = pod(&[("registry", "http://127.0.0.1:5000"), ("input-uri", "a:1")]);
    object["metadata"]["labels"] = json!({"app": "breakfast"});
    let (pod, _) = admitted(&object);
    let labels = pod.metadata.labels.unwrap();
    assert_eq!(labels["app"], "breakfast");
    assert_eq!(labels[step::STEP_LABEL], step::STEP_LABEL_VALUE);
    assert_eq!(
        super::cache_of(&pod.metadata.annotations.unwrap()[step::INJECTED]),
        None
    );
}

#[test]
fn several_inputs_are_pulled_in_the_order_of_their_numbers_then_other_suffixes_by_name() {
    let (pod, _) = admitted(&pod(&[
        ("input-uri_model", "w/model:t"),
        ("input-uri_10", "w/ten:t"),
        ("input-uri_2", "w/two:t"),
        ("input-uri", "w/plain:t"),
        ("input-uri_1", "w/one:t"),
        ("input-path", "/data"),
    ]));
    let pulled: Vec<&str> = args(init(&pod, PREPARE))
        .windows(2)
        .filter(|w| w[0] == "--input")
        .map(|w| w[1])
        .collect();
    assert_eq!(
        pulled,
        [
            "10.0.0.17:5000/w/plain:t",
            "10.0.0.17:5000/w/one:t",
            "10.0.0.17:5000/w/two:t",
            "10.0.0.17:5000/w/ten:t",
            "10.0.0.17:5000/w/model:t"
        ]
    );
}

#[test]
fn outputs_are_pushed_by_a_native_sidecar_after_the_step_runs_under_the_launcher() {
    let (pod, _) = admitted(&pod(&[
        ("output-uri", "dinosaur/hello-world:pancakes"),
        ("output-path", "results"),
    ]));
    let push = init(&pod, PUSH);
    assert_eq!(push.restart_policy.as_deref(), Some("Always"));
    assert_eq!(
        args(push),
        [
            "artifact",
            "deliver",
            "--run",
            RUN_DIR,
            "--to",
            "10.0.0.17:5000/dinosaur/hello-world:pancakes",
            "--termination-log",
            "/dev/termination-log",
            "--plain-http"
        ]
    );
    let prepare = init(&pod, PREPARE);
    assert_eq!(
        args(prepare),
        [
            "artifact",
            "prepare",
            "--into",
            "/ocifit/inputs",
            "--launcher",
            LAUNCHER_DIR,
            "--plain-http",
            "--termination-log",
            "/dev/termination-log"
        ]
    );
    assert_eq!(
        names(&pod).0,
        [PREPARE, PUSH],
        "pulled and installed before the pusher starts"
    );
    let command = step(&pod).command.clone().unwrap();
    assert_eq!(
        command,
        [
            "/ocifit/run/bin/ld.so",
            "--library-path",
            "/ocifit/run/bin",
            "/ocifit/run/bin/ocifit",
            "artifact",
            "launch",
            "--run",
            "/ocifit/run",
            "--termination-log",
            "/dev/termination-log",
            "--push",
            "results",
            "--",
            "cat"
        ]
    );
    assert_eq!(
        step(&pod).args,
        Some(vec!["data/in.txt".to_string()]),
        "args follow the original command"
    );
    assert_eq!(
        mounts(step(&pod)),
        BTreeMap::from([("ocifit-run".into(), RUN_DIR.into())])
    );
    for helper in [prepare, push] {
        assert_eq!(mounts(helper)["ocifit-run"], RUN_DIR);
    }
}

#[test]
fn output_pipe_alone_runs_the_launcher_without_a_pusher() {
    let (pod, _) = admitted(&pod(&[("output-pipe", "out.txt")]));
    let command = step(&pod).command.clone().unwrap();
    assert!(
        command.windows(2).any(|w| w == ["--pipe", "out.txt"]),
        "{command:?}"
    );
    assert!(!command.contains(&"--push".to_string()), "{command:?}");
    assert_eq!(names(&pod).0, [PREPARE]);
}

#[test]
fn without_output_path_the_working_directory_is_pushed() {
    let (pod, _) = admitted(&pod(&[
        ("output-uri", "w/out:v1"),
        ("output-pipe", "pancakes.txt"),
    ]));
    let command = step(&pod).command.clone().unwrap();
    assert!(
        command.windows(2).any(|w| w == ["--push", "."]),
        "{command:?}"
    );
    assert!(
        command.windows(2).any(|w| w == ["--pipe", "pancakes.txt"]),
        "{command:?}"
    );
}

/// Each variable of a helper: its name, the Secret and key it comes from, whether optional.
fn wired(pod: &Pod, name: &str) -> Vec<(String, String, String, Option<bool>)> {
    assert!(
        init(pod, name).env_from.is_none(),
        "{name} gets a whole Secret"
    );
    init(pod, name)
        .env
        .iter()
        .flatten()
        .map(|e| {
            assert_eq!(e.value, None, "no value in the spec");
            let from = e
                .value_from
                .as_ref()
                .unwrap()
                .secret_key_ref
                .as_ref()
                .unwrap();
            (
                e.name.clone(),
                from.name.clone(),
                from.key.clone(),
                from.optional,
            )
        })
        .collect()
}

fn variable(
    name: &str,
    secret: &str,
    key: &str,
    optional: bool,
) -> (String, String, String, Option<bool>) {
    (name.into(), secret.into(), key.into(), Some(optional))
}

#[test]
fn credentials_reach_the_helpers_by_reference_each_only_its_direction_and_never_the_step() {
    let (pod, _) = admitted(&pod(&[
        ("input-uri", "w/in:v1"),
        ("input-path", "/data"),
        ("output-uri", "w/out:v1"),
        ("output-path", "/out"),
        ("oras-env", "oras-creds"),
    ]));
    // The puller never holds the push password, the sidecar beside the step never the pull one.
    assert_eq!(
        wired(&pod, PREPARE),
        [
            variable("ORAS_USER", "oras-creds", "ORAS_USER", false),
            variable("ORAS_PULL_PASS", "oras-creds", "ORAS_PULL_PASS", true),
        ]
    );
    assert_eq!(
        wired(&pod, PUSH),
        [
            variable("ORAS_USER", "oras-creds", "ORAS_USER", false),
            variable("ORAS_PUSH_PASS", "oras-creds", "ORAS_PUSH_PASS", true),
        ]
    );
    assert!(step(&pod).env.is_none() && step(&pod).env_from.is_none());
    let stored = serde_json::to_string(&pod.spec.as_ref().unwrap().containers).unwrap();
    assert!(
        !stored.contains("ORAS_"),
        "no credential variable is written into the step's container"
    );
}

#[test]
fn the_caches_generated_credentials_reach_the_helpers_as_a_user_per_direction() {
    let (pod, _) = admitted(&pod(&[
        ("input-uri", "w/in:v1"),
        ("input-path", "/data"),
        ("output-uri", "w/out:v1"),
        ("output-path", "out"),
    ]));
    assert_eq!(
        wired(&pod, PREPARE),
        [
            variable("ORAS_USER", CREDENTIALS, "ORAS_USER", false),
            variable("ORAS_PULL_PASS", CREDENTIALS, "ORAS_PULL_PASS", false),
        ]
    );
    assert_eq!(
        wired(&pod, PUSH),
        [
            variable("ORAS_USER", CREDENTIALS, "ORAS_PUSH_USER", true),
            variable("OCIFIT_PRE_SPLIT_USER", CREDENTIALS, "ORAS_USER", false),
            variable("ORAS_PUSH_PASS", CREDENTIALS, "ORAS_PUSH_PASS", false),
        ]
    );
    assert!(step(&pod).env.is_none() && step(&pod).env_from.is_none());
}

/// The environment the kubelet gives helper `name` from a Secret holding `data`: a missing key
/// leaves an optional variable unset and keeps the container from starting otherwise.
fn resolved(pod: &Pod, name: &str, data: &[(&str, &str)]) -> Result<Vec<(String, String)>, String> {
    let data: BTreeMap<&str, &str> = data.iter().copied().collect();
    let mut environment = Vec::new();
    for (variable, secret, key, optional) in wired(pod, name) {
        assert_eq!(secret, CREDENTIALS);
        match (data.get(key.as_str()), optional) {
            (Some(value), _) => environment.push((variable, value.to_string())),
            (None, Some(true)) => {}
            (None, _) => return Err(format!("{name}: couldn't find key {key} in Secret")),
        }
    }
    Ok(environment)
}

/// The user and password helper `name` logs in with, as it reads them from `environment`.
fn login(name: &str, environment: &[(String, String)]) -> (Option<String>, Option<String>) {
    let direction = if name == PUSH {
        Direction::Push
    } else {
        Direction::Pull
    };
    let get = |variable: &str| {
        environment
            .iter()
            .find(|(name, _)| name == variable)
            .map(|(_, value)| value.as_str())
    };
    let user = user(direction, get("ORAS_USER"), get("OCIFIT_PRE_SPLIT_USER"));
    let password = get(direction.password_variable());
    (user.map(str::to_owned), password.map(str::to_owned))
}

#[test]
fn steps_of_a_cache_whose_secret_predates_the_split_still_push_and_new_ones_keep_it() {
    let (pod, _) = admitted(&pod(&[
        ("input-uri", "w/in:v1"),
        ("input-path", "/data"),
        ("output-uri", "w/out:v1"),
        ("output-path", "out"),
    ]));
    let both = |data: &[(&str, &str)]| {
        [PREPARE, PUSH].map(|name| {
            let environment = resolved(&pod, name, data).unwrap();
            let values: Vec<String> = environment.iter().map(|(_, v)| v.clone()).collect();
            (login(name, &environment), values)
        })
    };
    let pair = |user: &str, password: &str| (Some(user.to_owned()), Some(password.to_owned()));
    // What ocifit generated before the split: one user, one password under both keys.
    let [(pull, _), (push, _)] = both(&[
        ("ORAS_USER", "steps"),
        ("ORAS_PULL_PASS", "one-pw"),
        ("ORAS_PUSH_PASS", "one-pw"),
    ]);
    assert_eq!(pull, pair("steps", "one-pw"));
    assert_eq!(push, pair("steps", "one-pw"));
    // What it generates now: each helper its own user and password, never the other's.
    let [(pull, pulled_with), (push, pushed_with)] = both(&[
        ("ORAS_USER", "steps-pull"),
        ("ORAS_PULL_PASS", "pull-pw"),
        ("ORAS_PUSH_USER", "steps-push"),
        ("ORAS_PUSH_PASS", "push-pw"),
    ]);
    assert_eq!(pull, pair("steps-pull", "pull-pw"));
    assert_eq!(push, pair("steps-push", "push-pw"));
    assert!(
        !pulled_with.contains(&"push-pw".to_owned()),
        "{pulled_with:?}"
    );
    assert!(
        !pushed_with.contains(&"pull-pw".to_owned()),
        "{pushed_with:?}"
    );
}

#[test]
fn every_injected_volume_has_a_size_limit() {
    let (pod, _) = admitted(&pod(&[
        ("input-uri", "w/in:v1"),
        ("output-uri", "w/out:v1"),
        ("output-path", "out"),
    ]));
    let volumes = pod.spec.unwrap().volumes.unwrap();
    let limits: Vec<(String, Option<String>)> = volumes
        .into_iter()
        .map(|v| {
            let limit = v.empty_dir.unwrap().size_limit.map(|q| q.0);
            (v.name, limit)
        })
        .collect();
    assert_eq!(
        limits,
        [
            ("ocifit-inputs".to_string(), Some("10Gi".to_string())),
            ("ocifit-run".to_string(), Some("10Gi".to_string())),
        ]
    );
}

#[test]
fn a_registry_off_the_allow_list_is_refused_the_same_whatever_it_is() {
    let no_cache = |name: &str| -> CacheState { panic!("looked up cache {name}") };
    let object = |registry: &str| {
        let pod: Pod = serde_json::from_value(pod(&[
            ("registry", registry),
            ("input-uri", "w/in:v1"),
            ("input-path", "/data"),
        ]))
        .unwrap();
        pod
    };
    // Another namespace's cache (a ClusterIP) and a host that is nothing: one answer, but for
    // the name.
    let refusal = |registry: &str, registries: &StepRegistries| match plan_pod(
        &object(registry),
        "b",
        &no_cache,
        &helper(),
        registries,
    ) {
        StepPlan::Deny(denial) => denial
            .to_string()
            .replace(registry.trim_start_matches("http://"), "HOST"),
        other => panic!("expected a denial, got {other:?}"),
    };
    let none = StepRegistries::default();
    let a_cache = refusal("http://10.0.0.17:5000", &none);
    assert_eq!(a_cache, refusal("http://10.0.0.99:5000", &none));
    assert!(
        a_cache.contains(&format!("{P}registry"))
            && a_cache.contains("--allowed-registries (none is set)"),
        "{a_cache}"
    );
    let listed = refusal("10.0.0.17:5000", &allowed());
    assert!(
        listed.contains("--allowed-registries (127.0.0.1:5000, ghcr.io)"),
        "{listed}"
    );
    assert!(matches!(
        plan_pod(&object("ghcr.io"), "b", &no_cache, &helper(), &allowed()),
        StepPlan::Patch { .. }
    ));
}

#[test]
fn a_registry_on_the_step_replaces_the_cache_which_is_never_looked_up() {
    let object = pod(&[
        ("registry", "http://127.0.0.1:5000"),
        ("input-uri", "w/in:v1"),
        ("input-path", "/data"),
    ]);
    let no_cache = |name: &str| -> CacheState { panic!("looked up cache {name}") };
    let StepPlan::Patch { patch, .. } = plan_json(&object, &no_cache) else {
        panic!("expected a patch");
    };
    let mut patched = object.clone();
    json_patch::patch(&mut patched, &operations(&patch)).unwrap();
    let pod: Pod = serde_json::from_value(patched).unwrap();
    let prepare = args(init(&pod, PREPARE));
    assert!(prepare.contains(&"127.0.0.1:5000/w/in:v1"), "{prepare:?}");
    assert!(prepare.contains(&"--plain-http"), "{prepare:?}");
    let https = pod_args_for_registry("ghcr.io");
    assert!(
        https.contains(&"ghcr.io/w/in:v1".to_string())
            && !https.contains(&"--plain-http".to_string())
    );
}

fn pod_args_for_registry(registry: &str) -> Vec<String> {
    let (pod, _) = admitted(&pod(&[
        ("registry", registry),
        ("input-uri", "w/in:v1"),
        ("input-path", "/data"),
    ]));
    init(&pod, PREPARE).args.clone().unwrap()
}

#[test]
fn the_oras_operators_script_settings_are_ignored_with_a_warning_each() {
    let (_, warnings) = admitted(&pod(&[
        ("input-uri", "w/in:v1"),
        ("input-path", "/data"),
        ("entrypoint", "https://example.com/e.sh"),
        ("oras-container", "ghcr.io/oras-project/oras:v1.1.0"),
    ]));
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert!(warnings[0].contains(&format!("{P}entrypoint")) && warnings[0].contains("ignored"));
    assert!(warnings[1].contains(&format!("{P}oras-container")));
}

#[test]
fn a_step_with_nothing_to_move_is_admitted_unchanged_with_a_warning() {
    let StepPlan::Unchanged { warnings } = plan_json(&pod(&[("oras-cache", "oras")]), &ready)
    else {
        panic!("expected the pod unchanged");
    };
    assert!(warnings[0].contains("admitted unchanged"), "{warnings:?}");
}

#[test]
fn without_the_container_annotation_the_first_container_is_the_step() {
    let mut object = pod(&[("output-pipe", "out.txt")]);
    object["spec"]["containers"] = json!([
        {"name": "main", "image": "busybox", "command": ["run"]},
        {"name": "logger", "image": "busybox", "command": ["tail"]}
    ]);
    let (pod, warnings) = admitted(&object);
    assert!(warnings.is_empty(), "{warnings:?}");
    let containers = &pod.spec.as_ref().unwrap().containers;
    assert_eq!(
        containers[0].command.as_ref().unwrap()[0],
        format!("{LAUNCHER_DIR}/ld.so")
    );
    assert_eq!(containers[1].command, Some(vec!["tail".to_string()]));
}

#[test]
fn unknown_or_misspelt_annotations_are_warned_about_and_the_step_still_runs() {
    let (pod, warnings) = admitted(&pod(&[
        ("output-uri", "w/out:v1"),
        ("output-path", "out"),
        ("ouput-path", "typo"),
        ("retries", ""),
    ]));
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert!(
        warnings[0].contains(&format!(
            "annotation {P}ouput-path is not part of the step contract and is ignored"
        )),
        "{warnings:?}"
    );
    assert!(warnings[1].contains(&format!("{P}retries")), "{warnings:?}");
    assert!(
        step(&pod)
            .command
            .as_ref()
            .unwrap()
            .contains(&"out".to_string())
    );
}

#[test]
fn a_bare_pod_that_pushes_is_set_to_run_once_with_a_warning() {
    for policy in [None, Some("Always")] {
        let mut object = pod(&[("output-uri", "w/out:v1"), ("output-path", "out")]);
        match policy {
            Some(p) => object["spec"]["restartPolicy"] = json!(p),
            None => {
                object["spec"]
                    .as_object_mut()
                    .unwrap()
                    .remove("restartPolicy");
            }
        }
        let (pod, warnings) = admitted(&object);
        let spec = pod.spec.unwrap();
        assert_eq!(spec.restart_policy.as_deref(), Some("Never"), "{policy:?}");
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(
            warnings[0].starts_with("restartPolicy set to Never (it was Always, the default)"),
            "{warnings:?}"
        );
    }
    // What the step's author chose stays; a step that only reads may restart as it likes.
    for (pairs, policy) in [
        (
            &[("output-uri", "w/out:v1"), ("output-path", "out")][..],
            "OnFailure",
        ),
        (&[("input-uri", "w/in:v1")][..], "Always"),
    ] {
        let mut object = pod(pairs);
        object["spec"]["restartPolicy"] = json!(policy);
        let (pod, warnings) = admitted(&object);
        assert_eq!(pod.spec.unwrap().restart_policy.as_deref(), Some(policy));
        assert!(warnings.is_empty(), "{warnings:?}");
    }
}

#[test]
fn debug_settings_are_those_parsed_and_only_for_debug_steps() {
    let annotations = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (format!("{P}{k}"), v.to_string()))
            .collect()
    };
    let settings = debug_settings(&annotations(&[
        ("input-uri_2", "w/two:v1"),
        ("input-uri_1", "w/one:v1"),
        ("debug", "true"),
    ]))
    .unwrap();
    assert_eq!(settings.inputs, ["w/one:v1", "w/two:v1"]);
    assert_eq!(settings.source, Source::Cache("oras".into()));
    assert_eq!(
        debug_settings(&annotations(&[("input-uri", "w/in:v1")])),
        None
    );
    assert_eq!(
        debug_settings(&annotations(&[
            ("input-uri", "w/in:v1"),
            ("debug", "false")
        ])),
        None
    );
}

#[test]
fn the_named_container_is_the_step_among_several() {
    let mut object = pod(&[("output-pipe", "out.txt"), ("container", "main")]);
    object["spec"]["containers"] = json!([
        {"name": "logger", "image": "busybox", "command": ["tail"]},
        {"name": "main", "image": "busybox", "command": ["run"]}
    ]);
    let (pod, _) = admitted(&object);
    let containers = &pod.spec.as_ref().unwrap().containers;
    assert_eq!(containers[0].command, Some(vec!["tail".to_string()]));
    assert_eq!(
        containers[1].command.as_ref().unwrap().last().unwrap(),
        "run"
    );
}

#[test]
fn with_a_read_only_root_file_system_inputs_are_mounted_with_a_warning() {
    let mut object = pod(&[
        ("input-uri", "w/in:v1"),
        ("input-path", "/data"),
        ("output-uri", "w/out:v1"),
        ("output-path", "/tmp/out"),
    ]);
    object["spec"]["containers"][0]["securityContext"] = json!({"readOnlyRootFilesystem": true});
    let (pod, warnings) = admitted(&object);
    assert_eq!(mounts(step(&pod))["ocifit-inputs"], "/data");
    let command = step(&pod).command.clone().unwrap();
    assert!(!command.contains(&"--inputs".to_string()), "{command:?}");
    assert!(command.contains(&"--push".to_string()), "{command:?}");
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains("read-only root file system") && warnings[0].contains("/data"),
        "{warnings:?}"
    );
}

#[test]
fn without_command_relative_input_paths_are_mounted_under_the_containers_working_dir() {
    let mut object = without_command(pod(&[("input-uri", "w/in:v1"), ("input-path", "inputs")]));
    object["spec"]["containers"][0]["workingDir"] = json!("/work/");
    let (joined, _) = admitted(&object);
    assert_eq!(mounts(step(&joined))["ocifit-inputs"], "/work/inputs");
    let mut defaulted = without_command(pod(&[("input-uri", "w/in:v1")]));
    defaulted["spec"]["containers"][0]["workingDir"] = json!("/work");
    let (at_working_dir, _) = admitted(&defaulted);
    assert_eq!(
        mounts(step(&at_working_dir))["ocifit-inputs"],
        "/work/inputs",
        "as the oras-operator's `cp -R /mnt/oras/inputs/ .` puts them"
    );
}

#[test]
fn helpers_run_as_the_steps_user_locked_down() {
    let mut object = pod(&[("output-uri", "w/out:v1"), ("output-path", "/out")]);
    object["spec"]["containers"][0]["securityContext"] =
        json!({"runAsUser": 1000, "runAsGroup": 2000});
    let (pod, _) = admitted(&object);
    for name in [PREPARE, PUSH] {
        let security = init(&pod, name).security_context.clone().unwrap();
        assert_eq!(
            (security.run_as_user, security.run_as_group),
            (Some(1000), Some(2000))
        );
        assert_eq!(security.allow_privilege_escalation, Some(false));
        assert_eq!(security.read_only_root_filesystem, Some(true));
        assert_eq!(
            security.capabilities.unwrap().drop,
            Some(vec!["ALL".to_string()])
        );
    }
}

#[test]
fn debug_and_unpack_reach_every_helper() {
    let (pod, _) = admitted(&pod(&[
        ("input-uri", "w/in:v1"),
        ("input-path", "/data"),
        ("output-uri", "w/out:v1"),
        ("output-path", "/out"),
        ("debug", "true"),
        ("unpack", "false"),
    ]));
    for name in [PREPARE, PUSH] {
        let a = args(init(&pod, name));
        assert!(
            a.contains(&"--debug") && a.contains(&"--no-unpack"),
            "{name}: {a:?}"
        );
    }
    assert!(
        step(&pod)
            .command
            .as_ref()
            .unwrap()
            .contains(&"--debug".to_string())
    );
}

#[test]
fn the_launcher_writes_failures_where_the_container_reads_its_termination_message() {
    let mut object = pod(&[("output-pipe", "out.txt")]);
    object["spec"]["containers"][0]["terminationMessagePath"] = json!("/tmp/why");
    let (pod, _) = admitted(&object);
    let command = step(&pod).command.clone().unwrap();
    assert!(
        command
            .windows(2)
            .any(|w| w == ["--termination-log", "/tmp/why"]),
        "{command:?}"
    );
}

#[test]
fn existing_init_containers_and_volumes_stay_after_the_helpers() {
    let mut object = pod(&[("input-uri", "w/in:v1"), ("input-path", "/data")]);
    object["spec"]["initContainers"] = json!([{"name": "setup", "image": "busybox"}]);
    object["spec"]["volumes"] = json!([{"name": "scratch", "emptyDir": {}}]);
    object["spec"]["containers"][0]["volumeMounts"] =
        json!([{"name": "scratch", "mountPath": "/scratch"}]);
    let (pod, _) = admitted(&object);
    let (inits, volumes) = names(&pod);
    assert_eq!(inits, [PREPARE, "setup"]);
    assert_eq!(volumes, ["scratch", "ocifit-inputs", "ocifit-run"]);
    assert_eq!(mounts(step(&pod)).len(), 3);
}

#[test]
fn an_injected_pod_is_left_alone() {
    let object = pod(&[
        ("input-uri", "w/in:v1"),
        ("input-path", "/data"),
        ("output-uri", "w/out:v1"),
        ("output-path", "/out"),
    ]);
    let StepPlan::Patch { patch, .. } = plan_json(&object, &ready) else {
        panic!("expected a patch");
    };
    let mut patched = object.clone();
    json_patch::patch(&mut patched, &operations(&patch)).unwrap();
    assert_eq!(plan_json(&patched, &ready), StepPlan::AlreadyInjected);
    // Even when the marker was lost, the helpers give it away.
    patched["metadata"]["annotations"]
        .as_object_mut()
        .unwrap()
        .remove(step::INJECTED);
    assert_eq!(plan_json(&patched, &ready), StepPlan::AlreadyInjected);
}

#[test]
fn a_step_read_as_the_routes_read_it_is_planned_as_the_whole_object_is() {
    // Everything the planner reads, and much it does not: the plans must be equal.
    let mut rich = pod(&[
        ("input-uri", "w/in:v1"),
        ("output-uri", "w/out:v1"),
        ("output-path", "/work/out"),
        ("container", "step"),
    ]);
    rich["metadata"]["labels"] = json!({"app": "flow"});
    rich["metadata"]["ownerReferences"] =
        json!([{"apiVersion": "v1", "kind": "Node", "name": "n", "uid": "u", "controller": false}]);
    rich["metadata"]["managedFields"] = json!([{"manager": "kubectl", "operation": "Apply"}]);
    rich["spec"]["securityContext"] = json!({"runAsUser": 1000, "fsGroup": 2000});
    rich["spec"]["initContainers"] =
        json!([{"name": "setup", "image": "busybox", "command": ["true"]}]);
    rich["spec"]["volumes"] =
        json!([{"name": "work", "emptyDir": {}}, {"name": "cfg", "configMap": {"name": "c"}}]);
    rich["spec"]["tolerations"] = json!([{"key": "k", "operator": "Exists"}]);
    rich["spec"]["containers"][0]["workingDir"] = json!("/work");
    rich["spec"]["containers"][0]["terminationMessagePath"] = json!("/tmp/end");
    rich["spec"]["containers"][0]["securityContext"] = json!({"runAsGroup": 3000});
    rich["spec"]["containers"][0]["volumeMounts"] = json!([{"name": "work", "mountPath": "/work"}]);
    rich["spec"]["containers"][0]["env"] = json!([{"name": "A", "value": "1"}]);
    rich["spec"]["containers"][0]["resources"] = json!({"limits": {"cpu": "1"}});
    rich["spec"]["containers"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "side", "image": "envoy", "ports": [{"containerPort": 80}]}));
    let whole: Pod = serde_json::from_value(rich.clone()).unwrap();
    let planned = plan_pod(&whole, "workflow", &ready, &helper(), &allowed());
    assert!(matches!(planned, StepPlan::Patch { .. }), "{planned:?}");
    assert_eq!(plan_json(&rich, &ready), planned);

    let job = json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "j", "annotations": rich["metadata"]["annotations"], "labels": {"a": "b"}},
        "spec": {"backoffLimit": 2, "template": {
            "metadata": {"labels": {"x": "y"}, "annotations": {"note": "n"}},
            "spec": rich["spec"]
        }}
    });
    let mut job_spec = job.clone();
    job_spec["spec"]["template"]["spec"]["restartPolicy"] = json!("OnFailure");
    let whole: Job = serde_json::from_value(job_spec.clone()).unwrap();
    let StepJob(read) = serde_json::from_value(job_spec).unwrap();
    let planned = plan_job(&whole, "workflow", &ready, &helper(), &allowed());
    assert!(matches!(planned, StepPlan::Patch { .. }), "{planned:?}");
    assert_eq!(
        plan_job(&read, "workflow", &ready, &helper(), &allowed()),
        planned
    );
}
