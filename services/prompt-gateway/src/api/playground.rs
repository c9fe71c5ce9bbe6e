//! The web playground at `/`: a page and its scripts and styles, embedded in the binary (no
//! build step, nothing fetched from elsewhere). The page holds no data of its own: it calls
//! the HTTP API with the caller's token like any client, so these routes need no caller.
//! Every answer forbids the page to load or run anything not served here, and model output
//! is only ever put into the page as text (`markdown.js`), so it cannot run script.

use axum::Router;
use axum::extract::Path;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

/// The page's files: name, content type, content.
const ASSETS: &[(&str, &str, &str)] = &[
    (
        "app.js",
        "text/javascript; charset=utf-8",
        include_str!("../../playground/app.js"),
    ),
    (
        "api.js",
        "text/javascript; charset=utf-8",
        include_str!("../../playground/api.js"),
    ),
    (
        "timeline.js",
        "text/javascript; charset=utf-8",
        include_str!("../../playground/timeline.js"),
    ),
    (
        "attachments.js",
        "text/javascript; charset=utf-8",
        include_str!("../../playground/attachments.js"),
    ),
    (
        "dom.js",
        "text/javascript; charset=utf-8",
        include_str!("../../playground/dom.js"),
    ),
    (
        "subagents.js",
        "text/javascript; charset=utf-8",
        include_str!("../../playground/subagents.js"),
    ),
    (
        "skills.js",
        "text/javascript; charset=utf-8",
        include_str!("../../playground/skills.js"),
    ),
    (
        "markdown.js",
        "text/javascript; charset=utf-8",
        include_str!("../../playground/markdown.js"),
    ),
    (
        "style.css",
        "text/css; charset=utf-8",
        include_str!("../../playground/style.css"),
    ),
];

const INDEX: &str = include_str!("../../playground/index.html");

/// Scripts and styles from this origin only, no inline script, no plugins, no framing, and
/// calls only to this origin (the API).
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     img-src 'self' data: blob:; connect-src 'self'; base-uri 'none'; form-action 'none'; \
     frame-ancestors 'none'";

/// `GET /` and `GET /playground/{file}`.
pub fn router<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route(
            "/",
            get(|| async { page("text/html; charset=utf-8", INDEX) }),
        )
        .route("/playground/{file}", get(asset))
}

async fn asset(Path(file): Path<String>) -> Response {
    match ASSETS.iter().find(|(name, _, _)| *name == file) {
        Some((_, mime, content)) => page(mime, content),
        None => (StatusCode::NOT_FOUND, "no such file").into_response(),
    }
}

fn page(mime: &'static str, content: &'static str) -> Response {
    let mut response = content.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(mime));
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    // Served from the binary: a new build's page is fetched again, an unchanged one revalidated.
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}
