//! What Helm and Artifact Hub show of the chart: Chart.yaml's metadata (home, sources, icon,
//! maintainers, and Artifact Hub's license, CRDs, images and links, each kept equal to what it
//! describes), NOTES.txt for all three features with the published chart's OCI reference and every
//! CRD's removal, and the install docs leading with that reference.

use serde_json::Value;

use ocifit_testkit::chart::{chart_dir, helm, repo_root};

fn yaml(relative: &str) -> Value {
    let path = repo_root().join(relative);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{relative}: {e}"));
    serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{relative}: {e}"))
}

/// An Artifact Hub annotation: a YAML document inside a string.
fn annotation(chart: &Value, key: &str) -> Value {
    let text = chart["annotations"][key]
        .as_str()
        .unwrap_or_else(|| panic!("Chart.yaml has no {key}"));
    serde_saphyr::from_str(text).unwrap_or_else(|e| panic!("{key}: {e}"))
}

/// The chart as published: the release workflow's chart repository and the chart's name.
fn oci_reference() -> String {
    let workflow = yaml(".github/workflows/release.yaml");
    let repository = workflow["env"]["CHART_REPOSITORY"]
        .as_str()
        .expect("the workflow's CHART_REPOSITORY");
    format!("{repository}/ocifit")
}

#[test]
fn chart_yaml_carries_helms_and_artifact_hubs_metadata_equal_to_what_it_describes() {
    let chart = yaml("charts/ocifit/Chart.yaml");
    for key in ["home", "icon"] {
        assert!(
            chart[key]
                .as_str()
                .is_some_and(|u| u.starts_with("https://")),
            "{key}: {}",
            chart[key]
        );
    }
    assert!(chart["sources"][0].as_str().is_some());
    assert!(chart["maintainers"][0]["name"].as_str().is_some());
    // The icon is the repository's own file, at the path its URL names.
    let icon = chart["icon"].as_str().unwrap();
    let path = icon
        .split("/main/")
        .nth(1)
        .expect("an icon on the main branch");
    assert!(repo_root().join(path).is_file(), "{path}");

    assert_eq!(
        chart["annotations"]["artifacthub.io/license"].as_str(),
        Some(env!("CARGO_PKG_LICENSE"))
    );

    let mut described: Vec<(String, String, String)> = annotation(&chart, "artifacthub.io/crds")
        .as_array()
        .expect("a list")
        .iter()
        .map(|c| {
            let field = |k: &str| {
                c[k].as_str()
                    .unwrap_or_else(|| panic!("{k}: {c}"))
                    .to_owned()
            };
            assert!(!field("description").is_empty());
            (field("name"), field("kind"), field("version"))
        })
        .collect();
    let mut shipped = Vec::new();
    for entry in std::fs::read_dir(chart_dir().join("files")).unwrap() {
        let path = entry.unwrap().path();
        if !path.to_string_lossy().ends_with(".ocifit.io.yaml") {
            continue;
        }
        let crd: Value = serde_saphyr::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        for version in crd["spec"]["versions"].as_array().unwrap() {
            shipped.push((
                crd["metadata"]["name"].as_str().unwrap().to_owned(),
                crd["spec"]["names"]["kind"].as_str().unwrap().to_owned(),
                version["name"].as_str().unwrap().to_owned(),
            ));
        }
    }
    described.sort();
    shipped.sort();
    assert_eq!(described, shipped);

    let values = yaml("charts/ocifit/values.yaml");
    let images: Vec<String> = annotation(&chart, "artifacthub.io/images")
        .as_array()
        .expect("a list")
        .iter()
        .map(|i| i["image"].as_str().expect("an image").to_owned())
        .collect();
    let mut expected = vec![format!(
        "{}:{}",
        values["image"]["repository"].as_str().unwrap(),
        chart["appVersion"].as_str().unwrap()
    )];
    expected.extend(
        values["artifactCache"]["registryImages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i.as_str().unwrap().to_owned()),
    );
    assert_eq!(images, expected);

    for link in annotation(&chart, "artifacthub.io/links")
        .as_array()
        .unwrap()
    {
        let url = link["url"].as_str().expect("a url");
        let home = chart["home"].as_str().unwrap();
        let file = url
            .strip_prefix(&format!("{home}/blob/main/"))
            .or_else(|| url.strip_prefix(&format!("{home}/tree/main/")))
            .unwrap_or_else(|| panic!("{url} is not in the repository {home}"));
        assert!(repo_root().join(file).exists(), "{url}: no {file}");
    }
}

/// NOTES.txt as `helm install --dry-run` prints it.
async fn install_notes(sets: &[&str]) -> String {
    let chart = chart_dir();
    let mut args = vec![
        "install",
        "ocifit",
        chart.to_str().expect("a UTF-8 path"),
        "--namespace",
        "ocifit-system",
        "--dry-run=client",
    ];
    for set in sets {
        args.extend(["--set", set]);
    }
    let output = helm(&args, None).await.expect("helm install --dry-run");
    output
        .split_once("NOTES:\n")
        .map(|(_, notes)| notes.to_owned())
        .unwrap_or_else(|| panic!("no NOTES in {output}"))
}

#[tokio::test]
async fn notes_cover_all_three_features_the_oci_reference_and_removing_every_crd() {
    let notes = install_notes(&[]).await;
    assert!(notes.contains(&oci_reference()), "{notes}");
    for feature in ["Image selection:", "Placement:", "Artifact cache:"] {
        assert!(notes.contains(feature), "{feature}\n{notes}");
    }
    assert!(
        notes.contains("helm test ocifit -n ocifit-system"),
        "{notes}"
    );
    assert!(
        notes.contains(
            "kubectl delete crd imageselectionpolicies.ocifit.io placementpolicies.ocifit.io \
             artifactcaches.ocifit.io"
        ),
        "{notes}"
    );
    assert!(!notes.contains("DEPRECATED"), "{notes}");

    let off = install_notes(&[
        "placement.enabled=false",
        "artifactCache.enabled=false",
        "crds.install=false",
        "metrics.serviceMonitor.enabled=true",
    ])
    .await;
    assert!(off.contains("Placement is off"), "{off}");
    assert!(off.contains("step webhooks are off"), "{off}");
    assert!(!off.contains("kubectl delete crd"), "{off}");
    assert!(
        off.contains("DEPRECATED: metrics.serviceMonitor")
            && off.contains("monitoring.serviceMonitor"),
        "{off}"
    );
}

#[test]
fn the_install_docs_lead_with_the_published_chart() {
    let command = format!("helm install ocifit {}", oci_reference());
    for doc in ["docs/install.md", "README.md", "charts/ocifit/README.md"] {
        let text = std::fs::read_to_string(repo_root().join(doc)).unwrap();
        // A pinned version is the chart's current one.
        let version = format!(
            "--version {}",
            yaml("charts/ocifit/Chart.yaml")["version"]
                .as_str()
                .unwrap()
        );
        for (at, _) in text.match_indices("--version ") {
            assert!(
                text[at..].starts_with(&version),
                "{doc}: {}",
                &text[at..at + 20]
            );
        }
        let published = text.find(&command);
        let local = text.find("helm install ocifit charts/ocifit");
        assert!(published.is_some(), "{doc} does not say {command}");
        if let Some(local) = local {
            assert!(
                published < Some(local),
                "{doc}: the local chart path comes before the published chart"
            );
        }
    }
}
