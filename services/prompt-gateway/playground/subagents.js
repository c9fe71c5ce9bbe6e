// Sub-agents' runs, shown under the parent's call that started each (`agent.<name>`): the
// parent's stream carries each child's events as `subPrompt` events, which this keeps per
// call in the view's model: the child's prompt id, its timeline, its state, and the calls
// it waits on, with buttons that decide them on the child's own prompt.

import { el, text, button } from "./dom.js";

// Entries of one child's timeline a view keeps.
const MAX_NESTED = 200;

// Applies one `subPrompt` event to `model.subPrompts`, by the parent's call.
export function applySubPrompt(model, sub) {
  const runs = (model.subPrompts = model.subPrompts || {});
  const inner = sub.event || {};
  const run = (runs[sub.toolCallId] = runs[sub.toolCallId] || {
    agent: sub.agent || "",
    promptId: inner.promptId || "",
    outputs: [],
    state: "running",
    error: "",
  });
  const put = (change) => {
    const index = change.index || 0;
    if (index < MAX_NESTED) run.outputs[index] = change.output;
  };
  if (inner.output) put(inner.output);
  else if (inner.outputUpdated) put(inner.outputUpdated);
  else if (inner.approvalRequested) {
    const output = run.outputs[inner.approvalRequested.index || 0];
    if (output && output.tool && !output.tool.approval) output.tool.approval = { state: "APPROVAL_STATE_PENDING" };
  } else if (inner.waiting) run.state = "waiting";
  else if (inner.delegating || inner.started) run.state = "running";
  else if (inner.completed) run.state = "completed";
  else if (inner.error) [run.state, run.error] = ["failed", inner.error.message || ""];
  else if (inner.cancelled) [run.state, run.error] = ["cancelled", inner.cancelled.reason || ""];
  if (inner.outputUpdated && run.state === "waiting") run.state = "running";
}

// The child's run under its call; `decide(promptId, callId, "approve" | "reject")` decides
// one of its calls.
export function renderSubPrompt(run, decide) {
  const box = el("div", "sub-agent");
  box.dataset.kind = "sub-agent";
  box.dataset.agent = run.agent;
  box.dataset.prompt = run.promptId;
  box.dataset.state = run.state;
  const title = el("div", "sub-agent-title");
  title.textContent = `agent ${run.agent} · ${run.state}`;
  box.append(title);
  for (const output of run.outputs) {
    if (!output) continue;
    if (output.text) {
      const answer = el("div", "text");
      answer.dataset.kind = "sub-text";
      answer.textContent = output.text.content || "";
      box.append(answer);
    } else if (output.tool) {
      box.append(subTool(run, output.tool, decide));
    }
  }
  if (run.error) {
    const notice = el("div", "notice");
    notice.textContent = run.error;
    box.append(notice);
  }
  return box;
}

function subTool(run, tool, decide) {
  const line = el("div", "sub-tool");
  line.dataset.function = tool.function || "";
  const approval = tool.approval || {};
  const result = tool.result || {};
  const status = approval.state === "APPROVAL_STATE_PENDING"
    ? "needs approval"
    : result.success ? "done" : result.error ? "error" : "running";
  line.dataset.status = status;
  line.append(text(`${tool.function || "tool"} · ${status}`));
  if (status === "needs approval" && run.state === "waiting") {
    line.append(
      button("Approve", "approve", () => decide(run.promptId, tool.id, "approve")),
      button("Reject", "reject", () => decide(run.promptId, tool.id, "reject")),
    );
  }
  return line;
}
