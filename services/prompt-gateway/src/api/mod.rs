//! The API layer: the gateway's faces to its callers. The gRPC service (`grpc`), the HTTP/JSON
//! API transcoded onto it (`http`) with its web playground (`playground`), who is calling
//! (`auth`), and what would leave those faces open (`exposure`). Requests come in here and are
//! checked and converted; behaviour lives below.
//!
//! Arrows run down only: the API calls the use cases (`crate::app`) and, for streams and modes,
//! the engine (`crate::engine`); nothing below imports from here.

pub(crate) mod auth;
pub(crate) mod exposure;
pub(crate) mod grpc;
pub(crate) mod http;
pub(crate) mod playground;

/// Largest request the public API reads: the largest legitimate one is a `CreatePrompt` with
/// its input (256 KiB), state (1 MiB) and inline attachments (1 MiB). Answers may be larger
/// (a prompt's whole timeline). Uploads (`UploadFile`) come in chunks, each within it.
pub const MAX_REQUEST_BYTES: usize = 3 * 1024 * 1024;

/// `StreamPrompt` streams a gateway serves at once, all users together.
pub(crate) const MAX_STREAMS: usize = 16_384;
