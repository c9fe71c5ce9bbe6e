//! `Prepare`'s answer as a run uses it.

use agentic_proto::json;
use agentic_proto::v1::PrepareResponse;

use super::{ContextItem, Prepared, ToolSpec};

impl Prepared {
    /// What `Prepare` answered, as a run uses it: only the tools `scope` allows (a recording,
    /// or an older tool-host, may list more; none is offered past the scope).
    pub(super) fn of(
        response: PrepareResponse,
        scope: Option<&agentic_proto::v1::ToolScope>,
    ) -> Prepared {
        let tools = response
            .tools
            .into_iter()
            .filter(|tool| agentic_proto::scope::allows(scope, &tool.id))
            .map(|tool| ToolSpec {
                input_schema: json::from_proto_opt(tool.input_schema.as_ref()),
                id: tool.id,
                description: tool.description,
                requires_approval: tool.requires_approval,
            })
            .collect();
        let context = response
            .context
            .into_iter()
            .map(|item| ContextItem {
                name: item.name,
                content: item.content,
            })
            .collect();
        let modules = response
            .modules
            .into_iter()
            .map(|module| (module.name, module.source))
            .collect();
        Prepared {
            tools,
            context,
            modules,
        }
    }
}
