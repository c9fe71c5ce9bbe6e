//! Item 8: what the executors send to the model for the same task in both modes.
//!
//! A bench tool-host (a `ToolHost` gRPC server of its own) offers 20 tools with realistic
//! schemas; the real gateway and both executors run against it and the stand-in model, which
//! records every request. The task needs 8 tool calls, each using the previous one's result:
//! classic mode makes them in 8 rounds (one call each), code mode in one round of code.
//! Classic with all 8 calls batched in one round is reported too, as the best case for classic.

use agentic_proto::json;
use agentic_proto::v1::tool_host_server::{ToolHost, ToolHostServer};
use agentic_proto::v1::{
    InvokeToolRequest, InvokeToolResponse, PrepareRequest, PrepareResponse, ToolDefinition,
    invoke_tool_response,
};
use agentic_testkit::model::{Match, Reply, Rule, ScriptedCall};
use agentic_testkit::stack::StartToolHost;
use agentic_testkit::{RecordedRequest, Stack, StackDatabase, StackOptions};
use heck::ToLowerCamelCase as _;
use serde_json::{Value as Json, json};
use tonic::transport::Server;
use tonic::transport::server::TcpIncoming;
use tonic::{Request, Response, Status};

use crate::prompts::run_prompt;
use crate::report::{Figure, Target};
use crate::services::Background;

const SEQUENTIAL_TASK: &str =
    "bench task: ship order 1001 to its customer (classic, one call per round)";
const BATCHED_TASK: &str = "bench task: ship order 1001 to its customer (classic, batched)";
const CODE_TASK: &str = "bench task: ship order 1001 to its customer (code)";

