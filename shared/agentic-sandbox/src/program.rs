//! What a run is given: the code, the tools it may call, plugin modules, `input`, and what
//! earlier rounds of its prompt left behind.

use serde_json::{Map, Value as Json};

use crate::entropy::Entropy;
use crate::limits::Spent;

/// A tool as the sandbox sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct SandboxTool {
    /// `namespace.tool-name`; the code calls it as `namespaceToolName(…)` or by id.
    pub id: String,
    /// What `discoverTools()` tells the code about the tool.
    pub description: String,
    /// What `toolSchema(id)` answers.
    pub input_schema: Json,
}

/// One round's code and everything it may use.
#[derive(Debug, Clone, PartialEq)]
pub struct Program {
    /// JavaScript, run as a script whose last expression is the round's result.
    pub code: String,
    /// The tools the code may call, each a global function unless its name is taken.
    pub tools: Vec<SandboxTool>,
    /// (module name, ES module source) contributed by plugins; `import … from "<name>"`.
    pub modules: Vec<(String, String)>,
    /// When set, the code sees it as the global `input` (used by `CodeRunner.RunCode`).
    pub input: Option<Json>,
    /// `store()`/`recall()` values from earlier rounds of the prompt.
    pub memory: Map<String, Json>,
    /// What earlier rounds of the prompt spent of [`Limits::prompt`](crate::Limits::prompt).
    pub spent: Spent,
    /// Where the code's clocks and `Math.random()` read from, recorded as they are read
    /// (`Entropy::default()`: the real clocks and a fresh seed; a replay: an earlier record).
    pub entropy: Entropy,
}
