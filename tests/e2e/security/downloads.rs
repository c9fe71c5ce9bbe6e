//! Downloads stay in their folder: `agentic files CONVERSATION --output DIR` writes only plain,
//! unique, sanitised names directly inside DIR, never replaces a file, never uses a file id
//! as a path, and prints no name that could drive the terminal. Hostile names come from the
//! real stack (a model can name an artifact anything); hostile ids, which the stack never
//! makes, from a fake gateway that answers with whatever it likes.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use agentic_proto::v1::prompt_gateway_server::{PromptGateway, PromptGatewayServer};
use agentic_proto::v1::{
    ApproveToolCallRequest, CancelPromptRequest, Conversation, ConversationFile,
    CreateConversationRequest, CreatePromptRequest, File, FileOutput, GetConversationRequest,
    GetFileRequest, GetPromptRequest, ListConversationFilesRequest, ListConversationFilesResponse,
    ListConversationsRequest, ListConversationsResponse, ListModesRequest, ListModesResponse,
    ListPromptsRequest, ListPromptsResponse, Mode, Prompt, PromptEvent, RegisterModeRequest,
    RejectToolCallRequest, StreamPromptRequest, UpdateConversationRequest,
};
use agentic_testkit::Stack;
use agentic_testkit::model::Match;
use serde_json::json;
use tonic::{Request, Response, Status};

use super::clients::agentic;
use crate::support::*;

/// The names a model gives its files: paths, parent references, escapes, duplicates.
const HOSTILE_NAMES: &[&str] = &[
    "../../x",
    "/etc/passwd",
    "a/b",
    "..",
    "\u{1b}[31mred\u{1b}[0m.txt",
    "dup.txt",
    "dup.txt",
    "..\\..\\win.ini",
    "C:\\Windows\\evil.dll",
    "\u{202e}txt.exe",
];

/// Where each download goes: a folder three levels below a temporary root, so that a name
/// or id climbing out with `../..` would still land (visibly) inside the root.
struct Target {
    root: tempfile::TempDir,
}

impl Target {
    fn new() -> Target {
        Target {
            root: tempfile::tempdir().unwrap(),
        }
    }

    fn dir(&self) -> PathBuf {
        self.root.path().join("outer/inner/downloads")
    }

    /// Every file anywhere under the root, relative to it.
    fn every_file(&self) -> BTreeSet<PathBuf> {
        fn walk(dir: &Path, root: &Path, found: &mut BTreeSet<PathBuf>) {
            for entry in std::fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    walk(&path, root, found);
                } else {
                    found.insert(path.strip_prefix(root).unwrap().to_owned());
                }
            }
        }
        let mut found = BTreeSet::new();
        walk(self.root.path(), self.root.path(), &mut found);
        found
    }

    /// The names of the files in the download folder, asserting nothing is anywhere else.
    fn names_inside_only(&self) -> BTreeSet<String> {
        let inside = Path::new("outer/inner/downloads");
        let mut names = BTreeSet::new();
        for path in self.every_file() {
            assert_eq!(
                path.parent(),
                Some(inside),
                "{} was written outside the download folder",
                path.display()
            );
            names.insert(path.file_name().unwrap().to_str().unwrap().to_owned());
        }
        names
    }

    fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.dir().join(name)).unwrap()
    }
}

