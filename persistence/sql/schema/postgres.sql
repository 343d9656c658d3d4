-- The postgres schema as persistence/sql/migrations/postgres produce it (schema version 8).
-- Written by `npm run schema:dump`; test/schemaDump tests fail when it drifts from the migrations.

CREATE TABLE assets (
  job_id text NOT NULL,
  key text NOT NULL,
  type text NOT NULL,
  uri text NOT NULL,
  size bigint,
  meta text,
  effect_id text,
  attempt bigint,
  created_at bigint NOT NULL,
  CONSTRAINT assets_job_id_fkey FOREIGN KEY (job_id) REFERENCES jobs(id) ON DELETE CASCADE,
  CONSTRAINT assets_pkey PRIMARY KEY (job_id, key)
);

CREATE TABLE effect_attempts (
  effect_id text NOT NULL,
  attempt integer NOT NULL,
  runner text,
  started_at bigint NOT NULL,
  ended_at bigint,
  outcome text NOT NULL,
  error text,
  CONSTRAINT effect_attempts_outcome_check CHECK ((outcome = ANY (ARRAY['running'::text, 'succeeded'::text, 'failed'::text, 'waiting'::text, 'interrupted'::text, 'stale'::text]))),
  CONSTRAINT effect_attempts_effect_id_fkey FOREIGN KEY (effect_id) REFERENCES effects(id) ON DELETE CASCADE,
  CONSTRAINT effect_attempts_pkey PRIMARY KEY (effect_id, attempt)
);

CREATE TABLE effects (
  id text NOT NULL,
  job_id text NOT NULL,
  actor_id text NOT NULL,
  src text NOT NULL,
  kind text NOT NULL DEFAULT 'activity'::text,
  input text NOT NULL,
  status text NOT NULL,
  active integer NOT NULL,
  attempt integer NOT NULL DEFAULT 0,
  max_attempts integer NOT NULL,
  unsafe integer NOT NULL DEFAULT 0,
  next_run_at bigint,
  claimed_by text,
  claim_expires_at bigint,
  token text,
  output text,
  error text,
  created_revision bigint NOT NULL,
  created_at bigint NOT NULL,
  updated_at bigint NOT NULL,
  rowid bigint NOT NULL,
  attempt_runner text,
  attempt_started_at bigint,
  attempt_ended_at bigint,
  attempt_outcome text,
  attempt_error text,
  CONSTRAINT effects_kind_check CHECK ((kind = ANY (ARRAY['activity'::text, 'child'::text]))),
  CONSTRAINT effects_status_check CHECK ((status = ANY (ARRAY['pending'::text, 'running'::text, 'waiting'::text, 'backoff'::text, 'succeeded'::text, 'failed'::text, 'cancelled'::text]))),
  CONSTRAINT effects_job_id_fkey FOREIGN KEY (job_id) REFERENCES jobs(id) ON DELETE CASCADE,
  CONSTRAINT effects_pkey PRIMARY KEY (id),
  CONSTRAINT effects_rowid_key UNIQUE (rowid)
);

CREATE TABLE event_keys (
  job_id text NOT NULL,
  event_id text NOT NULL,
  revision bigint,
  CONSTRAINT event_keys_job_id_fkey FOREIGN KEY (job_id) REFERENCES jobs(id) ON DELETE CASCADE,
  CONSTRAINT event_keys_pkey PRIMARY KEY (job_id, event_id)
);

CREATE TABLE history_feed_head (
  id integer NOT NULL,
  pos bigint NOT NULL,
  CONSTRAINT history_feed_head_id_check CHECK ((id = 1)),
  CONSTRAINT history_feed_head_pkey PRIMARY KEY (id)
);

CREATE TABLE inbox (
  seq bigint NOT NULL,
  job_id text NOT NULL,
  event_id text NOT NULL,
  type text NOT NULL,
  payload text NOT NULL,
  payload_hash text NOT NULL,
  status text NOT NULL,
  source_kind text NOT NULL DEFAULT 'external'::text,
  source_id text,
  attempt bigint,
  error text,
  revision bigint,
  accepted_at bigint NOT NULL,
  processed_at bigint,
  CONSTRAINT inbox_source_kind_check CHECK ((source_kind = ANY (ARRAY['external'::text, 'timer'::text, 'effect'::text, 'self'::text, 'cancel'::text, 'parent'::text, 'child'::text]))),
  CONSTRAINT inbox_status_check CHECK ((status = ANY (ARRAY['pending'::text, 'applied'::text, 'ignored'::text, 'failed'::text, 'rejected'::text, 'stale'::text]))),
  CONSTRAINT inbox_job_id_fkey FOREIGN KEY (job_id) REFERENCES jobs(id) ON DELETE CASCADE,
  CONSTRAINT inbox_pkey PRIMARY KEY (seq),
  CONSTRAINT inbox_job_id_event_id_key UNIQUE (job_id, event_id)
);

