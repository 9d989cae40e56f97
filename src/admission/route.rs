//! Routes: how a feature plugs its admission decision into the one host. A feature implements
//! [`Planner`] for the kind it admits (only the fields its decisions read,
//! [`read_as!`](super::request::read_as)) and hands the host a [`Route`] with its path; the host
//! decodes the review, asks the planner, encodes its [`Verdict`], counts it in the planner's own
//! vocabulary, then tells the planner the request was answered (to queue an Event).
//! ```text
//! let routes = vec![Route::new("/mutate", MutatePods::new(..)), Route::new("/gate", GatePods::new(..))];
//! ```

use std::fmt;
use std::sync::Arc;

use crate::admission::request::Request;
use kube::Resource;
use serde::de::DeserializeOwned;

use super::review::{self, Answer};
pub use super::review::{Response, Verdict};
use crate::admission::review::{Scan, check};

/// One feature's admission decision for one kind of object. Pure CPU over memory; the one wait
/// allowed is a bounded read of what its store may lag (`crate::cluster::read_again`), only
/// on the blocking pool: a [`Planner::BOUNDED`] planner that needs it declines in [`Planner::plan_now`].
pub trait Planner: Send + Sync + 'static {
    /// The kind this route admits.
    type Object: Resource<DynamicType = ()> + DeserializeOwned + Send + Sync + 'static;
    /// The answer.
    type Plan: Verdict;

    /// Whether the request alone bounds the planner's work: no wait, and CPU that grows only with
    /// the request, which the host caps. Such a planner runs on the connection's worker, where a
    /// hand-off to the blocking pool would cost more than planning; others run on the pool.
    const BOUNDED: bool = false;

    /// Decides one request. The host reads of it what planners read ([`Request`]): its uid,
    /// kind, name, namespace, operation, object and dry-run flag; the user, the resource and
    /// requested kind, the old object and the options are skipped unread.
    fn plan(&self, request: &Request<Self::Object>) -> Self::Plan;

    /// For a [`Planner::BOUNDED`] planner on the connection's worker: the plan, if it can be made
    /// without waiting. `None` sends the request on to the blocking pool, where [`Planner::plan`]
    /// may take its one bounded wait.
    fn plan_now(&self, request: &Request<Self::Object>) -> Option<Self::Plan> {
        Some(self.plan(request))
    }

    /// Called once the answer is encoded, except for dry runs and reviews from a client without
    /// a certificate when the host is told so: queue Events here (without waiting on the
    /// apiserver).
    fn answered(&self, _request: &Request<Self::Object>, _plan: Self::Plan) {}
}

/// What a route answers for a request the host could not have its planner decide (no place, or
/// past the deadline): what its webhook's failure policy does with a failed call, so a busy or
/// slow host never answers worse than being down would.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Undecided {
    /// Deny, with a message saying to retry (`failurePolicy: Fail`): an object admitted
    /// unplanned would be wrong.
    #[default]
    Deny,
    /// Admit the object unchanged, with a warning saying why (`failurePolicy: Ignore`): an
    /// object admitted unplanned is safe.
    AdmitUnchanged,
}

/// A path of the host and the planner answering it.
#[derive(Clone)]
pub struct Route {
    pub(super) path: String,
    pub(super) handler: Arc<dyn Handler>,
    pub(super) undecided: Undecided,
}

impl fmt::Debug for Route {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Route")
            .field("path", &self.path)
            .field("undecided", &self.undecided)
            .finish()
    }
}

impl Route {
    /// `POST path` answered by `planner`; a request it cannot decide is denied, to retry
    /// ([`Undecided::Deny`]).
    pub fn new<P: Planner>(path: &str, planner: P) -> Route {
        Route {
            path: path.to_owned(),
            handler: Arc::new(planner),
            undecided: Undecided::Deny,
        }
    }

    /// The same route answering `undecided` for a request it cannot decide: the feature sets
    /// what its webhook's failure policy means for its objects.
    pub fn when_undecided(mut self, undecided: Undecided) -> Route {
        self.undecided = undecided;
        self
    }

    /// What the route answers for a request it cannot decide.
    pub fn undecided(&self) -> Undecided {
        self.undecided
    }

    pub fn path(&self) -> &str {
        &self.path
    }

    /// The answer to a request body, as the server sends it (decoded, planned, encoded,
    /// `answered`): what a feature's tests call to see its route through the host.
    pub fn answer(&self, body: &[u8]) -> Answer {
        self.handler.answer(body, check(body), true)
    }
}

/// A planner with its kind erased, as the server calls it.
pub(super) trait Handler: Send + Sync {
    /// The answer to a whole request body (already read within the caps) whose streaming pass
    /// found `scan`; `events`: whether [`Planner::answered`] may be told (Events are written
    /// only for reviews from a client the host trusts with them).
    fn answer(&self, body: &[u8], scan: Scan, events: bool) -> Answer;

    /// The answer without waiting ([`Planner::plan_now`]); `None` if only [`Handler::answer`]
    /// can give it.
    fn answer_now(&self, body: &[u8], scan: Scan, events: bool) -> Option<Answer>;

    /// [`Planner::BOUNDED`].
    fn bounded(&self) -> bool;
}

impl<P: Planner> Handler for P {
    fn answer(&self, body: &[u8], scan: Scan, events: bool) -> Answer {
        let request = match review::read_scanned::<P::Object>(body, scan) {
            Ok(request) => request,
            Err(answer) => return *answer,
        };
        let plan = self.plan(&request);
        finish(self, &request, plan, events)
    }

    fn answer_now(&self, body: &[u8], scan: Scan, events: bool) -> Option<Answer> {
        let request = match review::read_scanned::<P::Object>(body, scan) {
            Ok(request) => request,
            Err(answer) => return Some(*answer),
        };
        let plan = self.plan_now(&request)?;
        Some(finish(self, &request, plan, events))
    }

    fn bounded(&self) -> bool {
        P::BOUNDED
    }
}

/// The encoded answer for `plan`, then `answered` (never for a dry run, nor without `events`).
fn finish<P: Planner>(
    planner: &P,
    request: &Request<P::Object>,
    plan: P::Plan,
    events: bool,
) -> Answer {
    let answer = Answer::planned(&request.uid, &plan);
    if events && !request.dry_run {
        planner.answered(request, plan);
    }
    answer
}
