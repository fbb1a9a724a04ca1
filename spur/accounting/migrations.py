"""Versioned PostgreSQL schema of the accounting store.

Each migration is (version, description, SQL). The leader applies the missing ones in order, in one
transaction under a PostgreSQL advisory lock (:data:`MIGRATION_LOCK_KEY`), and records each in
``spur_schema_version``; a second migrator waits for the lock and then finds nothing left to do.
Never edit a released migration: append a new one.

Version 1 is the schema of the previous release (job rows with a few columns). Version 2 adds the
full record (JSON), the columns sacct filters on, step rows, hourly usage per association kept by a
trigger in the same transaction as the job row, and the indexes that keep ``sacct -S ... -u U``
fast over millions of rows.
"""

from __future__ import annotations

# pg_advisory_xact_lock key: "spur" in ASCII, then 1 (schema migrations).
MIGRATION_LOCK_KEY = 0x7370757201

SCHEMA_VERSION_TABLE = """
CREATE TABLE IF NOT EXISTS spur_schema_version (
    version     integer PRIMARY KEY,
    description text NOT NULL,
    applied_at  timestamptz NOT NULL DEFAULT now()
)
"""

V1 = """
CREATE TABLE spur_jobs (
    cluster_id  text NOT NULL,
    job_id      bigint NOT NULL,
    submit_time double precision NOT NULL,
    name        text NOT NULL DEFAULT '',
    user_name   text NOT NULL DEFAULT '',
    account     text NOT NULL DEFAULT '',
    partition   text NOT NULL DEFAULT '',
    state       text NOT NULL,
    exit_code   integer NOT NULL DEFAULT 0,
    start_time  double precision NOT NULL DEFAULT 0,
    end_time    double precision NOT NULL DEFAULT 0,
    nodelist    text NOT NULL DEFAULT '',
    cpus        integer NOT NULL DEFAULT 0,
    PRIMARY KEY (cluster_id, job_id, submit_time)
);
"""

V2 = """
ALTER TABLE spur_jobs
    ADD COLUMN array_job_id    bigint NOT NULL DEFAULT 0,
    ADD COLUMN array_task_id   bigint,
    ADD COLUMN uid             bigint NOT NULL DEFAULT 0,
    ADD COLUMN qos             text NOT NULL DEFAULT '',
    ADD COLUMN mem_mb          bigint NOT NULL DEFAULT 0,
    ADD COLUMN gpus            integer NOT NULL DEFAULT 0,
    ADD COLUMN time_limit_secs bigint NOT NULL DEFAULT -1,
    ADD COLUMN work_dir        text NOT NULL DEFAULT '',
    ADD COLUMN record          jsonb;

-- Rows written by version 1 get a record built from their columns, so sacct shows them too.
UPDATE spur_jobs SET record = jsonb_build_object(
    'job_id', job_id, 'user', user_name, 'state', state, 'exit_code', exit_code,
    'partition', partition, 'submit_time', submit_time, 'start_time', start_time,
    'end_time', end_time, 'time_limit_secs', -1,
    'spec', jsonb_build_object('name', name, 'account', account),
    'allocation', CASE WHEN nodelist = '' THEN '[]'::jsonb
                       ELSE jsonb_build_array(jsonb_build_object('node', nodelist, 'cpus', cpus)) END)
WHERE record IS NULL;
ALTER TABLE spur_jobs ALTER COLUMN record SET NOT NULL;

CREATE TABLE spur_steps (
    cluster_id  text NOT NULL,
    job_id      bigint NOT NULL,
    submit_time double precision NOT NULL,
    step_id     text NOT NULL,
    name        text NOT NULL DEFAULT '',
    state       text NOT NULL,
    exit_code   integer NOT NULL DEFAULT 0,
    start_time  double precision NOT NULL DEFAULT 0,
    end_time    double precision NOT NULL DEFAULT 0,
    cpus        integer NOT NULL DEFAULT 0,
    ntasks      integer NOT NULL DEFAULT 0,
    nodelist    text NOT NULL DEFAULT '',
    PRIMARY KEY (cluster_id, job_id, submit_time, step_id)
);

-- Usage per association (account, user) per hour: cpu-seconds and gpu-seconds of allocations.
CREATE TABLE spur_usage_hourly (
    cluster_id  text NOT NULL,
    account     text NOT NULL,
    user_name   text NOT NULL,
    hour        bigint NOT NULL,          -- unix time of the hour's start
    cpu_seconds double precision NOT NULL DEFAULT 0,
    gpu_seconds double precision NOT NULL DEFAULT 0,
    PRIMARY KEY (cluster_id, hour, account, user_name)
);

CREATE FUNCTION spur_add_usage(p_cluster text, p_account text, p_user text, p_start double precision,
                               p_end double precision, p_cpus integer, p_gpus integer, p_sign integer)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    h double precision;
    secs double precision;
BEGIN
    IF p_start <= 0 OR p_end <= p_start OR (p_cpus = 0 AND p_gpus = 0) THEN
        RETURN;
    END IF;
    h := floor(p_start / 3600) * 3600;
    WHILE h < p_end LOOP
        secs := least(h + 3600, p_end) - greatest(h, p_start);
        INSERT INTO spur_usage_hourly AS u (cluster_id, account, user_name, hour, cpu_seconds, gpu_seconds)
        VALUES (p_cluster, p_account, p_user, h::bigint, p_sign * secs * p_cpus, p_sign * secs * p_gpus)
        ON CONFLICT (cluster_id, hour, account, user_name) DO UPDATE
            SET cpu_seconds = u.cpu_seconds + EXCLUDED.cpu_seconds,
                gpu_seconds = u.gpu_seconds + EXCLUDED.gpu_seconds;
        h := h + 3600;
    END LOOP;
END $$;

-- Kept in the transaction that writes the job row; an update first takes back the old row's usage,
-- and an upsert that changes nothing (a re-sent record) fires nothing.
CREATE FUNCTION spur_jobs_usage() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' THEN
        PERFORM spur_add_usage(OLD.cluster_id, OLD.account, OLD.user_name, OLD.start_time,
                               OLD.end_time, OLD.cpus, OLD.gpus, -1);
    END IF;
    PERFORM spur_add_usage(NEW.cluster_id, NEW.account, NEW.user_name, NEW.start_time,
                           NEW.end_time, NEW.cpus, NEW.gpus, 1);
    RETURN NULL;
END $$;

SELECT spur_add_usage(cluster_id, account, user_name, start_time, end_time, cpus, gpus, 1) FROM spur_jobs;

CREATE TRIGGER spur_jobs_usage AFTER INSERT OR UPDATE ON spur_jobs
    FOR EACH ROW EXECUTE FUNCTION spur_jobs_usage();

CREATE INDEX spur_jobs_user_end ON spur_jobs (cluster_id, user_name, end_time);
CREATE INDEX spur_jobs_account_end ON spur_jobs (cluster_id, account, end_time);
CREATE INDEX spur_jobs_end ON spur_jobs (cluster_id, end_time);
CREATE INDEX spur_jobs_array ON spur_jobs (cluster_id, array_job_id) WHERE array_job_id > 0;
"""

MIGRATIONS: list[tuple[int, str, str]] = [
    (1, "job rows", V1),
    (2, "full records, steps, hourly usage, sacct indexes", V2),
]

LATEST = MIGRATIONS[-1][0]
