"""`evalbook import`: turn another tool's finished run into definitions, an evaluation, its cases
and a report. Readers (one module a tool) stream the tool's file as `Record`s; `plan` turns them
into content-addressed definitions and cases; `run` sends them through `app.cli.client`.

The mapping of each format is documented in docs/importing.md."""
