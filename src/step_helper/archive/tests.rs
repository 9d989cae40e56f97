use super::*;
use crate::step_helper::unpack::{UnpackCount, unpack};
use crate::step_helper::{Budget, Exceeded, Limits};

/// Packs the directory at `dir`, refusing a link there as the pusher does.
fn pack(dir: &Path, prefix: &str, out: impl Write) -> Result<PackCount, ArchiveError> {
    let handle = beneath::open_dir(dir).map_err(|err| beneath_error("open", dir, err))?;
    pack_dir(handle, &dir.display().to_string(), prefix, out)
}

fn write(path: &Path, content: &[u8]) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, content).unwrap();
}

/// A tar stream with raw entries: names and links exactly as given, unchecked.
fn raw_tar(entries: &[(&str, EntryType, &str, &[u8])]) -> Vec<u8> {
    let mut builder = tar::Builder::new(Vec::new());
    for (name, kind, link, content) in entries {
        let mut header = Header::new_old();
        let old = header.as_old_mut();
        old.name[..name.len()].copy_from_slice(name.as_bytes());
        old.linkname[..link.len()].copy_from_slice(link.as_bytes());
        header.set_entry_type(*kind);
        header.set_mode(0o644);
        header.set_size(content.len() as u64);
        header.set_cksum();
        builder.append(&header, *content).unwrap();
    }
    builder.into_inner().unwrap()
}

/// The default limits, which no test archive but the bombs comes near.
fn unbounded() -> Budget {
    Budget::new(Limits::default())
}

fn unpack_raw(
    entries: &[(&str, EntryType, &str, &[u8])],
) -> (tempfile::TempDir, Result<UnpackCount, ArchiveError>) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    fs::create_dir(&root).unwrap();
    let budget = Budget::new(Limits::default());
    let result = unpack(
        raw_tar(entries).as_slice(),
        Path::new("out"),
        &root,
        &budget,
    );
    (dir, result)
}

#[test]
fn a_packed_tree_unpacks_to_the_same_tree() {
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("results");
    write(&source.join("a.txt"), b"alpha");
    write(&source.join("deep/er/b.bin"), &[7u8; 100_000]);
    write(&source.join("run.sh"), b"#!/bin/sh\n");
    fs::set_permissions(source.join("run.sh"), fs::Permissions::from_mode(0o755)).unwrap();
    fs::create_dir_all(source.join("empty")).unwrap();
    std::os::unix::fs::symlink("a.txt", source.join("link")).unwrap();
    fs::hard_link(source.join("a.txt"), source.join("hard")).unwrap();

    let mut tar = Vec::new();
    let packed = pack(&source, "results", &mut tar).unwrap();
    assert_eq!(
        packed,
        PackCount {
            files: 4,
            directories: 4,
            links: 1,
            skipped: 0
        }
    );

    let root = dir.path().join("pulled");
    fs::create_dir(&root).unwrap();
    let unpacked = unpack(tar.as_slice(), Path::new("results"), &root, &unbounded()).unwrap();
    assert_eq!(unpacked.files, 4);
    assert_eq!(unpacked.bytes, 5 + 100_000 + 10 + 5);
    assert_eq!(fs::read(root.join("a.txt")).unwrap(), b"alpha");
    assert_eq!(fs::read(root.join("hard")).unwrap(), b"alpha");
    assert_eq!(
        fs::read(root.join("deep/er/b.bin")).unwrap(),
        vec![7u8; 100_000]
    );
    assert_eq!(
        fs::read_link(root.join("link")).unwrap(),
        Path::new("a.txt")
    );
    assert!(root.join("empty").is_dir());
    let mode = fs::metadata(root.join("run.sh"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o111, 0o111, "the executable bits survive: {mode:o}");
}

#[test]
fn packing_the_same_tree_twice_gives_the_same_archive() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["b", "a", "c/d", "c/a"] {
        write(&dir.path().join("t").join(name), name.as_bytes());
    }
    let (mut one, mut two) = (Vec::new(), Vec::new());
    pack(&dir.path().join("t"), "t", &mut one).unwrap();
    pack(&dir.path().join("t"), "t", &mut two).unwrap();
    assert_eq!(one, two);
    let names: Vec<String> = tar::Archive::new(one.as_slice())
        .entries()
        .unwrap()
        .map(|e| e.unwrap().path().unwrap().display().to_string())
        .collect();
    assert_eq!(names, ["t/", "t/a", "t/b", "t/c", "t/c/a", "t/c/d"]);
}

