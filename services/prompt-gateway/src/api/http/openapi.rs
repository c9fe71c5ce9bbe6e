//! The OpenAPI 3.1 document of the HTTP API, generated from the same descriptor set the
//! transcoder serves: one operation per routed RPC (`operationId` = the RPC's name, its proto
//! comment as description), a typed schema for every message and enum it reaches (fields in
//! canonical JSON: lowerCamelCase names, 64-bit integers as strings, enums by name), and the
//! routes of a shape of their own. `openapi.json` beside `http.rs` is this document, checked
//! in; a unit test regenerates it and fails when it differs (`make openapi` writes it).

use std::collections::BTreeMap;

use agentic_proto::canonical;
use prost_reflect::{
    EnumDescriptor, FieldDescriptor, FileDescriptor, Kind, MessageDescriptor, MethodDescriptor,
};
use serde_json::{Map, Value, json};

use super::transcode::{self, Binding, Body};

const PACKAGE_PREFIX: &str = "agentic.v1.";

/// The whole document.
pub fn document() -> Result<Value, String> {
    let pool = canonical::descriptors().map_err(|error| error.to_string())?;
    let bindings = transcode::bindings()?;
    let mut schemas = Schemas::default();
    let mut paths: BTreeMap<String, Map<String, Value>> = BTreeMap::new();
    for binding in &bindings {
        let operation = operation(binding, &mut schemas);
        paths
            .entry(binding.template.clone())
            .or_default()
            .insert(binding.method.as_str().to_ascii_lowercase(), operation);
    }
    paths
        .entry("/v1/files/{file_id}/content".into())
        .or_default()
        .insert("get".into(), file_content());
    let file_output = pool
        .get_message_by_name("agentic.v1.FileOutput")
        .ok_or("no FileOutput in the descriptor set")?;
    paths
        .entry("/v1/files".into())
        .or_default()
        .insert("post".into(), upload(schemas.refer(&file_output)));
    paths
        .entry("/v1/openapi.json".into())
        .or_default()
        .insert("get".into(), openapi_document());
    let service = pool
        .get_service_by_name(agentic_proto::v1::prompt_gateway_server::SERVICE_NAME)
        .ok_or("no PromptGateway in the descriptor set")?;
    let mut components = schemas.finish();
    components.insert("Error".into(), error_schema());
    Ok(json!({
        "openapi": "3.1.0",
        "info": {
            "title": "agentic",
            "version": env!("CARGO_PKG_VERSION"),
            "description": comment(&service.parent_file(), service.path())
                .unwrap_or_default(),
        },
        "security": [{"bearer": []}, {"devUser": []}],
        "paths": paths,
        "components": {
            "schemas": components,
            "securitySchemes": {
                "bearer": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "A user's token (GATEWAY_AUTH_TOKENS or GATEWAY_AUTH_TOKENS_FILE)."
                },
                "devUser": {
                    "type": "apiKey",
                    "in": "header",
                    "name": "x-user-id",
                    "description": "Dev mode only (no users' tokens configured, loopback only): \
                                    the caller says who they are."
                }
            }
        }
    }))
}

/// The document as checked in: indented, one trailing newline.
pub fn text() -> Result<String, String> {
    let document = document()?;
    let mut text = serde_json::to_string_pretty(&document).map_err(|error| error.to_string())?;
    text.push('\n');
    Ok(text)
}

