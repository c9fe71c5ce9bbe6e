//! Tools inside the sandbox: one function per tool (lowerCamelCase of its id), `callTool`,
//! `parallel`, `discoverTools`, `toolSchema` and the artifact helpers.
//!
//! Every call blocks the sandbox thread on the host (`Session::block_on`), so tools look
//! synchronous to the code and `await tool()` works as well. `parallel` is the one way to
//! overlap calls: all of them run concurrently inside a single blocking host call.

use std::collections::HashSet;
use std::rc::Rc;

use rquickjs::{Ctx, Object, Value};
use serde_json::{Map, Value as Json, json};

use crate::convert::{Refused, array_length, to_js, to_sized_json};
use crate::globals::{API_NAMES, argument, define};
use crate::host::ToolFailure;
use crate::naming::{is_callable_name, lower_camel_case};
use crate::program::SandboxTool;
use crate::session::{Session, SessionSlot};
use crate::stop::{HostError, HostResult};

struct Entry {
    tool: SandboxTool,
    /// The global function, unless its name was taken (see [`ToolTable::new`]).
    function: Option<String>,
}

/// The program's tools with the names of their functions.
struct ToolTable {
    entries: Vec<Entry>,
}

impl ToolTable {
    /// Names tools in order: a tool gets `lowerCamelCase(id)` unless that is not a usable
    /// identifier, is `taken` (host API, engine globals) or went to an earlier tool. Such tools
    /// stay reachable through `callTool(id)`.
    fn new(tools: Vec<SandboxTool>, taken: impl Fn(&str) -> bool) -> ToolTable {
        let names: Vec<String> = tools
            .iter()
            .map(|tool| lower_camel_case(&tool.id))
            .collect();
        let mut given: HashSet<&str> = HashSet::with_capacity(names.len());
        let keep: Vec<bool> = names
            .iter()
            .map(|name| is_callable_name(name) && !taken(name) && given.insert(name))
            .collect();
        let entries = tools
            .into_iter()
            .zip(names.into_iter().zip(keep))
            .map(|(tool, (name, keep))| Entry {
                tool,
                function: keep.then_some(name),
            })
            .collect();
        ToolTable { entries }
    }

    /// A tool by id, or by its function name (models mix the two up); the first of an id
    /// wins. A scan rather than an index: building one would cost every run, while lookups
    /// happen only for `callTool`, `parallel` and `toolSchema`, over a few dozen tools.
    fn find(&self, id_or_function: &str) -> Option<&SandboxTool> {
        let entry = self
            .entries
            .iter()
            .find(|entry| entry.tool.id == id_or_function)
            .or_else(|| {
                self.entries
                    .iter()
                    .find(|entry| entry.function.as_deref() == Some(id_or_function))
            })?;
        Some(&entry.tool)
    }

    fn require(&self, id: &str) -> HostResult<&SandboxTool> {
        self.find(id)
            .ok_or_else(|| HostError::Error(unknown_tool(id)))
    }
}

/// The seed's words for a tool the run does not have (a `parallel()` slot's `{error}`, and
/// what `callTool` throws).
fn unknown_tool(id: &str) -> String {
    format!("Tool \"{id}\" not found")
}

