// Small helpers that build the page's elements.

export function el(name, className) {
  const node = document.createElement(name);
  if (className) node.className = className;
  return node;
}

export function text(value) {
  return document.createTextNode(value);
}

export function button(label, className, onClick) {
  const node = el("button", className);
  node.type = "button";
  node.textContent = label;
  node.addEventListener("click", onClick);
  return node;
}
