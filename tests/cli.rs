//! The command line's contract: exit codes and error messages that name the problem.

use std::process::Command;

fn strait(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_strait"))
        .args(args)
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code().unwrap_or(-1), text)
}

fn config_file(name: &str, text: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::write(&path, text).unwrap();
    let path = path.to_str().unwrap().to_string();
    (dir, path)
}

#[test]
fn a_bad_regex_names_the_file_line_and_key_and_exits_2() {
    let (_dir, path) = config_file(
        "mm2.properties",
        "clusters = a, b\na.bootstrap.servers = 127.0.0.1:9092\nb.bootstrap.servers = 127.0.0.1:9093\na->b.enabled = true\na->b.topics = orders, (\n",
    );
    let (code, text) = strait(&["run", &path]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("mm2.properties:5"), "{text}");
    assert!(text.contains("a->b.topics"), "{text}");
}

#[test]
fn an_unknown_toml_field_is_an_error() {
    let (_dir, path) = config_file(
        "strait.toml",
        "[clusters.a]\nbootstrap_servers = [\"127.0.0.1:9092\"]\n[clusters.b]\nbootstrap_servers = [\"127.0.0.1:9093\"]\n[[flows]]\nsource = \"a\"\ntarget = \"b\"\ntopcis = [\".*\"]\n",
    );
    let (code, text) = strait(&["check", &path]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("topcis"), "{text}");
}

#[test]
fn no_enabled_flow_is_an_error() {
    let (_dir, path) = config_file("mm2.properties", "clusters = a, b\na.bootstrap.servers = 127.0.0.1:9092\nb.bootstrap.servers = 127.0.0.1:9093\n");
    let (code, text) = strait(&["run", &path]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("no flow enabled"), "{text}");
}

#[test]
fn check_names_an_unreachable_cluster_and_exits_1() {
    // Port 9 on loopback: nothing listens there, so connections are refused at once.
    let (_dir, path) = config_file(
        "mm2.properties",
        "clusters = a, b\na.bootstrap.servers = 127.0.0.1:9\nb.bootstrap.servers = 127.0.0.1:9\na->b.enabled = true\na.request.timeout.ms = 2000\nb.request.timeout.ms = 2000\n",
    );
    let (code, text) = strait(&["check", &path]);
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains("cluster a") && text.contains("127.0.0.1:9"),
        "{text}"
    );
}
