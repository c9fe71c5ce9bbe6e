//! Long-term memory through the public API: the caller's own items, kept by the tool-host's
//! `memory` plugin (its `UserData` service), listed or searched, put and deleted. The
//! gateway authenticates the caller and names them; the tool-host checks and bounds the rest.

use std::time::Duration;

use agentic_ids::UserId;
use agentic_proto::v1::user_data_client::UserDataClient;
use agentic_proto::v1::{
    DeleteMemoryRequest, DeleteMemoryResponse, ListMemoryRequest, ListMemoryResponse, MemoryItem,
    PutMemoryRequest,
};
use agentic_rpc::InternalChannel;

use crate::app::skills::relayed_or;
use crate::error::GatewayError;

/// Each is one query on the tool-host.
const CALL_TIMEOUT: Duration = Duration::from_secs(15);

fn timed<T>(message: T) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    request.set_timeout(CALL_TIMEOUT);
    request
}

/// A client whose answers may be as large as any (a listing of 100 items of 64 KiB).
fn client(tool_host: &InternalChannel) -> UserDataClient<InternalChannel> {
    UserDataClient::new(tool_host.clone())
        .max_decoding_message_size(agentic_rpc::MAX_MESSAGE_BYTES)
        .max_encoding_message_size(agentic_rpc::MAX_MESSAGE_BYTES)
}

fn relayed(status: tonic::Status) -> GatewayError {
    relayed_or(status, GatewayError::MemoryUnavailable)
}

pub async fn list(
    tool_host: &InternalChannel,
    user_id: &UserId,
    mut request: ListMemoryRequest,
) -> Result<ListMemoryResponse, GatewayError> {
    request.user_id = user_id.to_string();
    let answer = client(tool_host).list_memory(timed(request)).await;
    Ok(answer.map_err(relayed)?.into_inner())
}

pub async fn put(
    tool_host: &InternalChannel,
    user_id: &UserId,
    mut request: PutMemoryRequest,
) -> Result<MemoryItem, GatewayError> {
    request.user_id = user_id.to_string();
    let answer = client(tool_host).put_memory(timed(request)).await;
    Ok(answer.map_err(relayed)?.into_inner())
}

pub async fn delete(
    tool_host: &InternalChannel,
    user_id: &UserId,
    mut request: DeleteMemoryRequest,
) -> Result<DeleteMemoryResponse, GatewayError> {
    request.user_id = user_id.to_string();
    let answer = client(tool_host).delete_memory(timed(request)).await;
    Ok(answer.map_err(relayed)?.into_inner())
}
