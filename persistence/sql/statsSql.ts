import { exhausted, stuck, type SqlDialect } from './predicates.ts';

/** `stats`: aggregates over the tables for one owner (`@all = 1`: every owner) at `@now`. */
export function statsSql(d: SqlDialect) {
  const q = (text: string): string => text;
  const EXHAUSTED = exhausted(d);
  const STUCK = stuck(d);
  const scope = '(@all = 1 OR jobs.owner = @owner)';
  return {
    statsJobs: q(`SELECT machine_id, machine_version, status, state_value, count(*) AS n FROM jobs WHERE ${scope}
      GROUP BY machine_id, machine_version, status, state_value ORDER BY machine_id, machine_version, status, state_value`),
    // Each job count uses exactly the condition of its `listJobs` filter (whatever the job's
    // status), so a count always equals the length of the list it summarises.
    statsCounts: q(`SELECT
        count(*) FILTER (WHERE quarantine IS NOT NULL) AS quarantined,
        count(*) FILTER (WHERE suspended_at IS NOT NULL) AS suspended,
        count(*) FILTER (WHERE cancel_requested_at IS NOT NULL) AS cancel_requested,
        count(*) FILTER (WHERE ${EXHAUSTED}) AS exhausted,
        count(*) FILTER (WHERE ${STUCK}) AS idle
      FROM jobs WHERE ${scope}`),
    // The oldest pending event counts held ones too: an event waiting on a suspension is still waiting.
    statsBacklog: q(`SELECT count(*) AS events, count(DISTINCT i.job_id) AS jobs,
        count(*) FILTER (WHERE jobs.suspended_at IS NOT NULL OR jobs.quarantine IS NOT NULL) AS held,
        min(i.accepted_at) AS oldest
      FROM inbox i JOIN jobs ON jobs.id = i.job_id WHERE i.status = 'pending' AND ${scope}`),
    statsTimers: q(`SELECT count(*) AS scheduled,
        count(*) FILTER (WHERE t.due_at <= @now AND jobs.suspended_at IS NULL) AS due,
        count(*) FILTER (WHERE t.due_at <= @now AND jobs.suspended_at IS NOT NULL) AS held,
        min(t.due_at) FILTER (WHERE t.due_at <= @now AND jobs.suspended_at IS NULL) AS oldest
      FROM timers t JOIN jobs ON jobs.id = t.job_id WHERE t.status = 'scheduled' AND ${scope}`),
    statsEffects: q(`SELECT e.src, count(*) AS effects, count(*) FILTER (WHERE e.status = 'failed') AS failed
      FROM effects e JOIN jobs ON jobs.id = e.job_id WHERE ${scope} GROUP BY e.src`),
    statsAttempts: q(`SELECT e.src, a.outcome, count(*) AS n
      FROM attempts a JOIN effects e ON e.id = a.effect_id JOIN jobs ON jobs.id = e.job_id WHERE ${scope} GROUP BY e.src, a.outcome`),
    statsLeases: q(`SELECT lease_owner, count(*) AS n, min(lease_until) AS until FROM jobs
      WHERE lease_owner IS NOT NULL AND lease_until > ${d.leaseNow} AND ${scope} GROUP BY lease_owner ORDER BY lease_owner`),
    // `expired`: by the store's lease clock (the claim's own clock), at the caller's `@now` when that is it.
    statsRunning: q(`SELECT e.id, e.job_id, e.src, e.attempt, e.claimed_by, e.claim_expires_at,
        CASE WHEN e.claim_expires_at <= ${d.leaseNow} THEN 1 ELSE 0 END AS expired
      FROM effects e JOIN jobs ON jobs.id = e.job_id WHERE e.active = 1 AND e.status = 'running' AND ${scope} ORDER BY e.id`),
  };
}
