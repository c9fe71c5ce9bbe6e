// The files attached to the next prompt: chosen with the Attach button or dropped on the
// composer, each uploaded at once (POST /v1/files) and shown as a chip (its name and size,
// and a × that removes it) until the prompt is sent. A chip gets its `data-file-id` once its
// upload is done; while any upload runs, `busy` is true (the page does not send then).

import { el, text, button, formatSize } from "./timeline.js";

// What one prompt takes (CreatePrompt's limit).
export const MAX_ATTACHMENTS = 16;

export class Attachments {
  // `list`: the element the chips go in; `conversation()`: the open conversation's id, or
  // null; `onChange()`: called when an upload starts or ends or a chip goes;
  // `onError(error, what)`: shows what went wrong.
  constructor(api, { list, conversation, onChange, onError }) {
    this.api = api;
    this.list = list;
    this.conversation = conversation;
    this.onChange = onChange;
    this.onError = onError;
    // { name, size, conversationId, file (the FileOutput, once uploaded), abort, chip }
    this.items = [];
  }

  get busy() {
    return this.items.some((item) => !item.file);
  }

  // The uploaded files' ids, in the order they were attached.
  ids() {
    return this.items.filter((item) => item.file).map((item) => item.file.id);
  }

  // Uploads each of `files` (File objects), as many as the prompt still takes.
  add(files) {
    for (const file of files) {
      if (this.items.length >= MAX_ATTACHMENTS) {
        this.onError(new Error(`a prompt takes at most ${MAX_ATTACHMENTS} files`), `attach ${file.name}`);
        return;
      }
      this.upload(file);
    }
  }

  async upload(file) {
    const item = {
      name: file.name,
      size: file.size,
      conversationId: this.conversation(),
      file: null,
      abort: new AbortController(),
    };
    item.chip = this.chip(item);
    this.items.push(item);
    this.list.append(item.chip);
    this.onChange();
    try {
      const uploaded = await this.api.upload(file, item.conversationId, item.abort.signal);
      // Removed while it uploaded: the page no longer offers it.
      if (!this.items.includes(item)) return;
      item.file = uploaded;
      item.chip.dataset.fileId = uploaded.id;
      item.chip.classList.remove("uploading");
      item.chip.title = `${uploaded.mimeType || file.type || "file"}, ${formatSize(Number(uploaded.size || file.size))}`;
    } catch (error) {
      if (!item.abort.signal.aborted) this.onError(error, `upload ${file.name}`);
      this.drop(item);
    } finally {
      this.onChange();
    }
  }

  chip(item) {
    const chip = el("span", "attachment-chip uploading");
    const name = el("span", "attachment-name");
    name.textContent = item.name;
    const size = el("small", "attachment-size");
    size.textContent = formatSize(item.size);
    const remove = button("×", "remove", () => this.remove(item));
    remove.title = `Remove ${item.name}`;
    remove.setAttribute("aria-label", `Remove ${item.name}`);
    chip.append(name, text(" "), size, remove);
    return chip;
  }

  // Takes a file off the next prompt (stopping its upload if it still runs).
  remove(item) {
    item.abort.abort();
    this.drop(item);
    this.onChange();
  }

  drop(item) {
    this.items = this.items.filter((other) => other !== item);
    item.chip.remove();
  }

  // Takes off the files of `ids`, which a sent prompt took (one attached while it was being
  // sent stays for the next).
  sent(ids) {
    const taken = this.items.filter((item) => item.file && ids.includes(item.file.id));
    for (const item of taken) this.remove(item);
  }

  // On opening conversation `id`: drops the files uploaded into another conversation (those
  // uploaded before any conversation existed go with the next prompt wherever it is sent).
  keepFor(id) {
    const elsewhere = this.items.filter((item) => item.conversationId && item.conversationId !== id);
    for (const item of elsewhere) this.remove(item);
  }
}

// Makes `zone` take files dropped on it: calls onFiles([File…]) for a drop, and marks the
// zone `dragging` while files are dragged over it. A file dropped beside it is ignored rather
// than opened by the browser in place of the page.
export function acceptDrops(zone, onFiles) {
  let depth = 0;
  const carriesFiles = (event) => !!event.dataTransfer && Array.from(event.dataTransfer.types || []).includes("Files");
  zone.addEventListener("dragenter", (event) => {
    if (!carriesFiles(event)) return;
    event.preventDefault();
    depth += 1;
    zone.classList.add("dragging");
  });
  zone.addEventListener("dragover", (event) => {
    if (!carriesFiles(event)) return;
    event.preventDefault();
    event.dataTransfer.dropEffect = "copy";
    zone.classList.add("dragging");
  });
  zone.addEventListener("dragleave", (event) => {
    if (!carriesFiles(event)) return;
    depth = Math.max(0, depth - 1);
    if (depth === 0) zone.classList.remove("dragging");
  });
  zone.addEventListener("drop", (event) => {
    if (!carriesFiles(event)) return;
    event.preventDefault();
    depth = 0;
    zone.classList.remove("dragging");
    onFiles(Array.from(event.dataTransfer.files || []));
  });
  for (const type of ["dragover", "drop"]) {
    window.addEventListener(type, (event) => {
      if (!carriesFiles(event) || zone.contains(event.target)) return;
      event.preventDefault();
      if (type === "dragover") event.dataTransfer.dropEffect = "none";
    });
  }
}
