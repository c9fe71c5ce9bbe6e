//! Typed answers: a prompt's `output_schema` in classic and code modes: the answer checked,
//! an invalid one given back to the model with its errors (twice at most), the prompt
//! carrying the answer as `structured_output`; and the schema's own bounds.

use agentic_client::NewPrompt;
use agentic_proto::v1::{CreatePromptRequest, PromptState};
use agentic_testkit::Stack;
use agentic_testkit::model::Match;
use serde_json::{Map, Value, json};
use tonic::Code;

use crate::support::*;

#[derive(Debug, PartialEq, serde::Deserialize)]
struct Town {
    city: String,
    people: u32,
}

fn town_schema() -> Map<String, Value> {
    json!({
        "type": "object",
        "properties": {"city": {"type": "string"}, "people": {"type": "integer"}},
        "required": ["city", "people"],
    })
    .as_object()
    .unwrap()
    .clone()
}

#[tokio::test]
async fn a_code_prompts_typed_answer_is_its_complete_data_retried_until_it_matches() {
    let stack = Stack::start(vec![
        code_for(
            "Which town?",
            1,
            "complete({response: 'Oslo', data: {city: 7}})",
        ),
        code_for(
            "Which town?",
            2,
            "complete({response: 'Oslo', data: {city: 'Oslo', people: 709000}})",
        ),
    ])
    .await
    .unwrap();
    let client = stack.client("alice").await.unwrap();
    let prompt = completed(
        &client,
        NewPrompt::new("Which town?")
            .mode("code")
            .output_schema(town_schema()),
    )
    .await;
    let town: Town = agentic_client::structured_output(&prompt).unwrap().unwrap();
    assert_eq!(
        town,
        Town {
            city: "Oslo".into(),
            people: 709_000
        }
    );
    let requests = stack.model.requests();
    let system = requests[0].body["messages"][0]["content"].as_str().unwrap();
    assert!(
        system.contains("must be JSON matching this JSON Schema"),
        "{system}"
    );
    let second = requests[1].body["messages"].to_string();
    assert!(
        second.contains("does not match the required JSON Schema") && second.contains("at /city"),
        "{second}"
    );
}

#[tokio::test]
async fn a_classic_answer_is_parsed_checked_and_kept_and_one_that_never_matches_fails_the_prompt() {
    let stack = Stack::start(vec![
        text(
            Match::AnyMessageContains("Good town?".into()),
            "```json\n{\"city\": \"Bergen\", \"people\": 291000}\n```",
        ),
        text(
            Match::AnyMessageContains("Bad town?".into()),
            "{\"city\": 1}",
        ),
    ])
    .await
    .unwrap();
    let client = stack.client("alice").await.unwrap();
    let good = completed(
        &client,
        NewPrompt::new("Good town?").output_schema(town_schema()),
    )
    .await;
    let town: Town = agentic_client::structured_output(&good).unwrap().unwrap();
    assert_eq!(town.city, "Bergen");
    let asked = &stack.model.requests()[0].body;
    assert_eq!(asked["response_format"]["type"], "json_schema");
    assert_eq!(
        asked["response_format"]["json_schema"]["schema"]["required"],
        json!(["city", "people"])
    );

    let bad = client
        .create_prompt(NewPrompt::new("Bad town?").output_schema(town_schema()))
        .await
        .unwrap();
    collect(&client, &bad.id, 0).await;
    let bad = client.get_prompt(&bad.id).await.unwrap();
    assert_eq!(bad.state, PromptState::Failed as i32);
    assert!(
        bad.error.contains("after 3 attempts") && bad.error.contains("at /city"),
        "{}",
        bad.error
    );
    assert_eq!(bad.structured_output, None);
    let asked_bad = stack
        .model
        .requests()
        .iter()
        .filter(|request| request.body.to_string().contains("Bad town?"))
        .count();
    assert_eq!(asked_bad, 3, "the first answer and two retries");

    // Over HTTP, the answer is a JSON field of the prompt.
    let answer: Value = reqwest::Client::new()
        .get(format!(
            "{}/v1/prompts/{}",
            stack.gateway_http_url(),
            good.id
        ))
        .header("x-user-id", "alice")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(answer["structuredOutput"]["city"], "Bergen");
    assert_eq!(
        answer["outputSchema"]["required"],
        json!(["city", "people"])
    );
}

