"""Running briefd: the CLI, the daemon (worker), the HTTP API, status, checks, actions, and `briefd eval`."""
