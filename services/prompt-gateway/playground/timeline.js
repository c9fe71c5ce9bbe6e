// One prompt on the page: its input and the files sent with it, its live timeline (text
// streaming in, code blocks, tool calls, files, approvals), its state and, at the end, its
// usage. The view is a function of a small model that events update in order; the model is
// kept in session storage as it changes, so a reload resumes after the last event it saw,
// with nothing lost or repeated.

import { el, text, button } from "./dom.js";
import { renderMarkdown } from "./markdown.js";
import { applySubPrompt, renderSubPrompt } from "./subagents.js";

// The page's other modules take these from here.
export { el, text, button };

const FINAL = new Set(["PROMPT_STATE_COMPLETED", "PROMPT_STATE_FAILED", "PROMPT_STATE_CANCELLED"]);
const STATE_NAMES = {
  PROMPT_STATE_RUNNING: "running",
  PROMPT_STATE_COMPLETED: "completed",
  PROMPT_STATE_WAITING_FOR_APPROVAL: "waiting",
  PROMPT_STATE_FAILED: "failed",
  PROMPT_STATE_CANCELLED: "cancelled",
  PROMPT_STATE_QUEUED: "queued",
};
const CACHE_PREFIX = "agentic.prompt.";
const CODE_TOOL = "code.execute";
// Log lines of the code's `log()` a view keeps (the newest).
const MAX_LOG_LINES = 200;

export class PromptView {
  // `prompt`: the prompt as the API returns it (a summary from ListPrompts is enough).
  constructor(api, prompt, { onError }) {
    this.api = api;
    this.onError = onError;
    // A cache is only of a prompt that was still running: a finished one is read afresh.
    const cached = FINAL.has(prompt.state) ? null : restore(prompt.id);
    if (!cached) forget(prompt.id);
    this.model = cached || {
      prompt,
      outputs: prompt.output || [],
      draft: "",
      lastSeq: 0,
      events: 0,
      notice: "",
    };
    // Where this page took the prompt up from a previous load's record (0: from the start).
    this.resumedFrom = cached ? cached.lastSeq : 0;
    this.element = el("article", "prompt");
    this.element.dataset.promptId = prompt.id;
    this.abort = null;
    this.saveTimer = null;
    // Tool calls the person opened, kept open across renders.
    this.opened = new Set();
    this.frame = 0;
    this.render();
  }

  get id() {
    return this.model.prompt.id;
  }

  get state() {
    return this.model.prompt.state;
  }

  get finished() {
    return FINAL.has(this.state);
  }

  // Shows a finished prompt from its stored timeline (one GET, no event replay).
  async load() {
    const prompt = await this.api.get(`/v1/prompts/${encodeURIComponent(this.id)}`);
    this.model.prompt = prompt;
    this.model.outputs = prompt.output || [];
    this.model.draft = "";
    this.render();
  }

  // Reads the whole input of a prompt shown from a listing's summary.
  async loadInput() {
    const prompt = await this.api.get(`/v1/prompts/${encodeURIComponent(this.id)}`);
    this.model.prompt = { ...this.model.prompt, input: prompt.input, attachments: prompt.attachments };
    this.render();
  }

  // Follows the prompt's events from the last one seen until its stream ends; a dropped
  // connection is resumed (with growing pauses) as long as the prompt is not finished.
  async follow() {
    if (this.abort) return;
    this.abort = new AbortController();
    let pause = 500;
    try {
      for (;;) {
        let progressed = false;
        try {
          await this.api.follow(
            this.id,
            this.model.lastSeq,
            (event) => {
              progressed = true;
              this.apply(event);
            },
            this.abort.signal,
          );
        } catch (error) {
          if (this.abort.signal.aborted) return;
          if (error.status && error.status !== 200 && error.status < 500) throw error;
        }
        // A prompt that waits for its sub-agents only (`delegating`) goes on: follow it.
        const waits = this.state === "PROMPT_STATE_WAITING_FOR_APPROVAL" && !this.model.delegating;
        if (this.finished || waits) return;
        if (progressed) pause = 500;
        await new Promise((resolve) => setTimeout(resolve, pause));
        pause = Math.min(pause * 2, 10000);
      }
    } catch (error) {
      this.onError(error);
    } finally {
      this.abort = null;
      this.saveNow();
    }
  }

  stop() {
    if (this.abort) this.abort.abort();
  }

