"""Client side: DynoClient (one host), Cluster (many), dyno-cli, the trainer agent."""
