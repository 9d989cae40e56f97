//! The scale run, shared by the cluster suite (small sizes) and `cargo bench --bench
//! cluster_scale` (the issue's sizes): kwok nodes of three flavors and two architectures, many
//! ImageSelectionPolicies and PlacementPolicies, an ArtifactCache, one `ocifit run` serving the
//! pod webhooks and the step webhooks, then pods created through the apiserver at a steady rate
//! and in a burst (half opted in to image selection, all gated by placement), workflow steps (bare
//! pods and Jobs) among the steady pods, and a Deployment scaled up and down. It measures what the
//! apiserver measures of each webhook, failed admissions, create → gate gone, the apiserver's
//! plain pod-update rate in the same run, whether every step pod was injected, and ocifit's, the
//! apiserver's and etcd's resources from `/proc`.

mod measure;
mod noop;
mod steps;

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use ocifit::api::placement_pod::SCHEDULING_GATE;
use ocifit::api::pod::ENABLED_LABEL;
use ocifit_testkit::{Cluster, webhook_durations};
use serde_json::json;
use tokio::task::JoinSet;

use measure::{Released, sample, webhooks};
pub use measure::{Sample, Webhook, quantile};
pub use noop::NOOP;
use steps::Step;
pub use steps::{STEP_JOBS, STEP_PODS};

use super::objects::{OptIn, TestPod, linux_node};
use super::placement::{create_policy, gates};
use super::webhook::{WebhookCertificate, image};
use super::{Env, FLAVOR, free_address};

pub const NAMESPACE: &str = "scale";
/// The webhooks' names, as the apiserver labels its histogram.
pub const MUTATE: &str = "pods.ocifit.io";
pub use super::webhook::GATE;
const FLAVORS: [&str; 3] = ["vanilla", "chocolate", "strawberry"];
const ARCHES: [&str; 2] = ["amd64", "arm64"];
/// Requests in flight while creating nodes, pods and updates (a ReplicaSet controller's burst).
const IN_FLIGHT: usize = 16;

/// What the run creates; each from an environment variable, else the given default.
#[derive(Clone, Copy, Debug)]
pub struct Sizes {
    pub nodes: usize,
    pub policies: usize,
    /// Pods opted in to image selection (all of them gated too).
    pub opted_in: usize,
    /// Pods gated by placement only.
    pub gated: usize,
    /// Pods per second in the steady phase (half of all pods; the rest come in one burst).
    pub rate: usize,
    /// The Deployment's replicas at its largest.
    pub replicas: i32,
    /// Workflow steps of the artifact cache, created among the steady pods at the same rate:
    /// bare pods and Jobs, alternately.
    pub steps: usize,
}

impl Sizes {
    /// Pods created at the steady rate (the first half of the pods; the rest come in the
    /// burst), steps not counted.
    pub fn steady(&self) -> usize {
        (self.opted_in + self.gated) / 2
    }

    /// How long ocifit is left alone after the last check before its resident memory is read
    /// as at rest: a second per 1,000 pods, at most a minute (none for a few hundred).
    pub fn settle(&self) -> Duration {
        Duration::from_secs(((self.opted_in + self.gated) / 1000).min(60) as u64)
    }

    /// Step Jobs among [`Sizes::steps`] (the odd ones).
    pub fn step_jobs(&self) -> usize {
        self.steps / 2
    }

    /// `OCIFIT_SCALE_NODES`, `_POLICIES`, `_OPTED_IN`, `_GATED`, `_RATE`, `_REPLICAS`, `_STEPS`.
    pub fn from_env(default: Sizes) -> Sizes {
        let var = |name: &str, default: usize| {
            std::env::var(format!("OCIFIT_SCALE_{name}"))
                .ok()
                .map(|v| v.parse().expect("a whole number"))
                .unwrap_or(default)
        };
        Sizes {
            nodes: var("NODES", default.nodes).max(FLAVORS.len()),
            policies: var("POLICIES", default.policies).max(1),
            opted_in: var("OPTED_IN", default.opted_in),
            gated: var("GATED", default.gated),
            rate: var("RATE", default.rate).max(1),
            replicas: i32::try_from(var("REPLICAS", default.replicas as usize)).unwrap_or(0),
            steps: var("STEPS", default.steps),
        }
    }
}

