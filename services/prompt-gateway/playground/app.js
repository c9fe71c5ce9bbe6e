// The playground: a sidebar of the caller's conversations, the open conversation's prompts
// with their live timelines, and a box to send the next prompt in a mode and model tier,
// with files attached (the Attach button, or dropped on the box), and the caller's skills
// (a skill folder added from a folder or an archive).
// The open conversation is in the URL (`#/c/<id>`), so a reload reopens it and resumes its
// running prompts where they were.

import { Api, ApiError } from "./api.js";
import { PromptView, el, button } from "./timeline.js";
import { Attachments, acceptDrops } from "./attachments.js";
import { SkillsPanel } from "./skills.js";

const api = new Api();
const $ = (id) => document.getElementById(id);

const page = {
  conversationId: null,
  conversations: [],
  views: [],
  sending: false,
  agents: new Map(),
};

// The files the next prompt goes with.
const attachments = new Attachments(api, {
  list: $("attachments"),
  conversation: () => page.conversationId,
  onChange: updateSend,
  onError: showError,
});

// The caller's skills, in the sidebar.
const skills = new SkillsPanel(api, { list: $("skills"), onError: showError });

// Send waits for a prompt being sent and for every upload.
function updateSend() {
  $("send").disabled = page.sending || attachments.busy;
}

// A browser opens at most 6 HTTP/1.1 connections per origin, and each event stream holds
// one. The unfinished prompts of an opened conversation (a queue behind a prompt waiting for
// approval, say) are followed at most MAX_FOLLOWING at a time, in order, so the page always
// has connections left for what the user does (Approve, Send, Cancel).
const MAX_FOLLOWING = 2;
const following = { active: 0, waiting: [] };

function followInTurn(view) {
  following.waiting.push(view);
  nextFollow();
}

function nextFollow() {
  while (following.active < MAX_FOLLOWING && following.waiting.length) {
    const view = following.waiting.shift();
    following.active += 1;
    view.follow().finally(() => {
      following.active -= 1;
      nextFollow();
    });
  }
}

function currentRoute() {
  const match = /^#\/c\/([^/]+)$/.exec(location.hash);
  return match ? decodeURIComponent(match[1]) : null;
}

function showError(error, what) {
  const banner = $("error");
  let message = error instanceof ApiError ? `${error.code}: ${error.message}` : String(error.message || error);
  if (what) message = `${what}: ${message}`;
  if (error instanceof ApiError && error.code === "UNAUTHENTICATED") {
    message += " (set your token or user under Connection)";
    $("settings").open = true;
  }
  banner.textContent = message;
  banner.hidden = false;
}

function clearError() {
  $("error").hidden = true;
  $("error").textContent = "";
}

async function loadModes() {
  const answer = await api.get("/v1/modes");
  const select = $("mode");
  const chosen = select.value;
  select.replaceChildren();
  for (const mode of answer.modes || []) {
    const option = el("option");
    option.value = mode.id;
    option.textContent = mode.healthy === false ? `${mode.id} (unavailable)` : mode.id;
    select.append(option);
  }
  if (chosen) select.value = chosen;
  if (!select.value) select.value = "classic";
}

// The agents the caller may run, by name, for the composer's Agent menu.
async function loadAgents() {
  const answer = await api.get("/v1/agents");
  const select = $("agent");
  const chosen = select.value;
  page.agents = new Map((answer.agents || []).map((agent) => [agent.name, agent]));
  const none = el("option");
  none.value = "";
  none.textContent = "none";
  select.replaceChildren(none);
  for (const agent of page.agents.values()) {
    const option = el("option");
    option.value = agent.name;
    option.textContent = agent.source === "operator" ? `${agent.name} (shared)` : agent.name;
    option.title = agent.description || "";
    select.append(option);
  }
  select.value = page.agents.has(chosen) ? chosen : "";
}

async function loadConversations() {
  const answer = await api.get("/v1/conversations?limit=100");
  page.conversations = answer.conversations || [];
  renderSidebar();
}

function renderSidebar() {
  const list = $("conversations");
  list.replaceChildren();
  for (const conversation of page.conversations) {
    const item = el("li", conversation.id === page.conversationId ? "active" : "");
    item.dataset.conversationId = conversation.id;
    const open = button(conversation.title || "Untitled", "open", () => {
      location.hash = `#/c/${encodeURIComponent(conversation.id)}`;
    });
    item.append(open);
    list.append(item);
  }
}

function stopViews() {
  following.waiting = [];
  for (const view of page.views) view.stop();
  page.views = [];
}

async function openConversation(id) {
  // Only the latest opening shows its prompts (the page may open a conversation twice at
  // once: at start and on a change of the address).
  const opening = (page.opening = (page.opening || 0) + 1);
  stopViews();
  clearError();
  page.conversationId = id;
  attachments.keepFor(id);
  renderSidebar();
  const prompts = $("prompts");
  prompts.replaceChildren();
  setTitle(id ? "" : "New conversation");
  $("rename").hidden = !id;
  $("delete-conversation").hidden = !id;
  if (!id) return;
  try {
    const conversation = await api.get(`/v1/conversations/${encodeURIComponent(id)}`);
    setTitle(conversation.title || "Untitled");
    if (conversation.defaultMode) $("mode").value = conversation.defaultMode;
    const answer = await api.get(`/v1/prompts?conversationId=${encodeURIComponent(id)}&limit=100`);
    // Newest first from the API; the page reads top to bottom.
    const summaries = (answer.prompts || []).slice().reverse();
    if (page.conversationId !== id || page.opening !== opening) return;
    for (const summary of summaries) {
      const view = show(summary);
      if (view.finished) view.load().catch((error) => showError(error));
      else {
        // Listings cut long inputs short: read the whole one.
        if (summary.inputCut) view.loadInput().catch((error) => showError(error));
        followInTurn(view);
      }
    }
    scrollToEnd();
  } catch (error) {
    showError(error);
  }
}