fn operation(binding: &Binding, schemas: &mut Schemas) -> Value {
    let rpc = &binding.rpc;
    let input = rpc.input();
    let mut parameters: Vec<Value> = binding
        .path_fields()
        .into_iter()
        .map(|name| {
            let field = input.get_field_by_name(name);
            json!({
                "name": name,
                "in": "path",
                "required": true,
                "schema": {"type": "string"},
                "description": field.and_then(|field| field_comment(&field)).unwrap_or_default(),
            })
        })
        .collect();
    let mut operation = Map::new();
    operation.insert("operationId".into(), json!(rpc.name()));
    operation.insert("tags".into(), json!([tag(&binding.template)]));
    if let Some(text) = comment(&rpc.parent_service().parent_file(), rpc.path()) {
        operation.insert("description".into(), json!(text));
    }
    let body = match &binding.body {
        Body::Whole => Some(input.clone()),
        Body::Field(field) => match field.kind() {
            Kind::Message(of) => Some(of),
            _ => None,
        },
        Body::None => None,
    };
    if let Some(body) = body {
        operation.insert(
            "requestBody".into(),
            json!({"content": {"application/json": {"schema": schemas.refer(&body)}}}),
        );
    }
    match &binding.body {
        Body::Whole => {}
        _ if rpc.name() == "StreamPrompt" => parameters.extend(event_stream_parameters()),
        _ => parameters.extend(query_parameters(binding, &input, schemas)),
    }
    if !parameters.is_empty() {
        operation.insert("parameters".into(), json!(parameters));
    }
    let answer = schemas.refer(&rpc.output());
    let content = match rpc.name() {
        "StreamPrompt" => json!({"text/event-stream": {
            "schema": {"type": "string"},
            "x-event-schema": answer,
        }}),
        "ExportData" => json!({"application/jsonl": {
            "schema": {"type": "string"},
            "x-line-schema": answer,
        }}),
        _ => json!({"application/json": {"schema": answer}}),
    };
    operation.insert(
        "responses".into(),
        json!({
            "200": {"description": answer_description(rpc), "content": content},
            "default": error_response(),
        }),
    );
    Value::Object(operation)
}

fn answer_description(rpc: &MethodDescriptor) -> String {
    let name = rpc
        .output()
        .full_name()
        .trim_start_matches(PACKAGE_PREFIX)
        .to_owned();
    match rpc.name() {
        "StreamPrompt" => format!(
            "Server-sent events: each `data` is a {name} (`id` its sequence); `event: end` \
             (`{{\"reason\"}}`) ends the stream, `event: error` carries an Error. 204 when a \
             resumption has nothing more to send."
        ),
        "ExportData" => format!("JSON Lines: one {name} per line, the last `end`."),
        _ => name,
    }
}

/// A GET's or DELETE's fields as query parameters: every field the path does not set and a
/// query string can hold (not messages).
fn query_parameters(
    binding: &Binding,
    input: &MessageDescriptor,
    schemas: &mut Schemas,
) -> Vec<Value> {
    let in_path = binding.path_fields();
    input
        .fields()
        .filter(|field| !in_path.contains(&field.name()))
        .filter(|field| !matches!(field.kind(), Kind::Message(_)))
        .map(|field| {
            json!({
                "name": field.name(),
                "in": "query",
                "required": false,
                "schema": schemas.field(&field),
                "description": field_comment(&field).unwrap_or_default(),
            })
        })
        .collect()
}

fn event_stream_parameters() -> [Value; 3] {
    [
        json!({"name": "after", "in": "query", "required": false,
               "schema": {"type": "integer", "minimum": 0},
               "description": "Resume after this event sequence (as Last-Event-ID does)."}),
        json!({"name": "Last-Event-ID", "in": "header", "required": false,
               "schema": {"type": "string"},
               "description": "The last event's `id` a reconnecting client saw."}),
        json!({"name": "access_token", "in": "query", "required": false,
               "schema": {"type": "string"},
               "description": "The bearer token, for clients that cannot send headers \
                               (a browser's EventSource); on this route only."}),
    ]
}

fn file_content() -> Value {
    json!({
        "operationId": "GetFileContent",
        "tags": ["files"],
        "description": "A file's bytes as a download (its type, `attachment`, sandboxed): \
                        GetFile's content. The id is the file's or its artifact's.",
        "parameters": [{"name": "file_id", "in": "path", "required": true,
                        "schema": {"type": "string"}}],
        "responses": {
            "200": {"description": "The file's bytes.",
                    "content": {"application/octet-stream": {
                        "schema": {"type": "string", "contentMediaType": "application/octet-stream"}}}},
            "default": error_response(),
        },
    })
}

fn upload(file_output: Value) -> Value {
    json!({
        "operationId": "UploadFile",
        "tags": ["files"],
        "description": "Stores a file of the caller's, to attach to prompts by the `id` it \
                        answers (CreatePrompt's `attachments`): UploadFile as a form. The file \
                        is bounded by GATEWAY_MAX_UPLOAD_BYTES (413 past it) and counts against \
                        the caller's storage quota.",
        "requestBody": {"required": true, "content": {"multipart/form-data": {"schema": {
            "type": "object",
            "required": ["file"],
            "properties": {
                "file": {"type": "string", "contentMediaType": "application/octet-stream",
                         "description": "The file, with its name and type in the part's headers."},
                "conversation_id": {"type": "string",
                                    "description": "Keep the file with this conversation: \
                                                    deleting it deletes the file."},
            },
        }}}},
        "responses": {
            "200": {"description": "The file, of source FILE_SOURCE_USER.",
                    "content": {"application/json": {"schema": file_output}}},
            "default": error_response(),
        },
    })
}