#[derive(Debug)]
pub struct Report {
    pub sizes: Sizes,
    pub webhooks: BTreeMap<String, Webhook>,
    pub failed_admissions: usize,
    /// Create sent → gate gone, steady phase, milliseconds (sorted).
    pub steady_ms: Vec<f64>,
    pub steady_rate: f64,
    /// Steady pods still gated when the last steady pod was created, and the rate at which
    /// they were released from then on (no creation competing): release with a backlog.
    pub backlog: usize,
    pub backlog_rate: f64,
    pub burst_pods: usize,
    /// Pods the burst created per second (the releases cannot outrun them), pods released per
    /// second in the burst, and plain pod updates the apiserver accepted per second in the same
    /// run.
    pub burst_create_rate: f64,
    pub burst_release_rate: f64,
    pub plain_update_rate: f64,
    pub unreleased: Vec<String>,
    /// Opted-in pods without their class's image.
    pub wrong_image: Vec<String>,
    /// Step pods found (bare and the Jobs'), and those not injected.
    pub step_pods: usize,
    pub uninjected: Vec<String>,
    pub samples: Vec<Sample>,
    /// ocifit's heap before the pods and at rest after them.
    pub heap_before: Heap,
    pub heap_at_rest: Heap,
    pub seconds: f64,
}

/// The cluster, ocifit serving both webhooks and every policy; each flavor's image.
async fn arrange(
    ocifit: &Path,
    sizes: Sizes,
) -> (Env, super::Controller, BTreeMap<&'static str, String>) {
    let env = Env::start_with(ocifit, Cluster::builder().with_all_controllers()).await;
    let by_flavor = env.flavors_with_nodes(NAMESPACE).await;
    let mut creating = JoinSet::new();
    for i in FLAVORS.len()..sizes.nodes {
        if creating.len() == IN_FLIGHT {
            creating.join_next().await;
        }
        let node = linux_node(&format!("node-{i}"))
            .label(FLAVOR, FLAVORS[i % FLAVORS.len()])
            .label(
                "kubernetes.io/arch",
                ARCHES[i / FLAVORS.len() % ARCHES.len()],
            );
        let client = env.client.clone();
        creating.spawn(async move { ocifit_testkit::create_node(&client, &node).await });
    }
    for created in creating.join_all().await {
        created.expect("a node");
    }
    let certificate = WebhookCertificate::issue(&env, &["127.0.0.1"]);
    let address = free_address();
    let helper = ["--artifact-helper-image", steps::HELPER_IMAGE];
    let controller = certificate.serve(&env, "scale", &address, &helper).await;
    env.create_policy(&env.flavor_policy("flavors")).await;
    for i in 1..sizes.policies {
        // Never matched by a pod: each is resolved and kept, as a cluster's other teams' are.
        let other = env
            .flavor_policy(&format!("other-{i}"))
            .target_image(&format!("other-{i}:v1"));
        env.create_policy(&other).await;
        let selector = json!({"podSelector": {"matchLabels": {"team": format!("other-{i}")}}});
        create_policy(&env.client, &format!("other-{i}"), selector).await;
    }
    create_policy(&env.client, "everything", json!({})).await;
    env.wait_ready("flavors").await;
    certificate
        .activate_mutate(
            &env,
            "ocifit-scale-mutate",
            &address,
            NAMESPACE,
            &by_flavor["vanilla"],
        )
        .await;
    // Before the gate: it is active once the gate is (one informer brings both to the apiserver).
    noop::start(&env, NAMESPACE).await;
    certificate
        .register_gate(&env, "ocifit-scale-gate", &address, NAMESPACE)
        .await;
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), NAMESPACE);
    let mut warm_up = 0;
    loop {
        let name = format!("warm-{warm_up}");
        let pod = pods
            .create(&PostParams::default(), &plain_pod(&name, &by_flavor))
            .await;
        if gates(&pod.expect("a warm-up pod")) == [SCHEDULING_GATE] {
            break;
        }
        warm_up += 1;
        assert!(warm_up < 300, "the gate never became active");
        // Until the gate's configuration is in the apiserver's view, pods pass it by.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    steps::arrange(&env, &address, certificate.ca.cert_pem()).await;
    (env, controller, by_flavor)
}

