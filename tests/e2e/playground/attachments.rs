//! Files attached to a prompt in the playground: picked with the Attach button's file input or
//! dropped on the composer, each uploaded at once and shown as a chip until the prompt is
//! sent with them, then shown under the prompt's input as links that download them.

use std::path::Path;

use agentic_testkit::Stack;
use agentic_testkit::model::Match;
use serde_json::{Value, json};

use super::browser::Browser;
use super::{on_last, open_playground, until_state};
use crate::support::*;

/// Drags the files `arguments[0]` (`[name, text]` pairs, text/plain) onto the prompt box and
/// drops them there, as a person dragging them from their desktop would (dragenter, dragover,
/// drop, each carrying them); returns whether the composer was marked while they were over it.
const DROP: &str = "const data = new DataTransfer(); \
    for (const [name, text] of arguments[0]) \
        data.items.add(new File([text], name, {type: 'text/plain'})); \
    const target = document.getElementById('input'); \
    const fire = (type) => target.dispatchEvent(new DragEvent(type, \
        {bubbles: true, cancelable: true, dataTransfer: data})); \
    fire('dragenter'); \
    fire('dragover'); \
    const marked = document.getElementById('composer').classList.contains('dragging'); \
    fire('drop'); \
    return marked;";

fn sorted(mut names: Vec<String>) -> Vec<String> {
    names.sort();
    names
}

#[tokio::test]
async fn a_file_picked_and_files_dropped_on_the_composer_are_uploaded_attached_and_shown_in_the_timeline()
 {
    let stack = Stack::start(vec![text(Match::Any, "Read them.")])
        .await
        .unwrap();
    let browser = open_playground(&stack).await;
    let dir = tempfile::tempdir().unwrap();
    attach_in_the_composer(&browser, dir.path()).await;
    browser.screenshot("attachments-composer").await;

    browser
        .send_prompt("what do these files say?", "classic")
        .await;
    until_state(&browser, "completed").await;
    let chips_left = browser
        .run(
            "return document.querySelectorAll('.attachment-chip').length",
            vec![],
        )
        .await;
    assert_eq!(chips_left, 0, "the sent prompt took the files");
    let (names, hrefs) = links_of(&browser).await;
    assert_eq!(sorted(names), ["dropped.txt", "picked.txt"]);
    browser.screenshot("attachments-timeline").await;

    // The gateway's record of the prompt names the same two files, and each link on the
    // page is the content of one of them, and downloads it.
    let prompt = read_prompt(&stack, &browser).await;
    let contents = users_files(&prompt);
    assert_eq!(sorted(hrefs), sorted(contents), "{prompt}");
    browser
        .run(
            &on_last(
                "[...last.querySelectorAll('a.attachment')] \
                   .find(a => a.textContent === 'dropped.txt').click()",
            ),
            vec![],
        )
        .await;
    assert_eq!(browser.downloaded("dropped.txt").await, "hello from a drop");
    browser.close().await;
}

/// Picks `picked.txt` (written in `dir`) with the Attach button's input, drops `dropped.txt`
/// and `unwanted.txt` on the composer, waits for the three uploads, then takes
/// `unwanted.txt` off again.
async fn attach_in_the_composer(browser: &Browser, dir: &Path) {
    let picked = dir.join("picked.txt");
    std::fs::write(&picked, "hello from the file picker\n").unwrap();
    browser.choose_file("#attach-input", &picked).await;
    browser
        .until(
            "the picked file has its chip",
            "return document.querySelectorAll('.attachment-chip').length === 1",
        )
        .await;

    let marked = browser
        .run(
            DROP,
            vec![json!([
                ["dropped.txt", "hello from a drop"],
                ["unwanted.txt", "not for this prompt"]
            ])],
        )
        .await;
    assert_eq!(
        marked, true,
        "the composer is marked while files are over it"
    );
    let names = until_uploaded(browser, 3).await;
    assert_eq!(names, json!(["picked.txt", "dropped.txt", "unwanted.txt"]));
    let still_marked = browser
        .run(
            "return document.getElementById('composer').classList.contains('dragging')",
            vec![],
        )
        .await;
    assert_eq!(still_marked, false, "the mark goes with the drop");
    browser
        .run(
            "[...document.querySelectorAll('.attachment-chip')] \
               .find(c => c.querySelector('.attachment-name').textContent === 'unwanted.txt') \
               .querySelector('button.remove').click()",
            vec![],
        )
        .await;
    assert_eq!(
        until_uploaded(browser, 2).await,
        json!(["picked.txt", "dropped.txt"])
    );
}

/// The names and hrefs of the newest prompt's attachment links.
async fn links_of(browser: &Browser) -> (Vec<String>, Vec<String>) {
    let links = browser
        .run(
            &on_last(
                "return [...last.querySelectorAll('a.attachment')]\
                 .map(a => [a.textContent, a.getAttribute('href')])",
            ),
            vec![],
        )
        .await;
    serde_json::from_value::<Vec<(String, String)>>(links)
        .unwrap()
        .into_iter()
        .unzip()
}

/// Asserts that `prompt` (GetPrompt's JSON) lists `picked.txt` and `dropped.txt` as the
/// user's files; the paths of their contents.
fn users_files(prompt: &Value) -> Vec<String> {
    let attached = prompt["attachments"]
        .as_array()
        .unwrap_or_else(|| panic!("no attachments: {prompt}"));
    let names = attached
        .iter()
        .map(|file| file["filename"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(sorted(names), ["dropped.txt", "picked.txt"], "{prompt}");
    for file in attached {
        assert_eq!(file["source"], "FILE_SOURCE_USER", "{prompt}");
    }
    let dropped = attached
        .iter()
        .find(|file| file["filename"] == "dropped.txt")
        .unwrap();
    assert_eq!(dropped["size"], "17", "{prompt}");
    assert!(
        dropped["mimeType"]
            .as_str()
            .is_some_and(|mime| mime.starts_with("text/plain")),
        "{prompt}"
    );
    attached
        .iter()
        .map(|file| format!("/v1/files/{}/content", file["id"].as_str().unwrap()))
        .collect()
}

/// Waits until the composer shows `count` chips, each uploaded, and Send can be pressed; the
/// chips' names, in page order.
async fn until_uploaded(browser: &Browser, count: usize) -> Value {
    let script = format!(
        "const chips = [...document.querySelectorAll('.attachment-chip')]; \
         return chips.length === {count} && chips.every(c => c.dataset.fileId) \
             && !document.getElementById('send').disabled \
             && chips.map(c => c.querySelector('.attachment-name').textContent)"
    );
    browser
        .until(&format!("{count} files are uploaded"), &script)
        .await
}

/// The newest prompt on the page as GetPrompt answers it over HTTP (dev mode: the page's
/// user, `local`).
async fn read_prompt(stack: &Stack, browser: &Browser) -> Value {
    let id = browser
        .run(&on_last("return last.dataset.promptId"), vec![])
        .await;
    reqwest::Client::new()
        .get(format!(
            "{}/v1/prompts/{}",
            stack.gateway_http_url(),
            id.as_str().unwrap()
        ))
        .header("x-user-id", "local")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}
