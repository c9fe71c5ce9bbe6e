//! The playground's Skills panel: the caller's skills listed in the sidebar, a skill folder
//! added from a picked folder (packed into a tar by the page) or from an archive, a folder
//! that is no skill refused with the reason, and a folder of one's own deleted.

use agentic_testkit::Stack;
use agentic_testkit::model::Match;
use serde_json::json;

use super::browser::Browser;
use super::open_playground;
use crate::support::*;

/// The names of the skills listed in the sidebar, in order.
async fn listed(browser: &Browser) -> serde_json::Value {
    browser
        .run(
            "return [...document.querySelectorAll('#skills li.skill')].map(li => li.dataset.name + ':' + li.dataset.source)",
            vec![],
        )
        .await
}

async fn until_listed(browser: &Browser, count: usize) -> serde_json::Value {
    browser
        .until(
            &format!("{count} skills are listed"),
            &format!("return document.querySelectorAll('#skills li.skill').length === {count}"),
        )
        .await;
    listed(browser).await
}

#[tokio::test]
async fn a_skill_folder_picked_or_archived_is_added_listed_refused_when_no_skill_and_deleted() {
    let stack = Stack::start(vec![text(Match::Any, "ok")]).await.unwrap();
    let browser = open_playground(&stack).await;
    browser.click("#skills-panel summary").await;
    browser
        .until(
            "the empty list says so",
            "const none = document.querySelector('#skills .skill-none'); \
             return !!none && none.textContent === 'No skills yet'",
        )
        .await;

    let dir = tempfile::tempdir().unwrap();
    let folder = crate::skill_folders::write_skill(dir.path(), "Fills PDF forms.");
    browser.choose_file("#skill-folder-input", &folder).await;
    assert_eq!(until_listed(&browser, 1).await, json!(["pdf-forms:folder"]));

    let archive = dir.path().join("notes.zip");
    let skill = "---\nname: notes\ndescription: Keeps notes.\n---\nWrite them down.\n";
    std::fs::write(
        &archive,
        crate::skill_folders::zip_of(&[("SKILL.md", skill.as_bytes())]),
    )
    .unwrap();
    browser.choose_file("#skill-archive-input", &archive).await;
    assert_eq!(
        until_listed(&browser, 2).await,
        json!(["notes:folder", "pdf-forms:folder"])
    );

    // A folder with no SKILL.md at its top is refused in the page, before anything is read.
    let not_a_skill = dir.path().join("photos");
    std::fs::create_dir_all(&not_a_skill).unwrap();
    std::fs::write(not_a_skill.join("cat.txt"), "meow").unwrap();
    browser
        .choose_file("#skill-folder-input", &not_a_skill)
        .await;
    let banner = browser
        .until(
            "the page says why",
            "const banner = document.getElementById('error'); \
             return !banner.hidden && banner.textContent",
        )
        .await;
    assert!(
        banner.as_str().unwrap().contains("no SKILL.md at its top"),
        "{banner}"
    );

    // The person confirms the delete; the gateway no longer has it.
    browser
        .run("window.confirm = () => true; return true", vec![])
        .await;
    browser
        .run(
            "document.querySelector('#skills li[data-name=\"pdf-forms\"] button.remove').click()",
            vec![],
        )
        .await;
    assert_eq!(until_listed(&browser, 1).await, json!(["notes:folder"]));
    let client = stack.client("local").await.unwrap();
    let names: Vec<String> = client
        .list_skills()
        .await
        .unwrap()
        .into_iter()
        .map(|skill| skill.name)
        .collect();
    assert_eq!(names, ["notes"]);
    browser.screenshot("skills").await;
    browser.close().await;
}
