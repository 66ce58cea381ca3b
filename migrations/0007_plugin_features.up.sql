-- What installed plugins offer beyond routes: webhook deliveries, job run history and
-- per-company local folder paths. Rows follow their extension's registry row.

CREATE TABLE kernel.plugin_webhook_deliveries (
    id            uuid PRIMARY KEY,
    extension_key text NOT NULL REFERENCES kernel.extensions (key) ON DELETE CASCADE ON UPDATE CASCADE,
    endpoint_key  text NOT NULL,
    status        text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'success', 'failed')),
    request_id    text NOT NULL DEFAULT '',
    body_bytes    integer NOT NULL DEFAULT 0,
    duration_ms   integer,
    error         text,
    started_at    timestamptz NOT NULL DEFAULT now(),
    finished_at   timestamptz,
    created_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX plugin_webhook_deliveries_recent ON kernel.plugin_webhook_deliveries (extension_key, created_at DESC);

CREATE TABLE kernel.plugin_job_runs (
    id            uuid PRIMARY KEY,
    extension_key text NOT NULL REFERENCES kernel.extensions (key) ON DELETE CASCADE ON UPDATE CASCADE,
    job_key       text NOT NULL,
    -- queue_job_id is the job queue's id of the run: one row per queued job, its attempts counted.
    queue_job_id  bigint UNIQUE,
    trigger       text NOT NULL CHECK (trigger IN ('schedule', 'manual', 'enqueue')),
    status        text NOT NULL CHECK (status IN ('queued', 'running', 'succeeded', 'failed')),
    attempts      integer NOT NULL DEFAULT 0,
    duration_ms   integer,
    error         text,
    started_at    timestamptz,
    finished_at   timestamptz,
    created_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX plugin_job_runs_recent ON kernel.plugin_job_runs (extension_key, job_key, created_at DESC);
CREATE INDEX plugin_job_runs_extension_recent ON kernel.plugin_job_runs (extension_key, created_at DESC);

CREATE TABLE kernel.plugin_local_folders (
    extension_key text NOT NULL REFERENCES kernel.extensions (key) ON DELETE CASCADE ON UPDATE CASCADE,
    company_id    uuid NOT NULL REFERENCES kernel.companies (id) ON DELETE CASCADE,
    folder_key    text NOT NULL,
    path          text NOT NULL,
    real_path     text NOT NULL DEFAULT '',
    healthy       boolean NOT NULL DEFAULT false,
    last_error    text,
    updated_by    text NOT NULL DEFAULT '',
    updated_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (extension_key, company_id, folder_key)
);