/// (id, description, properties, required) of the 20 tools.
fn catalogue() -> Vec<(&'static str, &'static str, Json, Vec<&'static str>)> {
    let id = |what: &str| json!({"type": "string", "description": format!("The {what}'s id.")});
    let limit = json!({"type": "integer", "minimum": 1, "maximum": 100, "description": "At most this many results."});
    vec![
        (
            "crm.find-customer",
            "Finds customers by name or email. Returns up to `limit` matches, best first.",
            json!({"query": {"type": "string", "minLength": 1, "description": "A name, an email address or part of one."}, "limit": limit}),
            vec!["query"],
        ),
        (
            "crm.get-customer",
            "Returns one customer with addresses and contact preferences.",
            json!({"customer_id": id("customer")}),
            vec!["customer_id"],
        ),
        (
            "crm.update-customer",
            "Changes a customer's contact details. Only the given fields change.",
            json!({"customer_id": id("customer"), "email": {"type": "string", "format": "email"}, "phone": {"type": "string"}, "preferred_channel": {"type": "string", "enum": ["email", "sms", "phone"]}}),
            vec!["customer_id"],
        ),
        (
            "orders.list",
            "Lists a customer's orders, newest first.",
            json!({"customer_id": id("customer"), "status": {"type": "string", "enum": ["open", "shipped", "cancelled", "any"], "description": "Only orders in this state."}, "limit": limit}),
            vec!["customer_id"],
        ),
        (
            "orders.get",
            "Returns one order with its lines, totals and payment state.",
            json!({"order_id": id("order")}),
            vec!["order_id"],
        ),
        (
            "orders.create",
            "Creates an order for a customer from product lines. Returns the new order.",
            json!({"customer_id": id("customer"), "lines": {"type": "array", "minItems": 1, "items": {"type": "object", "properties": {"sku": {"type": "string"}, "quantity": {"type": "integer", "minimum": 1}}, "required": ["sku", "quantity"]}}, "note": {"type": "string"}}),
            vec!["customer_id", "lines"],
        ),
        (
            "orders.cancel",
            "Cancels an open order. Shipped orders cannot be cancelled; refund them instead.",
            json!({"order_id": id("order"), "reason": {"type": "string", "description": "Shown to the customer."}}),
            vec!["order_id", "reason"],
        ),
        (
            "orders.refund",
            "Refunds all or part of a paid order to the original payment method.",
            json!({"order_id": id("order"), "amount_cents": {"type": "integer", "minimum": 1}, "reason": {"type": "string"}}),
            vec!["order_id", "amount_cents"],
        ),
        (
            "inventory.get-stock",
            "Returns the stock of products per warehouse.",
            json!({"skus": {"type": "array", "items": {"type": "string"}, "minItems": 1, "description": "Product SKUs."}}),
            vec!["skus"],
        ),
        (
            "inventory.reserve",
            "Reserves stock in one warehouse for an order, for 30 minutes.",
            json!({"order_id": id("order"), "warehouse_id": id("warehouse"), "lines": {"type": "array", "items": {"type": "object", "properties": {"sku": {"type": "string"}, "quantity": {"type": "integer", "minimum": 1}}, "required": ["sku", "quantity"]}}}),
            vec!["order_id", "warehouse_id", "lines"],
        ),
        (
            "inventory.release",
            "Releases a reservation before it expires.",
            json!({"reservation_id": id("reservation")}),
            vec!["reservation_id"],
        ),
        (
            "inventory.list-warehouses",
            "Lists warehouses with their address and cut-off time for same-day shipping.",
            json!({"country": {"type": "string", "minLength": 2, "maxLength": 2, "description": "ISO 3166-1 alpha-2 code."}}),
            vec![],
        ),
        (
            "shipping.quote",
            "Quotes carriers and prices for a parcel from a warehouse to an address.",
            json!({"warehouse_id": id("warehouse"), "address_id": id("address"), "weight_grams": {"type": "integer", "minimum": 1}, "speed": {"type": "string", "enum": ["economy", "standard", "express"]}}),
            vec!["warehouse_id", "address_id", "weight_grams"],
        ),
        (
            "shipping.create-shipment",
            "Books a carrier for a reserved order using a quote. Returns the tracking number.",
            json!({"reservation_id": id("reservation"), "quote_id": id("quote"), "label_format": {"type": "string", "enum": ["pdf", "zpl"], "default": "pdf"}}),
            vec!["reservation_id", "quote_id"],
        ),
        (
            "shipping.track",
            "Returns the tracking events of a shipment.",
            json!({"tracking_number": {"type": "string", "description": "The carrier's tracking number."}}),
            vec!["tracking_number"],
        ),
        (
            "billing.get-invoice",
            "Returns an invoice with its lines and payment state.",
            json!({"invoice_id": id("invoice")}),
            vec!["invoice_id"],
        ),
        (
            "billing.create-invoice",
            "Creates the invoice of an order. Returns the invoice id and its PDF link.",
            json!({"order_id": id("order"), "due_days": {"type": "integer", "minimum": 0, "maximum": 90, "default": 14}}),
            vec!["order_id"],
        ),
        (
            "billing.send-invoice",
            "Emails an invoice to the customer's billing address.",
            json!({"invoice_id": id("invoice"), "cc": {"type": "array", "items": {"type": "string", "format": "email"}}}),
            vec!["invoice_id"],
        ),
        (
            "mail.send",
            "Sends an email to a customer from a template, filled with the given values.",
            json!({"customer_id": id("customer"), "template": {"type": "string", "description": "A template name from mail.list-templates."}, "values": {"type": "object", "additionalProperties": {"type": "string"}, "description": "Placeholder values."}}),
            vec!["customer_id", "template"],
        ),
        (
            "mail.list-templates",
            "Lists the email templates and the placeholders each needs.",
            json!({}),
            vec![],
        ),
    ]
}

/// The 8 calls of the task, in order (each would use the previous answer).
fn task_calls() -> Vec<(&'static str, Json)> {
    vec![
        ("crm.find-customer", json!({"query": "ACME Trading"})),
        ("orders.get", json!({"order_id": "ord-1001"})),
        ("inventory.get-stock", json!({"skus": ["SKU-7", "SKU-9"]})),
        (
            "inventory.reserve",
            json!({"order_id": "ord-1001", "warehouse_id": "wh-oslo", "lines": [{"sku": "SKU-7", "quantity": 2}, {"sku": "SKU-9", "quantity": 1}]}),
        ),
        (
            "shipping.quote",
            json!({"warehouse_id": "wh-oslo", "address_id": "addr-1", "weight_grams": 2400}),
        ),
        (
            "shipping.create-shipment",
            json!({"reservation_id": "res-1", "quote_id": "q-1"}),
        ),
        ("billing.create-invoice", json!({"order_id": "ord-1001"})),
        (
            "mail.send",
            json!({"customer_id": "cus-42", "template": "shipped", "values": {"tracking": "TRK-1"}}),
        ),
    ]
}

