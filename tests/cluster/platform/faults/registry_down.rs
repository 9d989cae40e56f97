//! The registry down for a Ready policy while 500 opted-in pods are created through the
//! apiserver: the webhook answers from its index, so none is denied.

use std::sync::Arc;
use std::time::Instant;

use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use super::{Served, flavored};

const PODS: usize = 500;
/// Pods created at once, as a burst of ReplicaSets would.
const AT_ONCE: usize = 25;

#[tokio::test]
async fn with_the_registry_down_500_opted_in_pods_are_created_and_none_is_denied() {
    let served = Arc::new(Served::start("faults-registry").await);
    served.env.registry().pause().expect("the registry frozen");
    let started = Instant::now();
    let places = Arc::new(Semaphore::new(AT_ONCE));
    let mut created = JoinSet::new();
    let flavors = ["vanilla", "chocolate", "strawberry"];
    for i in 0..PODS {
        let (served, places) = (Arc::clone(&served), Arc::clone(&places));
        let flavor = flavors[i % flavors.len()];
        created.spawn(async move {
            let _place = places.acquire_owned().await.expect("a place");
            let result = served.create(&flavored(&format!("pod-{i}"), flavor)).await;
            (flavor, result)
        });
    }
    let (mut admitted, mut denied, mut failed, mut wrong) = (0, 0, 0, 0);
    while let Some(joined) = created.join_next().await {
        let (flavor, result) = joined.expect("a creation");
        match result {
            Ok(image) if image == served.by_flavor[flavor] => admitted += 1,
            Ok(_) => wrong += 1,
            Err(kube::Error::Api(status)) if status.message.contains("denied") => {
                eprintln!("denied: {}", status.message);
                denied += 1;
            }
            Err(error) => {
                eprintln!("failed: {error}");
                failed += 1;
            }
        }
    }
    let took = started.elapsed();
    served.env.registry().resume().expect("the registry thawed");
    eprintln!(
        "FAULT registry-down: pods created {PODS}, admitted {admitted}, denied {denied}, failed \
         {failed}, wrong image {wrong}, in {took:?} ({AT_ONCE} at once)"
    );
    assert_eq!((admitted, denied, failed, wrong), (PODS, 0, 0, 0));
}
