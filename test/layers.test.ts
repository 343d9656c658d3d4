/**
 * The tree's layers (.dependency-cruiser.cjs): no import cycle, type-only imports included, and
 * base/ and ports/ below step/, step/ below runtime/.
 */
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
});