/// Pod `i` of the opted-in kind: the placeholder image, a flavor by `i`.
fn opted_in_pod(name: &str, i: usize) -> Pod {
    TestPod::named(name)
        .opted_in()
        .node_selector(FLAVOR, FLAVORS[i % FLAVORS.len()])
        .without_token()
        .build()
}

/// A pod only placement acts on: a real multi-platform image of the registry.
fn plain_pod(name: &str, by_flavor: &BTreeMap<&str, String>) -> Pod {
    TestPod::named(name)
        .image(&by_flavor["vanilla"])
        .without_token()
        .build()
}

/// What the run creates: a pod of [`NAMESPACE`] or a workflow step.
enum Creation {
    Pod(Box<Pod>),
    Step(Step),
}

impl Creation {
    /// Whether the apiserver admitted it.
    async fn create(self, client: Client) -> bool {
        match self {
            Creation::Pod(pod) => Api::<Pod>::namespaced(client, NAMESPACE)
                .create(&PostParams::default(), &pod)
                .await
                .is_ok(),
            Creation::Step(step) => step.create(client).await,
        }
    }
}

/// `pods` with `steps` spread evenly among them.
fn interleave(pods: Vec<(String, Pod)>, steps: Vec<(String, Step)>) -> Vec<(String, Creation)> {
    let total = pods.len() + steps.len();
    let share = steps.len();
    let (mut pods, mut steps) = (pods.into_iter(), steps.into_iter());
    let mut taken = 0;
    let mut items = Vec::with_capacity(total);
    for k in 1..=total {
        // By the k-th creation, k/total of the steps are due.
        let item = if k * share / total > taken {
            taken += 1;
            steps.next().map(|(n, s)| (n, Creation::Step(s)))
        } else {
            pods.next().map(|(n, p)| (n, Creation::Pod(Box::new(p))))
        };
        items.extend(item);
    }
    items
}

/// Creates `items` (name, object), `per_second` at most (`None`: as fast as [`IN_FLIGHT`]
/// allows); when each was sent, and how many the apiserver refused.
async fn create_all(
    client: &Client,
    items: Vec<(String, Creation)>,
    per_second: Option<usize>,
) -> (HashMap<String, Instant>, usize) {
    let mut tick = per_second.map(|rate| {
        let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / rate as f64));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
        tick
    });
    let mut creating = JoinSet::new();
    let mut sent = HashMap::new();
    let mut failed = 0;
    let limit = if per_second.is_some() {
        4 * IN_FLIGHT
    } else {
        IN_FLIGHT
    };
    for (name, item) in items {
        if let Some(tick) = tick.as_mut() {
            tick.tick().await;
        }
        while creating.len() >= limit {
            failed += usize::from(
                creating
                    .join_next()
                    .await
                    .is_some_and(|r| !matches!(r, Ok(true))),
            );
        }
        sent.insert(name, Instant::now());
        creating.spawn(item.create(client.clone()));
    }
    for created in creating.join_all().await {
        failed += usize::from(!created);
    }
    (sent, failed)
}

/// Waits until every one of `names` was seen released, or `within` passed; the ones never seen.
async fn wait_released(released: &Released, names: &[String], within: Duration) -> Vec<String> {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let changed = released.1.notified();
        let left: Vec<String> = names
            .iter()
            .filter(|n| released.at(n).is_none())
            .cloned()
            .collect();
        if left.is_empty() || tokio::time::timeout_at(deadline, changed).await.is_err() {
            return left;
        }
    }
}