fn openapi_document() -> Value {
    json!({
        "operationId": "GetOpenApiDocument",
        "tags": ["meta"],
        "description": "This document.",
        "security": [],
        "responses": {"200": {"description": "The OpenAPI document.",
                              "content": {"application/json": {"schema": {"type": "object"}}}}},
    })
}

fn error_response() -> Value {
    json!({
        "description": "An error: the gRPC code's name and its HTTP status (404 NOT_FOUND, \
                        400 INVALID_ARGUMENT, 401 UNAUTHENTICATED, 429 RESOURCE_EXHAUSTED, …).",
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
    })
}

fn error_schema() -> Value {
    json!({
        "type": "object",
        "description": "google.rpc.Status as JSON, with the code's name.",
        "required": ["code", "message"],
        "properties": {
            "code": {"type": "string", "enum": [
                "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
                "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED",
                "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL",
                "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED"]},
            "message": {"type": "string"},
            "details": {"type": "array", "items": {}},
        },
    })
}

/// `prompts` for `/v1/prompts/{prompt_id}:cancel`: the collection the route is under.
fn tag(template: &str) -> String {
    template
        .trim_start_matches("/v1/")
        .split(['/', ':'])
        .next()
        .unwrap_or_default()
        .to_owned()
}

/// The messages and enums the operations refer to, collected as they are met.
#[derive(Default)]
struct Schemas {
    messages: BTreeMap<String, MessageDescriptor>,
    enums: BTreeMap<String, EnumDescriptor>,
}

impl Schemas {
    fn refer(&mut self, message: &MessageDescriptor) -> Value {
        if let Some(known) = well_known(message.full_name()) {
            return known;
        }
        let name = component_name(message.full_name());
        if !self.messages.contains_key(&name) {
            self.messages.insert(name.clone(), message.clone());
            for field in message.fields() {
                self.field(&field);
            }
        }
        json!({"$ref": format!("#/components/schemas/{name}")})
    }

    fn field(&mut self, field: &FieldDescriptor) -> Value {
        if field.is_map()
            && let Kind::Message(entry) = field.kind()
            && let Some(value) = entry.get_field_by_name("value")
        {
            return json!({"type": "object", "additionalProperties": self.kind(&value.kind())});
        }
        let single = self.kind(&field.kind());
        if field.is_list() {
            json!({"type": "array", "items": single})
        } else {
            single
        }
    }

    fn kind(&mut self, kind: &Kind) -> Value {
        match kind {
            Kind::Double | Kind::Float => json!({"type": "number"}),
            Kind::Int32 | Kind::Sint32 | Kind::Sfixed32 => {
                json!({"type": "integer", "format": "int32"})
            }
            Kind::Uint32 | Kind::Fixed32 => {
                json!({"type": "integer", "format": "int64", "minimum": 0, "maximum": u32::MAX})
            }
            Kind::Int64 | Kind::Sint64 | Kind::Sfixed64 | Kind::Uint64 | Kind::Fixed64 => {
                json!({"type": "string", "format": "int64", "pattern": "^-?[0-9]+$"})
            }
            Kind::Bool => json!({"type": "boolean"}),
            Kind::String => json!({"type": "string"}),
            Kind::Bytes => json!({"type": "string", "contentEncoding": "base64"}),
            Kind::Message(message) => self.refer(message),
            Kind::Enum(enumeration) => {
                let name = component_name(enumeration.full_name());
                self.enums.insert(name.clone(), enumeration.clone());
                json!({"$ref": format!("#/components/schemas/{name}")})
            }
        }
    }

    /// The schemas, by name.
    fn finish(mut self) -> Map<String, Value> {
        let mut out = Map::new();
        let messages = std::mem::take(&mut self.messages);
        for (name, message) in messages {
            out.insert(name, self.message_schema(&message));
        }
        for (name, enumeration) in &self.enums {
            let values: Vec<String> = enumeration
                .values()
                .map(|value| value.name().to_owned())
                .collect();
            let mut schema = json!({"type": "string", "enum": values});
            if let Some(text) = comment(&enumeration.parent_file(), enumeration.path()) {
                schema["description"] = json!(text);
            }
            out.insert(name.clone(), schema);
        }
        out
    }

