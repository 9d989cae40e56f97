//! ocifit's component tests, one test binary (one link instead of one per file): the built binary,
//! the chart, the registry client and the documentation against behaviour, each against the real tool
//! where one runs here (Helm, distribution, the ORAS SDK, regctl, crane) and no Kubernetes
//! cluster. The real-cluster tests are the workspace member `tests/cluster`.
//!
//! - `admission_memory`: the heap a hostile AdmissionReview makes the reader hold;
//! - `architecture`: the layout of `src/` (no import cycle, rooms use lower floors only) and no
//!   import cycle in the test kit;
//! - `build_once`: the demo's build and the tests' resolve every dependency alike;
//! - `artifact`: `ocifit artifact` (the workflow step helper) with the ORAS Python SDK on the real
//!   registry, and a step's helpers run as its pod runs them;
//! - `chart`: the Helm chart offline (sync with `crds/` and `config/`, renders, values);
//! - `cli_resolve`: `ocifit resolve` as users run it;
//! - `code_size`: no file in `src/` over 400 lines of code, no function over 100 lines, no comment
//!   over its limit or holding a measurement, tests apart;
//! - `docs_code`: the routes, CRDs, controllers and conditions `docs/controller.md` lists (and the
//!   routes `docs/flags.md` names), against the code;
//! - `docs_cli`: `docs/cli.md`'s exit codes against `cli::Exit`, the same failure's code in every
//!   subcommand, the binary as the kubectl plugin;
//! - `docs_flags`: `docs/flags.md` against `ocifit run --help`;
//! - `docs_links`: every relative link and `#anchor` in the documentation resolves;
//! - `docs_metrics`: `docs/metrics.md` against the metrics `ocifit run` serves;
//! - `example_pods`: the pod contract's example table (`docs/pod-contract.md`) against the planner;
//! - `metrics_scrape`: `/metrics` scraped by the real Prometheus, its text format by `promtool`;
//! - `registry`: the registry client against the real registry, a fake for what it cannot do, and
//!   TLS;
//! - `object_store`: a cache's registry settings for `storage.s3` on the real registry and a real
//!   S3 store (SeaweedFS): an upload moves between replicas, a store's refusal keeps it unready;
//! - `outbound`: no code in `src/` builds an HTTP client but the one fenced constructor;
//! - `placement_inspection`: image inspection for platform placement on the real registry;
//! - `registry_clients`: the test kit's clients (ORAS SDK, regctl, crane) on the real registry;
//! - `release`: the image assembled here against the `Dockerfile`, the chart against the release
//!   workflow;
//! - `release_supply_chain`: the release workflow signs, attests and describes (SBOM) every artifact,
//!   and docs/install.md verifies the identity it signs with;
//! - `watches`: every kube watch in `src/` has its row in `docs/security.md`'s table of what each
//!   watch holds.

mod admission_memory;
mod architecture;
mod artifact;
mod build_once;
mod chart;
mod cli_resolve;
mod code_size;
mod docs_cli;
mod docs_code;
mod docs_denials;
mod docs_flags;
mod docs_links;
mod docs_metrics;
mod example_pods;
mod metrics_scrape;
mod object_store;
mod outbound;
mod placement_inspection;
mod registry;
mod registry_clients;
mod release;
mod release_supply_chain;
mod watches;
