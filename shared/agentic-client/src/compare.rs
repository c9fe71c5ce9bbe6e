//! Comparing two prompts' timelines, as `agentic replay` does: each prompt as lines of what
//! it did (text, tool calls with their input and result, nested ones indented under their
//! call, files, how it ended), leaving out what differs between any two runs (ids, times,
//! tokens) and people's approvals, and a line diff of two such listings.

use agentic_proto::json;
use agentic_proto::v1::{Prompt, PromptState, ToolOutput, prompt_output, tool_result};

/// Lines a diff compares whole, at most per side: longer timelines are compared up to the
/// first line that differs.
const MAX_DIFFED_LINES: usize = 2_000;

/// `prompt`'s timeline and ending as lines.
pub fn timeline_lines(prompt: &Prompt) -> Vec<String> {
    let mut lines = Vec::new();
    let parents: std::collections::HashMap<&str, &str> = prompt
        .output
        .iter()
        .filter_map(|output| match &output.kind {
            Some(prompt_output::Kind::Tool(tool)) => {
                Some((tool.id.as_str(), tool.parent_id.as_str()))
            }
            _ => None,
        })
        .collect();
    let depth_of = |tool: &ToolOutput| {
        let mut depth = 0;
        let mut parent = tool.parent_id.as_str();
        // Bounded: calls nest one deep, and a longer chain (a cycle) stops at 8.
        while !parent.is_empty() && depth < 8 {
            depth += 1;
            parent = parents.get(parent).copied().unwrap_or_default();
        }
        depth
    };
    for output in &prompt.output {
        match &output.kind {
            Some(prompt_output::Kind::Text(text)) => {
                lines.push(format!("text {}", quoted(&text.content)));
            }
            Some(prompt_output::Kind::Tool(tool)) => {
                let indent = "  ".repeat(depth_of(tool));
                let input = json::from_proto_opt(tool.input.as_ref());
                lines.push(format!("{indent}tool {} {input}", tool.function));
                let result = match tool
                    .result
                    .as_ref()
                    .and_then(|result| result.result.as_ref())
                {
                    Some(tool_result::Result::Success(success)) => {
                        format!("ok {}", json::from_proto_opt(success.output.as_ref()))
                    }
                    Some(tool_result::Result::Error(error)) => {
                        format!("error {}", quoted(&error.error))
                    }
                    Some(tool_result::Result::Pending(pending)) => {
                        format!("pending {}", quoted(&pending.reason))
                    }
                    None => "no result".to_owned(),
                };
                // Not whether a person approved it: that is their doing, not the prompt's,
                // and a replay asks nobody.
                lines.push(format!("{indent}  -> {result}"));
            }
            Some(prompt_output::Kind::File(file)) => lines.push(format!(
                "file {} ({}, {} bytes)",
                quoted(&file.filename),
                file.mime_type,
                file.size
            )),
            None => {}
        }
    }
    let state = PromptState::try_from(prompt.state)
        .map(|state| state.as_str_name().trim_start_matches("PROMPT_STATE_"))
        .unwrap_or("UNKNOWN");
    lines.push(format!("state {state}"));
    if !prompt.error.is_empty() {
        lines.push(format!("error {}", quoted(&prompt.error)));
    }
    lines
}

/// Text as one JSON string: its line breaks and control characters escaped, so each
/// output stays one line of the listing and nothing in it reaches a terminal raw.
fn quoted(text: &str) -> String {
    serde_json::Value::from(text).to_string()
}

/// How `replayed` differs from `recorded`, as diff lines (`  ` same, `- ` only recorded,
/// `+ ` only replayed); `None` when they are the same.
pub fn diff(recorded: &[String], replayed: &[String]) -> Option<Vec<String>> {
    if recorded == replayed {
        return None;
    }
    // Past what is compared whole: the common start, then both rests as they are.
    if recorded.len() > MAX_DIFFED_LINES || replayed.len() > MAX_DIFFED_LINES {
        let same = recorded
            .iter()
            .zip(replayed)
            .take_while(|(a, b)| a == b)
            .count();
        let mut lines: Vec<String> = recorded[..same].iter().map(|l| format!("  {l}")).collect();
        lines.extend(recorded[same..].iter().map(|l| format!("- {l}")));
        lines.extend(replayed[same..].iter().map(|l| format!("+ {l}")));
        return Some(lines);
    }
    // Longest common subsequence, then walked from the start.
    let (n, m) = (recorded.len(), replayed.len());
    let mut common = vec![vec![0u32; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            common[i][j] = if recorded[i] == replayed[j] {
                common[i + 1][j + 1] + 1
            } else {
                common[i + 1][j].max(common[i][j + 1])
            };
        }
    }
    let (mut i, mut j) = (0, 0);
    let mut lines = Vec::new();
    while i < n || j < m {
        if i < n && j < m && recorded[i] == replayed[j] {
            lines.push(format!("  {}", recorded[i]));
            i += 1;
            j += 1;
        } else if i < n && (j == m || common[i + 1][j] >= common[i][j + 1]) {
            lines.push(format!("- {}", recorded[i]));
            i += 1;
        } else {
            lines.push(format!("+ {}", replayed[j]));
            j += 1;
        }
    }
    Some(lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(text: &[&str]) -> Vec<String> {
        text.iter().map(|line| (*line).to_owned()).collect()
    }

    #[test]
    fn the_same_lines_have_no_diff() {
        assert_eq!(diff(&lines(&["a", "b"]), &lines(&["a", "b"])), None);
    }

    #[test]
    fn a_changed_line_shows_as_removed_then_added_between_the_same_ones() {
        let diff = diff(&lines(&["a", "b", "c"]), &lines(&["a", "x", "c", "d"])).unwrap();
        assert_eq!(diff, ["  a", "- b", "+ x", "  c", "+ d"]);
    }
}
