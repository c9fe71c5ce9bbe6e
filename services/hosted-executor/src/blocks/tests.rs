use super::*;

fn answer() -> Vec<Json> {
    vec![
        json!({"type": "text", "text": "Looking."}),
        json!({"type": "server_tool_use", "id": "srvtoolu_1", "name": "bash_code_execution", "input": {"command": "ls"}}),
        json!({"type": "bash_code_execution_tool_result", "tool_use_id": "srvtoolu_1", "content": {
            "type": "bash_code_execution_result", "stdout": "a.txt\n", "stderr": "", "return_code": 0,
            "content": [{"type": "bash_code_execution_output", "file_id": "file_1"}]}}),
        json!({"type": "server_tool_use", "id": "srvtoolu_2", "name": "text_editor_code_execution", "input": {"command": "create", "path": "b.py", "file_text": "print(1)"}}),
        json!({"type": "text_editor_code_execution_tool_result", "tool_use_id": "srvtoolu_2", "content": {
            "type": "text_editor_code_execution_create_result", "is_file_update": false}}),
        json!({"type": "server_tool_use", "id": "srvtoolu_3", "name": "bash_code_execution", "input": {"command": "false"}}),
        json!({"type": "bash_code_execution_tool_result", "tool_use_id": "srvtoolu_3", "content": {
            "type": "bash_code_execution_tool_result_error", "error_code": "execution_time_exceeded"}}),
        json!({"type": "tool_use", "id": "toolu_1", "name": "demo__echo", "input": {"n": 1}}),
    ]
}

/// The timeline an answer makes, as the executor builds it block by block.
fn timeline_of(blocks: &[Json]) -> (Vec<Output>, Vec<String>, Vec<ToolCall>) {
    let (mut outputs, mut files, mut calls) = (Vec::new(), Vec::new(), Vec::new());
    for block in blocks {
        match read(block) {
            Piece::Text(text) => outputs.push(Output::Text(text)),
            Piece::Started(call) => outputs.push(Output::Tool(call)),
            Piece::Finished {
                id,
                result,
                files: made,
            } => {
                for output in &mut outputs {
                    if let Output::Tool(call) = output
                        && call.id == id
                    {
                        call.result = result.clone();
                    }
                }
                files.extend(made);
            }
            Piece::Call(call) => calls.push(call),
            Piece::Nothing => {}
        }
    }
    (outputs, files, calls)
}

#[test]
fn an_answer_becomes_text_code_executions_files_and_calls() {
    let (outputs, files, calls) = timeline_of(&answer());
    assert_eq!(files, ["file_1"]);
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].name, "demo__echo");
    assert_eq!(outputs.len(), 4);
    assert_eq!(outputs[0], Output::Text("Looking.".into()));
    let Output::Tool(ran) = &outputs[1] else {
        panic!("a code execution")
    };
    assert_eq!(ran.function, CODE_TOOL);
    assert_eq!(ran.input, json!({"code": "ls", "language": "bash"}));
    assert_eq!(
        ran.result,
        ToolResult::Success {
            output: json!({"stdout": "a.txt\n", "stderr": "", "return_code": 0, "files": ["file_1"]})
        }
    );
    let Output::Tool(edit) = &outputs[2] else {
        panic!("a file edit")
    };
    assert_eq!(edit.input["code"], "create b.py\nprint(1)");
    let Output::Tool(failed) = &outputs[3] else {
        panic!("a code execution")
    };
    assert_eq!(
        failed.result,
        ToolResult::Error {
            error: format!("{ERROR_PREFIX}execution_time_exceeded")
        }
    );
}

#[test]
fn an_execution_whose_parts_were_cut_when_stored_goes_back_as_a_note() {
    let (mut outputs, _, _) = timeline_of(&answer()[..3]);
    let Output::Tool(ran) = &mut outputs[1] else {
        panic!("a code execution")
    };
    // What the edge's bounds leave of a value too large to store.
    ran.input = json!("[cut: 300000 bytes]");
    let messages = timeline(
        &outputs,
        &FunctionNames::default(),
        (1024, 0),
        &Default::default(),
    );
    let blocks = messages[0]["content"].as_array().unwrap();
    assert_eq!(blocks.len(), 2);
    assert_eq!(blocks[1]["type"], "text");
    assert!(
        blocks[1]["text"]
            .as_str()
            .unwrap()
            .contains("bash_code_execution")
    );
}

#[test]
fn the_timeline_reads_back_as_the_blocks_the_provider_sent() {
    let (mut outputs, _, _) = timeline_of(&answer());
    let names = FunctionNames::new(["demo.echo"]);
    outputs.push(Output::Tool(ToolCallOutput {
        id: "toolu_1".into(),
        function: "demo.echo".into(),
        input: json!({"n": 1}),
        result: ToolResult::Success {
            output: json!({"echo": 1}),
        },
        start: Some(SystemTime::UNIX_EPOCH),
        end: None,
        approval: Approval::new(ApprovalState::NotRequired),
        parent: None,
        record: None,
    }));
    let messages = timeline(&outputs, &names, (1024, 0), &Default::default());
    assert_eq!(messages.len(), 2);
    assert_eq!(messages[0]["role"], "assistant");
    let sent: Vec<Json> = messages[0]["content"].as_array().unwrap().clone();
    assert_eq!(sent, answer(), "the blocks go back as they came");
    assert_eq!(
        messages[1],
        json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "{\"echo\":1}"}
        ]})
    );
}
