//! The HTTP routes of the public API, read from the proto: each RPC of `PromptGateway` that
//! declares a `google.api.http` route is served there by one generic handler. It maps the
//! path, the query and the body onto the request message (canonical proto3 JSON, through the
//! descriptor set), calls the gRPC service in process (the same service the gRPC server runs,
//! for the caller the HTTP guard authenticated), and writes the answer as canonical JSON.
//! Adding an RPC with a route adds its route here; there is no handler to write.

use std::collections::HashMap;
use std::sync::Arc;

use agentic_proto::canonical;
use agentic_proto::google_api::HttpRule;
use agentic_proto::google_api::http_rule::Pattern;
use agentic_proto::v1::prompt_gateway_server::SERVICE_NAME;
use axum::Extension;
use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodFilter, MethodRouter};
use prost_reflect::{
    DynamicMessage, FieldDescriptor, Kind, MessageDescriptor, MethodDescriptor, Value as Field,
};
use serde_json::{Map, Value};
use tonic::Status;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};

use super::{HttpApi, Refusal, error, status_response};
use crate::api::auth::Caller;

/// One RPC's route, as its `google.api.http` annotation declares it.
#[derive(Clone)]
pub struct Binding {
    pub method: Method,
    /// As declared: `/v1/prompts/{prompt_id}:cancel`.
    pub template: String,
    /// The path's segments (the last without its verb).
    segments: Vec<Segment>,
    /// `cancel` in `…/{prompt_id}:cancel`.
    verb: Option<String>,
    pub body: Body,
    pub rpc: MethodDescriptor,
}

/// What a route's body is, as its rule's `body` says.
#[derive(Clone)]
pub enum Body {
    /// `""`: the route takes no body; the query string holds the fields.
    None,
    /// `"*"`: the body is the whole request message.
    Whole,
    /// A message field's name: the body is that field; the query string holds the others.
    Field(FieldDescriptor),
}

#[derive(Clone, PartialEq)]
enum Segment {
    Literal(String),
    Field(String),
}

impl Binding {
    /// The path as the router matches it: the verb dropped, so the last variable holds it
    /// (`/v1/prompts/{prompt_id}`).
    pub fn router_path(&self) -> String {
        let segments: Vec<String> = self
            .segments
            .iter()
            .map(|segment| match segment {
                Segment::Literal(text) => text.clone(),
                Segment::Field(name) => format!("{{{name}}}"),
            })
            .collect();
        format!("/{}", segments.join("/"))
    }

    /// The fields the path sets, in order.
    pub fn path_fields(&self) -> Vec<&str> {
        self.segments
            .iter()
            .filter_map(|segment| match segment {
                Segment::Field(name) => Some(name.as_str()),
                Segment::Literal(_) => None,
            })
            .collect()
    }
}

/// The routes, read once (`bindings`); none when the descriptor set does not hold them,
/// which `crate::run` refuses to start with.
pub fn all() -> &'static [Binding] {
    static ALL: std::sync::LazyLock<Vec<Binding>> =
        std::sync::LazyLock::new(|| bindings().unwrap_or_default());
    &ALL
}

/// Every route the proto declares for `PromptGateway`, in the order of its methods.
pub fn bindings() -> Result<Vec<Binding>, String> {
    let pool = canonical::descriptors().map_err(|error| error.to_string())?;
    let service = pool
        .get_service_by_name(SERVICE_NAME)
        .ok_or_else(|| format!("the descriptor set has no service {SERVICE_NAME}"))?;
    let extension = pool
        .get_extension_by_name("google.api.http")
        .ok_or("the descriptor set has no google.api.http extension")?;
    let mut bindings = Vec::new();
    for rpc in service.methods() {
        let options = rpc.options();
        if !options.has_extension(&extension) {
            continue;
        }
        let rule: HttpRule = match options.get_extension(&extension).as_ref() {
            Field::Message(rule) => rule
                .transcode_to()
                .map_err(|error| format!("{}: {error}", rpc.full_name()))?,
            _ => {
                return Err(format!(
                    "{}: google.api.http is no HttpRule",
                    rpc.full_name()
                ));
            }
        };
        bindings.push(binding(&rpc, &rule)?);
    }
    Ok(bindings)
}