/// The Deployment `scaled`, opted-in pods, at `replicas`; its pods' names once all are released.
async fn deployment(
    env: &Env,
    released: &Released,
    replicas: i32,
    within: Duration,
) -> Vec<String> {
    let template = opted_in_pod("scaled", 0);
    let deployment: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "scaled"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "scaled"}},
            "template": {
                "metadata": {"labels": {"app": "scaled", ENABLED_LABEL: "true"}},
                "spec": template.spec,
            },
        },
    }))
    .expect("a deployment");
    let api: Api<Deployment> = Api::namespaced(env.client.clone(), NAMESPACE);
    let patch = Patch::Apply(&deployment);
    api.patch("scaled", &PatchParams::apply("scale-run").force(), &patch)
        .await
        .expect("the deployment applied");
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), NAMESPACE);
    let start = Instant::now();
    loop {
        let listed = pods
            .list(&ListParams::default().labels("app=scaled"))
            .await
            .expect("the deployment's pods");
        let live: Vec<String> = listed
            .items
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .filter_map(|p| p.metadata.name.clone())
            .collect();
        let all_released = live.iter().all(|n| released.at(n).is_some());
        if (live.len() == replicas as usize && all_released) || start.elapsed() > within {
            return live;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Plain label updates of `names`, [`IN_FLIGHT`] at once: updates per second the apiserver
/// accepted.
async fn plain_updates(api: &Api<Pod>, names: &[String]) -> f64 {
    let start = Instant::now();
    let mut updating = JoinSet::new();
    for (i, name) in names.iter().enumerate() {
        if updating.len() == IN_FLIGHT {
            updating.join_next().await;
        }
        let (api, name) = (api.clone(), name.clone());
        let patch = json!({"metadata": {"labels": {"touched": i.to_string()}}});
        updating.spawn(async move {
            api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .expect("a plain update");
        });
    }
    updating.join_all().await;
    names.len() as f64 / start.elapsed().as_secs_f64()
}

/// The opted-in pods of the namespace whose image is not their flavor's.
async fn wrong_images(env: &Env, by_flavor: &BTreeMap<&str, String>) -> Vec<String> {
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), NAMESPACE);
    let listed = pods
        .list(&ListParams::default().labels(&format!("{ENABLED_LABEL}=true")))
        .await
        .expect("the opted-in pods");
    listed
        .items
        .iter()
        .filter(|pod| {
            let flavor = pod
                .spec
                .as_ref()
                .and_then(|s| s.node_selector.as_ref()?.get(FLAVOR));
            flavor
                .and_then(|f| by_flavor.get(f.as_str()))
                .map(String::as_str)
                != Some(image(pod))
        })
        .filter_map(|pod| pod.metadata.name.clone())
        .collect()
}

/// ocifit's heap as its own gauges say: the bytes of its live allocations and the pages its
/// allocator holds for them (the rest of its RSS is code, stacks and TLS buffers).
#[derive(Clone, Copy, Debug, Default)]
pub struct Heap {
    pub allocated_bytes: f64,
    pub resident_bytes: f64,
}

impl Heap {
    async fn of(controller: &super::Controller) -> Heap {
        Heap {
            allocated_bytes: controller.metric("ocifit_heap_allocated_bytes").await,
            resident_bytes: controller.metric("ocifit_heap_resident_bytes").await,
        }
    }
}

