"""What several test directories share: database probes (dbprobe), polling, seeded jobs (seeds), client
fixtures (clients), API apps built once per test process (apps), `chokaq` in-process and served (cli, served)
and the end-to-end handlers.

The tests are filed by subject: tests/api (HTTP API), tests/cli (the `chokaq` command), tests/client
(connect(), DbClient, HttpClient), tests/analysis (frames, plans, notebooks), tests/core (filters,
settings, fingerprints, redaction), tests/storage, tests/engine, tests/deck (The Deck) and tests/crash
(real processes killed and faulted; marked slow).
"""
