//! The permission question on a terminal shows a call's whole arguments, wrapped to the
//! terminal's width, and `v` shows them as pretty JSON before asking again.

use crate::common;

use aquaregia_test_support::mock_model::{MockServer, Reply};
use common::{Scratch, cli, on_pty, read_until, test_server_entry, use_mock};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[tokio::test]
async fn long_arguments_wrap_and_v_shows_them_in_full() {
    let scratch = Scratch::new();
    let name = format!("Ann {} the end", "very ".repeat(20));
    let model = MockServer::with_replies(vec![
        Reply::tool_call("call_1", "greet", json!({"name": name, "excited": true})),
        Reply::text_stream(&["Greeted."]),
    ])
    .await;
    scratch.config(&json!({ "test": test_server_entry() }));
    let mut command = cli(&scratch);
    // greet is read-only: --ask-all makes it ask.
    command.args(["run", "--ask-all", "Greet Ann."]);
    use_mock(&mut command, &model);
    let mut child = on_pty(&command, 50).spawn().expect("start script");
    let mut keys = child.stdin.take().expect("piped stdin");
    let mut screen = child.stdout.take().expect("piped stdout");
    let mut seen = Vec::new();
    read_until(&mut screen, &mut seen, "[y/N/always/v] ").await;
    let question = String::from_utf8_lossy(&seen).into_owned();
    // Every argument is there, nothing cut, and no line is wider than the terminal.
    let lines: Vec<String> = question
        .lines()
        // What stays on screen: the text after the last carriage return (spinners redraw).
        .map(|line| {
            let line = strip_ansi(line);
            let line = line.trim_end_matches('\r');
            line.rsplit('\r').next().unwrap_or(line).to_owned()
        })
        .collect();
    let asked: Vec<&String> = lines
        .iter()
        .skip_while(|line| !line.starts_with("Allow greet("))
        .collect();
    assert!(asked.len() >= 3, "{question:?}");
    assert!(
        asked.iter().all(|line| line.chars().count() <= 50),
        "{asked:#?}"
    );
    let joined: String = asked
        .iter()
        .map(|line| line.trim())
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        joined.contains(&format!("greet(name: \"{name}\"")),
        "{asked:#?}"
    );
    assert!(joined.contains("excited: true)?"), "{asked:#?}");
    assert!(!joined.contains('…'), "{asked:#?}");

    keys.write_all(b"v\n").await.expect("type v");
    // The arguments as pretty JSON, then the question again.
    let mut after = Vec::new();
    read_until(&mut screen, &mut after, "[y/N/always/v] ").await;
    let viewed = String::from_utf8_lossy(&after).into_owned();
    assert!(viewed.contains("\r\n  \"excited\": true"), "{viewed:?}");
    assert!(
        viewed.contains(&format!("\r\n  \"name\": \"{name}\"")),
        "{viewed:?}"
    );
    seen.extend(after);
    keys.write_all(b"y\n").await.expect("type y");
    tokio::time::timeout(common::BOUND, screen.read_to_end(&mut seen))
        .await
        .expect("the run ends")
        .expect("read the pty output");
    drop(keys);
    let status = child.wait().await.expect("wait for script");
    let screen = String::from_utf8_lossy(&seen);
    assert!(status.success(), "{status:?} {screen}");
    assert!(strip_ansi(&screen).contains("✓ greet("), "{screen}");
    assert!(screen.contains("Greeted."), "{screen}");
    assert_eq!(model.requests().len(), 2, "{screen}");
}

/// `text` without CSI sequences.
fn strip_ansi(text: &str) -> String {
    let mut out = String::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            if chars.next() == Some('[') {
                for c in chars.by_ref() {
                    if ('\x40'..='\x7e').contains(&c) {
                        break;
                    }
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// An argument with a second line (what hid `touch pwned` behind `echo harmless` in an
/// editor's one-line title) shows both lines in the question; rejected, the tool never runs.
#[tokio::test]
async fn a_second_line_in_an_argument_is_shown_in_the_question() {
    let scratch = Scratch::new();
    let name = "harmless\ntouch pwned_hidden_line";
    let model = MockServer::with_replies(vec![
        Reply::tool_call("call_1", "greet", json!({"name": name})),
        Reply::text_stream(&["Not greeted."]),
    ])
    .await;
    scratch.config(&json!({ "test": test_server_entry() }));
    let mut command = cli(&scratch);
    command.args(["run", "--ask-all", "Greet."]);
    use_mock(&mut command, &model);
    let mut child = on_pty(&command, 80).spawn().expect("start script");
    let mut keys = child.stdin.take().expect("piped stdin");
    let mut screen = child.stdout.take().expect("piped stdout");
    let mut seen = Vec::new();
    read_until(&mut screen, &mut seen, "[y/N/always/v] ").await;
    let question = strip_ansi(&String::from_utf8_lossy(&seen));
    let asked = &question[question.find("Allow greet(").expect("the question")..];
    assert!(asked.contains("harmless"), "{asked:?}");
    assert!(asked.contains("touch pwned_hidden_line"), "{asked:?}");

    keys.write_all(b"n\n").await.expect("type n");
    tokio::time::timeout(common::BOUND, screen.read_to_end(&mut seen))
        .await
        .expect("the run ends")
        .expect("read the pty output");
    drop(keys);
    child.wait().await.expect("wait for script");
    let sent = model.requests();
    assert_eq!(sent.len(), 2);
    let results = aquaregia_test_support::mock_model::tool_results(&sent[1].body);
    assert_eq!(results.len(), 1, "{results:?}");
    assert!(results[0].1.contains("rejected"), "{results:?}");
}