#[tokio::test]
async fn an_output_schema_past_its_bounds_or_no_schema_at_all_is_refused_before_anything_is_stored()
{
    let stack = Stack::start(Vec::new()).await.unwrap();
    let mut gateway = gateway_for(&stack, "alice").await;
    let many: Map<String, Value> = (0..10_000)
        .map(|n| (format!("p{n}"), json!({"type": "integer"})))
        .collect();
    let schemas = [
        json!({"type": "object", "properties": many}),
        json!({"type": "no-such-type"}),
        json!({"$ref": "http://127.0.0.1:9/elsewhere.json"}),
    ];
    for schema in schemas {
        let request = CreatePromptRequest {
            input: "typed".into(),
            output_schema: Some(agentic_proto::json::json_to_struct(&schema)),
            ..CreatePromptRequest::default()
        };
        let refused = gateway.create_prompt(request).await.unwrap_err();
        assert_eq!(refused.code(), Code::InvalidArgument, "{refused:?}");
        assert!(
            refused.message().contains("output_schema"),
            "{}",
            refused.message()
        );
    }
    let client = stack.client("alice").await.unwrap();
    assert!(client.list_prompts(None).await.unwrap().is_empty());
    assert_eq!(stack.model.request_count(), 0);
}

#[tokio::test]
async fn a_hosted_answer_comes_through_the_final_answer_tool_and_a_turn_without_one_is_corrected() {
    use agentic_testkit::model::{HostedBlock, HostedMatch, HostedRule};
    let stack = crate::hosted::hosted_stack().await;
    stack.model.add_hosted_rule(
        HostedRule::turn(
            HostedMatch::AssistantTurns(0),
            vec![HostedBlock::text("Oslo, I think.")],
            "end_turn",
        )
        .times(1),
    );
    stack.model.add_hosted_rule(HostedRule::turn(
        HostedMatch::Any,
        vec![HostedBlock::tool_use(
            "final_answer",
            json!({"answer": {"city": "Oslo", "people": 709000}}),
        )],
        "tool_use",
    ));
    let client = stack.client("alice").await.unwrap();
    let prompt = completed(
        &client,
        crate::hosted::hosted("Which town?").output_schema(town_schema()),
    )
    .await;
    let town: Town = agentic_client::structured_output(&prompt).unwrap().unwrap();
    assert_eq!(town.people, 709_000);
    let requests = stack.model.hosted_requests();
    assert_eq!(requests.len(), 2);
    let offered: Vec<&Value> = requests[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .collect();
    let final_tool = offered
        .iter()
        .find(|tool| tool["name"] == "final_answer")
        .expect("offered");
    assert_eq!(
        final_tool["input_schema"]["properties"]["answer"]["required"],
        json!(["city", "people"])
    );
    let last = requests[1].body["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["role"], "user");
    assert!(
        last["content"]
            .as_str()
            .unwrap()
            .contains("without calling `final_answer`"),
        "{last}"
    );
}

#[tokio::test]
async fn the_cli_sends_an_output_schema_and_prints_the_typed_answer_on_a_line_of_its_own() {
    let stack = Stack::start(vec![code_for(
        "Which town?",
        1,
        "complete({response: 'Tromsø it is.', data: {city: 'Tromsø', people: 77000}})",
    )])
    .await
    .unwrap();
    let url = stack.gateway_url();
    let schema = serde_json::to_string(&town_schema()).unwrap();
    let ran = crate::cli::agentic_with(
        &[
            "--server",
            &url,
            "--user",
            "alice",
            "prompt",
            "--mode",
            "code",
            "--output-schema",
            &schema,
            "Which town?",
        ],
        "",
    )
    .await;
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let last = ran.stdout.lines().last().unwrap();
    let answer: Value = serde_json::from_str(last).unwrap();
    assert_eq!(answer, json!({"city": "Tromsø", "people": 77000}));
    let refused = crate::cli::agentic_with(
        &[
            "--server",
            &url,
            "--user",
            "alice",
            "prompt",
            "--output-schema",
            "[1]",
            "x",
        ],
        "",
    )
    .await;
    assert_ne!(refused.code, 0);
    assert!(
        refused.stderr.contains("the schema must be a JSON object"),
        "{}",
        refused.stderr
    );
}
