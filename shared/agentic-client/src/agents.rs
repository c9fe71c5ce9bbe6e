//! Agents: named, versioned definitions a prompt runs as ([`crate::NewPrompt::agent`]).
//! Saving a name again makes its next version; a prompt keeps the version it ran with.

use agentic_proto::v1::{
    Agent, CreateAgentRequest, DeleteAgentRequest, GetAgentRequest, ListAgentVersionsRequest,
    ListAgentsRequest,
};

use crate::client::Client;
use crate::error::ClientError;

impl Client {
    /// Saves `agent` as the next version of its name (the first: version 1).
    pub async fn create_agent(&self, agent: Agent) -> Result<Agent, ClientError> {
        let request = CreateAgentRequest { agent: Some(agent) };
        let response = self.gateway().create_agent(request).await;
        Ok(response.map_err(|status| self.failed(status))?.into_inner())
    }

    /// The newest version of each agent the caller may run (theirs, then the operator's).
    pub async fn list_agents(&self) -> Result<Vec<Agent>, ClientError> {
        let response = self.gateway().list_agents(ListAgentsRequest {}).await;
        Ok(response
            .map_err(|status| self.failed(status))?
            .into_inner()
            .agents)
    }

    /// Version `version` of agent `name` (0: the newest).
    pub async fn get_agent(&self, name: &str, version: u32) -> Result<Agent, ClientError> {
        let request = GetAgentRequest {
            name: name.to_owned(),
            version,
        };
        let response = self.gateway().get_agent(request).await;
        Ok(response.map_err(|status| self.failed(status))?.into_inner())
    }

    /// Every version of agent `name`, oldest first.
    pub async fn agent_versions(&self, name: &str) -> Result<Vec<Agent>, ClientError> {
        let request = ListAgentVersionsRequest {
            name: name.to_owned(),
        };
        let response = self.gateway().list_agent_versions(request).await;
        Ok(response
            .map_err(|status| self.failed(status))?
            .into_inner()
            .versions)
    }

    /// Deletes every version of agent `name`: how many there were.
    pub async fn delete_agent(&self, name: &str) -> Result<u32, ClientError> {
        let request = DeleteAgentRequest {
            name: name.to_owned(),
        };
        let response = self.gateway().delete_agent(request).await;
        Ok(response
            .map_err(|status| self.failed(status))?
            .into_inner()
            .versions)
    }
}