CREATE TABLE jobs (
  id text NOT NULL,
  machine_id text NOT NULL,
  machine_version text NOT NULL,
  revision bigint NOT NULL,
  status text NOT NULL,
  state_value text NOT NULL,
  state_paths text NOT NULL,
  context text NOT NULL,
  snapshot text NOT NULL,
  input text NOT NULL,
  input_hash text NOT NULL,
  idempotency_key text,
  owner text NOT NULL DEFAULT ''::text,
  quarantine text,
  progress double precision,
  cancel_requested_at bigint,
  cancel_reason text,
  parent_job_id text,
  parent_effect_id text,
  created_at bigint NOT NULL,
  updated_at bigint NOT NULL,
  suspended_at bigint,
  suspend_reason text,
  lease_owner text,
  lease_fence bigint NOT NULL DEFAULT 0,
  lease_until bigint,
  CONSTRAINT jobs_revision_check CHECK ((revision >= 1)),
  CONSTRAINT jobs_status_check CHECK ((status = ANY (ARRAY['active'::text, 'done'::text, 'error'::text, 'stopped'::text]))),
  CONSTRAINT jobs_pkey PRIMARY KEY (id)
);

CREATE TABLE notes (
  id bigint NOT NULL,
  job_id text NOT NULL,
  kind text NOT NULL,
  message text NOT NULL,
  at bigint NOT NULL,
  CONSTRAINT notes_job_id_fkey FOREIGN KEY (job_id) REFERENCES jobs(id) ON DELETE CASCADE,
  CONSTRAINT notes_pkey PRIMARY KEY (id)
);

CREATE TABLE schedule_occurrences (
  schedule_id text NOT NULL,
  due_at bigint NOT NULL,
  outcome text NOT NULL,
  job_id text,
  reason text,
  at bigint NOT NULL,
  CONSTRAINT schedule_occurrences_outcome_check CHECK ((outcome = ANY (ARRAY['started'::text, 'skipped'::text, 'failed'::text]))),
  CONSTRAINT schedule_occurrences_schedule_id_due_at_key UNIQUE (schedule_id, due_at)
);

CREATE TABLE schedules (
  id text NOT NULL,
  owner text NOT NULL DEFAULT ''::text,
  machine_id text NOT NULL,
  input text NOT NULL,
  cron text,
  timezone text,
  every_ms bigint,
  overlap text NOT NULL,
  catch_up text NOT NULL,
  grace_ms bigint NOT NULL,
  start_at bigint,
  next_due_at bigint,
  buffered_due_at bigint,
  last_due_at bigint,
  last_job_id text,
  missed bigint NOT NULL DEFAULT 0,
  revision bigint NOT NULL,
  created_at bigint NOT NULL,
  updated_at bigint NOT NULL,
  CONSTRAINT schedules_check CHECK (((cron IS NULL) <> (every_ms IS NULL))),
  CONSTRAINT schedules_every_ms_check CHECK (((every_ms IS NULL) OR (every_ms > 0))),
  CONSTRAINT schedules_grace_ms_check CHECK ((grace_ms >= 0)),
  CONSTRAINT schedules_overlap_check CHECK ((overlap = ANY (ARRAY['skip'::text, 'buffer-one'::text, 'allow-all'::text, 'cancel-previous'::text]))),
  CONSTRAINT schedules_revision_check CHECK ((revision >= 1)),
  CONSTRAINT schedules_pkey PRIMARY KEY (id)
);

CREATE TABLE spool_migrations (
  version integer NOT NULL,
  name text NOT NULL,
  applied_at bigint NOT NULL,
  CONSTRAINT spool_migrations_pkey PRIMARY KEY (version)
);

CREATE TABLE timers (
  id text NOT NULL,
  job_id text NOT NULL,
  key text NOT NULL,
  kind text NOT NULL,
  event text NOT NULL,
  due_at bigint NOT NULL,
  status text NOT NULL,
  created_revision bigint NOT NULL,
  created_at bigint NOT NULL,
  CONSTRAINT timers_kind_check CHECK ((kind = ANY (ARRAY['after'::text, 'raise'::text, 'sendTo'::text]))),
  CONSTRAINT timers_status_check CHECK ((status = ANY (ARRAY['scheduled'::text, 'fired'::text, 'delivered'::text, 'cancelled'::text]))),
  CONSTRAINT timers_job_id_fkey FOREIGN KEY (job_id) REFERENCES jobs(id) ON DELETE CASCADE,
  CONSTRAINT timers_pkey PRIMARY KEY (id)
);

CREATE TABLE transitions (
  seq bigint NOT NULL,
  job_id text NOT NULL,
  revision bigint NOT NULL,
  event_id text,
  event_type text NOT NULL,
  payload text NOT NULL,
  from_value text,
  to_value text NOT NULL,
  outcome text NOT NULL,
  error text,
  at bigint NOT NULL,
  runner text,
  fence bigint,
  payload_hash text,
  event_keyed bigint,
  feed_pos bigint,
  source_kind text,
  source_id text,
  attempt bigint,
  CONSTRAINT transitions_outcome_check CHECK ((outcome = ANY (ARRAY['started'::text, 'applied'::text, 'ignored'::text, 'failed'::text, 'migrated'::text, 'stale'::text]))),
  CONSTRAINT transitions_job_id_fkey FOREIGN KEY (job_id) REFERENCES jobs(id) ON DELETE CASCADE,
  CONSTRAINT transitions_pkey PRIMARY KEY (seq),
  CONSTRAINT transitions_job_id_revision_key UNIQUE (job_id, revision)
);

