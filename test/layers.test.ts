/**
 * The tree's layers (.dependency-cruiser.cjs): no import cycle, type-only imports included, and
 * base/ and ports/ below step/, step/ below runtime/, and src/client free of Node and of the engine
 * but for its error classes and types.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { cruise } from 'dependency-cruiser';
import { describe, expect, it } from 'vitest';

const require = createRequire(import.meta.url);

describe('layers', () => {
  it('has no import cycle and no import against the layers', async () => {
    const ruleSet = require('../.dependency-cruiser.cjs');
    const result = await cruise(['src', 'persistence', 'bin', 'scripts'], { ruleSet, validate: true, ...ruleSet.options, outputType: 'json' });
    const output = typeof result.output === 'string' ? JSON.parse(result.output) : result.output;
    const violations = (output.summary.violations as { rule: { name: string }; from: string; to: string; cycle?: { name: string }[] }[]).map(
      (v) => `${v.rule.name}: ${v.from} -> ${v.to}${v.cycle ? ` (${v.cycle.map((c) => c.name).join(' -> ')})` : ''}`,
    );
    expect(violations).toEqual([]);
    expect(output.summary.totalCruised).toBeGreaterThan(150);
  });

  it('src/client imports the engine for its types only (swc, the cruiser\'s parser, does not tell type-only imports apart)', () => {
    const dir = new URL('../src/client/', import.meta.url);
    const values: string[] = [];
    for (const file of readdirSync(dir).filter((f) => f.endsWith('.ts'))) {
      const text = readFileSync(new URL(file, dir), 'utf8');
      for (const m of text.matchAll(/^(import|export)\s+(type\s+)?[^;]*?from\s+'([^']+)'/gms)) {
        const [, , type, specifier] = m;
        if (type === undefined && /^\.\.\/(ports|runtime)\//.test(specifier!)) values.push(`${file} -> ${specifier}`);
      }
    }
    expect(values).toEqual([]);
  });
});
