/**
 * A small JSON Schema (2020-12 subset) validator for checking response bodies against the
 * OpenAPI document in workerd, where validators that compile to code cannot run. It knows the
 * keywords the document uses: $ref, type, enum, const, properties, required,
 * additionalProperties, items, anyOf/oneOf/allOf, minimum/maximum, minLength/maxLength, pattern.
 */
type Schema = boolean | Record<string, any>;

export function resolveRef(root: unknown, ref: string): unknown {
  return ref
    .slice(2)
    .split("/")
    .map((s) => s.replaceAll("~1", "/").replaceAll("~0", "~"))
    .reduce<unknown>((node, key) => (node && typeof node === "object" ? (node as Record<string, unknown>)[key] : undefined), root);
}

function typeOf(v: unknown): string {
  if (v === null) return "null";
  if (Array.isArray(v)) return "array";
  if (typeof v === "number") return Number.isInteger(v) ? "integer" : "number";
  return typeof v;
}

/** Every violation, as "path: what"; empty when the value is valid. */
export function validate(schema: Schema, value: unknown, root: unknown, path = "$"): string[] {
  if (schema === true) return [];
  if (schema === false) return [`${path}: no value is allowed here`];
  if (typeof schema.$ref === "string") {
    const target = resolveRef(root, schema.$ref);
    if (target === undefined) return [`${path}: unresolved ${schema.$ref}`];
    return validate(target as Schema, value, root, path);
  }
  const errors: string[] = [];
  const actual = typeOf(value);
  if (schema.type !== undefined) {
    const types: string[] = Array.isArray(schema.type) ? schema.type : [schema.type];
    const ok = types.includes(actual) || (actual === "integer" && types.includes("number"));
    if (!ok) return [`${path}: expected ${types.join("|")}, got ${actual}`];
  }
  if (schema.enum && !schema.enum.some((e: unknown) => JSON.stringify(e) === JSON.stringify(value)))
    errors.push(`${path}: ${JSON.stringify(value)} not in ${JSON.stringify(schema.enum)}`);
  if ("const" in schema && JSON.stringify(schema.const) !== JSON.stringify(value)) errors.push(`${path}: expected ${JSON.stringify(schema.const)}`);
  if (typeof value === "number") {
    if (schema.minimum !== undefined && value < schema.minimum) errors.push(`${path}: below ${schema.minimum}`);
    if (schema.maximum !== undefined && value > schema.maximum) errors.push(`${path}: above ${schema.maximum}`);
  }
  if (typeof value === "string") {
    if (schema.minLength !== undefined && value.length < schema.minLength) errors.push(`${path}: shorter than ${schema.minLength}`);
    if (schema.maxLength !== undefined && value.length > schema.maxLength) errors.push(`${path}: longer than ${schema.maxLength}`);
    if (schema.pattern !== undefined && !new RegExp(schema.pattern, "u").test(value)) errors.push(`${path}: does not match ${schema.pattern}`);
  }
  if (actual === "object") {
    const obj = value as Record<string, unknown>;
    for (const key of schema.required ?? []) if (!(key in obj)) errors.push(`${path}: missing required ${key}`);
    const props: Record<string, Schema> = schema.properties ?? {};
    for (const [key, v] of Object.entries(obj)) {
      if (key in props) errors.push(...validate(props[key], v, root, `${path}.${key}`));
      else if (schema.additionalProperties !== undefined) errors.push(...validate(schema.additionalProperties, v, root, `${path}.${key}`));
    }
  }
  if (actual === "array" && schema.items !== undefined)
    for (const [i, v] of (value as unknown[]).entries()) errors.push(...validate(schema.items, v, root, `${path}[${i}]`));
  if (schema.allOf) for (const s of schema.allOf) errors.push(...validate(s, value, root, path));
  if (schema.anyOf && !schema.anyOf.some((s: Schema) => validate(s, value, root, path).length === 0)) errors.push(`${path}: matches none of anyOf`);
  if (schema.oneOf && schema.oneOf.filter((s: Schema) => validate(s, value, root, path).length === 0).length !== 1)
    errors.push(`${path}: does not match exactly one of oneOf`);
  return errors;
}
