//! The ACP registry entry (`acp-registry/aquaregia/`) against what the registry's CI checks
//! (its CONTRIBUTING.md: the entry's fields, platforms, archive formats, versions in URLs, the
//! 16x16 monochrome icon; its auth check: `initialize` answered on a clean stdout with an
//! `agent` or `terminal` auth method) and against the binary: the id, display name and version
//! are `initialize`'s `agentInfo`, and the declared command line starts the agent, run as the
//! registry's checker runs it (a fresh `HOME`, no API key in the environment).

use std::path::{Path, PathBuf};
use std::process::Stdio;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::common::BOUND;

const PLATFORMS: [&str; 6] = [
    "darwin-aarch64",
    "darwin-x86_64",
    "linux-aarch64",
    "linux-x86_64",
    "windows-aarch64",
    "windows-x86_64",
];
const ARCHIVES: [&str; 5] = [".zip", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2"];

fn entry_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../acp-registry/aquaregia")
}

fn manifest() -> Value {
    let text = std::fs::read_to_string(entry_dir().join("agent.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// The registry's platform name for the machine running the test.
fn this_platform() -> String {
    let os = match std::env::consts::OS {
        "macos" => "darwin",
        other => other,
    };
    format!("{os}-{}", std::env::consts::ARCH)
}

#[test]
fn the_entry_has_what_the_registry_requires() {
    let entry = manifest();
    let id = entry["id"].as_str().unwrap();
    assert!(
        id.starts_with(|c: char| c.is_ascii_lowercase())
            && id
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'),
        "{id}"
    );
    assert_eq!(
        entry_dir().file_name().unwrap().to_str(),
        Some(id),
        "the folder is named after the id"
    );
    let allowed = [
        "id",
        "name",
        "version",
        "description",
        "repository",
        "website",
        "authors",
        "license",
        "license_url",
        "icon",
        "distribution",
    ];
    for (key, value) in entry.as_object().unwrap() {
        assert!(allowed.contains(&key.as_str()), "unknown field {key}");
        if !matches!(key.as_str(), "authors" | "distribution") {
            assert!(!value.as_str().unwrap().is_empty(), "{key} is empty");
        }
    }
    let version = entry["version"].as_str().unwrap();
    assert_eq!(
        version,
        env!("CARGO_PKG_VERSION"),
        "the workspace's version"
    );
    assert!(
        version
            .split('.')
            .all(|part| !part.is_empty() && part.chars().all(|c| c.is_ascii_digit()))
            && version.split('.').count() == 3,
        "{version}"
    );
    assert_eq!(entry["license"], env!("CARGO_PKG_LICENSE"));
    assert_eq!(entry["repository"], env!("CARGO_PKG_REPOSITORY"));
    let distribution = entry["distribution"].as_object().unwrap();
    assert_eq!(
        distribution.keys().collect::<Vec<_>>(),
        ["binary"],
        "a binary per platform (no npm or PyPI package)"
    );
    let binary = distribution["binary"].as_object().unwrap();
    for os in ["darwin", "linux", "windows"] {
        assert!(binary.keys().any(|p| p.starts_with(os)), "no {os} build");
    }
    for (platform, target) in binary {
        assert!(PLATFORMS.contains(&platform.as_str()), "{platform}");
        let target = target.as_object().unwrap();
        for key in target.keys() {
            assert!(
                ["archive", "sha256", "cmd", "args", "env"].contains(&key.as_str()),
                "{platform}: unknown field {key}"
            );
        }
        let archive = target["archive"].as_str().unwrap();
        assert!(archive.starts_with("https://"), "{archive}");
        assert!(
            ARCHIVES.iter().any(|ext| archive.ends_with(ext)),
            "{archive}: not an archive format the registry takes"
        );
        assert!(!archive.contains("/latest/"), "{archive}");
        assert!(
            archive.contains(&format!("/download/v{version}/")),
            "{archive}: the URL names the entry's version"
        );
        let cmd = target["cmd"].as_str().unwrap();
        let exe = if platform.starts_with("windows") {
            "aquaregia.exe"
        } else {
            "./aquaregia"
        };
        assert_eq!(cmd, exe, "{platform}");
        assert_eq!(target["args"], json!(["acp"]), "{platform}");
    }
}

#[test]
fn the_icon_is_16_by_16_and_monochrome() {
    let svg = std::fs::read_to_string(entry_dir().join("icon.svg")).unwrap();
    assert!(svg.contains(r#"width="16""#) && svg.contains(r#"height="16""#));
    assert!(svg.contains(r#"viewBox="0 0 16 16""#));
    for attribute in ["fill=\"", "stroke=\""] {
        for value in svg.split(attribute).skip(1) {
            let value = value.split('"').next().unwrap();
            assert!(
                ["currentColor", "none", "inherit"].contains(&value),
                "{attribute}{value}\": only currentColor, none or inherit"
            );
        }
    }
    assert!(!svg.contains("style="), "colours hidden in styles");
}

/// What the registry's auth check does: spawn the declared command in a fresh `HOME` with a
/// minimal environment, send its `initialize`, read one line.
#[tokio::test]
async fn the_declared_command_starts_the_agent_the_entry_describes() {
    let entry = manifest();
    let platform = this_platform();
    let Some(target) = entry["distribution"]["binary"].get(&platform) else {
        panic!("the entry has no build for {platform}, where the tests run");
    };
    let args: Vec<&str> = target["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|arg| arg.as_str().unwrap())
        .collect();
    let home = tempfile::tempdir().unwrap();
    let mut agent = tokio::process::Command::new(env!("CARGO_BIN_EXE_aquaregia"))
        .args(&args)
        .current_dir(home.path())
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home.path())
        .env("TERM", "dumb")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let initialize = json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {
            "protocolVersion": 1,
            "clientInfo": {"name": "ACP Registry Validator", "version": "1.0.0"},
            "clientCapabilities": {
                "terminal": true,
                "fs": {"readTextFile": true, "writeTextFile": true},
                "_meta": {"terminal_output": true, "terminal-auth": true},
            },
        },
    });
    let mut stdin = agent.stdin.take().unwrap();
    stdin
        .write_all(format!("{initialize}\n").as_bytes())
        .await
        .unwrap();
    let mut stdout = BufReader::new(agent.stdout.take().unwrap());
    let mut line = String::new();
    tokio::time::timeout(BOUND, stdout.read_line(&mut line))
        .await
        .expect("initialize answered in time")
        .unwrap();
    let answer: Value = serde_json::from_str(&line)
        .unwrap_or_else(|error| panic!("the first stdout line is not JSON ({error}): {line}"));
    assert_eq!(answer["id"], 1, "{answer:#}");
    let result = &answer["result"];
    assert_eq!(result["agentInfo"]["name"], entry["id"], "{result:#}");
    assert_eq!(result["agentInfo"]["title"], entry["name"], "{result:#}");
    assert_eq!(
        result["agentInfo"]["version"], entry["version"],
        "{result:#}"
    );
    // The registry's rule: a method's type is its `type`, else `terminal-auth` or
    // `agent-auth` in its `_meta`, else `agent`; one must be `agent` or `terminal`.
    let methods = result["authMethods"].as_array().unwrap();
    let types: Vec<&str> = methods
        .iter()
        .map(|method| match method["type"].as_str() {
            Some(kind) => kind,
            None if method["_meta"].get("terminal-auth").is_some() => "terminal",
            None => "agent",
        })
        .collect();
    assert!(
        types
            .iter()
            .any(|kind| matches!(*kind, "agent" | "terminal")),
        "{methods:#?}"
    );
    assert!(
        methods
            .iter()
            .all(|m| m["id"].is_string() && m["name"].is_string()),
        "{methods:#?}"
    );
    drop(stdin);
    let status = tokio::time::timeout(BOUND, agent.wait())
        .await
        .expect("the agent exits on stdin EOF")
        .unwrap();
    assert!(status.success(), "{status}");
}