    fn message_schema(&mut self, message: &MessageDescriptor) -> Value {
        let mut properties = Map::new();
        for field in message.fields() {
            let mut schema = self.field(&field);
            if let Some(text) = field_comment(&field) {
                schema = match schema {
                    Value::Object(mut object) if !object.contains_key("$ref") => {
                        object.insert("description".into(), json!(text));
                        Value::Object(object)
                    }
                    other => json!({"allOf": [other], "description": text}),
                };
            }
            properties.insert(field.json_name().to_owned(), schema);
        }
        let mut schema = json!({
            "type": "object",
            "properties": properties,
            "additionalProperties": false,
        });
        if let Some(text) = comment(&message.parent_file(), message.path()) {
            schema["description"] = json!(text);
        }
        schema
    }
}

/// The schema of a well-known type, written as its JSON mapping says.
fn well_known(full_name: &str) -> Option<Value> {
    Some(match full_name {
        "google.protobuf.Timestamp" => json!({"type": "string", "format": "date-time"}),
        "google.protobuf.Duration" => {
            json!({"type": "string", "pattern": "^-?[0-9]+(\\.[0-9]+)?s$"})
        }
        "google.protobuf.Struct" => json!({"type": "object", "additionalProperties": true}),
        "google.protobuf.Value" => json!({}),
        "google.protobuf.ListValue" => json!({"type": "array", "items": {}}),
        "google.protobuf.Empty" => json!({"type": "object"}),
        _ => return None,
    })
}

/// `Prompt` for `agentic.v1.Prompt`, `ExecuteInput.Start` for a nested one.
fn component_name(full_name: &str) -> String {
    full_name.trim_start_matches(PACKAGE_PREFIX).to_owned()
}

fn field_comment(field: &FieldDescriptor) -> Option<String> {
    comment(&field.parent_message().parent_file(), field.path())
}

/// The leading comment of the element at `path` in `file`, its lines joined.
fn comment(file: &FileDescriptor, path: &[i32]) -> Option<String> {
    let location = file
        .file_descriptor_proto()
        .source_code_info
        .as_ref()?
        .location
        .iter()
        .find(|location| location.path == path)?;
    let text = location.leading_comments.as_deref()?;
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    let joined = lines.join(" ").trim().to_owned();
    (!joined.is_empty()).then_some(joined)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `make openapi` sets `AGENTIC_WRITE_OPENAPI=1`: the document is written instead.
    #[test]
    fn the_checked_in_openapi_document_is_the_one_the_proto_makes() {
        let generated = text().unwrap();
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/api/openapi.json");
        if std::env::var_os("AGENTIC_WRITE_OPENAPI").is_some() {
            std::fs::write(&path, &generated).unwrap();
            return;
        }
        assert!(
            super::super::OPENAPI == generated,
            "{} is not what the proto makes: run `make openapi` and commit it",
            path.display()
        );
    }

    #[test]
    fn operations_are_typed_and_named_after_their_rpcs() {
        let document = document().unwrap();
        let create = &document["paths"]["/v1/prompts"]["post"];
        assert_eq!(create["operationId"], "CreatePrompt");
        assert_eq!(
            create["requestBody"]["content"]["application/json"]["schema"]["$ref"],
            "#/components/schemas/CreatePromptRequest"
        );
        let schemas = &document["components"]["schemas"];
        assert_eq!(
            schemas["Prompt"]["properties"]["state"]["$ref"],
            "#/components/schemas/PromptState"
        );
        assert_eq!(
            schemas["PromptState"]["enum"][0],
            "PROMPT_STATE_UNSPECIFIED"
        );
        let limit = document["paths"]["/v1/prompts"]["get"]["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .find(|parameter| parameter["name"] == "limit")
            .unwrap()
            .clone();
        assert_eq!(limit["schema"]["type"], "integer");
        assert!(
            document["paths"]["/v1/prompts/{prompt_id}/events"]["get"]["responses"]["200"]["content"]
                .get("text/event-stream")
                .is_some()
        );
    }
}
