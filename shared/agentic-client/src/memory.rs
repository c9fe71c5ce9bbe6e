//! Long-term memory: the items the agent keeps for you across conversations (the tool-host's
//! `memory` plugin), which you can list, search, put and delete yourself.

use agentic_proto::v1::{DeleteMemoryRequest, ListMemoryRequest, MemoryItem, PutMemoryRequest};

use crate::client::Client;
use crate::error::ClientError;

impl Client {
    /// Your items in `namespace` (a path like `preferences/food`; empty: all) and below:
    /// the newest, or with a `query` those with every word of it, best first.
    pub async fn list_memory(
        &self,
        namespace: &str,
        query: &str,
        limit: u32,
    ) -> Result<Vec<MemoryItem>, ClientError> {
        let request = ListMemoryRequest {
            namespace: namespace.to_owned(),
            query: query.to_owned(),
            limit,
            ..ListMemoryRequest::default()
        };
        let response = self.gateway().list_memory(request).await;
        Ok(response
            .map_err(|status| self.failed(status))?
            .into_inner()
            .items)
    }

    /// Keeps `value` under `namespace`/`key` (replacing what was there), for `ttl_seconds`
    /// when not 0.
    pub async fn put_memory(
        &self,
        namespace: &str,
        key: &str,
        value: &serde_json::Value,
        ttl_seconds: u64,
    ) -> Result<MemoryItem, ClientError> {
        let request = PutMemoryRequest {
            namespace: namespace.to_owned(),
            key: key.to_owned(),
            value: Some(agentic_proto::json::to_proto(value)),
            ttl_seconds,
            ..PutMemoryRequest::default()
        };
        let response = self.gateway().put_memory(request).await;
        Ok(response.map_err(|status| self.failed(status))?.into_inner())
    }

    /// Forgets `namespace`/`key`: whether there was such an item.
    pub async fn delete_memory(&self, namespace: &str, key: &str) -> Result<bool, ClientError> {
        let request = DeleteMemoryRequest {
            namespace: namespace.to_owned(),
            key: key.to_owned(),
            ..DeleteMemoryRequest::default()
        };
        let response = self.gateway().delete_memory(request).await;
        Ok(response
            .map_err(|status| self.failed(status))?
            .into_inner()
            .deleted)
    }
}