/// Installs the run's tool functions and the tool-related host API. Runs after
/// `globals::install`, so a tool can never shadow a host function or an engine global.
pub(crate) fn install<'js>(
    ctx: &Ctx<'js>,
    slot: &SessionSlot,
    tools: Vec<SandboxTool>,
) -> rquickjs::Result<()> {
    let globals = ctx.globals();
    let table = Rc::new(ToolTable::new(tools, |name| {
        API_NAMES.contains(&name) || globals.contains_key(name).unwrap_or(true)
    }));

    install_tool_functions(ctx, &globals, slot, &table)?;

    let tools = Rc::clone(&table);
    define(
        ctx,
        &globals,
        "callTool",
        slot,
        move |ctx, session, args| {
            let Some(id) = argument(ctx, &args, 0)
                .as_string()
                .map(|id| id.to_string())
                .transpose()?
            else {
                return Err(HostError::Type(
                    "callTool() expects a tool id string and an input object".into(),
                ));
            };
            let id = tools.require(&id)?.id.clone();
            let input = tool_input(ctx, session, &id, argument(ctx, &args, 1))?;
            Ok(to_js(ctx, &call(session, &id, input)?)?)
        },
    )?;

    let tools = Rc::clone(&table);
    define(
        ctx,
        &globals,
        "parallel",
        slot,
        move |ctx, session, args| parallel(ctx, session, &tools, argument(ctx, &args, 0)),
    )?;

    let tools = Rc::clone(&table);
    define(ctx, &globals, "discoverTools", slot, move |ctx, _, _| {
        let list: Vec<Json> = tools
            .entries
            .iter()
            .map(|entry| json!({ "id": entry.tool.id, "name": entry.function, "description": entry.tool.description }))
            .collect();
        Ok(to_js(ctx, &Json::Array(list))?)
    })?;

    let tools = Rc::clone(&table);
    define(ctx, &globals, "toolSchema", slot, move |ctx, _, args| {
        let id = argument(ctx, &args, 0);
        let Some(id) = id.as_string().map(|id| id.to_string()).transpose()? else {
            return Err(HostError::Type(
                "toolSchema() expects a tool id string".into(),
            ));
        };
        Ok(to_js(ctx, &tools.require(&id)?.input_schema)?)
    })?;

    if table.find(ASK_TOOL).is_some() {
        define(ctx, &globals, "ask", slot, ask)?;
    }
    install_artifact_helpers(ctx, &globals, slot)
}

/// The tool behind `ask()`: the tool-host's question tool, when the run has it. The sandbox
/// knows nothing of the contract crate; a code-executor test holds this equal to
/// `agentic_proto::QUESTION_TOOL`.
pub const ASK_TOOL: &str = "human.ask";

/// `ask(question, {choices, schema}?)`: asks the user and waits (the run's clock stopped, as
/// for any call that needs a person) for the answer, which it returns.
fn ask<'js>(ctx: &Ctx<'js>, session: &Session, args: Vec<Value<'js>>) -> HostResult<Value<'js>> {
    let usage = "ask() expects a question string and optional options {choices, schema}";
    let Some(question) = argument(ctx, &args, 0)
        .as_string()
        .map(|question| question.to_string())
        .transpose()?
    else {
        return Err(HostError::Type(usage.into()));
    };
    let Json::Object(mut input) = tool_input(ctx, session, ASK_TOOL, argument(ctx, &args, 1))?
    else {
        return Err(HostError::Type(usage.into()));
    };
    input.insert("question".into(), Json::String(question));
    Ok(to_js(ctx, &call(session, ASK_TOOL, Json::Object(input))?)?)
}

/// Defines one global function per tool of `table`, under its function name, else under its
/// dotted id when that is free; it calls the tool with its one argument as input.
fn install_tool_functions<'js>(
    ctx: &Ctx<'js>,
    globals: &Object<'js>,
    slot: &SessionSlot,
    table: &ToolTable,
) -> rquickjs::Result<()> {
    for entry in &table.entries {
        // A tool whose function name went to another (or is taken) is also a global under
        // its dotted id, as the seed has it: `globalThis['artifact.store'](input)`. An id
        // that is itself taken stays reachable through `callTool` alone.
        let name = match &entry.function {
            Some(function) => function.as_str(),
            None if !API_NAMES.contains(&entry.tool.id.as_str())
                && !globals.contains_key(entry.tool.id.as_str()).unwrap_or(true) =>
            {
                entry.tool.id.as_str()
            }
            None => continue,
        };
        let id = entry.tool.id.clone();
        define(ctx, globals, name, slot, move |ctx, session, args| {
            let input = tool_input(ctx, session, &id, argument(ctx, &args, 0))?;
            Ok(to_js(ctx, &call(session, &id, input)?)?)
        })?;
    }
    Ok(())
}

/// The input of a tool call: an omitted input is `{}`. Its JSON may be at most
/// [`Limits::max_tool_input_bytes`](crate::Limits::max_tool_input_bytes) long.
fn tool_input<'js>(
    ctx: &Ctx<'js>,
    session: &Session,
    id: &str,
    input: Value<'js>,
) -> HostResult<Json> {
    let max_bytes = session.limits.max_tool_input_bytes;
    sized_tool_input(ctx, input, max_bytes)
        .map_err(|refused| input_error(id, refused, max_bytes))
        .map(|(input, _)| input)
}