fn binding(rpc: &MethodDescriptor, rule: &HttpRule) -> Result<Binding, String> {
    let fail = |what: &str| format!("{}: {what}", rpc.full_name());
    let (method, template) = match rule.pattern.as_ref() {
        Some(Pattern::Get(path)) => (Method::GET, path),
        Some(Pattern::Post(path)) => (Method::POST, path),
        Some(Pattern::Patch(path)) => (Method::PATCH, path),
        Some(Pattern::Delete(path)) => (Method::DELETE, path),
        Some(Pattern::Put(path)) => (Method::PUT, path),
        _ => {
            return Err(fail(
                "only get, post, patch, delete and put routes are served",
            ));
        }
    };
    let (path, verb) = match template.rsplit_once(':') {
        Some((path, verb)) if !verb.contains('/') && !verb.contains('}') => {
            (path, Some(verb.to_owned()))
        }
        _ => (template.as_str(), None),
    };
    let input = rpc.input();
    let mut segments = Vec::new();
    for part in path
        .strip_prefix('/')
        .ok_or_else(|| fail("a path starts with /"))?
        .split('/')
    {
        match part
            .strip_prefix('{')
            .and_then(|part| part.strip_suffix('}'))
        {
            Some(name) => {
                let field = input
                    .get_field_by_name(name)
                    .ok_or_else(|| fail(&format!("the path names no field: {name}")))?;
                if field.kind() != Kind::String || field.is_list() {
                    return Err(fail(&format!("path field {name} is not a string")));
                }
                segments.push(Segment::Field(name.to_owned()));
            }
            None => segments.push(Segment::Literal(part.to_owned())),
        }
    }
    let body = match rule.body.as_str() {
        "" => Body::None,
        "*" => Body::Whole,
        name => match input.get_field_by_name(name) {
            Some(field) if matches!(field.kind(), Kind::Message(_)) && !field.is_list() => {
                Body::Field(field)
            }
            _ => return Err(fail(&format!("the body names no message field: {name}"))),
        },
    };
    if verb.is_some() && !matches!(segments.last(), Some(Segment::Field(_))) {
        return Err(fail("a verb follows a variable (`…/{id}:verb`)"));
    }
    Ok(Binding {
        method,
        template: template.clone(),
        segments,
        verb,
        body,
        rpc: rpc.clone(),
    })
}

/// The routes of `bindings` (those of RPCs not in `except`, which have routes of their own),
/// one per router path, each method dispatching on the verb.
pub fn routes(bindings: &[Binding], except: &[&str]) -> Vec<(String, MethodRouter<HttpApi>)> {
    let mut by_path: Vec<(String, Vec<Binding>)> = Vec::new();
    for binding in bindings
        .iter()
        .filter(|binding| !except.contains(&binding.rpc.name()))
    {
        let path = binding.router_path();
        match by_path.iter_mut().find(|(known, _)| *known == path) {
            Some((_, list)) => list.push(binding.clone()),
            None => by_path.push((path, vec![binding.clone()])),
        }
    }
    by_path
        .into_iter()
        .map(|(path, list)| {
            let mut router = MethodRouter::new();
            let mut methods: Vec<Method> = Vec::new();
            for binding in &list {
                if !methods.contains(&binding.method) {
                    methods.push(binding.method.clone());
                }
            }
            for method in methods {
                let same: Arc<[Binding]> = list
                    .iter()
                    .filter(|binding| binding.method == method)
                    .cloned()
                    .collect();
                let filter = MethodFilter::try_from(method).unwrap_or(MethodFilter::GET);
                router = router.on(
                    filter,
                    move |state: State<HttpApi>,
                          caller: Extension<Caller>,
                          path: Path<HashMap<String, String>>,
                          query: RawQuery,
                          headers: HeaderMap,
                          bytes: Bytes| {
                        serve(
                            Arc::clone(&same),
                            state,
                            caller,
                            path,
                            query,
                            headers,
                            bytes,
                        )
                    },
                );
            }
            (path, router)
        })
        .collect()
}

