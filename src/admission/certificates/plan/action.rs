//! What a plan does and why, in words for logs and Events: the [`CertificateAction`], and the reasons a
//! serving certificate is reissued ([`ServingReason`]) or a CA replaced ([`Unusable`]).

use std::fmt;

use jiff::Timestamp;

use super::super::inspect::PemProblem;

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