/// [`tool_input`] with the length of its JSON text, refused unparsed past `max_bytes`.
fn sized_tool_input<'js>(
    ctx: &Ctx<'js>,
    input: Value<'js>,
    max_bytes: usize,
) -> Result<(Json, usize), Refused> {
    if input.is_undefined() {
        return Ok((Json::Object(Map::new()), 2));
    }
    to_sized_json(ctx, input, max_bytes)
}

fn input_error(id: &str, refused: Refused, max_bytes: usize) -> HostError {
    match refused {
        Refused::NotJson(error) => HostError::Type(format!(
            "the input of tool \"{id}\" is not JSON-serialisable: {error}"
        )),
        Refused::TooLarge { bytes } => HostError::Error(format!(
            "the input of tool \"{id}\" is too large: {bytes} bytes of JSON, the limit is {max_bytes} bytes"
        )),
    }
}

/// One tool call, counted against the limit.
fn call(session: &Session, id: &str, input: Json) -> HostResult<Json> {
    session.count_tool_calls(1)?;
    session
        .block_on(session.host.call_tool(id, input, &session.clock))?
        .map_err(|failure| HostError::Error(failure.message(id)))
}

const PARALLEL_USAGE: &str = "parallel() expects an array of {tool, input} objects";

/// `parallel([{tool, input}, …])`: results in order; a failed or unknown slot is `{error}`.
fn parallel<'js>(
    ctx: &Ctx<'js>,
    session: &Session,
    tools: &ToolTable,
    calls: Value<'js>,
) -> HostResult<Value<'js>> {
    let usage = || HostError::Type(PARALLEL_USAGE.into());
    let calls = calls
        .as_object()
        .filter(|_| calls.is_array())
        .ok_or_else(usage)?;
    // The length is the code's to choose (`a.length = 2 ** 31 - 1`): bounded before anything
    // is allocated for it. Every slot could be a tool call.
    let length = array_length(calls)?.ok_or_else(usage)?;
    if length > f64::from(session.tool_calls_left()) {
        return Err(HostError::Stop(session.tool_call_stop()));
    }
    // Exact: at most the tool calls left, a `u32`.
    let length = length as u32;
    // Per slot: the tool id, or why the slot fails without reaching the host.
    let mut slots: Vec<Result<String, String>> = Vec::with_capacity(length as usize);
    let mut known: Vec<(String, Json)> = Vec::with_capacity(length as usize);
    // All inputs are held at once, outside the engine's memory limit: they answer to it here.
    let mut input_bytes = 0_usize;
    for index in 0..length {
        // Reading a slot runs the code's getters, which may swallow the engine's interrupt.
        session.check_running()?;
        let call: Value = calls.get(index)?;
        let call = call
            .as_object()
            .filter(|_| !call.is_array())
            .ok_or_else(usage)?;
        let tool: Value = call.get("tool")?;
        let tool = tool.as_string().ok_or_else(usage)?.to_string()?;
        slots.push(match tools.find(&tool) {
            Some(found) => {
                let max_bytes = session.limits.max_tool_input_bytes;
                let memory_left = session.limits.memory_bytes.saturating_sub(input_bytes);
                let sized = sized_tool_input(ctx, call.get("input")?, max_bytes.min(memory_left));
                let (input, bytes) = match sized {
                    Ok(sized) => sized,
                    Err(Refused::TooLarge { bytes }) if bytes <= max_bytes => {
                        return Err(HostError::Stop(
                            session.memory_stop_by("the inputs of parallel()"),
                        ));
                    }
                    Err(refused) => return Err(input_error(&found.id, refused, max_bytes)),
                };
                input_bytes = input_bytes.saturating_add(bytes);
                session.check_parallel_inputs(input_bytes)?;
                known.push((found.id.clone(), input));
                Ok(found.id.clone())
            }
            None => Err(unknown_tool(&tool)),
        });
    }
    session.count_tool_calls(u32::try_from(known.len()).unwrap_or(u32::MAX))?;

    let mut answers = session
        .block_on(session.host.call_tools(known, &session.clock))?
        .into_iter();
    let results = slots
        .into_iter()
        .map(|slot| {
            let id = slot?;
            let answer = answers
                .next()
                .unwrap_or_else(|| Err(ToolFailure::Failed("the host gave no answer".into())));
            answer.map_err(|failure| failure.message(&id))
        })
        .map(|result| result.unwrap_or_else(|error| json!({ "error": error })))
        .collect();
    Ok(to_js(ctx, &Json::Array(results))?)
}