struct BenchToolHost;

#[tonic::async_trait]
impl ToolHost for BenchToolHost {
    type InvokeToolStream = tonic::codegen::BoxStream<agentic_proto::v1::InvokeToolUpdate>;

    /// The bench's tools report no progress and ask for no approvals: one answer each.
    async fn invoke_tool(
        &self,
        request: Request<tonic::Streaming<agentic_proto::v1::InvokeToolInput>>,
    ) -> Result<Response<Self::InvokeToolStream>, Status> {
        agentic_executor::tool_host::answer_once(request, |call| async move { Ok(record(&call)) })
            .await
    }

    async fn list_tools(
        &self,
        _request: Request<agentic_proto::v1::ListToolsRequest>,
    ) -> Result<Response<agentic_proto::v1::ListToolsResponse>, Status> {
        Err(Status::unimplemented("the bench tool-host lists no tools"))
    }

    async fn prepare(
        &self,
        _request: Request<PrepareRequest>,
    ) -> Result<Response<PrepareResponse>, Status> {
        let tools = catalogue()
            .into_iter()
            .map(|(id, description, properties, required)| ToolDefinition {
                id: id.to_owned(),
                description: description.to_owned(),
                input_schema: Some(json::to_proto(&json!({
                    "type": "object",
                    "properties": properties,
                    "required": required,
                    "additionalProperties": false,
                }))),
                requires_approval: false,
                timeout_ms: 0,
                reports_progress: false,
                asks_approval: false,
                wants_code: false,
            })
            .collect();
        Ok(Response::new(PrepareResponse {
            tools,
            context: Vec::new(),
            modules: Vec::new(),
        }))
    }
}

/// A small, realistic record: an id, a state and a few fields.
fn record(request: &InvokeToolRequest) -> InvokeToolResponse {
    let output = json!({
        "id": format!("{}-1", request.tool_id.replace('.', "-")),
        "status": "ok",
        "customer_id": "cus-42",
        "order_id": "ord-1001",
        "updated_at": "2025-01-01T12:00:00Z",
    });
    InvokeToolResponse {
        result: Some(invoke_tool_response::Result::Output(json::to_proto(
            &output,
        ))),
        files: Vec::new(),
        usage: None,
        nested: Vec::new(),
    }
}

fn function_name(tool_id: &str) -> String {
    tool_id.replace('.', "__")
}

fn rules() -> Vec<Rule> {
    let calls = task_calls();
    let mut rules = Vec::new();
    for (round, (tool_id, input)) in calls.iter().enumerate() {
        rules.push(Rule::new(
            Match::All(vec![
                Match::LastUserContains(SEQUENTIAL_TASK.to_owned()),
                Match::AssistantTurns(round),
            ]),
            Reply::tool_call(function_name(tool_id), input.clone()),
        ));
    }
    rules.push(Rule::new(
        Match::LastUserContains(SEQUENTIAL_TASK.to_owned()),
        Reply::text("Order 1001 is on its way; the customer has the tracking number."),
    ));
    rules.push(Rule::new(
        Match::All(vec![
            Match::LastUserContains(BATCHED_TASK.to_owned()),
            Match::AssistantTurns(0),
        ]),
        Reply::ToolCalls {
            content: None,
            calls: calls
                .iter()
                .map(|(tool_id, input)| ScriptedCall::new(function_name(tool_id), input.clone()))
                .collect(),
        },
    ));
    rules.push(Rule::new(
        Match::LastUserContains(BATCHED_TASK.to_owned()),
        Reply::text("Order 1001 is on its way; the customer has the tracking number."),
    ));
    let mut code = String::new();
    for (index, (tool_id, input)) in calls.iter().enumerate() {
        // `shipping.create-shipment` → `shippingCreateShipment`, as the sandbox names tools.
        let function = tool_id.to_lower_camel_case();
        code.push_str(&format!("const r{index} = {function}({input});\n"));
    }
    code.push_str("complete({response: 'Order 1001 is on its way: ' + r5.id});");
    rules.push(Rule::new(
        Match::All(vec![
            Match::AnyMessageContains(CODE_TASK.to_owned()),
            Match::AssistantTurns(0),
        ]),
        Reply::Text(code),
    ));
    rules
}