/// Fails when `output` holds a control character other than a line break or tab, or a
/// bidirectional override.
fn assert_terminal_safe(what: &str, output: &str) {
    let unsafe_characters: Vec<char> = output
        .chars()
        .filter(|character| {
            (character.is_control() && !matches!(character, '\n' | '\t'))
                || matches!(character, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
        })
        .collect();
    assert!(
        unsafe_characters.is_empty(),
        "{what} printed {unsafe_characters:?}:\n{output}"
    );
}

#[tokio::test]
async fn hostile_file_names_from_the_stack_are_saved_inside_the_folder_under_safe_unique_names() {
    let stores = HOSTILE_NAMES
        .iter()
        .enumerate()
        .map(|(index, name)| {
            call(
                "artifact__store",
                json!({"data": format!("content {index}"), "filename": name}),
            )
        })
        .collect();
    let stack = Stack::start(vec![
        calls(Match::NoToolResults, stores),
        text(Match::HasToolResults, "Saved them all."),
    ])
    .await
    .unwrap();
    let url = stack.gateway_url();
    let made = agentic(&["--server", &url, "prompt", "save the files"]).await;
    assert_eq!(made.code, 0, "stderr: {}", made.stderr);
    assert_terminal_safe("the prompt's stream", &made.stderr);
    let conversation = made
        .stderr
        .lines()
        .find_map(|line| line.strip_prefix("conversation: "))
        .expect("the conversation is named")
        .to_owned();

    let target = Target::new();
    std::fs::create_dir_all(target.dir()).unwrap();
    std::fs::write(target.dir().join("dup.txt"), "was here before").unwrap();
    let dir = target.dir();
    let listed = agentic(&[
        "--server",
        &url,
        "files",
        &conversation,
        "--output",
        dir.to_str().unwrap(),
    ])
    .await;
    assert_eq!(listed.code, 0, "stderr: {}", listed.stderr);
    assert_terminal_safe("files", &listed.stdout);
    assert_terminal_safe("files", &listed.stderr);
    // A header row, then one line per file.
    assert_eq!(listed.stdout.lines().count(), HOSTILE_NAMES.len() + 1);

    let names = target.names_inside_only();
    let expected: BTreeSet<String> = [
        "x",
        "passwd",
        "b",
        "file",
        "[31mred[0m.txt",
        "dup.txt",
        "dup (2).txt",
        "dup (3).txt",
        "win.ini",
        "evil.dll",
        "txt.exe",
    ]
    .map(str::to_owned)
    .into();
    assert_eq!(names, expected);
    assert_eq!(
        target.read("dup.txt"),
        "was here before",
        "an existing file is never replaced"
    );
    let duplicates: BTreeSet<String> = ["dup (2).txt", "dup (3).txt"]
        .map(|name| target.read(name))
        .into();
    assert_eq!(
        duplicates,
        ["content 5".to_owned(), "content 6".to_owned()].into()
    );
    assert_eq!(target.read("x"), "content 0");
}

/// A gateway that answers `ListConversationFiles` and `GetFile` with files whose ids and
/// names are hostile, and nothing else. Every download has content of its own, so a file
/// replaced by another would show.
struct HostileGateway {
    files: Vec<FileOutput>,
    downloads: AtomicUsize,
}

fn hostile_files(root: &Path) -> Vec<FileOutput> {
    let escaping_id = root.join("absolute-id").display().to_string();
    let long_name = format!("{}.csv", "n".repeat(400));
    let files = [
        ("../../../by-id", ""),
        (escaping_id.as_str(), ".."),
        ("../../up", "/"),
        ("\u{9b}2J", "\u{9b}31mcsi.txt"),
        ("\u{1b}]0;title\u{7}", "\u{1b}]0;title\u{7}.txt"),
        ("same-id", "same.txt"),
        ("same-id", "same.txt"),
        ("long", long_name.as_str()),
        ("CON", "CON"),
        ("\u{2066}isolate", "\u{2066}note\u{2069}.md"),
    ];
    files
        .iter()
        .map(|(id, filename)| FileOutput {
            id: (*id).to_owned(),
            filename: (*filename).to_owned(),
            mime_type: "text/plain\u{1b}[2J".to_owned(),
            size: 1,
            artifact_id: String::new(),
            ..FileOutput::default()
        })
        .collect()
}

#[tokio::test]
async fn a_hostile_server_cannot_make_files_write_outside_the_folder_or_drive_the_terminal() {
    let target = Target::new();
    let files = hostile_files(target.root.path());
    let count = files.len();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let server = tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(PromptGatewayServer::new(HostileGateway {
                files,
                downloads: AtomicUsize::new(0),
            }))
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
    );
    let url = format!("http://{address}");
    let dir = target.dir();

    let listed = agentic(&[
        "--server",
        &url,
        "files",
        "conv",
        "--output",
        dir.to_str().unwrap(),
    ])
    .await;
    assert_eq!(listed.code, 0, "stderr: {}", listed.stderr);
    assert_terminal_safe("files", &listed.stdout);
    assert_terminal_safe("files", &listed.stderr);

    let names = target.names_inside_only();
    assert_eq!(names.len(), count, "one file each: {names:?}");
    for name in &names {
        assert!(name.len() <= 200, "{name}");
        assert!(!name.contains("by-id") && !name.contains("absolute-id") && !name.contains("up"));
    }
    for expected in [
        "file",
        "file (2)",
        "file (3)",
        "31mcsi.txt",
        "]0;title.txt",
        "same.txt",
        "same (2).txt",
        "_CON",
        "note.md",
    ] {
        assert!(names.contains(expected), "{expected} in {names:?}");
    }
    assert!(
        names
            .iter()
            .any(|name| name.ends_with(".csv") && name.starts_with("nnn"))
    );
    let contents: BTreeSet<String> = names.iter().map(|name| target.read(name)).collect();
    assert_eq!(
        contents.len(),
        count,
        "every file saved once, none replaced"
    );

    // The JSON document keeps the server's names, escaped rather than raw.
    let document = agentic(&["--server", &url, "--json", "files", "conv"]).await;
    assert_eq!(document.code, 0, "stderr: {}", document.stderr);
    assert_terminal_safe("files --json", &document.stdout);
    let document: serde_json::Value = serde_json::from_str(&document.stdout).unwrap();
    assert_eq!(document["files"][3]["file"]["filename"], "\u{9b}31mcsi.txt");
    server.abort();
}

