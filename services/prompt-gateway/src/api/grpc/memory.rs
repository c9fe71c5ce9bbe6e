//! The memory RPCs: the caller's long-term memory items, through the tool-host.

use agentic_proto::v1::{
    DeleteMemoryRequest, DeleteMemoryResponse, ListMemoryRequest, ListMemoryResponse, MemoryItem,
    PutMemoryRequest,
};
use agentic_rpc::to_status;
use tonic::{Request, Response};

use super::parse::no_nul;
use super::{GatewayService, GrpcResult};
use crate::api::auth::Caller;
use crate::app::memory;

impl GatewayService {
    pub(super) async fn list_memory_rpc(
        &self,
        request: Request<ListMemoryRequest>,
    ) -> GrpcResult<ListMemoryResponse> {
        let user_id = Caller::user_of(&request)?;
        let request = request.into_inner();
        no_nul(&[("namespace", &request.namespace), ("query", &request.query)])?;
        let items = memory::list(&self.tool_host, &user_id, request)
            .await
            .map_err(to_status)?;
        Ok(Response::new(items))
    }

    pub(super) async fn put_memory_rpc(
        &self,
        request: Request<PutMemoryRequest>,
    ) -> GrpcResult<MemoryItem> {
        let user_id = Caller::user_of(&request)?;
        let request = request.into_inner();
        no_nul(&[("namespace", &request.namespace), ("key", &request.key)])?;
        let item = memory::put(&self.tool_host, &user_id, request)
            .await
            .map_err(to_status)?;
        Ok(Response::new(item))
    }

    pub(super) async fn delete_memory_rpc(
        &self,
        request: Request<DeleteMemoryRequest>,
    ) -> GrpcResult<DeleteMemoryResponse> {
        let user_id = Caller::user_of(&request)?;
        let request = request.into_inner();
        no_nul(&[("namespace", &request.namespace), ("key", &request.key)])?;
        let deleted = memory::delete(&self.tool_host, &user_id, request)
            .await
            .map_err(to_status)?;
        Ok(Response::new(deleted))
    }
}