  // One event, in sequence order: an event at or before the last one seen is not applied
  // again (and counted, so a test can tell none came twice).
  apply(event) {
    const sequence = Number(event.sequence);
    if (sequence <= this.model.lastSeq) {
      this.model.duplicates = (this.model.duplicates || 0) + 1;
      return;
    }
    const model = this.model;
    model.lastSeq = sequence;
    model.events += 1;
    // Its last pause waits for sub-agents only (`delegating`), not for a person (`waiting`).
    if (event.delegating || event.waiting) model.delegating = Boolean(event.delegating);
    if (event.subPrompt) {
      applySubPrompt(model, event.subPrompt);
    } else if (event.created || event.started) {
      // `started`: a queued prompt left its conversation's queue and runs.
      const prompt = (event.created || event.started).prompt;
      model.prompt = { ...model.prompt, ...prompt, output: undefined };
    } else if (event.output) {
      model.outputs[event.output.index || 0] = event.output.output;
      if (event.output.output && event.output.output.text) model.draft = "";
    } else if (event.outputUpdated) {
      model.outputs[event.outputUpdated.index || 0] = event.outputUpdated.output;
    } else if (event.stream) {
      model.draft += event.stream.text || "";
    } else if (event.log) {
      // The code's log() lines: shown beside the answer, never in it (the newest 200).
      model.logs = [...(model.logs || []), event.log.text || ""].slice(-MAX_LOG_LINES);
    } else if (event.guardrail) {
      // A guardrail redacted the input or a text output, or blocked an output.
      model.guardrails = [...(model.guardrails || []), event.guardrail].slice(-MAX_LOG_LINES);
    } else if (event.approvalRequested) {
      const { index, toolCallId } = event.approvalRequested;
      const output = model.outputs[index || 0];
      if (output && output.tool && output.tool.id === toolCallId && !output.tool.approval) {
        output.tool.approval = { state: "APPROVAL_STATE_PENDING" };
      }
    } else {
      const end = event.completed || event.error || event.cancelled || event.waiting || event.delegating;
      if (end && end.prompt) {
        model.prompt = { ...end.prompt, output: undefined };
        model.outputs = end.prompt.output || model.outputs;
        model.draft = "";
      }
      if (event.error) model.notice = event.error.message || "";
      if (event.cancelled) model.notice = event.cancelled.reason || "";
    }
    this.save();
    this.scheduleRender();
  }

  save() {
    if (this.saveTimer) return;
    this.saveTimer = setTimeout(() => this.saveNow(), 200);
  }

  // The model in session storage while the prompt can still change, so a reload resumes it;
  // a finished prompt is read from the API instead.
  saveNow() {
    clearTimeout(this.saveTimer);
    this.saveTimer = null;
    try {
      if (this.finished) sessionStorage.removeItem(CACHE_PREFIX + this.id);
      else sessionStorage.setItem(CACHE_PREFIX + this.id, JSON.stringify(this.model));
    } catch {
      // Full storage: a reload replays the stream from the start instead.
      sessionStorage.removeItem(CACHE_PREFIX + this.id);
    }
  }

  scheduleRender() {
    if (this.frame) return;
    this.frame = requestAnimationFrame(() => {
      this.frame = 0;
      this.render();
    });
  }

  // Cancel, approve, reject or respond, then follow what the prompt does next.
  async act(what, path, body) {
    let prompt;
    try {
      prompt = await this.api.post(path, body);
    } catch (error) {
      this.onError(error, what);
      return;
    }
    // A decided approval resumes the run: follow it (its events tell the rest).
    if (!this.abort && prompt.state === "PROMPT_STATE_RUNNING") {
      this.model.prompt = { ...this.model.prompt, state: prompt.state };
      this.render();
    }
    this.follow();
  }