fn unimplemented<T>() -> Result<Response<T>, Status> {
    Err(Status::unimplemented("not part of this fake"))
}

#[tonic::async_trait]
impl PromptGateway for HostileGateway {
    async fn list_conversation_files(
        &self,
        _request: Request<ListConversationFilesRequest>,
    ) -> Result<Response<ListConversationFilesResponse>, Status> {
        let files = self
            .files
            .iter()
            .map(|file| ConversationFile {
                prompt_id: "\u{1b}[2Kprompt".to_owned(),
                file: Some(file.clone()),
            })
            .collect();
        Ok(Response::new(ListConversationFilesResponse { files }))
    }

    async fn upload_file(
        &self,
        _: Request<tonic::Streaming<agentic_proto::v1::UploadFileRequest>>,
    ) -> Result<Response<agentic_proto::v1::FileOutput>, Status> {
        unimplemented()
    }

    async fn get_file(&self, request: Request<GetFileRequest>) -> Result<Response<File>, Status> {
        let id = request.into_inner().file_id;
        let file = self
            .files
            .iter()
            .find(|file| file.id == id)
            .ok_or_else(|| Status::not_found("no such file"))?;
        let download = self.downloads.fetch_add(1, Ordering::Relaxed);
        Ok(Response::new(File {
            file: Some(file.clone()),
            content: format!("download {download}").into_bytes(),
        }))
    }

    async fn create_prompt(
        &self,
        _: Request<CreatePromptRequest>,
    ) -> Result<Response<Prompt>, Status> {
        unimplemented()
    }

    type StreamPromptStream = futures::stream::Empty<Result<PromptEvent, Status>>;

    async fn stream_prompt(
        &self,
        _: Request<StreamPromptRequest>,
    ) -> Result<Response<Self::StreamPromptStream>, Status> {
        unimplemented()
    }

    async fn get_prompt(&self, _: Request<GetPromptRequest>) -> Result<Response<Prompt>, Status> {
        unimplemented()
    }

    async fn list_prompts(
        &self,
        _: Request<ListPromptsRequest>,
    ) -> Result<Response<ListPromptsResponse>, Status> {
        unimplemented()
    }

    async fn cancel_prompt(
        &self,
        _: Request<CancelPromptRequest>,
    ) -> Result<Response<Prompt>, Status> {
        unimplemented()
    }

    async fn approve_tool_call(
        &self,
        _: Request<ApproveToolCallRequest>,
    ) -> Result<Response<Prompt>, Status> {
        unimplemented()
    }

