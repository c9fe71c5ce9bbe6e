//! The start every mode's run shares: who it runs for (with its spending), its recording or
//! replay, its tool-host client on that tape, and what the tool-host prepared for it.

use std::sync::Arc;

use crate::tape::Tape;
use crate::timeline::RunRequest;
use crate::tool_host::{Prepared, RunScope, ToolHost};
use crate::{EventSink, RunError};

pub struct RunStart {
    /// Who the run is for, counting what its calls spend.
    pub scope: Arc<RunScope>,
    /// The run's recording or replay (see [`crate::tape`]).
    pub tape: Option<Arc<Tape>>,
    /// The executor's tool-host client, recording or replaying on `tape`.
    pub tool_host: ToolHost,
    /// The run's tools, context and modules.
    pub prepared: Prepared,
}

impl RunStart {
    /// Prepares `request`'s run on `tool_host`; a tool-host that cannot prepare it fails
    /// the run as unavailable.
    pub async fn prepare(
        request: &RunRequest,
        events: &EventSink,
        tool_host: &ToolHost,
    ) -> Result<RunStart, RunError> {
        let scope = Arc::new(RunScope::of(request).spending(events.spend()));
        let tape = Tape::of(request, events);
        let tool_host = tool_host.taped(tape.as_ref());
        let mut prepared = tool_host
            .prepare(&scope)
            .await
            .map_err(|error| RunError::ToolHostUnavailable(error.to_string()))?;
        // A replay starts no child prompts: its recording has no answer of theirs.
        if request.replay.is_none() {
            crate::sub_agents::offer(&mut prepared, &request.sub_agents);
        }
        Ok(RunStart {
            scope,
            tape,
            tool_host,
            prepared,
        })
    }
}
