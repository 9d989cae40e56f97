use super::*;

fn launch_in(dir: &Path, command: &[&str]) -> LaunchSpec {
    fs::create_dir_all(dir.join("run")).unwrap();
    LaunchSpec {
        run: dir.join("run"),
        working_dir: dir.to_path_buf(),
        inputs: None,
        input_path: None,
        push: None,
        pipe: None,
        termination_log: Some(dir.join("termination-log")),
        push_timeout: Duration::from_secs(30),
        command: command.iter().map(OsString::from).collect(),
    }
}

/// A step that writes `out.txt` and pushes it.
fn writing_out_txt(dir: &Path) -> LaunchSpec {
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
    assert!(
        message.contains("failed to run /no/such/program"),
        "{message}"
    );
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
        message.contains("failed to read the output") && message.contains("never-written"),
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

/// A step whose working directory is `dir/work`, holding what its image put there.
fn in_work(dir: &Path, script: &str) -> LaunchSpec {
    let mut launch = launch_in(dir, &["/bin/sh", "-c", script]);
    launch.working_dir = dir.join("work");
    fs::create_dir_all(launch.working_dir.join("out")).unwrap();
    fs::write(launch.working_dir.join("out/image.txt"), "the image's").unwrap();
    launch
}

/// The pulled inputs of a pod: `out/a.txt`.
fn pulled_inputs(dir: &Path) -> PathBuf {
    let inputs = dir.join("pulled");
    fs::create_dir_all(inputs.join("out")).unwrap();
    fs::write(inputs.join("out/a.txt"), "from an input").unwrap();
    inputs
}

#[tokio::test]
async fn without_input_path_the_inputs_are_an_inputs_directory_in_the_working_directory() {
    let dir = tempfile::tempdir().unwrap();
    // As the oras-operator's `cp -R /mnt/oras/inputs/ .`: `ls inputs` lists them, and the image's
    // own files are where they were.
    let mut launch = in_work(
        dir.path(),
        "ls inputs > seen.txt && cat out/image.txt inputs/out/a.txt >> seen.txt",
    );
    launch.inputs = Some(pulled_inputs(dir.path()));
    assert_eq!(super::launch(&launch).await, 0);
    assert_eq!(
        fs::read_to_string(launch.working_dir.join("seen.txt")).unwrap(),
        "out\nthe image'sfrom an input"
    );
}

#[tokio::test]
async fn an_input_path_that_is_a_directory_gets_the_inputs_directory_inside_it() {
    let dir = tempfile::tempdir().unwrap();
    // `out` is a directory of the image: `cp -R /mnt/oras/inputs/ out` gives `out/inputs/`.
    let mut launch = in_work(
        dir.path(),
        "cat out/inputs/out/a.txt out/image.txt > seen.txt",
    );
    launch.inputs = Some(pulled_inputs(dir.path()));
    launch.input_path = Some(PathBuf::from("out"));
    assert_eq!(super::launch(&launch).await, 0);
    assert_eq!(
        fs::read_to_string(launch.working_dir.join("seen.txt")).unwrap(),
        "from an inputthe image's"
    );
}

#[tokio::test]
async fn an_input_path_that_does_not_exist_becomes_the_inputs_and_stays_so_on_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    // A relative input-path is under the working directory; not there, it is the inputs.
    let mut launch = in_work(dir.path(), "cat data/out/a.txt > seen.txt");
    launch.inputs = Some(pulled_inputs(dir.path()));
    launch.input_path = Some(PathBuf::from("data"));
    assert_eq!(super::launch(&launch).await, 0);
    assert_eq!(
        fs::read_to_string(launch.working_dir.join("seen.txt")).unwrap(),
        "from an input"
    );
    // The same pod's step restarted, `data` now there (a volume keeps it): still `data` itself,
    // not `data/inputs`.
    assert_eq!(super::launch(&launch).await, 0);
    assert!(!launch.working_dir.join("data/inputs").exists());
    assert_eq!(
        fs::read_to_string(launch.working_dir.join("seen.txt")).unwrap(),
        "from an input"
    );
}

#[tokio::test]
async fn an_input_path_that_is_a_file_stops_the_step_before_it_runs() {
    let dir = tempfile::tempdir().unwrap();
    let mut launch = in_work(dir.path(), "touch ran");
    fs::write(launch.working_dir.join("data"), "a file").unwrap();
    launch.inputs = Some(pulled_inputs(dir.path()));
    launch.input_path = Some(PathBuf::from("data"));
    assert_eq!(super::launch(&launch).await, EXIT_CANNOT_RUN);
    assert!(!launch.working_dir.join("ran").exists());
    let message = termination_message(dir.path());
    assert!(message.contains("a file is there"), "{message}");
}

#[tokio::test]
async fn inputs_that_cannot_be_put_in_place_stop_the_step_before_it_runs() {
    let dir = tempfile::tempdir().unwrap();
    let inputs = dir.path().join("pulled");
    fs::create_dir_all(&inputs).unwrap();
    fs::write(inputs.join("out"), "a file where the image has a directory").unwrap();
    let mut launch = in_work(dir.path(), "touch ran");
    // The image has a directory inputs/out, where the inputs have a file.
    fs::create_dir_all(launch.working_dir.join("inputs/out")).unwrap();
    launch.inputs = Some(inputs);
    assert_eq!(super::launch(&launch).await, EXIT_CANNOT_RUN);
    assert!(!launch.working_dir.join("ran").exists());
    let message = termination_message(dir.path());
    assert!(message.contains("failed to put the inputs in"), "{message}");
}

#[tokio::test]
async fn the_working_directory_is_pushed_entry_by_entry_when_output_path_is_dot() {
    let dir = tempfile::tempdir().unwrap();
    let mut launch = in_work(dir.path(), "echo said > said.txt && ln -s said.txt link");
    launch.push = Some(PathBuf::from("."));
    let answer = tokio::spawn(pusher(
        launch.run.clone(),
        Outcome::Pushed {
            reference: "10.0.0.17:5000/w/out:v1".into(),
            digest: "sha256:abc".into(),
        },
    ));
    assert_eq!(super::launch(&launch).await, 0);
    let mut staged: Vec<String> = answer
        .await
        .unwrap()
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    staged.sort();
    assert_eq!(staged, ["out", "said.txt"], "each entry, the link left out");
}

#[tokio::test]
async fn a_working_directory_of_slash_is_never_pushed_whole() {
    let dir = tempfile::tempdir().unwrap();
    let mut launch = launch_in(dir.path(), &["/bin/sh", "-c", "true"]);
    launch.working_dir = PathBuf::from("/");
    launch.push = Some(PathBuf::from("."));
    assert_eq!(super::launch(&launch).await, EXIT_PUSH_FAILED);
    let message = termination_message(dir.path());
    assert!(message.contains("the working directory is /"), "{message}");
    assert!(
        handoff::read::<Request>(&launch.run, handoff::REQUEST)
            .unwrap()
            .is_none()
    );
}