/// The whole run at `sizes`, `ocifit` being the binary to run.
pub async fn run(ocifit: &Path, sizes: Sizes) -> Report {
    let (env, controller, by_flavor) = arrange(ocifit, sizes).await;
    let api: Api<Pod> = Api::namespaced(env.client.clone(), NAMESPACE);
    let released = Released::default();
    released.watch(api.clone());
    let (apiserver, etcd) = env.cluster.control_plane_pids();
    let (samples, stop) = sample([controller.pid(), apiserver, etcd], Duration::from_secs(1));
    let heap_before = Heap::of(&controller).await;
    let before = webhook_durations(&env.client)
        .await
        .expect("the apiserver's webhook histograms");
    let start = Instant::now();
    let pods: Vec<(String, Pod)> = (0..sizes.opted_in + sizes.gated)
        .map(|i| {
            let name = format!("pod-{i}");
            // Interleaved while both kinds remain, then the larger kind.
            let opted = if i < 2 * sizes.opted_in.min(sizes.gated) {
                i % 2 == 0
            } else {
                sizes.opted_in > sizes.gated
            };
            let pod = if opted {
                opted_in_pod(&name, i)
            } else {
                plain_pod(&name, &by_flavor)
            };
            (name, pod)
        })
        .collect();
    let names: Vec<String> = pods.iter().map(|(n, _)| n.clone()).collect();
    let mut burst = pods;
    let steady = burst.drain(..burst.len() / 2).collect::<Vec<_>>();
    let within = Duration::from_secs(60 + (sizes.opted_in + sizes.gated) as u64 / 20);

    let steady_names: Vec<String> = steady.iter().map(|(n, _)| n.clone()).collect();
    let steady_start = Instant::now();
    let steps = (0..sizes.steps).map(Step::numbered).collect();
    let steady = interleave(steady, steps);
    let created = steady.len();
    let (sent, mut failed_admissions) = create_all(&env.client, steady, Some(sizes.rate)).await;
    let steady_end = Instant::now();
    let steady_rate = created as f64 / steady_end.duration_since(steady_start).as_secs_f64();
    let mut unreleased = wait_released(&released, &steady_names, within).await;
    let after_end: Vec<Instant> = steady_names
        .iter()
        .filter_map(|n| released.at(n))
        .filter(|at| *at > steady_end)
        .collect();
    let backlog = after_end.len();
    let backlog_rate = after_end.iter().max().map_or(0.0, |last| {
        backlog as f64 / last.duration_since(steady_end).as_secs_f64()
    });
    let mut steady_ms: Vec<f64> = steady_names
        .iter()
        .filter_map(|n| Some(released.at(n)?.duration_since(sent[n]).as_secs_f64() * 1e3))
        .collect();
    steady_ms.sort_by(f64::total_cmp);

    let burst_names: Vec<String> = burst.iter().map(|(n, _)| n.clone()).collect();
    let burst_start = Instant::now();
    let burst = burst
        .into_iter()
        .map(|(n, p)| (n, Creation::Pod(Box::new(p))))
        .collect();
    let (_, failed) = create_all(&env.client, burst, None).await;
    let burst_create_rate = burst_names.len() as f64 / burst_start.elapsed().as_secs_f64();
    failed_admissions += failed;
    unreleased.extend(wait_released(&released, &burst_names, within).await);
    let last = burst_names.iter().filter_map(|n| released.at(n)).max();
    let burst_release_rate = last.map_or(0.0, |last| {
        burst_names.len() as f64 / last.duration_since(burst_start).as_secs_f64()
    });

    let scaled = deployment(&env, &released, sizes.replicas, within).await;
    unreleased.extend(scaled.into_iter().filter(|n| released.at(n).is_none()));
    let down = deployment(&env, &released, sizes.replicas / 2, within).await;
    unreleased.extend(down.into_iter().filter(|n| released.at(n).is_none()));

    let after = webhook_durations(&env.client)
        .await
        .expect("the apiserver's webhook histograms");
    let plain_update_rate = plain_updates(&api, &names[..names.len().min(2000)]).await;
    let wrong_image = wrong_images(&env, &by_flavor).await;
    let (step_pods, uninjected) = steps::uninjected(&env.client, sizes.steps, within).await;
    // The last sample is ocifit at rest with every pod in the cluster: its allocator hands the
    // pages of the last releases back within seconds, and the last stores drain.
    tokio::time::sleep(sizes.settle()).await;
    let heap_at_rest = Heap::of(&controller).await;
    stop.notify_one();
    let samples = samples.lock().expect("not poisoned").clone();
    assert!(
        controller.stop().await.success(),
        "ocifit run stopped cleanly"
    );
    Report {
        sizes,
        webhooks: webhooks(&before, &after),
        failed_admissions,
        steady_ms,
        steady_rate,
        backlog,
        backlog_rate,
        burst_pods: burst_names.len(),
        burst_create_rate,
        burst_release_rate,
        plain_update_rate,
        unreleased,
        wrong_image,
        step_pods,
        uninjected,
        samples,
        heap_before,
        heap_at_rest,
        seconds: start.elapsed().as_secs_f64(),
    }
}