function show(prompt) {
  const view = new PromptView(api, prompt, { onError: showError });
  page.views.push(view);
  $("prompts").append(view.element);
  return view;
}

function setTitle(title) {
  $("conversation-title").textContent = title;
}

function scrollToEnd() {
  const prompts = $("prompts");
  prompts.scrollTop = prompts.scrollHeight;
}

async function send(event) {
  event.preventDefault();
  const input = $("input").value.trim();
  // Enter sends too: not while the last prompt is being sent or a file uploads.
  if (!input || page.sending || attachments.busy) return;
  clearError();
  page.sending = true;
  updateSend();
  try {
    let id = page.conversationId;
    if (!id) {
      const conversation = await api.post("/v1/conversations", { title: input.slice(0, 60) });
      id = conversation.id;
      page.conversationId = id;
      // Not a hash change: the conversation is already on screen.
      history.replaceState(null, "", `#/c/${encodeURIComponent(id)}`);
      setTitle(conversation.title);
      $("rename").hidden = false;
      $("delete-conversation").hidden = false;
      await loadConversations();
    }
    const body = { input, mode: $("mode").value, model: $("tier").value, conversationId: id };
    // An agent with a mode or model of its own decides it; the menus then say nothing.
    const agent = page.agents.get($("agent").value);
    if (agent) {
      body.agent = agent.name;
      if (agent.mode) delete body.mode;
      if (agent.model && agent.model !== "MODEL_TIER_UNSPECIFIED") delete body.model;
    }
    const files = attachments.ids();
    if (files.length) body.attachments = files;
    const prompt = await api.post("/v1/prompts", body);
    $("input").value = "";
    attachments.sent(files);
    const view = show(prompt);
    scrollToEnd();
    view.follow();
  } catch (error) {
    showError(error, "send");
  } finally {
    page.sending = false;
    updateSend();
  }
}

async function newConversation() {
  if (location.hash) location.hash = "";
  else await openConversation(null);
  $("input").focus();
}

function startRename() {
  const title = $("conversation-title");
  const editor = $("rename-form");
  $("rename-input").value = title.textContent;
  title.hidden = true;
  $("rename").hidden = true;
  editor.hidden = false;
  $("rename-input").focus();
}

function endRename() {
  $("conversation-title").hidden = false;
  $("rename").hidden = !page.conversationId;
  $("rename-form").hidden = true;
}

async function saveRename(event) {
  event.preventDefault();
  const id = page.conversationId;
  if (!id) return endRename();
  try {
    const conversation = await api.patch(`/v1/conversations/${encodeURIComponent(id)}`, {
      title: $("rename-input").value.trim(),
    });
    setTitle(conversation.title || "Untitled");
    await loadConversations();
  } catch (error) {
    showError(error, "rename");
  }
  endRename();
}

// Deletes the open conversation with everything in it, once the user confirms.
async function deleteConversation() {
  const id = page.conversationId;
  if (!id) return;
  if (!confirm("Delete this conversation, its prompts and its files for good?")) return;
  try {
    await api.delete(`/v1/conversations/${encodeURIComponent(id)}`);
  } catch (error) {
    showError(error, "delete");
    return;
  }
  await loadConversations();
  if (location.hash) location.hash = "";
  else await openConversation(null);
}

async function saveSettings(event) {
  event.preventDefault();
  api.token = $("token").value.trim();
  api.user = $("user").value.trim();
  $("settings").open = false;
  await start();
}

async function start() {
  clearError();
  try {
    await Promise.all([loadModes(), loadConversations(), loadAgents(), skills.load()]);
  } catch (error) {
    showError(error);
    return;
  }
  await openConversation(currentRoute());
}

function wire() {
  $("token").value = api.token;
  $("user").value = api.user;
  $("settings-form").addEventListener("submit", saveSettings);
  $("composer").addEventListener("submit", send);
  $("attach").addEventListener("click", () => $("attach-input").click());
  $("attach-input").addEventListener("change", (event) => {
    attachments.add(Array.from(event.target.files || []));
    // The same file can be chosen again.
    event.target.value = "";
  });
  acceptDrops($("composer"), (files) => attachments.add(files));
  $("add-skill-folder").addEventListener("click", () => $("skill-folder-input").click());
  $("add-skill-archive").addEventListener("click", () => $("skill-archive-input").click());
  $("skill-folder-input").addEventListener("change", async (event) => {
    const files = Array.from(event.target.files || []);
    event.target.value = "";
    if (files.length) await skills.addFolder(files);
  });
  $("skill-archive-input").addEventListener("change", async (event) => {
    const [file] = Array.from(event.target.files || []);
    event.target.value = "";
    if (file) await skills.addArchive(file);
  });
  $("input").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) send(event);
  });
  $("new-conversation").addEventListener("click", newConversation);
  $("rename").addEventListener("click", startRename);
  $("delete-conversation").addEventListener("click", deleteConversation);
  $("rename-form").addEventListener("submit", saveRename);
  $("rename-input").addEventListener("keydown", (event) => {
    if (event.key === "Escape") endRename();
  });
  window.addEventListener("hashchange", () => openConversation(currentRoute()));
  // Whatever a running prompt saw is kept for the next load of the page.
  window.addEventListener("pagehide", () => {
    for (const view of page.views) view.saveNow();
  });
}

wire();
start();
