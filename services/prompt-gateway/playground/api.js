// The gateway's HTTP/JSON API as the playground calls it: the caller's credentials go in
// headers (a bearer token kept in session storage, or the user id a gateway in development
// mode trusts), never in a URL. Errors are ApiError with the gRPC code and message the
// gateway answered.

const TOKEN_KEY = "agentic.token";
const USER_KEY = "agentic.user";

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

export class Api {
  get token() {
    return sessionStorage.getItem(TOKEN_KEY) || "";
  }

  set token(value) {
    if (value) sessionStorage.setItem(TOKEN_KEY, value);
    else sessionStorage.removeItem(TOKEN_KEY);
  }

  get user() {
    return localStorage.getItem(USER_KEY) || "local";
  }

  set user(value) {
    if (value) localStorage.setItem(USER_KEY, value);
    else localStorage.removeItem(USER_KEY);
  }

  headers(extra = {}) {
    const headers = { ...extra };
    if (this.token) headers["Authorization"] = `Bearer ${this.token}`;
    // Ignored by a gateway with tokens; names the caller of one in development mode.
    if (this.user) headers["X-User-Id"] = this.user;
    return headers;
  }

  async request(method, path, body) {
    const init = { method, headers: this.headers(), cache: "no-store" };
    if (body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    return answerOf(await fetch(path, init));
  }

  get(path) {
    return this.request("GET", path);
  }

  post(path, body = {}) {
    return this.request("POST", path, body);
  }

  patch(path, body) {
    return this.request("PATCH", path, body);
  }

  delete(path) {
    return this.request("DELETE", path);
  }

  // Uploads `file` (a File) as the caller's, in `conversationId` when one is given: the
  // gateway's FileOutput, whose id a prompt's `attachments` name. `signal` aborts it.
  async upload(file, conversationId, signal) {
    const form = new FormData();
    form.append("file", file, file.name);
    if (conversationId) form.append("conversation_id", conversationId);
    // No Content-Type of ours: the browser writes multipart/form-data with its boundary.
    const init = { method: "POST", headers: this.headers(), body: form, cache: "no-store", signal };
    return answerOf(await fetch("/v1/files", init));
  }

  // The bytes of a file, as a Blob (the content route needs the caller's headers, so a plain
  // link cannot fetch it).
  async fileBlob(fileId) {
    const response = await fetch(`/v1/files/${encodeURIComponent(fileId)}/content`, {
      headers: this.headers(),
      cache: "no-store",
    });
    if (!response.ok) {
      let message = `HTTP ${response.status}`;
      try {
        message = (await response.json()).message || message;
      } catch {}
      throw new ApiError(response.status, "UNKNOWN", message);
    }
    return response.blob();
  }

  // Follows a prompt's events after `after` (server-sent events read over fetch, so the
  // credentials travel in headers): calls onEvent(event) for each, in order, and resolves
  // when the stream ends (after a terminal or `waiting` event, or when the server closed it).
  // Rejects with ApiError for an error answer or an `error` event, or when `signal` aborts.
  async follow(promptId, after, onEvent, signal) {
    const response = await fetch(`/v1/prompts/${encodeURIComponent(promptId)}/events?after=${after}`, {
      headers: this.headers({ Accept: "text/event-stream" }),
      cache: "no-store",
      signal,
    });
    if (!response.ok) {
      let body = {};
      try {
        body = await response.json();
      } catch {}
      throw new ApiError(response.status, body.code || "UNKNOWN", body.message || `HTTP ${response.status}`);
    }
    // 204: nothing more will come (the prompt ended before `after`).
    if (response.status === 204 || !response.body) return;
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += value;
      let end;
      while ((end = /\r\n\r\n|\n\n|\r\r/.exec(buffer))) {
        const block = buffer.slice(0, end.index);
        buffer = buffer.slice(end.index + end[0].length);
        const message = parseBlock(block);
        if (!message) continue;
        // The stream's own last word: nothing follows.
        if (message.event === "end") return;
        if (message.event === "error") {
          let body = {};
          try {
            body = JSON.parse(message.data);
          } catch {}
          throw new ApiError(200, body.code || "UNKNOWN", body.message || "the event stream failed");
        }
        onEvent(JSON.parse(message.data));
      }
    }
  }
}

// The JSON of an answer, or ApiError with the code and message of an error's Status (an
// error answered with no JSON, by a proxy say, gives its status and the start of its text).
async function answerOf(response) {
  const text = await response.text();
  let value = null;
  try {
    value = text ? JSON.parse(text) : {};
  } catch {
    if (response.ok) {
      throw new ApiError(response.status, "UNKNOWN", `the gateway answered ${response.status} with no JSON`);
    }
    value = { message: `HTTP ${response.status}${text ? `: ${text.slice(0, 200)}` : ""}` };
  }
  if (!response.ok) {
    throw new ApiError(response.status, value.code || "UNKNOWN", value.message || `HTTP ${response.status}`);
  }
  return value;
}

// One SSE block's fields: `event`, `id` and the `data` lines joined; comments (keep-alives)
// give null.
function parseBlock(block) {
  let event = "message";
  let id = null;
  const data = [];
  for (const line of block.split(/\r\n|\r|\n/)) {
    if (line === "" || line.startsWith(":")) continue;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "event") event = value;
    else if (field === "id") id = value;
    else if (field === "data") data.push(value);
  }
  if (data.length === 0) return null;
  return { event, id, data: data.join("\n") };
}
