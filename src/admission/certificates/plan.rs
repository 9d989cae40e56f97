//! The decision: given what the webhook Secret holds, the DNS names the serving certificate must
//! carry and the time, keep everything, prune the CA bundle, issue a serving certificate from the
//! current CA, rotate the CA, or start over. Pure: no I/O, no clock, no randomness (minting is
//! [`CertificatePlan::carry_out`]'s). The CA lives [`CA_VALIDITY`], renewed within
//! [`CA_RENEW_BEFORE`]; the serving certificate [`SERVING_VALIDITY`]. A rotation takes two steps
//! (the new CA joins `caBundle`, then serves once trusted: [`ServingReason::SignedByPreviousCa`]),
//! as docs/operations.md's "TLS rotation" says; [`CertificateAction::is_unexpected`] says when a
//! start-over deserves a Warning. Each action and reason reads in words for logs and Events.

use std::collections::BTreeSet;
use std::fmt;

use jiff::{SignedDuration, Timestamp};

use super::inspect::{self, Facts, PemProblem};

/// How long a new CA is valid: ten years.
pub(super) const CA_VALIDITY: SignedDuration = SignedDuration::from_hours(24 * 3650);
/// A CA with this much validity left, or less, is rotated: one year.
pub(super) const CA_RENEW_BEFORE: SignedDuration = SignedDuration::from_hours(24 * 365);
/// How long a new serving certificate is valid: one year. It is reissued when a third of its
/// life remains.
pub(super) const SERVING_VALIDITY: SignedDuration = SignedDuration::from_hours(24 * 365);

/// The webhook Secret's data as stored: each key may be absent or hold anything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoredCertificates {
    /// `ca.crt`: the CA bundle, PEM.
    pub ca_crt: Option<Vec<u8>>,
    /// `ca.key`: the current CA's private key, PEM.
    pub ca_key: Option<Vec<u8>>,
    /// `tls.crt`: the serving certificate, PEM.
    pub tls_crt: Option<Vec<u8>>,
    /// `tls.key`: its private key, PEM.
    pub tls_key: Option<Vec<u8>>,
}

/// The decision and what carrying it out keeps from the stored material.
#[derive(Debug, Clone)]
pub struct CertificatePlan {
    pub(super) action: CertificateAction,
    /// The DNS names the serving certificate carries.
    pub(super) dns_names: Vec<String>,
    /// The current CA and its key (PEM), when it stays.
    pub(super) signer: Option<(Facts, String)>,
    /// The serving certificate and key (PEM), when they stay.
    pub(super) serving: Option<(String, String)>,
    /// CA certificates kept in the bundle besides the signer (or, on rotation, besides the new CA).
    pub(super) retained: Vec<Facts>,
}

impl CertificatePlan {
    /// What it does.
    pub fn action(&self) -> &CertificateAction {
        &self.action
    }
}

