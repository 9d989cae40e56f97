use proptest::prelude::*;

use super::*;

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
