//! Who is calling. Until token auth arrives, the caller names itself in `x-user-id`
//! metadata (a development mode that the gateway announces loudly at start).

use tonic::metadata::MetadataMap;

use crate::error::GatewayError;

pub const USER_HEADER: &str = "x-user-id";

/// The calling user, from `x-user-id`. Every read and write is scoped to it.
pub fn caller(metadata: &MetadataMap) -> Result<String, GatewayError> {
    let user = metadata
        .get(USER_HEADER)
        .and_then(|value| value.to_str().ok())
        .map(str::trim)
        .filter(|user| !user.is_empty() && user.len() <= 256)
        .ok_or_else(|| {
            GatewayError::Unauthenticated(format!("missing or invalid {USER_HEADER} metadata"))
        })?;
    Ok(user.to_owned())
}
