// Markdown for model output, built as DOM nodes: every piece of the text becomes a text node
// (never HTML), so `<script>`, `<img onerror=…>` and the like show as the characters they
// are. Links keep only http(s) and mailto targets and open in a new tab without a referrer.
// Covers what models write: headings, paragraphs, fenced code, lists, quotes, rules, inline
// code, bold, italics and links.

// The fragment for `text`.
export function renderMarkdown(text) {
  const fragment = document.createDocumentFragment();
  const lines = String(text).replace(/\r\n?/g, "\n").split("\n");
  let index = 0;
  let paragraph = [];

  const flushParagraph = () => {
    if (paragraph.length) {
      const p = element("p");
      appendInline(p, paragraph.join("\n"));
      fragment.append(p);
      paragraph = [];
    }
  };

  while (index < lines.length) {
    const line = lines[index];
    const fence = /^\s{0,3}(```+|~~~+)\s*([\w+-]*)/.exec(line);
    if (fence) {
      flushParagraph();
      const marker = fence[1];
      const body = [];
      index += 1;
      while (index < lines.length && !lines[index].trimStart().startsWith(marker)) {
        body.push(lines[index]);
        index += 1;
      }
      index += 1; // the closing fence (or the end of an unfinished block)
      const pre = element("pre");
      const code = element("code");
      if (fence[2]) code.dataset.language = fence[2];
      code.textContent = body.join("\n");
      pre.append(code);
      fragment.append(pre);
      continue;
    }
    const heading = /^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$/.exec(line);
    if (heading) {
      flushParagraph();
      const h = element(`h${Math.min(heading[1].length + 2, 6)}`);
      appendInline(h, heading[2]);
      fragment.append(h);
      index += 1;
      continue;
    }
    if (/^\s{0,3}([-*_])(\s*\1){2,}\s*$/.test(line)) {
      flushParagraph();
      fragment.append(element("hr"));
      index += 1;
      continue;
    }
    if (/^\s{0,3}>/.test(line)) {
      flushParagraph();
      const quoted = [];
      while (index < lines.length && /^\s{0,3}>/.test(lines[index])) {
        quoted.push(lines[index].replace(/^\s{0,3}>\s?/, ""));
        index += 1;
      }
      const quote = element("blockquote");
      quote.append(renderMarkdown(quoted.join("\n")));
      fragment.append(quote);
      continue;
    }
    const item = listItem(line);
    if (item) {
      flushParagraph();
      const list = element(item.ordered ? "ol" : "ul");
      if (item.ordered && item.start !== 1) list.start = item.start;
      while (index < lines.length) {
        const next = listItem(lines[index]);
        if (!next || next.ordered !== item.ordered) break;
        const li = element("li");
        const content = [next.text];
        index += 1;
        // Indented lines continue the item.
        while (index < lines.length && /^\s{2,}\S/.test(lines[index]) && !listItem(lines[index])) {
          content.push(lines[index].trim());
          index += 1;
        }
        appendInline(li, content.join("\n"));
        list.append(li);
      }
      fragment.append(list);
      continue;
    }
    if (line.trim() === "") {
      flushParagraph();
    } else {
      paragraph.push(line);
    }
    index += 1;
  }
  flushParagraph();
  return fragment;
}

function listItem(line) {
  const bullet = /^\s{0,3}[-*+]\s+(.*)$/.exec(line);
  if (bullet) return { ordered: false, text: bullet[1] };
  const numbered = /^\s{0,3}(\d{1,9})[.)]\s+(.*)$/.exec(line);
  if (numbered) return { ordered: true, start: Number(numbered[1]), text: numbered[2] };
  return null;
}

function element(name) {
  return document.createElement(name);
}

// Inline markup of `text` appended to `parent`: `code`, **bold**, *em* / _em_, [text](url),
// line breaks; everything else as text.
function appendInline(parent, text) {
  // Underscores emphasise only outside words (`snake_case` and `__name` stay as they are).
  const pattern = /`([^`\n]+)`|\*\*([^*\n]+)\*\*|(?<!\w)__([^_\n]+)__(?!\w)|\*([^*\s][^*\n]*)\*|(?<!\w)_([^_\n]+)_(?!\w)|\[([^\]\n]+)\]\(([^)\s]+)\)|\n/g;
  let last = 0;
  let match;
  while ((match = pattern.exec(text))) {
    if (match.index > last) parent.append(document.createTextNode(text.slice(last, match.index)));
    last = pattern.lastIndex;
    if (match[1] !== undefined) {
      const code = element("code");
      code.textContent = match[1];
      parent.append(code);
    } else if (match[2] !== undefined || match[3] !== undefined) {
      const strong = element("strong");
      appendInline(strong, match[2] ?? match[3]);
      parent.append(strong);
    } else if (match[4] !== undefined || match[5] !== undefined) {
      const em = element("em");
      appendInline(em, match[4] ?? match[5]);
      parent.append(em);
    } else if (match[6] !== undefined) {
      const href = safeHref(match[7]);
      if (href) {
        const a = element("a");
        a.href = href;
        a.target = "_blank";
        a.rel = "noopener noreferrer nofollow";
        a.textContent = match[6];
        parent.append(a);
      } else {
        parent.append(document.createTextNode(match[0]));
      }
    } else {
      parent.append(element("br"));
    }
  }
  if (last < text.length) parent.append(document.createTextNode(text.slice(last)));
}

// The link target if it is an absolute http(s) or mailto URL, else null (no javascript:,
// data: or relative links into the API).
function safeHref(raw) {
  try {
    const url = new URL(raw);
    return ["http:", "https:", "mailto:"].includes(url.protocol) ? url.href : null;
  } catch {
    return null;
  }
}