CREATE VIEW attempts AS
 SELECT a.effect_id,
    a.attempt,
    a.runner,
    a.started_at,
    a.ended_at,
    a.outcome,
    a.error,
    e.job_id
   FROM (effect_attempts a
     JOIN effects e ON ((e.id = a.effect_id)))
UNION ALL
 SELECT effects.id AS effect_id,
    effects.attempt,
    effects.attempt_runner AS runner,
    effects.attempt_started_at AS started_at,
    effects.attempt_ended_at AS ended_at,
    COALESCE(effects.attempt_outcome, 'running'::text) AS outcome,
    effects.attempt_error AS error,
    effects.job_id
   FROM effects
  WHERE (effects.attempt_started_at IS NOT NULL);

CREATE INDEX effects_due ON public.effects USING btree (status, next_run_at, rowid) WHERE (active = 1);

CREATE INDEX effects_job ON public.effects USING btree (job_id, actor_id);

CREATE INDEX effects_pending ON public.effects USING btree (src, created_at, rowid) WHERE ((active = 1) AND (status = 'pending'::text));

CREATE SEQUENCE effects_rowid_seq;

CREATE UNIQUE INDEX effects_token ON public.effects USING btree (token) WHERE (token IS NOT NULL);

CREATE VIEW events AS
 SELECT inbox.seq,
    inbox.job_id,
    inbox.event_id,
    inbox.type,
    inbox.payload,
    inbox.payload_hash,
    inbox.status,
    inbox.source_kind,
    inbox.source_id,
    inbox.attempt,
    inbox.error,
    inbox.revision,
    inbox.accepted_at,
    inbox.processed_at
   FROM inbox
UNION ALL
 SELECT NULL::bigint AS seq,
    transitions.job_id,
    transitions.event_id,
    transitions.event_type AS type,
    transitions.payload,
    transitions.payload_hash,
    transitions.outcome AS status,
    COALESCE(transitions.source_kind, 'external'::text) AS source_kind,
    transitions.source_id,
    transitions.attempt,
    transitions.error,
    transitions.revision,
    transitions.at AS accepted_at,
    transitions.at AS processed_at
   FROM transitions
  WHERE (transitions.payload_hash IS NOT NULL);

CREATE INDEX inbox_pending ON public.inbox USING btree (job_id, seq) WHERE (status = 'pending'::text);

CREATE SEQUENCE inbox_seq_seq;

CREATE INDEX jobs_active_children ON public.jobs USING btree (id) WHERE ((status = 'active'::text) AND (parent_job_id IS NOT NULL));

CREATE INDEX jobs_active_versions ON public.jobs USING btree (owner, machine_id, machine_version) WHERE (status = 'active'::text);

CREATE INDEX jobs_finished ON public.jobs USING btree (updated_at) WHERE (status <> 'active'::text);

CREATE UNIQUE INDEX jobs_idempotency ON public.jobs USING btree (owner, idempotency_key) WHERE (idempotency_key IS NOT NULL);

CREATE INDEX jobs_lease ON public.jobs USING btree (lease_owner, lease_until) WHERE (lease_owner IS NOT NULL);

CREATE INDEX jobs_machine ON public.jobs USING btree (machine_id, machine_version);

CREATE INDEX jobs_quarantined ON public.jobs USING btree (id) WHERE (quarantine IS NOT NULL);

CREATE INDEX jobs_status ON public.jobs USING btree (status, id);

CREATE INDEX jobs_suspended ON public.jobs USING btree (id) WHERE (suspended_at IS NOT NULL);

CREATE SEQUENCE notes_id_seq;

CREATE INDEX notes_job ON public.notes USING btree (job_id, id);

CREATE INDEX schedules_buffered ON public.schedules USING btree (owner) WHERE (buffered_due_at IS NOT NULL);

CREATE INDEX schedules_due ON public.schedules USING btree (owner, next_due_at) WHERE (next_due_at IS NOT NULL);

CREATE OR REPLACE FUNCTION public.spool_expect(ok boolean)
 RETURNS boolean
 LANGUAGE plpgsql
AS $function$
BEGIN
  IF ok IS NOT TRUE THEN
    RAISE EXCEPTION 'spool: a commit sent ahead of its answers found the job not as it expected; it runs again'
      USING ERRCODE = 'SPX01';
  END IF;
  RETURN TRUE;
END
$function$;

CREATE INDEX timers_due ON public.timers USING btree (due_at) WHERE (status = 'scheduled'::text);

CREATE INDEX timers_job ON public.timers USING btree (job_id, key);

CREATE UNIQUE INDEX transitions_feed_pos ON public.transitions USING btree (feed_pos) WHERE (feed_pos IS NOT NULL);

CREATE SEQUENCE transitions_seq;

CREATE INDEX transitions_unsequenced ON public.transitions USING btree (seq) WHERE (feed_pos IS NULL);