#[test]
fn sockets_fifos_and_devices_are_skipped_when_packing() {
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("t");
    write(&source.join("a"), b"a");
    let status = std::process::Command::new("mkfifo")
        .arg(source.join("pipe"))
        .status()
        .unwrap();
    assert!(status.success());
    let count = pack(&source, "t", io::sink()).unwrap();
    assert_eq!((count.files, count.skipped), (1, 1));
}

#[test]
fn entries_that_climb_out_or_are_absolute_are_refused() {
    for name in ["out/../../escape", "/etc/passwd", "../out/x"] {
        let (dir, result) = unpack_raw(&[(name, EntryType::Regular, "", b"x")]);
        let err = result.unwrap_err();
        assert!(
            matches!(err, ArchiveError::UnsafeEntry { .. }),
            "{name}: {err}"
        );
        assert!(err.to_string().contains(name), "{err}");
        assert!(!dir.path().join("escape").exists());
    }
}

#[test]
fn entries_outside_the_layers_title_are_refused() {
    let (_dir, result) = unpack_raw(&[("other/x", EntryType::Regular, "", b"x")]);
    let err = result.unwrap_err().to_string();
    assert!(err.contains("not under the layer's title"), "{err}");
}

#[test]
fn nothing_is_written_through_a_symbolic_link() {
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().display().to_string();
    let (_dir, result) = unpack_raw(&[
        ("out/link", EntryType::Symlink, &target, b""),
        ("out/link/planted", EntryType::Regular, "", b"x"),
    ]);
    let err = result.unwrap_err().to_string();
    assert!(err.contains("through a symbolic link"), "{err}");
    assert!(!outside.path().join("planted").exists());
}

#[test]
fn a_file_entry_replaces_a_link_of_the_same_name_instead_of_following_it() {
    let outside = tempfile::tempdir().unwrap();
    let victim = outside.path().join("victim");
    fs::write(&victim, b"untouched").unwrap();
    let (dir, result) = unpack_raw(&[
        (
            "out/f",
            EntryType::Symlink,
            &victim.display().to_string(),
            b"",
        ),
        ("out/f", EntryType::Regular, "", b"new"),
    ]);
    result.unwrap();
    assert_eq!(fs::read(&victim).unwrap(), b"untouched");
    assert_eq!(fs::read(dir.path().join("root/f")).unwrap(), b"new");
}

#[test]
fn hard_links_may_only_name_files_unpacked_before_them() {
    let (_dir, outside) = unpack_raw(&[("out/h", EntryType::Link, "/etc/passwd", b"")]);
    assert!(outside.unwrap_err().to_string().contains("absolute"));
    let (_dir, missing) = unpack_raw(&[("out/h", EntryType::Link, "out/nothing", b"")]);
    assert!(
        missing
            .unwrap_err()
            .to_string()
            .contains("not a file unpacked before it")
    );
    let (_dir, to_link) = unpack_raw(&[
        ("out/l", EntryType::Symlink, "/etc/passwd", b""),
        ("out/h", EntryType::Link, "out/l", b""),
    ]);
    assert!(
        to_link
            .unwrap_err()
            .to_string()
            .contains("not a file unpacked before it")
    );
    let (dir, fine) = unpack_raw(&[
        ("out/a", EntryType::Regular, "", b"abc"),
        ("out/h", EntryType::Link, "out/a", b""),
    ]);
    fine.unwrap();
    assert_eq!(fs::read(dir.path().join("root/h")).unwrap(), b"abc");
}