    async fn reject_tool_call(
        &self,
        _: Request<RejectToolCallRequest>,
    ) -> Result<Response<Prompt>, Status> {
        unimplemented()
    }

    async fn respond_to_tool_call(
        &self,
        _: Request<agentic_proto::v1::RespondToToolCallRequest>,
    ) -> Result<Response<Prompt>, Status> {
        unimplemented()
    }

    async fn answer_question(
        &self,
        _: Request<agentic_proto::v1::AnswerQuestionRequest>,
    ) -> Result<Response<Prompt>, Status> {
        unimplemented()
    }

    async fn list_modes(
        &self,
        _: Request<ListModesRequest>,
    ) -> Result<Response<ListModesResponse>, Status> {
        unimplemented()
    }

    async fn list_tools(
        &self,
        _: Request<agentic_proto::v1::ListToolsRequest>,
    ) -> Result<Response<agentic_proto::v1::ListToolsResponse>, Status> {
        unimplemented()
    }

    async fn register_mode(
        &self,
        _: Request<RegisterModeRequest>,
    ) -> Result<Response<Mode>, Status> {
        unimplemented()
    }

    async fn create_trigger(
        &self,
        _: Request<agentic_proto::v1::CreateTriggerRequest>,
    ) -> Result<Response<agentic_proto::v1::Trigger>, Status> {
        unimplemented()
    }

    async fn list_triggers(
        &self,
        _: Request<agentic_proto::v1::ListTriggersRequest>,
    ) -> Result<Response<agentic_proto::v1::ListTriggersResponse>, Status> {
        unimplemented()
    }

    async fn update_trigger(
        &self,
        _: Request<agentic_proto::v1::UpdateTriggerRequest>,
    ) -> Result<Response<agentic_proto::v1::Trigger>, Status> {
        unimplemented()
    }

    async fn delete_trigger(
        &self,
        _: Request<agentic_proto::v1::DeleteTriggerRequest>,
    ) -> Result<Response<agentic_proto::v1::DeleteTriggerResponse>, Status> {
        unimplemented()
    }

    async fn replay_prompt(
        &self,
        _: Request<agentic_proto::v1::ReplayPromptRequest>,
    ) -> Result<Response<agentic_proto::v1::Prompt>, Status> {
        unimplemented()
    }

    async fn get_recording(
        &self,
        _: Request<agentic_proto::v1::GetRecordingRequest>,
    ) -> Result<Response<agentic_proto::v1::Recording>, Status> {
        unimplemented()
    }

    async fn import_recording(
        &self,
        _: Request<agentic_proto::v1::ImportRecordingRequest>,
    ) -> Result<Response<agentic_proto::v1::Prompt>, Status> {
        unimplemented()
    }

    async fn get_storage_usage(
        &self,
        _: Request<agentic_proto::v1::GetStorageUsageRequest>,
    ) -> Result<Response<agentic_proto::v1::StorageUsage>, Status> {
        unimplemented()
    }

    type ExportDataStream = futures::stream::Empty<Result<agentic_proto::v1::ExportItem, Status>>;

    async fn export_data(
        &self,
        _: Request<agentic_proto::v1::ExportDataRequest>,
    ) -> Result<Response<Self::ExportDataStream>, Status> {
        unimplemented()
    }

    async fn delete_all_data(
        &self,
        _: Request<agentic_proto::v1::DeleteAllDataRequest>,
    ) -> Result<Response<agentic_proto::v1::DeleteAllDataResponse>, Status> {
        unimplemented()
    }

    async fn delete_recording(
        &self,
        _: Request<agentic_proto::v1::DeleteRecordingRequest>,
    ) -> Result<Response<agentic_proto::v1::DeleteRecordingResponse>, Status> {
        unimplemented()
    }

    async fn delete_conversation(
        &self,
        _: Request<agentic_proto::v1::DeleteConversationRequest>,
    ) -> Result<Response<agentic_proto::v1::DeleteConversationResponse>, Status> {
        unimplemented()
    }

