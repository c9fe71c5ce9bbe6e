//! `GET /v1/prompts/{prompt_id}/events`: `StreamPrompt` as server-sent events.

use std::collections::HashMap;
use std::convert::Infallible;
use std::time::Duration;

use agentic_proto::canonical;
use agentic_proto::v1::StreamPromptRequest;
use agentic_proto::v1::prompt_gateway_server::PromptGateway;
use axum::Extension;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde_json::json;

use super::{HttpApi, call, code_name, error_body, invalid};
use crate::api::auth::Caller;

/// `StreamPrompt` as server-sent events: each event's `id` is its sequence and its data the
/// event as JSON; a reconnect with `Last-Event-ID` (or `?after=N`) resumes after it. The
/// stream ends after a terminal event, or when the prompt waits for approval, as
/// `StreamPrompt` does, with an `end` event (`{"reason"}`) to close on; an error ends it
/// with an `error` event holding the error body. A resumption that has nothing more to send
/// answers 204 (`EventSource` then stops reconnecting). A browser's `EventSource`, which
/// cannot send headers, authenticates with `?access_token=` (see `layers::guard`). The
/// stream opens with `retry:` ([`RECONNECT_DELAY`]).
pub(super) async fn prompt_events(
    State(api): State<HttpApi>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    Path(prompt_id): Path<String>,
    RawQuery(raw): RawQuery,
) -> Response {
    let Some(after_sequence) = resume_after(&headers, raw.as_deref()) else {
        return invalid("Last-Event-ID and `after` are event sequences (whole numbers)");
    };
    let message = StreamPromptRequest {
        prompt_id,
        after_sequence,
    };
    let mut stream = match call(&api, caller, message, |service, request| async move {
        service.stream_prompt(request).await
    })
    .await
    {
        Ok(stream) => stream,
        Err(refusal) => return refusal.into_response(),
    };
    // A client that resumes after the last event of a prompt that will have no more (an
    // `EventSource` that ignored `end`) is told 204, which tells it to stop reconnecting.
    let first = match tokio::time::timeout(EMPTY_STREAM_WAIT, stream.next()).await {
        Ok(None) => return StatusCode::NO_CONTENT.into_response(),
        Ok(Some(first)) => Some(first),
        Err(_) => None,
    };
    let stream = futures::stream::iter(first).chain(stream);
    // Each event as JSON, or the error body that ends the stream: a client must not resume
    // past an event it never received. A stream lasts at most its lifetime: the client then
    // resumes after the last event it saw. When the prompt's stream ends by itself (the
    // prompt ended, or waits for a person), an `end` event (`{"reason"}`) follows, which a
    // client closes on: `EventSource` would otherwise reconnect to a stream with nothing
    // more. A waiting event in the middle of a replay (the prompt went on) is no end.
    let ended = futures::stream::once(std::future::ready(None));
    let reconnect = futures::stream::once(std::future::ready(Ok::<_, Infallible>(
        Event::default().retry(RECONNECT_DELAY),
    )));
    let events = stream
        .map(Some)
        .chain(ended)
        .take_until(tokio::time::sleep(api.stream_lifetime))
        .scan((false, None), |(failed, last), item| {
            if *failed {
                return std::future::ready(None);
            }
            let event = sse_event(item, failed, last);
            std::future::ready(Some(Ok::<_, Infallible>(event)))
        });
    Sse::new(reconnect.chain(events))
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response()
}

/// Where a stream resumes: after the `Last-Event-ID` header's sequence, else the `after`
/// query parameter's, else from the start; `None` for one that is no whole number.
fn resume_after(headers: &HeaderMap, raw_query: Option<&str>) -> Option<u64> {
    let after = headers
        .get("last-event-id")
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned)
        .or_else(|| {
            let params: HashMap<&str, &str> = raw_query
                .unwrap_or_default()
                .split('&')
                .filter_map(|pair| pair.split_once('='))
                .collect();
            params.get("after").map(|after| (*after).to_owned())
        });
    match after.as_deref().map(str::parse::<u64>) {
        None => Some(0),
        Some(Ok(after)) => Some(after),
        Some(Err(_)) => None,
    }
}

/// One item of the stream as an SSE event: an event of the prompt (its sequence as `id`),
/// the error that ends the stream (`failed` is then set), or, at the stream's own end, the
/// `end` event with the reason the `last` event gave.
fn sse_event(
    item: Option<Result<agentic_proto::v1::PromptEvent, tonic::Status>>,
    failed: &mut bool,
    last: &mut Option<&'static str>,
) -> Event {
    match item {
        Some(Ok(event)) => match canonical::compact(&event) {
            Ok(json) => {
                *last = ends_stream(&event);
                Event::default().id(event.sequence.to_string()).data(json)
            }
            Err(problem) => {
                tracing::error!(%problem, "an event could not be written as JSON");
                *failed = true;
                let body = error_body("INTERNAL", "an event could not be written as JSON");
                Event::default().event("error").data(body.to_string())
            }
        },
        Some(Err(status)) => {
            *failed = true;
            let body = error_body(code_name(status.code()), status.message());
            Event::default().event("error").data(body.to_string())
        }
        None => {
            *failed = true;
            let reason = last.unwrap_or("ended");
            Event::default()
                .event("end")
                .data(json!({"reason": reason}).to_string())
        }
    }
}

/// How long a client waits before it reconnects (the stream's first field, `retry:`): a stream
/// that reached its lifetime resumes after a second, not after a browser's default of about
/// three.
const RECONNECT_DELAY: Duration = Duration::from_secs(1);

/// How long an event stream's start waits to see whether it has nothing at all to send.
const EMPTY_STREAM_WAIT: Duration = Duration::from_millis(250);

/// Why the stream ends after `event`, if it does: the prompt ended or waits for a person.
fn ends_stream(event: &agentic_proto::v1::PromptEvent) -> Option<&'static str> {
    use agentic_proto::v1::prompt_event::Kind;
    match event.kind.as_ref()? {
        Kind::Completed(_) => Some("completed"),
        Kind::Error(_) => Some("failed"),
        Kind::Cancelled(_) => Some("cancelled"),
        Kind::Waiting(_) => Some("waiting"),
        _ => None,
    }
}
