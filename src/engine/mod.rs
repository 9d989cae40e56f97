//! The compatibility engine: parses compatibility artifacts (ocifit JSON, NFD v1alpha1) and decides
//! which candidate image fits a node's labels and features. Pure: no I/O, no async, no clock.