  render() {
    const { prompt, outputs, draft } = this.model;
    const state = STATE_NAMES[prompt.state] || "running";
    const root = this.element;
    root.dataset.state = state;
    root.dataset.lastSequence = String(this.model.lastSeq);
    root.dataset.events = String(this.model.events);
    root.dataset.duplicates = String(this.model.duplicates || 0);
    root.dataset.resumedFrom = String(this.resumedFrom);
    root.replaceChildren();

    const header = el("header", "prompt-header");
    const input = el("div", "prompt-input");
    input.textContent = prompt.input || "";
    const meta = el("div", "prompt-meta");
    const badge = el("span", `badge state-${state}`);
    badge.textContent = state;
    meta.append(badge, text(` ${prompt.mode || ""} · ${tierName(prompt.model)}`));
    if (!this.finished) {
      const cancel = button("Cancel", "cancel", () =>
        this.act("cancel", `/v1/prompts/${encodeURIComponent(this.id)}:cancel`, {
          reason: "cancelled in the playground",
        }),
      );
      meta.append(cancel);
    }
    header.append(input, meta);
    root.append(header);
    if (prompt.attachments && prompt.attachments.length) root.append(this.renderAttachments(prompt.attachments));

    const timeline = el("div", "timeline");
    outputs.forEach((output, index) => {
      if (output) timeline.append(this.renderOutput(output, index));
    });
    if (draft) {
      const streaming = el("div", "text markdown streaming");
      streaming.append(renderMarkdown(draft));
      timeline.append(streaming);
    }
    root.append(timeline);
    if (this.model.logs && this.model.logs.length) {
      const logs = el("details", "logs");
      logs.open = true;
      const summary = el("summary");
      summary.textContent = `log (${this.model.logs.length} lines)`;
      const lines = el("pre", "log-lines");
      lines.textContent = this.model.logs.join("\n");
      logs.append(summary, lines);
      root.append(logs);
    }

    for (const tripped of this.model.guardrails || []) {
      const notice = el("div", "notice guardrail");
      notice.textContent = `guardrail ${tripped.guard || ""}: ${tripped.action || ""} the ${tripped.stage || ""} (${tripped.detail || ""})`;
      root.append(notice);
    }

    const footer = el("footer", "prompt-footer");
    if (this.model.notice || prompt.error) {
      const notice = el("div", state === "failed" ? "notice error" : "notice");
      notice.textContent = state === "failed" ? prompt.error || this.model.notice : this.model.notice;
      footer.append(notice);
    }
    if (this.finished) {
      const usage = prompt.usage || {};
      const rounds = usage.rounds || 0;
      const calls = outputs.filter((output) => output && output.tool && output.tool.function !== CODE_TOOL).length;
      const summary = el("div", "usage");
      summary.textContent =
        `${usage.inputTokens || 0} tokens in, ${usage.outputTokens || 0} out · ` +
        `${rounds} round${rounds === 1 ? "" : "s"} · ${calls} tool call${calls === 1 ? "" : "s"}`;
      footer.append(summary);
    }
    root.append(footer);
  }

  renderOutput(output, index) {
    if (output.text) {
      const block = el("div", "text markdown");
      block.dataset.kind = "text";
      block.append(renderMarkdown(output.text.content || ""));
      return block;
    }
    if (output.file) return this.renderFile(output.file);
    if (output.tool) {
      return output.tool.function === CODE_TOOL ? renderCode(output.tool) : this.renderTool(output.tool, index);
    }
    return el("div", "unknown");
  }

  renderTool(tool, index) {
    // A call made by code a tool ran (interpreter.run-code) sits under that call.
    const details = el("details", tool.parentId ? "tool nested" : "tool");
    details.dataset.kind = "tool";
    details.dataset.function = tool.function || "";
    if (tool.parentId) details.dataset.parent = tool.parentId;
    const status = toolStatus(tool);
    details.dataset.status = status;
    const approval = tool.approval || {};
    const pending = approval.state === "APPROVAL_STATE_PENDING";
    details.open = pending || this.opened.has(tool.id);
    details.addEventListener("toggle", () => {
      if (details.open) this.opened.add(tool.id);
      else this.opened.delete(tool.id);
    });
    const summary = el("summary");
    const name = el("span", "tool-name");
    name.textContent = tool.function || "tool";
    const badge = el("span", `badge tool-${status.replace(/ /g, "-")}`);
    badge.textContent = status;
    summary.append(name, text(" "), badge);
    details.append(summary);
    details.append(labelled("input", json(tool.input)));
    const result = tool.result || {};
    if (result.success) details.append(labelled("output", json(result.success.output)));
    if (result.error) details.append(labelled("error", plain(result.error.error), "error"));
    if (result.pending && result.pending.progress) {
      const progress = result.pending.progress;
      const line = `${progress.progress || 0}${progress.total ? `/${progress.total}` : ""} ${progress.message || ""}`;
      details.append(labelled("progress", plain(line)));
    }
    if (approval.state === "APPROVAL_STATE_REJECTED") {
      details.append(labelled("rejected", plain(approval.reason || "rejected")));
    }
    if (approval.state === "APPROVAL_STATE_EXPIRED") {
      details.append(labelled("expired", plain(approval.reason || "nobody decided")));
    }
    if (approval.originalInput !== undefined) {
      details.append(labelled(`asked for (changed by ${approval.decidedBy || "a person"})`, json(approval.originalInput), "original"));
    }
    if (approval.state === "APPROVAL_STATE_RESPONDED") {
      details.append(labelled("answered by", plain(approval.decidedBy || "a person"), "responded"));
    }
    const run = (this.model.subPrompts || {})[tool.id];
    if (run) {
      const base = (prompt, call) => `/v1/prompts/${encodeURIComponent(prompt)}/tool-calls/${encodeURIComponent(call)}`;
      details.append(renderSubPrompt(run, (prompt, call, what) => this.act(what, `${base(prompt, call)}:${what}`, {})));
      details.open = true;
    }
    // A sub-agent's call is answered by its run, never by a person.
    const byAgent = (tool.function || "").startsWith("agent.");
    if (pending && !byAgent && this.state === "PROMPT_STATE_WAITING_FOR_APPROVAL") {
      details.append(tool.function === "human.ask" ? this.questionForm(tool) : this.decisionControls(tool));
    }
    details.dataset.index = String(index);
    return details;
  }

