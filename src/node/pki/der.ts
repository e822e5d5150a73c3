/**
 * Just enough DER to keep bytes as they are: a certificate's fields read as the exact bytes
 * stored (the issuer a verifier compares with its parent's subject), and a certificate put
 * together from such pieces. Parsing and building whole structures is @peculiar/x509's job; it
 * re-encodes what it parses, which is what must not happen to a CA's subject.
 * @module
 */

/** One element: where its encoding starts and ends in the buffer, and its contents. */
interface Element {
  tag: number;
  start: number;
  end: number;
  contentStart: number;
}

function readElement(der: Uint8Array, at: number): Element {
  if (at + 2 > der.length) throw new Error("DER: truncated element");
  const tag = der[at]!;
  if ((tag & 0x1f) === 0x1f) throw new Error("DER: multi-byte tags are not expected here");
  let length = der[at + 1]!;
  let contentStart = at + 2;
  if (length & 0x80) {
    const bytes = length & 0x7f;
    if (bytes === 0 || bytes > 4) throw new Error("DER: indefinite or oversized length");
    length = 0;
    for (let i = 0; i < bytes; i++) length = length * 256 + der[at + 2 + i]!;
    contentStart += bytes;
  }
  const end = contentStart + length;
  if (end > der.length) throw new Error("DER: element longer than its buffer");
  return { tag, start: at, end, contentStart };
}

/** The elements inside a constructed element (a SEQUENCE), each as its own full encoding. */
export function children(der: Uint8Array): Uint8Array[] {
  const outer = readElement(der, 0);
  if (!(outer.tag & 0x20)) throw new Error("DER: not a constructed element");
  const out: Uint8Array[] = [];
  for (let at = outer.contentStart; at < outer.end; ) {
    const e = readElement(der, at);
    out.push(der.subarray(e.start, e.end));
    at = e.end;
  }
  return out;
}

function lengthBytes(length: number): number[] {
  if (length < 0x80) return [length];
  const bytes: number[] = [];
  for (let n = length; n > 0; n = Math.floor(n / 256)) bytes.unshift(n & 0xff);
  return [0x80 | bytes.length, ...bytes];
}

/** An element of its own buffer (never a view of Node's shared pool). */
function element(tag: number, content: Uint8Array): Uint8Array {
  return new Uint8Array(Buffer.concat([Uint8Array.from([tag, ...lengthBytes(content.length)]), content]));
}

export function sequence(parts: readonly Uint8Array[]): Uint8Array {
  return element(0x30, Buffer.concat(parts));
}

export function bitString(bytes: Uint8Array): Uint8Array {
  return element(0x03, Buffer.concat([Uint8Array.of(0), bytes]));
}

/**
 * A certificate's parts as stored: the TBS certificate and, in it, the issuer and subject names
 * (the TBS fields are [0] version, serial, signature algorithm, issuer, validity, subject, …).
 */
export function certificateParts(der: Uint8Array): {
  tbs: Uint8Array;
  tbsFields: Uint8Array[];
  signatureAlgorithm: Uint8Array;
  issuer: Uint8Array;
  subject: Uint8Array;
} {
  const [tbs, signatureAlgorithm] = children(der);
  if (!tbs || !signatureAlgorithm) throw new Error("DER: not a certificate");
  const tbsFields = children(tbs);
  const offset = tbsFields[0]?.[0] === 0xa0 ? 1 : 0; // the version is optional (v1)
  const issuer = tbsFields[offset + 2];
  const subject = tbsFields[offset + 4];
  if (!issuer || !subject) throw new Error("DER: not a certificate");
  return { tbs, tbsFields, signatureAlgorithm, issuer, subject };
}
