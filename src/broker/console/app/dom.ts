/**
 * Building the page with DOM calls only (never innerHTML): text goes in as text, attributes as
 * attribute values, so nothing the broker returns is ever parsed as markup.
 * @module
 */
const SVG_NS = "http://www.w3.org/2000/svg";

/** The page's element with this id (the HTML shell has them all). */
export function $<T extends HTMLElement = HTMLElement>(id: string): T {
  return document.getElementById(id) as T;
}

/** Attributes: on* are listeners, `text` the text content; undefined, null and false are left out. */
export type Attrs = Record<string, unknown>;
export type Child = Node | string | number | null | undefined | false;

/** An element with attributes and children. */
export function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs?: Attrs, ...children: (Child | Child[])[]): HTMLElementTagNameMap[K] {
  return fill(document.createElement(tag), attrs, children);
}

export function svg<K extends keyof SVGElementTagNameMap>(tag: K, attrs?: Attrs, ...children: (Child | Child[])[]): SVGElementTagNameMap[K] {
  return fill(document.createElementNS(SVG_NS, tag), attrs, children);
}

function fill<E extends Element>(el: E, attrs: Attrs | undefined, children: (Child | Child[])[]): E {
  for (const [k, v] of Object.entries(attrs ?? {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v as EventListener);
    else if (k === "text") el.textContent = String(v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) if (c !== null && c !== undefined && c !== false) el.append(c instanceof Node ? c : String(c));
  return el;
}
