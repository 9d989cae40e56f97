//! The registry down for a Ready policy while 500 opted-in pods are created through the
//! apiserver: the webhook answers from its index, so none is denied.

use std::sync::Arc;
use std::time::Instant;

use super::{AT_ONCE, Served, create_in_bursts, flavored};

const PODS: usize = 500;

#[tokio::test]
async fn with_the_registry_down_500_opted_in_pods_are_created_and_none_is_denied() {
    let served = Arc::new(Served::start("faults-registry").await);
    served.env.registry().pause().expect("the registry frozen");
    let started = Instant::now();
    let results = create_in_bursts(PODS, |i, flavor| {
        let served = Arc::clone(&served);
        async move {
            let result = served.create(&flavored(&format!("pod-{i}"), flavor)).await;
            (flavor, result)
        }
    })
    .await;
    let (mut admitted, mut denied, mut failed, mut wrong) = (0, 0, 0, 0);
    for (flavor, result) in results {
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