/// Bytes of the request bodies (compact JSON) whose user message is `task`, and how many of
/// them went to listing tools (`tools` for classic, the system prompt for code).
struct Sent {
    requests: usize,
    bytes: usize,
    listing_bytes: usize,
}

fn sent(requests: &[RecordedRequest], task: &str) -> Sent {
    let mine: Vec<&RecordedRequest> = requests
        .iter()
        .filter(|request| {
            request
                .last_user_message()
                .is_some_and(|message| message.contains(task))
                || request
                    .messages()
                    .iter()
                    .any(|message| message.to_string().contains(task))
        })
        .collect();
    let size = |value: &Json| {
        serde_json::to_vec(value)
            .map(|bytes| bytes.len())
            .unwrap_or(0)
    };
    Sent {
        requests: mine.len(),
        bytes: mine.iter().map(|request| size(&request.body)).sum(),
        listing_bytes: mine
            .iter()
            .map(|request| {
                let tools = request.body.get("tools").map(size).unwrap_or(0);
                let system = request
                    .messages()
                    .iter()
                    .filter(|message| message.get("role").and_then(Json::as_str) == Some("system"))
                    .map(size)
                    .sum::<usize>();
                tools + system
            })
            .sum(),
    }
}

/// The gateway and both executors against the bench tool-host, one task per mode.
pub async fn model_bytes() -> anyhow::Result<Vec<Figure>> {
    let options = StackOptions {
        database: StackDatabase::Sqlite,
        ..StackOptions::default()
    };
    let bench_tool_host: StartToolHost = Box::new(|listener| {
        Background::start("bench-tool-host", listener, |listener| async move {
            let incoming = TcpIncoming::from(listener).with_nodelay(Some(true));
            Server::builder()
                .add_service(ToolHostServer::new(BenchToolHost))
                .serve_with_incoming(incoming)
                .await?;
            Ok(())
        })
    });
    let stack = Stack::start_with_tool_host(rules(), options, bench_tool_host).await?;
    let model = &stack.model;
    let client = agentic_client::Client::connect(&stack.gateway_url(), "bench").await?;
    use agentic_client::NewPrompt;
    run_prompt(&client, NewPrompt::new(SEQUENTIAL_TASK), |_| {}).await?;
    run_prompt(&client, NewPrompt::new(BATCHED_TASK), |_| {}).await?;
    run_prompt(&client, NewPrompt::new(CODE_TASK).mode("code"), |_| {}).await?;

    let requests = model.requests();
    let sequential = sent(&requests, SEQUENTIAL_TASK);
    let batched = sent(&requests, BATCHED_TASK);
    let code = sent(&requests, CODE_TASK);
    let ratio = code.bytes as f64 / sequential.bytes as f64;
    let batched_ratio = code.bytes as f64 / batched.bytes as f64;
    let describe = |sent: &Sent| json!({"requests": sent.requests, "bytes": sent.bytes, "tool_listing_bytes": sent.listing_bytes});
    let details = json!({
        "tools": 20,
        "tool_calls": 8,
        "classic_one_call_per_round": describe(&sequential),
        "classic_batched": describe(&batched),
        "code": describe(&code),
    });
    Ok(vec![
        Figure::value(
            "8a",
            "bytes to the model: code ÷ classic (20 tools, 8 dependent calls)",
            (ratio * 1000.0).round() / 1000.0,
            "× classic",
            Some(Target::Max { value: 1.0 / 3.0 }),
        )
        .note(format!(
            "code {} B in {} request(s); classic {} B in {} requests (tool listing {} B vs {} B)",
            code.bytes,
            code.requests,
            sequential.bytes,
            sequential.requests,
            code.listing_bytes,
            sequential.listing_bytes
        ))
        .details(details),
        Figure::value(
            "8b",
            "bytes to the model: code ÷ classic with all 8 calls batched in one round",
            (batched_ratio * 1000.0).round() / 1000.0,
            "× classic",
            None,
        )
        .note(format!(
            "classic batched {} B in {} requests (tool listing {} B)",
            batched.bytes, batched.requests, batched.listing_bytes
        )),
    ])
}