/// Serves one request with the binding its verb picks among `candidates`.
async fn serve(
    candidates: Arc<[Binding]>,
    State(api): State<HttpApi>,
    Extension(caller): Extension<Caller>,
    Path(mut params): Path<HashMap<String, String>>,
    RawQuery(raw): RawQuery,
    headers: HeaderMap,
    bytes: Bytes,
) -> Response {
    let Some(binding) = pick(&candidates, &mut params) else {
        let verbs: Vec<String> = candidates
            .iter()
            .filter_map(|binding| binding.verb.as_ref().map(|verb| format!(":{verb}")))
            .collect();
        return error(
            StatusCode::NOT_FOUND,
            "NOT_FOUND",
            &format!("no such route: this path takes {}", verbs.join(" or ")),
        );
    };
    let message = match request_message(binding, &params, raw.as_deref(), &headers, &bytes) {
        Ok(message) => message,
        Err(refusal) => return refusal.into_response(),
    };
    match call(&api, caller, binding, message).await {
        Ok(answer) => match canonical::compact_dynamic(&answer) {
            Ok(json) => ([(header::CONTENT_TYPE, "application/json")], json).into_response(),
            Err(problem) => {
                tracing::error!(%problem, "an answer could not be written as JSON");
                error(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "INTERNAL",
                    "the answer could not be written as JSON",
                )
            }
        },
        Err(status) => status_response(&status),
    }
}

/// The binding whose verb the last path variable ends with (which then loses it), or the one
/// without a verb.
fn pick<'a>(
    candidates: &'a [Binding],
    params: &mut HashMap<String, String>,
) -> Option<&'a Binding> {
    for binding in candidates {
        let (Some(verb), Some(last)) = (&binding.verb, binding.path_fields().last().copied())
        else {
            continue;
        };
        let Some(value) = params.get(last) else {
            continue;
        };
        if let Some(stripped) = value.strip_suffix(&format!(":{verb}")) {
            let stripped = stripped.to_owned();
            params.insert(last.to_owned(), stripped);
            return Some(binding);
        }
    }
    // No verb matched: the binding without one, if any.
    candidates.iter().find(|binding| binding.verb.is_none())
}

/// The request message: the body (all of it, or one field), then the query's fields, then
/// the path's (which win).
fn request_message(
    binding: &Binding,
    params: &HashMap<String, String>,
    raw_query: Option<&str>,
    headers: &HeaderMap,
    bytes: &Bytes,
) -> Result<DynamicMessage, Refusal> {
    let input = binding.rpc.input();
    let mut message = match &binding.body {
        Body::Whole if raw_query.is_some_and(|raw| !raw.is_empty()) => {
            return Err(Refusal::invalid(
                "this route takes its fields in the body, not the query string".into(),
            ));
        }
        Body::Whole => json_body(input, headers, bytes)?,
        Body::Field(field) => {
            let mut message = query(&input, raw_query)?;
            if let Kind::Message(of) = field.kind()
                && !bytes.is_empty()
            {
                message.set_field(field, Field::Message(json_body(of, headers, bytes)?));
            }
            message
        }
        Body::None if !bytes.is_empty() => {
            return Err(Refusal::invalid("this route takes no body".into()));
        }
        Body::None => query(&input, raw_query)?,
    };
    for name in binding.path_fields() {
        let value = params.get(name).cloned().unwrap_or_default();
        message.set_field_by_name(name, Field::String(value));
    }
    Ok(message)
}

