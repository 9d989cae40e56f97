use super::*;

fn launch_in(dir: &Path, command: &[&str]) -> Launch {
    fs::create_dir_all(dir.join("run")).unwrap();
    Launch {
        run: dir.join("run"),
        push: None,
        pipe: None,
        termination_log: Some(dir.join("termination-log")),
        push_timeout: Duration::from_secs(30),
        command: command.iter().map(OsString::from).collect(),
    }
}

/// A step that writes `out.txt` and pushes it.
fn writing_out_txt(dir: &Path) -> Launch {
    let file = dir.join("out.txt");
    let script = format!("echo x > {}", file.display());
    let mut launch = launch_in(dir, &["/bin/sh", "-c", &script]);
    launch.push = Some(file);
    launch
}

fn termination_message(dir: &Path) -> String {
    fs::read_to_string(dir.join("termination-log")).unwrap_or_default()
}

/// Answers the launcher's request as a pusher would, with `outcome`; the staged outputs' paths.
async fn pusher(run: PathBuf, outcome: Outcome) -> Vec<PathBuf> {
    loop {
        if let Some(request) = handoff::read::<Request>(&run, handoff::REQUEST).unwrap() {
            let staged = fs::read_dir(run.join(request.outputs()))
                .unwrap()
                .map(|e| e.unwrap().path())
                .collect();
            handoff::write(&run, &request.result_file(), &outcome).unwrap();
            return staged;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn the_commands_output_goes_to_the_pipe_and_success_is_zero() {
    let dir = tempfile::tempdir().unwrap();
    let mut launch = launch_in(
        dir.path(),
        &["/bin/sh", "-c", "echo blueberry; echo to-stderr >&2"],
    );
    launch.pipe = Some(dir.path().join("out/pancakes.txt"));
    assert_eq!(super::launch(&launch).await, 0);
    assert_eq!(
        fs::read_to_string(dir.path().join("out/pancakes.txt")).unwrap(),
        "blueberry\n"
    );
}

#[tokio::test]
async fn a_failed_step_keeps_its_status_and_asks_for_no_push() {
    let dir = tempfile::tempdir().unwrap();
    let result = dir.path().join("result.txt");
    let script = format!("echo partial > {}; exit 3", result.display());
    let mut launch = launch_in(dir.path(), &["/bin/sh", "-c", &script]);
    launch.push = Some(result.clone());
    assert_eq!(super::launch(&launch).await, 3);
    assert!(!dir.path().join("run").join(handoff::REQUEST).exists());
    assert_eq!(
        termination_message(dir.path()),
        "",
        "the step's own message is left alone"
    );
}

#[tokio::test]
async fn a_step_ended_by_a_signal_exits_as_a_shell_says() {
    let dir = tempfile::tempdir().unwrap();
    let launch = launch_in(dir.path(), &["/bin/sh", "-c", "kill -9 $$"]);
    assert_eq!(super::launch(&launch).await, 128 + 9);
}

#[tokio::test]
async fn a_missing_command_is_127_with_the_reason_as_termination_message() {
    let dir = tempfile::tempdir().unwrap();
    let launch = launch_in(dir.path(), &["/no/such/program", "x"]);
    assert_eq!(super::launch(&launch).await, EXIT_NOT_FOUND);
    let message = termination_message(dir.path());
    assert!(message.contains("cannot run /no/such/program"), "{message}");
}

#[tokio::test]
async fn a_successful_step_hands_its_outputs_over_and_exits_with_the_push() {
    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("results");
    let script = format!(
        "mkdir -p {0}/sub && echo done > {0}/sub/a.txt",
        results.display()
    );
    let mut launch = launch_in(dir.path(), &["/bin/sh", "-c", &script]);
    launch.push = Some(results.clone());
    let answer = tokio::spawn(pusher(
        launch.run.clone(),
        Outcome::Pushed {
            reference: "10.0.0.17:5000/w/out:v1".into(),
            digest: "sha256:abc".into(),
        },
    ));
    assert_eq!(super::launch(&launch).await, 0);
    let staged = answer.await.unwrap();
    assert_eq!(staged.len(), 1);
    assert!(staged[0].ends_with("results"));
    assert_eq!(
        fs::read_to_string(staged[0].join("sub/a.txt")).unwrap(),
        "done\n"
    );
}

#[tokio::test]
async fn a_failed_push_fails_the_step_visibly() {
    let dir = tempfile::tempdir().unwrap();
    let launch = writing_out_txt(dir.path());
    let answer = tokio::spawn(pusher(
        launch.run.clone(),
        Outcome::Failed {
            message: "unauthorized to push 10.0.0.17:5000/w/out".into(),
        },
    ));
    assert_eq!(super::launch(&launch).await, EXIT_PUSH_FAILED);
    answer.await.unwrap();
    let message = termination_message(dir.path());
    assert!(
        message.contains("the step succeeded but its outputs were not pushed: unauthorized"),
        "{message}"
    );
}

#[tokio::test]
async fn no_answer_from_the_pusher_fails_the_step_after_the_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let mut launch = writing_out_txt(dir.path());
    launch.push_timeout = Duration::from_millis(300);
    assert_eq!(super::launch(&launch).await, EXIT_PUSH_FAILED);
    assert!(termination_message(dir.path()).contains("did not answer"));
}

#[tokio::test]
async fn a_successful_step_without_its_output_fails() {
    let dir = tempfile::tempdir().unwrap();
    let mut launch = launch_in(dir.path(), &["/bin/true"]);
    launch.push = Some(dir.path().join("never-written"));
    assert_eq!(super::launch(&launch).await, EXIT_PUSH_FAILED);
    let message = termination_message(dir.path());
    assert!(
        message.contains("cannot read the output") && message.contains("never-written"),
        "{message}"
    );
}

#[tokio::test]
async fn an_output_that_is_a_link_is_refused_and_nothing_is_handed_over() {
    let dir = tempfile::tempdir().unwrap();
    let outside = dir.path().join("outside.txt");
    fs::write(&outside, "not the step's output\n").unwrap();
    let link = dir.path().join("results");
    let script = format!("ln -s {} {}", outside.display(), link.display());
    let mut launch = launch_in(dir.path(), &["/bin/sh", "-c", &script]);
    launch.push = Some(link);
    assert_eq!(super::launch(&launch).await, EXIT_PUSH_FAILED);
    let message = termination_message(dir.path());
    assert!(
        message.contains("is a symbolic link") && message.contains("outside.txt"),
        "{message}"
    );
    assert!(!dir.path().join("run").join(handoff::REQUEST).exists());
}
