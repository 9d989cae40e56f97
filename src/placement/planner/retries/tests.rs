use proptest::prelude::*;

use super::*;
use crate::placement::fixtures::pod;

fn bound(action: GiveUp) -> FailureBound {
    FailureBound {
        attempts: 3,
        timeout: Duration::from_secs(60),
        action,
    }
}

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

#[test]
fn failures_are_retried_with_a_doubling_delay() {
    let bound = bound(GiveUp::Hold);
    assert_eq!(after_failure(&bound, 1, secs(1)), Step::RetryIn(secs(1)));
    assert_eq!(after_failure(&bound, 2, secs(2)), Step::RetryIn(secs(2)));
}

#[test]
fn attempts_used_up_early_wait_for_the_timeout_not_longer() {
    let bound = bound(GiveUp::ReleaseUnconstrained);
    assert_eq!(after_failure(&bound, 3, secs(5)), Step::RetryIn(secs(4)));
    assert_eq!(after_failure(&bound, 6, secs(57)), Step::RetryIn(secs(3)));
}

#[test]
fn the_timeout_alone_does_not_give_up_before_the_attempts() {
    let bound = bound(GiveUp::ReleaseUnconstrained);
    assert_eq!(after_failure(&bound, 1, secs(600)), Step::RetryIn(secs(1)));
}

#[test]
fn both_bounds_reached_gives_up_as_the_policy_says() {
    for action in [
        GiveUp::ReleaseUnconstrained,
        GiveUp::Hold,
        GiveUp::Fallback("amd64".into()),
    ] {
        assert_eq!(
            after_failure(&bound(action.clone()), 3, secs(60)),
            Step::GiveUp(action)
        );
    }
}

proptest! {
    #[test]
    fn retries_are_bounded_and_a_pod_is_never_forgotten(
        attempts in 1u32..10,
        timeout in 0u64..1000,
        start in 0u64..100,
    ) {
        let bound = FailureBound { attempts, timeout: secs(timeout), action: GiveUp::Hold };
        let mut now = secs(start);
        let mut failed = 0;
        loop {
            failed += 1;
            match after_failure(&bound, failed, now) {
                Step::RetryIn(wait) => {
                    prop_assert!(wait >= FIRST_RETRY && wait <= LONGEST_RETRY);
                    now += wait;
                }
                Step::GiveUp(action) => {
                    prop_assert_eq!(action, GiveUp::Hold);
                    prop_assert!(failed >= attempts && now >= bound.timeout);
                    break;
                }
            }
            // Never later than one longest delay past both bounds.
            let limit = bound.timeout.max(secs(start)) + LONGEST_RETRY * (attempts + 1);
            prop_assert!(now <= limit, "still retrying at {:?}", now);
        }
    }
}

// The schedule of pods waiting for their retry.
const SECOND: Duration = Duration::from_secs(1);

#[test]
fn a_pod_changed_before_its_retry_is_due_waits_for_the_rest_of_it() {
    let mut retries = Retries::default();
    let now = Instant::now();
    let images = images(&pod(&[("web", "registry.example.com/web:missing")]));
    retries.schedule("uid-1", images.clone(), now + 4 * SECOND, now);
    // The controller's own write of the attempt count arrives at once: no inspection.
    assert_eq!(retries.wait("uid-1", &images, now), Some(4 * SECOND));
    assert_eq!(
        retries.wait("uid-1", &images, now + 3 * SECOND),
        Some(SECOND)
    );
    assert_eq!(retries.wait("uid-1", &images, now + 4 * SECOND), None);
    assert_eq!(retries.wait("uid-2", &images, now), None, "another pod");
}

#[test]
fn a_pod_whose_images_changed_is_inspected_at_once() {
    let mut retries = Retries::default();
    let now = Instant::now();
    let before = images(&pod(&[("web", "registry.example.com/web:missing")]));
    let after = images(&pod(&[("web", "registry.example.com/web:v2")]));
    assert_ne!(before, after);
    retries.schedule("uid-1", before, now + 300 * SECOND, now);
    assert_eq!(retries.wait("uid-1", &after, now), None);
}

#[test]
fn a_released_pod_is_forgotten_and_long_past_entries_are_dropped() {
    let mut retries = Retries::default();
    let now = Instant::now();
    retries.schedule("released", String::new(), now + SECOND, now);
    retries.forget("released");
    assert!(retries.is_empty());
    retries.schedule("deleted-while-gated", String::new(), now + SECOND, now);
    let later = now + SECOND + LONGEST_RETRY;
    retries.schedule("live", String::new(), later + SECOND, later);
    assert_eq!(retries.len(), 1, "only the live pod is kept");
    assert_eq!(retries.wait("live", "", later), Some(SECOND));
}
