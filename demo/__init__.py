"""The one-host demo (`python -m dyno.demo`, run by scripts/demo.sh): the top layer, above dyno.daemon and
dyno.client, because it starts a dynod and runs dyno-cli and dyno-run (docs/ARCHITECTURE.md, "Import layers")."""
