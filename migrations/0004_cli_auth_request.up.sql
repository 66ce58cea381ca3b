-- CLI auth challenges keep what the reference product's CLI sends with them: the command
-- line being authorised, the access it asks for and an optional company, all shown to the
-- approver.
ALTER TABLE kernel.cli_auth_challenges
    ADD COLUMN command               text NOT NULL DEFAULT '',
    ADD COLUMN requested_access      text NOT NULL DEFAULT 'board',
    ADD COLUMN requested_company_id  uuid;