#[test]
fn devices_and_fifos_in_an_archive_are_skipped() {
    let (dir, result) = unpack_raw(&[
        ("out/fifo", EntryType::Fifo, "", b""),
        ("out/dev", EntryType::Char, "", b""),
        ("out/a", EntryType::Regular, "", b"a"),
    ]);
    let count = result.unwrap();
    assert_eq!((count.files, count.skipped), (1, 2));
    assert!(!dir.path().join("root/fifo").exists());
}

#[test]
fn a_read_only_directory_still_receives_its_content() {
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("t");
    write(&source.join("ro/a"), b"a");
    fs::set_permissions(source.join("ro"), fs::Permissions::from_mode(0o555)).unwrap();
    let mut tar = Vec::new();
    pack(&source, "t", &mut tar).unwrap();
    fs::set_permissions(source.join("ro"), fs::Permissions::from_mode(0o755)).unwrap();
    let root = dir.path().join("pulled");
    fs::create_dir(&root).unwrap();
    unpack(tar.as_slice(), Path::new("t"), &root, &unbounded()).unwrap();
    assert_eq!(fs::read(root.join("ro/a")).unwrap(), b"a");
}

/// A tar stream of (name, type, link, mode) entries without content, names unchecked.
fn raw_tar_with_modes(entries: &[(&str, EntryType, &str, u32)]) -> Vec<u8> {
    let mut builder = tar::Builder::new(Vec::new());
    for (name, kind, link, mode) in entries {
        let mut header = Header::new_old();
        let old = header.as_old_mut();
        old.name[..name.len()].copy_from_slice(name.as_bytes());
        old.linkname[..link.len()].copy_from_slice(link.as_bytes());
        header.set_entry_type(*kind);
        header.set_mode(*mode);
        header.set_size(0);
        header.set_cksum();
        builder.append(&header, io::empty()).unwrap();
    }
    builder.into_inner().unwrap()
}

#[test]
fn a_directory_replaced_by_a_link_is_never_chmodded_through_it() {
    let outside = tempfile::tempdir().unwrap();
    let victim = outside.path().join("victim");
    fs::create_dir(&victim).unwrap();
    fs::set_permissions(&victim, fs::Permissions::from_mode(0o700)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    fs::create_dir(&root).unwrap();
    let tar = raw_tar_with_modes(&[
        ("out/d/", EntryType::Directory, "", 0o777),
        ("out/d", EntryType::Symlink, victim.to_str().unwrap(), 0o777),
    ]);
    unpack(tar.as_slice(), Path::new("out"), &root, &unbounded()).unwrap();
    assert!(root.join("d").symlink_metadata().unwrap().is_symlink());
    let mode = fs::metadata(&victim).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700, "the link's target was chmodded to {mode:o}");
}

#[test]
fn a_directory_entry_through_a_link_is_refused() {
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().display().to_string();
    let (_dir, result) = unpack_raw(&[
        ("out/l", EntryType::Symlink, &target, b""),
        ("out/l/sub/", EntryType::Directory, "", b""),
    ]);
    let err = result.unwrap_err().to_string();
    assert!(err.contains("through a symbolic link"), "{err}");
    assert!(!outside.path().join("sub").exists());
}

#[test]
fn a_hard_link_through_a_linked_directory_is_refused() {
    let outside = tempfile::tempdir().unwrap();
    fs::write(outside.path().join("secret"), b"s").unwrap();
    let target = outside.path().display().to_string();
    let (dir, result) = unpack_raw(&[
        ("out/l", EntryType::Symlink, &target, b""),
        ("out/h", EntryType::Link, "out/l/secret", b""),
    ]);
    let err = result.unwrap_err().to_string();
    assert!(err.contains("symbolic link"), "{err}");
    assert!(!dir.path().join("root/h").exists());
}