  // A question the agent asks (human.ask): its choices as buttons, or a box for the answer
  // (JSON, else text), and a way to decline.
  questionForm(tool) {
    const form = el("div", "question");
    const input = tool.input || {};
    const asked = el("div", "question-text");
    asked.textContent = input.question || "";
    form.append(asked);
    const path = `/v1/prompts/${encodeURIComponent(this.id)}/questions/${encodeURIComponent(tool.id)}:answer`;
    const answer = (value) => this.act("answer", path, { answer: value });
    if (Array.isArray(input.choices)) {
      for (const choice of input.choices) form.append(button(String(choice), "choice", () => answer(choice)));
    } else {
      const box = el("input", "answer-text");
      box.placeholder = input.schema ? "your answer (JSON)" : "your answer";
      const send = () => {
        let value;
        try {
          value = JSON.parse(box.value);
        } catch {
          value = box.value;
        }
        return answer(input.schema ? value : box.value);
      };
      form.append(box, button("Answer", "answer-question", send));
    }
    const base = `/v1/prompts/${encodeURIComponent(this.id)}/tool-calls/${encodeURIComponent(tool.id)}`;
    form.append(button("Decline", "reject", () => this.act("reject", `${base}:reject`, { reason: "declined to answer" })));
    return form;
  }

  // Approve (as asked, or with the input edited here), reject with a reason, or answer in
  // the tool's place.
  decisionControls(tool) {
    const decide = el("div", "approval");
    const base = `/v1/prompts/${encodeURIComponent(this.id)}/tool-calls/${encodeURIComponent(tool.id)}`;
    const asked = JSON.stringify(tool.input === undefined ? {} : tool.input, null, 2);
    const edit = el("textarea", "edit-input");
    edit.value = asked;
    edit.rows = Math.min(8, asked.split("\n").length);
    edit.title = "the call's input: edit it to run the call with yours";
    const reason = el("input", "reason");
    reason.placeholder = "reason (for a rejection)";
    reason.maxLength = 1000;
    const answer = el("input", "answer");
    answer.placeholder = "a result in the tool's place (JSON or text)";
    const approve = () => {
      if (edit.value.trim() === asked.trim()) return this.act("approve", `${base}:approve`, {});
      let editedInput;
      try {
        editedInput = JSON.parse(edit.value);
      } catch (error) {
        return this.onError(new Error(`the edited input is not JSON: ${error.message}`), "approve");
      }
      return this.act("approve", `${base}:approve`, { editedInput });
    };
    const respond = () => {
      let output;
      try {
        output = JSON.parse(answer.value);
      } catch {
        output = answer.value;
      }
      return this.act("respond", `${base}:respond`, { output });
    };
    decide.append(
      text("Needs approval: "),
      edit,
      button("Approve", "approve", approve),
      reason,
      button("Reject", "reject", () => this.act("reject", `${base}:reject`, { reason: reason.value })),
      answer,
      button("Respond", "respond", respond),
    );
    return decide;
  }