/// `storeArtifact`, `getArtifact`, `deleteArtifact`, `listArtifacts`, `readFile` and
/// `writeFile`: shorthands for the `artifact.*` tools that unwrap the one field the code wants
/// (`readFile` answers the whole file). A named artifact is a file, so `writeFile` becomes
/// a `file` output of the prompt.
fn install_artifact_helpers<'js>(
    ctx: &Ctx<'js>,
    globals: &Object<'js>,
    slot: &SessionSlot,
) -> rquickjs::Result<()> {
    define(ctx, globals, "storeArtifact", slot, |ctx, session, args| {
        let mut input = Map::new();
        input.insert(
            "data".into(),
            tool_input(ctx, session, "artifact.store", argument(ctx, &args, 0))?,
        );
        let description = argument(ctx, &args, 1);
        if !description.is_undefined() {
            input.insert(
                "description".into(),
                tool_input(ctx, session, "artifact.store", description)?,
            );
        }
        field(
            ctx,
            call(session, "artifact.store", Json::Object(input))?,
            "id",
        )
    })?;
    define(ctx, globals, "getArtifact", slot, |ctx, session, args| {
        let id = tool_input(ctx, session, "artifact.get", argument(ctx, &args, 0))?;
        field(
            ctx,
            call(session, "artifact.get", json!({ "id": id }))?,
            "data",
        )
    })?;
    define(
        ctx,
        globals,
        "deleteArtifact",
        slot,
        |ctx, session, args| {
            let id = tool_input(ctx, session, "artifact.delete", argument(ctx, &args, 0))?;
            field(
                ctx,
                call(session, "artifact.delete", json!({ "id": id }))?,
                "deleted",
            )
        },
    )?;
    install_read_file(ctx, globals, slot)?;
    define(ctx, globals, "listArtifacts", slot, |ctx, session, _| {
        field(ctx, call(session, "artifact.list", json!({}))?, "artifacts")
    })?;
    define(ctx, globals, "writeFile", slot, |ctx, session, args| {
        let mut input = Map::new();
        input.insert(
            "filename".into(),
            tool_input(ctx, session, "artifact.store", argument(ctx, &args, 0))?,
        );
        input.insert(
            "data".into(),
            tool_input(ctx, session, "artifact.store", argument(ctx, &args, 1))?,
        );
        let mime_type = argument(ctx, &args, 2);
        if !mime_type.is_undefined() {
            input.insert(
                "mime_type".into(),
                tool_input(ctx, session, "artifact.store", mime_type)?,
            );
        }
        input.insert("description".into(), json!("written by code"));
        field(
            ctx,
            call(session, "artifact.store", Json::Object(input))?,
            "id",
        )
    })
}

/// `readFile(id)`: a file (a user's attachment, any artifact) whole: its name, type, size and
/// `data`, as text when it is UTF-8, else as base64 (`encoding` says which).
fn install_read_file<'js>(
    ctx: &Ctx<'js>,
    globals: &Object<'js>,
    slot: &SessionSlot,
) -> rquickjs::Result<()> {
    define(ctx, globals, "readFile", slot, |ctx, session, args| {
        let id = tool_input(ctx, session, "artifact.get", argument(ctx, &args, 0))?;
        let input = json!({ "id": id, "encoding": "auto" });
        Ok(to_js(ctx, &call(session, "artifact.get", input)?)?)
    })
}

fn field<'js>(ctx: &Ctx<'js>, output: Json, name: &str) -> HostResult<Value<'js>> {
    match output.get(name) {
        Some(value) => Ok(to_js(ctx, value)?),
        None => Ok(Value::new_undefined(ctx.clone())),
    }
}
