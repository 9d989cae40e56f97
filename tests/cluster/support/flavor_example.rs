//! The flavor example's artifact as the controller holds it once resolved, to give the example
//! policies the status the controller computes. Here (no cluster needed) because this library is
//! the fixture kit that may use ocifit's own types (the test kit does not depend on ocifit): the
//! pod contract's example table (`tests/components/example_pods.rs`), the admission load
//! benchmark (`benches/admission_load/fixture.rs`) and the status benchmark compute the same
//! status.

use std::error::Error;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use ocifit::api::{ImageSelectionPolicy, ImageSelectionPolicySpec, ImageSelectionPolicyStatus};
use ocifit::engine::{Artifact, Format, NodeInputs};
use ocifit::image_selection::{ArtifactState, StatusInputs, StatusLimits, policy_status};
use ocifit::image_selection::{Content, Resolved};
use ocifit::image_selection::{PlatformLookup, Platforms};
use ocifit::registry::Platform;

pub struct FlavorExample {
    resolved: Resolved,
    platforms: Platforms,
}

impl FlavorExample {
    /// `example/flavor-compat.json` resolved at a fixed digest, each of its images published for
    /// linux/amd64 and linux/arm64, as the real images are.
    pub fn load() -> Result<FlavorExample, Box<dyn Error + Send + Sync>> {
        let path = ocifit_testkit::repo_root().join("example/flavor-compat.json");
        let bytes = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let resolved = Resolved {
            digest: "sha256:5eed".into(),
            format: Format::Ocifit,
            content: Content::Sets(Artifact::parse(Format::Ocifit, &bytes)?),
        };
        let platforms = resolved
            .images()
            .into_iter()
            .map(|image| {
                let found = ["amd64", "arm64"]
                    .iter()
                    .map(|arch| Platform {
                        os: "linux".into(),
                        architecture: (*arch).into(),
                        variant: None,
                        os_version: None,
                    })
                    .collect();
                (image, PlatformLookup::Known(found))
            })
            .collect();
        Ok(FlavorExample {
            resolved,
            platforms,
        })
    }

    /// The artifact as resolved.
    pub fn resolved(&self) -> &Resolved {
        &self.resolved
    }

    /// Each image's platforms (linux/amd64 and linux/arm64).
    pub fn platforms(&self) -> &Platforms {
        &self.platforms
    }

    /// `policy` with the status the controller computes for it over `nodes`.
    pub fn resolve(
        &self,
        mut policy: ImageSelectionPolicy,
        nodes: &[(String, NodeInputs)],
    ) -> ImageSelectionPolicy {
        let computed = policy_status(&self.inputs(&policy.spec, nodes, None));
        policy.status = Some(computed.status);
        policy
    }

    /// What the controller hands the status computation for a policy with `spec` (generation 1,
    /// this artifact current) over `nodes`, after `previous`, at the Unix epoch.
    pub fn inputs<'a>(
        &'a self,
        spec: &'a ImageSelectionPolicySpec,
        nodes: &'a [(String, NodeInputs)],
        previous: Option<&'a ImageSelectionPolicyStatus>,
    ) -> StatusInputs<'a> {
        static EPOCH: Time = Time(Timestamp::UNIX_EPOCH);
        StatusInputs {
            generation: Some(1),
            spec,
            artifact: ArtifactState::Current(&self.resolved),
            nodes,
            platforms: &self.platforms,
            previous,
            now: &EPOCH,
            limits: StatusLimits::WRITTEN,
        }
    }
}
