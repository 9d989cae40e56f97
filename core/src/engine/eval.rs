//! Evaluating one compatibility set on one node: every rule must hold; the first failing
//! expression explains a miss. A set with no rules matches every node. Owns no choice between
//! sets (`select`) and no format details (`ocifit`, `nfd_eval`).

use std::collections::BTreeMap;

use super::artifact::{CompatSet, Rules};
use super::error::Location;
use super::explain::Miss;
use super::inputs::Features;

impl CompatSet {
    /// Checks every rule. `features` are the node's NFD features (needed for NFD rules only).
    pub(crate) fn evaluate(
        &self,
        labels: &BTreeMap<String, String>,
        features: &Features,
    ) -> Result<(), Miss> {
        let base = Location::set(self.index, &self.tag);
        match &self.rules {
            Rules::Ocifit(rules) => rules
                .iter()
                .enumerate()
                .try_for_each(|(r, rule)| rule.evaluate(&base, r, labels)),
            Rules::Nfd(rules) => rules
                .iter()
                .enumerate()
                .try_for_each(|(r, rule)| rule.evaluate(&base, r, features)),
        }
    }
}