/// The body as a message of `descriptor`: empty is the message with every field at its
/// default. A body must be `application/json` (so a form a web page posts across origins is
/// refused before it is read as a request).
fn json_body(
    descriptor: MessageDescriptor,
    headers: &HeaderMap,
    bytes: &Bytes,
) -> Result<DynamicMessage, Refusal> {
    if bytes.is_empty() {
        return Ok(DynamicMessage::new(descriptor));
    }
    let json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(';').next())
        .is_some_and(|mime| mime.trim().eq_ignore_ascii_case("application/json"));
    if !json {
        return Err(Refusal(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "a request body must be Content-Type: application/json".into(),
        ));
    }
    // Each JSON value may cost hundreds of bytes once read as a message (a list in a
    // `Struct` is a tree of maps): the count is bounded before anything is allocated.
    if json_values(bytes) > MAX_JSON_VALUES {
        return Err(Refusal::invalid(format!(
            "the body holds more than {MAX_JSON_VALUES} JSON values"
        )));
    }
    canonical::parse_dynamic(descriptor, bytes).map_err(Refusal::invalid)
}

/// Most JSON values one request body may hold.
const MAX_JSON_VALUES: usize = 100_000;

/// How many values `json` holds, about: one per `,`, `[` and `{` outside strings (plus one),
/// read byte by byte without allocating.
fn json_values(json: &[u8]) -> usize {
    let (mut count, mut in_string, mut escaped) = (1, false, false);
    for &byte in json {
        if in_string {
            match (escaped, byte) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
        } else {
            match byte {
                b'"' => in_string = true,
                b',' | b'[' | b'{' => count += 1,
                _ => {}
            }
        }
    }
    count
}

/// The query string as a message of `descriptor` (`?limit=5&conversation_id=…`; field names
/// in snake_case or lowerCamelCase, each value as its JSON would be: `true`, `5`, an enum's
/// name; a repeated field repeats its parameter). Unknown fields are refused.
fn query(descriptor: &MessageDescriptor, raw: Option<&str>) -> Result<DynamicMessage, Refusal> {
    let mut fields = Map::new();
    for pair in raw
        .unwrap_or_default()
        .split('&')
        .filter(|pair| !pair.is_empty())
    {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        let (name, value) = (super::decode(name)?, super::decode(value)?);
        let field = descriptor
            .get_field_by_name(&name)
            .or_else(|| descriptor.get_field_by_json_name(&name))
            .ok_or_else(|| Refusal::invalid(format!("this route has no parameter {name}")))?;
        let value = match field.kind() {
            Kind::Bool => match value.as_str() {
                "true" => Value::Bool(true),
                "false" => Value::Bool(false),
                _ => return Err(Refusal::invalid(format!("{name} is true or false"))),
            },
            Kind::Message(_) => {
                return Err(Refusal::invalid(format!(
                    "{name} is a message: this route cannot take it in the query string"
                )));
            }
            _ => Value::String(value),
        };
        let key = field.json_name().to_owned();
        if field.is_list() {
            match fields
                .entry(key)
                .or_insert_with(|| Value::Array(Vec::new()))
            {
                Value::Array(values) => values.push(value),
                _ => unreachable!("a list field is only ever an array"),
            }
        } else if fields.insert(key, value).is_some() {
            return Err(Refusal::invalid(format!("{name} is given twice")));
        }
    }
    let json = serde_json::to_vec(&Value::Object(fields))
        .map_err(|problem| Refusal::invalid(problem.to_string()))?;
    canonical::parse_dynamic(descriptor.clone(), &json).map_err(Refusal::invalid)
}

/// Calls `binding`'s RPC with `message` on the gateway's own service, as `caller`.
async fn call(
    api: &HttpApi,
    caller: Caller,
    binding: &Binding,
    message: DynamicMessage,
) -> Result<DynamicMessage, Status> {
    let mut grpc = tonic::client::Grpc::new(crate::api::grpc::server(Arc::clone(&api.service)))
        .max_decoding_message_size(agentic_rpc::MAX_MESSAGE_BYTES)
        .max_encoding_message_size(crate::api::MAX_REQUEST_BYTES);
    grpc.ready()
        .await
        .map_err(|error| Status::unavailable(format!("the gateway is not ready: {error}")))?;
    let path = format!("/{SERVICE_NAME}/{}", binding.rpc.name());
    let path = axum::http::uri::PathAndQuery::try_from(path)
        .map_err(|error| Status::internal(error.to_string()))?;
    let mut request = tonic::Request::new(message);
    request.extensions_mut().insert(caller);
    let codec = DynamicCodec(binding.rpc.output());
    grpc.unary(request, path, codec)
        .await
        .map(tonic::Response::into_inner)
}

