"""The `evalbook` command: every subcommand, the HTTP client, the gate and the importers."""
