use json_patch::Patch as JsonPatch;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::{Sent, apply};

/// An apiserver on loopback refusing every PATCH with a 422 (as a release patch whose gate
/// `test` no longer holds is refused) and answering every GET with the pod at
/// `live_version`.
async fn refusing_apiserver(live_version: &'static str) -> kube::Client {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let request = read_request(&mut stream).await;
            let (status, body) = if request.starts_with("PATCH") {
                let refused = json!({
                    "kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 422,
                    "reason": "Invalid",
                    "message": "the server rejected our request due to an error in our request",
                });
                ("422 Unprocessable Entity", refused)
            } else {
                let pod = json!({
                    "apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": "p", "namespace": "team", "resourceVersion": live_version},
                });
                ("200 OK", pod)
            };
            let body = body.to_string();
            let answer = format!(
                "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
                 connection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.write_all(answer.as_bytes()).await;
        }
    });
    let config = kube::Config::new(format!("http://{address}").parse().unwrap());
    kube::Client::try_from(config).unwrap()
}

/// The request's head and its body (by its content-length).
async fn read_request(stream: &mut tokio::net::TcpStream) -> String {
    let mut read = Vec::new();
    let mut chunk = [0; 4096];
    loop {
        let text = String::from_utf8_lossy(&read).into_owned();
        if let Some(end) = text.find("\r\n\r\n") {
            let length = text[..end]
                .lines()
                .find_map(|line| {
                    line.to_lowercase()
                        .strip_prefix("content-length:")?
                        .trim()
                        .parse()
                        .ok()
                })
                .unwrap_or(0);
            if read.len() >= end + 4 + length {
                return text;
            }
        }
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return text,
            Ok(n) => read.extend_from_slice(&chunk[..n]),
        }
    }
}

fn planned_from(version: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": "p", "namespace": "team", "resourceVersion": version},
    }))
    .unwrap()
}

#[tokio::test]
async fn a_release_refused_because_the_pod_changed_since_is_planned_again() {
    let api: Api<Pod> = Api::namespaced(refusing_apiserver("8").await, "team");
    // Its gates moved between version 7, planned from, and 8: the gate's `test` failed.
    let sent = apply(&api, &planned_from("7"), &JsonPatch(Vec::new())).await;
    assert_eq!(sent.unwrap(), Sent::Conflict);
}

#[tokio::test]
async fn a_release_refused_for_the_pod_as_planned_is_invalid() {
    let api: Api<Pod> = Api::namespaced(refusing_apiserver("7").await, "team");
    let sent = apply(&api, &planned_from("7"), &JsonPatch(Vec::new())).await;
    assert_eq!(
        sent.unwrap(),
        Sent::Invalid("the server rejected our request due to an error in our request".into())
    );
}