/// Messages of the descriptor set, whatever their type: what goes out is encoded as it is,
/// what comes in is read as the RPC's output type.
struct DynamicCodec(MessageDescriptor);

impl Codec for DynamicCodec {
    type Encode = DynamicMessage;
    type Decode = DynamicMessage;
    type Encoder = DynamicCodec;
    type Decoder = DynamicCodec;

    fn encoder(&mut self) -> DynamicCodec {
        DynamicCodec(self.0.clone())
    }

    fn decoder(&mut self) -> DynamicCodec {
        DynamicCodec(self.0.clone())
    }
}

impl Encoder for DynamicCodec {
    type Item = DynamicMessage;
    type Error = Status;

    fn encode(&mut self, item: DynamicMessage, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        prost::Message::encode(&item, dst).map_err(|error| Status::internal(error.to_string()))
    }
}

impl Decoder for DynamicCodec {
    type Item = DynamicMessage;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<DynamicMessage>, Status> {
        DynamicMessage::decode(self.0.clone(), src)
            .map(Some)
            .map_err(|error| Status::internal(error.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_public_rpc_but_register_mode_and_upload_file_has_a_route_and_each_is_well_formed() {
        let bindings = bindings().unwrap();
        let pool = canonical::descriptors().unwrap();
        let service = pool.get_service_by_name(SERVICE_NAME).unwrap();
        let routed: Vec<&str> = bindings.iter().map(|binding| binding.rpc.name()).collect();
        for rpc in service.methods() {
            // UploadFile, a client stream, has a route of its own shape (multipart).
            assert_eq!(
                routed.contains(&rpc.name()),
                !["RegisterMode", "UploadFile"].contains(&rpc.name()),
                "{}",
                rpc.name()
            );
        }
        assert!(super::super::route_paths().contains(&"/v1/files".to_owned()));
        let cancel = bindings
            .iter()
            .find(|binding| binding.rpc.name() == "CancelPrompt")
            .unwrap();
        assert_eq!(cancel.router_path(), "/v1/prompts/{prompt_id}");
        assert_eq!(cancel.verb.as_deref(), Some("cancel"));
        assert_eq!(cancel.path_fields(), ["prompt_id"]);
    }

    #[test]
    fn json_values_are_counted_outside_strings_only() {
        assert_eq!(json_values(br#"{"a": [1, 2, 3]}"#), 5);
        assert_eq!(json_values(br#"{"text": "a, b, [c], {d}, \", e"}"#), 2);
        let many = format!("[{}1]", "1,".repeat(MAX_JSON_VALUES));
        assert!(json_values(many.as_bytes()) > MAX_JSON_VALUES);
    }

    #[test]
    fn the_verb_picks_the_binding_and_leaves_the_id() {
        let bindings = bindings().unwrap();
        let posts: Vec<Binding> = bindings
            .into_iter()
            .filter(|binding| {
                binding.method == Method::POST && binding.router_path() == "/v1/prompts/{prompt_id}"
            })
            .collect();
        let mut params = HashMap::from([("prompt_id".to_owned(), "p1:replay".to_owned())]);
        let picked = pick(&posts, &mut params).unwrap();
        assert_eq!(picked.rpc.name(), "ReplayPrompt");
        assert_eq!(params["prompt_id"], "p1");
        let mut params = HashMap::from([("prompt_id".to_owned(), "p1:explode".to_owned())]);
        assert!(pick(&posts, &mut params).is_none());
    }
}