#[test]
fn packing_never_follows_a_link_at_the_top() {
    let dir = tempfile::tempdir().unwrap();
    let real = dir.path().join("real");
    write(&real.join("a.txt"), b"a");
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let mut tar = Vec::new();
    let err = pack(&link, "link", &mut tar).unwrap_err();
    assert!(matches!(err, ArchiveError::Symlink { .. }), "{err}");
    assert!(err.to_string().contains("symbolic link"), "{err}");
}

/// Every file under `root`, and their bytes.
fn written(root: &Path) -> (u64, u64) {
    let mut pending = vec![root.to_path_buf()];
    let (mut entries, mut bytes) = (0, 0);
    while let Some(dir) = pending.pop() {
        for entry in fs::read_dir(&dir).unwrap() {
            let entry = entry.unwrap();
            entries += 1;
            let metadata = entry.metadata().unwrap();
            bytes += metadata.len();
            if metadata.is_dir() {
                pending.push(entry.path());
            }
        }
    }
    (entries, bytes)
}

#[test]
fn a_gzip_bomb_is_refused_before_its_content_is_written() {
    // 16 MiB of zeros in one file: some 16 KiB of gzip.
    const CONTENT: u64 = 16 * 1024 * 1024;
    let mut builder = tar::Builder::new(flate2::write::GzEncoder::new(
        Vec::new(),
        flate2::Compression::default(),
    ));
    let mut header = Header::new_gnu();
    header.set_entry_type(EntryType::Regular);
    header.set_mode(0o644);
    header.set_size(CONTENT);
    builder
        .append_data(&mut header, "out/zeros", io::repeat(0).take(CONTENT))
        .unwrap();
    let bomb = builder.into_inner().unwrap().finish().unwrap();
    assert!(bomb.len() < 64 * 1024, "{} bytes of gzip", bomb.len());

    let dir = tempfile::tempdir().unwrap();
    let budget = Budget::new(Limits {
        max_bytes: 1024 * 1024,
        max_entries: 10,
    });
    let gunzipped = flate2::read::GzDecoder::new(bomb.as_slice());
    let err = unpack(gunzipped, Path::new("out"), dir.path(), &budget).unwrap_err();
    assert!(
        matches!(
            err,
            ArchiveError::Limit(Exceeded::Bytes { limit: 1_048_576 })
        ),
        "{err:?}"
    );
    assert!(
        err.to_string().contains("more than 1048576 bytes")
            && err.to_string().contains("--max-bytes"),
        "{err}"
    );
    assert_eq!(written(dir.path()), (0, 0), "the bomb's file was made");
}

#[test]
fn an_archive_of_more_entries_than_the_limit_stops_at_the_limit() {
    let names: Vec<String> = (0..25).map(|n| format!("out/{n:02}.txt")).collect();
    let entries: Vec<(&str, EntryType, &str, &[u8])> = names
        .iter()
        .map(|name| (name.as_str(), EntryType::Regular, "", &b"x"[..]))
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let budget = Budget::new(Limits {
        max_bytes: 1024,
        max_entries: 10,
    });
    let err = unpack(
        raw_tar(&entries).as_slice(),
        Path::new("out"),
        dir.path(),
        &budget,
    )
    .unwrap_err();
    assert!(
        matches!(err, ArchiveError::Limit(Exceeded::Entries { limit: 10 })),
        "{err:?}"
    );
    assert!(err.to_string().contains("--max-entries"), "{err}");
    assert_eq!(written(dir.path()), (10, 10));

    // The same archive within its limits unpacks whole.
    let dir = tempfile::tempdir().unwrap();
    let budget = Budget::new(Limits {
        max_bytes: 25,
        max_entries: 25,
    });
    unpack(
        raw_tar(&entries).as_slice(),
        Path::new("out"),
        dir.path(),
        &budget,
    )
    .unwrap();
    assert_eq!(written(dir.path()), (25, 25));
}
