// A form built from a JSON Schema (an event's, or a machine's input, as zod's toJSONSchema gives it):
// a field per property (text, number, checkbox, choice; JSON for anything nested), required ones marked.

import { h } from './dom.js';

/** Fields for an object schema; `skip` names properties set elsewhere (an event's `type`). */
export function schemaForm(schema, { skip = [], idPrefix = 'f' } = {}) {
  const properties = schema && schema.type === 'object' && schema.properties ? schema.properties : null;
  const required = new Set(schema?.required ?? []);
  const readers = [];
  const fields = [];
  if (!properties && schema && schema.type !== 'object') {
    // Not an object (or no schema): one JSON field for the whole value.
    const area = h('textarea', { class: 'mono', rows: 4, name: 'value', 'aria-label': 'value (JSON)', placeholder: '{}' });
    fields.push(h('label', { class: 'field' }, h('span', {}, 'value (JSON)'), area));
    readers.push((out) => Object.assign(out, parseJson(area.value || '{}', 'value')));
  }
  for (const [name, prop] of Object.entries(properties ?? {})) {
    if (skip.includes(name)) continue;
    const { element, read } = field(name, prop ?? {}, required.has(name), `${idPrefix}-${name}`);
    fields.push(element);
    readers.push((out) => {
      const v = read();
      if (v !== undefined) out[name] = v;
    });
  }
  return {
    fields,
    /** The value the fields hold (throws an Error naming the field when one cannot be read). */
    read() {
      const out = {};
      for (const r of readers) r(out);
      return out;
    },
  };
}

function field(name, prop, isRequired, id) {
  const label = (control, hint) => h('label', { class: 'field', for: id }, h('span', {}, name, isRequired ? h('b', { class: 'req', title: 'required' }, ' *') : null, hint ? h('small', { class: 'muted' }, ` ${hint}`) : null), control);
  const kind = Array.isArray(prop.type) ? prop.type.find((t) => t !== 'null') : prop.type;
  if (prop.const !== undefined) {
    return { element: label(h('input', { id, value: JSON.stringify(prop.const), disabled: true })), read: () => prop.const };
  }
  if (Array.isArray(prop.enum)) {
    const select = h('select', { id, name }, isRequired ? null : h('option', { value: '' }, '—'), prop.enum.map((v) => h('option', { value: JSON.stringify(v) }, String(v))));
    return { element: label(select), read: () => (select.value === '' ? undefined : JSON.parse(select.value)) };
  }
  if (kind === 'boolean') {
    const box = h('input', { id, name, type: 'checkbox', checked: prop.default === true });
    return { element: h('label', { class: 'field check', for: id }, box, h('span', {}, name)), read: () => box.checked };
  }
  if (kind === 'number' || kind === 'integer') {
    // zod gives an unbounded int the safe-integer bounds: no bound worth showing.
    const bounded = (n) => n !== undefined && Math.abs(n) < Number.MAX_SAFE_INTEGER;
    const input = h('input', { id, name, type: 'number', step: kind === 'integer' ? 1 : 'any', min: bounded(prop.minimum) ? prop.minimum : undefined, max: bounded(prop.maximum) ? prop.maximum : undefined, required: isRequired, placeholder: prop.default !== undefined ? String(prop.default) : '' });
    const range = [bounded(prop.minimum) ? `≥ ${prop.minimum}` : '', bounded(prop.maximum) ? `≤ ${prop.maximum}` : ''].filter(Boolean).join(', ');
    return {
      element: label(input, range),
      read: () => {
        if (input.value === '') return required(isRequired, name);
        const n = Number(input.value);
        if (!Number.isFinite(n)) throw new Error(`${name} must be a number.`);
        return n;
      },
    };
  }
  if (kind === 'string') {
    // A box of lines only for long text (a bound over 200, or a multi-line format); else one line.
    const long = (prop.maxLength ?? 0) > 200;
    const input = long ? h('textarea', { id, name, rows: 2, required: isRequired, maxlength: prop.maxLength }) : h('input', { id, name, type: 'text', required: isRequired, maxlength: prop.maxLength });
    return { element: label(input, prop.maxLength ? `≤ ${prop.maxLength} chars` : ''), read: () => (input.value === '' ? required(isRequired, name) : input.value) };
  }
  const area = h('textarea', { id, name, class: 'mono', rows: 3, placeholder: 'JSON' });
  return { element: label(area, 'JSON'), read: () => (area.value.trim() === '' ? required(isRequired, name) : parseJson(area.value, name)) };
}

function required(isRequired, name) {
  if (isRequired) throw new Error(`${name} is required.`);
  return undefined;
}

function parseJson(text, name) {
  try {
    return JSON.parse(text);
  } catch {
    throw new Error(`${name} is not valid JSON.`);
  }
}

/** Whether a schema has anything to fill in beyond `skip`. */
export function hasFields(schema, skip = []) {
  if (!schema || schema.type !== 'object') return schema !== null && schema !== undefined;
  return Object.keys(schema.properties ?? {}).some((k) => !skip.includes(k));
}
