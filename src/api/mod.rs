//! The `ImageSelectionPolicy` API (group `ocifit.io`, version `v1alpha1`) and the names of the
//! pod contract (labels and annotations).
