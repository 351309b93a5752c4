"""The parts of bench/daemon_soak.py: the dynod under soak, the load drivers, and what is measured of it."""