    async fn delete_prompt(
        &self,
        _: Request<agentic_proto::v1::DeletePromptRequest>,
    ) -> Result<Response<agentic_proto::v1::DeletePromptResponse>, Status> {
        unimplemented()
    }

    async fn delete_file(
        &self,
        _: Request<agentic_proto::v1::DeleteFileRequest>,
    ) -> Result<Response<agentic_proto::v1::DeleteFileResponse>, Status> {
        unimplemented()
    }

    async fn create_skill(
        &self,
        _: Request<agentic_proto::v1::CreateSkillRequest>,
    ) -> Result<Response<agentic_proto::v1::Skill>, Status> {
        unimplemented()
    }

    async fn list_skills(
        &self,
        _: Request<agentic_proto::v1::ListSkillsRequest>,
    ) -> Result<Response<agentic_proto::v1::ListSkillsResponse>, Status> {
        unimplemented()
    }

    async fn get_skill(
        &self,
        _: Request<agentic_proto::v1::GetSkillRequest>,
    ) -> Result<Response<agentic_proto::v1::Skill>, Status> {
        unimplemented()
    }

    async fn delete_skill(
        &self,
        _: Request<agentic_proto::v1::DeleteSkillRequest>,
    ) -> Result<Response<agentic_proto::v1::DeleteSkillResponse>, Status> {
        unimplemented()
    }

    async fn add_skill_folder(
        &self,
        _: Request<agentic_proto::v1::AddSkillFolderRequest>,
    ) -> Result<Response<agentic_proto::v1::Skill>, Status> {
        unimplemented()
    }

    async fn create_agent(
        &self,
        _: Request<agentic_proto::v1::CreateAgentRequest>,
    ) -> Result<Response<agentic_proto::v1::Agent>, Status> {
        unimplemented()
    }

    async fn list_agents(
        &self,
        _: Request<agentic_proto::v1::ListAgentsRequest>,
    ) -> Result<Response<agentic_proto::v1::ListAgentsResponse>, Status> {
        unimplemented()
    }

    async fn get_agent(
        &self,
        _: Request<agentic_proto::v1::GetAgentRequest>,
    ) -> Result<Response<agentic_proto::v1::Agent>, Status> {
        unimplemented()
    }

    async fn list_agent_versions(
        &self,
        _: Request<agentic_proto::v1::ListAgentVersionsRequest>,
    ) -> Result<Response<agentic_proto::v1::ListAgentVersionsResponse>, Status> {
        unimplemented()
    }

    async fn delete_agent(
        &self,
        _: Request<agentic_proto::v1::DeleteAgentRequest>,
    ) -> Result<Response<agentic_proto::v1::DeleteAgentResponse>, Status> {
        unimplemented()
    }

    async fn list_memory(
        &self,
        _: Request<agentic_proto::v1::ListMemoryRequest>,
    ) -> Result<Response<agentic_proto::v1::ListMemoryResponse>, Status> {
        unimplemented()
    }

    async fn put_memory(
        &self,
        _: Request<agentic_proto::v1::PutMemoryRequest>,
    ) -> Result<Response<agentic_proto::v1::MemoryItem>, Status> {
        unimplemented()
    }

    async fn delete_memory(
        &self,
        _: Request<agentic_proto::v1::DeleteMemoryRequest>,
    ) -> Result<Response<agentic_proto::v1::DeleteMemoryResponse>, Status> {
        unimplemented()
    }

    async fn create_conversation(
        &self,
        _: Request<CreateConversationRequest>,
    ) -> Result<Response<Conversation>, Status> {
        unimplemented()
    }

    async fn get_conversation(
        &self,
        _: Request<GetConversationRequest>,
    ) -> Result<Response<Conversation>, Status> {
        unimplemented()
    }

    async fn update_conversation(
        &self,
        _: Request<UpdateConversationRequest>,
    ) -> Result<Response<Conversation>, Status> {
        unimplemented()
    }

    async fn list_conversations(
        &self,
        _: Request<ListConversationsRequest>,
    ) -> Result<Response<ListConversationsResponse>, Status> {
        unimplemented()
    }
}