/// Decides what to do with `stored` so the serving certificate names exactly `dns_names`.
pub fn plan_certificates(
    stored: &StoredCertificates,
    dns_names: &[String],
    now: Timestamp,
) -> CertificatePlan {
    let want: BTreeSet<String> = dns_names.iter().cloned().collect();
    let mut plan = CertificatePlan {
        action: CertificateAction::PruneBundle,
        dns_names: want.iter().cloned().collect(),
        signer: None,
        serving: None,
        retained: Vec::new(),
    };
    let ca = match current_ca(stored, now) {
        Ok(ca) => ca,
        Err((reason, readable)) => {
            plan.retained = readable;
            plan.action = CertificateAction::Replace(reason);
            return plan;
        }
    };
    let bundle_len = ca.bundle_len;
    plan.retained = ca.others;
    if ca.signer.not_after - CA_RENEW_BEFORE <= now {
        plan.action = CertificateAction::RotateCa {
            expires: ca.signer.not_after,
        };
        // Due for renewal or not, a serving certificate that is still valid bridges the rollover.
        plan.serving = serving(stored, &ca.signer, &[], &want, now)
            .ok()
            .filter(|(leaf, _)| now < leaf.not_after)
            .map(|(leaf, key_pem)| (leaf.pem(), key_pem));
        plan.retained.insert(0, ca.signer);
        return plan;
    }
    let serving = serving(stored, &ca.signer, &plan.retained, &want, now).and_then(|current| {
        let renew_at = serving_renew_at(&current.0);
        if renew_at <= now {
            let not_after = current.0.not_after;
            return Err(ServingReason::Expiring { not_after });
        }
        Ok((current, renew_at))
    });
    plan.signer = Some((ca.signer, ca.key_pem));
    match serving {
        Err(reason) => plan.action = CertificateAction::IssueServing(reason),
        Ok(((cert, key_pem), renew_at)) => {
            plan.serving = Some((cert.pem(), key_pem));
            if 1 + plan.retained.len() < bundle_len {
                return plan;
            }
            let ca_renew_at = plan
                .signer
                .as_ref()
                .map(|(signer, _)| signer.not_after - CA_RENEW_BEFORE);
            let pruned_at = plan
                .retained
                .iter()
                .map(|old| old.not_after + SignedDuration::from_secs(1));
            let renew_at = ca_renew_at
                .into_iter()
                .chain(pruned_at)
                .fold(renew_at, Ord::min);
            plan.action = CertificateAction::Keep { renew_at };
        }
    }
    plan
}

/// The usable current CA.
struct CurrentCa {
    signer: Facts,
    key_pem: String,
    /// Other still-valid CA certificates in the bundle.
    others: Vec<Facts>,
    /// How many certificates `ca.crt` held.
    bundle_len: usize,
}

/// The current CA, or why there is none (with the CA certificates worth keeping in the bundle).
fn current_ca(
    stored: &StoredCertificates,
    now: Timestamp,
) -> Result<CurrentCa, (Unusable, Vec<Facts>)> {
    if *stored == StoredCertificates::default() {
        return Err((Unusable::Absent, Vec::new()));
    }
    let Some(ca_crt) = &stored.ca_crt else {
        return Err((Unusable::Missing("ca.crt"), Vec::new()));
    };
    let certs = inspect::certificates(ca_crt).map_err(|detail| {
        let key = "ca.crt";
        (Unusable::Unreadable { key, detail }, Vec::new())
    })?;
    let bundle_len = certs.len();
    let still_valid = |cert: &Facts| cert.is_ca && now <= cert.not_after;
    let keep_all = || certs.iter().filter(|c| still_valid(c)).cloned().collect();
    let Some(ca_key) = &stored.ca_key else {
        return Err((Unusable::Missing("ca.key"), keep_all()));
    };
    let key = inspect::private_key(ca_key).map_err(|detail| {
        let key = "ca.key";
        (Unusable::Unreadable { key, detail }, keep_all())
    })?;
    let Some(position) = certs.iter().position(|cert| cert.belongs_to(&key)) else {
        return Err((Unusable::KeyMatchesNoCertificate, keep_all()));
    };
    let signer = &certs[position];
    if !signer.is_ca {
        return Err((Unusable::NotACa, keep_all()));
    }
    if now < signer.not_before {
        let not_before = signer.not_before;
        return Err((Unusable::NotYetValid { not_before }, keep_all()));
    }
    if signer.not_after < now {
        let not_after = signer.not_after;
        return Err((Unusable::Expired { not_after }, keep_all()));
    }
    let mut certs = certs;
    let signer = certs.remove(position);
    Ok(CurrentCa {
        signer,
        key_pem: key.serialize_pem(),
        others: certs.into_iter().filter(still_valid).collect(),
        bundle_len,
    })
}

