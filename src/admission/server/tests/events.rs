//! Events only from reviews of a client ocifit knows: with a client CA and
//! `--webhook-uncertified-clients=answer-without-events`, a client without a certificate is
//! answered, but its review never reaches the planner's `answered` (where Events are queued).

use std::sync::atomic::AtomicUsize;

use super::*;

/// Admits every pod and counts the reviews it was told were answered.
struct Counting(Arc<AtomicUsize>);

impl Planner for Counting {
    type Object = Pod;
    type Plan = Judged;

    fn plan(&self, _request: &Request<Pod>) -> Judged {
        Judged(true)
    }

    fn answered(&self, _request: &Request<Pod>, _plan: Judged) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[tokio::test]
async fn a_review_from_a_client_without_a_certificate_is_answered_and_writes_no_event() {
    ocifit_testkit::pki::install_crypto_provider();
    let apiserver_clients = CertificateAuthority::new("apiserver clients").unwrap();
    let told = Arc::new(AtomicUsize::new(0));
    let served = serve_clients(
        DEADLINE,
        vec![Route::new("/check", Counting(Arc::clone(&told)))],
        Some(apiserver_clients.cert_pem().as_bytes().to_vec()),
        Uncertified::AnswerWithoutEvents,
    )
    .await;
    assert_eq!(try_check(&served, &served.connector).await, Ok(200));
    assert_eq!(
        told.load(Ordering::SeqCst),
        0,
        "a review from a client without a certificate was told answered (an Event)"
    );
    answers_only_certificates_from(&served, &apiserver_clients).await;
    assert_eq!(told.load(Ordering::SeqCst), 1, "the apiserver's review");
    served.handle.stop(true).await;
}
