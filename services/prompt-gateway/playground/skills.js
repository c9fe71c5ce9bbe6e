// The sidebar's Skills panel: the caller's skills (saved code, their skill folders and the
// operator's), a skill folder added from a folder the person picks (packed here into a tar)
// or from a .zip/.tar/.tgz archive of one (POST /v1/skill-folders), and a × that deletes a
// folder of their own (DELETE /v1/skills/{name}). The gateway checks everything again.

import { el, button } from "./timeline.js";

// The largest archive the gateway takes (AddSkillFolder's limit).
export const MAX_ARCHIVE_BYTES = 2 * 1024 * 1024;
// Files a skill folder holds at most.
const MAX_FILES = 200;
// What a folder picked from a desktop carries and a skill never needs.
const SKIPPED = new Set([".DS_Store", ".git"]);

export class SkillsPanel {
  // `list`: the element the skills go in; `onError(error, what)`: shows what went wrong.
  constructor(api, { list, onError }) {
    this.api = api;
    this.list = list;
    this.onError = onError;
  }

  async load() {
    let answer;
    try {
      answer = await this.api.get("/v1/skills");
    } catch (error) {
      this.onError(error, "list skills");
      return;
    }
    const skills = answer.skills || [];
    this.list.replaceChildren(...skills.map((skill) => this.row(skill)));
    if (skills.length === 0) {
      const none = el("li", "skill-none");
      none.textContent = "No skills yet";
      this.list.append(none);
    }
  }

  row(skill) {
    const row = el("li", "skill");
    row.dataset.name = skill.name;
    row.dataset.source = skill.source || "saved";
    const name = el("span", "skill-name");
    name.textContent = skill.name;
    name.title = skill.description || "";
    const source = el("small", "skill-source");
    source.textContent = ` ${skill.source || "saved"}`;
    row.append(name, source);
    if (skill.source === "folder") {
      const remove = button("×", "remove", () => this.remove(skill.name));
      remove.title = `Delete ${skill.name}`;
      remove.setAttribute("aria-label", `Delete skill ${skill.name}`);
      row.append(remove);
    }
    return row;
  }

  // Adds the folder whose files (with their `webkitRelativePath`) the person picked.
  async addFolder(files) {
    let archive;
    try {
      const entries = [];
      for (const file of skillFiles(files)) {
        entries.push({ path: file.webkitRelativePath, bytes: new Uint8Array(await file.arrayBuffer()) });
      }
      archive = tarOf(entries);
    } catch (error) {
      this.onError(error, "add skill folder");
      return;
    }
    await this.send(archive);
  }

  // Adds an archive (a File) of one skill folder.
  async addArchive(file) {
    if (file.size > MAX_ARCHIVE_BYTES) {
      this.onError(new Error(`${file.name} is ${file.size} bytes; at most ${MAX_ARCHIVE_BYTES} are taken`), "add skill folder");
      return;
    }
    await this.send(new Uint8Array(await file.arrayBuffer()));
  }

  async send(archive) {
    try {
      await this.api.post("/v1/skill-folders", { archive: base64(archive) });
    } catch (error) {
      this.onError(error, "add skill folder");
      return;
    }
    await this.load();
  }

  async remove(name) {
    if (!confirm(`Delete the skill ${name}?`)) return;
    try {
      await this.api.delete(`/v1/skills/${encodeURIComponent(name)}`);
    } catch (error) {
      this.onError(error, `delete skill ${name}`);
      return;
    }
    await this.load();
  }
}

// The files of a picked folder that go into the skill (nothing a desktop adds), or an Error
// that says why the folder is no skill; checked before any file is read.
function skillFiles(files) {
  const kept = files.filter((file) => !(file.webkitRelativePath || file.name).split("/").some((part) => SKIPPED.has(part)));
  if (kept.length > MAX_FILES) throw new Error(`the folder holds more than ${MAX_FILES} files`);
  if (!kept.some((file) => /^[^/]+\/SKILL\.md$/.test(file.webkitRelativePath || ""))) {
    throw new Error("the folder has no SKILL.md at its top: a skill folder starts with one");
  }
  const size = kept.reduce((sum, file) => sum + file.size, 0);
  if (size > MAX_ARCHIVE_BYTES) throw new Error(`the folder holds ${size} bytes; at most ${MAX_ARCHIVE_BYTES} are taken`);
  return kept;
}

// A ustar archive of `entries` ({path, bytes}; one top folder, as a picked folder gives
// them), or an Error that says why it cannot be one.
function tarOf(entries) {
  const blocks = [];
  let total = 0;
  for (const { path, bytes } of entries) {
    blocks.push(header(path, bytes.length), bytes, new Uint8Array((512 - (bytes.length % 512)) % 512));
    total += 512 + bytes.length;
    if (total > MAX_ARCHIVE_BYTES) throw new Error(`the folder packs to more than ${MAX_ARCHIVE_BYTES} bytes`);
  }
  blocks.push(new Uint8Array(1024));
  const out = new Uint8Array(blocks.reduce((sum, block) => sum + block.length, 0));
  let at = 0;
  for (const block of blocks) {
    out.set(block, at);
    at += block.length;
  }
  return out;
}

// A ustar header: the path split into prefix and name where it is longer than 100 bytes.
function header(path, size) {
  const encoder = new TextEncoder();
  const whole = encoder.encode(path);
  let name = whole;
  let prefix = new Uint8Array(0);
  if (whole.length > 100) {
    const cut = path.lastIndexOf("/", 155);
    prefix = encoder.encode(path.slice(0, cut));
    name = encoder.encode(path.slice(cut + 1));
    if (cut < 0 || prefix.length > 155 || name.length > 100) throw new Error(`${path}: the path is too long`);
  }
  const block = new Uint8Array(512);
  const put = (at, bytes) => block.set(bytes, at);
  const octal = (value, width) => encoder.encode(value.toString(8).padStart(width - 1, "0") + "\0");
  put(0, name);
  put(100, octal(0o644, 8));
  put(108, octal(0, 8));
  put(116, octal(0, 8));
  put(124, octal(size, 12));
  put(136, octal(Math.floor(Date.now() / 1000), 12));
  put(148, encoder.encode("        "));
  block[156] = "0".charCodeAt(0);
  put(257, encoder.encode("ustar\0"));
  put(263, encoder.encode("00"));
  put(345, prefix);
  const sum = block.reduce((total, byte) => total + byte, 0);
  put(148, encoder.encode(sum.toString(8).padStart(6, "0") + "\0 "));
  return block;
}

function base64(bytes) {
  let binary = "";
  for (let at = 0; at < bytes.length; at += 0x8000) {
    binary += String.fromCharCode(...bytes.subarray(at, at + 0x8000));
  }
  return btoa(binary);
}