/// The stored serving certificate and its key (PEM), or why it cannot serve; whether it is due
/// for renewal is [`serving_renew_at`]'s.
fn serving(
    stored: &StoredCertificates,
    ca: &Facts,
    older: &[Facts],
    want: &BTreeSet<String>,
    now: Timestamp,
) -> Result<(Facts, String), ServingReason> {
    let tls_crt = stored
        .tls_crt
        .as_ref()
        .ok_or(ServingReason::Missing("tls.crt"))?;
    let tls_key = stored
        .tls_key
        .as_ref()
        .ok_or(ServingReason::Missing("tls.key"))?;
    let unreadable = |key| move |detail| ServingReason::Unreadable { key, detail };
    let leaf = inspect::certificates(tls_crt)
        .map_err(unreadable("tls.crt"))?
        .into_iter()
        .next()
        .ok_or(ServingReason::Missing("tls.crt"))?;
    let key = inspect::private_key(tls_key).map_err(unreadable("tls.key"))?;
    if !leaf.belongs_to(&key) {
        return Err(ServingReason::KeyMismatch);
    }
    if !leaf.signed_by(ca) {
        if older.iter().any(|old| leaf.signed_by(old)) {
            return Err(ServingReason::SignedByPreviousCa);
        }
        return Err(ServingReason::NotSignedByCa);
    }
    if now < leaf.not_before {
        let not_before = leaf.not_before;
        return Err(ServingReason::NotYetValid { not_before });
    }
    if leaf.other_names || leaf.dns_names != *want {
        let mut have: Vec<String> = leaf.dns_names.iter().cloned().collect();
        if leaf.other_names {
            have.push("<other>".to_owned());
        }
        let want = want.iter().cloned().collect();
        return Err(ServingReason::DnsNames { have, want });
    }
    Ok((leaf, key.serialize_pem()))
}

/// When a serving certificate is due for renewal: when a third of its life remains.
fn serving_renew_at(leaf: &Facts) -> Timestamp {
    leaf.not_after - leaf.not_after.duration_since(leaf.not_before) / 3
}

/// What the plan does, with why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CertificateAction {
    /// Everything is current; look again at `renew_at`, when the first renewal or pruning is due.
    Keep {
        /// When the next change is due.
        renew_at: Timestamp,
    },
    /// Drop CA certificates that expired or could not be read from the bundle; nothing is issued.
    PruneBundle,
    /// Issue a new serving certificate from the current CA.
    IssueServing(ServingReason),
    /// Mint a new CA and put it first in the bundle; the current CA stays in the bundle until it
    /// expires at `expires`. The serving certificate stays while it is valid (it is reissued
    /// from the new CA by the next plan), else a new one is issued from the new CA at once.
    RotateCa {
        /// When the current CA expires.
        expires: Timestamp,
    },
    /// Mint a new CA and serving certificate: the stored CA cannot be used.
    Replace(Unusable),
}

impl CertificateAction {
    /// Whether it deserves a Warning (something was broken or tampered with), rather than being
    /// the first start or a scheduled renewal.
    pub fn is_unexpected(&self) -> bool {
        match self {
            CertificateAction::Keep { .. } | CertificateAction::RotateCa { .. } => false,
            CertificateAction::PruneBundle => false,
            CertificateAction::IssueServing(reason) => !matches!(
                reason,
                ServingReason::Expiring { .. }
                    | ServingReason::DnsNames { .. }
                    | ServingReason::SignedByPreviousCa
            ),
            CertificateAction::Replace(reason) => *reason != Unusable::Absent,
        }
    }
}

impl CertificateAction {
    /// A short CamelCase name for Events and logs.
    pub fn reason(&self) -> &'static str {
        match self {
            CertificateAction::Keep { .. } => "CertificatesCurrent",
            CertificateAction::PruneBundle => "CABundlePruned",
            CertificateAction::IssueServing(_) => "ServingCertificateIssued",
            CertificateAction::RotateCa { .. } => "CARotated",
            CertificateAction::Replace(Unusable::Absent) => "CertificatesCreated",
            CertificateAction::Replace(_) => "CAReplaced",
        }
    }
}