  renderFile(file) {
    const row = el("div", "file");
    row.dataset.kind = "file";
    const link = this.downloadLink(file, "download");
    const source = file.source === "FILE_SOURCE_HOSTED" ? ", made in the provider's container" : "";
    row.dataset.source = file.source === "FILE_SOURCE_HOSTED" ? "hosted" : "local";
    row.append(text("📎 "), link, text(` ${file.mimeType || ""}, ${formatSize(Number(file.size || 0))}${source}`));
    return row;
  }

  // The files the prompt was sent with, as chips that download them.
  renderAttachments(files) {
    const row = el("div", "prompt-attachments");
    for (const file of files) {
      const link = this.downloadLink(file, "attachment");
      link.title = `${file.mimeType || "file"}, ${formatSize(Number(file.size || 0))}`;
      row.append(link);
    }
    return row;
  }

  // A link named after `file` that saves its bytes: the content route needs the caller's
  // headers, so a click fetches them and saves the Blob (the href only shows where they are).
  downloadLink(file, className) {
    const link = el("a", className);
    link.href = `/v1/files/${encodeURIComponent(file.id)}/content`;
    link.dataset.fileId = file.id;
    link.textContent = file.filename || "file";
    link.addEventListener("click", async (event) => {
      event.preventDefault();
      try {
        const blob = await this.api.fileBlob(file.id);
        const url = URL.createObjectURL(blob);
        const save = document.createElement("a");
        save.href = url;
        save.download = file.filename || "file";
        document.body.append(save);
        save.click();
        save.remove();
        setTimeout(() => URL.revokeObjectURL(url), 60000);
      } catch (error) {
        this.onError(error, "download");
      }
    });
    return link;
  }
}

// A code round: the code with line numbers, then its result, or its error with the line it
// names marked.
function renderCode(tool) {
  const block = el("div", "code-run");
  block.dataset.kind = "code";
  const status = toolStatus(tool);
  block.dataset.status = status;
  const code = (tool.input && tool.input.code) || "";
  const result = tool.result || {};
  const errorText = result.error ? result.error.error || "" : "";
  const lineMatch = /at line (\d+)/.exec(errorText);
  const errorLine = lineMatch ? Number(lineMatch[1]) : 0;
  const header = el("div", "code-run-header");
  const badge = el("span", `badge tool-${status}`);
  badge.textContent = status;
  header.append(text("code"), badge);
  block.append(header);
  const pre = el("pre", "code");
  code.split("\n").forEach((line, number) => {
    const row = el("span", number + 1 === errorLine ? "line error-line" : "line");
    row.dataset.line = String(number + 1);
    row.textContent = line;
    pre.append(row, text("\n"));
  });
  block.append(pre);
  if (result.success) block.append(labelled("result", json(result.success.output)));
  else if (result.error) block.append(labelled("error", plain(errorText), "error"));
  else {
    const running = el("div", "running");
    running.textContent = "running…";
    block.append(running);
  }
  return block;
}

function toolStatus(tool) {
  const result = tool.result || {};
  const approval = (tool.approval || {}).state;
  if (approval === "APPROVAL_STATE_PENDING") return "awaiting approval";
  if (approval === "APPROVAL_STATE_REJECTED") return "rejected";
  if (approval === "APPROVAL_STATE_EXPIRED") return "expired";
  if (approval === "APPROVAL_STATE_RESPONDED") return "answered";
  if (result.success) return "done";
  if (result.error) return "error";
  return "running";
}

function forget(id) {
  try {
    sessionStorage.removeItem(CACHE_PREFIX + id);
  } catch {}
}

function restore(id) {
  try {
    const cached = sessionStorage.getItem(CACHE_PREFIX + id);
    return cached ? JSON.parse(cached) : null;
  } catch {
    return null;
  }
}

function tierName(tier) {
  return tier === "MODEL_TIER_HIGH" ? "high" : "normal";
}

export function formatSize(bytes) {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KiB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
}

function labelled(label, content, className = "") {
  const section = el("div", `field ${className}`.trim());
  const name = el("div", "field-label");
  name.textContent = label;
  section.append(name, content);
  return section;
}

function json(value) {
  const pre = el("pre", "json");
  pre.textContent = value === undefined ? "" : JSON.stringify(value, null, 2);
  return pre;
}

function plain(value) {
  const pre = el("pre", "plain");
  pre.textContent = value;
  return pre;
}
