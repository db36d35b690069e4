//! The command line's contract: exit codes and error messages that name the problem.

mod common;

use std::time::{Duration, Instant};

use common::strait::{arg, config_file, run_cli, Strait};

#[test]
fn a_bad_regex_names_the_file_line_and_key_and_exits_2() {
    let (_dir, path) = config_file(
        "mm2.properties",
        "clusters = a, b\na.bootstrap.servers = 127.0.0.1:9092\nb.bootstrap.servers = 127.0.0.1:9093\na->b.enabled = true\na->b.topics = orders, (\n",
    );
    let (code, text) = run_cli(&["run", arg(&path)]);
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
    let (code, text) = run_cli(&["check", arg(&path)]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("topcis"), "{text}");
}

#[test]
fn no_enabled_flow_is_an_error() {
    let (_dir, path) = config_file("mm2.properties", "clusters = a, b\na.bootstrap.servers = 127.0.0.1:9092\nb.bootstrap.servers = 127.0.0.1:9093\n");
    let (code, text) = run_cli(&["run", arg(&path)]);
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
    let (code, text) = run_cli(&["check", arg(&path)]);
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains("cluster a") && text.contains("127.0.0.1:9"),
        "{text}"
    );
}

#[test]
fn an_unexpected_warning_in_the_log_fails_the_test() {
    // Nothing listens on loopback port 9: strait complains in its log. The log check of
    // `Strait` (on drop) must fail a test that did not allow that, and pass one that did.
    let config =
        "clusters = a, b\na.bootstrap.servers = 127.0.0.1:9\nb.bootstrap.servers = 127.0.0.1:9\n\
                  a->b.enabled = true\na.request.timeout.ms = 1000\nb.request.timeout.ms = 1000\n";
    let strait = Strait::start(config, "properties");
    let deadline = Instant::now() + Duration::from_secs(30);
    while strait.unexpected_log_lines().is_empty() {
        assert!(
            Instant::now() < deadline,
            "no complaint:\n{}",
            strait.log_text()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let lines = strait.unexpected_log_lines();
    assert!(
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(strait))).is_err(),
        "the log check let these lines pass:\n{}",
        lines.join("\n")
    );

    let strait = Strait::start(config, "properties").allow(&["127.0.0.1:9"]);
    std::thread::sleep(Duration::from_secs(3));
    let text = strait.log_text();
    assert!(
        !text.is_empty() && strait.unexpected_log_lines().is_empty(),
        "{text}"
    );
}

#[test]
fn a_security_protocol_strait_cannot_speak_exits_2_naming_the_key() {
    // TLS/SASL are not implemented: strait must refuse, not connect in plaintext.
    let (_dir, path) = config_file(
        "mm2.properties",
        "clusters = a, b\na.bootstrap.servers = 127.0.0.1:9\nb.bootstrap.servers = 127.0.0.1:9\n\
         a->b.enabled = true\nb.security.protocol = SASL_SSL\n",
    );
    let (code, text) = run_cli(&["check", arg(&path)]);
    assert_eq!(code, 2, "{text}");
    assert!(
        text.contains("mm2.properties:5") && text.contains("b.security.protocol"),
        "{text}"
    );
}