impl fmt::Display for CertificateAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CertificateAction::Keep { renew_at } => {
                write!(f, "certificates are current until {renew_at}")
            }
            CertificateAction::PruneBundle => {
                f.write_str("dropping expired or unreadable CA certificates")
            }
            CertificateAction::IssueServing(reason) => {
                write!(f, "issuing a new serving certificate: {reason}")
            }
            CertificateAction::RotateCa { expires } => {
                write!(
                    f,
                    "rotating the CA, which expires at {expires}; it stays trusted until then"
                )
            }
            CertificateAction::Replace(reason) => write!(f, "creating a new CA: {reason}"),
        }
    }
}

/// Why the serving certificate is reissued.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServingReason {
    /// A Secret key is absent.
    Missing(&'static str),
    /// A Secret key does not hold what it should.
    Unreadable {
        /// The Secret key.
        key: &'static str,
        /// What is wrong.
        detail: PemProblem,
    },
    /// `tls.key` is not the key of `tls.crt`.
    KeyMismatch,
    /// The current CA did not sign `tls.crt`.
    NotSignedByCa,
    /// The CA before a rotation signed `tls.crt`: the second step of a rotation.
    SignedByPreviousCa,
    /// `tls.crt` is not valid yet.
    NotYetValid { not_before: Timestamp },
    /// A third of its life or less remains (or it has expired).
    Expiring { not_after: Timestamp },
    /// It names other hosts than the wanted ones.
    DnsNames {
        /// What it names, IP addresses and other kinds as `<other>`.
        have: Vec<String>,
        /// What it should name.
        want: Vec<String>,
    },
}

impl fmt::Display for ServingReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServingReason::Missing(key) => write!(f, "the Secret has no {key}"),
            ServingReason::Unreadable { key, detail } => write!(f, "{key} is unusable: {detail}"),
            ServingReason::KeyMismatch => f.write_str("tls.key is not the key of tls.crt"),
            ServingReason::NotSignedByCa => f.write_str("tls.crt was not signed by the CA"),
            ServingReason::SignedByPreviousCa => {
                f.write_str("tls.crt was signed by the previous CA, and the new one is trusted now")
            }
            ServingReason::NotYetValid { not_before } => {
                write!(f, "tls.crt is not valid before {not_before}")
            }
            ServingReason::Expiring { not_after } => write!(f, "tls.crt expires at {not_after}"),
            ServingReason::DnsNames { have, want } => write!(
                f,
                "tls.crt names [{}], not [{}]",
                have.join(", "),
                want.join(", ")
            ),
        }
    }
}

/// Why the stored CA cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unusable {
    /// Nothing is stored yet (first start).
    Absent,
    /// A Secret key is absent.
    Missing(&'static str),
    /// A Secret key does not hold what it should.
    Unreadable {
        /// The Secret key.
        key: &'static str,
        /// What is wrong.
        detail: PemProblem,
    },
    /// No certificate in `ca.crt` has `ca.key`'s public key.
    KeyMatchesNoCertificate,
    /// The certificate of `ca.key` is not a CA.
    NotACa,
    /// The CA is not valid yet.
    NotYetValid { not_before: Timestamp },
    /// The CA has expired.
    Expired { not_after: Timestamp },
}

impl fmt::Display for Unusable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unusable::Absent => f.write_str("the Secret holds no certificates yet"),
            Unusable::Missing(key) => write!(f, "the Secret has no {key}"),
            Unusable::Unreadable { key, detail } => write!(f, "{key} is unusable: {detail}"),
            Unusable::KeyMatchesNoCertificate => {
                f.write_str("ca.key is not the key of any certificate in ca.crt")
            }
            Unusable::NotACa => f.write_str("the certificate of ca.key is not a CA"),
            Unusable::NotYetValid { not_before } => {
                write!(f, "the CA is not valid before {not_before}")
            }
            Unusable::Expired { not_after } => write!(f, "the CA expired at {not_after}"),
        }
    }
}

#[cfg(test)]
mod tests;
