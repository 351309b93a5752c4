"""dyno-cli subcommands, one module each (modules starting with '_' are helpers)."""
