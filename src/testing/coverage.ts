import type { StaticTransition } from './transitions.ts';

/**
 * A transition left uncovered on purpose, with the reason. Fields left out match anything;
 * `source` and `target` take a full state id (`approval-flow.pending`) or the id without the
 * machine id (`pending`); `guard: null` matches only the unguarded candidate.
 *
 * @example
 * { source: 'processing', event: 'ITEM_DONE', guard: 'itemsLeft', reason: 'unreachable once every item is counted' }
 * { transition: 'job.ready always #2', reason: 'a legacy branch kept for old snapshots' }
 */
export interface Waiver {
  /** A transition id or label exactly as the coverage report prints it. */
  transition?: string;
  source?: string;
  event?: string;
  guard?: string | null;
  target?: string;
  /** Why it is fine to leave it uncovered. Required. */
  reason: string;
}

/** One transition of the machine and whether the generated paths take it. */
export interface CoverageEntry extends StaticTransition {
  covered: boolean;
  /** The waiver that excuses it, when uncovered and waived. */
  waived: string | null;
  /** Why path generation could not take it, when known (an event that failed, no sample…). */
  note: string | null;
}

/** An uncovered transition, exactly: where, on what, under which guard, to where. */
export interface CoverageGap {
  id: string;
  label: string;
  source: string;
  event: string;
  guard: string | null;
  targets: string[];
  note: string | null;
}

export interface CoverageReport {
  machineId: string;
  transitions: CoverageEntry[];
  /** Transitions taken by at least one path. */
  covered: number;
  /** Uncovered, excused by a waiver. */
  waived: number;
  /** Uncovered and not waived: what `assertCoverage` fails on. */
  gaps: CoverageGap[];
  /** Waivers that excuse nothing (the transition is covered, or does not exist): remove them. */
  unusedWaivers: Waiver[];
}

/**
 * Mark each static transition covered or not, and apply the waivers. `rootId` is the id of the
 * machine's root state node, which short state ids in waivers are relative to (default
 * `machineId`; a child machine registered as `<parent id>.<src>` has its own).
 */
export function coverageReport(
  machineId: string,
  transitions: readonly StaticTransition[],
  covered: ReadonlySet<string>,
  waivers: readonly Waiver[] = [],
  notes: ReadonlyMap<string, string> = new Map(),
  rootId: string = machineId,
): CoverageReport {
  for (const w of waivers) {
    if (typeof w.reason !== 'string' || w.reason.trim().length === 0) {
      throw new TypeError(`A coverage waiver needs a reason: ${JSON.stringify(w)}.`);
    }
  }
  const used = new Set<Waiver>();
  const entries: CoverageEntry[] = transitions.map((t) => {
    const isCovered = covered.has(t.id);
    const matching = waivers.filter((w) => matches(w, t, rootId));
    matching.forEach((w) => {
      if (!isCovered) used.add(w);
    });
    const waiver = isCovered ? undefined : matching[0];
    return { ...t, covered: isCovered, waived: waiver ? waiver.reason : null, note: isCovered ? null : (notes.get(t.id) ?? null) };
  });
  const gaps = entries
    .filter((e) => !e.covered && e.waived === null)
    .map((e) => ({ id: e.id, label: e.label, source: e.source, event: e.event, guard: e.guard, targets: e.targets, note: e.note }));
  return {
    machineId,
    transitions: entries,
    covered: entries.filter((e) => e.covered).length,
    waived: entries.filter((e) => !e.covered && e.waived !== null).length,
    gaps,
    unusedWaivers: waivers.filter((w) => !used.has(w)),
  };
}

function matches(w: Waiver, t: StaticTransition, rootId: string): boolean {
  const sameNode = (given: string, id: string) => given === id || `${rootId}.${given}` === id || (given === rootId && id === rootId);
  if (w.transition !== undefined && w.transition !== t.id && w.transition !== t.label) return false;
  if (w.source !== undefined && !sameNode(w.source, t.source)) return false;
  if (w.event !== undefined && w.event !== t.event) return false;
  if (w.guard !== undefined && w.guard !== t.guard) return false;
  if (w.target !== undefined && !t.targets.some((id) => sameNode(w.target!, id))) return false;
  return w.transition !== undefined || w.source !== undefined || w.event !== undefined || w.guard !== undefined || w.target !== undefined;
}

/** The check of a coverage report: lists every gap (state, event, guard, target) exactly. */
export class CoverageError extends Error {
  override name = 'CoverageError';
  readonly code = 'SPOOL_COVERAGE_GAPS';
  readonly report: CoverageReport;
  constructor(report: CoverageReport) {
    const lines = report.gaps.map(
      (g) =>
        `  - state ${g.source}, event ${g.event}, guard ${g.guard ?? '(none)'}, target ${g.targets.length ? g.targets.join(', ') : '(none: actions only)'}` +
        (g.note ? `\n      ${g.note}` : ''),
    );
    const unused = report.unusedWaivers.map((w) => `  - ${JSON.stringify(w)}`);
    super(
      [
        report.gaps.length > 0
          ? `${report.gaps.length} of ${report.transitions.length} transitions of ${report.machineId} are not covered by any generated path:\n${lines.join('\n')}\n` +
            'Add event samples (or outputs/errors of activities, or another input) that reach them, or waive each with a reason.'
          : '',
        unused.length > 0 ? `Waivers that excuse no uncovered transition (remove them):\n${unused.join('\n')}` : '',
      ]
        .filter(Boolean)
        .join('\n'),
    );
    this.report = report;
  }
}

/**
 * Throw a {@link CoverageError} unless every transition is covered or waived (and every waiver
 * is still needed).
 *
 * @example
 * assertCoverage(generatePaths(approvalFlow, { events }).coverage);
 */
export function assertCoverage(report: CoverageReport): void {
  if (report.gaps.length > 0 || report.unusedWaivers.length > 0) throw new CoverageError(report);
}