impl Report {
    /// The figures as a Markdown table.
    pub fn table(&self) -> String {
        let peak = |f: fn(&Sample) -> f64| self.samples.iter().map(f).fold(0.0, f64::max);
        let first = self.samples.first().copied().unwrap_or_default();
        let last = self.samples.last().copied().unwrap_or_default();
        let pods = (self.sizes.opted_in + self.sizes.gated) as f64;
        let mut rows = vec![
            format!(
                "| sizes | {} nodes, {} + {} policies, {} opted-in + {} gated pods, Deployment of {}, {} steps ({} Jobs) |",
                self.sizes.nodes,
                self.sizes.policies,
                self.sizes.policies,
                self.sizes.opted_in,
                self.sizes.gated,
                self.sizes.replicas,
                self.sizes.steps,
                self.sizes.step_jobs()
            ),
            format!("| failed admissions | {} |", self.failed_admissions),
        ];
        for (name, w) in self
            .webhooks
            .iter()
            .filter(|(n, _)| [MUTATE, GATE, STEP_PODS, STEP_JOBS, NOOP].contains(&n.as_str()))
        {
            rows.push(format!(
                "| {name} (apiserver's histogram) | {} calls, mean {:.2} ms, p99 ≤ {:.0} ms |",
                w.calls,
                w.mean_seconds * 1e3,
                w.p99_at_most_seconds * 1e3
            ));
        }
        rows.extend([
            format!(
                "| step pods injected (kwok runs them as fakes) | {} of {} |",
                self.step_pods - self.uninjected.len(),
                self.sizes.steps
            ),
            format!(
                "| create → gate gone at {:.0} creations/s (steps among them) | p50 {:.1} ms, p99 {:.1} ms |",
                self.steady_rate, quantile(&self.steady_ms, 0.5), quantile(&self.steady_ms, 0.99)
            ),
            format!(
                "| steady pods still gated at the last steady create, then released (no creation beside) | {} at {:.0} per s |",
                self.backlog, self.backlog_rate
            ),
            format!(
                "| burst of {} pods: created / released / plain pod updates | {:.0} / {:.0} / {:.0} per s |",
                self.burst_pods,
                self.burst_create_rate,
                self.burst_release_rate,
                self.plain_update_rate
            ),
            format!(
                "| ocifit RSS before the pods / at rest {} s after the last / peak | {:.1} / {:.1} / {:.1} MiB |",
                self.sizes.settle().as_secs(),
                first.rss_bytes as f64 / 1048576.0,
                last.rss_bytes as f64 / 1048576.0,
                peak(|s| s.rss_bytes as f64) / 1048576.0
            ),
            format!(
                "| of it, heap before the pods / at rest: live allocations, the allocator's resident pages | {:.1}, {:.1} / {:.1}, {:.1} MiB |",
                self.heap_before.allocated_bytes / 1048576.0,
                self.heap_before.resident_bytes / 1048576.0,
                self.heap_at_rest.allocated_bytes / 1048576.0,
                self.heap_at_rest.resident_bytes / 1048576.0
            ),
            format!(
                "| CPU over {:.0} s (sampled {:.0} s): ocifit / apiserver / etcd | {:.1} / {:.1} / {:.1} s ({:.2} ms ocifit per pod) |",
                self.seconds, last.at, last.ocifit_cpu, last.apiserver_cpu, last.etcd_cpu,
                last.ocifit_cpu * 1e3 / pods.max(1.0)
            ),
        ]);
        format!("| figure | value |\n|---|---|\n{}\n", rows.join("\n"))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn steps_are_spread_evenly_among_the_steady_pods_and_none_is_lost() {
        let pods = (0..8)
            .map(|i| (format!("pod-{i}"), super::TestPod::named("p").build()))
            .collect();
        let steps = (0..4).map(super::Step::numbered).collect();
        let order: Vec<bool> = super::interleave(pods, steps)
            .iter()
            .map(|(_, c)| matches!(c, super::Creation::Step(_)))
            .collect();
        assert_eq!(
            order,
            [
                false, false, true, false, false, true, false, false, true, false, false, true
            ]
        );
    }
}
